/* The RPC surface of fedkern-server: grpc.health.v1.Health/Check and the
 * fedkern.v1.Federation service. This file owns Join and Heartbeat (client
 * sessions); the round engine adds PullTask, PushUpdate, Leave and the admin
 * RPCs the same way, one handler per full method path:
 *
 *     fk_grpc_server_handle(srv, "/fedkern.v1.Federation/PullTask", on_pull, engine, &err);
 *
 * A handler gets (call, peer, request bytes, deadline, ud), decodes the request
 * with fk_codec_decode(fedkern_v1_..._fields, ...), and answers exactly once with
 * fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, len, free) or an error
 * status — immediately or later (long polls keep the call and answer before the
 * deadline). fk_server_rpc_session() maps a request's session_id to the client. */
#ifndef FK_SERVER_RPC_H
#define FK_SERVER_RPC_H

#include <stdint.h>

#include "common/base/err.h"
#include "common/net/grpc_server.h"

#define FK_RPC_JOIN "/fedkern.v1.Federation/Join"
#define FK_RPC_HEARTBEAT "/fedkern.v1.Federation/Heartbeat"
#define FK_RPC_HEALTH_CHECK "/grpc.health.v1.Health/Check"

typedef struct fk_server_session {
    char id[33];       /* 128 random bits, hex */
    char client[65];   /* identity from the client's certificate */
    uint64_t last_seen; /* uv_now ms of the last Join/Heartbeat */
} fk_server_session;

typedef struct fk_server_rpc {
    uv_loop_t *loop;
    uint32_t heartbeat_ms;  /* interval told to clients */
    uint32_t max_message;   /* told to clients in JoinResponse */
    int serving;            /* Health/Check answer: 1 SERVING, 0 NOT_SERVING (draining) */
    fk_server_session *sessions;
    int nsessions, cap;
} fk_server_rpc;

void fk_server_rpc_init(fk_server_rpc *r, uv_loop_t *loop, uint32_t heartbeat_ms, uint32_t max_message);
void fk_server_rpc_close(fk_server_rpc *r);
/* Register Health/Check, Join and Heartbeat on srv. */
int fk_server_rpc_register(fk_server_rpc *r, fk_grpc_server *srv, fk_err *err);
/* The session with this id, or NULL. */
fk_server_session *fk_server_rpc_session(fk_server_rpc *r, const char *id);

#endif
