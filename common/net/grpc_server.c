/* gRPC server: HTTP/2 server sessions (nghttp2) on tlsconn, unary calls. */
#include "common/net/grpc_server.h"

#include <nghttp2/nghttp2.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/bigbuf.h"
#include "common/net/grpc_frame.h"
#include "common/net/grpc_server_int.h"
#include "common/net/memacct.h"
#include "common/net/tlsconn.h"

enum { SEND_HIGH_WATER = 1u << 20 }; /* stop producing frames above this many queued bytes */
enum { HPACK_TABLE = 1024 }; /* bytes of each HPACK dynamic table (RFC 7541 default 4096) */
/* A stream's receive window until its message is admitted: a small message fits whole, a large
 * one sends its prefix and waits (see upload budget below). */
enum { INITIAL_WINDOW = FK_GRPC_SMALL_MESSAGE + FK_GRPC_PREFIX_LEN };
/* An admitted message's stream window: large transfers do not stall on WINDOW_UPDATE round
 * trips; the message's whole size is already reserved. */
enum { ADMITTED_WINDOW = 16u << 20 };
/* Bytes a stream may have sent before admission (a peer that ignores our SETTINGS could send
 * up to the protocol's default window of 65535): more is a flow-control violation. */
enum { PEND_MAX = 256u << 10 };
/* With I/O threads a budget freed on one thread is seen by the others at their next poll. */
enum { WAKE_POLL_MS = 5 };

typedef struct method {
    char *path;
    fk_grpc_handler fn;
    void *ud;
    int release_on_return; /* request bytes freed when the handler returns */
} method;

/* The upload budget: bytes of large request messages admitted and not yet let go, over the
 * front server and all its I/O threads (atomics: each thread admits and releases its own). */
struct fk__grpc_budget {
    uint64_t limit; /* UINT64_MAX: no budget */
    _Atomic uint64_t held, peak, waits, waiting;
};

typedef struct h2conn h2conn;

struct fk_grpc_call {
    int remote; /* 0: a call on this loop's connection; proxies (grpc_pool.c) start with 1 */
    h2conn *conn;
    fk_grpc_call *next, *prev;
    int32_t stream_id;
    char path[256];
    int post, ctype_ok, bad_timeout;
    uint64_t deadline;
    uv_timer_t timer;
    int timer_init;
    /* request message */
    fk_grpc_frame_parser frame;
    uint8_t *req;
    size_t req_len, req_cap;
    int nmsgs, req_done, discarding;
    /* upload budget: bytes that came before the message was admitted (prefix and what the
     * initial window let through), the announced length, what is reserved */
    uint8_t *pend;
    size_t pend_len, pend_cap;
    uint64_t want, reserved;
    int admitted, waiting;
    fk_grpc_call *wnext, *wprev; /* the server's waiting list, oldest first */
    /* lifecycle */
    int handed, app_done, answered, stream_closed, cancelled;
    int in_handler, free_deferred; /* the handler runs: freeing waits until it returned */
    int keep_req; /* the handler keeps its request past its return (fk_grpc_call_keep_request) */
    void (*cancel_cb)(fk_grpc_call *, void *);
    void *cancel_ud;
    /* response */
    int status;
    char msg[256];
    uint8_t prefix[5];
    uint8_t *resp;
    size_t resp_len, read_off, sent_off;
    void (*resp_free)(void *);
};
/* fk__grpc_call_is_proxy reads the first int of any fk_grpc_call: both structs must start so */
_Static_assert(offsetof(struct fk_grpc_call, remote) == 0, "fk_grpc_call.remote must be first");

struct h2conn {
    fk_grpc_server *srv;
    h2conn *next, *prev;
    fk_tlsconn *tls; /* NULL for raw (fuzz) sessions */
    nghttp2_session *ng;
    fk_tls_peer peer;
    fk_grpc_call *calls;
    uv_timer_t tick;
    uint64_t mem, peak_mem, last_rx, ping_sent;
    uint64_t act_ms; /* when its peer's activity was last written (fk__grpc_activity) */
    int nstreams, draining, dead, tick_init;
    int busy, pump_again; /* inside nghttp2 (or a loop over calls): sends wait */
};

struct fk_grpc_server {
    uv_loop_t *loop;
    fk_net_limits lim;
    fk_tls_ctx *tls;
    uint64_t drain_ms;
    uv_tcp_t listener;
    uv_timer_t drain_timer;
    int listening, closing, handles_open;
    method *methods;
    int nmethods;
    h2conn *conns;
    fk__grpc_counters own; /* this server's counters, unless a pool gave it others */
    fk__grpc_counters *ctr;
    fk__grpc_activity *act; /* the front server's; workers write into it through ctr */
    int io_threads;        /* > 1: connections are served by the pool's I/O threads */
    fk__grpc_pool *pool;
    fk_bigbuf_cache cache; /* one idle large request buffer */
    fk__grpc_budget own_budget;          /* the front server's */
    fk__grpc_budget *budget;             /* own_budget, or the front server's for a worker */
    fk_grpc_call *wait_head, *wait_tail; /* large messages waiting for the budget, FIFO */
    uv_timer_t wake;                     /* admits waiters after a release (or polls) */
    void (*on_closed)(void *);
    void *closed_ud;
};

static void conn_pump(h2conn *c);
static const method *find_method(const fk_grpc_server *s, const char *path);
static int begin_message(void *ud, size_t len, uint8_t **buf);
static void conn_close(h2conn *c, const char *why);
static void maybe_server_done(fk_grpc_server *s);
static void wait_remove(fk_grpc_server *s, fk_grpc_call *call);
static void wake_soon(fk_grpc_server *s);
static void pend_free(fk_grpc_call *call);
static void admit(h2conn *c, fk_grpc_call *call);

/* ---- peer activity --------------------------------------------------------- */

/* The last bytes from each peer identity, written by whichever thread owns a connection
 * (at most every ACT_WRITE_MS per connection, and at its close), read by the engine loop.
 * One entry per identity ever seen, never removed (as the service's client index): open
 * addressing, a power of two slots. Times are uv_hrtime milliseconds: one clock for all
 * the threads' loops. */
enum { ACT_WRITE_MS = 50 };

typedef struct act_ent {
    char id[FK_IDENTITY_CAP];
    uint64_t ms;
} act_ent;

struct fk__grpc_activity {
    uv_mutex_t mu;
    act_ent *e;
    size_t slots, n;
};

static uint64_t act_now(void)
{
    return uv_hrtime() / 1000000u;
}

static size_t act_hash(const char *id)
{
    size_t h = 1469598103934665603u;
    for (; *id; id++)
        h = (h ^ (unsigned char)*id) * 1099511628211u;
    return h;
}

static act_ent *act_slot(act_ent *e, size_t slots, const char *id)
{
    size_t i = act_hash(id) & (slots - 1);
    while (e[i].id[0] && strcmp(e[i].id, id))
        i = (i + 1) & (slots - 1);
    return &e[i];
}

/* Note bytes from id now (out of memory: not noted, the session then relies on its calls). */
static void act_note(fk__grpc_activity *a, const char *id, uint64_t now)
{
    if (!a || !id[0])
        return;
    uv_mutex_lock(&a->mu);
    if ((a->n + 1) * 2 > a->slots) {
        size_t slots = a->slots ? 2 * a->slots : 64;
        act_ent *e = calloc(slots, sizeof *e);
        if (!e) {
            uv_mutex_unlock(&a->mu);
            return;
        }
        for (size_t i = 0; i < a->slots; i++)
            if (a->e[i].id[0])
                *act_slot(e, slots, a->e[i].id) = a->e[i];
        free(a->e);
        a->e = e;
        a->slots = slots;
    }
    act_ent *x = act_slot(a->e, a->slots, id);
    if (!x->id[0]) {
        snprintf(x->id, sizeof x->id, "%s", id);
        a->n++;
    }
    if (now > x->ms)
        x->ms = now;
    uv_mutex_unlock(&a->mu);
}

uint64_t fk_grpc_server_peer_idle_ms(fk_grpc_server *srv, const char *id)
{
    fk__grpc_activity *a = srv->act;
    uint64_t idle = UINT64_MAX;
    if (!a || !id[0])
        return idle;
    uint64_t now = act_now();
    uv_mutex_lock(&a->mu);
    if (a->slots) {
        const act_ent *x = act_slot(a->e, a->slots, id);
        if (x->id[0])
            idle = now > x->ms ? now - x->ms : 0;
    }
    uv_mutex_unlock(&a->mu);
    return idle;
}

