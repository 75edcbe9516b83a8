#include "common/net/tlsconn.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/memacct.h"

/* Read buffers shared by every connection of a thread: libuv fills the ciphertext
 * buffer and read_cb decrypts and consumes it before returning (OpenSSL keeps a
 * partial record itself), so no connection needs its own; an idle connection
 * then costs no read buffer at all. A nested read (a callback running another
 * loop of the same thread) gets a private buffer instead. */
enum { RBUF_LEN = 256u << 10, PBUF_LEN = 64u << 10 };
static _Thread_local uint8_t *t_rbuf, *t_pbuf;
static _Thread_local int t_rbuf_busy, t_pbuf_busy;

/* The buffers are freed when their thread ends (a pthread key's destructor; the main thread's
 * go with the process). They are the one state besides the log level that outlives a call
 * (docs/architecture.md). */
static pthread_key_t t_key;
static pthread_once_t t_once = PTHREAD_ONCE_INIT;
static int t_key_ok;

static void t_free(void *unused)
{
    (void)unused;
    free(t_rbuf);
    free(t_pbuf);
    t_rbuf = t_pbuf = NULL;
}

static void t_key_make(void)
{
    t_key_ok = pthread_key_create(&t_key, t_free) == 0;
}

/* A thread's first buffer: arrange for t_free at its exit. Without a key (out of keys) the
 * buffers stay until the process ends, as before; nothing else depends on it. */
static uint8_t *t_alloc(size_t len)
{
    uint8_t *b = malloc(len);
    if (b && pthread_once(&t_once, t_key_make) == 0 && t_key_ok &&
        pthread_setspecific(t_key, (void *)1) != 0)
        fk_log(FK_LOG_DEBUG, "tls_buffer_untracked", "reason=\"pthread_setspecific failed\"");
    return b;
}

/* Ciphertext per uv_write: big buffers (below malloc's mmap threshold) once a
 * connection streams, small ones for the few records of a unary call. */
enum { OUT_CAP = 120u << 10, OUT_SMALL = 4096 - 64 };
/* Plaintext staging: small for idle chatter (heartbeats), grown up to STAGE_MAX for bursts. */
enum { STAGE_MIN = 4096, STAGE_MAX = 65536 };

typedef struct wreq {
    uv_write_t req;
    fk_tlsconn *c;
    size_t len, cap;
    uint8_t data[];
} wreq;

static void handle_closed(uv_handle_t *h)
{
    fk_tlsconn *c = h->data;
    if (--c->handles > 0)
        return;
    if (c->cbs->on_close)
        c->cbs->on_close(c, c->reason ? c->reason : "connection closed (reason lost: out of memory)");
    SSL_free(c->ssl);
    BIO_meth_free(c->meth);
    fk_tls_ctx_unref(c->ctx);
    free(c->out);
    while (c->nspare > 0)
        free(c->spare[--c->nspare]);
    free(c->stage);
    free(c->reason);
    fk_memacct_add(FK_MEM_CONN, -(long)sizeof *c);
    free(c);
}

static void close_handles(fk_tlsconn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, handle_closed);
    if (!uv_is_closing((uv_handle_t *)&c->hs_timer))
        uv_close((uv_handle_t *)&c->hs_timer, handle_closed);
}

/* Abort without flushing: the stream is unusable. */
/* The first reason given sticks; held on the heap only once the connection ends (an idle
 * connection carried a 384-byte buffer for it). */
static void set_reason(fk_tlsconn *c, const char *reason)
{
    if (!c->reason && !c->reason_tried) {
        c->reason_tried = 1;
        c->reason = strdup(reason);
    }
}

static void fail(fk_tlsconn *c, const char *reason)
{
    set_reason(c, reason);
    c->closing = 1;
    close_handles(c);
}

static void write_done(uv_write_t *req, int status)
{
    wreq *w = (wreq *)req;
    fk_tlsconn *c = w->c;
    c->queued -= w->len;
    /* Reuse big buffers (freeing and re-growing the heap costs page faults);
     * fk_tlsconn_trim gives them back once the connection is idle. */
    if (w->cap == OUT_CAP && c->nspare < FK_TLSCONN_SPARES && !c->closing)
        c->spare[c->nspare++] = w;
    else
        free(w);
    if (status < 0 && status != UV_ECANCELED) {
        char why[128];
        snprintf(why, sizeof why, "write failed: %s", uv_strerror(status));
        fail(c, why);
        return;
    }
    if (!c->closing && c->ready && c->cbs->on_writable)
        c->cbs->on_writable(c);
}


