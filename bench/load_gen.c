/* One load-generator process of `fedkern bench load` (see load_gen.h). Every connection has
 * its own client certificate and TLS context, Joins once, then Heartbeats when the pacing
 * gives it a turn. Per call the generator does no allocation of its own: the Heartbeat
 * request is encoded once per session and kept, and the latency goes into a fixed
 * histogram. */
#include "bench/load_gen.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <uv.h>

#include "bench/bench.h"
#include "common/base/uvcheck.h"
#include "common/la/rng.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "fedkern.pb.h"

#define FED "/fedkern.v1.Federation/"

/* The client daemon's reconnect policy (client/agent.c): full jitter, uniform in
 * [0, min(max, 200 ms * 2^attempt)]. */
enum { BACKOFF_MIN_MS = 200, BACKOFF_MAX_MS = 15000 };

/* Pacing: a tick every TICK_MS sends the calls owed since the last one; a connection still
 * waiting for its previous answer passes its turn to the next free one (at most SCAN
 * looked at per call) so the offered rate holds while some calls are slow. */
enum { TICK_MS = 5, SCAN = 64 };

typedef struct gen gen;

/* What the generator does now. Outside the timed phase and the closing, joined clients keep
 * heartbeating at the server's interval, as the client daemon does, so their sessions do not
 * expire (after 3 missed intervals) while the others connect or the coordinator measures. */
enum { PH_IDLE, PH_CONNECT, PH_TIMED, PH_DRAIN, PH_STORM, PH_CLOSING };

typedef struct lconn {
    gen *g;
    int idx; /* global index: certificate load<idx> */
    fk_grpc_client *cl;
    fk_tls_ctx *tls;
    int up, joined, busy, closed, timed;
    int lost; /* counted in gen.lost already (a failed Join also ends its connection) */
    double sent_at;
    uint8_t *join_req; /* the Join request while it is in flight */
    uint8_t *hb;       /* this session's Heartbeat request, encoded once */
    size_t hb_len;
    /* storm: reconnect with full jitter after the server was killed */
    uv_timer_t retry;
    int retry_init, attempts, rejoined;
    int inflight, waiting; /* storm: connecting now / queued for a generator slot */
} lconn;

struct gen {
    const fk_loadgen_cfg *cfg;
    uv_loop_t loop;
    uv_poll_t cmd_poll;
    int cmd_ready, cmd_fd;
    lconn *conns;
    int n, connecting, joined, up, closed_n, next_connect;
    int phase; /* PH_* */
    fk_loadgen_report rep;
    uv_timer_t tick;
    double rate, credit, last_tick; /* rate: the timed phase's calls/s */
    double keep_s;                  /* the server's heartbeat interval (JoinResponse) */
    int cursor;
    int lost;         /* connections that failed or ended outside the storm, all phases */
    long keep_failed; /* untimed heartbeats that failed outside the storm */
    /* storm */
    fk_rng rng;
    double *times; /* first rejoin time of each rejoined connection */
    int inflight, *waitq, wq_head, wq_len;
};

static double cpu_now(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru))
        return 0;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Both directions loop the same way: retry EINTR, a short count moves on,
 * 0 or an error is the peer gone. */
static int xfer_all(int fd, char *b, size_t n, int writing)
{
    while (n > 0) {
        ssize_t k = writing ? write(fd, b, n) : read(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return FK_EIO;
        b += k;
        n -= (size_t)k;
    }
    return FK_OK;
}

int fk__loadgen_write(int fd, const void *p, size_t n)
{
    /* write() does not modify the buffer; the cast only shares the loop. */
    return xfer_all(fd, (char *)(uintptr_t)p, n, 1);
}

int fk__loadgen_read(int fd, void *p, size_t n)
{
    return xfer_all(fd, p, n, 0);
}

/* ---- connections ---- */

static void connect_more(gen *g);
static void storm_retry_later(lconn *c);
static void storm_pump(gen *g);

static void on_hb(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)msg;
    (void)resp;
    (void)len;
    lconn *c = ud;
    gen *g = c->g;
    c->busy = 0;
    int timed = c->timed && g->phase == PH_TIMED;
    c->timed = 0;
    if (status != FK_GRPC_OK) {
        if (timed)
            g->rep.calls_failed++;
        else if (g->phase != PH_STORM && g->phase != PH_CLOSING)
            g->keep_failed++; /* a session that expired shows here */
        return;
    }
    if (timed) {
        g->rep.calls_ok++;
        fk_lhist_record(&g->rep.hist, fk_bench_now() - c->sent_at);
    }
}

