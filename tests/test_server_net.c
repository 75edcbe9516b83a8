/* The daemons' network path in one process: fedkern's gRPC server with the
 * Federation service over the round engine, and one client agent per client,
 * over mutual TLS on 127.0.0.1, with the test methods. Checks: same model as
 * the simulator (inline and chunked messages), a client stopped mid-job is a
 * dropout at the deadline, a client off the allow-list is refused. Every case runs with the
 * connections on the test's loop (io_threads = 1) and again on two I/O threads (io_threads
 * = 2: joins, heartbeats, long polls and updates cross the threads' queues). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <uv.h>

#include "client/agent.h"
#include "common/base/uvcheck.h"
#include "common/methods/jobconf.h"
#include "common/methods/sim.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "server/engine.h"
#include "server/service.h"
#include "tests/support_fedmean.h"

enum { N = 6 };

static int io_threads = 1; /* of the server under test: set per group in main */

typedef struct net {
    char dir[64];
    char db[128];
    uv_loop_t loop;
    fk_store *st;
    fk_engine *e;
    fk_grpc_server *srv;
    fk_service *svc;
    fk_service_config cfg;
    fk_net_limits limits;
    fk_agent *agents[N];
    fk_dataset data[N];
    uv_timer_t watch;
    uv_timer_t wake; /* ends blocking loop runs while waiting for the agents */
    int64_t job;
    int stop_client;   /* stop this agent once round stop_round is reached (-1: none) */
    int fail_round;    /* the batch of round fail_round's updates fails to commit (0: none) */
    int stop_round;
    double started;
    int finished, timed_out;
    fk_agent_stats astats[N];
    fk_service_stats sstats;
    int sessions_end; /* clients with a session when the job ended */
    int stop_mid_aggregation; /* shut the server down while fedmean-slow aggregates */
    fk_method_lookup find; /* NULL: the test methods */
    /* the slow aggregation (fedmean-slow): calls the loop answered while it was in flight */
    int slow_seen;              /* it started */
    uint64_t slow_hb0, slow_hb; /* heartbeats answered when it started, and while it ran */
    int slow_status;            /* status calls that said "aggregating" meanwhile */
    int agent_port; /* > 0: the agents connect here (the relay) instead of to the server */
} net;

/* fedmean-slow: round 1's aggregation blocks until the test's loop has answered heartbeats
 * from every client while it waits (a loop that runs it blocks too: it gives up after 20 s) */
static atomic_int slow_entered, slow_release, slow_left, slow_timed_out;

static const fk_blob_codec codec = {fk_codec_bundle_encode, fk_codec_bundle_decode};

static const fk_dataset *data_of(void *ud, const char *name, fk_err *err)
{
    if (strcmp(name, "synth")) {
        fk_err_set(err, FK_ENOTFOUND, "no local data set '%s'", name);
        return NULL;
    }
    return ud;
}

static void make_certs(net *t)
{
    fk_err err;
    char name[16];
    if (fk_certs_init_ca(t->dir, NULL, NULL, &err))
        fail_msg("ca: %s", err.msg);
    fk_cert_opts so = {.ips = "127.0.0.1"};
    if (fk_certs_issue(t->dir, FK_ROLE_SERVER, "server", &so, &err))
        fail_msg("server cert: %s", err.msg);
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof name, "c%d", i);
        if (fk_certs_issue(t->dir, FK_ROLE_CLIENT, name, NULL, &err))
            fail_msg("client cert: %s", err.msg);
    }
    if (fk_certs_issue(t->dir, FK_ROLE_ADMIN, "op", NULL, &err))
        fail_msg("admin cert: %s", err.msg);
}

static fk_tls_ctx *tls_for(net *t, int server, const char *name)
{
    char ca[128], cert[128], key[128];
    snprintf(ca, sizeof ca, "%s/ca.pem", t->dir);
    const char *role = server ? "server" : strcmp(name, "op") ? "client" : "admin";
    snprintf(cert, sizeof cert, "%s/%s-%s.pem", t->dir, role, name);
    snprintf(key, sizeof key, "%s/%s-%s.key", t->dir, role, name);
    fk_tls_files f = {.ca = ca, .cert = cert, .key = key};
    fk_tls_ctx *ctx;
    fk_err err;
    if (fk_tls_ctx_new(&ctx, server, &f, &err))
        fail_msg("tls: %s", err.msg);
    return ctx;
}

static int setup(void **state)
{
    net *t = calloc(1, sizeof *t);
    snprintf(t->dir, sizeof t->dir, "/tmp/fk-net-XXXXXX");
    if (!t || !mkdtemp(t->dir))
        return -1;
    snprintf(t->db, sizeof t->db, "%s/state.db", t->dir);
    make_certs(t);
    for (int c = 0; c < N; c++) {
        fk_dataset *ds = &t->data[c];
        if (fk_dataset_init(ds, (size_t)(15 + 4 * c), FK_TEST_DIM, 0))
            return -1;
        fk_rng r;
        fk_rng_init(&r, 42, (uint64_t)c);
        for (size_t i = 0; i < ds->X.rows * FK_TEST_DIM; i++)
            ds->X.data[i] = fk_rng_normal(&r) + 0.7 * c;
    }
    fk_net_limits_default(&t->limits);
    t->stop_client = -1;
    assert_int_equal(uv_loop_init(&t->loop), 0);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    net *t = *state;
    FK_UV_MUST(uv_loop_close(&t->loop));
    for (int c = 0; c < N; c++)
        fk_dataset_close(&t->data[c]);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", t->dir);
    free(t);
    return 0;
}

/* Round fail_round - 1 closed: the commit after the next round's open fails. No last_seen
 * write is queued (wait_agents), so that commit is the batch of the round's updates. */
static void on_round(void *ud, const fk_round_event *ev)
{
    net *t = ud;
    if (t->fail_round > 0 && ev->round + 1 == t->fail_round) {
        fk_store_test_fail_commits(t->st, 1, 1);
        t->fail_round = 0;
    }
}

