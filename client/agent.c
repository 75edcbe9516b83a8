/* The client agent's connection and loop: the calls and their completions, reconnects with
 * backoff, Join, Heartbeat, the decision of the next call, start and stop. Tasks are in
 * agent_task.c, predictions in agent_predict.c, the jobs' method state in agent_jobs.c
 * (agent_int.h). */
#include "client/agent_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/net/codec.h"

#define FED "/fedkern.v1.Federation/"

typedef struct callctx {
    fk_agent *a;
    uint64_t gen;
    uint8_t *req;
    int kind;
} callctx;

/* ----------------------------------------------------------- helpers */

double fk__agent_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Start a call (takes req). FK_OK when `done` will run, also for a call that cannot start
 * (it reports through done); FK_ENOMEM when nothing was started, so the caller must arrange
 * the retry itself or the agent would wait for a completion that never comes. */
int fk__agent_call(fk_agent *a, int kind, const char *method, uint8_t *req, size_t len,
                   uint64_t timeout_ms, fk_grpc_done done, fk_err *err)
{
    callctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(req);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for the call", method);
    }
    /* next() starts a call only on an idle connection, the heartbeat timer only when none is
     * in flight, and Leave once: a second call of a kind would lose the first's completion. */
    assert(kind == FK__AGENT_CALL_HB      ? !a->hb_in_flight
           : kind == FK__AGENT_CALL_LEAVE ? !a->leaving
                                          : !a->in_flight);
    *c = (callctx){.a = a, .gen = a->gen, .req = req, .kind = kind};
    if (kind == FK__AGENT_CALL_HB)
        a->hb_in_flight = 1;
    else if (kind == FK__AGENT_CALL_LEAVE)
        a->leaving = 1;
    else
        a->in_flight = 1;
    char path[96];
    snprintf(path, sizeof path, FED "%s", method);
    /* A call that cannot start still reports through done, which frees req and c. */
    (void)fk_grpc_client_call(a->cl, path, req, len, timeout_ms, done, c);
    return FK_OK;
}

/* Common start of a completion (frees the call context ud): the agent if the
 * caller should handle it, NULL if not. */
fk_agent *fk__agent_completion(void *ud, int status, const char *msg)
{
    callctx *c = ud;
    fk_agent *a = c->a;
    int current = c->gen == a->gen;
    if (current) {
        if (c->kind == FK__AGENT_CALL_HB)
            a->hb_in_flight = 0;
        else
            a->in_flight = 0;
    }
    free(c->req);
    free(c);
    if (!current || a->stopping)
        return NULL;
    if (status == FK_GRPC_UNAVAILABLE || status == FK_GRPC_CANCELLED) {
        fk__agent_request_disconnect(a, msg && *msg ? msg : "call failed");
        return NULL;
    }
    return a;
}

/* The server answered FAILED_PRECONDITION: our session is unknown to it (it restarted, or the
 * session expired). Join again on the same connection; work in progress is kept. */
void fk__agent_session_lost(fk_agent *a, const char *rpc)
{
    fk_log(FK_LOG_INFO, "session_lost", "rpc=%s action=\"join again\"", rpc);
    a->joined = 0;
    fk__agent_next(a);
}

/* -------------------------------------------------------- connection */

static void on_retry(uv_timer_t *t);

static void schedule_reconnect(fk_agent *a)
{
    uint64_t cap = a->cfg.backoff_min_ms << (a->backoff_n < 16 ? a->backoff_n : 16);
    if (cap > a->cfg.backoff_max_ms)
        cap = a->cfg.backoff_max_ms;
    uint64_t delay = fk_rng_below(&a->jitter, cap + 1); /* full jitter */
    a->backoff_n++;
    fk_log(FK_LOG_INFO, "reconnect_scheduled", "delay_ms=%" PRIu64 " attempt=%u", delay,
           a->backoff_n);
    FK_UV_MUST(uv_timer_start(&a->retry, on_retry, delay, 0));
}

static void client_closed(void *ud)
{
    fk_agent *a = ud;
    a->closing_client = 0;
    a->handles--;
    if (a->stopping)
        fk__agent_maybe_finish_stop(a);
    else
        schedule_reconnect(a);
}

