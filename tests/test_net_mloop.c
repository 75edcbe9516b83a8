/* The gRPC server with I/O threads (io_threads > 1), against many of our clients over mutual
 * TLS on 127.0.0.1: handlers run only on the loop that owns the server, every call is
 * answered with its own bytes, the connections are spread over the threads and the counters
 * add up; a connection that closes while its call waits on the main loop cancels the call,
 * and the late reply frees it without touching the gone connection; a server closed while
 * clients keep calling answers or cancels every call, ends all threads and leaks nothing. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/certs.h"
#include "common/net/grpc_client.h"
#include "common/net/grpc_server_int.h"
#include "common/net/grpc_server.h"
#include "tests/support_net.h"

enum { THREADS = 3, CLIENTS = 12, CALLS = 40, BIG = 256 * 1024, MAXHELD = 64 };

typedef struct fixture fixture;

typedef struct client {
    fixture *f;
    int index;
    fk_grpc_client *cl;
    int up, down, sent, ok, other, wrong, running;
    uint8_t req[CALLS][64];
} client;

struct fixture {
    char dir[64];
    uv_loop_t loop;
    uv_thread_t main_thread;
    fk_grpc_server *srv;
    client c[CLIENTS];
    fk_net_limits lim;
    int server_closed, clients_closed;
    /* main-loop state the handlers change without locks: the single-writer rule */
    int handler_calls, off_thread, cancels, late_estate, late_ok;
    fk_grpc_call *held[MAXHELD];
    int nheld, reply_on_cancel;
    int keep_calling; /* shutdown case: every answer sends the next call */
    uint8_t *big;
};

static void check_thread(fixture *f)
{
    uv_thread_t self = uv_thread_self();
    if (!uv_thread_equal(&self, &f->main_thread))
        f->off_thread++;
}

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fixture *f = ud;
    check_thread(f);
    f->handler_calls++;
    assert_string_equal(peer->id, "alice");
    if (len == BIG) { /* handed over without a copy: freed by the thread that sends it */
        uint8_t *copy = malloc(len);
        assert_non_null(copy);
        memcpy(copy, req, len);
        assert_int_equal(fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, copy, len, free), FK_OK);
        return;
    }
    assert_int_equal(fk_grpc_call_reply(call, FK_GRPC_OK, NULL, req, len), FK_OK);
}

static void held_cancelled(fk_grpc_call *call, void *ud)
{
    fixture *f = ud;
    check_thread(f);
    f->cancels++;
    assert_true(fk_grpc_call_cancelled(call));
    if (!f->reply_on_cancel)
        return; /* replied later by the test: the connection is long gone then */
    for (int i = 0; i < f->nheld; i++)
        if (f->held[i] == call)
            f->held[i] = NULL;
    int rc = fk_grpc_call_reply(call, FK_GRPC_OK, NULL, (const uint8_t *)"late", 4);
    f->late_estate += rc == FK_ESTATE;
    f->late_ok += rc == FK_OK;
}

static void on_hold(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer, (void)req, (void)len, (void)deadline;
    fixture *f = ud;
    check_thread(f);
    assert_string_equal(fk_grpc_call_method(call), "/t.T/Hold");
    assert_true(f->nheld < MAXHELD);
    fk_grpc_call_on_cancel(call, held_cancelled, f);
    f->held[f->nheld++] = call;
}

static void server_closed(void *ud)
{
    ((fixture *)ud)->server_closed = 1;
}

static void client_closed(void *ud)
{
    ((fixture *)ud)->clients_closed++;
}

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl, (void)why;
    client *c = ud;
    if (up)
        c->up = 1;
    else
        c->down = 1;
}

static void echo_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len);

static void send_echo(client *c)
{
    int k = c->sent++ % CALLS;
    const uint8_t *req = c->req[k];
    size_t len = sizeof c->req[k];
    if (k == 7 && c->index % 3 == 0) { /* a few big ones */
        req = c->f->big;
        len = BIG;
    }
    c->running++;
    (void)fk_grpc_client_call(c->cl, "/t.T/Echo", req, len, 10000, echo_done, c);
}

static void echo_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)msg;
    client *c = ud;
    c->running--;
    if (status == FK_GRPC_OK) {
        c->ok++;
        /* the answer is one of this client's requests, byte for byte */
        int found = len == BIG && !memcmp(resp, c->f->big, BIG);
        for (int k = 0; !found && k < CALLS; k++)
            found = len == sizeof c->req[k] && !memcmp(resp, c->req[k], len);
        c->wrong += !found;
    } else {
        c->other++;
    }
    if (c->f->keep_calling && status == FK_GRPC_OK && c->cl)
        send_echo(c);
}

