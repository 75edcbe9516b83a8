/* One TCP connection on libuv carrying TLS through OpenSSL memory BIOs: OpenSSL
 * reads ciphertext from the buffer libuv just filled and writes its records into
 * the next uv_write buffer (a minimal in-memory BIO pair, like BIO_s_mem without
 * its extra copy). No blocking sockets, no threads. */
#ifndef FK_NET_TLSCONN_H
#define FK_NET_TLSCONN_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/net/tls.h"

typedef struct fk_tlsconn fk_tlsconn;

enum { FK_TLSCONN_SPARES = 16 };

typedef struct fk_tlsconn_cbs {
    void (*on_ready)(fk_tlsconn *c);                              /* handshake done, peer verified */
    void (*on_data)(fk_tlsconn *c, const uint8_t *p, size_t n);   /* decrypted bytes */
    void (*on_writable)(fk_tlsconn *c);                           /* a write finished */
    void (*on_close)(fk_tlsconn *c, const char *reason);          /* c is freed after this returns */
    /* optional: ciphertext arrived (also part of a record not complete yet), before it is
     * decrypted; a peer that still sends on a stalled connection is seen alive by it */
    void (*on_rx)(fk_tlsconn *c);
} fk_tlsconn_cbs;

struct fk_tlsconn {
    uv_tcp_t tcp;
    uv_timer_t hs_timer;
    uv_shutdown_t shutdown_req;
    SSL *ssl;
    BIO *rbio, *wbio;
    BIO_METHOD *meth;
    const uint8_t *in_p; /* ciphertext from libuv not yet read by OpenSSL */
    size_t in_len;
    struct wreq *out;    /* ciphertext write being filled */
    struct wreq *spare[FK_TLSCONN_SPARES]; /* finished write buffers kept for reuse */
    int nspare;
    fk_tls_ctx *ctx;
    const fk_tlsconn_cbs *cbs;
    void *ud;
    int is_server, started, ready, closing, handles;
    int streaming; /* bulk transfer seen: big buffers until the next trim */
    uint64_t hs_timeout_ms;
    fk_tls_peer peer;
    uint8_t *stage; /* plaintext waiting to be encrypted, so small frames share TLS records */
    size_t stage_len, stage_cap;
    size_t queued; /* ciphertext bytes handed to uv_write and not yet written */
    char *reason;     /* why it ended (first reason given), NULL while open */
    int reason_tried;
};

/* Allocate and init the TCP handle on loop; the TLS side starts at accept/connect. */
FK_CHECKRETURN int fk_tlsconn_new(fk_tlsconn **out, uv_loop_t *loop, fk_tls_ctx *ctx,
                                  const fk_tlsconn_cbs *cbs, void *ud, uint64_t hs_timeout_ms,
                                  fk_err *err);
/* Server side: accept from the listener and start the handshake clock. */
FK_CHECKRETURN int fk_tlsconn_accept(fk_tlsconn *c, uv_stream_t *listener, fk_err *err);
/* Server side: serve a socket already accepted elsewhere (another thread's listener); c owns
 * fd from now on, also when this fails (on_close follows then). */
FK_CHECKRETURN int fk_tlsconn_adopt(fk_tlsconn *c, uv_os_sock_t fd, fk_err *err);
/* Client side: connect to addr; server_name (DNS name or IP literal) must match the
 * server certificate's SAN. */
FK_CHECKRETURN int fk_tlsconn_connect(fk_tlsconn *c, const struct sockaddr *addr,
                                      const char *server_name, fk_err *err);
/* Queue plaintext (copied). Returns 0, or -1 when the connection is closing. */
int fk_tlsconn_write(fk_tlsconn *c, const uint8_t *p, size_t n);
/* Encrypt queued plaintext and pass it to libuv. */
void fk_tlsconn_flush(fk_tlsconn *c);
/* Free the write buffers kept for reuse, the empty send stage and, after a bulk
 * transfer, OpenSSL's record buffers (call when the connection goes idle). */
void fk_tlsconn_trim(fk_tlsconn *c);
/* Ciphertext bytes in flight, for back-pressure. */
size_t fk_tlsconn_queued(const fk_tlsconn *c);
/* Flush, send close_notify, shut down and close; on_close follows with reason. */
void fk_tlsconn_close(fk_tlsconn *c, const char *reason);

#endif