static void start_server(net *t)
{
    fk_err err;
    assert_int_equal(fk_store_open(&t->st, t->db, &err), FK_OK);
    /* these tests count the updates stored: keep them (retention is tested in server_store,
     * server_engine and daemons) */
    fk_store_retention keep;
    fk_store_retention_default(&keep);
    keep.keep_updates = 1;
    fk_store_set_retention(t->st, &keep);
    fk_engine_opts eo = {.store = t->st,
                         .codec = codec,
                         .find = t->find ? t->find : fk_test_find_method,
                         .on_round = on_round,
                         .on_round_ud = t};
    assert_int_equal(fk_engine_open(&t->e, &eo, fk_service_now(), &err), FK_OK);
    fk_tls_ctx *tls = tls_for(t, 1, "server");
    fk_grpc_server_config gc = {.limits = t->limits, .tls = tls, .drain_ms = 300,
                                .io_threads = io_threads};
    assert_int_equal(fk_grpc_server_init(&t->srv, &t->loop, &gc, &err), FK_OK);
    fk_tls_ctx_unref(tls);
    t->cfg.max_message = (uint32_t)t->limits.max_message;
    if (!t->cfg.heartbeat_ms)
        t->cfg.heartbeat_ms = 300;
    t->cfg.tick_ms = 50;
    t->cfg.find = t->find ? t->find : fk_test_find_method;
    assert_int_equal(fk_service_init(&t->svc, &t->loop, t->srv, t->e, t->st, &t->cfg, &err),
                     FK_OK);
    if (fk_grpc_server_listen(t->srv, "127.0.0.1:0", &err))
        fail_msg("listen: %s", err.msg);
}

static void start_agent(net *t, int c)
{
    char name[16];
    snprintf(name, sizeof name, "c%d", c);
    fk_tls_ctx *tls = tls_for(t, 0, name);
    fk_agent_config ac = {.host = "127.0.0.1",
                          .port = t->agent_port ? t->agent_port : fk_grpc_server_port(t->srv),
                          .server_name = "server", .tls = tls, .limits = t->limits,
                          .find = t->find ? t->find : fk_test_find_method, .data = data_of,
                          .data_ud = &t->data[c],
                          .backoff_min_ms = 50, .backoff_max_ms = 400, .poll_ms = 2000};
    fk_err err;
    if (fk_agent_start(&t->agents[c], &t->loop, &ac, &err))
        fail_msg("agent: %s", err.msg);
    fk_tls_ctx_unref(tls);
}

static void agent_stopped(void *ud)
{
    (void)ud;
}

static void server_closed(void *ud)
{
    (void)ud;
}

static void service_closed(void *ud)
{
    net *t = ud;
    fk_grpc_server_close(t->srv, server_closed, t);
}

static void stop_agent(net *t, int c)
{
    if (!t->agents[c])
        return;
    fk_agent_stats_get(t->agents[c], &t->astats[c]);
    fk_agent_stop(t->agents[c], agent_stopped, NULL);
    t->agents[c] = NULL;
}

static void shutdown_all(net *t)
{
    for (int c = 0; c < N; c++)
        stop_agent(t, c);
    fk_service_stats_get(t->svc, &t->sstats);
    fk_service_close(t->svc, service_closed, t);
    FK_UV_MUST(uv_timer_stop(&t->watch));
    uv_close((uv_handle_t *)&t->watch, NULL);
}

static void on_watch(uv_timer_t *timer)
{
    net *t = timer->data;
    fk_job_status s;
    fk_err err;
    if (fk_engine_status(t->e, t->job, &s, &err))
        fail_msg("status: %s", err.msg);
    if (t->stop_mid_aggregation && atomic_load(&slow_entered) && !atomic_load(&slow_release)) {
        shutdown_all(t); /* as SIGTERM: the work in flight is not waited for here */
        atomic_store(&slow_release, 1);
        return;
    }
    if (t->stop_client >= 0 && s.round >= t->stop_round) {
        stop_agent(t, t->stop_client);
        t->stop_client = -1;
    }
    if (atomic_load(&slow_entered) && !atomic_load(&slow_left) && !atomic_load(&slow_release)) {
        fk_service_stats ss;
        fk_service_stats_get(t->svc, &ss);
        if (!t->slow_seen++)
            t->slow_hb0 = ss.heartbeats;
        t->slow_hb = ss.heartbeats - t->slow_hb0;
        t->slow_status += s.aggregating;
        if (t->slow_hb >= 2 * N) /* two heartbeats per client answered meanwhile */
            atomic_store(&slow_release, 1);
    }
    if (s.state != FK_JOB_RUNNING) {
        t->finished = 1;
        fk_service_stats ss;
        fk_service_stats_get(t->svc, &ss);
        t->sessions_end = (int)ss.sessions;
        shutdown_all(t);
    } else if (fk_service_now() - t->started > 90.0) {
        t->timed_out = 1;
        shutdown_all(t);
    }
}

static void wake(uv_timer_t *timer)
{
    (void)timer; /* only ends a blocking uv_run */
}

/* Every agent of mask has joined, or (off the allow-list) been refused. */
static int agents_settled(net *t, unsigned mask)
{
    fk_service_stats ss;
    fk_service_stats_get(t->svc, &ss);
    uint64_t refused_needed = 0;
    for (int c = 0; c < N; c++) {
        if (!(mask >> c & 1u))
            continue;
        fk_agent_stats as;
        fk_agent_stats_get(t->agents[c], &as);
        if (as.joins > 0)
            continue;
        if (!t->cfg.n_allow)
            return 0;
        refused_needed++;
    }
    return ss.refused >= refused_needed;
}

/* Run the loop until the agents of mask have settled (bounded: 30 s), so the job's
 * first deadline does not race their TLS handshakes on a loaded machine. */
static void wait_agents(net *t, unsigned mask)
{
    assert_int_equal(uv_timer_init(&t->loop, &t->wake), 0);
    assert_int_equal(uv_timer_start(&t->wake, wake, 20, 20), 0);
    double end = fk_service_now() + 30.0;
    /* ... and their Joins' last_seen stored (a tick's own transaction): during a short job
     * no other last_seen write is due, so every commit it sees is an update batch. */
    fk_service_stats q = {0};
    while ((!agents_settled(t, mask) || q.seen_queued) && fk_service_now() < end) {
        FK_UV_MUST(uv_run(&t->loop, UV_RUN_ONCE));
        fk_service_stats_get(t->svc, &q);
    }
    uv_close((uv_handle_t *)&t->wake, NULL);
    assert_true(agents_settled(t, mask));
    assert_int_equal(q.seen_queued, 0);
}

