/* Test peer for the interop and security suites (driven by the tests/interop scripts):
 *   net_peer serve --listen 127.0.0.1:0 --ca F --cert F --key F [--net.max_message N]
 *       serves /fktest.Echo/Echo (echoes the request), /fktest.Echo/Sleep (answers
 *       after the request's first 4 bytes, little-endian, in ms; or at its deadline)
 *       and /fktest.Echo/Size (answers with 8 bytes: the request length); prints
 *       "PORT n" once listening; exits 0 on SIGTERM after a graceful close.
 *   net_peer call --port P --server_name NAME --ca F --cert F --key F --method PATH
 *       [--size N] [--timeout_ms T] [--sleep_ms S] [--net.max_message N]
 *       sends N pattern bytes (or the 4-byte sleep request) and prints
 *       "status=NAME len=L ok=1|0 msg=..." (ok: the echo matched the pattern). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/net/grpc_client.h"
#include "common/net/grpc_server.h"

typedef struct sleeper {
    uv_timer_t timer;
    fk_grpc_call *call;
} sleeper;

static void sleeper_closed(uv_handle_t *h)
{
    free(h->data);
}

static void sleep_done(uv_timer_t *t)
{
    sleeper *s = t->data;
    if (s->call)
        fk_grpc_call_reply(s->call, FK_GRPC_OK, NULL, (const uint8_t *)"late", 4);
    s->call = NULL;
    uv_close((uv_handle_t *)t, sleeper_closed);
}

static void sleep_cancelled(fk_grpc_call *call, void *ud)
{
    sleeper *s = ud;
    fk_log(FK_LOG_INFO, "test_cancelled", "path=%s", fk_grpc_call_method(call));
    fk_grpc_call_reply(call, FK_GRPC_CANCELLED, NULL, NULL, 0);
    s->call = NULL;
    FK_UV_MUST(uv_timer_stop(&s->timer));
    uv_close((uv_handle_t *)&s->timer, sleeper_closed);
}

static void on_sleep(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                     uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    uint32_t ms = len >= 4 ? (uint32_t)req[0] | (uint32_t)req[1] << 8 | (uint32_t)req[2] << 16 |
                                 (uint32_t)req[3] << 24
                           : 0;
    sleeper *s = calloc(1, sizeof *s);
    if (!s) {
        fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "oom", NULL, 0);
        return;
    }
    s->call = call;
    FK_UV_MUST(uv_timer_init(ud, &s->timer));
    s->timer.data = s;
    fk_grpc_call_on_cancel(call, sleep_cancelled, s);
    FK_UV_MUST(uv_timer_start(&s->timer, sleep_done, ms, 0));
}

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)ud;
    (void)deadline;
    fk_log(FK_LOG_DEBUG, "test_echo", "cn=%s san=%s len=%zu", peer->cn, peer->san, len);
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, req, len);
}

static void on_size(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)ud;
    (void)deadline;
    (void)req;
    uint8_t out[8];
    for (int i = 0; i < 8; i++)
        out[i] = (uint8_t)((uint64_t)len >> (8 * i));
    fk_log(FK_LOG_INFO, "test_size", "cn=%s len=%zu", peer->cn, len);
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, out, 8);
}

typedef struct serve_state {
    fk_grpc_server *srv;
    uv_signal_t sig;
} serve_state;

static void serve_closed(void *ud)
{
    serve_state *st = ud;
    uv_close((uv_handle_t *)&st->sig, NULL);
}

static void on_signal(uv_signal_t *sig, int signum)
{
    (void)signum;
    serve_state *st = sig->data;
    FK_UV_MUST(uv_signal_stop(sig));
    fk_grpc_server_close(st->srv, serve_closed, st);
}

static int load_tls(const fk_params *p, int server, fk_tls_ctx **tls, fk_err *err)
{
    fk_tls_files f = {fk_params_str(p, "ca", NULL), fk_params_str(p, "cert", NULL),
                      fk_params_str(p, "key", NULL), fk_params_str(p, "crl", NULL), 0};
    return fk_tls_ctx_new(tls, server, &f, err);
}

static int serve(fk_params *p, fk_err *err)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        return fk_err_set(err, FK_ENET, "cannot create the event loop");
    fk_grpc_server_config cfg = {0};
    fk_net_limits_default(&cfg.limits);
    int rc = fk_net_limits_from_params(&cfg.limits, p, "net", err);
    if (rc == FK_OK)
        rc = load_tls(p, 1, &cfg.tls, err);
    if (rc != FK_OK)
        return rc;
    serve_state st;
    rc = fk_grpc_server_init(&st.srv, &loop, &cfg, err);
    fk_tls_ctx_unref(cfg.tls);
    if (rc != FK_OK)
        return rc;
    rc = fk_grpc_server_handle(st.srv, "/fktest.Echo/Echo", on_echo, NULL, err);
    if (!rc)
        rc = fk_grpc_server_handle(st.srv, "/fktest.Echo/Size", on_size, NULL, err);
    if (!rc)
        rc = fk_grpc_server_handle(st.srv, "/fktest.Echo/Sleep", on_sleep, &loop, err);
    if (!rc)
        rc = fk_grpc_server_listen(st.srv, fk_params_str(p, "listen", "127.0.0.1:0"), err);
    if (rc != FK_OK) {
        fk_grpc_server_close(st.srv, NULL, NULL);
        FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
        FK_UV_MUST(uv_loop_close(&loop));
        return rc;
    }
    printf("PORT %d\n", fk_grpc_server_port(st.srv));
    fflush(stdout);
    /* without the handler SIGTERM ends the peer at once, which the test scripts accept */
    if (uv_signal_init(&loop, &st.sig) == 0) {
        st.sig.data = &st;
        FK_UV_MUST(uv_signal_start(&st.sig, on_signal, SIGTERM));
    }
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    FK_UV_MUST(uv_loop_close(&loop));
    return FK_OK;
}

