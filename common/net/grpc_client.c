/* gRPC client: an HTTP/2 client session (nghttp2) on tlsconn, unary calls. */
#include "common/net/grpc_client.h"

#include <nghttp2/nghttp2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/bigbuf.h"
#include "common/net/grpc_frame.h"
#include "common/net/tlsconn.h"

enum { SEND_HIGH_WATER = 1u << 20 }; /* stop producing frames above this many queued bytes */

typedef struct ccall ccall;
struct ccall {
    fk_grpc_client *cl;
    ccall *next, *prev;
    int32_t sid;
    char path[256];
    uint8_t prefix[5];
    const uint8_t *req;
    size_t req_len, read_off, sent_off;
    uint64_t timeout_ms;
    uv_timer_t timer;
    int http_status, grpc_status, ctype_ok, done, ended;
    char msg[256];
    fk_grpc_frame_parser frame;
    uint8_t *resp;
    size_t resp_len, resp_cap;
    int nmsgs, overflow, retries;
    fk_grpc_done cb;
    void *ud;
};

struct fk_grpc_client {
    uv_loop_t *loop;
    fk_net_limits lim;
    fk_tlsconn *tls;
    nghttp2_session *ng;
    ccall *calls;
    int up, closing, in_teardown;
    int busy, pump_again; /* inside nghttp2: sends wait */
    char why[384];
    fk_tls_peer peer;
    void (*on_state)(fk_grpc_client *, int, const char *, void *);
    void *ud;
    void (*on_closed)(void *);
    void *closed_ud;
    fk_bigbuf_cache cache; /* one idle large response buffer */
    uv_timer_t ka;         /* keepalive PINGs while calls wait */
    uint64_t last_rx, ping_sent;
    /* liveness probing (fk_grpc_client_liveness): 0 = off */
    uint64_t probe_ms, live_floor_ms;
    uint64_t rtt_ms;        /* PING round trip estimate; the handshake's time until the first */
    int rtt_measured;       /* a PING ACK has given a sample */
    uint64_t ping_at;       /* when the last PING went out */
    uint64_t conn_start_ms; /* TCP connect started (the handshake's time) */
    /* a host name: resolved on the loop, its addresses tried in turn */
    fk_tls_ctx *tls_ctx;
    uint64_t hs_timeout_ms;
    char server_name[256];
    uv_getaddrinfo_t gai;
    int resolving;
    struct addrinfo *addrs, *next_addr;
};

static void pump(fk_grpc_client *cl);
static void client_free(fk_grpc_client *cl);
static void keepalive(uv_timer_t *t);
static void ka_start(fk_grpc_client *cl);
static void send_ping(fk_grpc_client *cl);
static uint64_t live_deadline_ms(const fk_grpc_client *cl);

static void call_freed(uv_handle_t *h)
{
    ccall *c = h->data;
    fk_grpc_frame_close(&c->frame); /* the response buffer is ours, not the parser's */
    fk_bigbuf_free(c->resp, c->resp_cap);
    free(c);
}

