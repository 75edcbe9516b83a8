/* gRPC server over HTTP/2 (nghttp2) over mutual TLS (tlsconn) on libuv.
 *
 * Register one handler per full method path before listening:
 *     fk_grpc_server_handle(srv, "/fedkern.v1.Federation/Join", on_join, ud);
 * A handler receives the call handle, the verified peer identity, the request
 * message bytes and the deadline, and must answer exactly once through
 * fk_grpc_call_reply() / fk_grpc_call_reply_owned() — now or later (long polls).
 * The request bytes stay valid until that reply. If the client cancels, the
 * deadline passes or the server shuts down first, the call is "cancelled": the
 * server has already answered the client, the optional cancel callback runs, and
 * the handler's reply only releases the handle. Unknown paths get UNIMPLEMENTED. */
#ifndef FK_NET_GRPC_SERVER_H
#define FK_NET_GRPC_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/base/err.h"
#include "common/net/grpc.h"
#include "common/net/limits.h"
#include "common/net/tls.h"

typedef struct fk_grpc_server fk_grpc_server;
typedef struct fk_grpc_call fk_grpc_call;

/* deadline_ms is uv_now(loop) time in ms at which the client gives up, 0 = none. */
typedef void (*fk_grpc_handler)(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                                size_t len, uint64_t deadline_ms, void *ud);

typedef struct fk_grpc_server_config {
    fk_net_limits limits;
    fk_tls_ctx *tls;     /* server context (the server takes a reference); NULL only for
                          * fk_grpc_server_feed_raw, listening then refuses */
    uint64_t drain_ms;   /* graceful close: how long open calls may finish (default 5000) */
    /* 0 or 1: the loop given to init serves every connection itself. N > 1 (at most 64):
     * N I/O threads, each with its own libuv loop, own the connections (TLS, HTTP/2); the
     * loop given to init accepts and runs the handlers, so handlers stay single-threaded.
     * Then a reply's free_fn may run on an I/O thread (it must be thread-safe, as free is),
     * and every handler must be registered before listening. */
    int io_threads;
    /* Bytes of large request messages (over FK_GRPC_SMALL_MESSAGE) the server holds at once,
     * being received or waiting for their handler to let go, over all connections and I/O
     * threads (0: no budget). A message is admitted whole when its 5-byte prefix announces
     * its length and it fits what is free; until then its stream's HTTP/2 flow-control window
     * stays shut, so the client waits instead of the server growing. A message larger than
     * the budget is admitted when no other large message is held (it proceeds alone). */
    uint64_t upload_budget;
} fk_grpc_server_config;

/* Request messages up to this many bytes are taken at once, outside the upload budget: the
 * stream's initial window lets a client send that much before the server knows the length. */
#define FK_GRPC_SMALL_MESSAGE (16u << 10)

FK_CHECKRETURN int fk_grpc_server_init(fk_grpc_server **out, uv_loop_t *loop,
                                       const fk_grpc_server_config *cfg, fk_err *err);
/* Register (or replace) the handler for a full path "/package.Service/Method". */
FK_CHECKRETURN int fk_grpc_server_handle(fk_grpc_server *srv, const char *path, fk_grpc_handler fn,
                                         void *ud, fk_err *err);
/* The handler of path reads its request bytes only while it runs (it copies what it keeps):
 * the server frees them, and gives their memory back to the upload budget, as soon as the
 * handler returns, even when the reply comes later (an upload acknowledged after its commit).
 * Without it the bytes live until the reply. With io_threads > 1 the engine loop tells the
 * connection's I/O thread to free them once the handler returned. */
FK_CHECKRETURN int fk_grpc_server_release_on_return(fk_grpc_server *srv, const char *path,
                                                    fk_err *err);
/* For such a method, a handler that hands its request bytes to other work (read in place on a
 * worker thread) keeps them past its return: called inside the handler. They are freed by
 * fk_grpc_call_release_request, or at the reply, whichever comes first. Engine loop only. */
