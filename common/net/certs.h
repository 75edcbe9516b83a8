/* A small private PKI for a federation, written with the OpenSSL 3 API:
 * one CA, server certificates (SAN DNS names and IPs), client certificates
 * (identity = NAME) and admin certificates (identity NAME, admin role).
 * Keys are ECDSA P-256, written unencrypted as PKCS#8 PEM with mode 0600
 * (created O_EXCL, never overwritten). Directory layout:
 *   DIR/ca.pem  DIR/ca.key                       the CA
 *   DIR/server-NAME.pem  DIR/server-NAME.key     a server
 *   DIR/client-NAME.pem  DIR/client-NAME.key     a client
 *   DIR/admin-NAME.pem   DIR/admin-NAME.key      an operator (admin RPCs)
 * Role and identity travel in the certificate twice: subject OU (server,
 * client, admin) + CN NAME, and a SAN URI urn:fedkern:ROLE:NAME, which is
 * what fk_certs_identity reads. */
#ifndef FK_CERTS_H
#define FK_CERTS_H

#include <stddef.h>

#include <openssl/x509.h>

#include "common/base/err.h"

typedef enum fk_cert_role {
    FK_ROLE_NONE = 0,
    FK_ROLE_SERVER = 1,
    FK_ROLE_CLIENT = 2,
    FK_ROLE_ADMIN = 3
} fk_cert_role;

/* Longest NAME (letters, digits, '.', '_', '-'; it becomes part of file names). */
#define FK_CERT_NAME_MAX 64
/* Bytes of a buffer that holds an identity (a certificate NAME) and its NUL: the one size
 * for identities everywhere (TLS peers, the server's sessions, waiters, staged updates). */
#define FK_IDENTITY_CAP (FK_CERT_NAME_MAX + 1)

typedef struct fk_cert_opts {
    long days;             /* validity length in days (0: 3650 for the CA, 825 otherwise) */
    long start_offset;     /* notBefore = now + start_offset seconds (tests: past/future) */
    const char *dns;       /* extra SAN DNS names, comma-separated (servers), or NULL */
    const char *ips;       /* SAN IP addresses (v4 or v6), comma-separated (servers), or NULL */
} fk_cert_opts;

/* Create DIR (mode 0700) if needed and write ca.pem / ca.key there.
 * Refuses to overwrite an existing CA. cn may be NULL ("fedkern CA"). */
FK_CHECKRETURN int fk_certs_init_ca(const char *dir, const char *cn, const fk_cert_opts *opts,
                                    fk_err *err);

/* Issue ROLE-NAME.pem / ROLE-NAME.key signed by DIR's CA. A server
 * certificate always names DNS:NAME in its SAN, plus opts->dns and opts->ips. */
FK_CHECKRETURN int fk_certs_issue(const char *dir, fk_cert_role role, const char *name,
                                  const fk_cert_opts *opts, fk_err *err);

/* Path of a file in the layout: fk_certs_path(buf, n, dir, FK_ROLE_CLIENT, "a", "key")
 * gives DIR/client-a.key; role FK_ROLE_NONE gives DIR/ca.EXT. */
FK_CHECKRETURN int fk_certs_path(char *buf, size_t cap, const char *dir, fk_cert_role role,
                                 const char *name, const char *ext, fk_err *err);

/* Identity and role of a (verified) peer certificate, from its
 * urn:fedkern:ROLE:NAME SAN URI. FK_ENOTFOUND if it has none. */
FK_CHECKRETURN int fk_certs_identity(X509 *cert, char *name, size_t cap, fk_cert_role *role,
                                     fk_err *err);

/* Certificate revocation list DIR/crl.pem, signed by DIR's CA (PEM, mode 0644, replaced
 * atomically). fk_certs_revoke adds ROLE-NAME.pem's serial (again is a no-op, *added = 0),
 * fk_certs_crl only re-signs it (new lastUpdate/nextUpdate; creates an empty one).
 * days: nextUpdate = now + days (0: 365). A CRL past its nextUpdate fails every
 * handshake of a server that checks it, so re-sign it before then. */
FK_CHECKRETURN int fk_certs_revoke(const char *dir, fk_cert_role role, const char *name, long days,
                                   int *added, fk_err *err);
FK_CHECKRETURN int fk_certs_crl(const char *dir, long days, fk_err *err);
/* Rotation: move ROLE-NAME.pem/.key to ROLE-NAME.pem.old/.key.old (replacing older
 * ones) and issue a fresh pair under the same name; on failure the old pair is put
 * back. The running server picks the new pair up on SIGHUP. */
FK_CHECKRETURN int fk_certs_renew(const char *dir, fk_cert_role role, const char *name,
                                  const fk_cert_opts *opts, fk_err *err);
/* Days until the PEM CRL at path must be re-signed (its nextUpdate; negative once
 * past, when every handshake checked against it fails). */
FK_CHECKRETURN int fk_certs_crl_days_left(const char *path, double *days, fk_err *err);
/* Log crl_expired (error) or crl_expiring (warn, under 30 days) for a loaded CRL. */
void fk_certs_crl_warn(const char *path);
/* Which ROLE-NAME.pem exists in dir for a bare NAME: FK_ROLE_NONE if none, -1 if several. */
int fk_certs_find_role(const char *dir, const char *name);

/* 1 if name is a valid NAME. */
int fk_certs_name_ok(const char *name);

#endif