static void hold_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)status, (void)msg, (void)resp, (void)len;
    client *c = ud;
    c->running--;
    c->other++;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    static const char *const reloaded[] = {"reloaded", NULL};
    fk_test_pki_make(f->dir, sizeof f->dir, "/tmp/fk-net-mloop-XXXXXX", reloaded);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    f->main_thread = uv_thread_self();
    fk_net_limits_default(&f->lim);
    fk_log_set_level(FK_LOG_ERROR);
    f->big = malloc(BIG);
    assert_non_null(f->big);
    for (size_t i = 0; i < BIG; i++)
        f->big[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < CLIENTS; i++) {
        f->c[i].f = f;
        f->c[i].index = i;
        for (int k = 0; k < CALLS; k++)
            snprintf((char *)f->c[i].req[k], sizeof f->c[i].req[k], "client %d call %d", i, k);
    }
    *state = f;
    return 0;
}

static void start_server(fixture *f)
{
    fk_err err;
    fk_test_echo_server(&f->srv, &f->loop, f->dir, &f->lim, 300, THREADS, on_echo, on_hold, f);
    /* the I/O threads learnt the methods at listen: a new one now is refused */
    assert_int_equal(fk_grpc_server_handle(f->srv, "/t.T/Late", on_echo, f, &err), FK_ESTATE);
}

static void connect_clients(fixture *f)
{
    fk_err err;
    fk_grpc_client_config cc = {.limits = f->lim};
    cc.tls = fk_test_tls(f->dir, 0, "alice");
    for (int i = 0; i < CLIENTS; i++)
        assert_int_equal(fk_grpc_client_connect(&f->c[i].cl, &f->loop, &cc, "127.0.0.1",
                                                fk_grpc_server_port(f->srv), NULL, on_state,
                                                &f->c[i], &err),
                         FK_OK);
    fk_tls_ctx_unref(cc.tls);
}

static void close_client(fixture *f, int i)
{
    if (!f->c[i].cl)
        return;
    fk_grpc_client_close(f->c[i].cl, client_closed, f);
    f->c[i].cl = NULL;
}

/* Run the loop until cond holds (bounded: 30 s of loop time on a loaded machine). */
static void run_until(fixture *f, int (*cond)(fixture *))
{
    uint64_t end = uv_now(&f->loop) + 30000;
    while (!cond(f) && uv_now(&f->loop) < end)
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_ONCE));
    assert_true(cond(f));
}

static int all_answered(fixture *f)
{
    for (int i = 0; i < CLIENTS; i++)
        if (f->c[i].ok + f->c[i].other < CALLS)
            return 0;
    return 1;
}

static int all_held(fixture *f)
{
    return f->nheld == CLIENTS;
}

static int all_cancelled(fixture *f)
{
    return f->cancels == f->nheld;
}

static int srv_closed(fixture *f)
{
    return f->server_closed;
}

static int none_running(fixture *f)
{
    for (int i = 0; i < CLIENTS; i++)
        if (f->c[i].running)
            return 0;
    return 1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    for (int i = 0; i < CLIENTS; i++)
        close_client(f, i);
    if (f->srv && !f->server_closed)
        fk_grpc_server_close(f->srv, server_closed, f);
    FK_UV_MUST(uv_run(&f->loop, UV_RUN_DEFAULT)); /* ends only once every thread is joined */
    assert_int_equal(uv_loop_close(&f->loop), 0);
    fk_test_pki_remove(f->dir);
    free(f->big);
    free(f);
    return 0;
}

static void calls_from_many_clients(void **state)
{
    fixture *f = *state;
    start_server(f);
    connect_clients(f);
    for (int i = 0; i < CLIENTS; i++)
        for (int k = 0; k < CALLS; k++)
            send_echo(&f->c[i]);
    run_until(f, all_answered);
    for (int i = 0; i < CLIENTS; i++) {
        assert_int_equal(f->c[i].ok, CALLS);
        assert_int_equal(f->c[i].wrong, 0);
    }
    assert_int_equal(f->handler_calls, CLIENTS * CALLS);
    assert_int_equal(f->off_thread, 0); /* every handler ran on the loop that owns the server */
    fk_grpc_server_stats st;
    fk_grpc_server_stats_get(f->srv, &st);
    assert_int_equal(st.conns_accepted, CLIENTS);
    assert_int_equal(st.calls, CLIENTS * CALLS);
    assert_true(st.peak_conn_memory >= BIG);
    uint64_t counts[FK_GRPC_N_STATUS];
    assert_string_equal(fk_grpc_server_method_calls(f->srv, 0, counts), "/t.T/Echo");
    assert_int_equal(counts[FK_GRPC_OK], CLIENTS * CALLS);
    /* the accepting loop spreads the connections evenly over the threads */
    uint64_t sum = 0;
    for (int t = 0; t < THREADS; t++) {
        uint64_t n = fk__grpc_server_thread_accepted(f->srv, t);
        assert_int_equal(n, CLIENTS / THREADS);
        sum += n;
    }
    assert_int_equal(sum, CLIENTS);
    assert_int_equal(fk__grpc_server_thread_accepted(f->srv, THREADS), 0);
    /* closing with the clients gone: every thread ends, on_closed runs once */
    for (int i = 0; i < CLIENTS; i++)
        close_client(f, i);
    fk_grpc_server_close(f->srv, server_closed, f);
    run_until(f, srv_closed);
    f->srv = NULL;
}