static void disconnect(fk_agent *a, const char *why)
{
    if (!a->cl)
        return;
    fk_log(FK_LOG_WARN, "disconnected", "server=%s:%d reason=\"%s\"", a->cfg.host, a->cfg.port,
           why);
    a->gen++;
    a->up = a->joined = a->in_flight = a->hb_in_flight = 0;
    a->stats.reconnects++;
    if (a->w.ready && a->w.chunked)
        a->w.probe_first = 1;
    fk_grpc_client *cl = a->cl;
    a->cl = NULL;
    a->closing_client = 1;
    fk_grpc_client_close(cl, client_closed, a);
}

/* The client must not be closed from inside its own callbacks: the retry
 * timer does it on the next loop turn. */
void fk__agent_request_disconnect(fk_agent *a, const char *why)
{
    if (!a->cl || a->stopping)
        return;
    if (a->up)
        fk_log(FK_LOG_WARN, "connection_dropped", "server=%s:%d reason=\"%s\"", a->cfg.host,
               a->cfg.port, why);
    a->up = 0;
    FK_UV_MUST(uv_timer_stop(&a->retry));
    FK_UV_MUST(uv_timer_start(&a->retry, on_retry, 0, 0));
}

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    fk_agent *a = ud;
    if (cl != a->cl)
        return;
    if (up) {
        a->up = 1;
        a->stats.connects++;
        fk__agent_next(a);
    } else {
        fk__agent_request_disconnect(a, why);
    }
}

/* The connection's stall detection follows the heartbeat interval I: a PING after I/2 of
 * silence (and at least every I, for a round-trip sample), and the connection counts as
 * stalled when a PING has had no answer (nor any other byte) for max(I, 4 round trips as
 * measured): about 1.5 I after the last byte on a fast link. The server ends a session only
 * after 3 I without a call, without a byte on the client's connections (those PINGs count,
 * also when stuck behind a damaged TLS record) and since its last connection closed, so the
 * client reconnects and rejoins before it is taken for gone; on a link whose round trip
 * exceeds the interval (latency) the deadline grows with it instead of cutting a slow but
 * live connection (fault scenarios 'corrupt', 'stall' and 'latency500'). A PING the server
 * answers late (a busy loop) costs a reconnect, never the session. */
static void set_liveness(fk_agent *a)
{
    if (a->cl)
        fk_grpc_client_liveness(a->cl, a->heartbeat_ms / 2, a->heartbeat_ms);
}

static void connect_now(fk_agent *a)
{
    fk_grpc_client_config gc = {.limits = a->cfg.limits, .tls = a->cfg.tls};
    fk_err err = {0};
    a->handles++;
    if (fk_grpc_client_connect(&a->cl, a->loop, &gc, a->cfg.host, a->cfg.port, a->cfg.server_name,
                               on_state, a, &err)) {
        a->handles--;
        a->cl = NULL;
        fk_log(FK_LOG_WARN, "connect_failed", "error=\"%s\"", err.msg);
        schedule_reconnect(a);
        return;
    }
    set_liveness(a);
}

static void on_retry(uv_timer_t *t)
{
    fk_agent *a = t->data;
    if (a->stopping)
        return;
    if (a->cl && !a->up) {
        disconnect(a, "connection lost");
        return;
    }
    if (!a->cl) {
        if (!a->closing_client)
            connect_now(a);
        return;
    }
    fk__agent_next(a); /* a pause after a failed task, or the server's retry_after_ms */
}

/* Poll again after ms (the server's retry_after_ms). */
void fk__agent_retry_in(fk_agent *a, uint64_t ms)
{
    FK_UV_MUST(uv_timer_start(&a->retry, on_retry, ms, 0));
}

/* After a task this client could not do: poll again later, the longer the more
 * tasks failed in a row (half fixed, half jitter), so a client that cannot work
 * does not spin. */
void fk__agent_pause_polling(fk_agent *a)
{
    uint64_t cap = a->cfg.backoff_min_ms << (a->fail_n < 16 ? a->fail_n : 16);
    if (cap > a->cfg.backoff_max_ms)
        cap = a->cfg.backoff_max_ms;
    uint64_t delay = cap / 2 + fk_rng_below(&a->jitter, cap / 2 + 1);
    fk_log(FK_LOG_INFO, "task_backoff", "delay_ms=%" PRIu64 " failed_in_a_row=%u", delay,
           a->fail_n);
    FK_UV_MUST(uv_timer_start(&a->retry, on_retry, delay, 0));
}