static void call_unlink(ccall *c)
{
    fk_grpc_client *cl = c->cl;
    if (c->prev)
        c->prev->next = c->next;
    else if (cl->calls == c)
        cl->calls = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

/* Complete the call once: callback, stream detached, memory released. */
static void finish(ccall *c, int status, const char *msg)
{
    if (c->done)
        return;
    c->done = 1;
    fk_grpc_client *cl = c->cl;
    FK_UV_MUST(uv_timer_stop(&c->timer));
    if (c->sid > 0 && cl->ng) {
        nghttp2_session_set_stream_user_data(cl->ng, c->sid, NULL);
        /* Ended while either side still streams (deadline, limit, early answer): reset,
         * so nghttp2 stops reading the request buffer the caller may now free. */
        if (nghttp2_session_find_stream(cl->ng, c->sid) &&
            (!c->ended || nghttp2_session_get_stream_local_close(cl->ng, c->sid) == 0))
            nghttp2_submit_rst_stream(cl->ng, NGHTTP2_FLAG_NONE, c->sid, NGHTTP2_CANCEL);
    }
    call_unlink(c);
    int ok = status == FK_GRPC_OK;
    c->cb(c->ud, status, msg ? msg : "", ok ? (c->resp ? c->resp : (const uint8_t *)"") : NULL,
          ok ? c->resp_len : 0);
    fk_bigbuf_cache_put(&cl->cache, c->resp, c->resp_cap);
    c->resp = NULL;
    uv_close((uv_handle_t *)&c->timer, call_freed);
}

static void deadline_fired(uv_timer_t *t)
{
    ccall *c = t->data;
    fk_grpc_client *cl = c->cl;
    finish(c, FK_GRPC_DEADLINE_EXCEEDED, "deadline exceeded");
    pump(cl);
}

static ssize_t req_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t length,
                        uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)ng;
    (void)sid;
    (void)buf;
    (void)ud;
    ccall *c = src->ptr;
    size_t total = 5 + c->req_len, n = total - c->read_off;
    if (n > length)
        n = length;
    c->read_off += n;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (c->read_off == total)
        *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)n;
}

