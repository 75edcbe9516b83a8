/* Our gRPC client against our gRPC server in one libuv loop over mutual TLS:
 * the call life cycle (long polls cancelled by deadline, client and server
 * shutdown), stream limits, idle timeout and peer identity. Every case runs twice: with the
 * connections on the test's loop (io_threads = 1) and on two I/O threads (io_threads = 2). */
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
#include "common/net/grpc_server.h"
#include "tests/support_net.h"

static int io_threads = 1; /* of the server under test: set per group in main */

typedef struct fixture {
    char dir[64];
    uv_loop_t loop;
    fk_grpc_server *srv;
    fk_grpc_client *cl;
    fk_net_limits lim;
    /* observations */
    int done, statuses[64], cancels, held_reply_rc, client_down, server_closed;
    char peer_id[65], msg[256];
    fk_grpc_call *held[8];
    int nheld;
} fixture;

static void on_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fixture *f = ud;
    snprintf(f->peer_id, sizeof f->peer_id, "%s", peer->id);
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, req, len);
}

static void held_cancelled(fk_grpc_call *call, void *ud)
{
    fixture *f = ud;
    f->cancels++;
    f->held_reply_rc = fk_grpc_call_reply(call, FK_GRPC_OK, NULL, (const uint8_t *)"late", 4);
    for (int i = 0; i < f->nheld; i++)
        if (f->held[i] == call)
            f->held[i] = NULL;
}

/* A long poll that never answers by itself. */
static void on_hold(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer;
    (void)req;
    (void)len;
    (void)deadline;
    fixture *f = ud;
    fk_grpc_call_on_cancel(call, held_cancelled, f);
    f->held[f->nheld++] = call;
}

static void server_closed(void *ud)
{
    ((fixture *)ud)->server_closed = 1;
}

static void client_closed(void *ud)
{
    (void)ud;
}

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl;
    (void)why;
    if (!up)
        ((fixture *)ud)->client_down = 1;
}

static void done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)resp;
    (void)len;
    fixture *f = ud;
    if (f->done < 64)
        f->statuses[f->done] = status;
    snprintf(f->msg, sizeof f->msg, "%s", msg);
    f->done++;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    fk_test_pki_make(f->dir, sizeof f->dir, "/tmp/fk-net-loop-XXXXXX", NULL);
    assert_int_equal(uv_loop_init(&f->loop), 0);
    fk_net_limits_default(&f->lim);
    fk_log_set_level(FK_LOG_ERROR);
    *state = f;
    return 0;
}

/* Start the server and connect the client to host, checking server_name (NULL: host). */
static void start_at(fixture *f, const char *host, const char *server_name)
{
    fk_err err;
    fk_test_echo_server(&f->srv, &f->loop, f->dir, &f->lim, 200, io_threads, on_echo, on_hold, f);
    fk_grpc_client_config cc = {.limits = f->lim};
    cc.tls = fk_test_tls(f->dir, 0, "alice");
    assert_int_equal(fk_grpc_client_connect(&f->cl, &f->loop, &cc, host,
                                            fk_grpc_server_port(f->srv), server_name, on_state, f,
                                            &err),
                     FK_OK);
    fk_tls_ctx_unref(cc.tls);
}

static void start(fixture *f)
{
    start_at(f, "127.0.0.1", "127.0.0.1");
}

/* Run the loop until cond holds (bounded: 10 s of loop time). */
static void run_until(fixture *f, int (*cond)(fixture *))
{
    uint64_t end = uv_now(&f->loop) + 10000;
    while (!cond(f) && uv_now(&f->loop) < end)
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_ONCE));
    assert_true(cond(f));
}

static int two_done(fixture *f) { return f->done >= 2; }
static int one_done(fixture *f) { return f->done >= 1; }
static int twenty_done(fixture *f) { return f->done >= 20; }
static int is_down(fixture *f) { return f->client_down; }
static int srv_closed(fixture *f) { return f->server_closed; }

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->cl)
        fk_grpc_client_close(f->cl, client_closed, NULL);
    if (f->srv && !f->server_closed)
        fk_grpc_server_close(f->srv, server_closed, f);
    FK_UV_MUST(uv_run(&f->loop, UV_RUN_DEFAULT));
    assert_int_equal(uv_loop_close(&f->loop), 0);
    fk_test_pki_remove(f->dir);
    free(f);
    return 0;
}

