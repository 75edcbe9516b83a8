/* Health/Check, Join and Heartbeat: client sessions keyed by certificate identity. */
#include "server/rpc.h"

#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "health.pb.h"

void fk_server_rpc_init(fk_server_rpc *r, uv_loop_t *loop, uint32_t heartbeat_ms, uint32_t max_message)
{
    memset(r, 0, sizeof *r);
    r->loop = loop;
    r->heartbeat_ms = heartbeat_ms;
    r->max_message = max_message;
    r->serving = 1;
}

void fk_server_rpc_close(fk_server_rpc *r)
{
    free(r->sessions);
    r->sessions = NULL;
    r->nsessions = r->cap = 0;
}

fk_server_session *fk_server_rpc_session(fk_server_rpc *r, const char *id)
{
    for (int i = 0; i < r->nsessions; i++)
        if (!strcmp(r->sessions[i].id, id))
            return &r->sessions[i];
    return NULL;
}

/* Encode msg and answer OK, or INTERNAL if encoding fails. */
static void reply_msg(fk_grpc_call *call, const pb_msgdesc_t *fields, const void *msg)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    fk_err err = {0};
    if (fk_codec_encode(fields, msg, 0, &buf, &len, &err) != FK_OK) {
        fk_grpc_call_reply(call, FK_GRPC_INTERNAL, err.msg, NULL, 0);
        return;
    }
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, len, free);
}

/* Decode or answer INVALID_ARGUMENT naming the method. Returns 0 when decoded. */
static int decode(fk_grpc_call *call, const pb_msgdesc_t *fields, void *msg, const uint8_t *req,
                  size_t len)
{
    fk_err err = {0};
    if (fk_codec_decode(fields, msg, req, len, &err) == FK_OK)
        return 0;
    char why[600];
    snprintf(why, sizeof why, "%s: undecodable request: %s", fk_grpc_call_method(call), err.msg);
    fk_grpc_call_reply(call, FK_GRPC_INVALID_ARGUMENT, why, NULL, 0);
    return -1;
}

static void on_health(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                      uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    fk_server_rpc *r = ud;
    grpc_health_v1_HealthCheckRequest in = grpc_health_v1_HealthCheckRequest_init_zero;
    if (decode(call, grpc_health_v1_HealthCheckRequest_fields, &in, req, len) != 0)
        return;
    fk_codec_release(grpc_health_v1_HealthCheckRequest_fields, &in);
    if (in.service[0] && strcmp(in.service, "fedkern.v1.Federation") != 0) {
        fk_grpc_call_reply(call, FK_GRPC_NOT_FOUND, "unknown service", NULL, 0);
        return;
    }
    grpc_health_v1_HealthCheckResponse out = grpc_health_v1_HealthCheckResponse_init_zero;
    out.status = r->serving ? grpc_health_v1_HealthCheckResponse_ServingStatus_SERVING
                            : grpc_health_v1_HealthCheckResponse_ServingStatus_NOT_SERVING;
    reply_msg(call, grpc_health_v1_HealthCheckResponse_fields, &out);
}

static fk_server_session *new_session(fk_server_rpc *r, const char *client)
{
    if (r->nsessions == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        fk_server_session *s = realloc(r->sessions, (size_t)cap * sizeof *s);
        if (!s)
            return NULL;
        r->sessions = s;
        r->cap = cap;
    }
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return NULL;
    fk_server_session *s = &r->sessions[r->nsessions++];
    for (int i = 0; i < 16; i++)
        snprintf(s->id + 2 * i, 3, "%02x", raw[i]);
    snprintf(s->client, sizeof s->client, "%s", client);
    s->last_seen = uv_now(r->loop);
    return s;
}

static void on_join(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_server_rpc *r = ud;
    fedkern_v1_JoinRequest in = fedkern_v1_JoinRequest_init_zero;
    if (decode(call, fedkern_v1_JoinRequest_fields, &in, req, len) != 0)
        return;
    fk_codec_release(fedkern_v1_JoinRequest_fields, &in);
    if (peer->role != FK_ROLE_CLIENT || !peer->id[0]) {
        fk_log(FK_LOG_WARN, "join_refused", "peer=%s cn=%s reason=\"not a client certificate\"",
               peer->addr, peer->cn);
        fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED,
                           "Join needs a client certificate (fedkern certs issue --client NAME)", NULL, 0);
        return;
    }
    if (in.name[0] && strcmp(in.name, peer->id) != 0) {
        fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED,
                           "JoinRequest.name differs from the certificate identity", NULL, 0);
        return;
    }
    if (in.protocol_version != 1) {
        fk_grpc_call_reply(call, FK_GRPC_FAILED_PRECONDITION,
                           "unsupported protocol_version; this server speaks fedkern.v1 (1)", NULL, 0);
        return;
    }
    fk_server_session *s = new_session(r, peer->id);
    if (!s) {
        fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "cannot create a session", NULL, 0);
        return;
    }
    fk_log(FK_LOG_INFO, "client_joined", "client=%s session=%s software=\"%s\" samples=%llu", s->client,
           s->id, in.software, (unsigned long long)in.n_samples);
    fedkern_v1_JoinResponse out = fedkern_v1_JoinResponse_init_zero;
    snprintf(out.session_id, sizeof out.session_id, "%s", s->id);
    snprintf(out.client_id, sizeof out.client_id, "%s", s->client);
    out.heartbeat_interval_ms = r->heartbeat_ms;
    out.max_message_size = r->max_message;
    out.protocol_version = 1;
    snprintf(out.software, sizeof out.software, "fedkern %s", FK_VERSION);
    reply_msg(call, fedkern_v1_JoinResponse_fields, &out);
}

static void on_heartbeat(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                         uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_server_rpc *r = ud;
    fedkern_v1_HeartbeatRequest in = fedkern_v1_HeartbeatRequest_init_zero;
    if (decode(call, fedkern_v1_HeartbeatRequest_fields, &in, req, len) != 0)
        return;
    fk_codec_release(fedkern_v1_HeartbeatRequest_fields, &in);
    fk_server_session *s = fk_server_rpc_session(r, in.session_id);
    if (!s) {
        fk_grpc_call_reply(call, FK_GRPC_NOT_FOUND, "unknown session_id; call Join again", NULL, 0);
        return;
    }
    if (strcmp(s->client, peer->id) != 0) {
        fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED, "session belongs to another client", NULL, 0);
        return;
    }
    s->last_seen = uv_now(r->loop);
    fedkern_v1_HeartbeatResponse out = fedkern_v1_HeartbeatResponse_init_zero;
    out.heartbeat_interval_ms = r->heartbeat_ms;
    reply_msg(call, fedkern_v1_HeartbeatResponse_fields, &out);
}

int fk_server_rpc_register(fk_server_rpc *r, fk_grpc_server *srv, fk_err *err)
{
    int rc;
    if ((rc = fk_grpc_server_handle(srv, FK_RPC_HEALTH_CHECK, on_health, r, err)) != FK_OK ||
        (rc = fk_grpc_server_handle(srv, FK_RPC_JOIN, on_join, r, err)) != FK_OK ||
        (rc = fk_grpc_server_handle(srv, FK_RPC_HEARTBEAT, on_heartbeat, r, err)) != FK_OK)
        return rc;
    return FK_OK;
}
