#include "common/net/tls.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/net/certs.h"

typedef struct tls_ctx_box {
    fk_tls_ctx pub;
    atomic_int refs; /* the server's I/O threads take and drop references too */
} tls_ctx_box;

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    for (unsigned int i = 0; i < inlen;) {
        unsigned int l = in[i];
        if (i + 1 + l > inlen)
            break;
        if (l == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
            *out = in + i + 1;
            *outlen = 2;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + l;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL; /* gRPC needs h2: refuse instead of guessing */
}

static int ssl_fail(fk_err *err, const char *what, const char *path)
{
    char buf[256];
    unsigned long e = ERR_get_error();
    ERR_error_string_n(e, buf, sizeof buf);
    ERR_clear_error();
    return fk_err_set(err, FK_EIO, "tls: cannot load %s '%s': %s; check the file and its permissions",
                      what, path ? path : "(none)", e ? buf : "unknown error");
}

FK_CHECKRETURN static int load_crl(SSL_CTX *ctx, const char *path, fk_err *err)
{
    X509_STORE *st = SSL_CTX_get_cert_store(ctx);
    X509_LOOKUP *lk = X509_STORE_add_lookup(st, X509_LOOKUP_file());
    if (!lk || X509_load_crl_file(lk, path, X509_FILETYPE_PEM) <= 0)
        return ssl_fail(err, "CRL", path);
    X509_STORE_set_flags(st, X509_V_FLAG_CRL_CHECK | X509_V_FLAG_CRL_CHECK_ALL);
    return FK_OK;
}

int fk_tls_ctx_new(fk_tls_ctx **out, int is_server, const fk_tls_files *f, fk_err *err)
{
    *out = NULL;
    if (!f->ca || !f->cert || !f->key)
        return fk_err_set(err, FK_EINVAL, "tls: CA, certificate and key files are all required");
    SSL_CTX *ctx = SSL_CTX_new(is_server ? TLS_server_method() : TLS_client_method());
    if (!ctx)
        return fk_err_set(err, FK_ENOMEM, "tls: SSL_CTX_new failed");
    int rc = FK_OK;
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS); /* tlsconn lifts it while streaming */
    /* Send the chain file as it is (leaf and any intermediates) and not a chain OpenSSL
     * builds from the trust store, which adds the root CA: the peer has the root already,
     * and a server parsed and kept that extra certificate for every connection (about
     * 4.6 KB each of the 21.5 KB OpenSSL held per idle client). */
    SSL_CTX_set_mode(ctx, SSL_MODE_NO_AUTO_CHAIN);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    if (SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1)
        rc = ssl_fail(err, "CA file", f->ca);
    else if (SSL_CTX_use_certificate_chain_file(ctx, f->cert) != 1)
        rc = ssl_fail(err, "certificate", f->cert);
    else if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1)
        rc = ssl_fail(err, "private key", f->key);
    else if (SSL_CTX_check_private_key(ctx) != 1)
        rc = ssl_fail(err, "key matching certificate", f->key);
    else if (f->crl && *f->crl)
        rc = load_crl(ctx, f->crl, err);
    if (rc != FK_OK) {
        SSL_CTX_free(ctx);
        return rc;
    }
    if (is_server) {
        int mode = SSL_VERIFY_PEER;
        if (!f->no_client_auth)
            mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
        SSL_CTX_set_verify(ctx, f->no_client_auth ? SSL_VERIFY_NONE : mode, NULL);
        SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
        SSL_CTX_set_num_tickets(ctx, 0); /* no resumption: every connection proves its certificate */
        SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        static const unsigned char alpn[] = {2, 'h', '2'};
        SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn);
    }
    tls_ctx_box *b = calloc(1, sizeof *b);
    if (!b) {
        SSL_CTX_free(ctx);
        return fk_err_set(err, FK_ENOMEM, "tls: out of memory");
    }
    b->pub.ssl = ctx;
    b->pub.is_server = is_server;
    atomic_init(&b->refs, 1);
    *out = &b->pub;
    return FK_OK;
}

void fk_tls_ctx_ref(fk_tls_ctx *ctx)
{
    atomic_fetch_add_explicit(&((tls_ctx_box *)ctx)->refs, 1, memory_order_relaxed);
}

void fk_tls_ctx_unref(fk_tls_ctx *ctx)
{
    if (!ctx)
        return;
    tls_ctx_box *b = (tls_ctx_box *)ctx;
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        SSL_CTX_free(b->pub.ssl);
        free(b);
    }
}

void fk_tls_peer_from_ssl(SSL *ssl, fk_tls_peer *peer)
{
    peer->cn[0] = peer->san[0] = peer->id[0] = '\0';
    peer->role = 0;
    X509 *cert = SSL_get1_peer_certificate(ssl);
    if (!cert)
        return;
    X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, peer->cn,
                              (int)sizeof peer->cn);
    GENERAL_NAMES *sans = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; sans && i < sk_GENERAL_NAME_num(sans) && !peer->san[0]; i++) {
        GENERAL_NAME *g = sk_GENERAL_NAME_value(sans, i);
        if (g->type == GEN_DNS) {
            const unsigned char *s = ASN1_STRING_get0_data(g->d.dNSName);
            int l = ASN1_STRING_length(g->d.dNSName);
            snprintf(peer->san, sizeof peer->san, "%.*s", l, (const char *)s);
        } else if (g->type == GEN_IPADD && ASN1_STRING_length(g->d.iPAddress) == 4) {
            const unsigned char *a = ASN1_STRING_get0_data(g->d.iPAddress);
            snprintf(peer->san, sizeof peer->san, "%u.%u.%u.%u", a[0], a[1], a[2], a[3]);
        }
    }
    GENERAL_NAMES_free(sans);
    fk_cert_role role = FK_ROLE_NONE;
    peer->id[0] = '\0';
    if (fk_certs_identity(cert, peer->id, sizeof peer->id, &role, NULL) != FK_OK)
        peer->id[0] = '\0';
    peer->role = (int)role;
    X509_free(cert);
}

void fk_tls_error_string(SSL *ssl, char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    if (ssl) {
        long v = SSL_get_verify_result(ssl);
        if (v != X509_V_OK)
            o += (size_t)snprintf(out, cap, "certificate verify failed: %s; ",
                                  X509_verify_cert_error_string(v));
    }
    unsigned long e;
    while ((e = ERR_get_error()) != 0 && o + 1 < cap) {
        char buf[256];
        ERR_error_string_n(e, buf, sizeof buf);
        o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? "; " : "", buf);
    }
    if (o >= cap)
        o = cap - 1;
    while (o > 0 && (out[o - 1] == ' ' || out[o - 1] == ';'))
        out[--o] = '\0';
}
