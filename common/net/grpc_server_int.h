/* Internal to the net module (grpc_server.c, grpc_pool.c): the gRPC server's I/O threads (net.io_threads > 1).
 *
 * The loop that owns the fk_grpc_server (the "engine loop": handlers, and through them the
 * store, engine and client index, run only there) accepts TCP connections and hands each
 * socket to one of N I/O threads. Every I/O thread runs its own libuv loop with a worker
 * fk_grpc_server that owns its connections' TLS and HTTP/2 sessions. A decoded unary call
 * travels to the engine loop as a proxy call (a thread-safe queue + uv_async_t), the
 * registered handler runs there with the proxy as its fk_grpc_call, and the reply travels
 * back the same way to the thread that owns the connection. The threading rules are in
 * docs/architecture.md ("Threads"). */
#ifndef FK_NET_GRPC_SERVER_INT_H
#define FK_NET_GRPC_SERVER_INT_H

#include <assert.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <uv.h>

#include "common/base/err.h"
#include "common/net/grpc_server.h"

enum { FK__GRPC_MAX_IO_THREADS = 64 };
/* Pending TCP connections the kernel queues (capped by net.core.somaxconn): after a restart
 * thousands of clients connect at once, and SYNs beyond the queue wait for a retransmit
 * (1 s, 3 s, ...) before they get another chance. */
enum { FK__GRPC_LISTEN_BACKLOG = 1024 };

/* A server's counters. One thread writes them (the loop that owns the server), any thread
 * may read them: relaxed atomics, no read-modify-write needed. */
typedef struct fk__grpc_activity fk__grpc_activity;

/* The server-wide budget for request messages being received or held (grpc_server.c):
 * shared by the front server and its I/O threads' workers. */
typedef struct fk__grpc_budget fk__grpc_budget;

typedef struct fk__grpc_counters {
    fk__grpc_activity *activity; /* the front server's (fk_grpc_server_peer_idle_ms) */
    fk__grpc_budget *budget;     /* the front server's upload budget */
    _Atomic uint64_t conns_accepted, conns_refused, calls, oversized_refused, peak_conn_memory;
    _Atomic uint64_t conns_closed; /* connections freed (counted for the I/O threads' balance) */
    _Atomic uint64_t *answered;    /* [method index * FK_GRPC_N_STATUS + status] */
    int nmethods;                  /* methods answered[] has room for */
} fk__grpc_counters;

static inline void fk__ctr_add(_Atomic uint64_t *x, uint64_t n)
{
    atomic_store_explicit(x, atomic_load_explicit(x, memory_order_relaxed) + n,
                          memory_order_relaxed);
}

static inline uint64_t fk__ctr_get(const _Atomic uint64_t *x)
{
    return atomic_load_explicit((_Atomic uint64_t *)x, memory_order_relaxed);
}

typedef struct fk__grpc_pool fk__grpc_pool;

/* ---- grpc_pool.c, called by grpc_server.c on the engine loop ---- */

/* Listen on addr (exclusive bind, as with one loop) and start n I/O threads, each with a
 * worker server built from wcfg that serves the front server's methods 0..nmethods-1. */
FK_CHECKRETURN int fk__grpc_pool_start(fk__grpc_pool **out, fk_grpc_server *front,
                                       uv_loop_t *loop, int n, const struct sockaddr *addr,
                                       const fk_grpc_server_config *wcfg, int nmethods,
                                       fk_err *err);
int fk__grpc_pool_port(const fk__grpc_pool *p);
/* New connections on every thread use tls from now on. */
void fk__grpc_pool_set_tls(fk__grpc_pool *p, fk_tls_ctx *tls);
/* Add every thread's counters to out / to counts (method i). */
void fk__grpc_pool_stats(const fk__grpc_pool *p, fk_grpc_server_stats *out);
void fk__grpc_pool_method_calls(const fk__grpc_pool *p, int i, uint64_t counts[FK_GRPC_N_STATUS]);
/* Stop accepting, close every worker server (GOAWAY, drain), wait until each thread has
 * its replies and ended, join them; then done(ud) runs on the engine loop and p is freed. */
void fk__grpc_pool_close(fk__grpc_pool *p, void (*done)(void *ud), void *ud);

/* Proxy calls (the handler's fk_grpc_call when the call came from an I/O thread); the
 * public fk_grpc_call_* functions pass them here. */
int fk__grpc_proxy_reply(fk_grpc_call *call, int status, const char *msg, uint8_t *bytes,
                         size_t len, void (*free_fn)(void *), int copy);
int fk__grpc_proxy_cancelled(const fk_grpc_call *call);
const char *fk__grpc_proxy_method(const fk_grpc_call *call);
void fk__grpc_proxy_on_cancel(fk_grpc_call *call, void (*cb)(fk_grpc_call *, void *), void *ud);
void fk__grpc_proxy_keep_request(fk_grpc_call *call);
void fk__grpc_proxy_release_request(fk_grpc_call *call);

/* Connections thread i has accepted (0 past the last thread); for tests. */
uint64_t fk__grpc_pool_thread_accepted(const fk__grpc_pool *p, int i);

/* ---- grpc_server.c, called by grpc_pool.c (and tests) ---- */

/* The front server's peer activity table, for its workers' counters. */
fk__grpc_activity *fk__grpc_server_activity(const fk_grpc_server *s);
/* The front server's upload budget, for its workers' counters. */
fk__grpc_budget *fk__grpc_server_budget(const fk_grpc_server *s);
/* Connections I/O thread i of s has accepted (0 without I/O threads or past the last). */
uint64_t fk__grpc_server_thread_accepted(const fk_grpc_server *s, int i);

/* 1 if call is a proxy: both structs begin with an int that says so. */
static inline int fk__grpc_call_is_proxy(const fk_grpc_call *call)
{
    int remote = *(const int *)(const void *)call;
    assert(remote == 0 || remote == 1); /* anything else is not an fk_grpc_call (or freed) */
    return remote != 0;
}
/* A worker server on an I/O thread's loop: counts into ctr (owned by the pool). */
FK_CHECKRETURN int fk__grpc_server_init_worker(fk_grpc_server **out, uv_loop_t *loop,
                                               const fk_grpc_server_config *cfg,
                                               fk__grpc_counters *ctr, fk_err *err);
/* Serve an accepted socket (the server owns fd from now on, also on failure). */
void fk__grpc_server_adopt(fk_grpc_server *s, uv_os_sock_t fd);
/* 1 if method i's request bytes are to be freed when its handler returns
 * (fk_grpc_server_release_on_return). */
int fk__grpc_server_method_releases(const fk_grpc_server *s, int i);
/* Free a call's request bytes now and give their reservation back (its handler let go). */
void fk__grpc_call_release_request(fk_grpc_call *call);
/* Method i of the front server: path, handler and its user data (NULL past the last). */
const char *fk__grpc_server_method(const fk_grpc_server *s, int i, fk_grpc_handler *fn, void **ud);

#endif