/* Hand the ciphertext collected so far to libuv. */
static void send_cipher(fk_tlsconn *c)
{
    wreq *w = c->out;
    if (!w || w->len == 0)
        return;
    c->out = NULL;
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned)w->len);
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, write_done);
    if (rc < 0) {
        free(w);
        fail(c, "uv_write refused the buffer");
        return;
    }
    c->queued += w->len;
}

/* Bulk transfer: big write buffers, and OpenSSL keeps its record buffers instead
 * of freeing and reallocating them for every record; fk_tlsconn_trim undoes both. */
static void start_streaming(fk_tlsconn *c)
{
    if (c->streaming)
        return;
    c->streaming = 1;
    SSL_clear_mode(c->ssl, SSL_MODE_RELEASE_BUFFERS);
}

/* Write side of our memory BIO pair: OpenSSL's records land straight in the
 * next uv_write buffer (one copy less than BIO_s_mem + BIO_read). */
static int out_write(BIO *b, const char *data, int len)
{
    fk_tlsconn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    for (int done = 0; done < len;) {
        if (!c->out) {
            size_t cap = c->streaming ? OUT_CAP : OUT_SMALL;
            c->out = cap == OUT_CAP && c->nspare > 0 ? c->spare[--c->nspare]
                                                     : malloc(sizeof *c->out + cap);
            if (!c->out)
                return -1;
            c->out->c = c;
            c->out->len = 0;
            c->out->cap = cap;
        }
        size_t n = (size_t)(len - done);
        if (n > c->out->cap - c->out->len)
            n = c->out->cap - c->out->len;
        memcpy(c->out->data + c->out->len, data + done, n);
        c->out->len += n;
        done += (int)n;
        if (c->out->len == c->out->cap) {
            start_streaming(c); /* a full buffer: more is coming */
            send_cipher(c);
        }
    }
    return len;
}

/* Read side: OpenSSL reads ciphertext straight from libuv's read buffer. */
static int in_read(BIO *b, char *out, int len)
{
    fk_tlsconn *c = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (c->in_len == 0) {
        BIO_set_retry_read(b);
        return -1;
    }
    size_t n = (size_t)len < c->in_len ? (size_t)len : c->in_len;
    memcpy(out, c->in_p, n);
    c->in_p += n;
    c->in_len -= n;
    return (int)n;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)num;
    (void)ptr;
    fk_tlsconn *c = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_PENDING: return b == c->rbio ? (long)c->in_len : 0;
    case BIO_CTRL_WPENDING: return b == c->wbio && c->out ? (long)c->out->len : 0;
    default: return 0;
    }
}