/* Run job `text` with the agents in `mask`; returns when everything closed. */
static void run_job(net *t, const char *text, unsigned mask)
{
    start_server(t);
    for (int c = 0; c < N; c++)
        if (mask >> c & 1u)
            start_agent(t, c);
    wait_agents(t, mask);
    fk_err err;
    if (fk_engine_submit(t->e, text, fk_service_now(), &t->job, &err))
        fail_msg("submit: %s", err.msg);
    t->started = fk_service_now();
    assert_int_equal(uv_timer_init(&t->loop, &t->watch), 0);
    t->watch.data = t;
    assert_int_equal(uv_timer_start(&t->watch, on_watch, 5, 5), 0);
    FK_UV_MUST(uv_run(&t->loop, UV_RUN_DEFAULT));
    fk_service_free(t->svc);
    t->svc = NULL;
    assert_false(t->timed_out);
    assert_true(t->finished);
}

static void close_server(net *t)
{
    fk_engine_close(t->e);
    fk_store_close(t->st);
}

static void assert_job_done(net *t)
{
    fk_job_status s;
    fk_err err;
    assert_int_equal(fk_engine_status(t->e, t->job, &s, &err), FK_OK);
    assert_int_equal(s.state, FK_JOB_DONE);
}

static void compare_with_sim(net *t, const char *text)
{
    fk_jobconf conf;
    fk_err err;
    assert_int_equal(fk_jobconf_parse(&conf, text, "job", &err), FK_OK);
    fk_sim_opts o = {.rounds = conf.rounds, .seed = conf.seed};
    fk_bundle sim, daemon;
    fk_method_lookup find = t->find ? t->find : fk_test_find_method;
    assert_int_equal(fk_sim_run(find(conf.method, &err), &conf.params, t->data, N, &o, &sim, NULL,
                                &err),
                     FK_OK);
    fk_jobconf_close(&conf);
    assert_int_equal(fk_engine_result(t->e, t->job, &daemon, NULL, &err), FK_OK);
    assert_int_equal(daemon.count, sim.count);
    for (size_t i = 0; i < sim.count; i++) {
        const fk_tensor *d = fk_bundle_get(&daemon, sim.items[i].name);
        assert_non_null(d);
        assert_int_equal(d->len, sim.items[i].len);
        assert_memory_equal(d->data, sim.items[i].data, d->len * sizeof(double));
    }
    fk_bundle_close(&sim);
    fk_bundle_close(&daemon);
}

static const char *job(const char *method, const char *extra)
{
    static char text[512];
    snprintf(text, sizeof text,
             "method = %s\ndataset = synth\nclients = c0, c1, c2, c3, c4, c5\nrounds = 4\n"
             "seed = 5\ndeadline = 20\n%s",
             method, extra);
    return text;
}

/* "fedmean-hostile": fedmean whose server checks every update (finite values) and whose
 * client 2 sends NaN in its second round. */
static fk_method hostile;
static void *hostile_cli2;
static int hostile_steps;

static int hostile_check(void *srv, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)srv, (void)round, (void)phase;
    for (size_t i = 0; i < up->msg.count; i++)
        for (size_t k = 0; k < up->msg.items[i].len; k++)
            if (!isfinite(up->msg.items[i].data[k]))
                return fk_err_set(err, FK_EINVAL, "client %d sent tensor '%s' with value %zu = %g",
                                  up->client, up->msg.items[i].name, k,
                                  up->msg.items[i].data[k]);
    return FK_OK;
}

static int hostile_init(void **cli, const fk_params *p, const fk_dataset *d, int client, int n,
                        uint64_t seed, fk_err *err)
{
    int rc = fk_test_fedmean.client_init(cli, p, d, client, n, seed, err);
    if (!rc && client == 2) {
        hostile_cli2 = *cli;
        hostile_steps = 0;
    }
    return rc;
}

static int hostile_step(void *cli, const fk_bundle *task, fk_bundle *up, fk_report *rep,
                        fk_err *err)
{
    int rc = fk_test_fedmean.local_step(cli, task, up, rep, err);
    if (!rc && cli == hostile_cli2 && ++hostile_steps == 2 && up->count && up->items[0].len)
        up->items[0].data[0] = NAN;
    return rc;
}

static const fk_method *hostile_find(const char *name, fk_err *err)
{
    if (strcmp(name, "fedmean-hostile"))
        return fk_test_find_method(name, err);
    hostile = fk_test_fedmean;
    hostile.name = "fedmean-hostile";
    hostile.check_update = hostile_check;
    hostile.client_init = hostile_init;
    hostile.local_step = hostile_step;
    return &hostile;
}

static int slow_aggregate(void *srv, int round, int phase, const fk_update *ups, int n, int *done,
                          fk_err *err)
{
    if (round == 1 && !atomic_exchange(&slow_entered, 1)) {
        int i = 0;
        for (; i < 20000 && !atomic_load(&slow_release); i++)
            usleep(1000);
        atomic_store(&slow_timed_out, i == 20000);
        atomic_store(&slow_left, 1);
    }
    return fk_test_fedmean.aggregate(srv, round, phase, ups, n, done, err);
}

static fk_method slow;
static const fk_method *slow_find(const char *name, fk_err *err)
{
    if (strcmp(name, "fedmean-slow"))
        return fk_test_find_method(name, err);
    slow = fk_test_fedmean;
    slow.name = "fedmean-slow";
    slow.aggregate = slow_aggregate;
    return &slow;
}

/* A heavy aggregation runs off the loop: while round 1's aggregate is blocked, the loop answers
 * heartbeats of every client (two each; the aggregation waits for them, so no clock decides)
 * and status says the job is aggregating; then the job ends with the simulator's model. With
 * the aggregation on the loop, no heartbeat is answered until it gives up. */
