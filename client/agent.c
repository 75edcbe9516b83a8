#include "client/agent.h"
#include "client/cstate.h"

#include <inttypes.h>
#include <math.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/la/rng.h"
#include "common/methods/jobconf.h"
#include "common/net/chunk.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "fedkern.pb.h"

#define FED "/fedkern.v1.Federation/"

enum { MAX_JOBS = 8 };

/* Method state of one job on this client. */
typedef struct jobctx {
    int64_t job;
    char *config;
    fk_params params;
    const fk_method *m;
    void *cli;
    int client, n_clients;
    uint8_t digest[32]; /* names the job in its state file */
    fk_cstate saved;    /* restored from disk: the update of the last step before the restart */
    int has_saved;
} jobctx;

/* The task being fetched or run, then the update being sent. */
typedef struct work {
    int active;        /* a task is held (fetching, running or pushing) */
    char task_id[64];  /* "JOB.ATTEMPT" as the server sent it */
    int64_t job;
    uint32_t round, phase;
    fk_reasm reasm;    /* chunked task */
    fk_bundle task;
    jobctx *ctx;
    /* the step on the thread pool */
    int running, cancelled;
    uv_work_t req;
    int step_rc;
    fk_err step_err;
    fk_bundle update;
    fk_report report;
    double seconds;
    int save_rc;       /* the state file could not be written */
    fk_err save_err;
    int from_disk;     /* the update is the restored one: no step runs */
    /* the update */
    int ready;         /* update encoded, not yet committed */
    char update_id[64];
    uint8_t *blob;
    size_t blob_len;
    int chunked;
    fk_chunker chunker;
    uint32_t next_chunk;
    int probe_first;   /* after a reconnect: ask the server what it holds */
    int failure;       /* the update is a failure report: report.error, no payload */
    char error[256];
} work;

/* A prediction task of a finished job (TASK_PREDICT): one at a time, while the agent is
 * otherwise idle; answered from the job's kept method state, never stored. */
typedef struct pwork {
    int running, ready;
    uv_work_t req;
    jobctx *ctx;
    int64_t job;
    uint64_t id;
    fk_bundle q, ans;
    int rc;
    fk_err err;
    double seconds;
} pwork;

struct fk_agent {
    uv_loop_t *loop;
    fk_agent_config cfg;
    fk_grpc_client *cl;
    uint64_t gen;      /* connection generation: stale completions are ignored */
    int up, joined, in_flight, hb_in_flight;
    int leaving; /* the Leave call of a stop is in flight: the client closes after it */
    char client_id[128];
    char session_id[64];
    uint32_t heartbeat_ms, max_message;
    uv_timer_t retry, hb;
    unsigned backoff_n;
    unsigned fail_n;   /* tasks failed in a row: the pause after a failure grows with it */
    fk_rng jitter;
    jobctx *jobs[MAX_JOBS]; /* oldest first */
    int n_jobs;
    work w;
    pwork p;
    fk_agent_stats stats;
    int stopping, closing_client, handles;
    int reloaded; /* the held models of ended jobs were rebuilt from the state dir */
    void (*on_stopped)(void *);
    void *stopped_ud;
};

typedef struct callctx {
    fk_agent *a;
    uint64_t gen;
    uint8_t *req;
    int kind;
} callctx;

enum { CALL_JOIN, CALL_PULL, CALL_PUSH, CALL_HB, CALL_LEAVE };

static void next(fk_agent *a);
static void request_disconnect(fk_agent *a, const char *why);
static void maybe_finish_stop(fk_agent *a);
static void reload_held(fk_agent *a);

/* ------------------------------------------------------------ helpers */

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void jobctx_free(jobctx *j)
{
    if (!j)
        return;
    if (j->cli)
        j->m->client_close(j->cli);
    fk_cstate_close(&j->saved);
    fk_params_close(&j->params);
    free(j->config);
    free(j);
}

static void work_reset(work *w)
{
    fk_reasm_close(&w->reasm);
    fk_bundle_close(&w->task);
    fk_bundle_close(&w->update);
    free(w->blob);
    memset(w, 0, sizeof *w);
    fk_bundle_init(&w->task);
    fk_bundle_init(&w->update);
}

/* Start a call (takes req). FK_OK when `done` will run, also for a call that cannot start
 * (it reports through done); FK_ENOMEM when nothing was started, so the caller must arrange
 * the retry itself or the agent would wait for a completion that never comes. */
