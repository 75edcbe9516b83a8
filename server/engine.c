#include "server/engine.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base/log.h"
#include "common/methods/jobkeys.h"
#include "common/methods/sim.h"
#include "common/methods/update_check.h"

enum { MAX_PHASES = 16 };

typedef struct slot {
    int client;
    int answered;
    int failed;     /* the client reported it cannot do this task: not asked again */
    int refused;    /* failed because its update was refused (or it is excluded) */
    int gone;       /* failed because its session ended (fk_engine_client_gone): asked again
                     * once it joins again or sends anything for this phase */
    char why[256];  /* its reason, for the dropout log */
    uint8_t *task;
    size_t task_len;
} slot;

typedef struct job {
    int64_t id;
    char *config;
    fk_jobconf conf;
    const fk_method *m;
    void *srv;
    int state;
    int stalled;        /* the store refused a write: no tasks until the retry at `deadline` */
    int store_failures; /* failed tries since the store last took a write */
    int round, attempt, phase;
    slot *slots; /* the round's planned clients, ascending */
    int n_slots;
    int answered;
    int failed; /* slots whose client reported a failure this phase (gone ones included) */
    int n_gone; /* of those, slots whose client's session ended */
    int n_role_gone; /* of those, slots of role clients: the phase waits for them until its
                      * deadline, then the job fails (docs/daemons.md "A role client that
                      * goes during the job") */
    const char **roles; /* per client: its role (method's client_roles), NULL for a training
                         * client; NULL when the job type has no roles */
    double deadline;
    int *refusals;           /* per client: updates refused over the job (this server run) */
    unsigned char *excluded; /* per client: refused max_refusals times, left out of every phase */
    char note[512];          /* why clients are excluded, for job status */
    double q[FK_REPORT_N_FIELDS]; /* the round's quality: each field's mean over the latest
                                   * phase of the round that measured it */
    fk_report *cq;                /* per client (conf.n_clients, once a phase aggregated): what
                                   * it measured, a later phase winning per field like q */
    double round_t0;              /* when this attempt of the round opened (its duration) */
    int busy; /* a work (fk_engine_work) is in flight: j->srv is the work's until it is done */
    int pins; /* fk_engine_check runs on a worker, reading j->srv: the phase neither ends nor
               * retries, and the job is not freed, until each is back (issue 35) */
} job;

struct fk_engine {
    fk_engine_opts o;
    job **jobs; /* running jobs, ascending id */
    int n_jobs, cap;
    fk_engine_stats stats;
    uint64_t generation;
    int (*gone)(void *ud, const char *identity); /* fk_engine_set_presence; NULL: all present */
    int ending; /* end_phase calls in progress (the outermost is timed) */
    void *gone_ud;
    int (*offload)(void *ud, fk_engine_work *w); /* fk_engine_set_offload; NULL: inline */
    void *offload_ud;
    int in_flight; /* works handed out and not yet done */
    fk_store *reader; /* with an offload: the worker's read-only connection (NULL: the loop
                       * copies a phase's updates for it, as for an in-memory store) */
};

/* A phase's close off the loop: the stored updates (copied on the loop), decoded and
 * aggregated by the method, and for a round's last phase the checkpoint and the model
 * encoded, all on a worker thread. The job is busy until fk_engine_work_done: no loop code
 * calls an op on its method state meanwhile (asserted), its tasks are not handed out and
 * its updates are answered as late; status and result answer from what is stored. */
typedef struct collected {
    fk_update *ups;
    uint8_t **blobs; /* the stored bytes of ups[i] until decoded (NULL when folded) */
    size_t *lens;
    int n, cap;
    int skip; /* a client whose update is left out, -1 for none */
    /* streaming (issue 35): each stored update decoded and folded into the method state as it
     * is read, then dropped; ups[i] keeps its client and report only */
    int stream;
    const fk_method *m;
    void *srv;
    const fk_blob_codec *codec;
    int round, phase;
    double fold_seconds; /* in the method's fold ops (the round's agg_seconds) */
} collected;

struct fk_engine_work {
    job *j;
    const fk_method *m;
    void *srv; /* j->srv: the work's own while it is in flight */
    fk_blob_codec codec;
    int round, phase, rounds;
    collected c;
    int n_updates;
    fk_store_round r; /* dropouts counted on the loop when the phase closed */
    double q[FK_REPORT_N_FIELDS];
    int64_t job;
    int attempt;
    fk_store *st;  /* where run() reads the phase's updates; NULL: copied into c on the loop */
    int offloaded; /* handed to another thread (its times count apart) */
    /* what the work found: */
    int agg_rc, blob_rc, done, last;
    fk_err err;
    double agg_seconds, wall, cpu;
    uint8_t *ckpt, *model;
    size_t ckpt_len, model_len;
    uint8_t ckpt_sum[32], model_sum[32]; /* their SHA-256, hashed by run() (issue 35) */
    int summed;
};

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the calling thread. */
static double cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------ helpers */

static void free_tasks(job *j)
{
    for (int i = 0; i < j->n_slots; i++) {
        free(j->slots[i].task);
        j->slots[i].task = NULL;
        j->slots[i].task_len = 0;
        j->slots[i].answered = 0;
        j->slots[i].failed = 0;
        j->slots[i].refused = 0;
        j->slots[i].gone = 0;
        j->slots[i].why[0] = '\0';
    }
    j->answered = 0;
    j->failed = 0;
    j->n_gone = 0;
    j->n_role_gone = 0;
}

static void job_free(job *j)
{
    if (!j)
        return;
    assert(!j->busy && !j->pins); /* its work (or a check) still uses j->srv */
    free_tasks(j);
    free(j->slots);
    free(j->refusals);
    free(j->excluded);
    free(j->cq);
    free(j->roles);
    if (j->srv && j->m)
        j->m->server_close(j->srv);
    fk_jobconf_close(&j->conf);
    free(j->config);
    free(j);
}

FK_CHECKRETURN static int encode(fk_engine *e, const fk_bundle *b, uint8_t **out, size_t *len, fk_err *err)
{
    *out = NULL;
    *len = 0;
    return e->o.codec.encode(b, out, len, err);
}

/* Method state as a blob: which op (save or model) fills the bundle. Touches only srv and
 * what it allocates: runs on the loop at submit, on a worker for a round's close. */
FK_CHECKRETURN static int state_blob(const fk_blob_codec *codec, const fk_method *m, void *srv, int model,
                      uint8_t **out, size_t *len, fk_err *err)
{
    fk_bundle b;
    fk_bundle_init(&b);
    *out = NULL;
    *len = 0;
    int rc = model ? m->model(srv, &b, err) : m->save(srv, &b, err);
    if (!rc)
        rc = codec->encode(&b, out, len, err);
    fk_bundle_close(&b);
    return rc;
}

/* Fresh server state, then the checkpoint of `round` if one is stored. */
FK_CHECKRETURN static int restore_checkpoint(fk_engine *e, job *j, int round, fk_err *err)
{
    assert(!j->busy);
    if (j->srv)
        j->m->server_close(j->srv);
    j->srv = NULL;
    int rc = j->m->server_init(&j->srv, &j->conf.params, j->conf.n_clients, j->conf.seed, err);
    if (rc)
        return rc;
    void *blob;
    size_t len;
    rc = fk_store_checkpoint_get(e->o.store, j->id, round, &blob, &len, err);
    if (rc)
        return rc;
    fk_bundle b;
    fk_bundle_init(&b);
    rc = e->o.codec.decode(blob, len, &b, err);
    free(blob);
    if (!rc)
        rc = j->m->load(j->srv, &b, err);
    fk_bundle_close(&b);
    if (rc)
        fk_err_prefix(err, rc, "job %lld: checkpoint of round %d: ", (long long)j->id, round);
    return rc;
}

static int compare_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The method's sample for (round, attempt); attempt 0 uses the simulator's RNG. */
FK_CHECKRETURN static int plan(job *j, int *chosen, int *n, fk_err *err)
{
    fk_rng rng;
    uint64_t seed = j->conf.seed;
    if (j->attempt > 0)
        seed ^= 0x9e3779b97f4a7c15ULL * (uint64_t)j->attempt;
    fk_sim_plan_rng(&rng, seed, j->round);
    *n = 0;
    int rc = j->m->plan(j->srv, j->round, &rng, chosen, n, err);
    if (rc)
        return rc;
    if (*n <= 0 || *n > j->conf.n_clients)
        return fk_err_set(err, FK_ESTATE, "method %s planned %d of %d clients in round %d",
                          j->m->name, *n, j->conf.n_clients, j->round);
    qsort(chosen, (size_t)*n, sizeof *chosen, compare_int);
    for (int i = 0; i < *n; i++)
        if (chosen[i] < 0 || chosen[i] >= j->conf.n_clients || (i && chosen[i] == chosen[i - 1]))
            return fk_err_set(err, FK_ESTATE, "method %s planned an invalid client %d in round %d",
                              j->m->name, chosen[i], j->round);
    return FK_OK;
}

FK_CHECKRETURN static int plan_slots(job *j, fk_err *err)
{
    assert(!j->busy);
    int *chosen = malloc((size_t)j->conf.n_clients * sizeof *chosen);
    if (!chosen)
        return fk_err_set(err, FK_ENOMEM, "out of memory planning job %lld", (long long)j->id);
    int n = 0;
    int rc = plan(j, chosen, &n, err);
    if (!rc) {
        free_tasks(j);
        free(j->slots);
        j->slots = calloc((size_t)n, sizeof *j->slots);
        j->n_slots = j->slots ? n : 0;
        if (!j->slots)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory planning job %lld", (long long)j->id);
        for (int i = 0; i < j->n_slots; i++)
            j->slots[i].client = chosen[i];
    }
    free(chosen);
    return rc;
}

/* Excluded clients are dropouts of every phase from its start: never asked, not waited for. */
static void mark_excluded(job *j)
{
    for (int i = 0; i < j->n_slots; i++) {
        slot *s = &j->slots[i];
        if (!j->excluded[s->client] || s->failed)
            continue;
        s->failed = s->refused = 1;
        snprintf(s->why, sizeof s->why, "excluded from the job after %d refused updates",
                 j->refusals[s->client]);
        j->failed++;
    }
}

/* The role of a job's client (dica/udica "unseen", fedrf-tca "target"), NULL for a training
 * client. */
static const char *role_of(const job *j, int client)
{
    return j->roles ? j->roles[client] : NULL;
}

/* A planned client whose session ended is a dropout of the phase at once: nobody waits for a
 * client killed without a word (the phase closes when the others answered, with quorum). A
 * role client is the exception: the job's result needs it, so the phase waits for it until
 * its deadline (phase_complete, end_phase). The session rule is the service's
 * (expire_sessions): 3 heartbeat intervals with no call, no byte received and no connection
 * close. */
