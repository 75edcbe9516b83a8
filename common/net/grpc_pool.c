/* The gRPC server's I/O threads (net.io_threads > 1): see grpc_server_int.h for the design and
 * docs/architecture.md ("Threads") for who owns what.
 *
 * Messages between the engine loop and an I/O thread are queue nodes (FIFO, one mutex and
 * one uv_async_t per receiving loop). Per call: the I/O thread sends CALL (a proxy it
 * allocated) and maybe CANCEL (the stream ended first); the engine loop sends REPLY. The
 * proxy is counted: one reference for the I/O thread until it has used the REPLY, one for a
 * CANCEL until the engine loop has handled it; the engine loop never touches a proxy after
 * its REPLY except through such a CANCEL. So the proxy is freed exactly once, usually by the
 * thread that allocated it (no cross-thread free on the common path). The I/O thread's own
 * call stays alive until REPLY (its handler has not let go), so the reply always finds it,
 * even when its connection has closed meanwhile. */
#include "common/net/grpc_server_int.h"

#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/memacct.h"

enum { ACCEPT_BURST = 64 };     /* accepts per poll wake-up, so replies are not starved */
enum { ACCEPT_PAUSE_MS = 100 }; /* out of descriptors or memory: wait before accepting again */

enum kind {
    K_CALL, K_CANCEL, K_EXIT,         /* I/O thread -> engine loop */
    K_CONN, K_REPLY, K_TLS, K_CLOSE   /* engine loop -> I/O thread */
};
/* engine loop -> I/O thread: free a call's request bytes (its handler has returned) */
enum { K_RELEASE = K_CLOSE + 1 };

typedef struct qnode {
    struct qnode *next;
    int kind;
} qnode;

typedef struct queue {
    uv_mutex_t mu;
    qnode *head, *tail;
    int woken;        /* a wake-up is on its way and the receiver has not taken the list yet */
    uv_async_t async; /* on the receiving loop */
} queue;

typedef struct worker worker;

typedef struct fwd {
    worker *w;
    int method;
} fwd;

struct worker {
    fk__grpc_pool *pool;
    int index;
    uv_loop_t loop;
    int loop_init, mu_init, async_init, started, joined;
    uv_thread_t thread;
    queue in;
    /* the I/O thread's own (after start) */
    fk_grpc_server *srv; /* NULL once closed */
    fwd *fwd;            /* user data of the forwarding handler, one per method */
    int outstanding;     /* calls sent to the engine whose REPLY has not been handled */
    int srv_closed, ending;
    int loop_close_rc;
    /* written by the I/O thread, read by the engine loop */
    fk__grpc_counters ctr;
    /* the engine loop's */
    uint64_t assigned; /* connections handed to this thread */
    qnode n_close, n_exit;
};

struct fk__grpc_pool {
    fk_grpc_server *front;
    uv_loop_t *loop;
    queue in; /* from the I/O threads */
    uv_poll_t poll;
    uv_timer_t pause;
    uv_os_sock_t lfd;
    int port;
    worker **w;
    int n, running; /* threads started and not yet joined */
    int closing, handles;
    uint64_t pause_logged_ms, pauses; /* accept pauses: logged at most every 10 s */
    void (*done)(void *);
    void *done_ud;
};

/* The handler's fk_grpc_call for a call that came from an I/O thread. */
typedef struct proxy {
    int remote; /* always 1, first: fk_grpc_call_* tell proxies from local calls by it */
    atomic_int refs; /* the I/O thread's until it used the REPLY, + a CANCEL in flight */
    worker *w;
    fk_grpc_call *wcall; /* the I/O thread's call, only touched there */
    int method;
    const uint8_t *req; /* the I/O thread's request buffer: valid until it handles REPLY */
    size_t len;
    uint64_t deadline;
    fk_tls_peer peer;
    /* the engine loop's */
    int cancelled, replied;
    int in_handler, reply_held; /* a reply during the handler is sent when it returns */
    int keep_req, release_sent; /* fk_grpc_call_keep_request; n_release queued (once) */
    void (*cancel_cb)(fk_grpc_call *, void *);
    void *cancel_ud;
    /* the reply, written before REPLY is sent */
    int status, has_msg;
    char msg[256];
    uint8_t *bytes;
    size_t blen;
    void (*free_fn)(void *);
    qnode n_call, n_cancel, n_reply, n_release;
} proxy;