static void heavy_aggregation_leaves_the_loop_answering(void **state)
{
    net *t = *state;
    t->find = slow_find;
    atomic_store(&slow_entered, 0);
    atomic_store(&slow_release, 0);
    atomic_store(&slow_left, 0);
    atomic_store(&slow_timed_out, 0);
    const char *text = job("fedmean-slow", "rounds = 2\n");
    run_job(t, text, 0x3f);
    assert_job_done(t);
    assert_true(t->slow_seen > 0);
    assert_true(t->slow_hb >= 2 * N);
    assert_true(t->slow_status > 0);
    assert_false(atomic_load(&slow_timed_out)); /* released by the loop, not by its timeout */
    assert_true(t->sstats.works_done >= 2);     /* one phase close per round, off the loop */
    compare_with_sim(t, text);
    close_server(t);
}

/* fedmean-slowcheck: the first check_update of round 1 blocks like fedmean-slow's aggregate */
static int slow_check(void *srv, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)srv, (void)phase, (void)up, (void)err;
    if (round == 1 && !atomic_exchange(&slow_entered, 1)) {
        int i = 0;
        for (; i < 20000 && !atomic_load(&slow_release); i++)
            usleep(1000);
        atomic_store(&slow_timed_out, i == 20000);
        atomic_store(&slow_left, 1);
    }
    return FK_OK;
}

static fk_method slowcheck;
static const fk_method *slowcheck_find(const char *name, fk_err *err)
{
    if (strcmp(name, "fedmean-slowcheck"))
        return fk_test_find_method(name, err);
    slowcheck = fk_test_fedmean;
    slowcheck.name = "fedmean-slowcheck";
    slowcheck.check_update = slow_check;
    return &slowcheck;
}

/* Issue 35: an upload's staging (its decode, SHA-256 and the method's check_update) runs off
 * the loop. Every PushUpdate is staged off it here (stage_min 1); while round 1's first check
 * is blocked, the loop answers heartbeats of every client (two each; the check waits for them,
 * so no clock decides), the phase does not close under the check, and the job ends with the
 * simulator's model. With the check on the loop, no heartbeat is answered until it gives up. */
static void slow_upload_check_leaves_the_loop_answering(void **state)
{
    net *t = *state;
    t->find = slowcheck_find;
    t->cfg.stage_min = 1;
    atomic_store(&slow_entered, 0);
    atomic_store(&slow_release, 0);
    atomic_store(&slow_left, 0);
    atomic_store(&slow_timed_out, 0);
    const char *text = job("fedmean-slowcheck", "rounds = 2\n");
    run_job(t, text, 0x3f);
    assert_job_done(t);
    assert_true(t->slow_seen > 0);
    assert_true(t->slow_hb >= 2 * N);
    assert_false(atomic_load(&slow_timed_out)); /* released by the loop, not by its timeout */
    assert_true(t->sstats.uploads_offloaded >= 2 * N); /* every update of the two rounds */
    assert_true(t->sstats.committed >= 2 * N);
    compare_with_sim(t, text);
    close_server(t);
}

/* SIGTERM while a phase is aggregated off the loop: the service and the gRPC server close at
 * once, the loop runs until the work is back, and its result is stored (round 1's model) before
 * anything is freed; the job stays running for the restart, and nothing leaks (ASan). */
static void shutdown_waits_for_the_aggregation(void **state)
{
    net *t = *state;
    t->find = slow_find;
    t->stop_mid_aggregation = 1;
    atomic_store(&slow_entered, 0);
    atomic_store(&slow_release, 0);
    atomic_store(&slow_left, 0);
    atomic_store(&slow_timed_out, 0);
    start_server(t);
    for (int c = 0; c < N; c++)
        start_agent(t, c);
    wait_agents(t, 0x3f);
    fk_err err;
    if (fk_engine_submit(t->e, job("fedmean-slow", "rounds = 2\n"), fk_service_now(), &t->job,
                         &err))
        fail_msg("submit: %s", err.msg);
    t->started = fk_service_now();
    assert_int_equal(uv_timer_init(&t->loop, &t->watch), 0);
    t->watch.data = t;
    assert_int_equal(uv_timer_start(&t->watch, on_watch, 5, 5), 0);
    FK_UV_MUST(uv_run(&t->loop, UV_RUN_DEFAULT)); /* ends once every handle and work is done */
    assert_true(atomic_load(&slow_left));
    assert_false(atomic_load(&slow_timed_out));
    assert_int_equal(fk_engine_in_flight(t->e), 0);
    assert_int_equal(t->sstats.works_pending, 1); /* it was in flight at the close */
    fk_service_free(t->svc);
    t->svc = NULL;
    fk_bundle model;
    int round = 0;
    assert_int_equal(fk_engine_result(t->e, t->job, &model, &round, &err), FK_OK);
    assert_int_equal(round, 1);
    fk_bundle_close(&model);
    fk_job_status s;
    assert_int_equal(fk_engine_status(t->e, t->job, &s, &err), FK_OK);
    assert_int_equal(s.state, FK_JOB_RUNNING);
    assert_int_equal(s.round, 2);
    close_server(t);
}

/* Over the network: client 2's NaN update is answered INVALID_ARGUMENT (the agent drops it),
 * never stored, counted; the phase closes as soon as the others answered (no wait for the
 * 20 s deadline) and the model is the simulator's, which refuses the same update. */
static void bad_update_is_refused_over_the_wire(void **state)
{
    net *t = *state;
    t->find = hostile_find;
    const char *text = job("fedmean-hostile", "");
    run_job(t, text, 0x3f);
    assert_job_done(t);
    assert_true(fk_service_now() - t->started < 20.0);
    fk_engine_stats es;
    fk_engine_stats_get(t->e, &es);
    assert_int_equal(es.updates_refused, 1);
    int count;
    fk_err err;
    assert_int_equal(fk_store_update_count(t->st, t->job, &count, &err), FK_OK);
    assert_int_equal(count, 4 * N - 1);
    compare_with_sim(t, text);
    close_server(t);
}

