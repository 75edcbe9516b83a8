#include "common/net/certs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>

#include "common/base/log.h"

#define URI_PREFIX "urn:fedkern:"

static const char *role_word(fk_cert_role role)
{
    switch (role) {
    case FK_ROLE_SERVER: return "server";
    case FK_ROLE_CLIENT: return "client";
    case FK_ROLE_ADMIN: return "admin";
    default: return "ca";
    }
}

/* Append OpenSSL's first queued error to a message. */
static int ssl_fail(fk_err *err, int code, const char *what)
{
    char buf[256] = "no detail";
    unsigned long e = ERR_get_error();
    if (e)
        ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return fk_err_set(err, code, "certs: %s (%s)", what, buf);
}

int fk_certs_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > FK_CERT_NAME_MAX || name[0] == '.' || name[0] == '-')
        return 0;
    for (const char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-'))
            return 0;
    return 1;
}

int fk_certs_path(char *buf, size_t cap, const char *dir, fk_cert_role role, const char *name,
                  const char *ext, fk_err *err)
{
    int n = role == FK_ROLE_NONE ? snprintf(buf, cap, "%s/ca.%s", dir, ext)
                                 : snprintf(buf, cap, "%s/%s-%s.%s", dir, role_word(role), name,
                                            ext);
    if (n < 0 || (size_t)n >= cap)
        return fk_err_set(err, FK_EINVAL, "certs: path in '%s' too long", dir);
    return FK_OK;
}

/* ---------------------------------------------------------------- files */

/* Create path exclusively with mode, write the PEM via fn, fsync. */
FK_CHECKRETURN static int write_new(const char *path, mode_t mode, int (*fn)(FILE *, void *), void *obj,
                     fk_err *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (fd < 0)
        return fk_err_set(err, FK_EIO, "certs: cannot create %s: %s%s", path, strerror(errno),
                          errno == EEXIST ? " (remove it first or choose another name)" : "");
    if (fchmod(fd, mode) != 0) { /* exact mode whatever the umask */
        close(fd);
        unlink(path);
        return fk_err_set(err, FK_EIO, "certs: chmod %s: %s", path, strerror(errno));
    }
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(path);
        return fk_err_set(err, FK_EIO, "certs: fdopen %s: %s", path, strerror(errno));
    }
    int ok = fn(f, obj) && fflush(f) == 0 && fsync(fd) == 0;
    if (fclose(f) != 0)
        ok = 0;
    if (!ok) {
        unlink(path);
        return ssl_fail(err, FK_EIO, "writing a PEM file failed");
    }
    return FK_OK;
}

static int pem_key(FILE *f, void *k)
{
    return PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL);
}

static int pem_cert(FILE *f, void *x)
{
    return PEM_write_X509(f, x);
}

/* Write cert (0644) and key (0600); on failure leave neither behind. */
FK_CHECKRETURN static int write_pair(const char *dir, fk_cert_role role, const char *name, X509 *x,
                      EVP_PKEY *k, fk_err *err)
{
    char kp[4096], cp[4096];
    int rc;
    if ((rc = fk_certs_path(kp, sizeof kp, dir, role, name, "key", err)) != FK_OK ||
        (rc = fk_certs_path(cp, sizeof cp, dir, role, name, "pem", err)) != FK_OK)
        return rc;
    if (access(cp, F_OK) == 0)
        return fk_err_set(err, FK_EIO, "certs: %s already exists (remove it first or choose "
                                       "another name)", cp);
    if ((rc = write_new(kp, 0600, pem_key, k, err)) != FK_OK)
        return rc;
    if ((rc = write_new(cp, 0644, pem_cert, x, err)) != FK_OK)
        unlink(kp);
    return rc;
}

/* ---------------------------------------------------------------- building */

FK_CHECKRETURN static int add_ext(X509 *x, X509 *issuer, int nid, const char *value, fk_err *err)
{
    X509V3_CTX ctx;
    X509V3_set_ctx_nodb(&ctx);
    X509V3_set_ctx(&ctx, issuer, x, NULL, NULL, 0);
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
    if (!e)
        return ssl_fail(err, FK_EINVAL, "bad certificate extension");
    int ok = X509_add_ext(x, e, -1);
    X509_EXTENSION_free(e);
    return ok ? FK_OK : ssl_fail(err, FK_ENOMEM, "adding an extension failed");
}