typedef struct conn_msg {
    qnode n;
    uv_os_sock_t fd;
} conn_msg;

typedef struct tls_msg {
    qnode n;
    fk_tls_ctx *tls;
} tls_msg;

#define OWNER(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* ---- queues ----------------------------------------------------------------- */

static void q_push(queue *q, qnode *n)
{
    n->next = NULL;
    uv_mutex_lock(&q->mu);
    if (q->tail)
        q->tail->next = n;
    else
        q->head = n;
    q->tail = n;
    /* Woken while still locked: once the receiver can take n it may end its loop (an I/O
     * thread's last REPLY), and its async handle must not be touched after that. */
    if (!q->woken) {
        q->woken = 1;
        FK_UV_MUST(uv_async_send(&q->async));
    }
    uv_mutex_unlock(&q->mu);
}

static qnode *q_take(queue *q)
{
    uv_mutex_lock(&q->mu);
    qnode *n = q->head;
    q->head = q->tail = NULL;
    q->woken = 0;
    uv_mutex_unlock(&q->mu);
    return n;
}

/* ---- on an I/O thread --------------------------------------------------------- */

static void worker_maybe_end(worker *w)
{
    if (!w->srv_closed || w->outstanding > 0 || w->ending)
        return;
    w->ending = 1;
    uv_close((uv_handle_t *)&w->in.async, NULL); /* the last handle: the loop ends */
}

static void worker_srv_closed(void *ud)
{
    worker *w = ud;
    w->srv = NULL;
    w->srv_closed = 1;
    worker_maybe_end(w);
}

/* fk__grpc_call_is_proxy reads the first int of any fk_grpc_call: both structs must start so */
_Static_assert(offsetof(proxy, remote) == 0, "proxy.remote must be the first member");

static void proxy_unref(proxy *p)
{
    int before = atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel);
    /* one reference per holder (the I/O thread until REPLY, a CANCEL in flight): never below */
    assert(before >= 1 && before <= 2);
    if (before == 1) {
        fk_memacct_add(FK_MEM_CALL, -(long)sizeof *p);
        free(p);
    }
}

/* Runs at most once per call, and never after its REPLY was used (that clears it). */
static void fwd_cancelled(fk_grpc_call *call, void *ud)
{
    (void)call;
    proxy *p = ud;
    assert(p->remote == 1);
    /* the I/O thread still holds its reference (the REPLY clears this callback first) */
    int before = atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed); /* the CANCEL's */
    assert(before == 1);
    (void)before;
    q_push(&p->w->pool->in, &p->n_cancel);
}

/* The handler of every method on an I/O thread: pass the call to the engine loop. */
static void fwd_handler(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                        size_t len, uint64_t deadline, void *ud)
{
    fwd *f = ud;
    worker *w = f->w;
    proxy *p = malloc(sizeof *p); /* not zeroed: 1.4 KB, mostly the peer copied below */
    if (!p) {
        (void)fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory", NULL, 0);
        return;
    }
    fk_memacct_add(FK_MEM_CALL, (long)sizeof *p);
    p->remote = 1;
    atomic_init(&p->refs, 1);
    p->w = w;
    p->wcall = call;
    p->method = f->method;
    p->req = req;
    p->len = len;
    p->deadline = deadline; /* uv_now of either loop: both read the same monotonic clock */
    p->peer = *peer;
    p->cancelled = p->replied = 0;
    p->cancel_cb = NULL;
    p->cancel_ud = NULL;
    p->status = p->has_msg = 0;
    p->msg[0] = '\0';
    p->bytes = NULL;
    p->blen = 0;
    p->free_fn = NULL;
    p->n_call.kind = K_CALL;
    p->n_cancel.kind = K_CANCEL;
    p->n_reply.kind = K_REPLY;
    p->n_release.kind = K_RELEASE;
    p->in_handler = p->reply_held = 0;
    p->keep_req = p->release_sent = 0;
    w->outstanding++;
    fk_grpc_call_on_cancel(call, fwd_cancelled, p);
    q_push(&w->pool->in, &p->n_call);
}

