/* Certificate lifecycle in common/net/certs.c: CRL creation and signing, revocation
 * (checked with X509_verify_cert + X509_V_FLAG_CRL_CHECK), idempotence, CRL number,
 * refusals (unknown name, foreign or broken crl.pem), renewal keeping the old pair. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/net/certs.h"

typedef struct fixture {
    char dir[64], other[64];
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/fk-crl-XXXXXX");
    snprintf(f->other, sizeof f->other, "/tmp/fk-crl2-XXXXXX");
    if (!f || !mkdtemp(f->dir) || !mkdtemp(f->other))
        return -1;
    /* fk_certs_init_ca wants to create the directory itself */
    rmdir(f->dir);
    rmdir(f->other);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", f->dir, f->other);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

static void *read_pem(const char *dir, const char *file, int crl)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    void *x = crl ? (void *)PEM_read_X509_CRL(fp, NULL, NULL, NULL) : (void *)PEM_read_X509(fp, NULL, NULL, NULL);
    fclose(fp);
    assert_non_null(x);
    return x;
}

/* X509_verify_cert of leaf against the CA and the directory's CRL. */
static int verify_with_crl(const char *dir, const char *leaf_file)
{
    X509 *ca = read_pem(dir, "ca.pem", 0), *leaf = read_pem(dir, leaf_file, 0);
    X509_CRL *crl = read_pem(dir, "crl.pem", 1);
    X509_STORE *st = X509_STORE_new();
    X509_STORE_add_cert(st, ca);
    X509_STORE_add_crl(st, crl);
    X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, st, leaf, NULL);
    int code = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    X509_CRL_free(crl);
    X509_free(leaf);
    X509_free(ca);
    return code;
}

static long crl_number(const char *dir, int *n_revoked)
{
    X509_CRL *c = read_pem(dir, "crl.pem", 1);
    ASN1_INTEGER *num = X509_CRL_get_ext_d2i(c, NID_crl_number, NULL, NULL);
    long v = num ? ASN1_INTEGER_get(num) : -1;
    STACK_OF(X509_REVOKED) *r = X509_CRL_get_REVOKED(c);
    *n_revoked = r ? sk_X509_REVOKED_num(r) : 0;
    ASN1_INTEGER_free(num);
    X509_CRL_free(c);
    return v;
}

static void revoke_and_check(void **state)
{
    fixture *f = *state;
    fk_err err = {0};
    fk_cert_opts o = {0};
    assert_int_equal(fk_certs_init_ca(f->dir, NULL, &o, &err), FK_OK);
    assert_int_equal(fk_certs_issue(f->dir, FK_ROLE_CLIENT, "alice", &o, &err), FK_OK);
    assert_int_equal(fk_certs_issue(f->dir, FK_ROLE_CLIENT, "bob", &o, &err), FK_OK);
    assert_int_equal(fk_certs_crl(f->dir, 0, &err), FK_OK);
    int n;
    assert_int_equal(crl_number(f->dir, &n), 1);
    assert_int_equal(n, 0);
    assert_int_equal(verify_with_crl(f->dir, "client-alice.pem"), X509_V_OK);

    int added = -1;
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_CLIENT, "alice", 30, &added, &err), FK_OK);
    assert_int_equal(added, 1);
    assert_int_equal(verify_with_crl(f->dir, "client-alice.pem"), X509_V_ERR_CERT_REVOKED);
    assert_int_equal(verify_with_crl(f->dir, "client-bob.pem"), X509_V_OK);
    assert_int_equal(crl_number(f->dir, &n), 2);
    assert_int_equal(n, 1);
    /* again: nothing added, still one entry, re-signed */
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_CLIENT, "alice", 30, &added, &err), FK_OK);
    assert_int_equal(added, 0);
    assert_int_equal(crl_number(f->dir, &n), 3);
    assert_int_equal(n, 1);
    /* re-signing keeps the entries */
    assert_int_equal(fk_certs_crl(f->dir, 10, &err), FK_OK);
    assert_int_equal(verify_with_crl(f->dir, "client-alice.pem"), X509_V_ERR_CERT_REVOKED);

    assert_int_equal(fk_certs_find_role(f->dir, "alice"), FK_ROLE_CLIENT);
    assert_int_equal(fk_certs_find_role(f->dir, "carol"), FK_ROLE_NONE);
    assert_int_equal(fk_certs_issue(f->dir, FK_ROLE_ADMIN, "bob", &o, &err), FK_OK);
    assert_int_equal(fk_certs_find_role(f->dir, "bob"), -1);
}

