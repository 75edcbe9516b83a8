/* Fuzz target: the HTTP/2 + gRPC server input path without TLS. Bytes after the
 * client preface go into a fresh nghttp2 server session of a gRPC server that
 * serves fedkern-server's handlers (Health/Check, Join, Heartbeat: the nanopb
 * decoders) plus an echo, with small limits so the limit paths run too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/net/grpc_server.h"
#include "server/rpc.h"

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    (void)ud;
    fk_grpc_call_reply(call, len & 1 ? FK_GRPC_INVALID_ARGUMENT : FK_GRPC_OK, "odd \xff%", req, len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    fk_log_set_level(FK_LOG_ERROR);
    uint8_t *buf = malloc(size + 24);
    if (!buf)
        return 0;
    memcpy(buf, preface, 24);
    if (size)
        memcpy(buf + 24, data, size);
    uv_loop_t loop;
    uv_loop_init(&loop);
    fk_grpc_server_config cfg = {0};
    fk_net_limits_default(&cfg.limits);
    cfg.limits.max_message = 4096;
    cfg.limits.max_conn_memory = 16384;
    cfg.limits.max_streams = 8;
    fk_grpc_server *srv;
    fk_err err;
    fk_server_rpc rpc;
    fk_server_rpc_init(&rpc, &loop, 1000, 4096);
    if (fk_grpc_server_init(&srv, &loop, &cfg, &err) == FK_OK) {
        fk_server_rpc_register(&rpc, srv, &err);
        fk_grpc_server_handle(srv, "/fktest.Echo/Echo", on_echo, NULL, &err);
        fk_grpc_server_feed_raw(srv, buf, size + 24);
        fk_grpc_server_close(srv, NULL, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    fk_server_rpc_close(&rpc);
    uv_loop_close(&loop);
    free(buf);
    return 0;
}