static void echo_and_identity(void **state)
{
    fixture *f = *state;
    start(f);
    static const uint8_t hello[] = "hello";
    fk_grpc_client_call(f->cl, "/t.T/Echo", hello, 5, 5000, done, f);
    fk_grpc_client_call(f->cl, "/t.T/Missing", hello, 5, 5000, done, f);
    run_until(f, two_done);
    /* The refused call may finish first: the server answers it at its headers. */
    assert_int_equal(f->statuses[0] + f->statuses[1], FK_GRPC_OK + FK_GRPC_UNIMPLEMENTED);
    assert_true(f->statuses[0] == FK_GRPC_OK || f->statuses[1] == FK_GRPC_OK);
    assert_string_equal(f->peer_id, "alice");
    assert_string_equal(fk_grpc_client_peer(f->cl)->san, "localhost");
}

/* A host name is resolved on the loop; every address is tried (localhost may
 * give ::1 first, where nothing listens); the TLS name defaults to the host. */
static void host_name_resolved(void **state)
{
    fixture *f = *state;
    start_at(f, "localhost", NULL);
    fk_grpc_client_call(f->cl, "/t.T/Echo", (const uint8_t *)"hi", 2, 5000, done, f);
    run_until(f, one_done);
    assert_int_equal(f->statuses[0], FK_GRPC_OK);
    assert_string_equal(fk_grpc_client_peer(f->cl)->san, "localhost");
}

/* Another /etc/hosts name for 127.0.0.1, when the machine has one. */
static void etc_hosts_name_resolved(void **state)
{
    fixture *f = *state;
    char line[512], name[256] = "";
    FILE *h = fopen("/etc/hosts", "r");
    while (h && !name[0] && fgets(line, sizeof line, h)) {
        char *save = NULL, *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok || strcmp(tok, "127.0.0.1") != 0)
            continue;
        while ((tok = strtok_r(NULL, " \t\r\n", &save)) && tok[0] != '#')
            if (strcmp(tok, "localhost") != 0) {
                snprintf(name, sizeof name, "%s", tok);
                break;
            }
    }
    if (h)
        fclose(h);
    if (!name[0]) {
        print_message("SKIP: /etc/hosts names no other host for 127.0.0.1\n");
        skip();
    }
    start_at(f, name, "localhost");
    fk_grpc_client_call(f->cl, "/t.T/Echo", (const uint8_t *)"hi", 2, 5000, done, f);
    run_until(f, one_done);
    assert_int_equal(f->statuses[0], FK_GRPC_OK);
}

/* Closing while the name is being resolved: the pending call is cancelled, nothing leaks. */
static void close_while_resolving(void **state)
{
    fixture *f = *state;
    start_at(f, "localhost", NULL);
    fk_grpc_client_call(f->cl, "/t.T/Echo", (const uint8_t *)"hi", 2, 5000, done, f);
    fk_grpc_client_close(f->cl, client_closed, NULL);
    f->cl = NULL;
    assert_int_equal(f->done, 1);
    assert_int_equal(f->statuses[0], FK_GRPC_CANCELLED);
}

static void deadline_cancels_long_poll(void **state)
{
    fixture *f = *state;
    start(f);
    fk_grpc_client_call(f->cl, "/t.T/Hold", (const uint8_t *)"", 0, 150, done, f);
    run_until(f, one_done);
    assert_int_equal(f->statuses[0], FK_GRPC_DEADLINE_EXCEEDED);
    f->done = 0;
    fk_grpc_client_call(f->cl, "/t.T/Echo", (const uint8_t *)"x", 1, 5000, done, f);
    run_until(f, one_done); /* by then the server has seen the cancel too */
    assert_int_equal(f->cancels, 1);
    assert_int_equal(f->held_reply_rc, FK_ESTATE); /* the late reply only released the handle */
}