fk__grpc_activity *fk__grpc_server_activity(const fk_grpc_server *s)
{
    return s->act;
}

fk__grpc_budget *fk__grpc_server_budget(const fk_grpc_server *s)
{
    return s->budget;
}

/* Ciphertext from the connection's peer (tlsconn's on_rx). */
static void conn_activity(h2conn *c, int force)
{
    uint64_t now = act_now();
    if (!force && now - c->act_ms < ACT_WRITE_MS)
        return;
    c->act_ms = now;
    act_note(c->srv->act, c->peer.id, now);
}

/* ---- calls ---------------------------------------------------------------- */

static void call_free_now(fk_grpc_call *call)
{
    if (call->resp && call->resp_free)
        call->resp_free(call->resp);
    fk_grpc_frame_close(&call->frame); /* the request buffer is ours, not the parser's */
    fk_bigbuf_free(call->req, call->req_cap);
    if (call->pend)
        fk_memacct_add(FK_MEM_CALL, -(long)call->pend_cap);
    free(call->pend);
    fk_memacct_add(FK_MEM_CALL, -(long)sizeof *call);
    free(call);
}

static void call_timer_closed(uv_handle_t *h)
{
    call_free_now(h->data);
}

static void call_unlink(fk_grpc_call *call)
{
    h2conn *c = call->conn;
    if (!c)
        return;
    if (call->prev)
        call->prev->next = call->next;
    else
        c->calls = call->next;
    if (call->next)
        call->next->prev = call->prev;
    c->mem -= call->req ? call->req_len : 0;
    call->conn = NULL;
    if (call->waiting)
        wait_remove(c->srv, call);
    /* The connection lets go of the call: its reservation goes back to the budget (a handler
     * that still holds the request bytes after its connection died keeps them uncounted). */
    if (call->reserved) {
        atomic_fetch_sub_explicit(&c->srv->budget->held, call->reserved, memory_order_relaxed);
        call->reserved = 0;
        wake_soon(c->srv);
    }
}

/* Free when the stream is gone and the application has let go of the handle. */
static void call_maybe_free(fk_grpc_call *call)
{
    if (!call->stream_closed || !call->app_done)
        return;
    if (call->in_handler) { /* dispatch frees it once the handler has returned */
        call->free_deferred = 1;
        return;
    }
    h2conn *c = call->conn;
    call_unlink(call);
    if (c && call->req) { /* the next large message on this server can reuse the pages */
        fk_bigbuf_cache_put(&c->srv->cache, call->req, call->req_cap);
        call->req = NULL;
    }
    if (call->timer_init) {
        FK_UV_MUST(uv_timer_stop(&call->timer));
        uv_close((uv_handle_t *)&call->timer, call_timer_closed);
    } else {
        call_free_now(call);
    }
}

static void call_cancel(fk_grpc_call *call)
{
    if (call->cancelled || !call->handed || call->app_done)
        return;
    call->cancelled = 1;
    if (call->cancel_cb)
        call->cancel_cb(call, call->cancel_ud);
}

/* Stream gone: a call the handler still holds is cancelled (its reply frees it),
 * anything else is freed now. */
static void release_call(fk_grpc_call *call)
{
    if (call->handed && !call->app_done)
        call_cancel(call);
    else
        call_maybe_free(call);
}

static ssize_t resp_read(nghttp2_session *ng, int32_t sid, uint8_t *buf, size_t length,
                         uint32_t *flags, nghttp2_data_source *src, void *ud)
{
    (void)buf;
    (void)ud;
    fk_grpc_call *call = src->ptr;
    size_t total = 5 + call->resp_len, n = total - call->read_off;
    if (n > length)
        n = length;
    call->read_off += n;
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
    if (call->read_off == total) {
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv tr[] = {{(uint8_t *)"grpc-status", (uint8_t *)"0", 11, 1, NGHTTP2_NV_FLAG_NONE}};
        if (nghttp2_submit_trailer(ng, sid, tr, 1) != 0)
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    }
    return (ssize_t)n;
}

static int conn_write(h2conn *c, const uint8_t *p, size_t n)
{
    if (!c->tls)
        return 0; /* raw session: output is discarded */
    return fk_tlsconn_write(c->tls, p, n);
}