static void federation_matches_sim(void **state)
{
    net *t = *state;
    const char *text = job("fedvar", "sampling = 0.66\n");
    run_job(t, text, 0x3f);
    assert_job_done(t);
    compare_with_sim(t, text);
    /* Every planned update committed once (rounds x phases x planned); the
     * agents may stop before the last acknowledgement reaches them. */
    uint64_t acked = 0;
    for (int c = 0; c < N; c++)
        acked += t->astats[c].committed;
    assert_int_equal(t->sstats.committed, 4 * 2 * 4);
    assert_true(acked <= t->sstats.committed && acked + N >= t->sstats.committed);
    int count;
    fk_err err;
    assert_int_equal(fk_store_update_count(t->st, t->job, &count, &err), FK_OK);
    assert_int_equal(count, 4 * 2 * 4);
    close_server(t);
}

static void chunked_messages_match_sim(void **state)
{
    net *t = *state;
    t->limits.max_message = 16 * 1024;
    const char *text = job("fedmean", "task_pad = 5000\nupdate_pad = 7000\nrounds = 3\n");
    run_job(t, text, 0x3f);
    compare_with_sim(t, text);
    uint64_t chunks = 0;
    for (int c = 0; c < N; c++)
        chunks += t->astats[c].chunks_sent;
    assert_true(chunks >= 3 * N * 4); /* 56 KB updates in 16 KB messages */
    close_server(t);
}

static void stopped_client_is_a_dropout(void **state)
{
    net *t = *state;
    t->stop_client = 3;
    t->stop_round = 2;
    /* Enough rounds that the stop lands well before the end (the watch runs every 5 ms);
     * a deadline long enough that a loaded machine does not make others miss it. */
    run_job(t, job("fedmean", "deadline = 1\nquorum = 0.6\nrounds = 10\n"), 0x3f);
    fk_store_round *rows;
    int n;
    fk_err err;
    assert_int_equal(fk_store_round_list(t->st, t->job, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 10);
    assert_int_equal(rows[0].dropouts, 0);
    assert_int_equal(rows[n - 1].dropouts, 1);
    assert_string_equal(rows[n - 1].dropped, "3");
    assert_int_equal(rows[n - 1].participants, 5);
    for (int i = 0; i < n; i++)
        fk_store_round_free(&rows[i]);
    free(rows);
    /* the stopped client (its long poll kept it from sending Leave) is no longer counted as
     * connected once it missed its heartbeats: fedkern_clients_connected drops to the 5 left */
    assert_int_equal(t->sessions_end, N - 1);
    close_server(t);
}

/* A client stopped without a word: once its session expired (3 heartbeats of 300 ms) the
 * rounds that plan it no longer wait for it (deadline 20 s each; 5 of them would be 100 s). */
static void stopped_client_is_not_waited_for(void **state)
{
    net *t = *state;
    t->stop_client = 3;
    t->stop_round = 2;
    run_job(t, job("fedmean", "deadline = 20\nquorum = 0.6\nrounds = 6\n"), 0x3f);
    assert_job_done(t);
    assert_true(fk_service_now() - t->started < 20.0);
    /* it said Leave, although its long poll was in flight: its session ended at once */
    assert_int_equal(t->sstats.leaves, 1);
    fk_store_round *rows;
    int n;
    fk_err err;
    assert_int_equal(fk_store_round_list(t->st, t->job, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 6);
    assert_int_equal(rows[n - 1].dropouts, 1);
    assert_string_equal(rows[n - 1].dropped, "3");
    assert_int_equal(rows[n - 1].participants, 5);
    for (int i = 0; i < n; i++)
        fk_store_round_free(&rows[i]);
    free(rows);
    close_server(t);
}

/* A group commit that fails refuses its updates (UNAVAILABLE, none counted);
 * the clients resend and the job still ends with the simulator's model. */
static void failed_group_commit_is_resent(void **state)
{
    net *t = *state;
    const char *text = job("fedmean", "");
    t->fail_round = 2;
    run_job(t, text, 0x3f);
    assert_job_done(t);
    compare_with_sim(t, text);
    assert_int_equal(t->sstats.batch_failures, 1);
    assert_true(t->sstats.batches >= 2);
    assert_int_equal(t->sstats.committed, 4 * N);
    int count;
    fk_err err;
    assert_int_equal(fk_store_update_count(t->st, t->job, &count, &err), FK_OK);
    assert_int_equal(count, 4 * N);
    close_server(t);
}

static void client_off_the_allow_list_is_refused(void **state)
{
    net *t = *state;
    char *allow[] = {"c0", "c1", "c2", "c3"};
    t->cfg.allow = allow;
    t->cfg.n_allow = 4;
    const char *text = "method = fedmean\ndataset = synth\nclients = c0, c1, c2, c3\n"
                       "rounds = 2\ndeadline = 20\n";
    run_job(t, text, 0x3f); /* c4 and c5 try to join too */
    assert_job_done(t);
    assert_true(t->sstats.refused >= 2);
    assert_int_equal(t->astats[4].joins, 0);
    assert_int_equal(t->astats[5].joins, 0);
    assert_int_equal(t->astats[0].joins, 1);
    close_server(t);
}

/* One admin call's answer. */
typedef struct answer {
    int done, status;
    char msg[512];
} answer;

static void on_answer(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)resp, (void)len;
    answer *a = ud;
    a->done = 1;
    a->status = status;
    snprintf(a->msg, sizeof a->msg, "%s", msg ? msg : "");
}

/* Predict on job 1 (there is none) with `rows` query rows of 2 columns, as the admin "op". */
static void predict_rows(net *t, size_t rows, answer *a)
{
    fk_tls_ctx *tls = tls_for(t, 0, "op");
    fk_grpc_client_config cc = {.limits = t->limits, .tls = tls};
    fk_grpc_client *cl;
    fk_err err;
    if (fk_grpc_client_connect(&cl, &t->loop, &cc, "127.0.0.1", fk_grpc_server_port(t->srv),
                               "server", NULL, NULL, &err))
        fail_msg("connect: %s", err.msg);
    fk_tls_ctx_unref(tls);
    fk_bundle q;
    fk_bundle_init(&q);
    double *x = fk_bundle_add(&q, "X", 2, (uint64_t[]){rows, 2});
    assert_non_null(x);
    for (size_t i = 0; i < 2 * rows; i++)
        x[i] = (double)(i % 7);
    fedkern_v1_PredictRequest in = fedkern_v1_PredictRequest_init_zero;
    snprintf(in.job_id, sizeof in.job_id, "1");
    fk_codec_tx tx = {.bundle = &q};
    uint8_t *buf;
    size_t len;
    assert_int_equal(fk_codec_encode_predict_request(&in, &tx, &buf, &len, &err), FK_OK);
    memset(a, 0, sizeof *a);
    assert_int_equal(
        fk_grpc_client_call(cl, "/fedkern.v1.Federation/Predict", buf, len, 20000, on_answer, a),
        0);
    for (int guard = 0; !a->done && guard < 100000; guard++)
        FK_UV_MUST(uv_run(&t->loop, UV_RUN_ONCE));
    free(buf);
    fk_bundle_close(&q);
    fk_grpc_client_close(cl, NULL, NULL);
    assert_true(a->done);
}

/* Every job type's Predict takes at most FK_PREDICT_MAX_QUERIES rows: one more is refused
 * (RESOURCE_EXHAUSTED, saying the limit) before any job is looked up; exactly the cap passes
 * that check (then: no such job). */
static void predict_over_the_query_cap_is_refused(void **state)
{
    net *t = *state;
    start_server(t);
    answer a;
    predict_rows(t, FK_PREDICT_MAX_QUERIES + 1, &a);
    assert_int_equal(a.status, FK_GRPC_RESOURCE_EXHAUSTED);
    assert_non_null(strstr(a.msg, "100001 query rows in tensor 'X', at most 100000 per call"));
    predict_rows(t, FK_PREDICT_MAX_QUERIES, &a);
    assert_int_equal(a.status, FK_GRPC_NOT_FOUND);
    fk_service_stats ss;
    fk_service_stats_get(t->svc, &ss);
    assert_int_equal(ss.predict_failed, 2);
    fk_service_close(t->svc, service_closed, t);
    FK_UV_MUST(uv_run(&t->loop, UV_RUN_DEFAULT));
    fk_service_free(t->svc);
    t->svc = NULL;
    close_server(t);
}

/* ---- a relay that stalls connections ------------------------------------------------ */

/* A TCP relay between the agents and the server that, once frozen, swallows one direction's
 * bytes on the connections open then, closing nothing: a stalled connection, as a TLS record
 * whose length a damaged byte made too long leaves one (each peer waits for bytes that never
 * come; fault scenario 'corrupt'). Connections made later pass everything. */
typedef struct relay relay;
typedef struct rpair {
    uv_tcp_t down, up; /* the agent's side, the server's side */
    uv_connect_t conn;
    relay *r;
    int frozen, closing, handles;
    struct rpair *next;
} rpair;

struct relay {
    uv_tcp_t listener;
    int port, target;
    int swallow_down; /* frozen pairs drop server -> agent bytes (else agent -> server) */
    rpair *pairs;
    int open; /* handles not yet closed */
};

typedef struct rwrite {
    uv_write_t w;
    char *buf;
} rwrite;

static void relay_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    (void)h;
    buf->base = malloc(suggested);
    buf->len = buf->base ? suggested : 0;
}