/* A call that could not be encoded or started: nothing is in flight, so nothing would ever
 * call fk__agent_next(); try again after a pause instead of stalling. */
void fk__agent_not_sent(fk_agent *a, const char *what, const fk_err *err)
{
    fk_log(FK_LOG_ERROR, "call_not_sent", "call=%s error=\"%s\"", what, err->msg);
    fk__agent_pause_polling(a);
}

/* Deadline of a Heartbeat, which the server answers at once: a
 * connection that carries neither within it is stalled (e.g. a damaged TLS
 * record length leaves a peer waiting for bytes that never come), and waiting
 * call_ms on it would miss the phase deadlines. */
static uint64_t control_ms(const fk_agent *a)
{
    uint64_t ms = 4 * (uint64_t)a->heartbeat_ms;
    if (ms < 5000)
        ms = 5000;
    return ms < a->cfg.call_ms ? ms : a->cfg.call_ms;
}

/* -------------------------------------------------------------- join */

static void join_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = fk__agent_completion(ud, status, msg);
    if (!a)
        return;
    fedkern_v1_JoinResponse out;
    fk_err err = {0};
    if (status != FK_GRPC_OK ||
        fk_codec_decode(fedkern_v1_JoinResponse_fields, &out, resp, len, &err)) {
        fk_log(FK_LOG_ERROR, "join_refused", "status=%s message=\"%s\"",
               fk_grpc_status_name(status), status == FK_GRPC_OK ? err.msg : msg);
        fk__agent_request_disconnect(a, "join refused");
        return;
    }
    snprintf(a->client_id, sizeof a->client_id, "%s", out.client_id);
    snprintf(a->session_id, sizeof a->session_id, "%s", out.session_id);
    a->heartbeat_ms = out.heartbeat_interval_ms ? out.heartbeat_interval_ms : 5000;
    set_liveness(a);
    a->max_message = out.max_message_size ? out.max_message_size : (4u << 20);
    if (a->max_message > a->cfg.limits.max_message)
        a->max_message = (uint32_t)a->cfg.limits.max_message;
    fk_codec_release(fedkern_v1_JoinResponse_fields, &out);
    a->joined = 1;
    a->backoff_n = 0;
    a->stats.joins++;
    fk_log(FK_LOG_INFO, "joined", "server=%s:%d identity=%s heartbeat_ms=%u", a->cfg.host,
           a->cfg.port, a->client_id, a->heartbeat_ms);
    if (a->cfg.state_dir && !a->reloaded) {
        a->reloaded = 1;
        fk__agent_reload_held(a);
    }
    fk__agent_next(a);
}

static void send_join(fk_agent *a)
{
    fedkern_v1_JoinRequest in = fedkern_v1_JoinRequest_init_zero;
    in.protocol_version = 1;
    snprintf(in.software, sizeof in.software, "fedkern-client %s", FK_VERSION);
    /* the data sets it holds, so the server can refuse jobs this client cannot run */
    in.datasets_listed = a->cfg.datasets_listed != 0;
    for (int i = 0; in.datasets_listed && i < a->cfg.n_datasets && i < FK_AGENT_MAX_DATASETS; i++) {
        const fk_agent_dataset *d = &a->cfg.datasets[i];
        fedkern_v1_DataSetInfo *o = &in.datasets[in.datasets_count++];
        snprintf(o->name, sizeof o->name, "%s", d->name);
        o->rows = d->rows;
        o->cols = d->cols;
        o->classes = d->classes;
        o->prep_listed = d->prep_listed != 0;
        for (int k = 0; o->prep_listed && k < d->n_prep && k < 8; k++)
            o->prep[o->prep_count++] = (uint32_t)d->prep[k];
        if (o->prep_listed && d->affine_d) { /* borrowed: encoded below, never freed */
            o->affine_shift = (double *)d->affine_shift;
            o->affine_scale = (double *)d->affine_scale;
            o->affine_shift_count = o->affine_scale_count = (pb_size_t)d->affine_d;
        }
    }
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    /* answered at once, like a heartbeat, but before the heartbeat interval is known */
    if (fk_codec_encode(fedkern_v1_JoinRequest_fields, &in, 0, &buf, &len, &err) ||
        fk__agent_call(a, FK__AGENT_CALL_JOIN, "Join", buf, len,
                       a->cfg.call_ms < 10000 ? a->cfg.call_ms : 10000, join_done, &err))
        fk__agent_not_sent(a, "Join", &err);
}