static void send_heartbeat(lconn *c)
{
    c->busy = 1;
    c->timed = c->g->phase == PH_TIMED;
    if (c->timed) {
        c->sent_at = fk_bench_now();
        c->g->rep.calls_sent++;
    }
    /* a call that cannot start completes at once: on_hb counted it and cleared busy */
    if (fk_grpc_client_call(c->cl, FED "Heartbeat", c->hb, c->hb_len, 10000, on_hb, c) != FK_OK)
        return;
}

/* A session id arrived: encode this client's Heartbeat once, for every call of the session. */
static int joined_as(lconn *c, const char *session)
{
    fedkern_v1_HeartbeatRequest in = fedkern_v1_HeartbeatRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", session);
    free(c->hb);
    c->hb = NULL;
    fk_err err = {0};
    if (fk_codec_encode(fedkern_v1_HeartbeatRequest_fields, &in, 0, &c->hb, &c->hb_len, &err)) {
        fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return -1;
    }
    return 0;
}

/* Count a connection that failed or ended once (a failed Join also ends its connection);
 * 1 for the first one of this generator, whose reason is printed. */
static int count_lost(lconn *c)
{
    if (c->lost)
        return 0;
    c->lost = 1;
    return c->g->lost++ == 0;
}

/* A storm reconnect finished (joined or failed): its generator slot goes to the next. */
static void storm_release(lconn *c)
{
    if (!c->inflight)
        return;
    c->inflight = 0;
    c->g->inflight--;
    storm_pump(c->g);
}

static void on_join(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    lconn *c = ud;
    gen *g = c->g;
    free(c->join_req);
    c->join_req = NULL;
    c->busy = 0;
    fedkern_v1_JoinResponse out;
    fk_err err = {0};
    int ok = status == FK_GRPC_OK &&
             !fk_codec_decode(fedkern_v1_JoinResponse_fields, &out, resp, len, &err);
    if (ok) {
        ok = !joined_as(c, out.session_id);
        if (out.heartbeat_interval_ms)
            g->keep_s = out.heartbeat_interval_ms / 1e3;
        fk_codec_release(fedkern_v1_JoinResponse_fields, &out);
    }
    if (g->phase == PH_STORM) { /* storm: a rejoin after the restart */
        storm_release(c);
        if (!ok) {
            /* a connection that never came up (server still down, refused, backlog full)
             * is a reconnect attempt; a Join the server got and failed is a failed Join */
            if (c->up)
                g->rep.storm_failures++;
            else
                g->rep.storm_refused++;
            storm_retry_later(c);
            return;
        }
        g->rep.storm_joins++;
        if (!c->rejoined++)
            g->times[g->rep.rejoined++] = fk_bench_now();
        return;
    }
    g->connecting--;
    if (!ok) {
        if (count_lost(c))
            fprintf(stderr, "fedkern bench load: Join failed: %s\n",
                    status != FK_GRPC_OK ? msg : "bad response");
    } else {
        c->joined = 1;
        g->joined++;
    }
    connect_more(g);
}

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl;
    lconn *c = ud;
    gen *g = c->g;
    if (up) {
        c->up = 1;
        g->up++;
        return;
    }
    if (c->up) {
        c->up = 0;
        g->up--;
    }
    if (g->phase == PH_STORM && !c->closed) { /* the server went away; come back later */
        storm_retry_later(c);
        return;
    }
    if (g->phase != PH_CLOSING && !c->closed && count_lost(c))
        fprintf(stderr, "fedkern bench load: connection %d ended: %s\n", c->idx, why);
}