static void slot_gone(job *j, slot *s)
{
    if (s->answered || s->failed)
        return;
    s->failed = s->gone = 1;
    snprintf(s->why, sizeof s->why,
             "its session ended (it sent Leave, or 3 heartbeat intervals passed with no call, "
             "no byte received and no connection close)");
    j->failed++;
    j->n_gone++;
    if (role_of(j, s->client))
        j->n_role_gone++;
}

/* The client is back (joined again, or sent something for this phase): asked again. */
static void slot_back(job *j, slot *s)
{
    if (!s->gone)
        return;
    s->failed = s->gone = 0;
    s->why[0] = '\0';
    j->failed--;
    j->n_gone--;
    if (role_of(j, s->client))
        j->n_role_gone--;
}

/* The planned clients whose session has ended when the phase opens: O(1) each (a hash
 * lookup in the service's client index), so O(K) a phase like the tasks themselves. */
static void mark_gone(fk_engine *e, job *j)
{
    for (int i = 0; e->gone && i < j->n_slots; i++)
        if (!j->slots[i].failed && e->gone(e->gone_ud, j->conf.clients[j->slots[i].client]))
            slot_gone(j, &j->slots[i]);
}

/* Every planned client's task for the current phase, in client order (as the simulator). */
FK_CHECKRETURN static int make_tasks(fk_engine *e, job *j, fk_err *err)
{
    assert(!j->busy);
    e->generation++; /* new tasks: waiting clients may have work now */
    free_tasks(j);
    fk_bundle b;
    fk_bundle_init(&b);
    int rc = FK_OK;
    for (int i = 0; i < j->n_slots && !rc; i++) {
        fk_bundle_clear(&b);
        rc = j->m->task(j->srv, j->round, j->phase, j->slots[i].client, &b, err);
        if (!rc)
            rc = encode(e, &b, &j->slots[i].task, &j->slots[i].task_len, err);
    }
    fk_bundle_close(&b);
    mark_excluded(j);
    mark_gone(e, j);
    return rc;
}

/* Slots ascend by client (plan sorts them): a binary search, so a pull, push or heartbeat
 * costs O(log K), not O(K) (O(K²) a round at K clients). */
static slot *find_slot(job *j, int client)
{
    int lo = 0, hi = j->n_slots;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (j->slots[mid].client == client)
            return &j->slots[mid];
        if (j->slots[mid].client < client)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

static int quorum(const job *j)
{
    return fk_jobconf_quorum(&j->conf, j->n_slots);
}

/* --------------------------------------------------- job state changes */

/* The retention of a job that ended otherwise than by its last round's close (failed,
 * cancelled): its updates' bytes and older checkpoints and models go (fk_store_retain).
 * Best effort: what is not pruned now stays until `fedkern job delete`. */
static void retain_ended(fk_engine *e, job *j)
{
    fk_err err = {0};
    fk_store *st = e->o.store;
    int own = !fk_store_in_transaction(st); /* else inside the caller's, never rolled back here */
    int rc = own ? fk_store_begin_relaxed(st, &err) : FK_OK;
    if (!rc)
        rc = fk_store_retain(st, j->id, j->round, 1, j->m, &err);
    if (own && !rc)
        rc = fk_store_commit(st, &err);
    else if (own)
        fk_store_rollback(st);
    if (rc)
        fk_log(FK_LOG_WARN, "retention_not_applied", "job=%lld error=\"%s\"", (long long)j->id,
               err.msg);
}

/* Record a terminal state; the job leaves memory at the end of the call. */
static void finish(fk_engine *e, job *j, int state, const char *reason, double now)
{
    fk_err err = {0};
    j->state = state;
    if (fk_store_job_set_state(e->o.store, j->id, state, reason, now, &err))
        fk_log(FK_LOG_ERROR, "job_state_not_stored", "job=%lld error=\"%s\"", (long long)j->id,
               err.msg);
    else if (state != FK_JOB_DONE) /* done: pruned with its last round's close */
        retain_ended(e, j);
    if (state == FK_JOB_FAILED)
        fk_log(FK_LOG_ERROR, "job_failed", "job=%lld round=%d reason=\"%s\"", (long long)j->id,
               j->round, reason);
    else
        fk_log(FK_LOG_INFO, state == FK_JOB_DONE ? "job_done" : "job_cancelled",
               "job=%lld rounds=%d", (long long)j->id, j->round);
}

static void fail(fk_engine *e, job *j, const fk_err *why, double now)
{
    finish(e, j, FK_JOB_FAILED, why->msg, now);
}

/* Open (round, attempt): plan, store the round and its phase 0, build tasks. */
/* A new round (or its replay) measures its quality afresh: the mean and each client's. */
static void quality_reset(job *j)
{
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++)
        j->q[i] = NAN;
    for (int k = 0; j->cq && k < j->conf.n_clients; k++)
        fk_report_init(&j->cq[k]);
}

FK_CHECKRETURN static int start_round(fk_engine *e, job *j, double now, fk_err *err)
{
    j->phase = 0;
    int rc = plan_slots(j, err);
    if (rc)
        return rc;
    j->deadline = now + j->conf.deadline;
    j->round_t0 = now;
    quality_reset(j);
    int *planned = malloc((size_t)j->n_slots * sizeof *planned);
    if (!planned)
        return fk_err_set(err, FK_ENOMEM, "out of memory opening a round");
    for (int i = 0; i < j->n_slots; i++)
        planned[i] = j->slots[i].client;
    fk_store *st = e->o.store;
    rc = fk_store_begin_relaxed(st, err); /* the open is planned again from what is durable */
    if (!rc)
        rc = fk_store_round_open(st, j->id, j->round, j->attempt, planned, j->n_slots, quorum(j),
                                 now, err);
    if (!rc)
        rc = fk_store_phase_open(st, j->id, j->round, j->attempt, 0, j->deadline, err);
    if (!rc)
        rc = fk_store_job_set_position(st, j->id, j->round, j->attempt, 0, now, err);
    if (!rc)
        rc = fk_store_commit(st, err);
    else
        fk_store_rollback(st);
    free(planned);
    if (rc)
        return rc;
    fk_log(FK_LOG_INFO, "round_open", "job=%lld round=%d attempt=%d planned=%d quorum=%d",
           (long long)j->id, j->round, j->attempt, j->n_slots, quorum(j));
    return make_tasks(e, j, err);
}

/* A stored update, copied: the store's bytes are valid only during the callback. */
FK_CHECKRETURN static int collect_update(void *ctx, const fk_store_update *u, fk_err *err)
{
    collected *c = ctx;
    if (u->client == c->skip)
        return FK_OK;
    if (u->pruned) /* never for an open round: retention prunes closed ones only */
        return fk_err_set(err, FK_ESTATE,
                          "job %lld round %d phase %d: the update of client %d was pruned by "
                          "retention",
                          (long long)u->job, u->round, u->phase, u->client);
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 8;
        fk_update *g = realloc(c->ups, (size_t)cap * sizeof *g);
        if (g)
            c->ups = g;
        uint8_t **gb = g ? realloc(c->blobs, (size_t)cap * sizeof *gb) : NULL;
        if (gb)
            c->blobs = gb;
        size_t *gl = gb ? realloc(c->lens, (size_t)cap * sizeof *gl) : NULL;
        if (!gl)
            return fk_err_set(err, FK_ENOMEM, "out of memory loading updates");
        c->lens = gl;
        c->cap = cap;
    }
    fk_update *up = &c->ups[c->n];
    up->client = u->client;
    up->report = u->report;
    fk_bundle_init(&up->msg);
    c->blobs[c->n] = NULL;
    c->lens[c->n] = 0;
    if (c->stream) { /* decoded from the store's bytes, folded, dropped: O(model) */
        fk_update one = {.client = u->client, .report = u->report};
        fk_bundle_init(&one.msg);
        int rc = c->codec->decode(u->blob, u->len, &one.msg, err);
        double t0 = mono_seconds();
        if (rc)
            fk_err_prefix(err, rc, "stored update of client %d: ", u->client);
        else
            rc = c->m->fold(c->srv, c->round, c->phase, &one, err);
        c->fold_seconds += mono_seconds() - t0;
        fk_bundle_close(&one.msg);
        c->n += rc == FK_OK;
        return rc;
    }
    uint8_t *copy = malloc(u->len ? u->len : 1);
    if (!copy)
        return fk_err_set(err, FK_ENOMEM, "out of memory loading updates");
    if (u->len)
        memcpy(copy, u->blob, u->len);
    c->blobs[c->n] = copy;
    c->lens[c->n] = u->len;
    c->n++;
    return FK_OK;
}

static void collected_close(collected *c)
{
    for (int i = 0; i < c->n; i++) {
        fk_bundle_close(&c->ups[i].msg);
        free(c->blobs[i]);
    }
    free(c->ups);
    free(c->blobs);
    free(c->lens);
    c->ups = NULL;
    c->blobs = NULL;
    c->lens = NULL;
    c->n = c->cap = 0;
}

/* The decoded messages and stored bytes go back; the clients and reports stay. */
static void collected_drop_msgs(collected *c)
{
    for (int i = 0; i < c->n; i++) {
        fk_bundle_close(&c->ups[i].msg);
        free(c->blobs[i]);
        c->blobs[i] = NULL;
    }
}

/* The phase's aggregate and the round's quality in q (a later phase's measure wins), in client
 * order: read from st when given (else from the copies already in c), and for a method that
 * folds, each update decoded and folded as it is read, so only one is in memory at a time
 * (issue 35); else all decoded, then the method's aggregate. Touches only srv, c, q and st, so
 * it runs on a worker thread (st: the worker's reader) as well as on the loop. */
FK_CHECKRETURN static int aggregate_work(fk_store *st, int64_t job, int attempt, const fk_blob_codec *codec,
                          const fk_method *m, void *srv, int round, int phase, collected *c,
                          double *q, int *done, double *agg_seconds, fk_err *err)
{
    int fold = fk_method_folds(m);
    double t0 = mono_seconds();
    int rc = fold ? m->fold_begin(srv, round, phase, err) : FK_OK;
    c->fold_seconds = mono_seconds() - t0;
    if (!rc && st) {
        c->stream = fold;
        c->m = m;
        c->srv = srv;
        c->codec = codec;
        c->round = round;
        c->phase = phase;
        rc = fk_store_update_each(st, job, round, attempt, phase, collect_update, c, err);
        c->stream = 0;
    }
    for (int i = 0; i < c->n && !rc; i++) { /* copies: decoded one at a time */
        if (!c->blobs[i])
            continue;
        rc = codec->decode(c->blobs[i], c->lens[i], &c->ups[i].msg, err);
        free(c->blobs[i]); /* decoded: the copy's memory goes back before the next one */
        c->blobs[i] = NULL;
        if (rc)
            fk_err_prefix(err, rc, "stored update of client %d: ", c->ups[i].client);
        else if (fold) {
            double t1 = mono_seconds();
            rc = m->fold(srv, round, phase, &c->ups[i], err);
            c->fold_seconds += mono_seconds() - t1;
        }
        if (fold)
            fk_bundle_close(&c->ups[i].msg);
    }
    /* the method's ops alone (fold_begin, each fold, fold_end; or aggregate), not the reads
     * and decodes around them */
    t0 = mono_seconds();
    if (!rc)
        rc = fold ? m->fold_end(srv, round, phase, done, err)
                  : m->aggregate(srv, round, phase, c->ups, c->n, done, err);
    *agg_seconds = mono_seconds() - t0 + (fold ? c->fold_seconds : 0.0);
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
        double v = fk_report_mean(c->ups, c->n, fk_report_fields[i].offset);
        if (!isnan(v))
            q[i] = v;
    }
    return rc;
}