static int send_data_cb(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud)
{
    (void)ng;
    (void)frame;
    fk_grpc_client *cl = ud;
    ccall *c = src->ptr;
    if (fk_tlsconn_write(cl->tls, framehd, 9) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    while (length > 0) {
        size_t n;
        int rc;
        if (c->sent_off < 5) {
            n = 5 - c->sent_off < length ? 5 - c->sent_off : length;
            rc = fk_tlsconn_write(cl->tls, c->prefix + c->sent_off, n);
        } else {
            n = length;
            rc = fk_tlsconn_write(cl->tls, c->req + (c->sent_off - 5), n);
        }
        if (rc < 0)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        c->sent_off += n;
        length -= n;
    }
    return 0;
}

static ssize_t send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *ud)
{
    (void)ng;
    (void)flags;
    fk_grpc_client *cl = ud;
    if (fk_tlsconn_queued(cl->tls) > SEND_HIGH_WATER)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (fk_tlsconn_write(cl->tls, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

static ccall *stream_call(fk_grpc_client *cl, int32_t sid)
{
    return cl->ng ? nghttp2_session_get_stream_user_data(cl->ng, sid) : NULL;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)ng;
    (void)flags;
    ccall *c = stream_call(ud, frame->hd.stream_id);
    if (!c || frame->hd.type != NGHTTP2_HEADERS)
        return 0;
    if (namelen == 7 && !memcmp(name, ":status", 7)) {
        c->http_status = 0;
        for (size_t i = 0; i < valuelen && i < 3; i++)
            c->http_status = c->http_status * 10 + (value[i] - '0');
    } else if (namelen == 12 && !memcmp(name, "content-type", 12)) {
        c->ctype_ok = valuelen >= 16 && !memcmp(value, "application/grpc", 16);
    } else if (namelen == 11 && !memcmp(name, "grpc-status", 11)) {
        int s = 0;
        for (size_t i = 0; i < valuelen && i < 4; i++)
            s = value[i] >= '0' && value[i] <= '9' ? s * 10 + (value[i] - '0') : 2;
        c->grpc_status = valuelen ? s : FK_GRPC_UNKNOWN;
    } else if (namelen == 12 && !memcmp(name, "grpc-message", 12)) {
        fk_grpc_message_decode((const char *)value, valuelen, c->msg, sizeof c->msg);
    }
    return 0;
}

static int http_to_grpc(int http)
{
    switch (http) {
    case 400: return FK_GRPC_INTERNAL;
    case 401: return FK_GRPC_UNAUTHENTICATED;
    case 403: return FK_GRPC_PERMISSION_DENIED;
    case 404: return FK_GRPC_UNIMPLEMENTED;
    case 429: case 502: case 503: case 504: return FK_GRPC_UNAVAILABLE;
    default: return FK_GRPC_UNKNOWN;
    }
}

static void complete(ccall *c)
{
    char why[96];
    if (c->http_status != 200) {
        snprintf(why, sizeof why, "HTTP status %d from the server", c->http_status);
        finish(c, http_to_grpc(c->http_status), why);
    } else if (c->grpc_status < 0) {
        finish(c, FK_GRPC_INTERNAL, "response without grpc-status");
    } else if (c->grpc_status != FK_GRPC_OK) {
        finish(c, c->grpc_status, c->msg);
    } else if (!c->ctype_ok) {
        finish(c, FK_GRPC_INTERNAL, "response content-type is not application/grpc");
    } else if (c->nmsgs != 1 || fk_grpc_frame_partial(&c->frame)) {
        finish(c, FK_GRPC_INTERNAL,
               c->nmsgs == 0 && !fk_grpc_frame_partial(&c->frame) ? "OK response without a message"
                                                                   : "malformed response message");
    } else {
        finish(c, FK_GRPC_OK, "");
    }
}

/* A PING ACK carries the uv_now of its PING (our opaque data): a round-trip sample. The
 * first replaces the handshake's stand-in, later ones move the estimate a quarter of the way
 * (a moving average: one sample delayed by a busy peer does not stick, a slow link's steady
 * round trip does). */
static void ping_acked(fk_grpc_client *cl, const nghttp2_ping *ping)
{
    uint64_t sent;
    memcpy(&sent, ping->opaque_data, sizeof sent);
    uint64_t now = uv_now(cl->loop);
    if (sent > now || now - sent > 3600000u)
        return; /* not one of ours (or the clock wrapped): no sample */
    uint64_t rtt = now - sent;
    cl->rtt_ms = cl->rtt_measured ? (3 * cl->rtt_ms + rtt) / 4 : rtt;
    cl->rtt_measured = 1;
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    (void)ng;
    if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        ping_acked(ud, &frame->ping);
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    ccall *c = stream_call(ud, frame->hd.stream_id);
    if (c && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        c->ended = 1;
        complete(c);
    }
    return 0;
}

/* A response prefix passed the frame parser's checks (flag, max_message): one
 * buffer of the exact size. */
static int begin_message(void *ud, size_t len, uint8_t **buf)
{
    ccall *c = ud;
    if (c->resp || c->nmsgs > 0) {
        finish(c, FK_GRPC_INTERNAL, "more than one response message in a unary call");
        return FK_ESTATE;
    }
    c->resp = fk_bigbuf_cache_get(&c->cl->cache, len, &c->resp_cap);
    if (!c->resp) {
        finish(c, FK_GRPC_RESOURCE_EXHAUSTED, "out of memory for the response");
        return FK_ENOMEM;
    }
    c->resp_len = len;
    *buf = c->resp;
    return FK_OK;
}

/* The response message is complete (it already lies in c->resp). */
static int message_done(void *ud, uint8_t *msg, size_t len)
{
    (void)msg;
    (void)len;
    ((ccall *)ud)->nmsgs++;
    return FK_OK;
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)ng;
    (void)flags;
    fk_grpc_client *cl = ud;
    ccall *c = stream_call(cl, sid);
    if (!c || c->done || len == 0)
        return 0;
    if (c->nmsgs > 0) {
        finish(c, FK_GRPC_INTERNAL, "more than one response message in a unary call");
        return 0;
    }
    int rc = fk_grpc_frame_feed(&c->frame, data, len, message_done, c, NULL);
    if (c->done)
        return 0; /* begin_message finished it */
    if (rc == FK_ELIMIT) {
        char why[160];
        snprintf(why, sizeof why, "response message of %zu bytes exceeds the limit of %llu bytes",
                 c->frame.msg_len, (unsigned long long)cl->lim.max_message);
        finish(c, FK_GRPC_RESOURCE_EXHAUSTED, why);
    } else if (rc == FK_EFORMAT) {
        finish(c, FK_GRPC_INTERNAL, "compressed response but no compression was offered");
    } else if (rc != FK_OK) {
        finish(c, FK_GRPC_INTERNAL, "malformed response message");
    } else if (c->nmsgs > 0 && fk_grpc_frame_partial(&c->frame)) {
        finish(c, FK_GRPC_INTERNAL, "more than one response message in a unary call");
    }
    return 0;
}

static int submit(fk_grpc_client *cl, ccall *c);

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
    fk_grpc_client *cl = ud;
    ccall *c = stream_call(cl, sid);
    if (!c)
        return 0;
    /* REFUSED_STREAM: the server did not process it (e.g. we opened more streams
     * than its SETTINGS allow before they arrived): send it again, as gRPC does. */
    if (code == NGHTTP2_REFUSED_STREAM && c->retries < 5 && !c->resp && c->http_status == 0) {
        nghttp2_session_set_stream_user_data(ng, sid, NULL);
        c->retries++;
        c->sid = 0;
        c->read_off = c->sent_off = 0;
        fk_grpc_frame_close(&c->frame);
        submit(cl, c); /* on failure it finishes the call */
        return 0;
    }
    c->ended = 1;
    char why[96];
    snprintf(why, sizeof why, "stream closed by the server: %s", nghttp2_http2_strerror(code));
    finish(c, code == NGHTTP2_REFUSED_STREAM ? FK_GRPC_UNAVAILABLE
              : code == NGHTTP2_CANCEL       ? FK_GRPC_CANCELLED
                                             : FK_GRPC_INTERNAL,
           why);
    return 0;
}