FK_CHECKRETURN static int call(fk_agent *a, int kind, const char *method, uint8_t *req, size_t len,
                uint64_t timeout_ms, fk_grpc_done done, fk_err *err)
{
    callctx *c = calloc(1, sizeof *c);
    if (!c) {
        free(req);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for the call", method);
    }
    *c = (callctx){.a = a, .gen = a->gen, .req = req, .kind = kind};
    if (kind == CALL_HB)
        a->hb_in_flight = 1;
    else if (kind == CALL_LEAVE)
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
static fk_agent *completion(void *ud, int status, const char *msg)
{
    callctx *c = ud;
    fk_agent *a = c->a;
    int current = c->gen == a->gen;
    if (current) {
        if (c->kind == CALL_HB)
            a->hb_in_flight = 0;
        else
            a->in_flight = 0;
    }
    free(c->req);
    free(c);
    if (!current || a->stopping)
        return NULL;
    if (status == FK_GRPC_UNAVAILABLE || status == FK_GRPC_CANCELLED) {
        request_disconnect(a, msg && *msg ? msg : "call failed");
        return NULL;
    }
    return a;
}

/* The server answered FAILED_PRECONDITION: our session is unknown to it (it restarted, or the
 * session expired). Join again on the same connection; work in progress is kept. */
static void session_lost(fk_agent *a, const char *rpc)
{
    fk_log(FK_LOG_INFO, "session_lost", "rpc=%s action=\"join again\"", rpc);
    a->joined = 0;
    next(a);
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
        maybe_finish_stop(a);
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
static void request_disconnect(fk_agent *a, const char *why)
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
        next(a);
    } else {
        request_disconnect(a, why);
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
    if (fk_grpc_client_connect(&a->cl, a->loop, &gc, a->cfg.host, a->cfg.port,
                               a->cfg.server_name, on_state, a, &err)) {
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
    next(a); /* a pause after a failed task, or the server's retry_after_ms */
}

/* After a task this client could not do: poll again later, the longer the more
 * tasks failed in a row (half fixed, half jitter), so a client that cannot work
 * does not spin. */
static void pause_polling(fk_agent *a)
{
    uint64_t cap = a->cfg.backoff_min_ms << (a->fail_n < 16 ? a->fail_n : 16);
    if (cap > a->cfg.backoff_max_ms)
        cap = a->cfg.backoff_max_ms;
    uint64_t delay = cap / 2 + fk_rng_below(&a->jitter, cap / 2 + 1);
    fk_log(FK_LOG_INFO, "task_backoff", "delay_ms=%" PRIu64 " failed_in_a_row=%u", delay, a->fail_n);
    FK_UV_MUST(uv_timer_start(&a->retry, on_retry, delay, 0));
}

/* A call that could not be encoded or started: nothing is in flight, so nothing would ever
 * call next(); try again after a pause instead of stalling. */
static void not_sent(fk_agent *a, const char *what, const fk_err *err)
{
    fk_log(FK_LOG_ERROR, "call_not_sent", "call=%s error=\"%s\"", what, err->msg);
    pause_polling(a);
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
    fk_agent *a = completion(ud, status, msg);
    if (!a)
        return;
    fedkern_v1_JoinResponse out;
    fk_err err = {0};
    if (status != FK_GRPC_OK ||
        fk_codec_decode(fedkern_v1_JoinResponse_fields, &out, resp, len, &err)) {
        fk_log(FK_LOG_ERROR, "join_refused", "status=%s message=\"%s\"",
               fk_grpc_status_name(status), status == FK_GRPC_OK ? err.msg : msg);
        request_disconnect(a, "join refused");
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
        reload_held(a);
    }
    next(a);
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
        call(a, CALL_JOIN, "Join", buf, len, a->cfg.call_ms < 10000 ? a->cfg.call_ms : 10000,
             join_done, &err))
        not_sent(a, "Join", &err);
}

/* -------------------------------------------------------------- tasks */

/* Cancel the running step. UV_EBUSY (it runs already) is the usual answer: step_done then
 * sees `cancelled` and drops the result. */
static void cancel_step(fk_agent *a)
{
    a->w.cancelled = 1;
    int rc = uv_cancel((uv_req_t *)&a->w.req);
    if (rc && rc != UV_EBUSY)
        fk_log(FK_LOG_ERROR, "libuv_failed", "call=uv_cancel error=\"%s\"", uv_strerror(rc));
}

/* A state file that cannot be removed is stale; say so (a later load refuses it anyway). */
static void remove_state(const char *dir, int64_t job)
{
    fk_err err = {0};
    if (fk_cstate_remove(dir, job, &err))
        fk_log(FK_LOG_WARN, "client_state_not_removed", "job=%" PRId64 " error=\"%s\"", job,
               err.msg);
}

/* The job's state file, if this client has one: the method state of its last
 * step (and that step's update, for a resend). 1 if the method state may be
 * half-loaded and must be built again; a file that is unusable is removed. */
static int restore(fk_agent *a, jobctx *j)
{
    fk_cstate cs;
    fk_cstate_init(&cs);
    fk_err e = {0};
    int rc = fk_cstate_read(a->cfg.state_dir, j->job, &cs, &e), touched = 0;
    if (rc == FK_ENOTFOUND) {
        fk_cstate_close(&cs);
        return 0;
    }
    if (!rc && (memcmp(cs.digest, j->digest, 32) != 0 || cs.client != (uint32_t)j->client))
        rc = fk_err_set(&e, FK_ESTATE, "the file belongs to another job %" PRId64
                        " (other method, configuration or client index)", j->job);
    if (!rc) {
        touched = 1;
        rc = j->m->client_load(j->cli, &cs.state, &e);
    }
    if (rc) {
        fk_log(FK_LOG_WARN, "client_state_discarded", "job=%" PRId64 " error=\"%s\"", j->job,
               e.msg);
        remove_state(a->cfg.state_dir, j->job);
        fk_cstate_close(&cs);
        return touched;
    }
    fk_log(FK_LOG_INFO, "client_state_restored",
           "job=%" PRId64 " round=%" PRIu32 " phase=%" PRIu32 " task=%s pending_update=%d",
           j->job, cs.round, cs.phase, cs.task_id, cs.update_id[0] != '\0');
    fk_cstate_close(&j->saved);
    j->saved = cs;
    j->has_saved = cs.update_id[0] != '\0';
    return 0;
}

const fk_param_doc fk_agent_local_docs[] = {
    {"local.allow_raw_upload BOOL", "true consents to sfl jobs (raw_sample_upload = acknowledged) "
                                    "uploading raw rows of this client's data (false)"},
    {"local.max_upload_fraction F", "caps that upload at this fraction of the client's rows, "
                                    "(0, 1] (1)"},
    {"local.allow_model_upload BOOL", "true consents to kahm jobs (upload_models = 1) uploading "
                                      "models that contain the training samples (false)"},
    {NULL, NULL},
};

FK_CHECKRETURN int fk_agent_local_params(fk_params *job_params, const fk_params *local, int64_t job,
                          fk_err *err)
{
    /* local.* keys speak for this client (consent, caps): only its own config sets them */
    for (int i = 0; i < job_params->count; i++)
        if (!strncmp(job_params->items[i].key, "local.", 6))
            return fk_err_set(err, FK_EINVAL,
                              "job %" PRId64 " sets '%s'; local.* keys belong to the client's "
                              "own config, not to a job (refused)",
                              job, job_params->items[i].key);
    for (int i = 0; local && i < local->count; i++)
        if (!strncmp(local->items[i].key, "local.", 6) &&
            fk_params_set(job_params, local->items[i].key, local->items[i].value))
            return fk_err_set(err, FK_ENOMEM, "out of memory");
    return FK_OK;
}

static jobctx *job_context(fk_agent *a, int64_t job, const char *method, const char *config,
                           fk_err *err)
{
    for (int i = 0; i < a->n_jobs; i++)
        if (a->jobs[i]->job == job)
            return a->jobs[i];
    if (a->n_jobs == MAX_JOBS) { /* forget the oldest job */
        jobctx_free(a->jobs[0]);
        memmove(&a->jobs[0], &a->jobs[1], (MAX_JOBS - 1) * sizeof a->jobs[0]);
        a->n_jobs--;
    }
    jobctx *j = calloc(1, sizeof *j);
    if (!j) {
        fk_err_set(err, FK_ENOMEM, "out of memory");
        return NULL;
    }
    fk_params_init(&j->params);
    j->job = job;
    j->config = strdup(config ? config : "");
    const fk_method *m = (a->cfg.find ? a->cfg.find : fk_method_find)(method, err);
    int rc = !j->config ? fk_err_set(err, FK_ENOMEM, "out of memory")
             : !m       ? FK_ENOTFOUND
                        : fk_params_parse_ini(&j->params, j->config, "job parameters", err);
    if (!rc)
        rc = fk_agent_local_params(&j->params, a->cfg.local, job, err);
    /* Our index is our place in the job's client list, read as the server reads it. */
    int index = -1, n = 0;
    if (!rc) {
        fk_jobconf conf;
        rc = fk_jobconf_parse(&conf, j->config, "job parameters", err);
        if (!rc) {
            index = fk_jobconf_client_index(&conf, a->client_id);
            n = conf.n_clients;
        }
        fk_jobconf_close(&conf);
    }
    if (!rc && index < 0)
        rc = fk_err_set(err, FK_ENOTFOUND, "job %" PRId64 " does not list this client ('%s')",
                        job, a->client_id);
    const char *dsname = rc ? NULL : fk_params_get(&j->params, "dataset");
    const fk_dataset *ds = NULL;
    if (!rc && !(ds = a->cfg.data(a->cfg.data_ud, dsname ? dsname : "", err)))
        rc = err->code ? err->code : FK_ENOTFOUND;
    uint64_t seed = 1;
    if (!rc)
        rc = fk_params_u64(&j->params, "seed", 1, &seed, err);
    if (!rc) {
        j->m = m;
        if ((rc = m->client_init(&j->cli, &j->params, ds, index, n, seed, err)))
            j->cli = NULL;
    }
    if (!rc)
        rc = fk_cstate_digest(m->name, j->config, j->digest, err);
    if (rc) {
        jobctx_free(j);
        return NULL;
    }
    j->client = index;
    j->n_clients = n;
    if (a->cfg.state_dir && restore(a, j)) { /* a failed load may leave it half-written */
        j->m->client_close(j->cli);
        j->cli = NULL;
        if ((rc = m->client_init(&j->cli, &j->params, ds, index, n, seed, err))) {
            j->cli = NULL;
            jobctx_free(j);
            return NULL;
        }
    }
    a->jobs[a->n_jobs++] = j;
    return j;
}

static int cmp_job(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* After a restart (the first Join, once the client knows its identity): rebuild from the
 * state dir every job whose models answer predictions after it ended (kahm mode B), so
 * they are kept (forget_ended_jobs) and answer as before the restart. Oldest job first:
 * past MAX_JOBS the newest ones stay, as without a restart. A file without the job's
 * method and config (version 1) is left to the task that names its job. */
static void reload_held(fk_agent *a)
{
    int64_t *ids;
    int n;
    fk_err err = {0};
    if (fk_cstate_list(a->cfg.state_dir, &ids, &n, &err)) {
        fk_log(FK_LOG_WARN, "client_state_unlisted", "error=\"%s\"", err.msg);
        return;
    }
    if (n > 1)
        qsort(ids, (size_t)n, sizeof *ids, cmp_job);
    for (int i = 0; i < n; i++) {
        int have = 0;
        for (int k = 0; k < a->n_jobs; k++)
            have |= a->jobs[k]->job == ids[i];
        fk_cstate cs;
        fk_cstate_init(&cs);
        if (have || fk_cstate_read(a->cfg.state_dir, ids[i], &cs, &err) || !cs.method) {
            fk_cstate_close(&cs);
            continue; /* an unreadable file is discarded when its job's task comes */
        }
        fk_err ferr = {0};
        const fk_method *m = (a->cfg.find ? a->cfg.find : fk_method_find)(cs.method, &ferr);
        int serves = m && m->client_predict;
        char *method = cs.method, *config = cs.config;
        cs.method = cs.config = NULL;
        fk_cstate_close(&cs); /* job_context reads the file again: one copy at a time */
        if (serves) {
            jobctx *j = job_context(a, ids[i], method, config, &err);
            if (j)
                fk_log(FK_LOG_INFO, "held_models_reloaded", "job=%" PRId64 " method=%s", ids[i],
                       method);
            else
                fk_log(FK_LOG_WARN, "held_models_not_reloaded", "job=%" PRId64 " error=\"%s\"",
                       ids[i], err.msg);
        }
        free(method);
        free(config);
    }
    free(ids);
}

static void new_update_id(char *out, size_t cap)
{
    unsigned char r[16];
    if (RAND_bytes(r, sizeof r) != 1) { /* fall back on time and pid: still unique enough */
        uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        memcpy(r, &t, sizeof t);
        memcpy(r + 8, &t, sizeof t);
    }
    size_t off = 0;
    for (size_t i = 0; i < sizeof r && off + 3 <= cap; i++)
        off += (size_t)snprintf(out + off, cap - off, "%02x", r[i]);
}

static fk_agent *agent_of(work *w)
{
    return (fk_agent *)((char *)w - offsetof(fk_agent, w));
}

/* On the thread pool, after the step: the method state and the update, in one
 * atomic file, before the update is sent. A file that cannot be written is
 * removed, so that a restart never continues from an older step. */
static void save_state(const char *dir, work *w)
{
    jobctx *j = w->ctx;
    fk_cstate cs;
    fk_cstate_init(&cs);
    cs.job = w->job;
    cs.client = (uint32_t)j->client;
    cs.round = w->round;
    cs.phase = w->phase;
    snprintf(cs.task_id, sizeof cs.task_id, "%s", w->task_id);
    snprintf(cs.update_id, sizeof cs.update_id, "%s", w->update_id);
    memcpy(cs.digest, j->digest, 32);
    double rep[5] = {w->report.n_samples, w->report.loss, w->report.accuracy, w->report.error,
                     w->seconds};
    memcpy(cs.report, rep, sizeof rep);
    cs.update = w->blob; /* borrowed, like the job's name and config just below */
    cs.update_len = w->blob_len;
    cs.method = (char *)j->m->name; /* a restart rebuilds the job from these (reload_held) */
    cs.config = j->config;
    fk_err_clear(&w->save_err);
    w->save_rc = j->m->client_save(j->cli, &cs.state, &w->save_err);
    if (!w->save_rc)
        w->save_rc = fk_cstate_write(dir, &cs, &w->save_err);
    if (w->save_rc)
        remove_state(dir, w->job);
    cs.update = NULL;
    cs.update_len = 0;
    cs.method = cs.config = NULL;
    fk_cstate_close(&cs);
}

static void step_run(uv_work_t *req)
{
    work *w = req->data;
    double t0 = mono();
    fk_report_init(&w->report);
    fk_err_clear(&w->step_err);
    w->step_rc = w->ctx->m->local_step(w->ctx->cli, &w->task, &w->update, &w->report,
                                       &w->step_err);
    w->seconds = mono() - t0;
    if (!w->step_rc)
        w->step_rc = fk_codec_bundle_encode(&w->update, &w->blob, &w->blob_len, &w->step_err);
    if (w->step_rc)
        return;
    new_update_id(w->update_id, sizeof w->update_id);
    const char *dir = agent_of(w)->cfg.state_dir; /* set before the loop runs: read-only */
    if (dir)
        save_state(dir, w);
}

/* The task cannot be done here: tell the server (it counts us as a dropout of
 * the phase and stops offering the task), then pause before the next poll. */
static void report_failure(fk_agent *a, const char *why)
{
    work *w = &a->w;
    fk_bundle_close(&w->update);
    fk_bundle_init(&w->update);
    free(w->blob);
    w->blob = NULL;
    w->blob_len = 0;
    w->chunked = 0;
    w->failure = 1;
    snprintf(w->error, sizeof w->error, "%s", why && *why ? why : "unknown error");
    fk_report_init(&w->report);
    new_update_id(w->update_id, sizeof w->update_id);
    w->ready = 1;
    a->fail_n++;
    next(a);
}

/* The update (w->blob) is ready: chunk it if needed and send it. */
static void update_ready(fk_agent *a)
{
    work *w = &a->w;
    fk_err err = {0};
    size_t room = fk_chunk_data_max(a->max_message, 0);
    w->chunked = w->blob_len > room;
    if (w->chunked && fk_chunker_init(&w->chunker, w->blob, w->blob_len, room, &err)) {
        fk_log(FK_LOG_ERROR, "update_not_chunked", "error=\"%s\"", err.msg);
        report_failure(a, err.msg);
        return;
    }
    w->ready = 1;
    fk_log(FK_LOG_INFO, "step_done", "job=%s round=%u phase=%u seconds=%.3f bytes=%zu%s",
           w->task_id, w->round, w->phase, w->seconds, w->blob_len,
           w->from_disk ? " restored=1" : "");
    next(a);
}

static void step_done(uv_work_t *req, int status)
{
    work *w = req->data;
    fk_agent *a = agent_of(w);
    w->running = 0;
    a->handles--;
    if (a->stopping) {
        work_reset(w);
        maybe_finish_stop(a);
        return;
    }
    if (status || w->cancelled) {
        fk_log(FK_LOG_INFO, "step_dropped", "job=%s round=%u reason=%s", w->task_id, w->round,
               w->cancelled ? "cancelled" : "error");
        work_reset(w);
        next(a);
        return;
    }
    if (w->step_rc) {
        fk_log(FK_LOG_ERROR, "step_failed", "job=%s round=%u phase=%u error=\"%s\"", w->task_id,
               w->round, w->phase, w->step_err.msg);
        report_failure(a, w->step_err.msg);
        return;
    }
    if (w->save_rc)
        fk_log(FK_LOG_WARN, "client_state_not_saved",
               "job=%s round=%u error=\"%s\" effect=\"a restart of this client loses the job's "
               "method state\"",
               w->task_id, w->round, w->save_err.msg);
    a->fail_n = 0;
    a->stats.steps++;
    a->stats.last_job = w->job;
    snprintf(a->stats.last_method, sizeof a->stats.last_method, "%s", w->ctx->m->name);
    a->stats.last_round = w->round;
    a->stats.last_seconds = w->seconds;
    a->stats.step_seconds_total += w->seconds;
    a->stats.last_report = w->report;
    update_ready(a);
}

static void start_step(fk_agent *a)
{
    work *w = &a->w;
    w->ctx = NULL;
    for (int i = 0; i < a->n_jobs; i++)
        if (a->jobs[i]->job == w->job)
            w->ctx = a->jobs[i];
    if (!w->ctx) {
        work_reset(w);
        return;
    }
    jobctx *j = w->ctx;
    if (j->has_saved) { /* the first task after a restart: is it the one we answered? */
        fk_cstate *sv = &j->saved;
        j->has_saved = 0;
        if (!strcmp(sv->task_id, w->task_id) && sv->round == w->round && sv->phase == w->phase) {
            w->blob = sv->update;
            w->blob_len = sv->update_len;
            sv->update = NULL;
            sv->update_len = 0;
            snprintf(w->update_id, sizeof w->update_id, "%s", sv->update_id);
            /* the state file keeps these four; the quality metrics are not kept (not measured) */
            fk_report_init(&w->report);
            w->report.n_samples = sv->report[0];
            w->report.loss = sv->report[1];
            w->report.accuracy = sv->report[2];
            w->report.error = sv->report[3];
            w->seconds = sv->report[4];
            w->from_disk = 1;
            fk_cstate_close(sv);
            fk_err err = {0}; /* an inline push sends the bundle, a chunked one the bytes: keep both */
            fk_bundle_close(&w->update);
            fk_bundle_init(&w->update);
            if (fk_codec_bundle_decode(w->blob, w->blob_len, &w->update, &err)) {
                fk_log(FK_LOG_ERROR, "update_not_restored", "job=%s error=\"%s\"", w->task_id,
                       err.msg);
                report_failure(a, err.msg);
                return;
            }
            fk_log(FK_LOG_INFO, "update_restored", "job=%s round=%u phase=%u update=%s", w->task_id,
                   w->round, w->phase, w->update_id);
            a->fail_n = 0;
            update_ready(a);
            return;
        }
        fk_cstate_close(sv);
    }
    w->running = 1;
    w->req.data = w;
    a->handles++;
    if (uv_queue_work(a->loop, &w->req, step_run, step_done)) {
        a->handles--;
        w->running = 0;
        work_reset(w);
    }
}

static void send_pull(fk_agent *a, const char *task_id, uint32_t round, uint32_t phase,
                      uint32_t chunk);

static int listed(const fedkern_v1_PullTaskResponse *out, int64_t job)
{
    for (pb_size_t i = 0; i < out->running_jobs_count; i++)
        if (strtoll(out->running_jobs[i], NULL, 10) == job)
            return 1;
    return 0;
}

/* The server listed the running jobs that include us: the method state of every
 * other job (in memory and its file) is no longer needed. */
static void forget_ended_jobs(fk_agent *a, const fedkern_v1_PullTaskResponse *out)
{
    int k = 0;
    for (int i = 0; i < a->n_jobs; i++) {
        jobctx *j = a->jobs[i];
        /* A job whose models serve predictions after it ended (kahm mode B) is kept, in
         * memory and on disk, until MAX_JOBS newer jobs push it out (job_context). */
        if (listed(out, j->job) || (a->w.active && a->w.job == j->job) ||
            (j->m && j->m->client_predict) || (a->p.running && a->p.ctx == j)) {
            a->jobs[k++] = j;
            continue;
        }
        fk_log(FK_LOG_INFO, "job_forgotten", "job=%" PRId64 " reason=\"the server no longer runs it\"",
               j->job);
        jobctx_free(j);
    }
    a->n_jobs = k;
    if (!a->cfg.state_dir)
        return;
    int64_t *ids;
    int n;
    fk_err err = {0};
    if (fk_cstate_list(a->cfg.state_dir, &ids, &n, &err)) {
        fk_log(FK_LOG_WARN, "client_state_unlisted", "error=\"%s\"", err.msg);
        return;
    }
    for (int i = 0; i < n; i++) {
        int kept = 0;
        for (int j = 0; j < a->n_jobs; j++)
            kept |= a->jobs[j]->job == ids[i];
        if (listed(out, ids[i]) || (a->w.active && a->w.job == ids[i]) || kept)
            continue;
        if (fk_cstate_remove(a->cfg.state_dir, ids[i], &err))
            fk_log(FK_LOG_WARN, "client_state_not_removed", "job=%" PRId64 " error=\"%s\"", ids[i],
                   err.msg);
        else
            fk_log(FK_LOG_INFO, "client_state_removed", "job=%" PRId64 " reason=\"job ended\"",
                   ids[i]);
    }
    free(ids);
}

/* ------------------------------------------------------- predictions */

static fk_agent *agent_of_p(pwork *p)
{
    return (fk_agent *)((char *)p - offsetof(fk_agent, p));
}

static void pwork_reset(pwork *p)
{
    fk_bundle_close(&p->q);
    fk_bundle_close(&p->ans);
    memset(p, 0, sizeof *p);
    fk_bundle_init(&p->q);
    fk_bundle_init(&p->ans);
}

static void predict_run(uv_work_t *req)
{
    pwork *p = req->data;
    double t0 = mono();
    fk_err_clear(&p->err);
    p->rc = p->ctx->m->client_predict(p->ctx->cli, &p->q, &p->ans, &p->err);
    p->seconds = mono() - t0;
}

static void predict_done(uv_work_t *req, int status)
{
    pwork *p = req->data;
    fk_agent *a = agent_of_p(p);
    p->running = 0;
    a->handles--;
    if (a->stopping) {
        pwork_reset(p);
        maybe_finish_stop(a);
        return;
    }
    if (status && !p->rc)
        p->rc = fk_err_set(&p->err, FK_ESTATE, "the prediction did not run");
    if (p->rc)
        fk_log(FK_LOG_WARN, "predict_failed", "job=%" PRId64 " request=%" PRIu64 " error=\"%s\"",
               p->job, p->id, p->err.msg);
    else
        fk_log(FK_LOG_INFO, "predict_done", "job=%" PRId64 " request=%" PRIu64 " seconds=%.3f",
               p->job, p->id, p->seconds);
    p->ready = 1;
    next(a);
}

/* A TASK_PREDICT: the job's method state (kept after the job ended, or rebuilt from the
 * state file) answers the queries on the thread pool; a job it cannot serve gets an error. */
static void start_predict(fk_agent *a, const fedkern_v1_PullTaskResponse *out, fk_bundle *q)
{
    pwork *p = &a->p;
    pwork_reset(p);
    p->job = strtoll(out->job_id, NULL, 10);
    p->id = out->predict_id;
    fk_bundle_close(&p->q);
    p->q = *q;
    fk_bundle_init(q);
    fk_err err = {0};
    jobctx *j = job_context(a, p->job, out->method, out->params, &err);
    if (!j) {
        p->rc = err.code ? err.code : FK_ESTATE;
        p->err = err;
    } else if (!j->m->client_predict) {
        p->rc = fk_err_set(&p->err, FK_EINVAL, "job type %s answers no predictions", j->m->name);
    }
    if (p->rc) {
        fk_log(FK_LOG_WARN, "predict_failed", "job=%" PRId64 " request=%" PRIu64 " error=\"%s\"",
               p->job, p->id, p->err.msg);
        p->ready = 1;
        return;
    }
    p->ctx = j;
    p->running = 1;
    p->req.data = p;
    a->handles++;
    if (uv_queue_work(a->loop, &p->req, predict_run, predict_done)) {
        a->handles--;
        p->running = 0;
        p->rc = fk_err_set(&p->err, FK_ESTATE, "the prediction could not be queued");
        p->ready = 1;
    }
}

static void predict_push_done(void *ud, int status, const char *msg, const uint8_t *resp,
                              size_t len)
{
    fk_agent *a = completion(ud, status, msg);
    if (!a)
        return;
    fedkern_v1_PushUpdateResponse out;
    fk_err err = {0};
    if (status == FK_GRPC_OK &&
        fk_codec_decode(fedkern_v1_PushUpdateResponse_fields, &out, resp, len, &err) == FK_OK) {
        fk_log(FK_LOG_DEBUG, "predict_answered", "job=%" PRId64 " request=%" PRIu64 " state=%d",
               a->p.job, a->p.id, (int)out.state);
        fk_codec_release(fedkern_v1_PushUpdateResponse_fields, &out);
    } else {
        fk_log(FK_LOG_WARN, "predict_answer_refused", "job=%" PRId64 " request=%" PRIu64
               " status=%s message=\"%s\"", a->p.job, a->p.id, fk_grpc_status_name(status), msg);
    }
    pwork_reset(&a->p); /* an answer is never resent: the request has a short deadline */
    if (status == FK_GRPC_FAILED_PRECONDITION)
        a->joined = 0; /* our session is gone: Join before the next call */
    next(a);
}

/* Send the answer (or why there is none) of the prediction task; never chunked. */
static void send_predict_answer(fk_agent *a)
{
    pwork *p = &a->p;
    fedkern_v1_PushUpdateRequest in = fedkern_v1_PushUpdateRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    snprintf(in.job_id, sizeof in.job_id, "%" PRId64, p->job);
    new_update_id(in.update_id, sizeof in.update_id);
    in.predict_id = p->id;
    fk_codec_tx tx = {0};
    fk_err err = {0};
    size_t size = 0;
    if (!p->rc && fk_codec_bundle_size(&p->ans, FK_DTYPE_F64, &size, &err))
        p->rc = err.code, p->err = err;
    if (!p->rc && size + 1024 > a->max_message)
        p->rc = fk_err_set(&p->err, FK_ELIMIT, "the answer (%zu bytes) does not fit one message "
                           "(%u bytes); ask with fewer queries", size, a->max_message);
    if (p->rc) {
        in.has_report = true;
        snprintf(in.report.error, sizeof in.report.error, "%s", p->err.msg);
    } else {
        tx.bundle = &p->ans;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    p->ready = 0;
    if (fk_codec_encode_push_update_request(&in, &tx, 0, &buf, &len, &err) ||
        call(a, CALL_PUSH, "PushUpdate", buf, len, a->cfg.call_ms, predict_push_done, &err)) {
        fk_log(FK_LOG_ERROR, "predict_answer_not_sent", "error=\"%s\"", err.msg);
        pwork_reset(p);
        pause_polling(a);
    }
}

/* The answer to a PullTask: nothing to do, a whole task, or one chunk of a large task. */
static void pull_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = completion(ud, status, msg);
    if (!a)
        return;
    work *w = &a->w;
    /* A long poll that timed out is the normal idle case: poll again. */
    if (status == FK_GRPC_DEADLINE_EXCEEDED) {
        next(a);
        return;
    }
    if (status == FK_GRPC_FAILED_PRECONDITION) {
        /* A half-received task is dropped: after the Join the next pull starts it over. */
        if (w->active && !w->running && !w->ready)
            work_reset(w);
        session_lost(a, "PullTask");
        return;
    }
    if (status != FK_GRPC_OK) {
        fk_log(FK_LOG_WARN, "pull_failed", "status=%s message=\"%s\"", fk_grpc_status_name(status),
               msg);
        request_disconnect(a, "PullTask failed");
        return;
    }
    /* An answer we cannot decode means a broken peer or stream: start over on a new connection. */
    fedkern_v1_PullTaskResponse out;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_codec_rx rx = {.bundle = &b};
    fk_err err = {0};
    if (fk_codec_decode_pull_task_response(resp, len, &out, &rx, &err)) {
        fk_log(FK_LOG_ERROR, "bad_task", "error=\"%s\"", err.msg);
        fk_bundle_close(&b);
        work_reset(w);
        request_disconnect(a, "undecodable task");
        return;
    }
    int rc = FK_OK;
    if (out.kind == fedkern_v1_TaskKind_TASK_PREDICT && !w->active) {
        start_predict(a, &out, &b); /* takes b */
        fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
        fk_bundle_close(&b);
        next(a);
        return;
    }
    if (out.kind != fedkern_v1_TaskKind_TASK_RUN) {
        if (w->active)
            work_reset(w); /* a chunked task that ended meanwhile */
    } else {
        int64_t job = strtoll(out.job_id, NULL, 10);
        /* A new task: remember its coordinates and make sure the job's method state exists. */
        if (!w->active) {
            a->stats.tasks++;
            w->active = 1;
            snprintf(w->task_id, sizeof w->task_id, "%s", out.job_id);
            w->job = job;
            w->round = out.round;
            w->phase = out.phase;
            fk_reasm_init(&w->reasm, (size_t)a->cfg.limits.max_conn_memory);
            if (!job_context(a, job, out.method, out.params, &err)) {
                fk_log(FK_LOG_ERROR, "task_refused", "job=%s error=\"%s\"", out.job_id, err.msg);
                rc = FK_EINVAL;
            }
        }
        /* The payload: a chunk goes to the reassembler (complete once all arrived), a whole
         * bundle becomes the task directly. */
        int complete = 0;
        if (!rc && rx.has_chunk) {
            rc = fk_reasm_add(&w->reasm, &out.chunk, rx.chunk_data, rx.chunk_len, &complete, &err);
            if (!rc && complete) {
                uint8_t *payload;
                size_t plen;
                rc = fk_reasm_take(&w->reasm, &payload, &plen, &err);
                if (!rc) {
                    rc = fk_codec_bundle_decode(payload, plen, &w->task, &err);
                    free(payload);
                }
            }
        } else if (!rc) {
            fk_bundle_close(&w->task);
            w->task = b;
            fk_bundle_init(&b);
            complete = 1;
        }
        /* Then: report a task we cannot take, run a complete one, or ask for the next chunk. */
        if (rc) {
            fk_log(FK_LOG_ERROR, "task_failed", "job=%s error=\"%s\"", w->task_id, err.msg);
            fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
            fk_bundle_close(&b);
            report_failure(a, err.msg);
            return;
        } else if (complete) {
            start_step(a);
        } else {
            uint32_t miss;
            fk_reasm_missing(&w->reasm, &miss, 1);
            fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
            fk_bundle_close(&b);
            send_pull(a, w->task_id, w->round, w->phase, miss);
            return;
        }
    }
    /* No task: the server's list of running jobs lets us drop state of ended ones, and its
     * retry_after_ms paces the next poll. */
    if (out.kind == fedkern_v1_TaskKind_TASK_NONE && out.running_jobs_listed)
        forget_ended_jobs(a, &out);
    fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
    fk_bundle_close(&b);
    if (out.kind == fedkern_v1_TaskKind_TASK_NONE && out.retry_after_ms) {
        FK_UV_MUST(uv_timer_start(&a->retry, on_retry, out.retry_after_ms, 0));
        return;
    }
    next(a);
}

static void send_pull(fk_agent *a, const char *task_id, uint32_t round, uint32_t phase,
                      uint32_t chunk)
{
    fedkern_v1_PullTaskRequest in = fedkern_v1_PullTaskRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    if (task_id) {
        snprintf(in.job_id, sizeof in.job_id, "%s", task_id);
        in.round = round;
        in.phase = phase;
        in.chunk_index = chunk;
    }
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    if (fk_codec_encode(fedkern_v1_PullTaskRequest_fields, &in, 0, &buf, &len, &err) ||
        call(a, CALL_PULL, "PullTask", buf, len, task_id ? a->cfg.call_ms : a->cfg.poll_ms,
             pull_done, &err)) {
        /* A half-received task is dropped: the next pull (after the pause) starts it over. */
        if (task_id)
            work_reset(&a->w);
        not_sent(a, "PullTask", &err);
    }
}

/* ------------------------------------------------------------- updates */

static void send_push(fk_agent *a);

static void push_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = completion(ud, status, msg);
    if (!a)
        return;
    work *w = &a->w;
    if (status != FK_GRPC_OK) {
        /* UNAVAILABLE from the server (e.g. its disk is full): keep the update, retry later. */
        fk_log(FK_LOG_WARN, "push_refused", "job=%s status=%s message=\"%s\"", w->task_id,
               fk_grpc_status_name(status), msg);
        if (status == FK_GRPC_FAILED_PRECONDITION) { /* our session is gone (server restart) */
            session_lost(a, "PushUpdate"); /* the update stays ready: resent after the Join */
        } else if (status == FK_GRPC_INVALID_ARGUMENT) {
            int failure = w->failure;
            work_reset(w);
            if (failure)
                pause_polling(a);
            else
                next(a);
        } else {
            request_disconnect(a, "PushUpdate refused");
        }
        return;
    }
    fedkern_v1_PushUpdateResponse out;
    fk_err err = {0};
    if (fk_codec_decode(fedkern_v1_PushUpdateResponse_fields, &out, resp, len, &err)) {
        request_disconnect(a, "undecodable PushUpdate answer");
        return;
    }
    int done = 0;
    switch (out.state) {
    case fedkern_v1_UpdateState_UPDATE_COMMITTED:
        a->stats.committed++;
        done = 1;
        break;
    case fedkern_v1_UpdateState_UPDATE_DUPLICATE:
        a->stats.duplicates++;
        done = 1;
        break;
    case fedkern_v1_UpdateState_UPDATE_STALE:
        a->stats.stale++;
        fk_log(FK_LOG_INFO, "update_stale", "job=%s round=%u message=\"%s\"", w->task_id, w->round,
               out.message);
        done = 1;
        break;
    case fedkern_v1_UpdateState_UPDATE_PARTIAL:
        w->next_chunk = out.missing_count ? out.missing[0] : w->next_chunk;
        break;
    case fedkern_v1_UpdateState_UPDATE_UNKNOWN:
        w->next_chunk = 0;
        break;
    default:
        break;
    }
    fk_codec_release(fedkern_v1_PushUpdateResponse_fields, &out);
    if (done && w->failure) {
        fk_log(FK_LOG_INFO, "failure_reported", "job=%s round=%u phase=%u", w->task_id, w->round,
               w->phase);
        work_reset(w);
        pause_polling(a);
        return;
    }
    if (done) {
        fk_log(FK_LOG_DEBUG, "update_done", "job=%s round=%u phase=%u", w->task_id, w->round,
               w->phase);
        work_reset(w);
    }
    next(a);
}

static void send_push(fk_agent *a)
{
    work *w = &a->w;
    fedkern_v1_PushUpdateRequest in = fedkern_v1_PushUpdateRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    snprintf(in.job_id, sizeof in.job_id, "%s", w->task_id);
    in.round = w->round;
    in.phase = w->phase;
    snprintf(in.update_id, sizeof in.update_id, "%s", w->update_id);
    in.has_report = true;
    in.report.n_samples = w->report.n_samples > 0 ? (uint64_t)w->report.n_samples : 0;
    in.report.loss = w->report.loss; /* NaN = not measured, as in fk_report */
    in.report.accuracy = w->report.accuracy;
    in.report.seconds = w->seconds;
    for (int i = 2; i < FK_REPORT_N_FIELDS; i++) { /* loss and accuracy have fields of their own */
        double v = fk_report_get(&w->report, fk_report_fields[i].name);
        if (isnan(v) || in.report.metrics_count >= sizeof in.report.metrics / sizeof *in.report.metrics)
            continue;
        fedkern_v1_Metric *m = &in.report.metrics[in.report.metrics_count++];
        snprintf(m->name, sizeof m->name, "%s", fk_report_fields[i].name);
        m->value = v;
    }
    fk_codec_tx tx = {0};
    fk_err err = {0};
    int rc = FK_OK;
    if (w->failure) {
        snprintf(in.report.error, sizeof in.report.error, "%s", w->error);
    } else if (w->probe_first) {
        in.probe = true;
        w->probe_first = 0;
    } else if (!w->chunked) {
        tx.bundle = &w->update;
    } else {
        const uint8_t *data = NULL;
        size_t dlen = 0;
        rc = fk_chunker_get(&w->chunker, w->next_chunk, &in.chunk, &data, &dlen, &err);
        tx.chunk_data = data;
        tx.chunk_len = dlen;
        if (w->next_chunk + 1 < w->chunker.total)
            w->next_chunk++;
        a->stats.chunks_sent++;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!rc)
        rc = fk_codec_encode_push_update_request(&in, &tx, 0, &buf, &len, &err);
    if (rc) {
        fk_log(FK_LOG_ERROR, "push_not_encoded", "error=\"%s\"", err.msg);
        work_reset(w);
        pause_polling(a); /* nothing is in flight: poll again after the pause */
        return;
    }
    a->stats.pushes++;
    if (call(a, CALL_PUSH, "PushUpdate", buf, len, a->cfg.call_ms, push_done, &err))
        not_sent(a, "PushUpdate", &err); /* the update stays ready: sent again after the pause */
}

/* ----------------------------------------------------------- heartbeat */

static void hb_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = completion(ud, status, msg);
    if (!a)
        return;
    if (status == FK_GRPC_FAILED_PRECONDITION || status == FK_GRPC_NOT_FOUND) {
        /* the server forgot our session (restart, expiry): join again (NOT_FOUND: servers
         * before 0.5 answered an unknown session so) */
        session_lost(a, "Heartbeat");
        return;
    }
    if (status == FK_GRPC_DEADLINE_EXCEEDED) {
        request_disconnect(a, "heartbeat not answered: connection stalled");
        return;
    }
    if (status != FK_GRPC_OK)
        return;
    fedkern_v1_HeartbeatResponse out;
    fk_err err = {0};
    if (fk_codec_decode(fedkern_v1_HeartbeatResponse_fields, &out, resp, len, &err))
        return;
    if (out.cancel_task && a->w.running) {
        cancel_step(a);
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
        call(a, CALL_HB, "Heartbeat", buf, len, control_ms(a), hb_done, &err)) {
        fk_log(FK_LOG_WARN, "call_not_sent", "call=Heartbeat error=\"%s\"", err.msg);
        return;
    }
    a->stats.heartbeats++;
    uv_timer_set_repeat(&a->hb, a->heartbeat_ms);
}