static void server_shutdown_answers_held_calls(void **state)
{
    fixture *f = *state;
    start(f);
    fk_grpc_client_call(f->cl, "/t.T/Hold", (const uint8_t *)"", 0, 0, done, f);
    fk_grpc_client_call(f->cl, "/t.T/Hold", (const uint8_t *)"", 0, 0, done, f);
    while (f->nheld < 2)
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_ONCE));
    fk_grpc_server_close(f->srv, server_closed, f);
    run_until(f, two_done);
    assert_int_equal(f->statuses[0], FK_GRPC_UNAVAILABLE);
    assert_int_equal(f->statuses[1], FK_GRPC_UNAVAILABLE);
    assert_int_equal(f->cancels, 2);
    run_until(f, srv_closed);
    run_until(f, is_down); /* GOAWAY reached the client */
    f->srv = NULL;
}

static void client_close_fails_pending_calls(void **state)
{
    fixture *f = *state;
    start(f);
    fk_grpc_client_call(f->cl, "/t.T/Hold", (const uint8_t *)"", 0, 0, done, f);
    while (f->nheld < 1)
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_ONCE));
    fk_grpc_client_close(f->cl, client_closed, NULL);
    f->cl = NULL;
    assert_int_equal(f->done, 1);
    assert_int_equal(f->statuses[0], FK_GRPC_CANCELLED);
    uint64_t end = uv_now(&f->loop) + 5000;
    while (f->cancels < 1 && uv_now(&f->loop) < end)
        FK_UV_MUST(uv_run(&f->loop, UV_RUN_ONCE));
    assert_int_equal(f->cancels, 1); /* the server noticed the connection go */
}

static void more_calls_than_streams(void **state)
{
    fixture *f = *state;
    f->lim.max_streams = 3;
    start(f);
    static uint8_t payload[20][100];
    for (int i = 0; i < 20; i++) {
        memset(payload[i], i, sizeof payload[i]);
        fk_grpc_client_call(f->cl, "/t.T/Echo", payload[i], sizeof payload[i], 5000, done, f);
    }
    run_until(f, twenty_done);
    for (int i = 0; i < 20; i++)
        assert_int_equal(f->statuses[i], FK_GRPC_OK);
}

static void idle_connection_closed(void **state)
{
    fixture *f = *state;
    f->lim.idle_timeout_ms = 100;
    start(f);
    fk_grpc_client_call(f->cl, "/t.T/Echo", (const uint8_t *)"x", 1, 5000, done, f);
    run_until(f, one_done);
    run_until(f, is_down);
    f->done = 0;
    fk_grpc_client_call(f->cl, "/t.T/Echo", (const uint8_t *)"x", 1, 5000, done, f);
    assert_int_equal(f->done, 1); /* a closed client fails calls at once */
    assert_int_equal(f->statuses[0], FK_GRPC_UNAVAILABLE);
}

static void oversized_request_refused_by_client(void **state)
{
    fixture *f = *state;
    f->lim.max_message = 1000;
    start(f);
    static uint8_t big[1001];
    fk_grpc_client_call(f->cl, "/t.T/Echo", big, sizeof big, 5000, done, f);
    assert_int_equal(f->done, 1);
    assert_int_equal(f->statuses[0], FK_GRPC_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(f->msg, "1000"));
}

/* ---- upload budget: many large uploads at once hold at most the budget ---------------- */

enum { UP_CLIENTS = 3, UP_EACH = 4, UP_SIZE = 1u << 20, UP_MAX = UP_CLIENTS * UP_EACH };

typedef struct upfix {
    uv_loop_t loop;
    fk_grpc_server *srv;
    fk_grpc_client *cl[UP_CLIENTS];
    uint64_t budget;
    uv_timer_t acker;
    fk_grpc_call *pending[UP_MAX]; /* handled, not answered yet (a commit that takes time) */
    int npending, max_pending, bad_bytes, over_budget, handled;
    int ack_all_at_end; /* answer only once every upload was handled */
    int total;
    int up_done, up_ok, echo_done, echo_ok, echo_before_last_upload;
    int server_closed;
} upfix;

static uint8_t up_data[UP_MAX][UP_SIZE];

/* The handler checks the bytes and that what the server holds is within the budget, then
 * answers only later (the acker), as the service acknowledges an update after its commit. */
static void on_upload(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                      uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    upfix *u = ud;
    fk_grpc_server_stats st;
    fk_grpc_server_stats_get(u->srv, &st);
    if (st.upload_held > u->budget)
        u->over_budget++;
    if (len != UP_SIZE || req[0] != req[len - 1] || req[len / 2] != req[0])
        u->bad_bytes++;
    u->handled++;
    u->pending[u->npending++] = call;
    if (u->npending > u->max_pending)
        u->max_pending = u->npending;
}