/* Each client's own quality beside the mean (job status, /metrics): what it measured in the
 * collected updates, a later phase winning per field as in j->q. Only the reports: light
 * enough for the loop, before the updates go to the worker. No memory: the means only. */
static void fold_client_reports(job *j, const collected *c)
{
    if (!j->cq && j->conf.n_clients > 0) {
        j->cq = malloc((size_t)j->conf.n_clients * sizeof *j->cq);
        for (int k = 0; j->cq && k < j->conf.n_clients; k++)
            fk_report_init(&j->cq[k]);
    }
    for (int u = 0; j->cq && u < c->n; u++) {
        const fk_update *up = &c->ups[u];
        if (up->client < 0 || up->client >= j->conf.n_clients)
            continue;
        for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
            double v = *(const double *)((const char *)&up->report + fk_report_fields[i].offset);
            if (!isnan(v))
                *(double *)((char *)&j->cq[up->client] + fk_report_fields[i].offset) = v;
        }
        if (up->report.n_samples > 0)
            j->cq[up->client].n_samples = up->report.n_samples;
    }
}

/* The round row's participants, aggregation time and quality (from j->q). */
static void fill_round(const job *j, fk_store_round *r, int participants, double agg_seconds)
{
    r->agg_seconds = agg_seconds;
    r->participants = participants;
    fk_report q;
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++)
        *(double *)((char *)&q + fk_report_fields[i].offset) = j->q[i];
    r->loss = q.loss;
    r->accuracy = q.accuracy;
    r->error = q.error;
    r->misclust = q.misclust;
    r->ari = q.ari;
    r->rmse = q.rmse;
    r->model_error = q.model_error;
}

/* Aggregate the stored updates of the current phase in client order (but skip's), on the
 * loop: the replay of a resume and the search for a bad update. */
FK_CHECKRETURN static int aggregate_phase(fk_engine *e, job *j, int skip, fk_store_round *r, int *done,
                           fk_err *err)
{
    assert(!j->busy);
    collected c = {.skip = skip};
    double agg = 0;
    int rc = aggregate_work(e->o.store, j->id, j->attempt, &e->o.codec, j->m, j->srv, j->round,
                            j->phase, &c, j->q, done, &agg, err);
    if (!rc)
        fold_client_reports(j, &c);
    if (r)
        fill_round(j, r, c.n, agg);
    collected_close(&c);
    return rc;
}

/* Absent clients of the current phase, logged and listed in r->dropped. */
static void count_dropouts(job *j, fk_store_round *r)
{
    size_t off = 0;
    r->dropouts = 0;
    r->dropped[0] = '\0';
    for (int i = 0; i < j->n_slots; i++) {
        if (j->slots[i].answered)
            continue;
        r->dropouts++;
        fk_log(FK_LOG_WARN, "dropout", "job=%lld round=%d attempt=%d phase=%d client=%s reason=\"%s\"",
               (long long)j->id, j->round, j->attempt, j->phase,
               j->conf.clients[j->slots[i].client],
               j->slots[i].failed ? j->slots[i].why : "no answer before the deadline");
        int w = snprintf(r->dropped + off, sizeof r->dropped - off, "%s%d", off ? "," : "",
                         j->slots[i].client);
        if (w > 0 && (size_t)w < sizeof r->dropped - off)
            off += (size_t)w;
    }
}

static void store_failed(fk_engine *e, job *j, int rc, fk_err *err, double now);
static void store_ok(job *j);

/* Store the phase's close and open the next phase of the same round. */
FK_CHECKRETURN static int next_phase(fk_engine *e, job *j, int participants, double now, fk_err *err)
{
    if (j->phase + 1 == MAX_PHASES)
        return fk_err_set(err, FK_ESTATE, "method %s did not finish round %d in %d phases",
                          j->m->name, j->round, MAX_PHASES);
    fk_store *st = e->o.store;
    double deadline = now + j->conf.deadline;
    int rc = fk_store_begin_relaxed(st, err); /* its updates are durable: closed again on resume */
    if (!rc)
        rc = fk_store_phase_close(st, j->id, j->round, j->attempt, j->phase, participants, err);
    if (!rc)
        rc = fk_store_phase_open(st, j->id, j->round, j->attempt, j->phase + 1, deadline, err);
    if (!rc)
        rc = fk_store_job_set_position(st, j->id, j->round, j->attempt, j->phase + 1, now, err);
    if (!rc)
        rc = fk_store_commit(st, err);
    else
        fk_store_rollback(st);
    if (rc)
        return rc;
    j->phase++;
    j->deadline = deadline;
    return make_tasks(e, j, err);
}

/* One transaction: the last phase, the round's summary, checkpoint, model,
 * and the job's next position (or its end). */
FK_CHECKRETURN static int close_round(fk_engine *e, job *j, fk_store_round *r, const fk_engine_work *w, double now,
                       fk_err *err)
{
    int last = w->last;
    fk_store *st = e->o.store;
    /* No fsync of its own: lost in a power cut, the round is closed again on resume from its
     * updates, which were committed with theirs, to the same model (fk_store_begin_relaxed). */
    int rc = fk_store_begin_relaxed(st, err);
    if (!rc)
        rc = fk_store_phase_close(st, j->id, j->round, j->attempt, j->phase, r->participants, err);
    if (!rc)
        rc = fk_store_round_close(st, r, err);
    if (!rc)
        rc = w->summed ? fk_store_checkpoint_put_summed(st, j->id, j->round, w->ckpt, w->ckpt_len,
                                                        w->ckpt_sum, err)
                       : fk_store_checkpoint_put(st, j->id, j->round, w->ckpt, w->ckpt_len, err);
    if (!rc)
        rc = w->summed ? fk_store_model_put_summed(st, j->id, j->round, w->model, w->model_len,
                                                   w->model_sum, err)
                       : fk_store_model_put(st, j->id, j->round, w->model, w->model_len, err);
    /* retention in the same transaction: the updates go exactly when the checkpoint made of
     * them is durable (docs/operations.md "Retention") */
    if (!rc)
        rc = fk_store_retain(st, j->id, j->round, last, j->m, err);
    if (!rc && last)
        rc = fk_store_job_set_state(st, j->id, FK_JOB_DONE, NULL, now, err);
    if (!rc && !last)
        rc = fk_store_job_set_position(st, j->id, j->round + 1, 0, 0, now, err);
    if (!rc)
        rc = fk_store_commit(st, err);
    else
        fk_store_rollback(st);
    if (rc)
        return rc;
    char qs[256] = ""; /* the quality the clients measured, for the log line */
    size_t qn = 0;
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
        int w = isnan(j->q[i]) ? 0
                               : snprintf(qs + qn, sizeof qs - qn, " %s=%.6g",
                                          fk_report_fields[i].name, j->q[i]);
        if (w > 0 && (size_t)w < sizeof qs - qn)
            qn += (size_t)w;
    }
    fk_log(FK_LOG_INFO, "round_closed",
           "job=%lld round=%d attempt=%d participants=%d dropouts=%d agg_seconds=%.6f "
           "method=%s round_seconds=%.3f%s",
           (long long)j->id, j->round, j->attempt, r->participants, r->dropouts, r->agg_seconds,
           j->m->name, now - j->round_t0, qs);
    if (e->o.on_round) {
        fk_round_event ev = {.job = j->id, .method = j->m->name, .round = j->round,
                             .participants = r->participants, .dropouts = r->dropouts,
                             .round_seconds = now - j->round_t0, .agg_seconds = r->agg_seconds};
        memcpy(ev.q, j->q, sizeof ev.q);
        /* each client's quality, with the roles of those the job type reports apart */
        const char **roles = j->m->client_roles && j->cq
                                 ? calloc((size_t)j->conf.n_clients, sizeof *roles)
                                 : NULL;
        fk_err rerr = {0};
        if (roles && j->m->client_roles(&j->conf.params, j->conf.n_clients, roles, &rerr))
            memset(roles, 0, (size_t)j->conf.n_clients * sizeof *roles);
        ev.clients = j->cq;
        ev.n_clients = j->cq ? j->conf.n_clients : 0;
        ev.identities = (const char *const *)j->conf.clients;
        ev.roles = roles;
        e->o.on_round(e->o.on_round_ud, &ev);
        free(roles);
    }
    e->stats.rounds_closed++;
    e->stats.participants += (uint64_t)r->participants;
    e->stats.dropouts += (uint64_t)r->dropouts;
    e->stats.aggregation_seconds += r->agg_seconds;
    if (last) {
        finish(e, j, FK_JOB_DONE, NULL, now);
        return FK_OK;
    }
    j->round++;
    j->attempt = 0;
    return start_round(e, j, now, err);
}

FK_CHECKRETURN static int reload(fk_engine *e, job *j, double now, fk_err *err);
static void refuse(fk_engine *e, job *j, slot *s, const char *reason);
static void end_phase(fk_engine *e, job *j, double now);
static void retry_round(fk_engine *e, job *j, double now, const char *why);

typedef struct slot_mark {
    int failed, refused, gone;
    char why[256];
} slot_mark;

/* The in-memory marks of the phase's slots (a reload forgets them). */
static void marks_save(const job *j, slot_mark *m)
{
    for (int i = 0; i < j->n_slots; i++) {
        m[i].failed = j->slots[i].failed;
        m[i].refused = j->slots[i].refused;
        m[i].gone = j->slots[i].gone;
        memcpy(m[i].why, j->slots[i].why, sizeof m[i].why);
    }
}

static void marks_restore(job *j, const slot_mark *m)
{
    j->failed = j->n_gone = 0;
    for (int i = 0; i < j->n_slots; i++) {
        slot *s = &j->slots[i];
        if (!s->failed && m[i].failed) {
            s->failed = 1;
            s->refused = m[i].refused;
            s->gone = m[i].gone;
            memcpy(s->why, m[i].why, sizeof s->why);
        }
        j->failed += s->failed;
        j->n_gone += s->gone;
    }
}