static void worker_reply(worker *w, proxy *p)
{
    fk_grpc_call *call = p->wcall;
    assert(p->remote == 1 && p->replied);
    assert(w->outstanding > 0);
    fk_grpc_call_on_cancel(call, NULL, NULL);
    /* ESTATE: the stream ended first (the client saw the CANCEL's answer); the bytes are freed */
    (void)fk_grpc_call_reply_owned(call, p->status, p->has_msg ? p->msg : NULL, p->bytes, p->blen,
                                   p->free_fn);
    w->outstanding--;
    proxy_unref(p);
    worker_maybe_end(w);
}

static void worker_wake(uv_async_t *a)
{
    worker *w = a->data;
    qnode *n = q_take(&w->in), *next;
    for (; n; n = next) {
        next = n->next;
        switch (n->kind) {
        case K_CONN: {
            conn_msg *m = OWNER(n, conn_msg, n);
            uv_os_sock_t fd = m->fd;
            free(m);
            if (w->srv) {
                fk__grpc_server_adopt(w->srv, fd);
            } else {
                close(fd);
                fk__ctr_add(&w->ctr.conns_closed, 1);
            }
            break;
        }
        case K_TLS: {
            tls_msg *m = OWNER(n, tls_msg, n);
            if (w->srv)
                fk_grpc_server_set_tls(w->srv, m->tls);
            fk_tls_ctx_unref(m->tls);
            free(m);
            break;
        }
        case K_REPLY:
            worker_reply(w, OWNER(n, proxy, n_reply));
            break;
        case K_RELEASE: /* before its REPLY (same queue): the call is still there */
            fk__grpc_call_release_request(OWNER(n, proxy, n_release)->wcall);
            break;
        case K_CLOSE:
            if (w->srv)
                fk_grpc_server_close(w->srv, worker_srv_closed, w);
            break;
        default:
            fk_log(FK_LOG_ERROR, "io_thread_bad_message", "kind=%d", n->kind);
        }
    }
}

static void thread_main(void *arg)
{
    worker *w = arg;
    char name[16];
    snprintf(name, sizeof name, "fk-io-%d", w->index);
    (void)pthread_setname_np(pthread_self(), name); /* for top and perf; cosmetic */
    FK_UV_MUST(uv_run(&w->loop, UV_RUN_DEFAULT));
    w->loop_close_rc = uv_loop_close(&w->loop);
    q_push(&w->pool->in, &w->n_exit); /* the thread's last touch of anything shared */
}

/* ---- on the engine loop --------------------------------------------------------- */

static void proxy_deliver(fk__grpc_pool *P, proxy *p)
{
    fk_grpc_handler fn;
    void *ud;
    if (!fk__grpc_server_method(P->front, p->method, &fn, &ud)) { /* cannot happen: same table */
        (void)fk_grpc_call_reply((fk_grpc_call *)(void *)p, FK_GRPC_UNIMPLEMENTED,
                                 "method not implemented", NULL, 0);
        return;
    }
    /* A REPLY made by the handler waits until it returns: until the REPLY is sent the I/O
     * thread keeps the proxy, so p can be read afterwards (to ask for the bytes' release). */
    p->in_handler = 1;
    fn((fk_grpc_call *)(void *)p, &p->peer, p->req ? p->req : (const uint8_t *)"", p->len,
       p->deadline, ud);
    p->in_handler = 0;
    if (p->reply_held)
        q_push(&p->w->in, &p->n_reply);
    else if (fk__grpc_server_method_releases(P->front, p->method) && !p->keep_req) {
        p->release_sent = 1;
        q_push(&p->w->in, &p->n_release); /* the reply comes later: free the bytes now */
    }
}

static void pool_free(fk__grpc_pool *P)
{
    for (int i = 0; i < P->n; i++) {
        worker *w = P->w[i];
        if (!w)
            continue;
        if (w->mu_init)
            uv_mutex_destroy(&w->in.mu);
        free(w->ctr.answered);
        free(w->fwd);
        free(w);
    }
    free(P->w);
    uv_mutex_destroy(&P->in.mu);
    free(P);
}

static void pool_handle_closed(uv_handle_t *h)
{
    fk__grpc_pool *P = h->data;
    if (--P->handles > 0)
        return;
    if (P->lfd >= 0)
        close(P->lfd);
    P->lfd = -1;
    if (P->done) /* the totals are still readable in done: the front keeps them */
        P->done(P->done_ud);
    pool_free(P);
}