static void on_closed(void *ud)
{
    lconn *c = ud;
    c->g->closed_n++;
}

static void start_conn(gen *g, lconn *c)
{
    char ca[600], cert[600], key[600], name[32];
    snprintf(name, sizeof name, "load%d", c->idx);
    fk_err err = {0};
    fk_tls_files files = {.ca = ca, .cert = cert, .key = key};
    fk_grpc_client_config cfg;
    fk_net_limits_default(&cfg.limits);
    int storm = g->phase == PH_STORM;
    g->connecting += !storm;
    if (!c->tls &&
        (fk_certs_path(ca, sizeof ca, g->cfg->dir, FK_ROLE_NONE, NULL, "pem", &err) ||
         fk_certs_path(cert, sizeof cert, g->cfg->dir, FK_ROLE_CLIENT, name, "pem", &err) ||
         fk_certs_path(key, sizeof key, g->cfg->dir, FK_ROLE_CLIENT, name, "key", &err) ||
         fk_tls_ctx_new(&c->tls, 0, &files, &err))) {
        g->connecting -= !storm;
        if (count_lost(c))
            fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return;
    }
    cfg.tls = c->tls;
    if (fk_grpc_client_connect(&c->cl, &g->loop, &cfg, "127.0.0.1", g->cfg->port, "127.0.0.1",
                               on_state, c, &err)) {
        g->connecting -= !storm;
        c->cl = NULL;
        if (storm) { /* try again later, as the client daemon does */
            storm_retry_later(c);
            return;
        }
        if (count_lost(c))
            fprintf(stderr, "fedkern bench load: %s\n", err.msg);
        return;
    }
    fedkern_v1_JoinRequest in = fedkern_v1_JoinRequest_init_zero;
    in.protocol_version = 1;
    snprintf(in.name, sizeof in.name, "%s", name);
    snprintf(in.software, sizeof in.software, "fedkern bench load");
    size_t len;
    if (fk_codec_encode(fedkern_v1_JoinRequest_fields, &in, 0, &c->join_req, &len, &err)) {
        g->connecting -= !storm;
        if (!storm)
            count_lost(c);
        if (storm)
            storm_retry_later(c);
        return;
    }
    c->busy = 1;
    /* a call that cannot start completes at once: on_join counted the failure (or, in the
     * storm, scheduled the retry) */
    if (fk_grpc_client_call(c->cl, FED "Join", c->join_req, len, 30000, on_join, c) != FK_OK)
        return;
}

static void connect_more(gen *g)
{
    while (g->next_connect < g->n && g->connecting < g->cfg->batch)
        start_conn(g, &g->conns[g->next_connect++]);
}

/* ---- storm ---- */

static void on_storm_closed(void *ud)
{
    (void)ud; /* the old client of a storm reconnect: nothing to count */
}

static void on_retry(uv_timer_t *t)
{
    lconn *c = t->data;
    gen *g = c->g;
    if (g->phase != PH_STORM)
        return;
    if (c->cl) {
        fk_grpc_client_close(c->cl, on_storm_closed, c);
        c->cl = NULL;
    }
    if (!c->waiting) {
        c->waiting = 1;
        g->waitq[(g->wq_head + g->wq_len++) % g->n] = (int)(c - g->conns);
    }
    storm_pump(g);
}

static void storm_pump(gen *g)
{
    while (g->phase == PH_STORM && g->wq_len > 0 && g->inflight < g->cfg->batch) {
        lconn *c = &g->conns[g->waitq[g->wq_head]];
        g->wq_head = (g->wq_head + 1) % g->n;
        g->wq_len--;
        c->waiting = 0;
        c->inflight = 1;
        g->inflight++;
        c->attempts++;
        start_conn(g, c);
    }
}