/* The phase's aggregation failed: the slot of the one client without whose update it
 * succeeds (*culprit, -1 if there is none). Every try starts from the method state rebuilt
 * from the store, since the failed aggregate may have changed it; so does the state left. */
FK_CHECKRETURN static int find_culprit(fk_engine *e, job *j, double now, int *culprit, fk_err *err)
{
    *culprit = -1;
    slot_mark *m = malloc((size_t)j->n_slots * sizeof *m);
    if (!m)
        return fk_err_set(err, FK_ENOMEM, "out of memory looking for a bad update");
    marks_save(j, m);
    int n = j->n_slots, rc = FK_OK;
    int *answered = malloc((size_t)n * sizeof *answered);
    if (!answered)
        rc = fk_err_set(err, FK_ENOMEM, "out of memory looking for a bad update");
    for (int i = 0; !rc && i < n; i++)
        answered[i] = j->slots[i].answered;
    for (int i = 0; !rc && i < n && *culprit < 0; i++) {
        if (!answered[i])
            continue;
        fk_err trial = {0};
        int done = 0;
        if ((rc = reload(e, j, now, err)))
            break;
        int arc = aggregate_phase(e, j, j->slots[i].client, NULL, &done, &trial);
        if (arc == FK_ENOMEM || arc == FK_EIO)
            rc = arc, *err = trial;
        else if (arc == FK_OK)
            *culprit = i;
    }
    if (!rc)
        rc = reload(e, j, now, err);
    if (!rc)
        marks_restore(j, m);
    free(answered);
    free(m);
    return rc;
}

/* A failed aggregation caused by one client's data excludes that client's update from the
 * phase (the client is refused, a dropout) and the phase closes again without it; one that
 * may need the clients that dropped out (FedGrEM's initialisation needs every client) is
 * retried like a missed quorum. 0: the job fails (no one client is to blame). */
FK_CHECKRETURN static int survive_aggregation_error(fk_engine *e, job *j, const fk_err *why, double now)
{
    fk_err err = {0};
    int culprit = -1;
    int rc = find_culprit(e, j, now, &culprit, &err);
    if (rc) {
        store_failed(e, j, rc, &err, now);
        return 1;
    }
    if (culprit < 0) {
        if (j->answered == j->n_slots)
            return 0; /* every planned client's update is in: nobody to wait for */
        fk_log(FK_LOG_WARN, "aggregation_retried", "job=%lld round=%d phase=%d error=\"%s\"",
               (long long)j->id, j->round, j->phase, why->msg);
        retry_round(e, j, now, why->msg);
        return 1;
    }
    slot *s = &j->slots[culprit];
    fk_store *st = e->o.store;
    rc = fk_store_begin(st, &err);
    if (!rc)
        rc = fk_store_update_drop(st, j->id, j->round, j->attempt, j->phase, s->client, &err);
    if (!rc)
        rc = fk_store_commit(st, &err);
    else
        fk_store_rollback(st);
    if (rc) {
        store_failed(e, j, rc, &err, now);
        return 1;
    }
    s->answered = 0;
    j->answered--;
    char reason[400];
    snprintf(reason, sizeof reason, "the aggregation fails with it: %.360s", why->msg);
    refuse(e, j, s, reason);
    end_phase(e, j, now);
    return 1;
}

/* The current phase is over: aggregate what arrived, then go on. Failures of
 * the method fail the job unless one client's update caused them; failures of
 * the store reload it from the store. */
static void work_free(fk_engine_work *w)
{
    collected_close(&w->c);
    free(w->ckpt);
    free(w->model);
    free(w);
}

/* The work is back (or ran inline): store what it found and go on, as a phase's close did
 * when it all ran on the loop. A job cancelled meanwhile drops it. */
static void work_finish(fk_engine *e, fk_engine_work *w, double now)
{
    job *j = w->j;
    assert(j->busy && e->in_flight > 0);
    j->busy = 0;
    e->in_flight--;
    if (j->state != FK_JOB_RUNNING) {
        work_free(w);
        return;
    }
    memcpy(j->q, w->q, sizeof j->q);
    if (!w->agg_rc)
        fold_client_reports(j, &w->c);
    fk_store_round r = w->r;
    fill_round(j, &r, w->n_updates, w->agg_seconds);
    fk_err err = w->err;
    int rc = w->agg_rc;
    if (rc) {
        work_free(w);
        fk_err_prefix(&err, rc, "round %d phase %d: aggregation failed: ", j->round, j->phase);
        if (rc != FK_ENOMEM && rc != FK_EIO && survive_aggregation_error(e, j, &err, now))
            return;
        fail(e, j, &err, now);
        return;
    }
    rc = w->blob_rc;
    if (!rc)
        rc = w->done ? close_round(e, j, &r, w, now, &err)
                     : next_phase(e, j, r.participants, now, &err);
    work_free(w);
    if (rc)
        store_failed(e, j, rc, &err, now);
    else
        store_ok(j);
}

void fk_engine_work_run(fk_engine_work *w)
{
    double t0 = mono_seconds(), c0 = cpu_seconds();
    w->agg_rc = aggregate_work(w->st, w->job, w->attempt, &w->codec, w->m, w->srv, w->round,
                               w->phase, &w->c, w->q, &w->done, &w->agg_seconds, &w->err);
    w->n_updates = w->c.n;
    collected_drop_msgs(&w->c); /* the decoded updates are no longer needed; reports stay */
    if (!w->agg_rc && w->done) {
        w->last = w->round == w->rounds || (w->m->finished && w->m->finished(w->srv));
        w->blob_rc = state_blob(&w->codec, w->m, w->srv, 0, &w->ckpt, &w->ckpt_len, &w->err);
        if (!w->blob_rc)
            w->blob_rc = state_blob(&w->codec, w->m, w->srv, 1, &w->model, &w->model_len, &w->err);
        fk_err herr = {0}; /* no digest: the loop hashes them, as before */
        w->summed = !w->blob_rc &&
                    fk_store_digest(w->ckpt, w->ckpt_len, w->ckpt_sum, &herr) == FK_OK &&
                    fk_store_digest(w->model, w->model_len, w->model_sum, &herr) == FK_OK;
    }
    w->wall = mono_seconds() - t0;
    w->cpu = cpu_seconds() - c0;
}

/* The current phase is over: its updates are copied from the store here, aggregated by a
 * work (on another thread when the engine has an offload, else at once), then stored and the
 * job goes on (work_finish). Failures of the method fail the job unless one client's update
 * caused them; failures of the store reload it from the store. */
static void close_phase(fk_engine *e, job *j, double now)
{
    assert(!j->busy);
    fk_engine_work *w = calloc(1, sizeof *w);
    if (!w) {
        fk_err err;
        fk_err_set(&err, FK_ENOMEM, "out of memory closing job %lld round %d phase %d",
                   (long long)j->id, j->round, j->phase);
        store_failed(e, j, FK_ENOMEM, &err, now);
        return;
    }
    w->j = j;
    w->m = j->m;
    w->srv = j->srv;
    w->codec = e->o.codec;
    w->round = j->round;
    w->phase = j->phase;
    w->rounds = j->conf.rounds;
    w->c.skip = -1;
    w->r = (fk_store_round){.job = j->id, .round = j->round, .attempt = j->attempt, .closed = 1};
    count_dropouts(j, &w->r);
    memcpy(w->q, j->q, sizeof w->q);
    w->job = j->id;
    w->attempt = j->attempt;
    j->busy = 1;
    e->in_flight++;
    w->offloaded = e->offload != NULL; /* set before the worker may see w */
    if (w->offloaded && e->reader && !fk_store_reads_writer(e->reader, e->o.store)) {
        fk_store_close(e->reader); /* the writer moved to a new file (fk_store_recreate) */
        e->reader = NULL;
        fk_err rerr = {0};
        if (fk_store_open_reader(&e->reader, e->o.store, &rerr))
            fk_log(FK_LOG_WARN, "store_reader_unavailable", "error=\"%s\"", rerr.msg);
    }
    /* inline: run() reads from the store on the loop; offloaded: the worker reads with its own
     * connection, or without one gets copies made here. Also copies while the writer has a
     * transaction open (a group commit's staged updates): the reader would not see them, the
     * loop's connection does, as a replay of the phase will once they are committed. */
    w->st = !w->offloaded ? e->o.store
                          : fk_store_in_transaction(e->o.store) ? NULL : e->reader;
    if (!w->st) {
        int rc = fk_store_update_each(e->o.store, j->id, j->round, j->attempt, j->phase,
                                      collect_update, &w->c, &w->err);
        if (rc) { /* as an aggregation that failed: nothing ran */
            w->agg_rc = rc;
            work_finish(e, w, now);
            return;
        }
    }
    if (w->offloaded && e->offload(e->offload_ud, w) == FK_OK)
        return;
    w->offloaded = 0; /* run here; the reader may be in use by the worker for another job */
    if (w->st == e->reader)
        w->st = e->o.store;
    fk_engine_work_run(w);
    work_finish(e, w, now);
}

/* What the clients that did not answer said (their task failed, their update was refused, they
 * were excluded), "client c3 holds no data set 'x' (...); client c4: ...", so a failed job
 * shows the cause the server knows, not only the missed quorum. "" if none said anything. */
static void client_causes(const job *j, char *out, size_t cap)
{
    static const char reported[] = "client failed: ";
    size_t at = 0;
    int shown = 0, more = 0;
    out[0] = '\0';
    for (int i = 0; i < j->n_slots; i++) {
        const slot *s = &j->slots[i];
        if (!s->failed || !s->why[0])
            continue;
        if (shown == 3 || at + 40 >= cap) {
            more++;
            continue;
        }
        const char *why = s->why;
        if (!strncmp(why, reported, sizeof reported - 1))
            why += sizeof reported - 1;
        /* the client's "holds no data set ..." reads as a sentence after its name */
        int w = snprintf(out + at, cap - at, "%sclient %s%s%.*s", shown ? "; " : "",
                         j->conf.clients[s->client], strncmp(why, "holds ", 6) ? ": " : " ",
                         (int)(cap / 2), why);
        if (w < 0)
            break;
        at = at + (size_t)w < cap ? at + (size_t)w : cap - 1;
        shown++;
    }
    if (more && at + 24 < cap)
        snprintf(out + at, cap - at, "; and %d more client%s", more, more == 1 ? "" : "s");
}

/* A phase missed its quorum at the deadline (or, with `why`, could not be aggregated without
 * its dropouts): new sample from the last checkpoint, or the job fails once the retries are
 * used up. */