static int submit(fk_grpc_client *cl, ccall *c)
{
    char timeout[24];
    fk_grpc_timeout_format(c->timeout_ms, timeout, sizeof timeout);
    nghttp2_nv hd[] = {
        {(uint8_t *)":method", (uint8_t *)"POST", 7, 4, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)":scheme", (uint8_t *)"https", 7, 5, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)":path", (uint8_t *)c->path, 5, strlen(c->path), NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)":authority", (uint8_t *)cl->peer.addr, 10, strlen(cl->peer.addr),
         NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"content-type", (uint8_t *)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"te", (uint8_t *)"trailers", 2, 8, NGHTTP2_NV_FLAG_NONE},
        {(uint8_t *)"grpc-timeout", (uint8_t *)timeout, 12, strlen(timeout), NGHTTP2_NV_FLAG_NONE},
    };
    nghttp2_data_provider dp = {.source.ptr = c, .read_callback = req_read};
    int32_t sid = nghttp2_submit_request(cl->ng, NULL, hd, c->timeout_ms ? 7 : 6, &dp, c);
    if (sid < 0) {
        finish(c, FK_GRPC_UNAVAILABLE, nghttp2_strerror(sid));
        return -1;
    }
    c->sid = sid;
    return 0;
}

static void fail_all(fk_grpc_client *cl, int status, const char *why)
{
    while (cl->calls)
        finish(cl->calls, status, why);
}

static void pump(fk_grpc_client *cl)
{
    if (!cl->ng || !cl->tls)
        return;
    if (cl->busy) { /* nghttp2 forbids re-entering it from its callbacks: send afterwards */
        cl->pump_again = 1;
        return;
    }
    cl->busy = 1;
    int rc;
    do {
        cl->pump_again = 0;
        rc = nghttp2_session_send(cl->ng);
    } while (rc == 0 && cl->pump_again && cl->ng);
    cl->busy = 0;
    if (rc != 0) {
        if (cl->tls)
            fk_tlsconn_close(cl->tls, "HTTP/2 send failed");
        return;
    }
    if (!cl->tls || !cl->ng)
        return;
    fk_tlsconn_flush(cl->tls);
    if (!nghttp2_session_want_read(cl->ng) && !nghttp2_session_want_write(cl->ng))
        fk_tlsconn_close(cl->tls, cl->closing ? "client closed"
                                              : "server ended the HTTP/2 session (GOAWAY)");
}