static void worker_exited(fk__grpc_pool *P, worker *w)
{
    FK_UV_MUST(uv_thread_join(&w->thread));
    w->joined = 1;
    if (w->loop_close_rc)
        fk_log(FK_LOG_ERROR, "io_thread_handles_left", "thread=%d error=\"%s\"", w->index,
               uv_strerror(w->loop_close_rc));
    fk_log(FK_LOG_DEBUG, "io_thread_ended", "thread=%d", w->index);
    if (--P->running == 0 && P->closing)
        uv_close((uv_handle_t *)&P->in.async, pool_handle_closed);
}

static void engine_wake(uv_async_t *a)
{
    fk__grpc_pool *P = a->data;
    qnode *n = q_take(&P->in), *next;
    for (; n; n = next) {
        next = n->next;
        switch (n->kind) {
        case K_CALL:
            proxy_deliver(P, OWNER(n, proxy, n_call));
            break;
        case K_CANCEL: {
            proxy *p = OWNER(n, proxy, n_cancel);
            if (!p->replied && !p->cancelled) {
                p->cancelled = 1;
                if (p->cancel_cb)
                    p->cancel_cb((fk_grpc_call *)(void *)p, p->cancel_ud);
            }
            proxy_unref(p); /* the CANCEL's reference; the last one if the REPLY was used */
            break;
        }
        case K_EXIT:
            worker_exited(P, OWNER(n, worker, n_exit)); /* the last one comes last of all */
            break;
        default:
            fk_log(FK_LOG_ERROR, "io_thread_bad_message", "kind=%d", n->kind);
        }
    }
}

/* The thread with the fewest open connections (ties: the lowest index). */
static worker *pick(fk__grpc_pool *P)
{
    worker *best = NULL;
    uint64_t best_open = 0;
    for (int i = 0; i < P->n; i++) {
        worker *w = P->w[i];
        uint64_t closed = fk__ctr_get(&w->ctr.conns_closed);
        uint64_t open = w->assigned > closed ? w->assigned - closed : 0;
        if (!best || open < best_open) {
            best = w;
            best_open = open;
        }
    }
    return best;
}

static void hand_off(fk__grpc_pool *P, uv_os_sock_t fd)
{
    conn_msg *m = malloc(sizeof *m);
    if (!m) {
        close(fd);
        return;
    }
    worker *w = pick(P);
    w->assigned++;
    m->n.kind = K_CONN;
    m->fd = fd;
    q_push(&w->in, &m->n);
}

static void on_acceptable(uv_poll_t *h, int status, int events);

static void accept_resume(uv_timer_t *t)
{
    fk__grpc_pool *P = t->data;
    if (!P->closing)
        FK_UV_MUST(uv_poll_start(&P->poll, UV_READABLE, on_acceptable));
}

static void on_acceptable(uv_poll_t *h, int status, int events)
{
    (void)events;
    fk__grpc_pool *P = h->data;
    if (P->closing)
        return;
    if (status < 0)
        fk_log(FK_LOG_WARN, "accept_poll_failed", "error=\"%s\"", uv_strerror(status));
    for (int i = 0; i < ACCEPT_BURST; i++) {
        int fd = accept4(P->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            hand_off(P, fd);
            continue;
        }
        int e = errno;
        if (e == EAGAIN || e == EWOULDBLOCK)
            return;
        /* That one connection failed (RST before accept, or its network's error): next. */
        if (e == EINTR || e == ECONNABORTED || e == EPROTO || e == ENETDOWN || e == ENOPROTOOPT ||
            e == EHOSTDOWN || e == ENONET || e == EHOSTUNREACH || e == EOPNOTSUPP ||
            e == ENETUNREACH)
            continue;
        /* Out of descriptors or memory: the connections wait in the backlog a little
         * (a level-triggered poll would otherwise spin on them). */
        uint64_t now = uv_now(P->loop);
        P->pauses++;
        if (P->pauses == 1 || now - P->pause_logged_ms >= 10000) {
            fk_log(FK_LOG_WARN, "accept_paused", "error=\"%s\" pause_ms=%d pauses=%llu", strerror(e),
                   ACCEPT_PAUSE_MS, (unsigned long long)P->pauses);
            P->pause_logged_ms = now;
        }
        FK_UV_MUST(uv_poll_stop(&P->poll));
        FK_UV_MUST(uv_timer_start(&P->pause, accept_resume, ACCEPT_PAUSE_MS, 0));
        return;
    }
}

