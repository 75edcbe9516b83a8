/* gRPC client over HTTP/2 (nghttp2) over mutual TLS (tlsconn) on libuv: one
 * connection, unary calls multiplexed on it. Reconnecting is the caller's job:
 * when the connection drops, on_state(up = 0) runs, pending calls complete with
 * UNAVAILABLE, and the caller closes this client and connects a new one. */
#ifndef FK_NET_GRPC_CLIENT_H
#define FK_NET_GRPC_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/base/err.h"
#include "common/net/grpc.h"
#include "common/net/limits.h"
#include "common/net/tls.h"

typedef struct fk_grpc_client fk_grpc_client;

/* Completion of one call: runs exactly once. resp is valid only during the callback. */
typedef void (*fk_grpc_done)(void *ud, int status, const char *msg, const uint8_t *resp,
                             size_t len);

typedef struct fk_grpc_client_config {
    fk_net_limits limits;
    fk_tls_ctx *tls; /* client context; the client takes its own reference */
} fk_grpc_client_config;

/* Connect to host and port. host is an IPv4/IPv6 literal or a DNS name (resolved
 * with uv_getaddrinfo on the loop; each address is tried in turn until one accepts
 * the TCP connection). server_name (NULL: host) is checked against the server
 * certificate's SAN (DNS name or IP). on_state reports
 * up = 1 once TLS and HTTP/2 are ready, up = 0 with the reason when the connection
 * fails or ends. Calls may be issued at once; they wait for the connection. */
FK_CHECKRETURN int fk_grpc_client_connect(
    fk_grpc_client **out, uv_loop_t *loop, const fk_grpc_client_config *cfg, const char *host,
    int port, const char *server_name,
    void (*on_state)(fk_grpc_client *cl, int up, const char *why, void *ud), void *ud, fk_err *err);

/* Start a unary call to path ("/pkg.Service/Method") with a deadline timeout_ms from
 * now (0 = none). req is NOT copied: it must stay valid until done runs. done runs exactly
 * once, also when the call cannot start (then before this returns non-zero). */
int fk_grpc_client_call(fk_grpc_client *cl, const char *path, const uint8_t *req, size_t len,
                        uint64_t timeout_ms, fk_grpc_done done, void *ud);

/* Send GOAWAY, fail pending calls with CANCELLED, close; on_closed runs after the
 * client is freed. */
void fk_grpc_client_close(fk_grpc_client *cl, void (*on_closed)(void *ud), void *ud);

/* Liveness probing, for an owner that must notice a stalled connection (e.g. a TLS record
 * whose damaged length leaves a peer waiting for bytes that never come) before its server
 * gives up on it: a PING right after the handshake, whenever nothing has arrived for
 * probe_ms and at least every 2 probe_ms (calls waiting or not), and the connection closes
 * (on_state up = 0, calls end UNAVAILABLE) when a PING has had neither its ACK nor any other
 * byte for max(floor_ms, 4 × the round trip measured by PING ACKs, a moving average); half
 * the handshake's time stands in until the first ACK, so a slow link gets a long deadline. Replaces
 * the keepalive_ms / keepalive_timeout_ms rule for this client; probe_ms = 0 restores it.
 * May be called before the connection is up. */
void fk_grpc_client_liveness(fk_grpc_client *cl, uint64_t probe_ms, uint64_t floor_ms);

/* Peer identity of the server once up (certificate CN/SAN). */
const fk_tls_peer *fk_grpc_client_peer(const fk_grpc_client *cl);

#endif
