/* Certificates: CA + server/client/admin issuance verified with OpenSSL's
 * X509_verify_cert, SANs, roles, key modes, validity windows, refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "common/net/certs.h"

static X509 *load(const char *dir, fk_cert_role role, const char *name)
{
    char p[4096];
    assert_int_equal(fk_certs_path(p, sizeof p, dir, role, name, "pem", NULL), FK_OK);
    FILE *f = fopen(p, "r");
    assert_non_null(f);
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(x);
    return x;
}

/* X509_verify_cert result code (X509_V_OK when the chain verifies). */
static int verify(X509 *ca, X509 *leaf, int purpose)
{
    X509_STORE *st = X509_STORE_new();
    X509_STORE_add_cert(st, ca);
    X509_STORE_CTX *ctx = X509_STORE_CTX_new();
    X509_STORE_CTX_init(ctx, st, leaf, NULL);
    X509_STORE_CTX_set_purpose(ctx, purpose);
    int ok = X509_verify_cert(ctx);
    int code = ok == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
    X509_STORE_CTX_free(ctx);
    X509_STORE_free(st);
    return code;
}

static void rm_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[4096];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
}

static mode_t mode_of(const char *dir, fk_cert_role role, const char *name, const char *ext)
{
    char p[4096];
    assert_int_equal(fk_certs_path(p, sizeof p, dir, role, name, ext, NULL), FK_OK);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    return st.st_mode & 0777;
}

static void issue_and_verify(void **state)
{
    (void)state;
    char dir[] = "/tmp/fk-certs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    mode_t old = umask(0); /* key modes must not depend on the umask */
    fk_err err;
    assert_int_equal(fk_certs_init_ca(dir, NULL, NULL, &err), FK_OK);
    fk_cert_opts so = {.dns = "localhost,fk.example", .ips = "127.0.0.1,::1"};
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_SERVER, "srv", &so, &err), FK_OK);
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "hospital-a", NULL, &err), FK_OK);
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_ADMIN, "ops", NULL, &err), FK_OK);
    umask(old);

    assert_int_equal(mode_of(dir, FK_ROLE_NONE, NULL, "key"), 0600);
    assert_int_equal(mode_of(dir, FK_ROLE_SERVER, "srv", "key"), 0600);
    assert_int_equal(mode_of(dir, FK_ROLE_CLIENT, "hospital-a", "key"), 0600);
    assert_int_equal(mode_of(dir, FK_ROLE_ADMIN, "ops", "key"), 0600);
    assert_int_equal(mode_of(dir, FK_ROLE_SERVER, "srv", "pem"), 0644);

    X509 *ca = load(dir, FK_ROLE_NONE, NULL);
    X509 *srv = load(dir, FK_ROLE_SERVER, "srv");
    X509 *cli = load(dir, FK_ROLE_CLIENT, "hospital-a");
    X509 *adm = load(dir, FK_ROLE_ADMIN, "ops");
    assert_int_equal(verify(ca, srv, X509_PURPOSE_SSL_SERVER), X509_V_OK);
    assert_int_equal(verify(ca, cli, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
    assert_int_equal(verify(ca, adm, X509_PURPOSE_SSL_CLIENT), X509_V_OK);
    /* a client certificate is no server certificate */
    assert_int_not_equal(verify(ca, cli, X509_PURPOSE_SSL_SERVER), X509_V_OK);

    assert_int_equal(X509_check_host(srv, "localhost", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(srv, "srv", 0, 0, NULL), 1);
    assert_int_equal(X509_check_host(srv, "other.example", 0, 0, NULL), 0);
    assert_int_equal(X509_check_ip_asc(srv, "127.0.0.1", 0), 1);
    assert_int_equal(X509_check_ip_asc(srv, "::1", 0), 1);
    assert_int_equal(X509_check_ip_asc(srv, "10.0.0.1", 0), 0);

    char name[FK_CERT_NAME_MAX + 1];
    fk_cert_role role;
    assert_int_equal(fk_certs_identity(cli, name, sizeof name, &role, &err), FK_OK);
    assert_string_equal(name, "hospital-a");
    assert_int_equal(role, FK_ROLE_CLIENT);
    assert_int_equal(fk_certs_identity(adm, name, sizeof name, &role, &err), FK_OK);
    assert_string_equal(name, "ops");
    assert_int_equal(role, FK_ROLE_ADMIN);
    assert_int_equal(fk_certs_identity(ca, name, sizeof name, &role, &err), FK_ENOTFOUND);

    /* the private key on disk matches the certificate */
    char kp[4096];
    assert_int_equal(fk_certs_path(kp, sizeof kp, dir, FK_ROLE_CLIENT, "hospital-a", "key", NULL),
                     FK_OK);
    FILE *f = fopen(kp, "r");
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    assert_int_equal(X509_check_private_key(cli, k), 1);
    EVP_PKEY_free(k);

    X509_free(ca);
    X509_free(srv);
    X509_free(cli);
    X509_free(adm);
    rm_dir(dir);
}

static void validity_windows_and_foreign_ca(void **state)
{
    (void)state;
    char dir[] = "/tmp/fk-certs-XXXXXX", other[] = "/tmp/fk-certs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    assert_non_null(mkdtemp(other));
    fk_err err;
    assert_int_equal(fk_certs_init_ca(dir, "CA one", NULL, &err), FK_OK);
    assert_int_equal(fk_certs_init_ca(other, "CA two", NULL, &err), FK_OK);
    fk_cert_opts expired = {.days = 1, .start_offset = -10 * 86400L};
    fk_cert_opts future = {.days = 30, .start_offset = 2 * 86400L};
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "old", &expired, &err), FK_OK);
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "early", &future, &err), FK_OK);
    assert_int_equal(fk_certs_issue(other, FK_ROLE_CLIENT, "stranger", NULL, &err), FK_OK);
    X509 *ca = load(dir, FK_ROLE_NONE, NULL);
    X509 *old = load(dir, FK_ROLE_CLIENT, "old");
    X509 *early = load(dir, FK_ROLE_CLIENT, "early");
    X509 *stranger = load(other, FK_ROLE_CLIENT, "stranger");
    assert_int_equal(verify(ca, old, X509_PURPOSE_SSL_CLIENT), X509_V_ERR_CERT_HAS_EXPIRED);
    assert_int_equal(verify(ca, early, X509_PURPOSE_SSL_CLIENT), X509_V_ERR_CERT_NOT_YET_VALID);
    assert_int_equal(verify(ca, stranger, X509_PURPOSE_SSL_CLIENT),
                     X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    X509_free(ca);
    X509_free(old);
    X509_free(early);
    X509_free(stranger);
    rm_dir(dir);
    rm_dir(other);
}

