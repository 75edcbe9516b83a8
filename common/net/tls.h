/* TLS contexts: TLS 1.3 only, ALPN "h2", mutual authentication by default.
 * An fk_tls_ctx is immutable once built and reference counted, so a reload
 * (new certificate, new CRL) builds a fresh one and swaps it in: connections
 * already open keep the context they started with. */
#ifndef FK_NET_TLS_H
#define FK_NET_TLS_H

#include <openssl/ssl.h>

#include "common/base/err.h"
#include "common/net/certs.h"

typedef struct fk_tls_files {
    const char *ca;   /* PEM bundle of trusted CAs (peers must chain to it) */
    const char *cert; /* our certificate chain, PEM */
    const char *key;  /* our private key, PEM */
    const char *crl;  /* optional PEM CRL file; NULL or "" = no revocation check */
    int no_client_auth; /* server only: 1 = do not ask clients for a certificate */
} fk_tls_files;

typedef struct fk_tls_ctx {
    SSL_CTX *ssl;
    int is_server;
} fk_tls_ctx;

/* Build a server or client context from files; on error *out is NULL and err says
 * which file and why. */
FK_CHECKRETURN int fk_tls_ctx_new(fk_tls_ctx **out, int is_server, const fk_tls_files *files,
                                  fk_err *err);
void fk_tls_ctx_ref(fk_tls_ctx *ctx);
void fk_tls_ctx_unref(fk_tls_ctx *ctx); /* frees at zero */

/* Peer identity from a finished handshake: subject CN and the first SAN (DNS or IP). */
typedef struct fk_tls_peer {
    char cn[256];
    char san[256];
    char addr[64]; /* "ip:port" of the TCP peer */
    char id[FK_IDENTITY_CAP]; /* fedkern identity NAME from the urn:fedkern:ROLE:NAME SAN, "" if none */
    int role;      /* fk_cert_role of that SAN (FK_ROLE_NONE if none) */
} fk_tls_peer;

void fk_tls_peer_from_ssl(SSL *ssl, fk_tls_peer *peer);

/* Collect OpenSSL's error queue (and the verify result of ssl, if any) as one line. */
void fk_tls_error_string(SSL *ssl, char *out, size_t cap);

#endif