static void retry_round(fk_engine *e, job *j, double now, const char *why)
{
    fk_err err = {0};
    fk_store_round r = {.job = j->id, .round = j->round, .attempt = j->attempt, .closed = 2};
    count_dropouts(j, &r);
    r.participants = j->answered;
    r.loss = r.accuracy = r.error = r.misclust = r.ari = r.rmse = r.model_error = NAN;
    fk_log(FK_LOG_WARN, "quorum_missed",
           "job=%lld round=%d attempt=%d phase=%d answered=%d quorum=%d", (long long)j->id,
           j->round, j->attempt, j->phase, j->answered, quorum(j));
    e->stats.retries++;
    e->stats.dropouts += (uint64_t)r.dropouts;
    if (j->attempt >= j->conf.retries) {
        char causes[360]; /* leaves room for the quorum summary in one message */
        client_causes(j, causes, sizeof causes);
        if (causes[0] && why) /* the cause first: what the missing clients said */
            fk_err_set(&err, FK_ESTATE, "%s; so %.200s (in %d attempts)", causes, why,
                       j->attempt + 1);
        else if (causes[0])
            fk_err_set(&err, FK_ESTATE,
                       "%s; so round %d missed its quorum (%d of %d planned clients answered, %d "
                       "needed) in %d attempts",
                       causes, j->round, j->answered, j->n_slots, quorum(j), j->attempt + 1);
        else if (why)
            fk_err_set(&err, FK_ESTATE,
                       "%.300s (in %d attempts; it needs the clients that dropped out%s%.150s)",
                       why, j->attempt + 1, j->note[0] ? "; " : "", j->note);
        else
            fk_err_set(&err, FK_ESTATE,
                       "round %d missed its quorum (%d of %d planned clients answered, %d "
                       "needed) in %d attempts; check that the clients are running and "
                       "reachable, or lower 'quorum' / raise 'deadline' or 'retries'%s%.200s",
                       j->round, j->answered, j->n_slots, quorum(j), j->attempt + 1,
                       j->note[0] ? "; " : "", j->note);
        fk_err serr = {0};
        if (fk_store_round_close(e->o.store, &r, &serr))
            fk_log(FK_LOG_ERROR, "state_not_stored", "job=%lld error=\"%s\"", (long long)j->id,
                   serr.msg);
        fail(e, j, &err, now);
        return;
    }
    fk_store *st = e->o.store;
    int rc = fk_store_begin(st, &err);
    if (!rc)
        rc = fk_store_round_close(st, &r, &err);
    if (!rc)
        rc = fk_store_job_set_position(st, j->id, j->round, j->attempt + 1, 0, now, &err);
    if (!rc)
        rc = fk_store_commit(st, &err);
    else
        fk_store_rollback(st);
    if (!rc) {
        j->attempt++;
        rc = restore_checkpoint(e, j, j->round - 1, &err);
    }
    if (!rc)
        rc = start_round(e, j, now, &err);
    if (rc)
        store_failed(e, j, rc, &err, now);
    else
        store_ok(j);
}

/* ------------------------------------------------------------- resume */

FK_CHECKRETURN static int mark_answered(void *ctx, const fk_store_update *u, fk_err *err)
{
    (void)err;
    job *j = ctx;
    slot *s = find_slot(j, u->client);
    if (s && !s->answered) {
        slot_back(j, s); /* taken for gone at the reload, but its update is in */
        s->answered = 1;
        j->answered++;
    }
    return FK_OK;
}

/* Rebuild a job's in-memory state from the store: checkpoint of the last
 * closed round, the same plan, the closed phases re-aggregated from their
 * stored updates, the open phase's answers marked. */
FK_CHECKRETURN static int resume(fk_engine *e, job *j, double now, fk_err *err)
{
    fk_store_job row;
    int rc = fk_store_job_get(e->o.store, j->id, &row, err);
    if (rc)
        return rc;
    j->round = row.round;
    j->attempt = row.attempt;
    int phase = row.phase;
    fk_store_job_free(&row);
    if ((rc = restore_checkpoint(e, j, j->round - 1, err)))
        return rc;
    fk_store_round r;
    rc = fk_store_round_get(e->o.store, j->id, j->round, j->attempt, &r, err);
    if (rc == FK_ENOTFOUND)
        return start_round(e, j, now, err); /* crashed between a close and the next open */
    if (rc)
        return rc;
    j->round_t0 = r.started; /* the replay below measures the phases again */
    quality_reset(j);
    rc = plan_slots(j, err);
    int same = !rc && r.n_planned == j->n_slots;
    for (int i = 0; same && i < j->n_slots; i++)
        same = r.planned[i] == j->slots[i].client;
    fk_store_round_free(&r);
    if (rc)
        return rc;
    if (!same)
        return fk_err_set(err, FK_ESTATE,
                          "job %lld round %d: the method planned other clients than before the "
                          "restart; its plan must depend on (seed, round) and the checkpoint only",
                          (long long)j->id, j->round);
    for (j->phase = 0; j->phase < phase; j->phase++) {
        int done = 0;
        if ((rc = make_tasks(e, j, err)) || (rc = aggregate_phase(e, j, -1, NULL, &done, err)))
            return rc;
        if (done)
            return fk_err_set(err, FK_ESTATE, "job %lld round %d ended after phase %d on replay",
                              (long long)j->id, j->round, j->phase);
    }
    if ((rc = make_tasks(e, j, err)))
        return rc;
    int closed = 0;
    rc = fk_store_phase_get(e->o.store, j->id, j->round, j->attempt, j->phase, &j->deadline,
                            &closed, err);
    if (rc)
        return rc;
    /* Clients need time to reconnect after a server restart. */
    if (j->deadline < now)
        j->deadline = now + j->conf.deadline;
    return fk_store_update_each(e->o.store, j->id, j->round, j->attempt, j->phase, mark_answered,
                                j, err);
}

/* Forget the in-memory state and rebuild it from the store (reads only,
 * unless the round was never opened): at start, and after a failed write. */
FK_CHECKRETURN static int reload(fk_engine *e, job *j, double now, fk_err *err)
{
    assert(!j->busy);
    free_tasks(j);
    return resume(e, j, now, err);
}

/* How long a stalled job waits before it tries the store again. */
static const double STALL_RETRY_SECONDS = 1.0;

/* A step failed with rc: errors of the method fail the job; errors of the
 * store (a full disk) stall it: no tasks, no updates, and every
 * STALL_RETRY_SECONDS a reload from the store and the step again. */
static void store_failed(fk_engine *e, job *j, int rc, fk_err *err, double now)
{
    if (rc != FK_EIO && rc != FK_ENOMEM) {
        fail(e, j, err, now);
        return;
    }
    if (!j->store_failures++) /* once per outage, not once per retry */
        fk_log(FK_LOG_ERROR, "state_not_stored",
               "job=%lld round=%d error=\"%s\" action=\"the job takes no updates and retries "
               "every %.0f s; free space in the state directory\"",
               (long long)j->id, j->round, err->msg, STALL_RETRY_SECONDS);
    free_tasks(j);
    j->stalled = 1;
    j->deadline = now + STALL_RETRY_SECONDS;
}

/* A step's writes were stored: end of an outage, if there was one. */
static void store_ok(job *j)
{
    if (j->store_failures)
        fk_log(FK_LOG_INFO, "state_stored_again", "job=%lld round=%d failed_tries=%d",
               (long long)j->id, j->round, j->store_failures);
    j->store_failures = 0;
}

/* Every planned client answered or reported that it cannot: waiting longer changes nothing.
 * Clients whose session ended may still come back, so a phase that needs them for its quorum
 * waits for them until its deadline (as before there was a session to watch). */
static int phase_complete(const job *j)
{
    return j->state == FK_JOB_RUNNING && !j->stalled && !j->busy && !j->pins && j->n_slots > 0 &&
           j->answered + j->failed == j->n_slots && j->n_role_gone == 0 &&
           (j->n_gone == 0 || j->answered >= quorum(j));
}

/* The phase's deadline passed with a planned role client still gone (left, or its session
 * expired, and not back): the job's result needs that client (dica/udica's unseen domain,
 * fedrf-tca's target site), so the job fails naming it, rather than ending "done" without
 * the result it exists for. The attempt is stored closed like a missed quorum's last one. */
static void fail_role_gone(fk_engine *e, job *j, double now)
{
    fk_store_round r = {.job = j->id, .round = j->round, .attempt = j->attempt, .closed = 2};
    count_dropouts(j, &r);
    r.participants = j->answered;
    r.loss = r.accuracy = r.error = r.misclust = r.ari = r.rmse = r.model_error = NAN;
    e->stats.dropouts += (uint64_t)r.dropouts;
    const slot *first = NULL;
    for (int i = 0; i < j->n_slots && !first; i++)
        if (j->slots[i].gone && role_of(j, j->slots[i].client))
            first = &j->slots[i];
    int more = j->n_role_gone - 1; /* first is never NULL while n_role_gone > 0 */
    const char *who = first ? j->conf.clients[first->client] : "?";
    const char *role = first ? role_of(j, first->client) : "?";
    fk_err err = {0};
    fk_err_set(&err, FK_ESTATE,
               "client %.100s (%s) left during round %d phase %d and did not come back before "
               "the phase's deadline (%g s)%s: the job's result needs it; its session ended (it "
               "sent Leave, or 3 heartbeat intervals passed with no call, no byte received and "
               "no connection close); restart the client and submit the job again "
               "(--wait_clients waits for it at submit)",
               who, role, j->round, j->phase,
               j->conf.deadline,
               more <= 0 ? "" : more == 1 ? " (and 1 more role client)" : " (and more role clients)");
    fk_err serr = {0};
    if (fk_store_round_close(e->o.store, &r, &serr))
        fk_log(FK_LOG_ERROR, "state_not_stored", "job=%lld error=\"%s\"", (long long)j->id,
               serr.msg);
    fail(e, j, &err, now);
}

/* A complete phase closes at once: aggregated with quorum, else a new attempt. Timed (wall,
 * CPU, and the store's commits) for the stats: the round overhead of the server. */
static void end_phase(fk_engine *e, job *j, double now)
{
    assert(!j->busy);
    fk_store_stats s0, s1;
    fk_store_stats_get(e->o.store, &s0);
    double t0 = mono_seconds(), c0 = cpu_seconds();
    int outer = !e->ending++; /* an aggregation error may end the phase again, inside */
    if (j->n_role_gone > 0)
        fail_role_gone(e, j, now);
    else if (j->answered >= quorum(j))
        close_phase(e, j, now);
    else
        retry_round(e, j, now, NULL);
    e->ending--;
    if (!outer)
        return;
    fk_store_stats_get(e->o.store, &s1);
    e->stats.phase_ends++;
    e->stats.end_seconds += mono_seconds() - t0;
    e->stats.end_cpu_seconds += cpu_seconds() - c0;
    e->stats.end_commit_seconds += s1.commit_seconds - s0.commit_seconds;
}

/* A stalled job's retry: rebuild from the store, then the step it could not store. */
static void unstall(fk_engine *e, job *j, double now)
{
    fk_err err = {0};
    j->stalled = 0;
    int rc = reload(e, j, now, &err);
    if (rc)
        store_failed(e, j, rc, &err, now);
    else if (phase_complete(j))
        end_phase(e, j, now);
}