static int session_new(fk_grpc_client *cl)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -1;
    nghttp2_session_callbacks_set_send_callback(cb, send_cb);
    nghttp2_session_callbacks_set_send_data_callback(cb, send_data_cb);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    int rc = nghttp2_session_client_new(&cl->ng, cb, cl);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0)
        return -1;
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16u << 20},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 20},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
    };
    nghttp2_submit_settings(cl->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    nghttp2_session_set_local_window_size(cl->ng, NGHTTP2_FLAG_NONE, 0, 64u << 20);
    return 0;
}

static void tls_ready(fk_tlsconn *t)
{
    fk_grpc_client *cl = t->ud;
    char authority[64];
    snprintf(authority, sizeof authority, "%s", cl->peer.addr);
    cl->peer = t->peer;
    snprintf(cl->peer.addr, sizeof cl->peer.addr, "%s", authority);
    if (session_new(cl) != 0) {
        fk_tlsconn_close(t, "cannot create an HTTP/2 session");
        return;
    }
    cl->up = 1;
    cl->last_rx = uv_now(cl->loop);
    if (!cl->rtt_measured) /* TCP + TLS 1.3: about two round trips (and the crypto) */
        cl->rtt_ms = (cl->last_rx - cl->conn_start_ms) / 2;
    ka_start(cl);
    if (cl->probe_ms)
        send_ping(cl); /* a first round-trip sample */
    /* Calls queued while connecting go out now, oldest first. */
    ccall *last = cl->calls;
    while (last && last->next)
        last = last->next;
    for (ccall *c = last; c;) {
        ccall *prev = c->prev;
        if (c->sid == 0)
            submit(cl, c);
        c = prev;
    }
    if (cl->on_state)
        cl->on_state(cl, 1, "connected", cl->ud);
    pump(cl);
}

static void tls_data(fk_tlsconn *t, const uint8_t *p, size_t n)
{
    fk_grpc_client *cl = t->ud;
    if (!cl->ng)
        return;
    cl->last_rx = uv_now(cl->loop);
    cl->ping_sent = 0; /* any traffic proves the server alive */
    cl->busy = 1;
    ssize_t r = nghttp2_session_mem_recv(cl->ng, p, n);
    cl->busy = 0;
    if (r < 0) {
        char why[128];
        snprintf(why, sizeof why, "HTTP/2 protocol error from the server: %s",
                 nghttp2_strerror((int)r));
        fk_tlsconn_close(t, why);
        return;
    }
    pump(cl);
}

static void tls_writable(fk_tlsconn *t)
{
    pump(t->ud);
}

static void client_freed(uv_handle_t *h)
{
    fk_grpc_client *cl = h->data;
    void (*cb)(void *) = cl->on_closed;
    void *ud = cl->closed_ud;
    fk_bigbuf_cache_close(&cl->cache);
    if (cl->addrs)
        uv_freeaddrinfo(cl->addrs);
    fk_tls_ctx_unref(cl->tls_ctx);
    free(cl);
    if (cb)
        cb(ud);
}

/* Last step of closing: the keepalive timer goes, then the memory. */
static void client_free(fk_grpc_client *cl)
{
    uv_close((uv_handle_t *)&cl->ka, client_freed);
}

/* How long a PING may go without its ACK or any other byte before the connection counts as
 * stalled: four round trips as measured, at least the owner's floor. */
static uint64_t live_deadline_ms(const fk_grpc_client *cl)
{
    uint64_t d = 4 * cl->rtt_ms;
    return d > cl->live_floor_ms ? d : cl->live_floor_ms;
}

/* A PING whose opaque data is its send time (ping_acked reads the round trip from it). */
static void send_ping(fk_grpc_client *cl)
{
    uint64_t now = uv_now(cl->loop);
    uint8_t op[8];
    memcpy(op, &now, sizeof op);
    cl->ping_sent = cl->ping_at = now;
    nghttp2_submit_ping(cl->ng, NGHTTP2_FLAG_NONE, op);
    pump(cl);
}

