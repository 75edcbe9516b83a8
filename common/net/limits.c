#include "common/net/limits.h"

#include <stdio.h>

void fk_net_limits_default(fk_net_limits *l)
{
    l->max_message = 32u << 20;
    l->max_streams = 100;
    l->max_conn_memory = 256u << 20;
    l->idle_timeout_ms = 300000;
    l->handshake_timeout_ms = 10000;
    l->keepalive_ms = 30000;
    l->keepalive_timeout_ms = 20000;
}

static const fk_net_limit_doc docs[] = {
    {"max_message", "largest gRPC message in bytes; larger ones get RESOURCE_EXHAUSTED (33554432)"},
    {"max_streams", "concurrent calls per connection (100)"},
    {"max_conn_memory", "bytes of message buffers one connection may hold (268435456)"},
    {"idle_timeout_ms", "close a connection without calls or traffic after this (300000)"},
    {"handshake_timeout_ms", "TCP accept to finished TLS handshake (10000)"},
    {"keepalive_ms", "send an HTTP/2 PING after this much silence, 0 = never (30000)"},
    {"keepalive_timeout_ms", "close the connection when a PING is unanswered this long (20000)"},
    {NULL, NULL},
};

const fk_net_limit_doc *fk_net_limits_doc(void)
{
    return docs;
}

FK_CHECKRETURN static int get_u64(const fk_params *p, const char *prefix, const char *name, uint64_t *v,
                   uint64_t lo, uint64_t hi, fk_err *err)
{
    char key[128];
    snprintf(key, sizeof key, "%s%s%s", prefix ? prefix : "", prefix && *prefix ? "." : "", name);
    uint64_t out;
    int rc = fk_params_u64(p, key, *v, &out, err);
    if (rc != FK_OK)
        return rc;
    if (out < lo || out > hi)
        return fk_err_set(err, FK_EINVAL, "%s = %llu is outside [%llu, %llu]; pick a value in range",
                          key, (unsigned long long)out, (unsigned long long)lo,
                          (unsigned long long)hi);
    *v = out;
    return FK_OK;
}

int fk_net_limits_from_params(fk_net_limits *l, const fk_params *p, const char *prefix, fk_err *err)
{
    uint64_t streams = l->max_streams;
    int rc;
    /* 2^31-1: the largest length the gRPC prefix and HTTP/2 windows can describe safely. */
    if ((rc = get_u64(p, prefix, "max_message", &l->max_message, 0, 0x7fffffffu, err)) ||
        (rc = get_u64(p, prefix, "max_streams", &streams, 1, 1u << 20, err)) ||
        (rc = get_u64(p, prefix, "max_conn_memory", &l->max_conn_memory, 1024, UINT64_MAX, err)) ||
        (rc = get_u64(p, prefix, "idle_timeout_ms", &l->idle_timeout_ms, 0, UINT64_MAX, err)) ||
        (rc = get_u64(p, prefix, "handshake_timeout_ms", &l->handshake_timeout_ms, 1, UINT64_MAX,
                      err)) ||
        (rc = get_u64(p, prefix, "keepalive_ms", &l->keepalive_ms, 0, UINT64_MAX, err)) ||
        (rc = get_u64(p, prefix, "keepalive_timeout_ms", &l->keepalive_timeout_ms, 1, UINT64_MAX,
                      err)))
        return rc;
    l->max_streams = (uint32_t)streams;
    return FK_OK;
}