/* Every client's connection closes while its call waits on the main loop: each call is
 * cancelled there; the replies come after the connections are gone and only free the calls. */
static void connection_closed_while_call_waits(void **state)
{
    fixture *f = *state;
    start_server(f);
    connect_clients(f);
    for (int i = 0; i < CLIENTS; i++) {
        f->c[i].running++;
        (void)fk_grpc_client_call(f->c[i].cl, "/t.T/Hold", (const uint8_t *)"", 0, 0, hold_done,
                                  &f->c[i]);
    }
    run_until(f, all_held);
    for (int i = 0; i < CLIENTS; i++)
        close_client(f, i);
    run_until(f, all_cancelled);
    assert_int_equal(f->cancels, CLIENTS);
    for (int i = 0; i < f->nheld; i++) {
        int rc = fk_grpc_call_reply(f->held[i], FK_GRPC_OK, NULL, (const uint8_t *)"late", 4);
        assert_int_equal(rc, FK_ESTATE); /* cancelled: the reply only released the handle */
        f->held[i] = NULL;
    }
    assert_int_equal(f->off_thread, 0);
    fk_grpc_server_close(f->srv, server_closed, f);
    run_until(f, srv_closed);
    f->srv = NULL;
}

/* Close the server while every client keeps calling and some calls wait on the main loop:
 * the waiting calls are cancelled (their handlers answer), the rest are answered or refused,
 * every thread ends and on_closed runs once. */
static void shutdown_under_load(void **state)
{
    fixture *f = *state;
    f->reply_on_cancel = 1;
    f->keep_calling = 1;
    start_server(f);
    connect_clients(f);
    for (int i = 0; i < CLIENTS; i++) {
        f->c[i].running++;
        (void)fk_grpc_client_call(f->c[i].cl, "/t.T/Hold", (const uint8_t *)"", 0, 0, hold_done,
                                  &f->c[i]);
        for (int k = 0; k < 4; k++)
            send_echo(&f->c[i]);
    }
    run_until(f, all_held);
    /* let the echo traffic run a while, then close in the middle of it */
    uint64_t until = uv_now(&f->loop) + 300;
    while (uv_now(&f->loop) < until)
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_ONCE));
    int before = f->handler_calls;
    assert_true(before > CLIENTS * 4);
    fk_grpc_server_close(f->srv, server_closed, f);
    run_until(f, srv_closed);
    f->srv = NULL;
    assert_int_equal(f->cancels, CLIENTS);
    assert_int_equal(f->late_estate, CLIENTS); /* cancelled first: the reply was not sent */
    assert_int_equal(f->late_ok, 0);
    f->keep_calling = 0;
    run_until(f, none_running); /* every call ended: answered, refused or failed */
    for (int i = 0; i < CLIENTS; i++) {
        assert_int_equal(f->c[i].wrong, 0);
        assert_true(f->c[i].other >= 1); /* at least its Hold */
    }
    assert_int_equal(f->off_thread, 0);
}

static int all_up(fixture *f)
{
    for (int i = 0; i < CLIENTS; i++)
        if (!f->c[i].up)
            return 0;
    return 1;
}

static int all_threads_accepted(fixture *f)
{
    for (int t = 0; t < THREADS; t++)
        if (fk__grpc_server_thread_accepted(f->srv, t) == 0)
            return 0;
    return 1;
}

/* A reloaded certificate (SIGHUP) reaches every I/O thread: the connections made after the
 * swap, whichever thread takes them, are served with it. */
static void tls_reload_reaches_every_thread(void **state)
{
    fixture *f = *state;
    start_server(f);
    fk_tls_ctx *tls = fk_test_tls(f->dir, 1, "reloaded");
    fk_grpc_server_set_tls(f->srv, tls);
    fk_tls_ctx_unref(tls);
    connect_clients(f);
    run_until(f, all_up);
    for (int i = 0; i < CLIENTS; i++)
        assert_string_equal(fk_grpc_client_peer(f->c[i].cl)->cn, "reloaded");
    /* A TLS 1.3 client is up once it sent its Finished; the I/O thread counts the connection
     * only after reading it, so wait (bounded) for every thread's count rather than race it. */
    uint64_t end = uv_now(&f->loop) + 30000;
    while (!all_threads_accepted(f) && uv_now(&f->loop) < end) {
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_NOWAIT));
        usleep(1000);
        uv_update_time(&f->loop);
    }
    assert_true(all_threads_accepted(f));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a closed peer is an error code, not a kill */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(calls_from_many_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(connection_closed_while_call_waits, setup, teardown),
        cmocka_unit_test_setup_teardown(shutdown_under_load, setup, teardown),
        cmocka_unit_test_setup_teardown(tls_reload_reaches_every_thread, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