static int ssl_write_all(fk_tlsconn *c, const uint8_t *p, size_t n)
{
    while (n > 0) {
        int chunk = n > (1u << 30) ? (1 << 30) : (int)n;
        int w = SSL_write(c->ssl, p, chunk);
        if (w <= 0) {
            char why[256];
            fk_tls_error_string(NULL, why, sizeof why);
            fail(c, why[0] ? why : "SSL_write failed");
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void fk_tlsconn_flush(fk_tlsconn *c)
{
    if (c->closing && uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    if (c->ready && c->stage_len > 0) {
        size_t n = c->stage_len;
        c->stage_len = 0;
        if (ssl_write_all(c, c->stage, n) < 0)
            return;
    }
    send_cipher(c);
}

/* Room for `need` staged bytes, growing by doubling from STAGE_MIN; 0 or -1 (no memory). */
static int stage_reserve(fk_tlsconn *c, size_t need)
{
    if (need <= c->stage_cap)
        return 0;
    size_t cap = c->stage_cap ? c->stage_cap : STAGE_MIN;
    while (cap < need)
        cap *= 2;
    uint8_t *s = realloc(c->stage, cap);
    if (!s) {
        fail(c, "out of memory for the send buffer");
        return -1;
    }
    c->stage = s;
    c->stage_cap = cap;
    return 0;
}

int fk_tlsconn_write(fk_tlsconn *c, const uint8_t *p, size_t n)
{
    if (c->closing || !c->ready)
        return -1;
    size_t room = c->stage_cap > STAGE_MAX ? c->stage_cap : STAGE_MAX;
    if (n >= 16384 && c->stage_len + n > room) {
        /* Big chunk: top up the staged bytes to a full 16 KB record, then encrypt
         * the rest straight from the caller's memory. */
        size_t k = c->stage_len % 16384 ? 16384 - c->stage_len % 16384 : 0;
        if (k > 0 && stage_reserve(c, c->stage_len + k) == 0) {
            memcpy(c->stage + c->stage_len, p, k);
            c->stage_len += k;
            p += k;
            n -= k;
        }
        fk_tlsconn_flush(c);
        if (c->closing)
            return -1;
        return ssl_write_all(c, p, n);
    }
    if (c->stage_len + n > room) {
        fk_tlsconn_flush(c);
        if (c->closing)
            return -1;
    }
    if (stage_reserve(c, c->stage_len + n))
        return -1;
    memcpy(c->stage + c->stage_len, p, n);
    c->stage_len += n;
    return 0;
}

void fk_tlsconn_trim(fk_tlsconn *c)
{
    while (c->nspare > 0)
        free(c->spare[--c->nspare]);
    if (c->streaming) {
        c->streaming = 0;
        SSL_set_mode(c->ssl, SSL_MODE_RELEASE_BUFFERS);
        if (c->ready && !c->closing)
            SSL_free_buffers(c->ssl); /* refused (harmlessly) while a record is half read */
    }
    if (c->stage_len == 0 && c->stage) {
        free(c->stage);
        c->stage = NULL;
        c->stage_cap = 0;
    }
}

size_t fk_tlsconn_queued(const fk_tlsconn *c)
{
    return c->queued + c->stage_len + (c->out ? c->out->len : 0);
}

static void shutdown_done(uv_shutdown_t *req, int status)
{
    (void)status;
    close_handles(req->data);
}

void fk_tlsconn_close(fk_tlsconn *c, const char *reason)
{
    if (c->closing)
        return;
    set_reason(c, reason);
    fk_tlsconn_flush(c);
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return;
    c->closing = 1;
    if (c->ready) {
        SSL_shutdown(c->ssl); /* close_notify */
        send_cipher(c);
    }
    FK_UV_MUST(uv_read_stop((uv_stream_t *)&c->tcp));
    c->shutdown_req.data = c;
    /* Still connecting: nothing to flush, and a shutdown would wait for the connect. */
    if (!c->started || uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, shutdown_done) < 0)
        close_handles(c);
}

static void alloc_cb(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    (void)h;
    (void)hint;
    if (!t_rbuf_busy && !t_rbuf)
        t_rbuf = t_alloc(RBUF_LEN);
    if (!t_rbuf_busy && t_rbuf) {
        t_rbuf_busy = 1;
        *buf = uv_buf_init((char *)t_rbuf, RBUF_LEN);
        return;
    }
    uint8_t *own = malloc(PBUF_LEN); /* nested read: a private buffer, freed in read_cb */
    *buf = uv_buf_init((char *)own, own ? PBUF_LEN : 0);
}

/* Give back what alloc_cb lent. */
static void rbuf_release(const uv_buf_t *buf)
{
    if (buf->base && (uint8_t *)buf->base == t_rbuf)
        t_rbuf_busy = 0;
    else
        free(buf->base);
}

static int check_alpn(fk_tlsconn *c)
{
    const unsigned char *p = NULL;
    unsigned int len = 0;
    SSL_get0_alpn_selected(c->ssl, &p, &len);
    return len == 2 && memcmp(p, "h2", 2) == 0;
}

static void handshake(fk_tlsconn *c)
{
    int r = SSL_do_handshake(c->ssl);
    if (r == 1) {
        if (!check_alpn(c)) {
            send_cipher(c);
            fail(c, "TLS handshake done but ALPN did not select h2 (not a gRPC peer)");
            return;
        }
        c->ready = 1;
        FK_UV_MUST(uv_timer_stop(&c->hs_timer));
        fk_tls_peer_from_ssl(c->ssl, &c->peer);
        send_cipher(c);
        if (c->cbs->on_ready)
            c->cbs->on_ready(c);
        return;
    }
    int e = SSL_get_error(c->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        send_cipher(c);
        return;
    }
    char why[320], full[384];
    fk_tls_error_string(c->ssl, why, sizeof why);
    snprintf(full, sizeof full, "TLS handshake failed: %s", why[0] ? why : "peer closed");
    send_cipher(c); /* let the alert reach the peer */
    fk_tlsconn_close(c, full);
}

/* Decrypt what OpenSSL can from the ciphertext at hand, into pbuf. */
static void read_plain_into(fk_tlsconn *c, uint8_t *pbuf)
{
    while (!c->closing) {
        int n = SSL_read(c->ssl, pbuf, (int)PBUF_LEN);
        if (n > 0) {
            if (c->cbs->on_data)
                c->cbs->on_data(c, pbuf, (size_t)n);
            continue;
        }
        int e = SSL_get_error(c->ssl, n);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
            break;
        if (e == SSL_ERROR_ZERO_RETURN) {
            fk_tlsconn_close(c, "peer sent close_notify");
            return;
        }
        char why[320], full[384];
        fk_tls_error_string(c->ssl, why, sizeof why);
        snprintf(full, sizeof full, "TLS read failed: %s", why);
        fail(c, full);
        return;
    }
    if (!c->closing)
        send_cipher(c);
}

static void read_plain(fk_tlsconn *c)
{
    if (!t_pbuf_busy && !t_pbuf)
        t_pbuf = t_alloc(PBUF_LEN);
    int shared = !t_pbuf_busy && t_pbuf;
    uint8_t *pbuf = shared ? t_pbuf : malloc(PBUF_LEN);
    if (!pbuf) {
        fail(c, "out of memory for a read buffer");
        return;
    }
    if (shared)
        t_pbuf_busy = 1;
    read_plain_into(c, pbuf);
    if (shared)
        t_pbuf_busy = 0;
    else
        free(pbuf);
}

static void read_data(fk_tlsconn *c, ssize_t n, const uv_buf_t *buf)
{
    if (n < 0) {
        char why[128];
        snprintf(why, sizeof why, "%s", n == UV_EOF ? "peer closed the connection"
                                                    : uv_strerror((int)n));
        if (!c->ready && n == UV_EOF)
            snprintf(why, sizeof why, "peer closed the connection during the TLS handshake");
        fail(c, why);
        return;
    }
    if (n == 0 || c->closing)
        return;
    if (c->cbs->on_rx && c->ready)
        c->cbs->on_rx(c);
    c->in_p = (const uint8_t *)buf->base;
    c->in_len = (size_t)n;
    if (c->ready && (size_t)n >= PBUF_LEN)
        start_streaming(c); /* a big read: a bulk transfer is coming in */
    if (!c->ready)
        handshake(c);
    if (c->ready && !c->closing)
        read_plain(c);
    c->in_len = 0; /* OpenSSL keeps any partial record itself */
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    read_data(s->data, n, buf);
    rbuf_release(buf);
}

static void hs_timeout(uv_timer_t *t)
{
    fk_tlsconn *c = t->data;
    char why[128];
    snprintf(why, sizeof why, "TLS handshake not finished within %llu ms",
             (unsigned long long)c->hs_timeout_ms);
    fail(c, why);
}

int fk_tlsconn_new(fk_tlsconn **out, uv_loop_t *loop, fk_tls_ctx *ctx, const fk_tlsconn_cbs *cbs,
                   void *ud, uint64_t hs_timeout_ms, fk_err *err)
{
    fk_tlsconn *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "out of memory for a connection");
    fk_memacct_add(FK_MEM_CONN, (long)sizeof *c);
    c->ssl = SSL_new(ctx->ssl);
    c->meth = BIO_meth_new(BIO_TYPE_SOURCE_SINK, "fedkern libuv"); /* fixed type: indexes run out */
    if (c->meth) {
        BIO_meth_set_write(c->meth, out_write);
        BIO_meth_set_read(c->meth, in_read);
        BIO_meth_set_ctrl(c->meth, bio_ctrl);
        c->rbio = BIO_new(c->meth);
        c->wbio = BIO_new(c->meth);
    }
    if (!c->ssl || !c->rbio || !c->wbio) {
        SSL_free(c->ssl);
        BIO_free(c->rbio);
        BIO_free(c->wbio);
        BIO_meth_free(c->meth);
        fk_memacct_add(FK_MEM_CONN, -(long)sizeof *c);
        free(c);
        return fk_err_set(err, FK_ENOMEM, "out of memory for TLS state");
    }
    BIO_set_data(c->rbio, c);
    BIO_set_data(c->wbio, c);
    BIO_set_init(c->rbio, 1);
    BIO_set_init(c->wbio, 1);
    SSL_set_bio(c->ssl, c->rbio, c->wbio);
    c->is_server = ctx->is_server;
    c->ctx = ctx;
    fk_tls_ctx_ref(ctx);
    c->cbs = cbs;
    c->ud = ud;
    c->hs_timeout_ms = hs_timeout_ms;
    FK_UV_MUST(uv_tcp_init(loop, &c->tcp));
    FK_UV_MUST(uv_timer_init(loop, &c->hs_timer));
    c->tcp.data = c->hs_timer.data = c;
    c->handles = 2;
    *out = c;
    return FK_OK;
}

static void start(fk_tlsconn *c)
{
    c->started = 1;
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        char ip[48] = "?";
        int port = 0;
        if (ss.ss_family == AF_INET) {
            FK_UV_MUST(uv_ip4_name((struct sockaddr_in *)&ss, ip, sizeof ip));
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        } else if (ss.ss_family == AF_INET6) {
            FK_UV_MUST(uv_ip6_name((struct sockaddr_in6 *)&ss, ip, sizeof ip));
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
        }
        snprintf(c->peer.addr, sizeof c->peer.addr, "%s:%d", ip, port);
    }
    FK_UV_MUST(uv_tcp_nodelay(&c->tcp, 1));
    FK_UV_MUST(uv_timer_start(&c->hs_timer, hs_timeout, c->hs_timeout_ms, 0));
    int rc = uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb);
    if (rc) {
        char why[96];
        snprintf(why, sizeof why, "cannot read from the socket: %s", uv_strerror(rc));
        fail(c, why);
        return;
    }
    if (!c->is_server)
        handshake(c);
}