static void up_ack(uv_timer_t *t)
{
    upfix *u = t->data;
    if (u->ack_all_at_end && u->handled < u->total)
        return;
    for (int i = 0; i < u->npending; i++)
        assert_int_equal(
            fk_grpc_call_reply(u->pending[i], FK_GRPC_OK, NULL, (const uint8_t *)"k", 1), FK_OK);
    u->npending = 0;
}

static void up_echo(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    (void)ud;
    fk_grpc_call_reply(call, FK_GRPC_OK, NULL, req, len);
}

static void up_done_cb(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)msg;
    (void)resp;
    (void)len;
    upfix *u = ud;
    u->up_done++;
    u->up_ok += status == FK_GRPC_OK;
}

static void echo_done_cb(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)msg;
    (void)resp;
    (void)len;
    upfix *u = ud;
    u->echo_done++;
    u->echo_ok += status == FK_GRPC_OK;
    if (u->up_done < UP_MAX)
        u->echo_before_last_upload++;
}

static void up_server_closed(void *ud)
{
    ((upfix *)ud)->server_closed = 1;
}

/* Start the server (budget bytes; the uploads' bytes freed when the handler returns if
 * release) and UP_CLIENTS clients, each sending nup uploads of size bytes at once, then a
 * small echo; run until all are answered (bounded). */
static void upload_run(upfix *u, const char *dir, uint64_t budget, int release, int nup,
                       size_t size)
{
    fk_err err = {0};
    u->budget = budget;
    u->total = UP_CLIENTS * nup;
    /* bytes freed at the handler's return: the uploads all go through while none is answered
     * (held until the reply, that would wait for ever) */
    u->ack_all_at_end = release;
    assert_int_equal(uv_loop_init(&u->loop), 0);
    fk_grpc_server_config sc = {.drain_ms = 200, .io_threads = io_threads, .upload_budget = budget};
    fk_net_limits_default(&sc.limits);
    sc.tls = fk_test_tls(dir, 1, "localhost");
    assert_int_equal(fk_grpc_server_init(&u->srv, &u->loop, &sc, &err), FK_OK);
    fk_tls_ctx_unref(sc.tls);
    assert_int_equal(fk_grpc_server_handle(u->srv, "/t.T/Up", on_upload, u, &err), FK_OK);
    assert_int_equal(fk_grpc_server_handle(u->srv, "/t.T/Echo", up_echo, u, &err), FK_OK);
    if (release)
        assert_int_equal(fk_grpc_server_release_on_return(u->srv, "/t.T/Up", &err), FK_OK);
    assert_int_equal(fk_grpc_server_listen(u->srv, "127.0.0.1:0", &err), FK_OK);
    FK_UV_MUST(uv_timer_init(&u->loop, &u->acker));
    u->acker.data = u;
    FK_UV_MUST(uv_timer_start(&u->acker, up_ack, 20, 20));
    for (int c = 0; c < UP_CLIENTS; c++) {
        fk_grpc_client_config cc = {0};
        fk_net_limits_default(&cc.limits);
        cc.tls = fk_test_tls(dir, 0, "alice");
        assert_int_equal(fk_grpc_client_connect(&u->cl[c], &u->loop, &cc, "127.0.0.1",
                                                fk_grpc_server_port(u->srv), "localhost", NULL,
                                                NULL, &err),
                         FK_OK);
        fk_tls_ctx_unref(cc.tls);
        for (int i = 0; i < nup; i++) {
            uint8_t *d = up_data[c * nup + i];
            memset(d, 1 + c * nup + i, size);
            fk_grpc_client_call(u->cl[c], "/t.T/Up", d, size, 20000, up_done_cb, u);
        }
        fk_grpc_client_call(u->cl[c], "/t.T/Echo", (const uint8_t *)"ping", 4, 20000, echo_done_cb,
                            u);
    }
    uint64_t end = uv_now(&u->loop) + 15000;
    while ((u->up_done < UP_CLIENTS * nup || u->echo_done < UP_CLIENTS) && uv_now(&u->loop) < end)
        FK_UV_MUST(uv_run(&u->loop, UV_RUN_ONCE));
}