/* A fresh certificate for key: random serial, subject, validity window. */
static X509 *new_cert(EVP_PKEY *key, const char *cn, const char *ou, const fk_cert_opts *o,
                      long default_days, fk_err *err)
{
    X509 *x = X509_new();
    unsigned char serial[20];
    BIGNUM *bn = NULL;
    if (!x || RAND_bytes(serial, sizeof serial) != 1)
        goto fail;
    serial[0] &= 0x7f; /* positive, at most 20 octets (RFC 5280) */
    bn = BN_bin2bn(serial, sizeof serial, NULL);
    if (!bn || !BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x)) || !X509_set_version(x, 2))
        goto fail;
    long days = o && o->days > 0 ? o->days : default_days;
    long start = o ? o->start_offset : 0;
    if (!X509_gmtime_adj(X509_getm_notBefore(x), start) ||
        !X509_gmtime_adj(X509_getm_notAfter(x), start + days * 86400L))
        goto fail;
    X509_NAME *nm = X509_get_subject_name(x);
    if (!X509_NAME_add_entry_by_txt(nm, "O", MBSTRING_UTF8, (const unsigned char *)"fedkern", -1,
                                    -1, 0) ||
        (ou && !X509_NAME_add_entry_by_txt(nm, "OU", MBSTRING_UTF8, (const unsigned char *)ou, -1,
                                           -1, 0)) ||
        !X509_NAME_add_entry_by_txt(nm, "CN", MBSTRING_UTF8, (const unsigned char *)cn, -1, -1,
                                    0) ||
        !X509_set_pubkey(x, key))
        goto fail;
    BN_free(bn);
    return x;
fail:
    BN_free(bn);
    X509_free(x);
    ssl_fail(err, FK_ENOMEM, "building a certificate failed");
    return NULL;
}

static EVP_PKEY *new_key(fk_err *err)
{
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
    if (!k)
        ssl_fail(err, FK_ENOMEM, "generating an EC P-256 key failed");
    return k;
}

/* Append "TYPE:item" for each comma-separated item, validated, to san. */
FK_CHECKRETURN static int san_list(char *san, size_t cap, const char *list, int ip, fk_err *err)
{
    if (!list || !*list)
        return FK_OK;
    char *copy = strdup(list), *save = NULL;
    if (!copy)
        return fk_err_set(err, FK_ENOMEM, "certs: out of memory");
    int rc = FK_OK;
    for (char *t = strtok_r(copy, ",", &save); t && rc == FK_OK; t = strtok_r(NULL, ",", &save)) {
        unsigned char addr[16];
        if (ip && inet_pton(AF_INET, t, addr) != 1 && inet_pton(AF_INET6, t, addr) != 1)
            rc = fk_err_set(err, FK_EINVAL, "certs: '%s' is not an IPv4 or IPv6 address", t);
        else if (!ip && !fk_certs_name_ok(t))
            rc = fk_err_set(err, FK_EINVAL,
                            "certs: '%s' is not a DNS name (letters, digits, '.', '-')", t);
        else {
            size_t used = strlen(san);
            int n = snprintf(san + used, cap - used, ",%s:%s", ip ? "IP" : "DNS", t);
            if (n < 0 || (size_t)n >= cap - used)
                rc = fk_err_set(err, FK_ELIMIT, "certs: too many SAN entries");
        }
    }
    free(copy);
    return rc;
}

FK_CHECKRETURN static int leaf_exts(X509 *x, X509 *ca, fk_cert_role role, const char *name,
                     const fk_cert_opts *o, fk_err *err)
{
    char san[2048];
    snprintf(san, sizeof san, "URI:" URI_PREFIX "%s:%s", role_word(role), name);
    int rc;
    if (role == FK_ROLE_SERVER) {
        size_t used = strlen(san);
        snprintf(san + used, sizeof san - used, ",DNS:%s", name);
        if ((rc = san_list(san, sizeof san, o ? o->dns : NULL, 0, err)) != FK_OK ||
            (rc = san_list(san, sizeof san, o ? o->ips : NULL, 1, err)) != FK_OK)
            return rc;
    }
    const char *eku = role == FK_ROLE_SERVER ? "serverAuth" : "clientAuth";
    if ((rc = add_ext(x, ca, NID_basic_constraints, "critical,CA:FALSE", err)) != FK_OK ||
        (rc = add_ext(x, ca, NID_key_usage, "critical,digitalSignature", err)) != FK_OK ||
        (rc = add_ext(x, ca, NID_ext_key_usage, eku, err)) != FK_OK ||
        (rc = add_ext(x, ca, NID_subject_key_identifier, "hash", err)) != FK_OK ||
        (rc = add_ext(x, ca, NID_authority_key_identifier, "keyid:always", err)) != FK_OK ||
        (rc = add_ext(x, ca, NID_subject_alt_name, san, err)) != FK_OK)
        return rc;
    return FK_OK;
}