/* ---------------------------------------------------------------- main */

/* Decide the next call on an idle connection. */
static void next(fk_agent *a)
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
        send_predict_answer(a);
    else if (a->w.ready)
        send_push(a);
    else if (!a->w.running && !a->w.active)
        send_pull(a, NULL, 0, 0, 0);
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
    work_reset(&a->w);
    pwork_reset(&a->p);
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
    maybe_finish_stop(a);
}

static void maybe_finish_stop(fk_agent *a)
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
    for (int i = 0; i < a->n_jobs; i++)
        jobctx_free(a->jobs[i]);
    work_reset(&a->w);
    pwork_reset(&a->p);
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
    maybe_finish_stop(a);
}

void fk_agent_stop(fk_agent *a, void (*on_stopped)(void *ud), void *ud)
{
    if (a->stopping)
        return;
    a->on_stopped = on_stopped;
    a->stopped_ud = ud;
    if (a->w.running) {
        cancel_step(a);
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
            call(a, CALL_LEAVE, "Leave", buf, len, 2000, leave_done, &err) == FK_OK)
            return; /* leave_done finishes */
        fk_log(FK_LOG_WARN, "call_not_sent", "call=Leave error=\"%s\"", err.msg);
    }
    if (a->in_flight) /* a pending call completes (or is cancelled) when the client closes */
        a->in_flight = 0;
    maybe_finish_stop(a);
}

void fk_agent_stats_get(const fk_agent *a, fk_agent_stats *out)
{
    *out = a->stats;
    out->joined = a->joined;
}