/* --------------------------------------------------------- job table */

FK_CHECKRETURN static int job_new(fk_engine *e, int64_t id, const char *config, job **out, fk_err *err)
{
    *out = NULL;
    job *j = calloc(1, sizeof *j);
    if (!j)
        return fk_err_set(err, FK_ENOMEM, "out of memory for a job");
    j->id = id;
    j->state = FK_JOB_RUNNING;
    quality_reset(j);
    j->config = strdup(config);
    int rc = j->config ? fk_jobconf_parse(&j->conf, config, "job config", err)
                       : fk_err_set(err, FK_ENOMEM, "out of memory for a job");
    /* server.* parameters are the server's own (below): a job file cannot set them. */
    for (int i = 0; !rc && i < j->conf.params.count; i++)
        if (!strncmp(j->conf.params.items[i].key, "server.", 7))
            rc = fk_err_set(err, FK_EINVAL,
                            "job key '%s': server.* keys are set by the server, never by a "
                            "job; remove it from the job file",
                            j->conf.params.items[i].key);
    /* The server's update limit reaches the method as a job parameter. */
    if (!rc && e->o.max_update) {
        char v[32];
        snprintf(v, sizeof v, "%llu", (unsigned long long)e->o.max_update);
        if (fk_params_set(&j->conf.params, FK_JOB_SERVER_MAX_UPDATE, v))
            rc = fk_err_set(err, FK_ENOMEM, "out of memory for a job");
    }
    if (!rc) {
        j->m = (e->o.find ? e->o.find : fk_method_find)(j->conf.method, err);
        if (!j->m)
            rc = err ? err->code : FK_ENOTFOUND;
        else
            fk_jobconf_set_method(&j->conf, j->m);
    }
    if (!rc) {
        j->refusals = calloc((size_t)j->conf.n_clients, sizeof *j->refusals);
        j->excluded = calloc((size_t)j->conf.n_clients, 1);
        if (!j->refusals || !j->excluded)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory for a job");
    }
    /* the role clients (client_roles): a phase waits for one whose session ended */
    fk_err rerr = {0};
    if (!rc && j->m->client_roles) {
        j->roles = calloc((size_t)j->conf.n_clients, sizeof *j->roles);
        if (!j->roles)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory for a job");
        else if (j->m->client_roles(&j->conf.params, j->conf.n_clients, j->roles, &rerr)) {
            fk_log(FK_LOG_WARN, "client_roles_unknown",
                   "job=%lld error=\"%s\" action=\"every client is waited for as a training "
                   "client\"",
                   (long long)id, rerr.msg);
            free(j->roles);
            j->roles = NULL;
        }
    }
    if (rc) {
        job_free(j);
        return rc;
    }
    *out = j;
    return FK_OK;
}

FK_CHECKRETURN static int add_job(fk_engine *e, job *j, fk_err *err)
{
    if (e->n_jobs == e->cap) {
        int cap = e->cap ? 2 * e->cap : 8;
        job **g = realloc(e->jobs, (size_t)cap * sizeof *g);
        if (!g)
            return fk_err_set(err, FK_ENOMEM, "out of memory for the job table");
        e->jobs = g;
        e->cap = cap;
    }
    e->jobs[e->n_jobs++] = j;
    return FK_OK;
}

/* Drop jobs that reached a terminal state. */
static void reap(fk_engine *e)
{
    int k = 0;
    for (int i = 0; i < e->n_jobs; i++) {
        if (e->jobs[i]->state == FK_JOB_RUNNING || e->jobs[i]->busy ||
            e->jobs[i]->pins) /* busy or pinned: freed once done (work done, check end) */
            e->jobs[k++] = e->jobs[i];
        else
            job_free(e->jobs[i]);
    }
    e->n_jobs = k;
}

static job *find_job(fk_engine *e, int64_t id)
{
    for (int i = 0; i < e->n_jobs; i++)
        if (e->jobs[i]->id == id && e->jobs[i]->state == FK_JOB_RUNNING)
            return e->jobs[i];
    return NULL;
}

int fk_engine_open(fk_engine **out, const fk_engine_opts *o, double now, fk_err *err)
{
    *out = NULL;
    if (!o->store || !o->codec.encode || !o->codec.decode)
        return fk_err_set(err, FK_EINVAL, "engine needs a store and a codec");
    fk_engine *e = calloc(1, sizeof *e);
    if (!e)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the engine");
    e->o = *o;
    int64_t *ids;
    int n;
    int rc = fk_store_job_ids(o->store, FK_JOB_RUNNING, &ids, &n, err);
    if (rc) {
        free(e);
        return rc;
    }
    for (int i = 0; i < n; i++) {
        fk_store_job row;
        fk_err jerr = {0};
        job *j = NULL;
        rc = fk_store_job_get(o->store, ids[i], &row, &jerr);
        if (!rc) {
            rc = job_new(e, ids[i], row.config, &j, &jerr);
            fk_store_job_free(&row);
        }
        if (!rc && (rc = add_job(e, j, &jerr)))
            job_free(j);
        if (!rc && (rc = reload(e, j, now, &jerr)) && (rc == FK_EIO || rc == FK_ENOMEM)) {
            store_failed(e, j, rc, &jerr, now); /* the server runs; the job waits for space */
            rc = FK_OK;
        }
        /* A stored row that fails its checksum stops the start, as a damaged file does: the
         * job is neither failed nor run on other bytes; the message says how to restore. */
        if (rc == FK_EIO || rc == FK_ENOMEM || (rc == FK_EFORMAT && fk_store_damaged(o->store))) {
            fk_err_prefix(&jerr, rc, "resuming job %lld: ", (long long)ids[i]);
            *err = jerr;
            free(ids);
            fk_engine_close(e);
            return rc;
        }
        if (rc && j) {
            fail(e, j, &jerr, now);
        } else if (rc) {
            fk_err serr = {0};
            if (fk_store_job_set_state(o->store, ids[i], FK_JOB_FAILED, jerr.msg, now, &serr))
                fk_log(FK_LOG_ERROR, "job_not_failed", "job=%lld error=\"%s\" cause=\"%s\"",
                       (long long)ids[i], serr.msg, jerr.msg);
        } else {
            fk_log(FK_LOG_INFO, "job_resumed", "job=%lld round=%d attempt=%d phase=%d answered=%d",
                   (long long)j->id, j->round, j->attempt, j->phase, j->answered);
            if (phase_complete(j))
                end_phase(e, j, now);
        }
    }
    free(ids);
    reap(e);
    *out = e;
    return FK_OK;
}

void fk_engine_close(fk_engine *e)
{
    if (!e)
        return;
    assert(e->in_flight == 0); /* the caller waits for every work (or abandons it) first */
    fk_store_close(e->reader);
    for (int i = 0; i < e->n_jobs; i++)
        job_free(e->jobs[i]);
    free(e->jobs);
    free(e);
}

int fk_engine_running(const fk_engine *e)
{
    int n = 0;
    for (int i = 0; i < e->n_jobs; i++)
        n += e->jobs[i]->state == FK_JOB_RUNNING;
    return n;
}

void fk_engine_set_offload(fk_engine *e, int (*submit)(void *ud, fk_engine_work *w), void *ud)
{
    e->offload = submit;
    e->offload_ud = ud;
    assert(e->in_flight == 0); /* the reader is the works' */
    fk_store_close(e->reader);
    e->reader = NULL;
    fk_err err = {0};
    if (submit && fk_store_open_reader(&e->reader, e->o.store, &err) && err.code != FK_ESTATE)
        fk_log(FK_LOG_WARN, "store_reader_unavailable", "error=\"%s\"", err.msg);
}

int fk_engine_in_flight(const fk_engine *e)
{
    return e->in_flight;
}

void fk_engine_work_done(fk_engine *e, fk_engine_work *w, double now)
{
    assert(w->offloaded);
    /* The round overhead counts the work's thread as well as the loop's share. */
    fk_store_stats s0, s1;
    fk_store_stats_get(e->o.store, &s0);
    double t0 = mono_seconds(), c0 = cpu_seconds();
    e->stats.end_seconds += w->wall;
    e->stats.end_cpu_seconds += w->cpu;
    e->ending++;
    work_finish(e, w, now);
    e->ending--;
    fk_store_stats_get(e->o.store, &s1);
    e->stats.end_seconds += mono_seconds() - t0;
    e->stats.end_cpu_seconds += cpu_seconds() - c0;
    e->stats.end_commit_seconds += s1.commit_seconds - s0.commit_seconds;
    reap(e);
}

void fk_engine_work_abandon(fk_engine *e, fk_engine_work *w)
{
    assert(w->j->busy && e->in_flight > 0);
    w->j->busy = 0;
    e->in_flight--;
    work_free(w);
}

uint64_t fk_engine_generation(const fk_engine *e)
{
    return e->generation;
}

void fk_engine_stats_get(const fk_engine *e, fk_engine_stats *out)
{
    *out = e->stats;
    out->jobs_stalled = 0;
    out->in_flight = e->in_flight;
    for (int i = 0; i < e->n_jobs; i++)
        out->jobs_stalled += e->jobs[i]->state == FK_JOB_RUNNING && e->jobs[i]->stalled;
}

/* -------------------------------------------------------------- events */

int fk_engine_submit(fk_engine *e, const char *config, double now, int64_t *id, fk_err *err)
{
    *id = 0;
    job *j;
    int rc = job_new(e, 0, config, &j, err);
    if (rc)
        return rc;
    /* A key neither the engine nor the method reads is a typo: refused, never defaulted. */
    if ((rc = fk_jobkeys_check(&j->conf.params, j->m, NULL, 0, err))) {
        fk_err_prefix(err, rc, "job config: ");
        job_free(j);
        return rc;
    }
    /* A method that needs a phase's updates at once makes the server hold them: n_clients
     * updates of up to max_update bytes each (issue 35). */
    uint64_t budget = e->o.aggregate_memory, per = e->o.max_update;
    if (budget && per && !fk_method_folds(j->m) &&
        (uint64_t)j->conf.n_clients > budget / per) {
        rc = fk_err_set(err, FK_ELIMIT,
                        "job type %s aggregates a phase's updates all at once: %d clients x "
                        "%llu bytes (the largest update the server takes) exceed the server's "
                        "aggregation memory budget of %llu bytes; start the server with a larger "
                        "--aggregate_memory_mb (0: no budget), or use fewer clients",
                        j->m->name, j->conf.n_clients, (unsigned long long)per,
                        (unsigned long long)budget);
        job_free(j);
        return rc;
    }
    /* The method checks its own hyperparameters before anything is stored. */
    rc = j->m->server_init(&j->srv, &j->conf.params, j->conf.n_clients, j->conf.seed, err);
    if (rc) {
        fk_err_prefix(err, rc, "job config: method %s: ", j->m->name);
        job_free(j);
        return rc;
    }
    uint8_t *ckpt = NULL;
    size_t len = 0;
    fk_store *st = e->o.store;
    rc = state_blob(&e->o.codec, j->m, j->srv, 0, &ckpt, &len, err);
    if (!rc)
        rc = fk_store_begin(st, err);
    if (!rc) {
        rc = fk_store_job_insert(st, j->m->name, config, now, &j->id, err);
        if (!rc)
            rc = fk_store_checkpoint_put(st, j->id, 0, ckpt, len, err);
        if (!rc)
            rc = fk_store_job_set_position(st, j->id, 1, 0, 0, now, err);
        if (!rc)
            rc = fk_store_commit(st, err);
        else
            fk_store_rollback(st);
    }
    free(ckpt);
    if (!rc)
        rc = add_job(e, j, err);
    if (rc) {
        job_free(j);
        return rc;
    }
    *id = j->id;
    j->round = 1;
    fk_log(FK_LOG_INFO, "job_submitted", "job=%lld method=%s dataset=%s clients=%d rounds=%d",
           (long long)j->id, j->m->name, j->conf.dataset, j->conf.n_clients, j->conf.rounds);
    fk_err serr = {0};
    rc = start_round(e, j, now, &serr);
    if (rc)
        store_failed(e, j, rc, &serr, now);
    reap(e);
    return FK_OK;
}