int fk_certs_init_ca(const char *dir, const char *cn, const fk_cert_opts *opts, fk_err *err)
{
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return fk_err_set(err, FK_EIO, "certs: cannot create directory %s: %s", dir,
                          strerror(errno));
    EVP_PKEY *k = new_key(err);
    if (!k)
        return FK_ENOMEM;
    X509 *x = new_cert(k, cn ? cn : "fedkern CA", "ca", opts, 3650, err);
    int rc = x ? FK_OK : FK_ENOMEM;
    if (rc == FK_OK && !X509_set_issuer_name(x, X509_get_subject_name(x)))
        rc = ssl_fail(err, FK_ENOMEM, "setting the CA issuer failed");
    if (rc == FK_OK)
        rc = add_ext(x, x, NID_basic_constraints, "critical,CA:TRUE,pathlen:0", err);
    if (rc == FK_OK)
        rc = add_ext(x, x, NID_key_usage, "critical,keyCertSign,cRLSign", err);
    if (rc == FK_OK)
        rc = add_ext(x, x, NID_subject_key_identifier, "hash", err);
    if (rc == FK_OK && !X509_sign(x, k, EVP_sha256()))
        rc = ssl_fail(err, FK_ENOMEM, "signing the CA certificate failed");
    if (rc == FK_OK)
        rc = write_pair(dir, FK_ROLE_NONE, NULL, x, k, err);
    X509_free(x);
    EVP_PKEY_free(k);
    return rc;
}

/* Read DIR's CA certificate and key. */
FK_CHECKRETURN static int load_ca(const char *dir, X509 **ca, EVP_PKEY **key, fk_err *err)
{
    char cp[4096], kp[4096];
    int rc;
    if ((rc = fk_certs_path(cp, sizeof cp, dir, FK_ROLE_NONE, NULL, "pem", err)) != FK_OK ||
        (rc = fk_certs_path(kp, sizeof kp, dir, FK_ROLE_NONE, NULL, "key", err)) != FK_OK)
        return rc;
    FILE *f = fopen(cp, "r");
    if (!f)
        return fk_err_set(err, FK_EIO, "certs: cannot open %s: %s (run 'fedkern certs init' first)",
                          cp, strerror(errno));
    *ca = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!*ca)
        return ssl_fail(err, FK_EFORMAT, "the CA certificate is not valid PEM");
    f = fopen(kp, "r");
    if (!f) {
        X509_free(*ca);
        return fk_err_set(err, FK_EIO, "certs: cannot open %s: %s", kp, strerror(errno));
    }
    *key = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    if (!*key || X509_check_private_key(*ca, *key) != 1) {
        X509_free(*ca);
        EVP_PKEY_free(*key);
        return ssl_fail(err, FK_EFORMAT, "the CA key is unreadable or does not match ca.pem");
    }
    return FK_OK;
}

int fk_certs_issue(const char *dir, fk_cert_role role, const char *name, const fk_cert_opts *opts,
                   fk_err *err)
{
    if (role != FK_ROLE_SERVER && role != FK_ROLE_CLIENT && role != FK_ROLE_ADMIN)
        return fk_err_set(err, FK_EINVAL, "certs: unknown certificate role %d", (int)role);
    if (!name || !fk_certs_name_ok(name))
        return fk_err_set(err, FK_EINVAL,
                          "certs: name '%s' must be 1..%d letters, digits, '.', '_' or '-'",
                          name ? name : "", FK_CERT_NAME_MAX);
    X509 *ca;
    EVP_PKEY *ca_key;
    int rc = load_ca(dir, &ca, &ca_key, err);
    if (rc != FK_OK)
        return rc;
    EVP_PKEY *k = new_key(err);
    X509 *x = k ? new_cert(k, name, role_word(role), opts, 825, err) : NULL;
    rc = x ? FK_OK : FK_ENOMEM;
    if (rc == FK_OK && !X509_set_issuer_name(x, X509_get_subject_name(ca)))
        rc = ssl_fail(err, FK_ENOMEM, "setting the issuer failed");
    if (rc == FK_OK)
        rc = leaf_exts(x, ca, role, name, opts, err);
    if (rc == FK_OK && !X509_sign(x, ca_key, EVP_sha256()))
        rc = ssl_fail(err, FK_ENOMEM, "signing the certificate failed");
    if (rc == FK_OK)
        rc = write_pair(dir, role, name, x, k, err);
    X509_free(x);
    EVP_PKEY_free(k);
    X509_free(ca);
    EVP_PKEY_free(ca_key);
    return rc;
}