FK_CHECKRETURN static int listen_socket(fk__grpc_pool *P, const struct sockaddr *addr, fk_err *err)
{
    socklen_t alen = addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                 : sizeof(struct sockaddr_in);
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return fk_err_set(err, FK_ENET, "socket: %s", strerror(errno));
    int one = 1; /* as libuv's bind: a restarted server takes its port back at once */
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, addr, alen) != 0 || listen(fd, FK__GRPC_LISTEN_BACKLOG) != 0) {
        int e = errno;
        close(fd);
        return fk_err_set(err, FK_ENET, "%s", strerror(e));
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        P->port = ntohs(ss.ss_family == AF_INET ? ((struct sockaddr_in *)&ss)->sin_port
                                                : ((struct sockaddr_in6 *)&ss)->sin6_port);
    P->lfd = fd;
    return FK_OK;
}

/* Everything an I/O thread needs, built here before its thread starts. */
FK_CHECKRETURN static int worker_new(fk__grpc_pool *P, int i, const fk_grpc_server_config *wcfg, int nmethods,
                      fk_err *err)
{
    worker *w = calloc(1, sizeof *w);
    if (!w)
        return fk_err_set(err, FK_ENOMEM, "out of memory for an I/O thread");
    P->w[i] = w;
    w->pool = P;
    w->index = i;
    w->n_close.kind = K_CLOSE;
    w->n_exit.kind = K_EXIT;
    w->ctr.nmethods = nmethods;
    w->ctr.activity = fk__grpc_server_activity(P->front);
    w->ctr.budget = fk__grpc_server_budget(P->front);
    w->ctr.answered = calloc((size_t)(nmethods ? nmethods : 1) * FK_GRPC_N_STATUS,
                             sizeof *w->ctr.answered);
    w->fwd = calloc((size_t)(nmethods ? nmethods : 1), sizeof *w->fwd);
    if (!w->ctr.answered || !w->fwd)
        return fk_err_set(err, FK_ENOMEM, "out of memory for an I/O thread");
    int rc = fk_uv_err(uv_loop_init(&w->loop), "I/O thread loop", err);
    if (rc)
        return rc;
    w->loop_init = 1;
    if ((rc = fk_uv_err(uv_mutex_init(&w->in.mu), "I/O thread queue", err)))
        return rc;
    w->mu_init = 1;
    if ((rc = fk_uv_err(uv_async_init(&w->loop, &w->in.async, worker_wake), "I/O thread queue",
                        err)))
        return rc;
    w->async_init = 1;
    w->in.async.data = w;
    if ((rc = fk__grpc_server_init_worker(&w->srv, &w->loop, wcfg, &w->ctr, err)))
        return rc;
    for (int m = 0; m < nmethods; m++) {
        fk_grpc_handler fn;
        void *ud;
        const char *path = fk__grpc_server_method(P->front, m, &fn, &ud);
        w->fwd[m] = (fwd){w, m};
        if ((rc = fk_grpc_server_handle(w->srv, path, fwd_handler, &w->fwd[m], err)))
            return rc;
    }
    return FK_OK;
}

/* Undo worker_new for a thread that never started: close its handles on its loop here. */
static void worker_destroy_unstarted(worker *w)
{
    if (w->srv)
        fk_grpc_server_close(w->srv, NULL, NULL);
    if (w->async_init)
        uv_close((uv_handle_t *)&w->in.async, NULL);
    if (w->loop_init) {
        FK_UV_MUST(uv_run(&w->loop, UV_RUN_DEFAULT));
        if (uv_loop_close(&w->loop))
            fk_log(FK_LOG_ERROR, "io_thread_handles_left", "thread=%d", w->index);
    }
}