/* Reconnect and Join after a full-jitter delay, unless one is already pending. */
static void storm_retry_later(lconn *c)
{
    gen *g = c->g;
    storm_release(c);
    if (c->waiting)
        return; /* already queued for a slot */
    if (!c->retry_init) {
        FK_UV_MUST(uv_timer_init(&g->loop, &c->retry));
        c->retry.data = c;
        c->retry_init = 1;
    }
    if (uv_is_active((uv_handle_t *)&c->retry))
        return;
    uint64_t cap = (uint64_t)BACKOFF_MIN_MS << (c->attempts < 16 ? c->attempts : 16);
    if (cap > BACKOFF_MAX_MS)
        cap = BACKOFF_MAX_MS;
    FK_UV_MUST(uv_timer_start(&c->retry, on_retry, fk_rng_below(&g->rng, cap + 1), 0));
}

/* ---- pacing ---- */

/* Each tick sends the calls owed since the last one: at the offered rate in the timed phase,
 * else every client once per server interval (no calls while draining or closing). */
static void on_tick(uv_timer_t *t)
{
    gen *g = t->data;
    double now = fk_bench_now(), dt = now - g->last_tick;
    g->last_tick = now;
    int timed = g->phase == PH_TIMED;
    if (!timed && g->phase != PH_IDLE && g->phase != PH_CONNECT && g->phase != PH_STORM) {
        g->credit = 0;
        return;
    }
    double rate = timed ? g->rate : (double)g->n / g->keep_s;
    g->credit += rate * dt;
    if (g->credit > rate) /* a stalled loop catches up at most one second's worth */
        g->credit = rate;
    for (; g->credit >= 1.0; g->credit -= 1.0) {
        g->rep.calls_due += timed;
        lconn *c = NULL;
        for (int k = 0; k < SCAN && k < g->n; k++) {
            lconn *x = &g->conns[g->cursor];
            g->cursor = g->cursor + 1 == g->n ? 0 : g->cursor + 1;
            /* in the storm only a client back on the new server has a session to keep */
            if (x->joined && x->up && !x->busy && x->hb && (g->phase != PH_STORM || x->rejoined)) {
                c = x;
                break;
            }
        }
        if (c)
            send_heartbeat(c);
        else
            g->rep.calls_skipped += timed;
    }
}

/* ---- phases ---- */

static int run_until(gen *g, int (*cond)(gen *), double seconds)
{
    double until = fk_bench_now() + seconds;
    while (!cond(g) && fk_bench_now() < until)
        FK_UV_MUST(uv_run(&g->loop, UV_RUN_ONCE));
    return cond(g);
}

static int all_settled(gen *g)
{
    return g->next_connect == g->n && g->connecting == 0;
}

static int none_busy(gen *g)
{
    for (int i = 0; i < g->n; i++)
        if (g->conns[i].busy)
            return 0;
    return 1;
}

static int all_closed(gen *g)
{
    int opened = 0;
    for (int i = 0; i < g->n; i++)
        opened += g->conns[i].cl != NULL;
    return g->closed_n == opened;
}

static int all_rejoined(gen *g)
{
    return g->rep.rejoined == g->n;
}

static int cmd_arrived(gen *g)
{
    return g->cmd_ready;
}

static void on_cmd(uv_poll_t *p, int status, int events)
{
    (void)status;
    (void)events;
    gen *g = p->data;
    g->cmd_ready = 1;
}

/* Keep the connections served (their loop runs) until the coordinator speaks. */
static int wait_cmd(gen *g, fk_loadgen_cmd *cmd)
{
    g->cmd_ready = 0;
    FK_UV_MUST(uv_poll_start(&g->cmd_poll, UV_READABLE | UV_DISCONNECT, on_cmd));
    while (!cmd_arrived(g))
        FK_UV_MUST(uv_run(&g->loop, UV_RUN_ONCE));
    FK_UV_MUST(uv_poll_stop(&g->cmd_poll));
    g->phase = PH_DRAIN; /* no new calls while a command is read and started */
    return fk__loadgen_read(g->cmd_fd, cmd, sizeof *cmd);
}