int fk_certs_identity(X509 *cert, char *name, size_t cap, fk_cert_role *role, fk_err *err)
{
    GENERAL_NAMES *sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    int rc = fk_err_set(err, FK_ENOTFOUND, "peer certificate has no " URI_PREFIX "ROLE:NAME SAN");
    for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans); i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        if (g->type != GEN_URI)
            continue;
        const char *u = (const char *)ASN1_STRING_get0_data(g->d.uniformResourceIdentifier);
        int len = ASN1_STRING_length(g->d.uniformResourceIdentifier);
        if (!u || (size_t)len != strlen(u) || strncmp(u, URI_PREFIX, strlen(URI_PREFIX)))
            continue;
        const char *r = u + strlen(URI_PREFIX), *colon = strchr(r, ':');
        if (!colon || !fk_certs_name_ok(colon + 1) || strlen(colon + 1) >= cap)
            continue;
        fk_cert_role found = FK_ROLE_NONE;
        for (int k = FK_ROLE_SERVER; k <= FK_ROLE_ADMIN; k++)
            if ((size_t)(colon - r) == strlen(role_word(k)) &&
                !strncmp(r, role_word(k), (size_t)(colon - r)))
                found = (fk_cert_role)k;
        if (found == FK_ROLE_NONE)
            continue;
        snprintf(name, cap, "%s", colon + 1);
        *role = found;
        if (err)
            fk_err_clear(err);
        rc = FK_OK;
        break;
    }
    GENERAL_NAMES_free(sans);
    return rc;
}

/* ------------------------------------------------------------ revocation */

int fk_certs_find_role(const char *dir, const char *name)
{
    static const fk_cert_role roles[] = {FK_ROLE_SERVER, FK_ROLE_CLIENT, FK_ROLE_ADMIN};
    int found = FK_ROLE_NONE;
    for (size_t i = 0; i < sizeof roles / sizeof *roles; i++) {
        char path[4096];
        if (fk_certs_path(path, sizeof path, dir, roles[i], name, "pem", NULL) == FK_OK &&
            access(path, F_OK) == 0)
            found = found == FK_ROLE_NONE ? (int)roles[i] : -1;
    }
    return found;
}

static X509 *read_cert(const char *path, fk_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fk_err_set(err, FK_ENOTFOUND, "certs: cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!x)
        ssl_fail(err, FK_EFORMAT, "the certificate is not valid PEM");
    return x;
}

/* The existing DIR/crl.pem (checked against the CA) or a new empty CRL. */
static X509_CRL *load_or_new_crl(const char *path, X509 *ca, fk_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (errno != ENOENT) {
            fk_err_set(err, FK_EIO, "certs: cannot open %s: %s", path, strerror(errno));
            return NULL;
        }
        X509_CRL *c = X509_CRL_new();
        if (!c || !X509_CRL_set_version(c, X509_CRL_VERSION_2) ||
            !X509_CRL_set_issuer_name(c, X509_get_subject_name(ca))) {
            X509_CRL_free(c);
            ssl_fail(err, FK_ENOMEM, "creating the CRL failed");
            return NULL;
        }
        return c;
    }
    X509_CRL *c = PEM_read_X509_CRL(f, NULL, NULL, NULL);
    fclose(f);
    if (!c) {
        ssl_fail(err, FK_EFORMAT, "the existing crl.pem is not a valid PEM CRL; move it away");
        return NULL;
    }
    EVP_PKEY *pub = X509_get0_pubkey(ca);
    if (X509_NAME_cmp(X509_CRL_get_issuer(c), X509_get_subject_name(ca)) != 0 ||
        X509_CRL_verify(c, pub) != 1) {
        X509_CRL_free(c);
        ERR_clear_error();
        fk_err_set(err, FK_EINVAL, "certs: %s was not signed by this directory's CA; move it away",
                   path);
        return NULL;
    }
    return c;
}

static int crl_has_serial(X509_CRL *c, const ASN1_INTEGER *serial)
{
    X509_REVOKED *r = NULL;
    return X509_CRL_get0_by_serial(c, &r, serial) == 1;
}