/* ----------------------------------------------------------- heartbeat */

static void hb_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = fk__agent_completion(ud, status, msg);
    if (!a)
        return;
    if (status == FK_GRPC_FAILED_PRECONDITION || status == FK_GRPC_NOT_FOUND) {
        /* the server forgot our session (restart, expiry): join again (NOT_FOUND: servers
         * before 0.5 answered an unknown session so) */
        fk__agent_session_lost(a, "Heartbeat");
        return;
    }
    if (status == FK_GRPC_DEADLINE_EXCEEDED) {
        fk__agent_request_disconnect(a, "heartbeat not answered: connection stalled");
        return;
    }
    if (status != FK_GRPC_OK)
        return;
    fedkern_v1_HeartbeatResponse out;
    fk_err err = {0};
    if (fk_codec_decode(fedkern_v1_HeartbeatResponse_fields, &out, resp, len, &err))
        return;
    if (out.cancel_task && a->w.running) {
        fk__agent_cancel_step(a);
    }
    if (out.heartbeat_interval_ms && out.heartbeat_interval_ms != a->heartbeat_ms) {
        a->heartbeat_ms = out.heartbeat_interval_ms;
        set_liveness(a);
    }
    fk_codec_release(fedkern_v1_HeartbeatResponse_fields, &out);
}

static void on_hb(uv_timer_t *t)
{
    fk_agent *a = t->data;
    if (!a->joined || a->hb_in_flight || a->stopping)
        return;
    fedkern_v1_HeartbeatRequest in = fedkern_v1_HeartbeatRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    if (a->w.running) {
        snprintf(in.job_id, sizeof in.job_id, "%s", a->w.task_id);
        in.round = a->w.round;
        in.phase = a->w.phase;
    }
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    /* The heartbeat timer repeats, so a heartbeat not sent is only logged. */
    if (fk_codec_encode(fedkern_v1_HeartbeatRequest_fields, &in, 0, &buf, &len, &err) ||
        fk__agent_call(a, FK__AGENT_CALL_HB, "Heartbeat", buf, len, control_ms(a), hb_done, &err)) {
        fk_log(FK_LOG_WARN, "call_not_sent", "call=Heartbeat error=\"%s\"", err.msg);
        return;
    }
    a->stats.heartbeats++;
    uv_timer_set_repeat(&a->hb, a->heartbeat_ms);
}

/* ---------------------------------------------------------------- main */

/* Decide the next call on an idle connection. */
void fk__agent_next(fk_agent *a)
{
    if (a->stopping || !a->cl || !a->up || a->in_flight)
        return;
    if (!a->joined) {
        send_join(a);
        return;
    }
    if (!uv_is_active((uv_handle_t *)&a->hb))
        FK_UV_MUST(uv_timer_start(&a->hb, on_hb, a->heartbeat_ms, a->heartbeat_ms));
    if (a->p.running)
        return; /* a prediction on the thread pool: its answer goes first */
    if (a->p.ready)
        fk__agent_send_predict_answer(a);
    else if (a->w.ready)
        fk__agent_send_push(a);
    else if (!a->w.running && !a->w.active)
        fk__agent_send_pull(a, NULL, 0, 0, 0);
}