typedef struct call_state {
    fk_grpc_client *cl;
    uint8_t *req;
    size_t len;
    int sleep;
    int status;
} call_state;

static void client_closed(void *ud)
{
    (void)ud;
}

static void call_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    call_state *st = ud;
    int ok = status == FK_GRPC_OK && !st->sleep && len == st->len &&
             (len == 0 || memcmp(resp, st->req, len) == 0);
    printf("status=%s len=%zu ok=%d msg=%s\n", fk_grpc_status_name(status), len, ok, msg);
    fflush(stdout);
    st->status = status;
    fk_grpc_client_close(st->cl, client_closed, NULL);
}

static int call(fk_params *p, fk_err *err)
{
    uv_loop_t loop;
    if (uv_loop_init(&loop))
        return fk_err_set(err, FK_ENET, "cannot create the event loop");
    fk_grpc_client_config cfg = {0};
    fk_net_limits_default(&cfg.limits);
    long port, size, timeout, sleep_ms;
    int rc = fk_net_limits_from_params(&cfg.limits, p, "net", err);
    if (rc == FK_OK)
        rc = fk_params_int(p, "port", 0, 1, 65535, &port, err);
    if (rc == FK_OK)
        rc = fk_params_int(p, "size", 1024, 0, 1L << 31, &size, err);
    if (rc == FK_OK)
        rc = fk_params_int(p, "timeout_ms", 10000, 0, 1L << 31, &timeout, err);
    if (rc == FK_OK)
        rc = fk_params_int(p, "sleep_ms", -1, -1, 1L << 30, &sleep_ms, err);
    if (rc == FK_OK)
        rc = load_tls(p, 0, &cfg.tls, err);
    if (rc != FK_OK)
        return rc;
    call_state st = {0};
    st.sleep = sleep_ms >= 0;
    st.len = st.sleep ? 4 : (size_t)size;
    st.req = malloc(st.len ? st.len : 1);
    for (size_t i = 0; i < st.len; i++)
        st.req[i] = (uint8_t)(i * 131 + 7);
    if (st.sleep)
        for (int i = 0; i < 4; i++)
            st.req[i] = (uint8_t)((uint32_t)sleep_ms >> (8 * i));
    rc = fk_grpc_client_connect(&st.cl, &loop, &cfg, fk_params_str(p, "host", "127.0.0.1"),
                                (int)port, fk_params_str(p, "server_name", "localhost"), NULL, NULL,
                                err);
    fk_tls_ctx_unref(cfg.tls);
    if (rc == FK_OK)
        fk_grpc_client_call(st.cl, fk_params_str(p, "method", "/fktest.Echo/Echo"), st.req, st.len,
                            (uint64_t)timeout, call_done, &st);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    FK_UV_MUST(uv_loop_close(&loop));
    free(st.req);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: net_peer serve|call [--key value ...]\n");
        return 2;
    }
    fk_params p;
    fk_err err = {0};
    signal(SIGPIPE, SIG_IGN);
    fk_params_init(&p);
    int n = argc - 2;
    int rc = fk_params_parse_args(&p, &n, argv + 2, &err);
    const char *lvl = fk_params_str(&p, "log_level", "info");
    fk_log_set_level(!strcmp(lvl, "debug") ? FK_LOG_DEBUG : FK_LOG_INFO);
    if (rc == FK_OK)
        rc = !strcmp(argv[1], "serve") ? serve(&p, &err) : call(&p, &err);
    fk_params_close(&p);
    if (rc != FK_OK) {
        fprintf(stderr, "net_peer: %s\n", err.msg);
        return 1;
    }
    return 0;
}