/* The keepalive timer at the period its settings need (liveness: an eighth of the probe). */
static void ka_start(fk_grpc_client *cl)
{
    uint64_t period = 0;
    if (cl->probe_ms) {
        period = cl->probe_ms / 8;
    } else if (cl->lim.keepalive_ms) {
        period = cl->lim.keepalive_ms < cl->lim.keepalive_timeout_ms ? cl->lim.keepalive_ms
                                                                   : cl->lim.keepalive_timeout_ms;
        period /= 4;
    } else {
        FK_UV_MUST(uv_timer_stop(&cl->ka));
        return;
    }
    period = period < 5 ? 5 : period;
    FK_UV_MUST(uv_timer_start(&cl->ka, keepalive, period, period));
}

static void keepalive(uv_timer_t *t)
{
    fk_grpc_client *cl = t->data;
    uint64_t now = uv_now(cl->loop);
    if (!cl->ng || !cl->tls)
        return;
    if (!cl->calls)
        fk_tlsconn_trim(cl->tls);
    if (cl->probe_ms) {
        uint64_t limit = live_deadline_ms(cl);
        if (cl->ping_sent && now - cl->ping_sent >= limit) {
            char why[160];
            snprintf(why, sizeof why,
                     "no byte from the server (PING unanswered) for %llu ms, round trip %llu ms: "
                     "connection stalled",
                     (unsigned long long)(now - cl->ping_sent), (unsigned long long)cl->rtt_ms);
            fk_tlsconn_close(cl->tls, why);
            return;
        }
        /* after probe_ms of silence, and at least every 2 probe_ms for a fresh sample */
        if (!cl->ping_sent &&
            (now - cl->last_rx >= cl->probe_ms || now - cl->ping_at >= 2 * cl->probe_ms))
            send_ping(cl);
        return;
    }
    if (cl->ping_sent && now - cl->ping_sent >= cl->lim.keepalive_timeout_ms) {
        fk_tlsconn_close(cl->tls, "keepalive PING not answered: server unreachable");
        return;
    }
    /* Only while calls wait (long polls): idle clients do not ping, as gRPC servers expect. */
    if (cl->calls && !cl->ping_sent && now - cl->last_rx >= cl->lim.keepalive_ms) {
        cl->ping_sent = now;
        nghttp2_submit_ping(cl->ng, NGHTTP2_FLAG_NONE, NULL);
        pump(cl);
    }
}

FK_CHECKRETURN static int connect_next(fk_grpc_client *cl, fk_err *err);

void fk_grpc_client_liveness(fk_grpc_client *cl, uint64_t probe_ms, uint64_t floor_ms)
{
    int changed = cl->probe_ms != probe_ms;
    cl->probe_ms = probe_ms;
    cl->live_floor_ms = floor_ms;
    if (changed && cl->up && cl->ng && cl->tls)
        ka_start(cl);
}

/* The connection could not be made or has ended: fail the calls, tell the owner. */
static void conn_lost(fk_grpc_client *cl, const char *reason)
{
    int was_up = cl->up;
    cl->up = 0;
    cl->tls = NULL;
    FK_UV_MUST(uv_timer_stop(&cl->ka));
    snprintf(cl->why, sizeof cl->why, "%s", reason);
    if (!was_up && !cl->closing)
        fk_log(FK_LOG_WARN, "client_refused", "server=%s reason=\"%s\"", cl->peer.addr, reason);
    nghttp2_session_del(cl->ng);
    cl->ng = NULL;
    cl->in_teardown = 1; /* callbacks below may call fk_grpc_client_close */
    fail_all(cl, cl->closing ? FK_GRPC_CANCELLED : FK_GRPC_UNAVAILABLE, reason);
    if (!cl->closing && cl->on_state)
        cl->on_state(cl, 0, reason, cl->ud);
    cl->in_teardown = 0;
    if (cl->closing)
        client_free(cl);
}