int fk__grpc_pool_start(fk__grpc_pool **out, fk_grpc_server *front, uv_loop_t *loop, int n,
                        const struct sockaddr *addr, const fk_grpc_server_config *wcfg,
                        int nmethods, fk_err *err)
{
    *out = NULL;
    fk__grpc_pool *P = calloc(1, sizeof *P);
    if (!P)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the I/O threads");
    P->front = front;
    P->loop = loop;
    P->lfd = -1;
    P->n = n;
    P->w = calloc((size_t)n, sizeof *P->w);
    int rc = P->w ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory for the I/O threads");
    if (!rc)
        rc = fk_uv_err(uv_mutex_init(&P->in.mu), "I/O queue", err);
    if (rc) {
        free(P->w);
        free(P);
        return rc;
    }
    rc = listen_socket(P, addr, err);
    for (int i = 0; !rc && i < n; i++)
        rc = worker_new(P, i, wcfg, nmethods, err);
    if (!rc)
        rc = fk_uv_err(uv_async_init(loop, &P->in.async, engine_wake), "I/O queue", err);
    if (rc) { /* nothing runs yet: undo here */
        for (int i = 0; i < n; i++)
            if (P->w && P->w[i])
                worker_destroy_unstarted(P->w[i]);
        if (P->lfd >= 0)
            close(P->lfd);
        pool_free(P);
        return rc;
    }
    P->in.async.data = P;
    P->handles = 1;
    for (int i = 0; i < n; i++) {
        worker *w = P->w[i];
        int trc = uv_thread_create(&w->thread, thread_main, w);
        if (trc) {
            rc = fk_uv_err(trc, "starting an I/O thread", err);
            break;
        }
        w->started = 1;
        P->running++;
    }
    if (rc) { /* stop the threads that started (no connections yet), undo the rest */
        for (int i = 0; i < n; i++)
            if (P->w[i]->started)
                q_push(&P->w[i]->in, &P->w[i]->n_close);
            else
                worker_destroy_unstarted(P->w[i]);
        for (int i = 0; i < n; i++)
            if (P->w[i]->started)
                FK_UV_MUST(uv_thread_join(&P->w[i]->thread));
        (void)q_take(&P->in); /* their EXIT nodes */
        P->running = 0;
        close(P->lfd);
        P->lfd = -1;
        uv_close((uv_handle_t *)&P->in.async, pool_handle_closed); /* frees P */
        return rc;
    }
    FK_UV_MUST(uv_poll_init_socket(loop, &P->poll, P->lfd));
    FK_UV_MUST(uv_timer_init(loop, &P->pause));
    P->poll.data = P->pause.data = P;
    P->handles += 2;
    FK_UV_MUST(uv_poll_start(&P->poll, UV_READABLE, on_acceptable));
    *out = P;
    return FK_OK;
}

int fk__grpc_pool_port(const fk__grpc_pool *P)
{
    return P->port;
}

void fk__grpc_pool_set_tls(fk__grpc_pool *P, fk_tls_ctx *tls)
{
    for (int i = 0; i < P->n; i++) {
        tls_msg *m = malloc(sizeof *m);
        if (!m) {
            fk_log(FK_LOG_ERROR, "tls_reload_partial", "thread=%d reason=\"out of memory\"", i);
            continue;
        }
        m->n.kind = K_TLS;
        fk_tls_ctx_ref(tls);
        m->tls = tls;
        q_push(&P->w[i]->in, &m->n);
    }
}

void fk__grpc_pool_stats(const fk__grpc_pool *P, fk_grpc_server_stats *out)
{
    for (int i = 0; i < P->n; i++) {
        const fk__grpc_counters *c = &P->w[i]->ctr;
        out->conns_accepted += fk__ctr_get(&c->conns_accepted);
        out->conns_refused += fk__ctr_get(&c->conns_refused);
        out->calls += fk__ctr_get(&c->calls);
        out->oversized_refused += fk__ctr_get(&c->oversized_refused);
        uint64_t peak = fk__ctr_get(&c->peak_conn_memory);
        if (peak > out->peak_conn_memory)
            out->peak_conn_memory = peak;
    }
}

void fk__grpc_pool_method_calls(const fk__grpc_pool *P, int m, uint64_t counts[FK_GRPC_N_STATUS])
{
    for (int i = 0; i < P->n; i++) {
        const fk__grpc_counters *c = &P->w[i]->ctr;
        if (m < 0 || m >= c->nmethods)
            continue;
        for (int k = 0; k < FK_GRPC_N_STATUS; k++)
            counts[k] += fk__ctr_get(&c->answered[m * FK_GRPC_N_STATUS + k]);
    }
}