static void rpair_handle_closed(uv_handle_t *h)
{
    rpair *p = h->data;
    p->r->open--;
    if (--p->handles == 0) {
        for (rpair **pp = &p->r->pairs; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        free(p);
    }
}

static void rpair_close(rpair *p)
{
    if (p->closing)
        return;
    p->closing = 1;
    uv_close((uv_handle_t *)&p->down, rpair_handle_closed);
    uv_close((uv_handle_t *)&p->up, rpair_handle_closed);
}

static void relay_written(uv_write_t *w, int status)
{
    (void)status;
    rwrite *x = (rwrite *)w;
    free(x->buf);
    free(x);
}

static void relay_read(uv_stream_t *from, ssize_t n, const uv_buf_t *buf)
{
    rpair *p = from->data;
    int is_down = from == (uv_stream_t *)&p->down;
    if (n < 0) {
        free(buf->base);
        rpair_close(p);
        return;
    }
    int swallow = p->frozen && (p->r->swallow_down ? !is_down : is_down);
    if (n == 0 || swallow || p->closing) {
        free(buf->base);
        return;
    }
    rwrite *x = malloc(sizeof *x);
    assert_non_null(x);
    x->buf = buf->base;
    uv_buf_t b = uv_buf_init(buf->base, (unsigned)n);
    if (uv_write(&x->w, is_down ? (uv_stream_t *)&p->up : (uv_stream_t *)&p->down, &b, 1,
                 relay_written)) {
        free(x->buf);
        free(x);
        rpair_close(p);
    }
}

static void relay_connected(uv_connect_t *c, int status)
{
    rpair *p = c->data;
    if (status || p->closing) {
        rpair_close(p);
        return;
    }
    FK_UV_MUST(uv_read_start((uv_stream_t *)&p->down, relay_alloc, relay_read));
    FK_UV_MUST(uv_read_start((uv_stream_t *)&p->up, relay_alloc, relay_read));
}

static void relay_accept(uv_stream_t *l, int status)
{
    relay *r = l->data;
    if (status)
        return;
    rpair *p = calloc(1, sizeof *p);
    assert_non_null(p);
    p->r = r;
    FK_UV_MUST(uv_tcp_init(l->loop, &p->down));
    FK_UV_MUST(uv_tcp_init(l->loop, &p->up));
    p->down.data = p->up.data = p->conn.data = p;
    p->handles = 2;
    r->open += 2;
    p->next = r->pairs;
    r->pairs = p;
    if (uv_accept(l, (uv_stream_t *)&p->down)) {
        rpair_close(p);
        return;
    }
    struct sockaddr_in to;
    FK_UV_MUST(uv_ip4_addr("127.0.0.1", r->target, &to));
    if (uv_tcp_connect(&p->conn, &p->up, (const struct sockaddr *)&to, relay_connected))
        rpair_close(p);
}

static void relay_start(relay *r, uv_loop_t *loop, int target)
{
    memset(r, 0, sizeof *r);
    r->target = target;
    FK_UV_MUST(uv_tcp_init(loop, &r->listener));
    r->listener.data = r;
    r->open = 1;
    struct sockaddr_in a;
    FK_UV_MUST(uv_ip4_addr("127.0.0.1", 0, &a));
    FK_UV_MUST(uv_tcp_bind(&r->listener, (const struct sockaddr *)&a, 0));
    FK_UV_MUST(uv_listen((uv_stream_t *)&r->listener, 16, relay_accept));
    struct sockaddr_storage ss;
    int len = sizeof ss;
    FK_UV_MUST(uv_tcp_getsockname(&r->listener, (struct sockaddr *)&ss, &len));
    r->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

static void relay_listener_closed(uv_handle_t *h)
{
    ((relay *)h->data)->open--;
}

static void relay_stop(relay *r)
{
    uv_close((uv_handle_t *)&r->listener, relay_listener_closed);
    for (rpair *p = r->pairs; p; p = p->next)
        rpair_close(p);
}

/* Freeze every connection open now; returns how many. */
static int relay_freeze(relay *r)
{
    int n = 0;
    for (rpair *p = r->pairs; p; p = p->next)
        if (!p->closing)
            p->frozen = 1, n++;
    return n;
}

/* Run the loop until cond(t) holds or `seconds` pass; returns whether it held. */
static int wake_closed;
static void wake_close_cb(uv_handle_t *h)
{
    (void)h;
    wake_closed = 1;
}

static int run_until(net *t, int (*cond)(net *t), double seconds)
{
    /* a wake timer closed just before (wait_agents) must be gone before it is reused */
    FK_UV_MUST(uv_run(&t->loop, UV_RUN_NOWAIT));
    assert_int_equal(uv_timer_init(&t->loop, &t->wake), 0);
    assert_int_equal(uv_timer_start(&t->wake, wake, 10, 10), 0);
    double end = fk_service_now() + seconds;
    int ok;
    while (!(ok = cond(t)) && fk_service_now() < end)
        FK_UV_MUST(uv_run(&t->loop, UV_RUN_ONCE));
    wake_closed = 0;
    uv_close((uv_handle_t *)&t->wake, wake_close_cb);
    while (!wake_closed)
        FK_UV_MUST(uv_run(&t->loop, UV_RUN_ONCE));
    return ok;
}

static int never(net *t)
{
    (void)t;
    return 0;
}

/* Agent 0 reconnected (its stalled connection noticed) and has a heartbeat answered since. */
static uint64_t hb_at_reconnect;
static int agent0_back(net *t)
{
    fk_agent_stats as;
    fk_agent_stats_get(t->agents[0], &as);
    if (as.connects < 2)
        return 0;
    if (!hb_at_reconnect)
        hb_at_reconnect = as.heartbeats;
    return as.heartbeats >= hb_at_reconnect + 2;
}

/* A connection stalled in one direction (server -> agent when swallow_down, else agent ->
 * server): the agent notices it by its unanswered PING (max(1 heartbeat interval, 4 round
 * trips) after half an interval of silence) and reconnects, while the server keeps its
 * session: the PING's bytes or the connection's close count as the client's, so it is never
 * taken for gone (no expired session, so no dropout). Before: the agent noticed only at its
 * Heartbeat's deadline (4 intervals, at least 5 s) and the server had ended its session
 * (3 intervals of 300 ms) long before: an expired session, a client planned as a dropout. */
static void stalled_connection(net *t, int swallow_down)
{
    relay r;
    start_server(t);
    relay_start(&r, &t->loop, fk_grpc_server_port(t->srv));
    r.swallow_down = swallow_down;
    t->agent_port = r.port;
    start_agent(t, 0);
    start_agent(t, 1);
    wait_agents(t, 0x3);
    run_until(t, never, 0.3); /* a heartbeat each */
    assert_int_equal(relay_freeze(&r), 2);
    hb_at_reconnect = 0;
    assert_true(run_until(t, agent0_back, 20.0));
    /* and a few more intervals: a session that was going to expire has */
    run_until(t, never, 1.5);
    fk_service_stats ss;
    fk_service_stats_get(t->svc, &ss);
    fk_agent_stats a0, a1;
    fk_agent_stats_get(t->agents[0], &a0);
    fk_agent_stats_get(t->agents[1], &a1);
    assert_int_equal(ss.expired, 0); /* never taken for gone: planned as before */
    assert_int_equal(ss.leaves, 0);
    assert_int_equal(ss.sessions, 2);
    assert_true(a0.connects >= 2 && a1.connects >= 2);
    /* one Join per connection (a new connection joins): none forced by a lost session */
    assert_int_equal(a0.joins, a0.connects);
    assert_int_equal(a1.joins, a1.connects);
    stop_agent(t, 0);
    stop_agent(t, 1);
    relay_stop(&r);
    fk_service_close(t->svc, service_closed, t);
    FK_UV_MUST(uv_run(&t->loop, UV_RUN_DEFAULT));
    assert_int_equal(r.open, 0);
    fk_service_free(t->svc);
    t->svc = NULL;
    close_server(t);
}

static void stalled_download_keeps_the_session(void **state)
{
    stalled_connection(*state, 1);
}

static void stalled_upload_keeps_the_session(void **state)
{
    stalled_connection(*state, 0);
}

/* ---- presence at submit ------------------------------------------------------------- */

/* fedmean whose last client has a role (a test-only "unseen" domain, as dica's holdout). */
static int roles_last_unseen(const fk_params *p, int n, const char **roles, fk_err *err)
{
    (void)p, (void)err;
    for (int i = 0; i < n; i++)
        roles[i] = i == n - 1 ? "unseen" : NULL;
    return FK_OK;
}

static fk_method roles_m;
static const fk_method *roles_find(const char *name, fk_err *err)
{
    if (strcmp(name, "fedmean-roles"))
        return fk_test_find_method(name, err);
    roles_m = fk_test_fedmean;
    roles_m.name = "fedmean-roles";
    roles_m.client_roles = roles_last_unseen;
    return &roles_m;
}

/* SubmitJob over the wire as the admin "op". */
static void submit_rpc(net *t, const char *text, answer *a)
{
    fk_tls_ctx *tls = tls_for(t, 0, "op");
    fk_grpc_client_config cc = {.limits = t->limits, .tls = tls};
    fk_grpc_client *cl;
    fk_err err;
    if (fk_grpc_client_connect(&cl, &t->loop, &cc, "127.0.0.1", fk_grpc_server_port(t->srv),
                               "server", NULL, NULL, &err))
        fail_msg("connect: %s", err.msg);
    fk_tls_ctx_unref(tls);
    fedkern_v1_SubmitJobRequest in = fedkern_v1_SubmitJobRequest_init_zero;
    in.config = (char *)text;
    uint8_t *buf;
    size_t len;
    assert_int_equal(fk_codec_encode(fedkern_v1_SubmitJobRequest_fields, &in, 0, &buf, &len, &err),
                     FK_OK);
    memset(a, 0, sizeof *a);
    assert_int_equal(
        fk_grpc_client_call(cl, "/fedkern.v1.Federation/SubmitJob", buf, len, 20000, on_answer, a),
        0);
    for (int guard = 0; !a->done && guard < 100000; guard++)
        FK_UV_MUST(uv_run(&t->loop, UV_RUN_ONCE));
    free(buf);
    fk_grpc_client_close(cl, NULL, NULL);
    assert_true(a->done);
}

static int sessions_below_6(net *t)
{
    fk_service_stats ss;
    fk_service_stats_get(t->svc, &ss);
    return ss.sessions < N;
}

/* A job whose type needs a client connected (a role: the test-only domain) is refused, naming
 * it, while that client has no live session: before it joined, and after it left (Leave ends
 * the session at once: heartbeats of 60 s here, so no expiry explains it); accepted while it
 * is connected. Before: the check asked only whether it had ever joined. */
static void submit_needs_the_role_clients_connected(void **state)
{
    net *t = *state;
    char *admins[] = {"op"};
    t->cfg.admins = admins;
    t->cfg.n_admins = 1;
    t->find = roles_find;
    t->cfg.heartbeat_ms = 60000; /* no session can expire during the test */
    start_server(t);
    for (int c = 0; c < N - 1; c++)
        start_agent(t, c);
    wait_agents(t, 0x1f);
    const char *text = "method = fedmean-roles\ndataset = synth\n"
                       "clients = c0, c1, c2, c3, c4, c5\nrounds = 1\ndeadline = 20\n";
    answer a;
    submit_rpc(t, text, &a);
    /* c5 never joined: the roster check says so first */
    assert_int_not_equal(a.status, FK_GRPC_OK);
    assert_non_null(strstr(a.msg, "c5 has never joined"));
    start_agent(t, N - 1);
    wait_agents(t, 0x3f);
    stop_agent(t, N - 1); /* Leave */
    assert_true(run_until(t, sessions_below_6, 10.0));
    fk_service_stats ss;
    fk_service_stats_get(t->svc, &ss);
    assert_int_equal(ss.leaves, 1);
    assert_int_equal(ss.expired, 0);
    submit_rpc(t, text, &a);
    assert_int_not_equal(a.status, FK_GRPC_OK);
    if (!strstr(a.msg, "client c5 (unseen) not connected") || !strstr(a.msg, "--wait_clients"))
        fail_msg("refusal: %s", a.msg);
    /* a training client away is no reason to refuse (quorum and deadline cover it) */
    start_agent(t, N - 1);
    wait_agents(t, 0x20);
    stop_agent(t, 0);
    assert_true(run_until(t, sessions_below_6, 10.0));
    submit_rpc(t, text, &a);
    if (a.status != FK_GRPC_OK)
        fail_msg("refused with c5 connected: %s", a.msg);
    for (int c = 1; c < N; c++)
        stop_agent(t, c);
    fk_service_close(t->svc, service_closed, t);
    FK_UV_MUST(uv_run(&t->loop, UV_RUN_DEFAULT));
    fk_service_free(t->svc);
    t->svc = NULL;
    close_server(t);
}

/* The unseen-domain client (a role) of a running job says Leave mid-job (round 2 of 6).
 * Before, the rounds went on without it and the job ended "done" without the result it
 * exists for; now the phase waits for it until its deadline (3 s) and the job fails, naming
 * the client and its role. */
static void role_client_leaving_mid_job_fails_it(void **state)
{
    net *t = *state;
    t->find = roles_find;
    t->stop_client = N - 1;
    t->stop_round = 2;
    run_job(t, job("fedmean-roles", "deadline = 3\nquorum = 0.6\nrounds = 6\n"), 0x3f);
    fk_job_status s;
    fk_err err;
    assert_int_equal(fk_engine_status(t->e, t->job, &s, &err), FK_OK);
    assert_int_equal(s.state, FK_JOB_FAILED);
    if (!strstr(s.failure, "client c5 (unseen) left during round") ||
        !strstr(s.failure, "did not come back before the phase's deadline (3 s)"))
        fail_msg("failure reason: %s", s.failure);
    assert_true(s.round >= 2 && s.round < 6);
    assert_int_equal(t->sstats.leaves, 1); /* Leave ended its session at once */
    /* the phase waited its deadline for c5 after the Leave (the rounds before it did not) */
    assert_true(fk_service_now() - t->started >= 3.0);
    close_server(t);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* a peer closing mid-write must not kill the test */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(federation_matches_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(slow_upload_check_leaves_the_loop_answering, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(heavy_aggregation_leaves_the_loop_answering, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(predict_over_the_query_cap_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(shutdown_waits_for_the_aggregation, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_update_is_refused_over_the_wire, setup, teardown),
        cmocka_unit_test_setup_teardown(chunked_messages_match_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(stopped_client_is_a_dropout, setup, teardown),
        cmocka_unit_test_setup_teardown(stopped_client_is_not_waited_for, setup, teardown),
        cmocka_unit_test_setup_teardown(client_off_the_allow_list_is_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_group_commit_is_resent, setup, teardown),
        cmocka_unit_test_setup_teardown(stalled_download_keeps_the_session, setup, teardown),
        cmocka_unit_test_setup_teardown(stalled_upload_keeps_the_session, setup, teardown),
        cmocka_unit_test_setup_teardown(submit_needs_the_role_clients_connected, setup, teardown),
        cmocka_unit_test_setup_teardown(role_client_leaving_mid_job_fails_it, setup, teardown),
    };
    int failed = cmocka_run_group_tests_name("io_threads=1", tests, NULL, NULL);
    io_threads = 2;
    failed += cmocka_run_group_tests_name("io_threads=2", tests, NULL, NULL);
    return failed;
}