static int send_data_cb(nghttp2_session *ng, nghttp2_frame *frame, const uint8_t *framehd,
                        size_t length, nghttp2_data_source *src, void *ud)
{
    (void)ng;
    (void)frame;
    h2conn *c = ud;
    fk_grpc_call *call = src->ptr;
    if (conn_write(c, framehd, 9) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    while (length > 0) {
        size_t n;
        if (call->sent_off < 5) {
            n = 5 - call->sent_off < length ? 5 - call->sent_off : length;
            if (conn_write(c, call->prefix + call->sent_off, n) < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        } else {
            n = length;
            if (conn_write(c, call->resp + (call->sent_off - 5), n) < 0)
                return NGHTTP2_ERR_CALLBACK_FAILURE;
        }
        call->sent_off += n;
        length -= n;
    }
    return 0;
}

#define NV(name, value) \
    {(uint8_t *)(name), (uint8_t *)(value), sizeof(name) - 1, strlen(value), NGHTTP2_NV_FLAG_NONE}

/* Send the answer on the stream (status, message, optional body); idempotent. */
static void call_answer(fk_grpc_call *call, int status, const char *msg, uint8_t *bytes,
                        size_t len, void (*free_fn)(void *))
{
    h2conn *c = call->conn;
    if (call->answered || call->stream_closed || !c || c->dead) {
        if (bytes && free_fn)
            free_fn(bytes);
        return;
    }
    call->answered = 1;
    call->status = status;
    const method *m = find_method(c->srv, call->path);
    fk__grpc_counters *ctr = c->srv->ctr;
    int mi = m ? (int)(m - c->srv->methods) : -1;
    if (m && mi < ctr->nmethods && status >= 0 && status < FK_GRPC_N_STATUS)
        fk__ctr_add(&ctr->answered[mi * FK_GRPC_N_STATUS + status], 1);
    if (call->timer_init)
        FK_UV_MUST(uv_timer_stop(&call->timer));
    int rc;
    if (status == FK_GRPC_OK) {
        call->resp = bytes;
        call->resp_len = len;
        call->resp_free = free_fn;
        fk_grpc_prefix_encode(call->prefix, (uint32_t)len);
        nghttp2_nv hd[] = {NV(":status", "200"), NV("content-type", "application/grpc")};
        nghttp2_data_provider dp = {.source.ptr = call, .read_callback = resp_read};
        rc = nghttp2_submit_response(c->ng, call->stream_id, hd, 2, &dp);
    } else {
        if (bytes && free_fn)
            free_fn(bytes);
        char code[8];
        snprintf(code, sizeof code, "%d", status);
        fk_grpc_message_encode(msg ? msg : "", call->msg, sizeof call->msg);
        nghttp2_nv hd[] = {NV(":status", "200"), NV("content-type", "application/grpc"),
                           NV("grpc-status", code), NV("grpc-accept-encoding", "identity"),
                           NV("grpc-message", call->msg)};
        if (status != FK_GRPC_UNIMPLEMENTED) /* accept-encoding only where it explains */
            hd[3] = hd[4];
        size_t n = 3 + (status == FK_GRPC_UNIMPLEMENTED) + (call->msg[0] != 0);
        rc = nghttp2_submit_response(c->ng, call->stream_id, hd, n, NULL);
    }
    if (rc != 0)
        nghttp2_submit_rst_stream(c->ng, NGHTTP2_FLAG_NONE, call->stream_id, NGHTTP2_INTERNAL_ERROR);
    if (status != FK_GRPC_OK && status != FK_GRPC_CANCELLED)
        fk_log(FK_LOG_DEBUG, "grpc_status", "peer=%s path=%s status=%s msg=\"%s\"", c->peer.addr,
               call->path, fk_grpc_status_name(status), msg ? msg : "");
}

static void deadline_fired(uv_timer_t *t)
{
    fk_grpc_call *call = t->data;
    h2conn *c = call->conn;
    call_answer(call, FK_GRPC_DEADLINE_EXCEEDED, "deadline exceeded", NULL, 0, NULL);
    call_cancel(call);
    if (c)
        conn_pump(c);
}

static int reply(fk_grpc_call *call, int status, const char *msg, uint8_t *bytes, size_t len,
                 void (*free_fn)(void *))
{
    /* One reply per handed call: after it the server owns the call again and frees it once
     * the stream is gone, so a second reply would touch freed memory. */
    assert(call->handed && !call->app_done);
    int was_cancelled = call->cancelled;
    h2conn *c = call->conn;
    call_answer(call, status, msg, bytes, len, free_fn);
    call->app_done = 1;
    call_maybe_free(call);
    if (c && !c->dead)
        conn_pump(c);
    return was_cancelled ? FK_ESTATE : FK_OK;
}

int fk_grpc_call_reply(fk_grpc_call *call, int status, const char *msg, const uint8_t *bytes,
                       size_t len)
{
    if (fk__grpc_call_is_proxy(call))
        return fk__grpc_proxy_reply(call, status, msg, (uint8_t *)bytes, len, NULL, 1);
    uint8_t *copy = NULL;
    if (status == FK_GRPC_OK && !call->answered && !call->cancelled) {
        copy = malloc(len ? len : 1);
        if (!copy)
            return reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory", NULL, 0, NULL);
        if (len)
            memcpy(copy, bytes, len);
    }
    return reply(call, status, msg, copy, len, free);
}

int fk_grpc_call_reply_owned(fk_grpc_call *call, int status, const char *msg, uint8_t *bytes,
                             size_t len, void (*free_fn)(void *))
{
    if (fk__grpc_call_is_proxy(call))
        return fk__grpc_proxy_reply(call, status, msg, bytes, len, free_fn, 0);
    return reply(call, status, msg, bytes, len, free_fn);
}

int fk_grpc_call_cancelled(const fk_grpc_call *call)
{
    if (fk__grpc_call_is_proxy(call))
        return fk__grpc_proxy_cancelled(call);
    return call->cancelled;
}

const char *fk_grpc_call_method(const fk_grpc_call *call)
{
    if (fk__grpc_call_is_proxy(call))
        return fk__grpc_proxy_method(call);
    return call->path;
}

void fk_grpc_call_on_cancel(fk_grpc_call *call, void (*cb)(fk_grpc_call *, void *), void *ud)
{
    if (fk__grpc_call_is_proxy(call)) {
        fk__grpc_proxy_on_cancel(call, cb, ud);
        return;
    }
    call->cancel_cb = cb;
    call->cancel_ud = ud;
}

/* ---- upload budget --------------------------------------------------------- */

/* Reserve n bytes; a message larger than what is free waits, except when nothing is held
 * (so one message larger than the whole budget still proceeds, alone). */
static int budget_take(fk__grpc_budget *b, uint64_t n)
{
    uint64_t cur = atomic_load_explicit(&b->held, memory_order_relaxed);
    do {
        if (cur && (cur > b->limit || n > b->limit - cur))
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(&b->held, &cur, cur + n, memory_order_relaxed,
                                                    memory_order_relaxed));
    uint64_t pk = atomic_load_explicit(&b->peak, memory_order_relaxed);
    while (cur + n > pk && !atomic_compare_exchange_weak_explicit(
                               &b->peak, &pk, cur + n, memory_order_relaxed, memory_order_relaxed))
        ;
    return 1;
}

static void wait_add(fk_grpc_server *s, fk_grpc_call *call)
{
    assert(!call->waiting);
    call->waiting = 1;
    call->wnext = NULL;
    call->wprev = s->wait_tail;
    if (s->wait_tail)
        s->wait_tail->wnext = call;
    else
        s->wait_head = call;
    s->wait_tail = call;
    atomic_fetch_add_explicit(&s->budget->waits, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->budget->waiting, 1, memory_order_relaxed);
    if (s->ctr != &s->own) /* an I/O thread: releases on the other threads are polled for */
        wake_soon(s);
}

static void wait_remove(fk_grpc_server *s, fk_grpc_call *call)
{
    assert(call->waiting);
    call->waiting = 0;
    if (call->wprev)
        call->wprev->wnext = call->wnext;
    else
        s->wait_head = call->wnext;
    if (call->wnext)
        call->wnext->wprev = call->wprev;
    else
        s->wait_tail = call->wprev;
    call->wnext = call->wprev = NULL;
    atomic_fetch_sub_explicit(&s->budget->waiting, 1, memory_order_relaxed);
}

/* The request bytes are no longer needed: free them and give their reservation back. */
static void request_release(fk_grpc_call *call)
{
    h2conn *c = call->conn;
    if (call->req) {
        if (c) {
            c->mem -= call->req_len;
            fk_bigbuf_cache_put(&c->srv->cache, call->req, call->req_cap);
        } else {
            fk_bigbuf_free(call->req, call->req_cap);
        }
        call->req = NULL;
        call->req_cap = 0;
    }
    if (c && call->reserved) {
        atomic_fetch_sub_explicit(&c->srv->budget->held, call->reserved, memory_order_relaxed);
        call->reserved = 0;
        wake_soon(c->srv);
    }
}

void fk_grpc_call_keep_request(fk_grpc_call *call)
{
    if (fk__grpc_call_is_proxy(call)) {
        fk__grpc_proxy_keep_request(call);
        return;
    }
    assert(call->in_handler); /* only the handler can say what it does with its request */
    call->keep_req = 1;
}

void fk_grpc_call_release_request(fk_grpc_call *call)
{
    if (fk__grpc_call_is_proxy(call)) {
        fk__grpc_proxy_release_request(call);
        return;
    }
    assert(!call->in_handler && !call->app_done); /* after the reply the call may be gone */
    request_release(call);
}

/* ---- request handling ----------------------------------------------------- */

static fk_grpc_call *stream_call(h2conn *c, int32_t sid)
{
    return nghttp2_session_get_stream_user_data(c->ng, sid);
}

/* Refuse the request early; remaining DATA is dropped and the stream reset after the answer. */
static void refuse(fk_grpc_call *call, int status, const char *msg)
{
    call->discarding = 1;
    call_answer(call, status, msg, NULL, 0, NULL);
}

static const method *find_method(const fk_grpc_server *s, const char *path)
{
    for (int i = 0; i < s->nmethods; i++)
        if (!strcmp(s->methods[i].path, path))
            return &s->methods[i];
    return NULL;
}

static void dispatch(h2conn *c, fk_grpc_call *call)
{
    if (call->discarding || call->answered)
        return;
    if (call->nmsgs != 1 || fk_grpc_frame_partial(&call->frame)) {
        refuse(call, FK_GRPC_INTERNAL,
               call->nmsgs == 0 ? "unary call without a request message" : "truncated request message");
        return;
    }
    const method *m = find_method(c->srv, call->path);
    if (!m) {
        refuse(call, FK_GRPC_UNIMPLEMENTED, "method not implemented");
        return;
    }
    fk__ctr_add(&c->srv->ctr->calls, 1);
    assert(!call->handed && call->app_done); /* a stream's request is handed out once */
    call->handed = 1;
    call->app_done = 0;
    call->in_handler = 1;
    m->fn(call, &c->peer, call->req ? call->req : (const uint8_t *)"", call->req_len, call->deadline,
          m->ud);
    call->in_handler = 0;
    if (m->release_on_return && !call->keep_req)
        request_release(call);
    if (call->free_deferred) {
        call->free_deferred = 0;
        call_maybe_free(call);
    }
}

static int on_begin_headers(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    h2conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    fk_grpc_call *call = calloc(1, sizeof *call);
    if (call)
        fk_memacct_add(FK_MEM_CALL, (long)sizeof *call);
    if (!call)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    call->conn = c;
    call->stream_id = frame->hd.stream_id;
    fk_grpc_frame_init(&call->frame, c->srv->lim.max_message);
    fk_grpc_frame_set_alloc(&call->frame, begin_message);
    call->app_done = 1; /* until handed to a handler, the server alone owns it */
    call->next = c->calls;
    if (c->calls)
        c->calls->prev = call;
    c->calls = call;
    c->nstreams++;
    nghttp2_session_set_stream_user_data(ng, frame->hd.stream_id, call);
    return 0;
}

static int on_header(nghttp2_session *ng, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, uint8_t flags, void *ud)
{
    (void)flags;
    h2conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    fk_grpc_call *call = nghttp2_session_get_stream_user_data(ng, frame->hd.stream_id);
    if (!call)
        return 0;
    if (namelen == 5 && !memcmp(name, ":path", 5)) {
        snprintf(call->path, sizeof call->path, "%.*s", (int)valuelen, (const char *)value);
    } else if (namelen == 7 && !memcmp(name, ":method", 7)) {
        call->post = valuelen == 4 && !memcmp(value, "POST", 4);
    } else if (namelen == 12 && !memcmp(name, "content-type", 12)) {
        call->ctype_ok = valuelen >= 16 && !memcmp(value, "application/grpc", 16) &&
                         (valuelen == 16 || value[16] == '+' || value[16] == ';');
    } else if (namelen == 12 && !memcmp(name, "grpc-timeout", 12)) {
        uint64_t ms;
        if (fk_grpc_timeout_parse((const char *)value, valuelen, &ms) == 0)
            call->deadline = uv_now(c->srv->loop) + (ms ? ms : 1);
        else
            call->bad_timeout = 1;
    }
    return 0;
}

static void start_deadline(h2conn *c, fk_grpc_call *call)
{
    if (!call->deadline)
        return;
    FK_UV_MUST(uv_timer_init(c->srv->loop, &call->timer));
    call->timer.data = call;
    call->timer_init = 1;
    uint64_t now = uv_now(c->srv->loop);
    FK_UV_MUST(uv_timer_start(&call->timer, deadline_fired,
                              call->deadline > now ? call->deadline - now : 0, 0));
}

static void headers_done(h2conn *c, fk_grpc_call *call)
{
    if (!call->post || !call->ctype_ok) {
        call->discarding = 1;
        call->answered = 1;
        /* Not gRPC at all: plain HTTP answer as the spec asks (415 for a wrong content type). */
        nghttp2_nv hd[] = {NV(":status", call->post ? "415" : "405")};
        nghttp2_submit_response(c->ng, call->stream_id, hd, 1, NULL);
        return;
    }
    if (call->bad_timeout) {
        refuse(call, FK_GRPC_INVALID_ARGUMENT, "malformed grpc-timeout header");
        return;
    }
    if (c->draining) {
        refuse(call, FK_GRPC_UNAVAILABLE, "server is shutting down");
        return;
    }
    if (!find_method(c->srv, call->path)) {
        refuse(call, FK_GRPC_UNIMPLEMENTED, "method not implemented");
        return;
    }
    start_deadline(c, call);
}

static int on_frame_recv(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    (void)ng;
    h2conn *c = ud;
    if (frame->hd.type == NGHTTP2_GOAWAY)
        fk_log(FK_LOG_DEBUG, "h2_goaway_recv", "peer=%s code=%u", c->peer.addr, frame->goaway.error_code);
    if (frame->hd.type == NGHTTP2_RST_STREAM)
        fk_log(FK_LOG_DEBUG, "h2_rst_recv", "peer=%s stream=%d code=%u", c->peer.addr, frame->hd.stream_id, frame->rst_stream.error_code);
    if (frame->hd.type == NGHTTP2_PING && (frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        c->ping_sent = 0;
        return 0;
    }
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA)
        return 0;
    fk_grpc_call *call = stream_call(c, frame->hd.stream_id);
    if (!call)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_REQUEST)
        headers_done(c, call);
    if (frame->hd.flags & NGHTTP2_FLAG_END_STREAM) {
        call->req_done = 1;
        if (call->waiting) { /* ended before its announced length could have come */
            wait_remove(c->srv, call);
            pend_free(call);
            refuse(call, FK_GRPC_INTERNAL, "truncated request message");
            return 0;
        }
        if (!call->admitted && !call->discarding && !call->answered)
            admit(c, call); /* a short or empty body: the parser says what is wrong with it */
        dispatch(c, call);
    }
    return 0;
}

/* A request prefix passed the frame parser's checks (flag, max_message): take it
 * within the connection's memory limit, in one buffer of the exact size. */
static int begin_message(void *ud, size_t len, uint8_t **buf)
{
    fk_grpc_call *call = ud;
    h2conn *c = call->conn;
    const fk_net_limits *lim = &c->srv->lim;
    if (call->req || call->nmsgs > 0) {
        refuse(call, FK_GRPC_INTERNAL, "more than one request message in a unary call");
        return FK_ESTATE;
    }
    if (c->mem + len > lim->max_conn_memory) {
        char why[200];
        snprintf(why, sizeof why, "connection memory limit of %llu bytes reached",
                 (unsigned long long)lim->max_conn_memory);
        fk_log(FK_LOG_WARN, "grpc_refused", "peer=%s path=%s reason=\"%s\"", c->peer.addr,
               call->path, why);
        refuse(call, FK_GRPC_RESOURCE_EXHAUSTED, why);
        return FK_ELIMIT;
    }
    call->req = fk_bigbuf_cache_get(&c->srv->cache, len, &call->req_cap);
    if (!call->req) {
        refuse(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory");
        return FK_ENOMEM;
    }
    call->req_len = len;
    c->mem += len;
    if (c->mem > c->peak_mem)
        c->peak_mem = c->mem;
    if (c->mem > fk__ctr_get(&c->srv->ctr->peak_conn_memory))
        atomic_store_explicit(&c->srv->ctr->peak_conn_memory, c->mem, memory_order_relaxed);
    *buf = call->req;
    return FK_OK;
}

/* The request message is complete (it already lies in call->req). */
static int message_done(void *ud, uint8_t *msg, size_t len)
{
    (void)msg;
    (void)len;
    fk_grpc_call *call = ud;
    call->nmsgs++;
    return FK_OK;
}

/* The frame parser refused a prefix: answer the way gRPC asks. */
static void frame_refused(h2conn *c, fk_grpc_call *call, int rc)
{
    if (call->answered) /* begin_message already answered */
        return;
    if (rc == FK_ELIMIT) {
        char why[200];
        fk__ctr_add(&c->srv->ctr->oversized_refused, 1);
        snprintf(why, sizeof why, "request message of %zu bytes exceeds the limit of %llu bytes",
                 call->frame.msg_len, (unsigned long long)c->srv->lim.max_message);
        fk_log(FK_LOG_WARN, "grpc_refused", "peer=%s path=%s reason=\"%s\" allocated=0",
               c->peer.addr, call->path, why);
        refuse(call, FK_GRPC_RESOURCE_EXHAUSTED, why);
    } else if (rc == FK_EFORMAT && call->frame.hdr[0] == 1) {
        /* gRPC: a message compressed with an encoding the server does not support is
         * UNIMPLEMENTED, with grpc-accept-encoding listing what it takes (identity) */
        refuse(call, FK_GRPC_UNIMPLEMENTED,
               "compressed messages are not supported (grpc-accept-encoding: identity); send "
               "them uncompressed");
    } else if (rc == FK_EFORMAT) {
        refuse(call, FK_GRPC_INTERNAL, "invalid compressed-flag byte in the message prefix");
    } else {
        refuse(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory");
    }
}

/* Bytes of the request message, in order, once the message is admitted. */
static void feed(h2conn *c, fk_grpc_call *call, const uint8_t *data, size_t len)
{
    if (len == 0 || call->discarding || call->answered)
        return;
    if (call->nmsgs > 0) { /* unary: nothing may follow the request message */
        refuse(call, FK_GRPC_INTERNAL, "more than one request message in a unary call");
        return;
    }
    int rc = fk_grpc_frame_feed(&call->frame, data, len, message_done, call, NULL);
    if (rc != FK_OK)
        frame_refused(c, call, rc);
    else if (call->nmsgs > 0 && fk_grpc_frame_partial(&call->frame))
        refuse(call, FK_GRPC_INTERNAL, "more than one request message in a unary call");
}

static void pend_free(fk_grpc_call *call)
{
    if (call->pend)
        fk_memacct_add(FK_MEM_CALL, -(long)call->pend_cap);
    free(call->pend);
    call->pend = NULL;
    call->pend_len = call->pend_cap = 0;
}

/* The stream's bytes so far go to the frame parser (which allocates the message buffer at the
 * prefix); from now on its window opens as bytes arrive, and wide for a large message. */
static void admit(h2conn *c, fk_grpc_call *call)
{
    call->admitted = 1;
    uint8_t *p = call->pend;
    size_t n = call->pend_len;
    call->pend = NULL;
    size_t cap = call->pend_cap;
    call->pend_len = call->pend_cap = 0;
    if (c->ng) {
        (void)nghttp2_session_consume_stream(c->ng, call->stream_id, n);
        uint64_t want = call->want + FK_GRPC_PREFIX_LEN;
        if (call->want <= c->srv->lim.max_message && want > INITIAL_WINDOW)
            (void)nghttp2_session_set_local_window_size(
                c->ng, NGHTTP2_FLAG_NONE, call->stream_id,
                (int32_t)(want < ADMITTED_WINDOW ? want : ADMITTED_WINDOW));
    }
    feed(c, call, p, n);
    if (p)
        fk_memacct_add(FK_MEM_CALL, -(long)cap);
    free(p);
}

/* Admit the oldest waiting messages that fit the budget now. */
static void wake_fired(uv_timer_t *t)
{
    fk_grpc_server *s = t->data;
    while (s->wait_head) {
        fk_grpc_call *call = s->wait_head;
        h2conn *c = call->conn;
        if (!c || c->dead || !c->ng || call->discarding || call->answered) {
            wait_remove(s, call); /* refused or going: it needs nothing any more */
            continue;
        }
        if (!budget_take(s->budget, call->want))
            break;
        wait_remove(s, call);
        call->reserved = call->want;
        admit(c, call);
        conn_pump(c); /* the WINDOW_UPDATE that lets the client go on */
    }
    if (s->wait_head && s->ctr != &s->own && !uv_is_closing((uv_handle_t *)t))
        FK_UV_MUST(uv_timer_start(t, wake_fired, WAKE_POLL_MS, 0));
}

/* Budget freed (or, on an I/O thread, a message began to wait): admit on the next loop turn,
 * outside whatever nghttp2 callback or handler released it. */
static void wake_soon(fk_grpc_server *s)
{
    if (s->wait_head && !uv_is_closing((uv_handle_t *)&s->wake))
        FK_UV_MUST(uv_timer_start(&s->wake, wake_fired, 0, 0));
}

/* A stream not admitted yet got bytes: keep them (at most its window); once the prefix is
 * known, admit a small message at once, a large one when the budget has room for it all and
 * nothing waits before it; else it waits with its window shut. */
static void pend_data(h2conn *c, fk_grpc_call *call, const uint8_t *data, size_t len)
{
    if (call->pend_len + len > PEND_MAX) {
        refuse(call, FK_GRPC_RESOURCE_EXHAUSTED,
               "request data beyond the stream's flow-control window");
        (void)nghttp2_session_consume_stream(c->ng, call->stream_id, call->pend_len + len);
        pend_free(call);
        return;
    }
    if (call->pend_len + len > call->pend_cap) {
        size_t cap = call->pend_cap ? 2 * call->pend_cap : 64;
        while (cap < call->pend_len + len)
            cap *= 2;
        uint8_t *p = realloc(call->pend, cap);
        if (!p) {
            refuse(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory");
            (void)nghttp2_session_consume_stream(c->ng, call->stream_id, call->pend_len + len);
            pend_free(call);
            return;
        }
        fk_memacct_add(FK_MEM_CALL, (long)(cap - call->pend_cap));
        call->pend = p;
        call->pend_cap = cap;
    }
    memcpy(call->pend + call->pend_len, data, len);
    call->pend_len += len;
    if (call->waiting || call->pend_len < FK_GRPC_PREFIX_LEN)
        return;
    const uint8_t *h = call->pend;
    call->want = (uint64_t)h[1] << 24 | (uint64_t)h[2] << 16 | (uint64_t)h[3] << 8 | h[4];
    fk_grpc_server *s = c->srv;
    /* small, compressed or oversized (refused by the parser): nothing to reserve */
    int large = h[0] == 0 && call->want > FK_GRPC_SMALL_MESSAGE && call->want <= s->lim.max_message;
    if (large && (s->wait_head || !budget_take(s->budget, call->want))) {
        wait_add(s, call);
        fk_log(FK_LOG_DEBUG, "upload_waits", "peer=%s path=%s bytes=%llu held=%llu", c->peer.addr,
               call->path, (unsigned long long)call->want,
               (unsigned long long)atomic_load_explicit(&s->budget->held, memory_order_relaxed));
        return;
    }
    if (large)
        call->reserved = call->want;
    admit(c, call);
}

static int on_data_chunk(nghttp2_session *ng, uint8_t flags, int32_t sid, const uint8_t *data,
                         size_t len, void *ud)
{
    (void)flags;
    h2conn *c = ud;
    /* Flow control is ours (no automatic WINDOW_UPDATE). The connection's window opens at
     * once: every byte is copied or dropped below, so one stream never holds up the others
     * (heartbeats behind a waiting upload). A stream's window opens as its bytes enter its
     * message buffer, which happens only once the message was admitted to the budget. */
    (void)nghttp2_session_consume_connection(ng, len);
    fk_grpc_call *call = stream_call(c, sid);
    if (!call || call->discarding || call->answered) {
        (void)nghttp2_session_consume_stream(ng, sid, len);
        return 0;
    }
    if (len == 0)
        return 0;
    if (!call->admitted) {
        pend_data(c, call, data, len);
        return 0;
    }
    (void)nghttp2_session_consume_stream(ng, sid, len);
    feed(c, call, data, len);
    return 0;
}

static int on_frame_send(nghttp2_session *ng, const nghttp2_frame *frame, void *ud)
{
    h2conn *c = ud;
    if (frame->hd.type != NGHTTP2_HEADERS || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    fk_grpc_call *call = stream_call(c, frame->hd.stream_id);
    /* Answered before the request ended (refused): tell the client to stop sending. */
    if (call && !call->req_done)
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, frame->hd.stream_id, NGHTTP2_NO_ERROR);
    return 0;
}

static int on_stream_close(nghttp2_session *ng, int32_t sid, uint32_t code, void *ud)
{
    (void)code;
    h2conn *c = ud;
    fk_grpc_call *call = stream_call(c, sid);
    if (!call)
        return 0;
    nghttp2_session_set_stream_user_data(ng, sid, NULL);
    assert(c->nstreams > 0 && !call->stream_closed); /* counted by on_begin_headers, closed once */
    c->nstreams--;
    call->stream_closed = 1;
    call->answered = 1;
    release_call(call);
    return 0;
}

/* nghttp2 found a protocol violation in the peer's frames: say which. */
static int on_error(nghttp2_session *ng, int code, const char *msg, size_t len, void *ud)
{
    (void)ng;
    h2conn *c = ud;
    fk_log(FK_LOG_WARN, "h2_error", "peer=%s code=%d reason=\"%.*s\"", c->peer.addr, code, (int)len,
           msg);
    return 0;
}

static ssize_t send_cb(nghttp2_session *ng, const uint8_t *data, size_t len, int flags, void *ud)
{
    (void)ng;
    (void)flags;
    h2conn *c = ud;
    if (c->tls && fk_tlsconn_queued(c->tls) > SEND_HIGH_WATER)
        return NGHTTP2_ERR_WOULDBLOCK;
    if (conn_write(c, data, len) < 0)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

/* ---- connections ------------------------------------------------------------ */

static int session_new(h2conn *c)
{
    nghttp2_session_callbacks *cb;
    if (nghttp2_session_callbacks_new(&cb) != 0)
        return -1;
    nghttp2_session_callbacks_set_send_callback(cb, send_cb);
    nghttp2_session_callbacks_set_send_data_callback(cb, send_data_cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(cb, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(cb, on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_stream_close);
    nghttp2_session_callbacks_set_error_callback2(cb, on_error);
    nghttp2_option *opt;
    nghttp2_option_new(&opt);
    nghttp2_option_set_max_send_header_block_length(opt, 16384);
    /* HPACK tables of 1 KB each way (not 4 KB): every connection keeps its tables while idle,
     * and a client whose headers change (grpc-timeout values differ call to call) fills
     * whatever size is allowed; the few repeated headers of a unary call still fit. */
    nghttp2_option_set_max_deflate_dynamic_table_size(opt, HPACK_TABLE);
    nghttp2_option_set_no_closed_streams(opt, 1); /* closed streams would pile up per connection */
    /* WINDOW_UPDATEs are ours (nghttp2_session_consume*): a large request message gets its
     * window only once the upload budget holds its size (on_data_chunk, admit). */
    nghttp2_option_set_no_auto_window_update(opt, 1);
    int rc = nghttp2_session_server_new3(&c->ng, cb, c, opt, fk_memacct_nghttp2());
    nghttp2_option_del(opt);
    nghttp2_session_callbacks_del(cb);
    if (rc != 0)
        return -1;
    /* A stream starts with a window for a small message (its prefix tells the length); an
     * admitted large message gets a wide one (admit), so loopback and LAN transfers of big
     * models do not stall on WINDOW_UPDATE round trips. The connection's window is wide:
     * its bytes are consumed as they arrive (on_data_chunk). */
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->srv->lim.max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, INITIAL_WINDOW},
        {NGHTTP2_SETTINGS_MAX_FRAME_SIZE, 1u << 20},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, 16384},
        {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, HPACK_TABLE},
    };
    nghttp2_submit_settings(c->ng, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    nghttp2_session_set_local_window_size(c->ng, NGHTTP2_FLAG_NONE, 0, 64u << 20);
    return 0;
}

static void conn_pump(h2conn *c)
{
    if (c->dead || !c->ng)
        return;
    if (c->busy) { /* nghttp2 forbids re-entering it from its callbacks: send afterwards */
        c->pump_again = 1;
        return;
    }
    c->busy = 1;
    int rc;
    do {
        c->pump_again = 0;
        rc = nghttp2_session_send(c->ng);
    } while (rc == 0 && c->pump_again);
    c->busy = 0;
    if (rc != 0) {
        conn_close(c, "HTTP/2 send failed");
        return;
    }
    if (c->tls)
        fk_tlsconn_flush(c->tls);
    if (!nghttp2_session_want_read(c->ng) && !nghttp2_session_want_write(c->ng))
        conn_close(c, c->draining ? "drained after GOAWAY" : "HTTP/2 session finished");
}

static void conn_unlink(h2conn *c)
{
    fk_grpc_server *s = c->srv;
    if (c->prev)
        c->prev->next = c->next;
    else if (s->conns == c)
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    c->next = c->prev = NULL;
}

/* Detach every call from a dying connection: the app keeps its handles. */
static void conn_release(h2conn *c)
{
    c->dead = 1;
    while (c->calls) {
        fk_grpc_call *call = c->calls;
        call->stream_closed = 1;
        call->answered = 1;
        call_unlink(call);
        release_call(call);
    }
    nghttp2_session_del(c->ng);
    c->ng = NULL;
}

static void conn_free(h2conn *c)
{
    fk_grpc_server *s = c->srv;
    conn_unlink(c);
    fk_memacct_add(FK_MEM_CONN, -(long)sizeof *c);
    free(c);
    fk__ctr_add(&s->ctr->conns_closed, 1);
    maybe_server_done(s);
}

static void conn_freed(uv_handle_t *h)
{
    conn_free(h->data);
}

static void tls_on_close(fk_tlsconn *t, const char *reason)
{
    h2conn *c = t->ud;
    fk_grpc_server *s = c->srv;
    if (!t->ready) {
        fk__ctr_add(&s->ctr->conns_refused, 1);
        fk_log(FK_LOG_WARN, "conn_refused", "peer=%s reason=\"%s\"", t->peer.addr, reason);
    } else {
        fk_log(FK_LOG_INFO, "conn_closed", "peer=%s cn=%s peak_mem=%llu reason=\"%s\"", c->peer.addr,
               c->peer.cn, (unsigned long long)c->peak_mem, reason);
        conn_activity(c, 1); /* its peer's sessions get their silence back from now */
    }
    c->tls = NULL;
    conn_release(c);
    if (c->tick_init) /* stays on the server's list until its timer is closed too */
        uv_close((uv_handle_t *)&c->tick, conn_freed);
    else
        conn_free(c);
}

static void conn_close(h2conn *c, const char *why)
{
    if (c->tls)
        fk_tlsconn_close(c->tls, why);
}

static void tick(uv_timer_t *t)
{
    h2conn *c = t->data;
    const fk_net_limits *lim = &c->srv->lim;
    uint64_t now = uv_now(c->srv->loop);
    if (c->dead || !c->ng)
        return;
    if (c->nstreams == 0 && c->tls)
        fk_tlsconn_trim(c->tls);
    if (c->ping_sent && now - c->ping_sent >= lim->keepalive_timeout_ms) {
        fk_log(FK_LOG_WARN, "conn_keepalive", "peer=%s reason=\"PING not answered in %llu ms\"",
               c->peer.addr, (unsigned long long)lim->keepalive_timeout_ms);
        conn_close(c, "keepalive PING not answered");
        return;
    }
    if (lim->idle_timeout_ms && c->nstreams == 0 && now - c->last_rx >= lim->idle_timeout_ms) {
        nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->ng), NGHTTP2_NO_ERROR,
                              (const uint8_t *)"idle", 4);
        c->draining = 1;
        conn_pump(c);
        conn_close(c, "idle timeout");
        return;
    }
    if (lim->keepalive_ms && !c->ping_sent && now - c->last_rx >= lim->keepalive_ms) {
        c->ping_sent = now;
        nghttp2_submit_ping(c->ng, NGHTTP2_FLAG_NONE, NULL);
        conn_pump(c);
    }
}

static void tls_on_ready(fk_tlsconn *t)
{
    h2conn *c = t->ud;
    fk_grpc_server *s = c->srv;
    c->peer = t->peer;
    conn_activity(c, 1);
    fk__ctr_add(&s->ctr->conns_accepted, 1);
    fk_log(FK_LOG_INFO, "conn_open", "peer=%s cn=%s san=%s", c->peer.addr, c->peer.cn, c->peer.san);
    if (session_new(c) != 0) {
        conn_close(c, "cannot create an HTTP/2 session");
        return;
    }
    c->last_rx = uv_now(s->loop);
    uint64_t period = 1000;
    const fk_net_limits *lim = &s->lim;
    uint64_t cand[] = {lim->keepalive_ms, lim->idle_timeout_ms, lim->keepalive_timeout_ms};
    for (int i = 0; i < 3; i++)
        if (cand[i] && cand[i] / 4 < period)
            period = cand[i] / 4;
    if (period < 5)
        period = 5;
    FK_UV_MUST(uv_timer_start(&c->tick, tick, period, period));
    if (s->closing)
        c->draining = 1, nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE, 0, NGHTTP2_NO_ERROR, NULL, 0);
    conn_pump(c);
}

static void tls_on_data(fk_tlsconn *t, const uint8_t *p, size_t n)
{
    h2conn *c = t->ud;
    if (!c->ng)
        return;
    c->last_rx = uv_now(c->srv->loop);
    c->ping_sent = 0; /* any traffic proves the peer alive */
    c->busy = 1;
    ssize_t r = nghttp2_session_mem_recv(c->ng, p, n);
    c->busy = 0;
    if (r < 0) {
        char why[160];
        snprintf(why, sizeof why, "HTTP/2 protocol error: %s", nghttp2_strerror((int)r));
        fk_log(FK_LOG_WARN, "conn_protocol", "peer=%s reason=\"%s\"", c->peer.addr, why);
        conn_pump(c);
        conn_close(c, why);
        return;
    }
    conn_pump(c);
}

static void tls_on_writable(fk_tlsconn *t)
{
    conn_pump(t->ud);
}

static void tls_on_rx(fk_tlsconn *t)
{
    conn_activity(t->ud, 0);
}

static const fk_tlsconn_cbs server_tls_cbs = {tls_on_ready, tls_on_data, tls_on_writable,
                                              tls_on_close, tls_on_rx};

/* A new connection from the listener l, or (l NULL) the accepted socket fd. */
static void conn_start(fk_grpc_server *s, uv_stream_t *l, uv_os_sock_t fd)
{
    h2conn *c = calloc(1, sizeof *c);
    if (!c) {
        if (!l) {
            close(fd);
            fk__ctr_add(&s->ctr->conns_closed, 1);
        }
        return;
    }
    fk_memacct_add(FK_MEM_CONN, (long)sizeof *c);
    c->srv = s;
    FK_UV_MUST(uv_timer_init(s->loop, &c->tick));
    c->tick.data = c;
    c->tick_init = 1;
    c->next = s->conns;
    if (s->conns)
        s->conns->prev = c;
    s->conns = c;
    fk_err err = {0};
    if (fk_tlsconn_new(&c->tls, s->loop, s->tls, &server_tls_cbs, c, s->lim.handshake_timeout_ms,
                       &err) != FK_OK) {
        if (!l)
            close(fd);
        uv_close((uv_handle_t *)&c->tick, conn_freed);
        return;
    }
    if ((l ? fk_tlsconn_accept(c->tls, l, &err) : fk_tlsconn_adopt(c->tls, fd, &err)) != FK_OK) {
        /* tls_on_close follows and frees the connection; nothing else to undo */
    }
}

static void on_connection(uv_stream_t *l, int status)
{
    fk_grpc_server *s = l->data;
    if (status < 0 || s->closing)
        return;
    conn_start(s, l, -1);
}

void fk__grpc_server_adopt(fk_grpc_server *s, uv_os_sock_t fd)
{
    if (s->closing) {
        close(fd);
        fk__ctr_add(&s->ctr->conns_closed, 1);
        return;
    }
    conn_start(s, NULL, fd);
}

/* ---- server ----------------------------------------------------------------- */

FK_CHECKRETURN static int server_new(fk_grpc_server **out, uv_loop_t *loop, const fk_grpc_server_config *cfg,
                      fk__grpc_counters *ctr, fk_err *err)
{
    *out = NULL;
    if (cfg->tls && !cfg->tls->is_server)
        return fk_err_set(err, FK_EINVAL, "grpc server: the TLS context is a client context");
    if (cfg->io_threads < 0 || cfg->io_threads > FK__GRPC_MAX_IO_THREADS)
        return fk_err_set(err, FK_EINVAL, "grpc server: io_threads = %d is outside [0, %d]",
                          cfg->io_threads, FK__GRPC_MAX_IO_THREADS);
    fk_grpc_server *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "grpc server: out of memory");
    s->ctr = ctr ? ctr : &s->own;
    s->io_threads = ctr ? 1 : cfg->io_threads;
    if (ctr) {
        s->act = ctr->activity;
    } else {
        s->act = calloc(1, sizeof *s->act);
        if (!s->act || uv_mutex_init(&s->act->mu)) {
            free(s->act);
            free(s);
            return fk_err_set(err, FK_ENOMEM, "grpc server: out of memory");
        }
        s->own.activity = s->act;
    }
    s->budget = ctr && ctr->budget ? ctr->budget : &s->own_budget;
    s->own_budget.limit = cfg->upload_budget ? cfg->upload_budget : UINT64_MAX;
    s->own.budget = s->budget;
    s->loop = loop;
    s->lim = cfg->limits;
    s->tls = cfg->tls;
    if (s->tls)
        fk_tls_ctx_ref(s->tls);
    s->drain_ms = cfg->drain_ms ? cfg->drain_ms : 5000;
    FK_UV_MUST(uv_tcp_init(loop, &s->listener));
    FK_UV_MUST(uv_timer_init(loop, &s->drain_timer));
    FK_UV_MUST(uv_timer_init(loop, &s->wake));
    s->listener.data = s->drain_timer.data = s->wake.data = s;
    s->handles_open = 3;
    *out = s;
    return FK_OK;
}

int fk_grpc_server_init(fk_grpc_server **out, uv_loop_t *loop, const fk_grpc_server_config *cfg,
                        fk_err *err)
{
    return server_new(out, loop, cfg, NULL, err);
}

int fk__grpc_server_init_worker(fk_grpc_server **out, uv_loop_t *loop,
                                const fk_grpc_server_config *cfg, fk__grpc_counters *ctr,
                                fk_err *err)
{
    return server_new(out, loop, cfg, ctr, err);
}

uint64_t fk__grpc_server_thread_accepted(const fk_grpc_server *s, int i)
{
    return s->pool ? fk__grpc_pool_thread_accepted(s->pool, i) : 0;
}

int fk__grpc_server_method_releases(const fk_grpc_server *s, int i)
{
    return i >= 0 && i < s->nmethods && s->methods[i].release_on_return;
}

void fk__grpc_call_release_request(fk_grpc_call *call)
{
    request_release(call);
}

const char *fk__grpc_server_method(const fk_grpc_server *s, int i, fk_grpc_handler *fn, void **ud)
{
    if (i < 0 || i >= s->nmethods)
        return NULL;
    *fn = s->methods[i].fn;
    *ud = s->methods[i].ud;
    return s->methods[i].path;
}

int fk_grpc_server_handle(fk_grpc_server *s, const char *path, fk_grpc_handler fn, void *ud,
                          fk_err *err)
{
    if (!path || path[0] != '/' || !fn)
        return fk_err_set(err, FK_EINVAL, "grpc server: method path must look like /pkg.Service/Method");
    for (int i = 0; i < s->nmethods; i++)
        if (!strcmp(s->methods[i].path, path)) {
            s->methods[i].fn = fn;
            s->methods[i].ud = ud;
            return FK_OK;
        }
    /* The I/O threads learnt the method list when they started. */
    if (s->pool)
        return fk_err_set(err, FK_ESTATE,
                          "grpc server: register %s before listening (the I/O threads serve the "
                          "methods known at listen)", path);
    if (s->ctr == &s->own && s->nmethods >= s->own.nmethods) { /* room to count its answers */
        int cap = s->own.nmethods ? 2 * s->own.nmethods : 16;
        _Atomic uint64_t *a = calloc((size_t)cap * FK_GRPC_N_STATUS, sizeof *a);
        if (!a)
            return fk_err_set(err, FK_ENOMEM, "grpc server: out of memory");
        for (int i = 0; i < s->own.nmethods * FK_GRPC_N_STATUS; i++)
            atomic_init(&a[i], fk__ctr_get(&s->own.answered[i]));
        free(s->own.answered);
        s->own.answered = a;
        s->own.nmethods = cap;
    }
    method *m = realloc(s->methods, (size_t)(s->nmethods + 1) * sizeof *m);
    if (!m)
        return fk_err_set(err, FK_ENOMEM, "grpc server: out of memory");
    s->methods = m;
    m[s->nmethods].path = strdup(path);
    if (!m[s->nmethods].path)
        return fk_err_set(err, FK_ENOMEM, "grpc server: out of memory");
    m[s->nmethods].fn = fn;
    m[s->nmethods].ud = ud;
    m[s->nmethods].release_on_return = 0;
    s->nmethods++;
    return FK_OK;
}

int fk_grpc_server_release_on_return(fk_grpc_server *s, const char *path, fk_err *err)
{
    for (int i = 0; i < s->nmethods; i++)
        if (!strcmp(s->methods[i].path, path)) {
            s->methods[i].release_on_return = 1;
            return FK_OK;
        }
    return fk_err_set(err, FK_ENOTFOUND,
                      "grpc server: %s has no handler; register it before asking to release its "
                      "requests on return",
                      path);
}

int fk_grpc_server_listen(fk_grpc_server *s, const char *hostport, fk_err *err)
{
    char host[128];
    if (!s->tls)
        return fk_err_set(err, FK_EINVAL, "grpc server: listening needs a server TLS context");
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof host)
        return fk_err_set(err, FK_EINVAL, "listen address '%s' must be HOST:PORT", hostport);
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || end == colon + 1)
        return fk_err_set(err, FK_EINVAL, "listen address '%s': bad port", hostport);
    size_t hl = (size_t)(colon - hostport);
    memcpy(host, hostport, hl);
    host[hl] = '\0';
    struct sockaddr_storage ss;
    if (host[0] == '[' && host[hl - 1] == ']') {
        host[hl - 1] = '\0';
        if (uv_ip6_addr(host + 1, (int)port, (struct sockaddr_in6 *)&ss) != 0)
            return fk_err_set(err, FK_EINVAL, "listen address '%s': bad IPv6 address", hostport);
    } else if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&ss) != 0) {
        return fk_err_set(err, FK_EINVAL,
                          "listen address '%s': host must be an IPv4 address or [IPv6]", hostport);
    }
    if (s->io_threads > 1) {
        if (s->pool || s->listening || s->closing)
            return fk_err_set(err, FK_ESTATE, "grpc server: already listening");
        fk_grpc_server_config wcfg = {.limits = s->lim,
                                      .tls = s->tls,
                                      .drain_ms = s->drain_ms,
                                      .upload_budget = s->own_budget.limit};
        int prc = fk__grpc_pool_start(&s->pool, s, s->loop, s->io_threads, (struct sockaddr *)&ss,
                                      &wcfg, s->nmethods, err);
        if (prc != FK_OK) {
            char why[sizeof err->msg];
            snprintf(why, sizeof why, "%s", err->msg);
            return fk_err_set(err, prc, "cannot listen on %s: %s", hostport, why);
        }
        s->listening = 1;
        fk_log(FK_LOG_INFO, "listening", "addr=%s port=%d io_threads=%d", host,
               fk_grpc_server_port(s), s->io_threads);
        return FK_OK;
    }
    int rc = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&s->listener, FK__GRPC_LISTEN_BACKLOG, on_connection);
    if (rc != 0)
        return fk_err_set(err, FK_ENET, "cannot listen on %s: %s", hostport, uv_strerror(rc));
    s->listening = 1;
    fk_log(FK_LOG_INFO, "listening", "addr=%s port=%d", host, fk_grpc_server_port(s));
    return FK_OK;
}