static void tls_closed(fk_tlsconn *t, const char *reason)
{
    fk_grpc_client *cl = t->ud;
    fk_err err = {0};
    if (!t->started && !cl->closing && cl->next_addr) { /* TCP connect failed: next address */
        fk_log(FK_LOG_DEBUG, "client_next_address", "server=%s reason=\"%s\"", cl->peer.addr,
               reason);
        cl->tls = NULL;
        if (connect_next(cl, &err) == FK_OK)
            return;
        reason = err.msg;
    }
    conn_lost(cl, reason);
}

static const fk_tlsconn_cbs client_tls_cbs = {tls_ready, tls_data, tls_writable, tls_closed,
                                              NULL};

/* Start the TLS connection to addr (on failure tls_closed still runs). */
FK_CHECKRETURN static int connect_addr(fk_grpc_client *cl, const struct sockaddr *addr, fk_err *err)
{
    cl->conn_start_ms = uv_now(cl->loop);
    int rc = fk_tlsconn_new(&cl->tls, cl->loop, cl->tls_ctx, &client_tls_cbs, cl,
                            cl->hs_timeout_ms, err);
    if (rc != FK_OK) {
        cl->tls = NULL;
        return rc;
    }
    if (fk_tlsconn_connect(cl->tls, addr, cl->server_name, err) != FK_OK) {
        /* Not the caller's failure to handle: tls_closed runs and reports the reason. */
    }
    return FK_OK;
}

/* The next resolved IPv4/IPv6 address, if any is left. */
FK_CHECKRETURN static int connect_next(fk_grpc_client *cl, fk_err *err)
{
    while (cl->next_addr) {
        struct addrinfo *ai = cl->next_addr;
        cl->next_addr = ai->ai_next;
        if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
            return connect_addr(cl, ai->ai_addr, err);
    }
    return fk_err_set(err, FK_ENET, "no address of %s accepted a TCP connection", cl->peer.addr);
}

static void resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    fk_grpc_client *cl = req->data;
    cl->resolving = 0;
    cl->addrs = res;
    cl->next_addr = res;
    if (cl->closing) { /* closed while resolving */
        client_free(cl);
        return;
    }
    fk_err err = {0};
    if (status < 0) {
        fk_err_set(&err, FK_ENET, "cannot resolve the server host %s: %s", cl->peer.addr,
                   uv_strerror(status));
    } else if (connect_next(cl, &err) == FK_OK) {
        return;
    }
    conn_lost(cl, err.msg);
}

int fk_grpc_client_connect(fk_grpc_client **out, uv_loop_t *loop, const fk_grpc_client_config *cfg,
                           const char *host, int port, const char *server_name,
                           void (*on_state)(fk_grpc_client *, int, const char *, void *), void *ud,
                           fk_err *err)
{
    *out = NULL;
    if (!cfg->tls || cfg->tls->is_server)
        return fk_err_set(err, FK_EINVAL, "grpc client: a client TLS context is required");
    if (!host || !host[0] || port <= 0 || port > 65535)
        return fk_err_set(err, FK_EINVAL, "grpc client: need a host and a port in 1..65535");
    const char *name = server_name ? server_name : host;
    fk_grpc_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return fk_err_set(err, FK_ENOMEM, "grpc client: out of memory");
    if (strlen(name) >= sizeof cl->server_name) {
        free(cl);
        return fk_err_set(err, FK_EINVAL, "grpc client: server name '%s' is too long", name);
    }
    cl->loop = loop;
    cl->lim = cfg->limits;
    cl->on_state = on_state;
    cl->ud = ud;
    cl->tls_ctx = cfg->tls;
    fk_tls_ctx_ref(cl->tls_ctx);
    cl->hs_timeout_ms = cfg->limits.handshake_timeout_ms;
    snprintf(cl->server_name, sizeof cl->server_name, "%s", name);
    snprintf(cl->peer.addr, sizeof cl->peer.addr, "%s:%d", host, port);
    FK_UV_MUST(uv_timer_init(loop, &cl->ka));
    cl->ka.data = cl;
    struct sockaddr_storage ss;
    if (uv_ip4_addr(host, port, (struct sockaddr_in *)&ss) == 0 ||
        uv_ip6_addr(host, port, (struct sockaddr_in6 *)&ss) == 0) {
        int rc = connect_addr(cl, (struct sockaddr *)&ss, err);
        if (rc != FK_OK) {
            client_free(cl);
            return rc;
        }
        *out = cl;
        return FK_OK;
    }
    /* A DNS name (or localhost): resolve on the loop's thread pool, then try each address. */
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    cl->gai.data = cl;
    int rc = uv_getaddrinfo(loop, &cl->gai, resolved, host, portstr, &hints);
    if (rc != 0) {
        client_free(cl);
        return fk_err_set(err, FK_ENET, "grpc client: cannot resolve '%s': %s", host,
                          uv_strerror(rc));
    }
    cl->resolving = 1;
    *out = cl;
    return FK_OK;
}