int fk_engine_cancel(fk_engine *e, int64_t id, double now, fk_err *err)
{
    job *j = find_job(e, id);
    if (!j) {
        fk_store_job row;
        int rc = fk_store_job_get(e->o.store, id, &row, err);
        if (rc)
            return rc;
        int state = row.state;
        fk_store_job_free(&row);
        return fk_err_set(err, FK_ESTATE, "job %lld is already %s", (long long)id,
                          fk_job_state_name(state));
    }
    int rc = fk_store_job_set_state(e->o.store, id, FK_JOB_CANCELLED, "cancelled by an operator",
                                    now, err);
    if (rc)
        return rc;
    j->state = FK_JOB_CANCELLED;
    fk_log(FK_LOG_INFO, "job_cancelled", "job=%lld round=%d", (long long)id, j->round);
    retain_ended(e, j);
    reap(e);
    return FK_OK;
}

int fk_engine_pull(fk_engine *e, const char *identity, double now, fk_task_ref *t, fk_err *err)
{
    (void)now;
    memset(t, 0, sizeof *t);
    for (int i = 0; i < e->n_jobs; i++) {
        job *j = e->jobs[i];
        int c = fk_jobconf_client_index(&j->conf, identity);
        /* a job that ended while a check had it pinned stays listed until the check is back */
        slot *s = c < 0 || j->busy || j->state != FK_JOB_RUNNING ? NULL : find_slot(j, c);
        if (!s || s->answered || s->failed || !s->task)
            continue;
        *t = (fk_task_ref){.job = j->id, .round = j->round, .attempt = j->attempt,
                           .phase = j->phase, .client = c, .n_clients = j->conf.n_clients,
                           .seed = j->conf.seed, .method = j->m->name,
                           .dataset = j->conf.dataset, .config = j->config, .task = s->task,
                           .task_len = s->task_len, .deadline = j->deadline};
        snprintf(t->idem, sizeof t->idem, "j%lld-r%d-a%d-p%d-c%d", (long long)j->id, j->round,
                 j->attempt, j->phase, c);
        return FK_OK;
    }
    return fk_err_set(err, FK_ENOTFOUND, "no task for '%s' right now", identity);
}

/* One client's update (or its part in a failed aggregation) was refused: the client is a
 * dropout of this phase with the reason logged and counted; after max_refusals of them it is
 * excluded from the job's later phases (job status says why). Memory only: a restarted server
 * counts again from zero. */
static void refuse(fk_engine *e, job *j, slot *s, const char *reason)
{
    const char *who = j->conf.clients[s->client];
    if (!s->failed)
        j->failed++;
    s->failed = s->refused = 1;
    snprintf(s->why, sizeof s->why, "update refused: %s", reason);
    for (char *c = s->why; *c; c++) /* one log line, one quoted value */
        if (*c == '"' || *c == '\n')
            *c = '\'';
    int n = ++j->refusals[s->client];
    e->stats.updates_refused++;
    fk_log(FK_LOG_WARN, "update_refused",
           "job=%lld round=%d attempt=%d phase=%d client=%s refusals=%d reason=\"%s\"",
           (long long)j->id, j->round, j->attempt, j->phase, who, n, s->why);
    if (j->conf.max_refusals <= 0 || n < j->conf.max_refusals || j->excluded[s->client])
        return;
    j->excluded[s->client] = 1;
    e->stats.clients_excluded++;
    size_t off = strlen(j->note);
    snprintf(j->note + off, sizeof j->note - off, "%sclient %s excluded after %d refused updates "
             "(last: %.160s)", off ? "; " : "", who, n, s->why);
    fk_log(FK_LOG_WARN, "client_excluded", "job=%lld round=%d client=%s refusals=%d",
           (long long)j->id, j->round, who, n);
}

/* Why an update cannot be counted (FK_OK when it can). */
FK_CHECKRETURN static int check_push(fk_engine *e, const fk_push *p, job **jo, slot **so, fk_err *err)
{
    job *j = find_job(e, p->job);
    if (!j) {
        fk_store_job row;
        int rc = fk_store_job_get(e->o.store, p->job, &row, err);
        if (rc)
            return rc;
        int state = row.state;
        fk_store_job_free(&row);
        return fk_err_set(err, FK_ESTATE, "job %lld is %s; its update is no longer needed",
                          (long long)p->job, fk_job_state_name(state));
    }
    if (j->stalled)
        return fk_err_set(err, FK_ELIMIT, /* not FK_EIO: other jobs' staged updates stay */
                          "job %lld takes no updates while its state cannot be stored (state "
                          "directory full?); send it again later",
                          (long long)j->id);
    if (j->busy && p->round == j->round && p->attempt == j->attempt && p->phase == j->phase)
        return fk_err_set(err, FK_ESTATE,
                          "late update for job %lld round %d attempt %d phase %d: the phase "
                          "closed and is being aggregated",
                          (long long)j->id, p->round, p->attempt, p->phase);
    if (j->busy || p->round != j->round || p->attempt != j->attempt || p->phase != j->phase)
        return fk_err_set(err, FK_ESTATE,
                          "late update for job %lld round %d attempt %d phase %d: the job is at "
                          "round %d attempt %d phase %d",
                          (long long)j->id, p->round, p->attempt, p->phase, j->round, j->attempt,
                          j->phase);
    int c = fk_jobconf_client_index(&j->conf, p->identity);
    slot *s = c < 0 ? NULL : find_slot(j, c);
    if (!s)
        return fk_err_set(err, FK_ESTATE, "client '%s' was not asked in job %lld round %d",
                          p->identity, (long long)j->id, j->round);
    slot_back(j, s); /* its session had ended, but here it is: counted like any other */
    if (s->failed && s->refused)
        return fk_err_set(err, FK_ESTATE,
                          "client '%s' counts as a dropout of job %lld round %d phase %d (%.300s)",
                          p->identity, (long long)j->id, j->round, j->phase, s->why);
    if (s->failed)
        return fk_err_set(err, FK_ESTATE,
                          "client '%s' reported a failure for job %lld round %d phase %d; it "
                          "counts as a dropout of this phase",
                          p->identity, (long long)j->id, j->round, j->phase);
    if (s->answered)
        return fk_err_set(err, FK_ESTATE,
                          "client '%s' already answered job %lld round %d phase %d with another "
                          "update; the first one counts",
                          p->identity, (long long)j->id, j->round, j->phase);
    *jo = j;
    *so = s;
    return FK_OK;
}

int fk_engine_push_stage(fk_engine *e, const fk_push *p, double now, int *dup, fk_err *err)
{
    *dup = 0;
    if (!p->idem || !*p->idem || strlen(p->idem) > 127 || !p->identity)
        return fk_err_set(err, FK_EINVAL, "update without a valid idempotency id");
    int known = FK_STORE_IDEM_NEW;
    uint8_t digest[32]; /* hashed once: the resend check and the stored row */
    int rc = p->sha256 ? fk_store_update_match_digest(e->o.store, p->idem, p->identity, p->sha256,
                                                      &known, err)
                       : fk_store_update_match(e->o.store, p->idem, p->identity, p->blob, p->len,
                                               &known, digest, err);
    if (p->sha256)
        memcpy(digest, p->sha256, sizeof digest);
    if (rc)
        return rc;
    if (known != FK_STORE_IDEM_NEW) { /* a resend, or the id reused for other bytes */
        *dup = known;
        return FK_OK;
    }
    job *j = NULL;
    slot *s = NULL;
    if ((rc = check_push(e, p, &j, &s, err)))
        return rc;
    fk_bundle b;
    fk_bundle_init(&b);
    /* the caller's decoded copy, when it has one: one pass over a large update less */
    rc = p->msg ? FK_OK : e->o.codec.decode(p->blob, p->len, &b, err);
    if (!rc) /* the report and the method's checks, before anything is stored */
        rc = fk_update_check_report(&p->report, s->client, err);
    if (!rc && j->m->check_update) {
        const fk_engine_check *c = p->check;
        if (c && c->ran && c->j_ == j && c->srv == j->srv && c->round == j->round &&
            c->attempt == j->attempt && c->phase == j->phase && c->client == s->client) {
            rc = c->rc; /* the same op on the same state and bytes, run off the loop */
            if (rc)
                *err = c->err;
        } else {
            fk_update up = {.client = s->client, .msg = p->msg ? *p->msg : b, .report = p->report};
            rc = j->m->check_update(j->srv, j->round, j->phase, &up, err);
        }
        if (rc && rc != FK_ENOMEM)
            rc = err->code = FK_EINVAL;
        if (rc == FK_EINVAL) {
            refuse(e, j, s, err->msg);
            fk_err_prefix(err, rc, "update from '%s' for job %lld round %d phase %d refused: ",
                          p->identity, (long long)j->id, j->round, j->phase);
        }
    } else if (rc == FK_EINVAL) {
        refuse(e, j, s, err->msg);
        fk_err_prefix(err, rc, "update from '%s' refused: ", p->identity);
    }
    fk_bundle_close(&b);
    if (rc) {
        if (rc != FK_EINVAL)
            fk_err_prefix(err, rc, "update from '%s': ", p->identity);
        return rc;
    }
    fk_store_update u = {.job = j->id, .round = j->round, .attempt = j->attempt,
                         .phase = j->phase, .client = s->client, .identity = p->identity,
                         .idem = p->idem, .report = p->report, .blob = p->blob, .len = p->len,
                         .received = now, .sha256 = digest};
    return fk_store_update_put(e->o.store, &u, dup, err);
}