int fk_grpc_server_port(const fk_grpc_server *s)
{
    if (s->pool)
        return fk__grpc_pool_port(s->pool);
    struct sockaddr_storage ss;
    int len = sizeof ss;
    if (uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len) != 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

void fk_grpc_server_set_tls(fk_grpc_server *s, fk_tls_ctx *tls)
{
    fk_tls_ctx_ref(tls);
    fk_tls_ctx_unref(s->tls); /* open connections hold their own reference */
    s->tls = tls;
    if (s->pool && !s->closing)
        fk__grpc_pool_set_tls(s->pool, tls);
}

void fk_grpc_server_stats_get(const fk_grpc_server *s, fk_grpc_server_stats *out)
{
    const fk__grpc_counters *c = s->ctr;
    *out = (fk_grpc_server_stats){
        .conns_accepted = fk__ctr_get(&c->conns_accepted),
        .conns_refused = fk__ctr_get(&c->conns_refused),
        .calls = fk__ctr_get(&c->calls),
        .oversized_refused = fk__ctr_get(&c->oversized_refused),
        .peak_conn_memory = fk__ctr_get(&c->peak_conn_memory),
        .upload_held = fk__ctr_get(&s->budget->held),
        .upload_peak = fk__ctr_get(&s->budget->peak),
        .upload_waits = fk__ctr_get(&s->budget->waits),
        .upload_waiting = fk__ctr_get(&s->budget->waiting),
    };
    if (s->pool)
        fk__grpc_pool_stats(s->pool, out);
}

const char *fk_grpc_server_method_calls(const fk_grpc_server *s, int i,
                                        uint64_t counts[FK_GRPC_N_STATUS])
{
    if (i < 0 || i >= s->nmethods)
        return NULL;
    for (int k = 0; k < FK_GRPC_N_STATUS; k++)
        counts[k] = i < s->ctr->nmethods ? fk__ctr_get(&s->ctr->answered[i * FK_GRPC_N_STATUS + k])
                                         : 0;
    if (s->pool)
        fk__grpc_pool_method_calls(s->pool, i, counts);
    return s->methods[i].path;
}

static void server_handle_closed(uv_handle_t *h)
{
    fk_grpc_server *s = h->data;
    s->handles_open--;
    maybe_server_done(s);
}

static void maybe_server_done(fk_grpc_server *s)
{
    if (!s->closing || s->conns || s->pool)
        return;
    if (!uv_is_closing((uv_handle_t *)&s->drain_timer)) {
        uv_close((uv_handle_t *)&s->drain_timer, server_handle_closed);
        uv_close((uv_handle_t *)&s->wake, server_handle_closed);
        return;
    }
    if (s->handles_open > 0)
        return;
    void (*cb)(void *) = s->on_closed;
    void *ud = s->closed_ud;
    for (int i = 0; i < s->nmethods; i++)
        free(s->methods[i].path);
    free(s->methods);
    free(s->own.answered);
    if (s->ctr == &s->own && s->act) {
        uv_mutex_destroy(&s->act->mu);
        free(s->act->e);
        free(s->act);
    }
    fk_tls_ctx_unref(s->tls);
    fk_bigbuf_cache_close(&s->cache);
    free(s);
    if (cb)
        cb(ud);
}

static void drain_expired(uv_timer_t *t)
{
    fk_grpc_server *s = t->data;
    for (h2conn *c = s->conns; c; c = c->next)
        conn_close(c, "drain time over at shutdown");
}

/* The I/O threads have ended: keep their totals (stats stay readable until on_closed). */
static void pool_closed(void *ud)
{
    fk_grpc_server *s = ud;
    fk_grpc_server_stats t = {0};
    fk__grpc_pool_stats(s->pool, &t);
    fk__ctr_add(&s->own.conns_accepted, t.conns_accepted);
    fk__ctr_add(&s->own.conns_refused, t.conns_refused);
    fk__ctr_add(&s->own.calls, t.calls);
    fk__ctr_add(&s->own.oversized_refused, t.oversized_refused);
    if (t.peak_conn_memory > fk__ctr_get(&s->own.peak_conn_memory))
        atomic_store_explicit(&s->own.peak_conn_memory, t.peak_conn_memory, memory_order_relaxed);
    for (int i = 0; i < s->nmethods && i < s->own.nmethods; i++) {
        uint64_t counts[FK_GRPC_N_STATUS] = {0};
        fk__grpc_pool_method_calls(s->pool, i, counts);
        for (int k = 0; k < FK_GRPC_N_STATUS; k++)
            fk__ctr_add(&s->own.answered[i * FK_GRPC_N_STATUS + k], counts[k]);
    }
    s->pool = NULL;
    maybe_server_done(s);
}

void fk_grpc_server_close(fk_grpc_server *s, void (*on_closed)(void *), void *ud)
{
    if (s->closing)
        return;
    s->closing = 1;
    s->on_closed = on_closed;
    s->closed_ud = ud;
    uv_close((uv_handle_t *)&s->listener, server_handle_closed);
    if (s->pool) /* the I/O threads hold every connection: they drain and end */
        fk__grpc_pool_close(s->pool, pool_closed, s);
    for (h2conn *c = s->conns; c; c = c->next) {
        if (!c->ng) {
            conn_close(c, "server shutting down");
            continue;
        }
        c->draining = 1;
        nghttp2_submit_goaway(c->ng, NGHTTP2_FLAG_NONE,
                              nghttp2_session_get_last_proc_stream_id(c->ng), NGHTTP2_NO_ERROR,
                              (const uint8_t *)"shutdown", 8);
        /* Calls the application still holds (long polls) are told to finish now;
         * busy keeps the list intact (nothing is sent, so nothing is freed) meanwhile. */
        c->busy = 1;
        for (fk_grpc_call *call = c->calls, *next; call; call = next) {
            next = call->next;
            if (call->handed && !call->app_done) {
                call_answer(call, FK_GRPC_UNAVAILABLE, "server shutting down", NULL, 0, NULL);
                call_cancel(call);
            }
        }
        c->busy = 0;
        conn_pump(c);
    }
    if (s->conns)
        FK_UV_MUST(uv_timer_start(&s->drain_timer, drain_expired, s->drain_ms, 0));
    maybe_server_done(s);
}

void fk_grpc_server_feed_raw(fk_grpc_server *s, const fk_tls_peer *peer, const uint8_t *data,
                             size_t len)
{
    h2conn *c = calloc(1, sizeof *c);
    if (!c)
        return;
    fk_memacct_add(FK_MEM_CONN, (long)sizeof *c);
    c->srv = s;
    if (peer)
        c->peer = *peer;
    else
        snprintf(c->peer.addr, sizeof c->peer.addr, "raw");
    if (session_new(c) == 0) {
        c->busy = 1;
        nghttp2_session_mem_recv(c->ng, data, len);
        c->busy = 0;
        nghttp2_session_send(c->ng);
    }
    conn_release(c);
    fk_memacct_add(FK_MEM_CONN, -(long)sizeof *c);
    free(c);
}