static void phase_begin(gen *g, int kind, double *t0, double *c0)
{
    memset(&g->rep, 0, sizeof g->rep);
    g->rep.kind = kind;
    g->rep.n = g->n;
    *t0 = fk_bench_now();
    *c0 = cpu_now();
}

static void phase_end(gen *g, double t0, double c0)
{
    g->rep.t_phase = fk_bench_now() - t0;
    g->rep.cpu_s = cpu_now() - c0;
}

static void do_connect(gen *g, double limit)
{
    double t0, c0;
    phase_begin(g, FK_LG_CONNECT, &t0, &c0);
    g->phase = PH_CONNECT;
    connect_more(g);
    run_until(g, all_settled, limit);
    run_until(g, none_busy, 5);
    phase_end(g, t0, c0);
    g->rep.joined = g->joined; /* the coordinator fails the run unless every one joined */
}

/* The timed phase: calls paced at `rate` for `seconds`; answers after it are not timed. */
static void do_heartbeat(gen *g, double seconds, double rate)
{
    double t0, c0;
    g->phase = PH_DRAIN; /* the keep-alive calls still out are not timed */
    run_until(g, none_busy, 15);
    phase_begin(g, FK_LG_HEARTBEAT, &t0, &c0);
    g->phase = PH_TIMED;
    g->rate = rate;
    g->credit = 0;
    g->last_tick = t0;
    while (fk_bench_now() - t0 < seconds)
        FK_UV_MUST(uv_run(&g->loop, UV_RUN_ONCE));
    phase_end(g, t0, c0);
    g->phase = PH_DRAIN;
    run_until(g, none_busy, 15);
}

/* Reconnect storm: from now on a lost connection comes back with full-jitter backoff. The
 * coordinator kills and restarts the server once every generator answered ARMED. */
static int do_storm(gen *g, double limit)
{
    double t0, c0;
    if (!g->times && !(g->times = calloc((size_t)g->n, sizeof *g->times)))
        return FK_ENOMEM;
    if (!g->waitq && !(g->waitq = calloc((size_t)g->n, sizeof *g->waitq)))
        return FK_ENOMEM;
    fk_rng_init(&g->rng, 24, (uint64_t)g->cfg->id + 1);
    g->phase = PH_STORM;
    fk_loadgen_report armed = {.kind = FK_LG_ARMED, .n = g->n};
    if (fk__loadgen_write(g->cmd_fd, &armed, sizeof armed))
        return FK_EIO;
    phase_begin(g, FK_LG_STORM, &t0, &c0);
    run_until(g, all_rejoined, limit);
    phase_end(g, t0, c0);
    g->rep.n_times = g->rep.rejoined;
    for (int i = 0; i < g->n; i++) /* the unluckiest client's reconnect attempts */
        g->rep.attempts_max = g->conns[i].attempts > g->rep.attempts_max ? g->conns[i].attempts
                                                                           : g->rep.attempts_max;
    return FK_OK;
}

static void do_close(gen *g)
{
    double t0, c0;
    phase_begin(g, FK_LG_CLOSE, &t0, &c0);
    g->phase = PH_CLOSING;
    for (int i = 0; i < g->n; i++) {
        lconn *c = &g->conns[i];
        if (c->retry_init) {
            FK_UV_MUST(uv_timer_stop(&c->retry));
            uv_close((uv_handle_t *)&c->retry, NULL);
            c->retry_init = 0;
        }
        if (c->cl) {
            c->closed = 1;
            fk_grpc_client_close(c->cl, on_closed, c);
        }
    }
    run_until(g, all_closed, 30);
    phase_end(g, t0, c0);
    g->rep.closed = g->closed_n;
}