int fk_engine_check_begin(fk_engine *e, int64_t id, int round, int attempt, int phase,
                          const char *identity, fk_engine_check *c)
{
    memset(c, 0, sizeof *c);
    job *j = find_job(e, id);
    if (!j || j->stalled || j->busy || j->round != round || j->attempt != attempt ||
        j->phase != phase || !j->m->check_update)
        return 0;
    int k = fk_jobconf_client_index(&j->conf, identity);
    slot *s = k < 0 ? NULL : find_slot(j, k);
    /* the same test as stage's: a slot failed only because its client was taken for gone
     * still takes the update, so it is worth checking too */
    if (!s || s->answered || (s->failed && !s->gone))
        return 0;
    j->pins++;
    *c = (fk_engine_check){.j_ = j,
                           .m = j->m,
                           .srv = j->srv,
                           .job = id,
                           .round = round,
                           .attempt = attempt,
                           .phase = phase,
                           .client = k};
    return 1;
}

void fk_engine_check_run(fk_engine_check *c, const fk_bundle *msg, const fk_report *report)
{
    /* check_update reads the method state, never changes it (method.h); the pin keeps the
     * loop from changing or freeing it meanwhile */
    fk_update up = {.client = c->client, .msg = *msg, .report = *report};
    c->err = (fk_err){0};
    c->rc = c->m->check_update(c->srv, c->round, c->phase, &up, &c->err);
    c->ran = 1;
}

int fk_engine_check_end(fk_engine *e, fk_engine_check *c)
{
    job *j = c->j_;
    if (!j)
        return 0;
    assert(j->pins > 0);
    j->pins--;
    if (j->state != FK_JOB_RUNNING) { /* cancelled or failed while pinned: free it now */
        c->j_ = NULL;
        reap(e);
        return 0;
    }
    /* phase_complete is false while a pin is held, so pushes and departures counted meanwhile
     * could not end the phase: the caller settles it now that the last pin may be gone */
    return phase_complete(j);
}

void fk_engine_push_apply(fk_engine *e, const fk_push *p, double now)
{
    job *j = find_job(e, p->job);
    if (!j || j->busy || p->round != j->round || p->attempt != j->attempt || p->phase != j->phase)
        return; /* stored, but its phase is already over (as for a late update) */
    int c = fk_jobconf_client_index(&j->conf, p->identity);
    slot *s = c < 0 ? NULL : find_slot(j, c);
    if (!s) { /* stage checked the sender: a caller passing other data than it staged */
        fk_log(FK_LOG_ERROR, "update_not_counted", "job=%lld identity=\"%s\" reason=not_planned",
               (long long)j->id, p->identity);
        return;
    }
    if (s->answered)
        return;
    s->answered = 1;
    j->answered++;
    if (phase_complete(j))
        end_phase(e, j, now);
    reap(e);
}

void fk_engine_settle(fk_engine *e, int64_t id, double now)
{
    job *j = find_job(e, id);
    if (j && phase_complete(j))
        end_phase(e, j, now);
    reap(e);
}

int fk_engine_push(fk_engine *e, const fk_push *p, double now, int *dup, fk_err *err)
{
    *dup = 0;
    int rc = fk_store_begin(e->o.store, err);
    if (rc)
        return rc;
    rc = fk_engine_push_stage(e, p, now, dup, err);
    if (rc) {
        fk_store_rollback(e->o.store);
        if (rc == FK_EINVAL)
            fk_engine_settle(e, p->job, now);
        return rc;
    }
    if ((rc = fk_store_commit(e->o.store, err)))
        return rc;
    if (!*dup)
        fk_engine_push_apply(e, p, now);
    return FK_OK;
}

int fk_engine_fail(fk_engine *e, const fk_push *p, const char *reason, double now, fk_err *err)
{
    if (!p->identity)
        return fk_err_set(err, FK_EINVAL, "failure report without a client identity");
    job *j = NULL;
    slot *s = NULL;
    int rc = check_push(e, p, &j, &s, err);
    if (rc)
        return rc;
    s->failed = 1;
    snprintf(s->why, sizeof s->why, "client failed: %s", reason && *reason ? reason : "no reason");
    for (char *c = s->why; *c; c++) /* one log line, one quoted value */
        if (*c == '"' || *c == '\n')
            *c = '\'';
    j->failed++;
    fk_log(FK_LOG_WARN, "client_failed", "job=%lld round=%d attempt=%d phase=%d client=%s "
           "reason=\"%s\"", (long long)j->id, j->round, j->attempt, j->phase, p->identity, s->why);
    if (phase_complete(j))
        end_phase(e, j, now);
    reap(e);
    return FK_OK;
}

int fk_engine_client_jobs(const fk_engine *e, const char *identity, int64_t *ids, int cap)
{
    int n = 0;
    for (int i = 0; i < e->n_jobs; i++) {
        const job *j = e->jobs[i];
        if (j->state != FK_JOB_RUNNING || fk_jobconf_client_index(&j->conf, identity) < 0)
            continue;
        if (n == cap)
            return -1;
        ids[n++] = j->id;
    }
    return n;
}

int fk_engine_task_open(const fk_engine *e, int64_t id, int round, int attempt, int phase,
                        const char *identity)
{
    for (int i = 0; i < e->n_jobs; i++) {
        job *j = e->jobs[i];
        if (j->id != id || j->state != FK_JOB_RUNNING)
            continue;
        if (j->stalled || j->busy || j->round != round || j->attempt != attempt ||
            j->phase != phase)
            return 0;
        int c = fk_jobconf_client_index(&j->conf, identity);
        slot *s = c < 0 ? NULL : find_slot(j, c);
        return s && !s->answered && (!s->failed || s->gone);
    }
    return 0;
}

void fk_engine_set_presence(fk_engine *e, int (*gone)(void *ud, const char *identity), void *ud)
{
    e->gone = gone;
    e->gone_ud = ud;
}

/* The slot identity holds in job j's open phase, or NULL. */
static slot *open_slot(job *j, const char *identity)
{
    if (j->state != FK_JOB_RUNNING || j->stalled || j->busy)
        return NULL;
    int c = fk_jobconf_client_index(&j->conf, identity);
    return c < 0 ? NULL : find_slot(j, c);
}

void fk_engine_client_gone(fk_engine *e, const char *identity, double now)
{
    for (int i = 0; i < e->n_jobs; i++) {
        job *j = e->jobs[i];
        slot *s = open_slot(j, identity);
        if (!s || s->answered || s->failed || !s->task)
            continue;
        slot_gone(j, s);
        fk_log(FK_LOG_INFO, "planned_client_gone",
               "job=%lld round=%d attempt=%d phase=%d client=%s answered=%d planned=%d",
               (long long)j->id, j->round, j->attempt, j->phase, identity, j->answered,
               j->n_slots);
        if (phase_complete(j))
            end_phase(e, j, now);
    }
    reap(e);
}

void fk_engine_client_back(fk_engine *e, const char *identity)
{
    for (int i = 0; i < e->n_jobs; i++) {
        job *j = e->jobs[i];
        slot *s = open_slot(j, identity);
        if (s && s->gone) {
            slot_back(j, s);
            e->generation++; /* it has a task again: a waiting poll of it may take it */
        }
    }
}

int fk_engine_tick(fk_engine *e, double now, double *next, fk_err *err)
{
    (void)err;
    for (int i = 0; i < e->n_jobs; i++) {
        job *j = e->jobs[i];
        if (j->state != FK_JOB_RUNNING || j->busy || j->pins ||
            (now < j->deadline && !phase_complete(j)))
            continue; /* a busy job goes on when its work is done; a pinned one at the next
                       * tick after its checks are back */
        if (j->stalled)
            unstall(e, j, now);
        else
            end_phase(e, j, now);
    }
    reap(e);
    double soonest = INFINITY;
    for (int i = 0; i < e->n_jobs; i++)
        if (!e->jobs[i]->busy && e->jobs[i]->deadline < soonest)
            soonest = e->jobs[i]->deadline;
    if (next)
        *next = soonest;
    return FK_OK;
}

int fk_engine_status(fk_engine *e, int64_t id, fk_job_status *s, fk_err *err)
{
    memset(s, 0, sizeof *s);
    fk_store_job row;
    int rc = fk_store_job_get(e->o.store, id, &row, err);
    if (rc)
        return rc;
    s->job = id;
    s->state = row.state;
    s->round = row.round;
    s->attempt = row.attempt;
    s->phase = row.phase;
    snprintf(s->method, sizeof s->method, "%s", row.method);
    snprintf(s->failure, sizeof s->failure, "%s", row.failure);
    job *j = find_job(e, id);
    fk_jobconf conf;
    fk_err ignore = {0};
    if (j) { /* running: its parsed config is in memory (a parse is O(K log K) at K clients) */
        snprintf(s->name, sizeof s->name, "%s", j->conf.name);
        s->rounds = j->conf.rounds;
        s->n_clients = j->conf.n_clients;
    } else if (fk_jobconf_parse(&conf, row.config, "job config", &ignore) == FK_OK) {
        const fk_method *m = (e->o.find ? e->o.find : fk_method_find)(conf.method, &ignore);
        if (m)
            fk_jobconf_set_method(&conf, m);
        snprintf(s->name, sizeof s->name, "%s", conf.name);
        s->rounds = conf.rounds;
        s->n_clients = conf.n_clients;
        fk_jobconf_close(&conf);
    } else {
        fk_jobconf_close(&conf);
    }
    fk_store_job_free(&row);
    if (j && !s->failure[0])
        snprintf(s->failure, sizeof s->failure, "%s", j->note);
    if (j && !s->failure[0]) /* a running job: what the clients missing this phase said */
        client_causes(j, s->failure, sizeof s->failure);
    if (j) {
        s->aggregating = j->busy;
        s->planned = j->n_slots;
        s->answered = j->answered;
        s->quorum = quorum(j);
        s->deadline = j->deadline;
    }
    return FK_OK;
}

int fk_engine_result(fk_engine *e, int64_t id, fk_bundle *model, int *round, fk_err *err)
{
    fk_bundle_init(model);
    void *blob;
    size_t len;
    int r = 0;
    int rc = fk_store_model_get(e->o.store, id, -1, &blob, &len, &r, err);
    if (rc == FK_ENOTFOUND)
        return fk_err_set(err, FK_ENOTFOUND,
                          "job %lld has no model yet (no round closed); see 'fedkern job status'",
                          (long long)id);
    if (rc)
        return rc;
    rc = e->o.codec.decode(blob, len, model, err);
    free(blob);
    if (round)
        *round = r;
    return rc;
}

int fk_engine_has_job(const fk_engine *e, int64_t id)
{
    return find_job((fk_engine *)e, id) != NULL;
}