FK_CHECKRETURN static int crl_add(X509_CRL *c, const ASN1_INTEGER *serial, fk_err *err)
{
    X509_REVOKED *r = X509_REVOKED_new();
    ASN1_TIME *now = ASN1_TIME_set(NULL, time(NULL));
    int ok = r && now && X509_REVOKED_set_serialNumber(r, (ASN1_INTEGER *)serial) &&
             X509_REVOKED_set_revocationDate(r, now) && X509_CRL_add0_revoked(c, r);
    ASN1_TIME_free(now);
    if (!ok) {
        X509_REVOKED_free(r);
        return ssl_fail(err, FK_ENOMEM, "adding the serial to the CRL failed");
    }
    return FK_OK;
}

/* New lastUpdate/nextUpdate, CRL number + 1, sorted, signed by the CA. */
FK_CHECKRETURN static int crl_sign(X509_CRL *c, X509 *ca, EVP_PKEY *key, long days, fk_err *err)
{
    long number = 0;
    ASN1_INTEGER *old = X509_CRL_get_ext_d2i(c, NID_crl_number, NULL, NULL);
    if (old) {
        number = ASN1_INTEGER_get(old);
        ASN1_INTEGER_free(old);
        int at = X509_CRL_get_ext_by_NID(c, NID_crl_number, -1);
        if (at >= 0)
            X509_EXTENSION_free(X509_CRL_delete_ext(c, at));
    }
    ASN1_INTEGER *num = ASN1_INTEGER_new();
    ASN1_TIME *last = ASN1_TIME_set(NULL, time(NULL));
    ASN1_TIME *next = X509_time_adj_ex(NULL, (int)(days ? days : 365), 0, NULL);
    X509V3_CTX ctx;
    X509V3_set_ctx(&ctx, ca, NULL, NULL, c, 0);
    X509_EXTENSION *aki = X509V3_EXT_conf_nid(NULL, &ctx, NID_authority_key_identifier, "keyid:always");
    int ok = num && last && next && ASN1_INTEGER_set(num, number + 1) &&
             X509_CRL_add1_ext_i2d(c, NID_crl_number, num, 0, 0) && X509_CRL_set1_lastUpdate(c, last) &&
             X509_CRL_set1_nextUpdate(c, next);
    if (ok && aki && X509_CRL_get_ext_by_NID(c, NID_authority_key_identifier, -1) < 0)
        ok = X509_CRL_add_ext(c, aki, -1);
    ok = ok && X509_CRL_sort(c) && X509_CRL_sign(c, key, EVP_sha256());
    X509_EXTENSION_free(aki);
    ASN1_INTEGER_free(num);
    ASN1_TIME_free(last);
    ASN1_TIME_free(next);
    return ok ? FK_OK : ssl_fail(err, FK_ENOMEM, "signing the CRL failed");
}

/* Write DIR/crl.pem through a temporary file and rename: a reader never sees half a CRL. */
FK_CHECKRETURN static int crl_write(const char *path, X509_CRL *c, fk_err *err)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return fk_err_set(err, FK_EIO, "certs: cannot create %s: %s", tmp, strerror(errno));
    fchmod(fd, 0644); /* public: servers read it */
    FILE *f = fdopen(fd, "w");
    int ok = f && PEM_write_X509_CRL(f, c) && fflush(f) == 0 && fsync(fd) == 0;
    if (f)
        fclose(f);
    else
        close(fd);
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return fk_err_set(err, FK_EIO, "certs: cannot write %s: %s", path, strerror(errno));
    }
    return FK_OK;
}

/* Shared body of revoke and crl: serial NULL only re-signs. */
FK_CHECKRETURN static int crl_update(const char *dir, X509 *revoke, long days, int *added,
                                     fk_err *err)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/crl.pem", dir);
    X509 *ca;
    EVP_PKEY *key;
    int rc = load_ca(dir, &ca, &key, err);
    if (rc != FK_OK)
        return rc;
    X509_CRL *c = load_or_new_crl(path, ca, err);
    rc = c ? FK_OK : (err ? err->code : FK_EINVAL);
    if (rc == FK_OK && revoke && X509_check_issued(ca, revoke) != X509_V_OK)
        rc = fk_err_set(err, FK_EINVAL, "certs: that certificate was not issued by %s/ca.pem", dir);
    const ASN1_INTEGER *serial = revoke ? X509_get0_serialNumber(revoke) : NULL;
    int add = rc == FK_OK && serial && !crl_has_serial(c, serial);
    if (add)
        rc = crl_add(c, serial, err);
    if (rc == FK_OK)
        rc = crl_sign(c, ca, key, days, err);
    if (rc == FK_OK)
        rc = crl_write(path, c, err);
    if (added)
        *added = rc == FK_OK && add;
    X509_CRL_free(c);
    X509_free(ca);
    EVP_PKEY_free(key);
    return rc;
}

