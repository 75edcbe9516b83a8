/* Fuzz target: the HTTP/2 + gRPC server input path without TLS. Bytes after the
 * client preface go into a fresh nghttp2 server session of a gRPC server that
 * runs fedkern-server's Federation service (server/service.c over an in-memory
 * store: every request decoder and handler) plus an echo, with small limits so
 * the limit paths run too. The first input byte picks the peer: a client or an
 * admin certificate identity. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_server.h"
#include "server/engine.h"
#include "server/service.h"
#include "server/store.h"

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    (void)ud;
    fk_grpc_call_reply(call, len & 1 ? FK_GRPC_INVALID_ARGUMENT : FK_GRPC_OK, "odd \xff%", req, len);
}

static void service_closed(void *ud)
{
    (void)ud;
}

static const fk_blob_codec codec = {fk_codec_bundle_encode, fk_codec_bundle_decode};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    fk_log_set_level(FK_LOG_ERROR);
    fk_tls_peer peer = {.cn = "fuzzer", .san = "fuzzer", .addr = "fuzz", .id = "fuzzer",
                        .role = size && (data[0] & 1) ? FK_ROLE_ADMIN : FK_ROLE_CLIENT};
    uint8_t *buf = malloc(size + 24);
    if (!buf)
        return 0;
    memcpy(buf, preface, 24);
    if (size > 1)
        memcpy(buf + 24, data + 1, size - 1);
    size_t len = 24 + (size > 1 ? size - 1 : 0);
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        abort(); /* the harness, not the input */
    fk_grpc_server_config cfg = {0};
    fk_net_limits_default(&cfg.limits);
    cfg.limits.max_message = 4096;
    cfg.limits.max_conn_memory = 16384;
    cfg.limits.max_streams = 8;
    fk_service_config scfg = {.heartbeat_ms = 1000, .max_message = 4096, .reasm_limit = 1 << 20};
    fk_grpc_server *srv = NULL;
    fk_store *st = NULL;
    fk_engine *e = NULL;
    fk_service *svc = NULL;
    fk_err err;
    fk_engine_opts eo = {.codec = codec};
    if (fk_store_open(&st, ":memory:", &err) == FK_OK && (eo.store = st) &&
        fk_engine_open(&e, &eo, fk_service_now(), &err) == FK_OK &&
        fk_grpc_server_init(&srv, &loop, &cfg, &err) == FK_OK &&
        fk_service_init(&svc, &loop, srv, e, st, &scfg, &err) == FK_OK) {
        if (fk_grpc_server_handle(srv, "/fktest.Echo/Echo", on_echo, NULL, &err))
            abort(); /* a fixed, valid path: only a harness fault gets here */
        fk_grpc_server_feed_raw(srv, &peer, buf, len);
    }
    if (svc) {
        fk_service_close(svc, service_closed, NULL);
        FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    }
    if (srv)
        fk_grpc_server_close(srv, NULL, NULL);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    fk_service_free(svc);
    fk_engine_close(e);
    fk_store_close(st);
    FK_UV_MUST(uv_loop_close(&loop));
    free(buf);
    return 0;
}