int fk_tlsconn_accept(fk_tlsconn *c, uv_stream_t *listener, fk_err *err)
{
    int rc = uv_accept(listener, (uv_stream_t *)&c->tcp);
    if (rc < 0) {
        fail(c, "accept failed");
        return fk_err_set(err, FK_ENET, "accept failed: %s", uv_strerror(rc));
    }
    SSL_set_accept_state(c->ssl);
    start(c);
    return FK_OK;
}

int fk_tlsconn_adopt(fk_tlsconn *c, uv_os_sock_t fd, fk_err *err)
{
    int rc = uv_tcp_open(&c->tcp, fd);
    if (rc < 0) {
        close(fd); /* the handle did not take it */
        fail(c, "cannot use the accepted socket");
        return fk_err_set(err, FK_ENET, "cannot use an accepted socket: %s", uv_strerror(rc));
    }
    SSL_set_accept_state(c->ssl);
    start(c);
    return FK_OK;
}

static void connect_cb(uv_connect_t *req, int status)
{
    fk_tlsconn *c = req->data;
    free(req);
    if (c->closing)
        return;
    if (status < 0) {
        char why[160];
        snprintf(why, sizeof why, "TCP connect failed: %s", uv_strerror(status));
        fail(c, why);
        return;
    }
    start(c);
}

int fk_tlsconn_connect(fk_tlsconn *c, const struct sockaddr *addr, const char *server_name,
                       fk_err *err)
{
    SSL_set_connect_state(c->ssl);
    X509_VERIFY_PARAM *vp = SSL_get0_param(c->ssl);
    X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (X509_VERIFY_PARAM_set1_ip_asc(vp, server_name) != 1) { /* not an IP literal: a DNS name */
        if (SSL_set1_host(c->ssl, server_name) != 1 ||
            SSL_set_tlsext_host_name(c->ssl, server_name) != 1) {
            fail(c, "bad server name");
            return fk_err_set(err, FK_EINVAL, "server name '%s' is not a valid host name",
                              server_name);
        }
    }
    uv_connect_t *req = malloc(sizeof *req);
    if (!req) {
        fail(c, "out of memory");
        return fk_err_set(err, FK_ENOMEM, "out of memory connecting");
    }
    req->data = c;
    int rc = uv_tcp_connect(req, &c->tcp, addr, connect_cb);
    if (rc < 0) {
        free(req);
        fail(c, "connect refused");
        return fk_err_set(err, FK_ENET, "connect failed: %s", uv_strerror(rc));
    }
    return FK_OK;
}