int fk_agent_start(fk_agent **out, uv_loop_t *loop, const fk_agent_config *cfg, fk_err *err)
{
    *out = NULL;
    if (!cfg->data || !cfg->tls || !cfg->host)
        return fk_err_set(err, FK_EINVAL, "agent needs a server address, TLS and data");
    fk_agent *a = calloc(1, sizeof *a);
    if (!a)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the agent");
    a->loop = loop;
    a->cfg = *cfg;
    if (!a->cfg.backoff_min_ms)
        a->cfg.backoff_min_ms = 200;
    if (!a->cfg.backoff_max_ms)
        a->cfg.backoff_max_ms = 15000;
    if (!a->cfg.poll_ms)
        a->cfg.poll_ms = 20000;
    if (!a->cfg.call_ms)
        a->cfg.call_ms = 30000;
    if (!a->cfg.limits.max_message)
        fk_net_limits_default(&a->cfg.limits);
    fk_tls_ctx_ref(a->cfg.tls);
    a->heartbeat_ms = 5000;
    a->max_message = 4u << 20;
    fk_rng_init(&a->jitter, (uint64_t)time(NULL) ^ (uint64_t)getpid(), (uint64_t)(uintptr_t)a);
    fk__agent_work_reset(&a->w);
    fk__agent_pwork_reset(&a->p);
    FK_UV_MUST(uv_timer_init(loop, &a->retry));
    FK_UV_MUST(uv_timer_init(loop, &a->hb));
    a->retry.data = a->hb.data = a;
    a->handles += 2;
    connect_now(a);
    *out = a;
    return FK_OK;
}

static void timer_closed(uv_handle_t *h)
{
    fk_agent *a = h->data;
    a->handles--;
    fk__agent_maybe_finish_stop(a);
}

void fk__agent_maybe_finish_stop(fk_agent *a)
{
    if (!a->stopping)
        return;
    if (a->cl && !a->closing_client && !a->in_flight && !a->leaving) {
        fk_grpc_client *cl = a->cl;
        a->cl = NULL;
        a->closing_client = 1;
        fk_grpc_client_close(cl, client_closed, a);
        return;
    }
    if (a->handles > 0)
        return;
    assert(!a->w.running && !a->p.running); /* each holds a handle until its done callback */
    for (int i = 0; i < a->n_jobs; i++)
        fk__agent_job_free(a->jobs[i]);
    fk__agent_work_reset(&a->w);
    fk__agent_pwork_reset(&a->p);
    fk_tls_ctx_unref(a->cfg.tls);
    void (*cb)(void *) = a->on_stopped;
    void *ud = a->stopped_ud;
    free(a);
    if (cb)
        cb(ud);
}

static void leave_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    (void)status;
    (void)msg;
    (void)resp;
    (void)len;
    callctx *c = ud;
    fk_agent *a = c->a;
    a->leaving = 0;
    free(c->req);
    free(c);
    fk__agent_maybe_finish_stop(a);
}

void fk_agent_stop(fk_agent *a, void (*on_stopped)(void *ud), void *ud)
{
    if (a->stopping)
        return;
    a->on_stopped = on_stopped;
    a->stopped_ud = ud;
    if (a->w.running) {
        fk__agent_cancel_step(a);
    }
    /* Leave also while a call is in flight (a long poll, mostly): the server ends the session
     * at once instead of noticing 3 missed heartbeats later; the pending call is cancelled
     * when the client closes, after Leave's answer. */
    int can_leave = a->cl && a->up && a->joined;
    if (can_leave)
        a->in_flight = 0; /* the pending call is not waited for: the close cancels it */
    a->stopping = 1;
    FK_UV_MUST(uv_timer_stop(&a->retry));
    FK_UV_MUST(uv_timer_stop(&a->hb));
    uv_close((uv_handle_t *)&a->retry, timer_closed);
    uv_close((uv_handle_t *)&a->hb, timer_closed);
    if (can_leave) {
        fedkern_v1_LeaveRequest in = fedkern_v1_LeaveRequest_init_zero;
        snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
        snprintf(in.reason, sizeof in.reason, "stopping");
        uint8_t *buf;
        size_t len;
        fk_err err = {0};
        if (fk_codec_encode(fedkern_v1_LeaveRequest_fields, &in, 0, &buf, &len, &err) == FK_OK &&
            fk__agent_call(a, FK__AGENT_CALL_LEAVE, "Leave", buf, len, 2000, leave_done, &err) ==
                FK_OK)
            return; /* leave_done finishes */
        fk_log(FK_LOG_WARN, "call_not_sent", "call=Leave error=\"%s\"", err.msg);
    }
    if (a->in_flight) /* a pending call completes (or is cancelled) when the client closes */
        a->in_flight = 0;
    fk__agent_maybe_finish_stop(a);
}

void fk_agent_stats_get(const fk_agent *a, fk_agent_stats *out)
{
    *out = a->stats;
    out->joined = a->joined;
}