static void refusals(void **state)
{
    fixture *f = *state;
    fk_err err = {0};
    fk_cert_opts o = {0};
    int added;
    assert_int_equal(fk_certs_init_ca(f->dir, NULL, &o, &err), FK_OK);
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_CLIENT, "nobody", 0, &added, &err), FK_ENOTFOUND);
    assert_non_null(strstr(err.msg, "client-nobody.pem"));
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_CLIENT, "../x", 0, &added, &err), FK_EINVAL);
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_NONE, "alice", 0, &added, &err), FK_EINVAL);
    assert_int_equal(fk_certs_renew(f->dir, FK_ROLE_CLIENT, "nobody", &o, &err), FK_ENOTFOUND);
    assert_int_equal(access("/nonexistent-fk/ca.pem", F_OK), -1);
    assert_int_not_equal(fk_certs_crl("/nonexistent-fk", 0, &err), FK_OK);

    /* a CRL signed by another CA is refused and left alone */
    assert_int_equal(fk_certs_init_ca(f->other, "other CA", &o, &err), FK_OK);
    assert_int_equal(fk_certs_crl(f->other, 0, &err), FK_OK);
    char a[256], b[256], cmd[600];
    snprintf(a, sizeof a, "%s/crl.pem", f->other);
    snprintf(b, sizeof b, "%s/crl.pem", f->dir);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", a, b);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(fk_certs_crl(f->dir, 0, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "not signed by this directory's CA"));
    /* a certificate of another CA cannot be revoked here */
    assert_int_equal(fk_certs_issue(f->other, FK_ROLE_CLIENT, "eve", &o, &err), FK_OK);
    unlink(b);
    snprintf(cmd, sizeof cmd, "cp '%s/client-eve.pem' '%s/'", f->other, f->dir);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_CLIENT, "eve", 0, &added, &err), FK_EINVAL);
    assert_int_equal(access(b, F_OK), -1);
    /* garbage in crl.pem */
    FILE *fp = fopen(b, "w");
    assert_non_null(fp);
    fputs("-----BEGIN X509 CRL-----\nnot base64 at all\n-----END X509 CRL-----\n", fp);
    fclose(fp);
    assert_int_equal(fk_certs_crl(f->dir, 0, &err), FK_EFORMAT);
}

static void renew_keeps_old_pair(void **state)
{
    fixture *f = *state;
    fk_err err = {0};
    fk_cert_opts o = {.dns = "fl.example.org", .ips = "127.0.0.1"};
    fk_cert_opts none = {0};
    assert_int_equal(fk_certs_init_ca(f->dir, NULL, &none, &err), FK_OK);
    assert_int_equal(fk_certs_issue(f->dir, FK_ROLE_SERVER, "fl", &o, &err), FK_OK);
    X509 *old = read_pem(f->dir, "server-fl.pem", 0);
    assert_int_equal(fk_certs_renew(f->dir, FK_ROLE_SERVER, "fl", &o, &err), FK_OK);
    X509 *renewed = read_pem(f->dir, "server-fl.pem", 0), *kept = read_pem(f->dir, "server-fl.pem.old", 0);
    assert_int_not_equal(ASN1_INTEGER_cmp(X509_get0_serialNumber(old), X509_get0_serialNumber(renewed)), 0);
    assert_int_equal(X509_cmp(old, kept), 0);
    char key_old[256];
    snprintf(key_old, sizeof key_old, "%s/server-fl.key.old", f->dir);
    assert_int_equal(access(key_old, F_OK), 0);
    /* revoking the renewed one leaves the old pair's serial out of the CRL */
    int added;
    assert_int_equal(fk_certs_revoke(f->dir, FK_ROLE_SERVER, "fl", 0, &added, &err), FK_OK);
    assert_int_equal(verify_with_crl(f->dir, "server-fl.pem"), X509_V_ERR_CERT_REVOKED);
    assert_int_equal(verify_with_crl(f->dir, "server-fl.pem.old"), X509_V_OK);
    X509_free(old);
    X509_free(renewed);
    X509_free(kept);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(revoke_and_check, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(renew_keeps_old_pair, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