static void refusals(void **state)
{
    (void)state;
    char dir[] = "/tmp/fk-certs-XXXXXX";
    assert_non_null(mkdtemp(dir));
    fk_err err;
    /* no CA yet */
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "a", NULL, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "certs init"));
    assert_int_equal(fk_certs_init_ca(dir, NULL, NULL, &err), FK_OK);
    /* never overwrite */
    assert_int_equal(fk_certs_init_ca(dir, NULL, NULL, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "exists"));
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "a", NULL, &err), FK_OK);
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "a", NULL, &err), FK_EIO);
    /* names end up in paths: no traversal, no separators */
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "../x", NULL, &err), FK_EINVAL);
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "a/b", NULL, &err), FK_EINVAL);
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_CLIENT, "", NULL, &err), FK_EINVAL);
    /* a bad SAN leaves no files behind */
    fk_cert_opts bad = {.ips = "300.1.1.1"};
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_SERVER, "s", &bad, &err), FK_EINVAL);
    char p[4096];
    assert_int_equal(fk_certs_path(p, sizeof p, dir, FK_ROLE_SERVER, "s", "key", NULL), FK_OK);
    assert_int_not_equal(access(p, F_OK), 0);
    fk_cert_opts bad_dns = {.dns = "x,y z"};
    assert_int_equal(fk_certs_issue(dir, FK_ROLE_SERVER, "s", &bad_dns, &err), FK_EINVAL);
    rm_dir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(issue_and_verify),
        cmocka_unit_test(validity_windows_and_foreign_ca),
        cmocka_unit_test(refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