int fk_certs_revoke(const char *dir, fk_cert_role role, const char *name, long days, int *added,
                    fk_err *err)
{
    char path[4096];
    if (!name || !fk_certs_name_ok(name))
        return fk_err_set(err, FK_EINVAL, "certs: '%s' is not a certificate name", name ? name : "");
    if (role != FK_ROLE_SERVER && role != FK_ROLE_CLIENT && role != FK_ROLE_ADMIN)
        return fk_err_set(err, FK_EINVAL, "certs: unknown certificate role %d", (int)role);
    int rc = fk_certs_path(path, sizeof path, dir, role, name, "pem", err);
    if (rc != FK_OK)
        return rc;
    X509 *x = read_cert(path, err);
    if (!x)
        return err ? err->code : FK_EINVAL;
    rc = crl_update(dir, x, days, added, err);
    X509_free(x);
    return rc;
}

int fk_certs_crl(const char *dir, long days, fk_err *err)
{
    return crl_update(dir, NULL, days, NULL, err);
}

/* ---------------------------------------------------------------- rotation */

int fk_certs_renew(const char *dir, fk_cert_role role, const char *name, const fk_cert_opts *opts,
                   fk_err *err)
{
    char pem[4096], key[4096], pem_old[4200], key_old[4200];
    if (!name || !fk_certs_name_ok(name))
        return fk_err_set(err, FK_EINVAL, "certs: '%s' is not a certificate name", name ? name : "");
    int rc = fk_certs_path(pem, sizeof pem, dir, role, name, "pem", err);
    if (rc == FK_OK)
        rc = fk_certs_path(key, sizeof key, dir, role, name, "key", err);
    if (rc != FK_OK)
        return rc;
    snprintf(pem_old, sizeof pem_old, "%s.old", pem);
    snprintf(key_old, sizeof key_old, "%s.old", key);
    if (access(pem, F_OK) != 0)
        return fk_err_set(err, FK_ENOTFOUND, "certs: %s does not exist; use 'certs issue' for a new one",
                          pem);
    if (rename(pem, pem_old) != 0)
        return fk_err_set(err, FK_EIO, "certs: cannot move %s aside: %s", pem, strerror(errno));
    if (rename(key, key_old) != 0 && errno != ENOENT) {
        int e = errno;
        rename(pem_old, pem);
        return fk_err_set(err, FK_EIO, "certs: cannot move %s aside: %s", key, strerror(e));
    }
    rc = fk_certs_issue(dir, role, name, opts, err);
    if (rc != FK_OK) { /* put the old pair back: never leave the name without a certificate */
        unlink(pem);
        unlink(key);
        rename(pem_old, pem);
        rename(key_old, key);
    }
    return rc;
}

int fk_certs_crl_days_left(const char *path, double *days, fk_err *err)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return fk_err_set(err, FK_EIO, "certs: cannot open %s: %s", path, strerror(errno));
    X509_CRL *c = PEM_read_X509_CRL(f, NULL, NULL, NULL);
    fclose(f);
    if (!c)
        return ssl_fail(err, FK_EFORMAT, "the CRL is not valid PEM");
    const ASN1_TIME *next = X509_CRL_get0_nextUpdate(c);
    int d = 0, s = 0;
    int ok = next && ASN1_TIME_diff(&d, &s, NULL, next);
    X509_CRL_free(c);
    if (!ok)
        return fk_err_set(err, FK_EFORMAT, "certs: %s has no next-update date", path);
    *days = d + s / 86400.0;
    return FK_OK;
}

void fk_certs_crl_warn(const char *path)
{
    double days;
    if (fk_certs_crl_days_left(path, &days, NULL) != FK_OK)
        return;
    if (days < 0)
        fk_log(FK_LOG_ERROR, "crl_expired", "crl=%s days_ago=%.1f effect=\"every client certificate "
               "is refused\" action=\"re-sign it: fedkern certs crl --dir CA-DIR, copy, reload\"",
               path, -days);
    else if (days < 30)
        fk_log(FK_LOG_WARN, "crl_expiring", "crl=%s days_left=%.1f action=\"re-sign it before then: "
               "fedkern certs crl --dir CA-DIR, copy, reload\"", path, days);
}