void fk_grpc_call_keep_request(fk_grpc_call *call);
/* Free a kept request's bytes now (and give them back to the upload budget), before the reply:
 * not after it, when the call is gone. A second call, or one for bytes already freed, does
 * nothing. Engine loop only, outside the handler. */
void fk_grpc_call_release_request(fk_grpc_call *call);
/* Listen on "HOST:PORT" (IPv4 or [IPv6]); port 0 picks a free port, see fk_grpc_server_port. */
FK_CHECKRETURN int fk_grpc_server_listen(fk_grpc_server *srv, const char *hostport, fk_err *err);
int fk_grpc_server_port(const fk_grpc_server *srv);
/* Swap in a rebuilt TLS context (certificate or CRL reload): new connections use it. */
void fk_grpc_server_set_tls(fk_grpc_server *srv, fk_tls_ctx *tls);
/* Graceful close: stop accepting, GOAWAY every connection, let open calls finish
 * for drain_ms, then close. on_closed runs once everything is released; after it
 * the server is freed. */
void fk_grpc_server_close(fk_grpc_server *srv, void (*on_closed)(void *ud), void *ud);

/* Answer the call. msg (may be NULL) becomes grpc-message; bytes are copied and
 * sent only with FK_GRPC_OK. Returns FK_OK, or FK_ESTATE if the call was cancelled
 * (the handle is released either way). */
int fk_grpc_call_reply(fk_grpc_call *call, int status, const char *msg, const uint8_t *bytes,
                       size_t len);
/* Same, but takes ownership of bytes (freed with free_fn once sent) to avoid a copy. */
int fk_grpc_call_reply_owned(fk_grpc_call *call, int status, const char *msg, uint8_t *bytes,
                             size_t len, void (*free_fn)(void *));
int fk_grpc_call_cancelled(const fk_grpc_call *call);
const char *fk_grpc_call_method(const fk_grpc_call *call);
/* cb runs once if the call is cancelled before the handler replies. */
void fk_grpc_call_on_cancel(fk_grpc_call *call, void (*cb)(fk_grpc_call *call, void *ud), void *ud);

/* Milliseconds since bytes last arrived on a connection whose peer has identity id (TLS
 * ciphertext as it comes, also part of a record not complete yet: a peer that still sends
 * on a stalled connection shows so), or since such a connection closed; UINT64_MAX when
 * none has (or id is ""). Covers every I/O thread's connections; call on the loop given to
 * init. The service lets a client's session outlive its silent heartbeats by it
 * (docs/daemons.md "Sessions"). */
uint64_t fk_grpc_server_peer_idle_ms(fk_grpc_server *srv, const char *id);

/* Counters for tests and benchmarks. */
typedef struct fk_grpc_server_stats {
    uint64_t conns_accepted, conns_refused, calls, oversized_refused;
    uint64_t peak_conn_memory; /* largest message-buffer total one connection held */
    uint64_t upload_held;      /* bytes of large request messages admitted and held now */
    uint64_t upload_peak;      /* most such bytes held at once */
    uint64_t upload_waits;     /* large messages that waited for the budget */
    uint64_t upload_waiting;   /* large messages waiting now */
} fk_grpc_server_stats;
void fk_grpc_server_stats_get(const fk_grpc_server *srv, fk_grpc_server_stats *out);
/* Calls answered per registered method, by gRPC status code: the i-th registered path and its
 * counts (NULL past the last one). Calls to unknown paths are not counted here. */
const char *fk_grpc_server_method_calls(const fk_grpc_server *srv, int i,
                                        uint64_t counts[FK_GRPC_N_STATUS]);

/* Fuzzing hook: run bytes through a fresh HTTP/2 server session with no TLS and
 * no socket (output discarded) as if they came from peer (NULL: no identity),
 * then release everything that can be released synchronously; run the loop
 * afterwards to finish closing timers. */
void fk_grpc_server_feed_raw(fk_grpc_server *srv, const fk_tls_peer *peer, const uint8_t *data,
                             size_t len);

#endif