int fk_grpc_client_call(fk_grpc_client *cl, const char *path, const uint8_t *req, size_t len,
                        uint64_t timeout_ms, fk_grpc_done done, void *ud)
{
    if (len > cl->lim.max_message || len > 0xffffffffu) {
        char why[128];
        snprintf(why, sizeof why, "request of %zu bytes exceeds the limit of %llu bytes", len,
                 (unsigned long long)cl->lim.max_message);
        done(ud, FK_GRPC_RESOURCE_EXHAUSTED, why, NULL, 0);
        return FK_ELIMIT;
    }
    if ((!cl->tls && !cl->resolving) || cl->closing) {
        done(ud, FK_GRPC_UNAVAILABLE, cl->why[0] ? cl->why : "client is closed", NULL, 0);
        return FK_ESTATE;
    }
    ccall *c = calloc(1, sizeof *c);
    if (!c) {
        done(ud, FK_GRPC_RESOURCE_EXHAUSTED, "out of memory", NULL, 0);
        return FK_ENOMEM;
    }
    c->cl = cl;
    fk_grpc_frame_init(&c->frame, cl->lim.max_message);
    fk_grpc_frame_set_alloc(&c->frame, begin_message);
    snprintf(c->path, sizeof c->path, "%s", path);
    c->req = req;
    c->req_len = len;
    fk_grpc_prefix_encode(c->prefix, (uint32_t)len);
    c->timeout_ms = timeout_ms;
    c->grpc_status = -1;
    c->cb = done;
    c->ud = ud;
    FK_UV_MUST(uv_timer_init(cl->loop, &c->timer));
    c->timer.data = c;
    c->next = cl->calls;
    if (cl->calls)
        cl->calls->prev = c;
    cl->calls = c;
    if (timeout_ms)
        FK_UV_MUST(uv_timer_start(&c->timer, deadline_fired, timeout_ms, 0));
    if (cl->up && submit(cl, c) == 0)
        pump(cl);
    return FK_OK;
}

void fk_grpc_client_close(fk_grpc_client *cl, void (*on_closed)(void *), void *ud)
{
    if (cl->closing)
        return;
    cl->closing = 1;
    cl->on_closed = on_closed;
    cl->closed_ud = ud;
    if (cl->in_teardown)
        return; /* tls_closed frees the client when its callbacks return */
    fail_all(cl, FK_GRPC_CANCELLED, "client closed");
    if (cl->resolving) {
        /* resolved() runs either way (UV_EBUSY: the lookup is under way) and frees the client */
        int rc = uv_cancel((uv_req_t *)&cl->gai);
        if (rc && rc != UV_EBUSY)
            fk_log(FK_LOG_ERROR, "libuv_failed", "call=uv_cancel error=\"%s\"", uv_strerror(rc));
        return;
    }
    if (cl->tls) {
        if (cl->ng) {
            nghttp2_session_terminate_session(cl->ng, NGHTTP2_NO_ERROR);
            pump(cl);
        }
        if (cl->tls)
            fk_tlsconn_close(cl->tls, "client closed");
        return;
    }
    client_free(cl);
}

const fk_tls_peer *fk_grpc_client_peer(const fk_grpc_client *cl)
{
    return &cl->peer;
}