uint64_t fk__grpc_pool_thread_accepted(const fk__grpc_pool *P, int i)
{
    return i >= 0 && i < P->n ? fk__ctr_get(&P->w[i]->ctr.conns_accepted) : 0;
}

static void listener_closed(uv_handle_t *h)
{
    fk__grpc_pool *P = h->data;
    close(P->lfd); /* no longer polled */
    P->lfd = -1;
    pool_handle_closed(h);
}

void fk__grpc_pool_close(fk__grpc_pool *P, void (*done)(void *), void *ud)
{
    if (P->closing)
        return;
    P->closing = 1;
    P->done = done;
    P->done_ud = ud;
    uv_close((uv_handle_t *)&P->poll, listener_closed);
    uv_close((uv_handle_t *)&P->pause, pool_handle_closed);
    /* Connections already handed over are in the threads' queues ahead of CLOSE. */
    for (int i = 0; i < P->n; i++)
        q_push(&P->w[i]->in, &P->w[i]->n_close);
    if (P->running == 0)
        uv_close((uv_handle_t *)&P->in.async, pool_handle_closed);
}

/* ---- proxy calls, on the engine loop ------------------------------------------------ */

int fk__grpc_proxy_reply(fk_grpc_call *call, int status, const char *msg, uint8_t *bytes,
                         size_t len, void (*free_fn)(void *), int copy)
{
    proxy *p = (proxy *)(void *)call;
    assert(p->remote == 1);
    if (p->replied) { /* a second answer breaks the handler contract: drop it */
        if (!copy && bytes && free_fn)
            free_fn(bytes);
        return FK_ESTATE;
    }
    int was_cancelled = p->cancelled;
    p->replied = 1;
    p->status = status;
    if (msg) {
        snprintf(p->msg, sizeof p->msg, "%s", msg);
        p->has_msg = 1;
    }
    if (status == FK_GRPC_OK && !was_cancelled) {
        if (copy) {
            uint8_t *c = malloc(len ? len : 1);
            if (!c) {
                p->status = FK_GRPC_RESOURCE_EXHAUSTED;
                snprintf(p->msg, sizeof p->msg, "server out of memory");
                p->has_msg = 1;
            } else {
                if (len)
                    memcpy(c, bytes, len);
                p->bytes = c;
                p->blen = len;
                p->free_fn = free;
            }
        } else {
            p->bytes = bytes;
            p->blen = len;
            p->free_fn = free_fn;
        }
    } else if (!copy && bytes && free_fn) {
        free_fn(bytes); /* never sent: freed here, on the loop that made it */
    }
    if (p->in_handler)
        p->reply_held = 1; /* proxy_deliver sends it once the handler returned */
    else
        q_push(&p->w->in, &p->n_reply);
    return was_cancelled ? FK_ESTATE : FK_OK;
}

int fk__grpc_proxy_cancelled(const fk_grpc_call *call)
{
    return ((const proxy *)(const void *)call)->cancelled;
}

void fk__grpc_proxy_keep_request(fk_grpc_call *call)
{
    proxy *p = (proxy *)(void *)call;
    assert(p->in_handler);
    p->keep_req = 1;
}

void fk__grpc_proxy_release_request(fk_grpc_call *call)
{
    proxy *p = (proxy *)(void *)call;
    /* RELEASE goes before the REPLY on the same queue, so the I/O thread's call is still there;
     * after the reply the proxy itself may be gone, hence the assert. */
    assert(!p->in_handler && !p->replied);
    if (p->release_sent)
        return;
    p->release_sent = 1;
    q_push(&p->w->in, &p->n_release);
}

const char *fk__grpc_proxy_method(const fk_grpc_call *call)
{
    const proxy *p = (const proxy *)(const void *)call;
    fk_grpc_handler fn;
    void *ud;
    const char *path = fk__grpc_server_method(p->w->pool->front, p->method, &fn, &ud);
    return path ? path : "";
}

void fk__grpc_proxy_on_cancel(fk_grpc_call *call, void (*cb)(fk_grpc_call *, void *), void *ud)
{
    proxy *p = (proxy *)(void *)call;
    p->cancel_cb = cb;
    p->cancel_ud = ud;
}