static void upload_stop(upfix *u)
{
    for (int c = 0; c < UP_CLIENTS; c++)
        if (u->cl[c])
            fk_grpc_client_close(u->cl[c], client_closed, NULL);
    uv_close((uv_handle_t *)&u->acker, NULL);
    fk_grpc_server_close(u->srv, up_server_closed, u);
    FK_UV_MUST(uv_run(&u->loop, UV_RUN_DEFAULT));
    assert_int_equal(uv_loop_close(&u->loop), 0);
}

/* 12 uploads of 1 MiB at once over 3 connections, budget 3 MiB: every upload completes with
 * its bytes intact, the server never holds more than the budget, uploads waited, and a small
 * call on the same connections is not held up by them. Bytes held until the reply (answered
 * every 20 ms): at most 3 handled and unanswered at once. Bytes freed when the handler
 * returns: all 12 are handled before the first is answered. */
static void uploads_wait_for_the_budget(void **state)
{
    fixture *f = *state;
    for (int release = 0; release <= 1; release++) {
        upfix *u = calloc(1, sizeof *u);
        upload_run(u, f->dir, 3u * UP_SIZE, release, UP_EACH, UP_SIZE);
        fk_grpc_server_stats st;
        fk_grpc_server_stats_get(u->srv, &st);
        assert_int_equal(u->up_ok, UP_MAX);
        assert_int_equal(u->echo_ok, UP_CLIENTS);
        assert_int_equal(u->bad_bytes, 0);
        assert_int_equal(u->over_budget, 0);
        assert_true(st.upload_peak <= 3u * UP_SIZE);
        assert_true(st.upload_peak >= UP_SIZE);
        assert_true(st.upload_waits > 0);
        assert_int_equal(st.upload_held, 0);
        assert_int_equal(st.upload_waiting, 0);
        assert_true(u->echo_before_last_upload > 0);
        /* held until the reply: no more than fit the budget were handled and unanswered */
        if (!release)
            assert_true(u->max_pending <= 3);
        else /* freed at return: all were handled before any was answered */
            assert_int_equal(u->max_pending, UP_MAX);
        upload_stop(u);
        free(u);
    }
}

/* An upload larger than the whole budget still goes, alone; two of them one after the other. */
static void upload_larger_than_budget_goes_alone(void **state)
{
    fixture *f = *state;
    upfix *u = calloc(1, sizeof *u);
    upload_run(u, f->dir, UP_SIZE / 4, 0, 2, UP_SIZE);
    fk_grpc_server_stats st;
    fk_grpc_server_stats_get(u->srv, &st);
    assert_int_equal(u->up_ok, 2 * UP_CLIENTS);
    assert_int_equal(u->echo_ok, UP_CLIENTS);
    assert_int_equal(u->bad_bytes, 0);
    assert_int_equal(st.upload_peak, UP_SIZE); /* one at a time */
    assert_true(u->max_pending <= 1);
    upload_stop(u);
    free(u);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a closed peer is an error code, not a kill */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(echo_and_identity, setup, teardown),
        cmocka_unit_test_setup_teardown(host_name_resolved, setup, teardown),
        cmocka_unit_test_setup_teardown(etc_hosts_name_resolved, setup, teardown),
        cmocka_unit_test_setup_teardown(close_while_resolving, setup, teardown),
        cmocka_unit_test_setup_teardown(deadline_cancels_long_poll, setup, teardown),
        cmocka_unit_test_setup_teardown(server_shutdown_answers_held_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(client_close_fails_pending_calls, setup, teardown),
        cmocka_unit_test_setup_teardown(more_calls_than_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(idle_connection_closed, setup, teardown),
        cmocka_unit_test_setup_teardown(oversized_request_refused_by_client, setup, teardown),
        cmocka_unit_test_setup_teardown(uploads_wait_for_the_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(upload_larger_than_budget_goes_alone, setup, teardown),
    };
    int failed = cmocka_run_group_tests_name("io_threads=1", tests, NULL, NULL);
    io_threads = 2;
    failed += cmocka_run_group_tests_name("io_threads=2", tests, NULL, NULL);
    return failed;
}