static int reply(gen *g)
{
    g->rep.failed_conns = g->lost;
    g->rep.keep_failed = g->keep_failed;
    g->phase = PH_IDLE; /* until the next command: keep the sessions alive */
    int rc = fk__loadgen_write(g->cmd_fd, &g->rep, sizeof g->rep);
    if (!rc && g->rep.kind == FK_LG_STORM && g->rep.n_times > 0)
        rc = fk__loadgen_write(g->cmd_fd, g->times, (size_t)g->rep.n_times * sizeof *g->times);
    return rc;
}

int fk_loadgen_run(const fk_loadgen_cfg *cfg, int fd, fk_err *err)
{
    gen *g = calloc(1, sizeof *g);
    if (!g)
        return fk_err_set(err, FK_ENOMEM, "load generator: out of memory");
    g->cfg = cfg;
    g->cmd_fd = fd;
    g->n = cfg->hi - cfg->lo;
    int rc = FK_OK;
    FK_UV_MUST(uv_loop_init(&g->loop));
    FK_UV_MUST(uv_timer_init(&g->loop, &g->tick));
    g->tick.data = g;
    FK_UV_MUST(uv_poll_init(&g->loop, &g->cmd_poll, fd));
    g->cmd_poll.data = g;
    g->keep_s = 10; /* the server's default until a JoinResponse says */
    g->last_tick = fk_bench_now();
    FK_UV_MUST(uv_timer_start(&g->tick, on_tick, TICK_MS, TICK_MS));
    if (!(g->conns = calloc((size_t)(g->n > 0 ? g->n : 1), sizeof *g->conns))) {
        rc = fk_err_set(err, FK_ENOMEM, "load generator: out of memory for %d connections", g->n);
        goto out;
    }
    for (int i = 0; i < g->n; i++)
        g->conns[i] = (lconn){.g = g, .idx = cfg->lo + i};
    /* one command at a time, each answered; CLOSE is the last */
    for (int done = 0; !done && !rc;) {
        fk_loadgen_cmd cmd;
        if (wait_cmd(g, &cmd)) {
            rc = fk_err_set(err, FK_EIO, "load generator %d: the coordinator went away", cfg->id);
            break;
        }
        switch (cmd.kind) {
        case FK_LG_CONNECT: do_connect(g, cmd.seconds); break;
        case FK_LG_HEARTBEAT: do_heartbeat(g, cmd.seconds, cmd.rate); break;
        case FK_LG_STORM:
            if ((rc = do_storm(g, cmd.seconds)))
                fk_err_set(err, rc, "load generator %d: storm: out of memory or socket lost",
                           cfg->id);
            break;
        case FK_LG_CLOSE: do_close(g); done = 1; break;
        default: rc = fk_err_set(err, FK_EINVAL, "load generator: unknown command %d", cmd.kind);
        }
        if (!rc && reply(g))
            rc = fk_err_set(err, FK_EIO, "load generator %d: cannot answer", cfg->id);
    }
out:
    /* every handle closed, every TLS context and buffer freed, the loop closed */
    if (!uv_is_closing((uv_handle_t *)&g->cmd_poll))
        uv_close((uv_handle_t *)&g->cmd_poll, NULL);
    uv_close((uv_handle_t *)&g->tick, NULL);
    for (int i = 0; g->conns && i < g->n; i++) {
        lconn *c = &g->conns[i];
        if (c->retry_init)
            uv_close((uv_handle_t *)&c->retry, NULL);
        if (c->cl && !c->closed)
            fk_grpc_client_close(c->cl, NULL, NULL);
    }
    for (int i = 0; i < 100 && uv_run(&g->loop, UV_RUN_NOWAIT); i++)
        usleep(1000);
    for (int i = 0; g->conns && i < g->n; i++) {
        if (g->conns[i].tls)
            fk_tls_ctx_unref(g->conns[i].tls);
        free(g->conns[i].hb);
        free(g->conns[i].join_req);
    }
    if (uv_loop_close(&g->loop))
        fprintf(stderr, "fedkern bench load: generator %d: handles left open at exit\n", cfg->id);
    free(g->conns);
    free(g->times);
    free(g->waitq);
    free(g);
    return rc;
}
