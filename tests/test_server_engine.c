/* Round engine tests with two test-only methods (a one-phase federated mean
 * and a two-phase mean + variance) and a test codec: same model as the
 * simulator, dropouts at the deadline, quorum retries and failure, resent
 * updates, full disk, and SIGKILL of a forked server mid-job. */
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/methods/aggregate.h"
#include "common/methods/sim.h"
#include "server/engine.h"
#include "tests/bundle_assert.h"

enum { N_CLIENTS = 6, DIM = 3 };

/* ------------------------------------------------------------ test codec */

typedef struct wire_head {
    char name[FK_TENSOR_NAME_MAX];
    int32_t ndim;
    uint64_t shape[FK_TENSOR_MAX_DIMS];
} wire_head;

static int t_encode(const fk_bundle *b, uint8_t **out, size_t *len, fk_err *err)
{
    size_t n = sizeof(uint32_t);
    for (size_t i = 0; i < b->count; i++)
        n += sizeof(wire_head) + b->items[i].len * sizeof(double);
    uint8_t *buf = malloc(n);
    if (!buf)
        return fk_err_set(err, FK_ENOMEM, "test codec: out of memory");
    uint32_t count = (uint32_t)b->count;
    memcpy(buf, &count, sizeof count);
    size_t off = sizeof count;
    for (size_t i = 0; i < b->count; i++) {
        const fk_tensor *t = &b->items[i];
        wire_head h;
        memset(&h, 0, sizeof h);
        memcpy(h.name, t->name, sizeof h.name);
        h.ndim = t->ndim;
        memcpy(h.shape, t->shape, sizeof h.shape);
        memcpy(buf + off, &h, sizeof h);
        off += sizeof h;
        memcpy(buf + off, t->data, t->len * sizeof(double));
        off += t->len * sizeof(double);
    }
    *out = buf;
    *len = n;
    return FK_OK;
}

static int t_decode(const uint8_t *buf, size_t len, fk_bundle *out, fk_err *err)
{
    uint32_t count;
    if (len < sizeof count)
        return fk_err_set(err, FK_EFORMAT, "test codec: %zu bytes is too short", len);
    memcpy(&count, buf, sizeof count);
    size_t off = sizeof count;
    for (uint32_t i = 0; i < count; i++) {
        wire_head h;
        if (len - off < sizeof h)
            return fk_err_set(err, FK_EFORMAT, "test codec: truncated header");
        memcpy(&h, buf + off, sizeof h);
        off += sizeof h;
        if (h.ndim < 0 || h.ndim > FK_TENSOR_MAX_DIMS || !memchr(h.name, 0, sizeof h.name))
            return fk_err_set(err, FK_EFORMAT, "test codec: bad tensor header");
        size_t n = 1;
        for (int d = 0; d < h.ndim; d++) {
            if (h.shape[d] > (len - off) / sizeof(double))
                return fk_err_set(err, FK_EFORMAT, "test codec: tensor larger than the message");
            n *= h.shape[d];
        }
        if (n > (len - off) / sizeof(double))
            return fk_err_set(err, FK_EFORMAT, "test codec: truncated tensor");
        double *d = fk_bundle_add(out, h.name, h.ndim, h.shape);
        if (!d)
            return fk_err_set(err, FK_ENOMEM, "test codec: out of memory");
        memcpy(d, buf + off, n * sizeof(double));
        off += n * sizeof(double);
    }
    if (off != len)
        return fk_err_set(err, FK_EFORMAT, "test codec: %zu trailing bytes", len - off);
    return FK_OK;
}

static const fk_blob_codec codec = {t_encode, t_decode};

#include "tests/support_fedmean.h"

/* fedmean whose last client has a role (a test-only "unseen" domain, as dica's holdout). */
static int roles_last_unseen(const fk_params *p, int n, const char **roles, fk_err *err)
{
    (void)p, (void)err;
    for (int i = 0; i < n; i++)
        roles[i] = i == n - 1 ? "unseen" : NULL;
    return FK_OK;
}

static fk_method roles_m, checked_m;
static int checks_run; /* fedmean-checked's check_update calls */

/* fedmean-checked: check_update refuses a delta whose first value is negative. */
static int check_first_positive(void *srv, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)srv, (void)round, (void)phase;
    checks_run++;
    const fk_tensor *d = fk_bundle_get(&up->msg, "delta");
    if (d && d->len > 0 && d->data[0] < 0)
        return fk_err_set(err, FK_EINVAL, "tensor 'delta': first value is negative");
    return FK_OK;
}

static const fk_method *find_test_method(const char *name, fk_err *err)
{
    if (!strcmp(name, "fedmean-checked")) {
        checked_m = fk_test_fedmean;
        checked_m.name = "fedmean-checked";
        checked_m.check_update = check_first_positive;
        return &checked_m;
    }
    if (strcmp(name, "fedmean-roles"))
        return fk_test_find_method(name, err);
    roles_m = fk_test_fedmean;
    roles_m.name = "fedmean-roles";
    roles_m.client_roles = roles_last_unseen;
    return &roles_m;
}

/* ------------------------------------------------------------- harness */

typedef struct fed {
    char dir[64];
    char path[128];
    fk_dataset data[N_CLIENTS];
    fk_store *st;
    fk_engine *e;
    double now;
    /* client side, per run */
    fk_jobconf conf;
    int have_conf;
    void *cli[N_CLIENTS];
    const fk_method *m;
    int pushes;
    unsigned gone; /* clients whose session ended, for the engine's presence callback */
    int asked;     /* presence callbacks made */
    int retain;    /* 1: the server's default retention; 0: update rows kept (the tests count
                    * the updates stored) */
} fed;

static void make_data(fed *f)
{
    for (int c = 0; c < N_CLIENTS; c++) {
        fk_dataset *ds = &f->data[c];
        assert_int_equal(fk_dataset_init(ds, (size_t)(15 + 4 * c), DIM, 0), FK_OK);
        snprintf(ds->name, sizeof ds->name, "c%d", c);
        fk_rng r;
        fk_rng_init(&r, 42, (uint64_t)c);
        for (size_t i = 0; i < ds->X.rows * DIM; i++)
            ds->X.data[i] = fk_rng_normal(&r) + 0.7 * c + 0.1 * (double)(i % DIM);
    }
}

/* fail_commits: commits that fail from the start, as on a disk full before the restart. */
static void open_engine_failing(fed *f, int fail_commits)
{
    fk_err err;
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    fk_store_retention keep;
    fk_store_retention_default(&keep);
    keep.keep_updates = !f->retain;
    fk_store_set_retention(f->st, &keep);
    fk_store_test_fail_commits(f->st, 0, fail_commits);
    fk_engine_opts o = {.store = f->st, .codec = codec, .find = find_test_method};
    if (fk_engine_open(&f->e, &o, f->now, &err))
        fail_msg("engine open: %s", err.msg);
}

static void open_engine(fed *f)
{
    open_engine_failing(f, 0);
}

static void close_clients(fed *f)
{
    for (int c = 0; c < N_CLIENTS; c++)
        if (f->cli[c])
            f->m->client_close(f->cli[c]);
    memset(f->cli, 0, sizeof f->cli);
    if (f->have_conf)
        fk_jobconf_close(&f->conf);
    f->have_conf = 0;
}

static void close_engine(fed *f)
{
    close_clients(f);
    fk_engine_close(f->e);
    fk_store_close(f->st);
    f->e = NULL;
    f->st = NULL;
}

static void remove_db(fed *f)
{
    char p[160];
    const char *suffix[] = {"", "-wal", "-shm", ".run"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", f->path, suffix[i]);
        unlink(p);
    }
}

static int setup(void **state)
{
    fed *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/fk-engine-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/state.db", f->dir);
    make_data(f);
    f->now = 1000.0;
    open_engine(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fed *f = *state;
    close_engine(f);
    remove_db(f);
    rmdir(f->dir);
    for (int c = 0; c < N_CLIENTS; c++)
        fk_dataset_close(&f->data[c]);
    free(f);
    return 0;
}

static char *job_text(const char *method, const char *extra)
{
    static char text[1024];
    snprintf(text, sizeof text,
             "method = %s\ndataset = synth\nclients = c0, c1, c2, c3, c4, c5\n"
             "rounds = 5\nseed = 11\ndeadline = 30\n%s",
             method, extra);
    return text;
}

static int64_t submit(fed *f, const char *text)
{
    fk_err err;
    int64_t id = 0;
    if (fk_engine_submit(f->e, text, f->now, &id, &err))
        fail_msg("submit: %s", err.msg);
    return id;
}

/* One client answers the task waiting for it, if any: 1 if it pushed (and
 * the push returned FK_OK), 0 if no task waits, <0 the push's error. */
static int answer_rc(fed *f, int c, int kill_after, fk_err *perr)
{
    char id[16];
    snprintf(id, sizeof id, "c%d", c);
    fk_task_ref t;
    fk_err err;
    int rc = fk_engine_pull(f->e, id, f->now, &t, &err);
    if (rc == FK_ENOTFOUND)
        return 0;
    assert_int_equal(rc, FK_OK);
    if (!f->have_conf) {
        /* The client builds its state from the job config carried by the task. */
        assert_int_equal(fk_jobconf_parse(&f->conf, t.config, "task", &err), FK_OK);
        f->have_conf = 1;
        f->m = find_test_method(t.method, &err);
        assert_non_null(f->m);
    }
    if (!f->cli[c])
        assert_int_equal(f->m->client_init(&f->cli[c], &f->conf.params, &f->data[c], t.client,
                                           t.n_clients, t.seed, &err),
                         FK_OK);
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    assert_int_equal(t_decode(t.task, t.task_len, &task, &err), FK_OK);
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(f->m->local_step(f->cli[c], &task, &up, &rep, &err), FK_OK);
    uint8_t *blob;
    size_t len;
    assert_int_equal(t_encode(&up, &blob, &len, &err), FK_OK);
    fk_push p = {.job = t.job, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                 .identity = id, .idem = t.idem, .blob = blob, .len = len, .report = rep};
    int dup = 0;
    rc = fk_engine_push(f->e, &p, f->now, &dup, perr);
    free(blob);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    if (rc)
        return rc;
    assert_int_equal(dup, 0);
    f->pushes++;
    if (f->pushes == kill_after)
        kill(getpid(), SIGKILL);
    return 1;
}

static int answer(fed *f, int c, int kill_after)
{
    fk_err err;
    int rc = answer_rc(f, c, kill_after, &err);
    if (rc < 0)
        fail_msg("push from c%d: %s", c, err.msg);
    return rc;
}

/* Drive the job until no job runs: clients not in `absent` answer in a
 * scrambled order; when nobody can answer, time jumps to the next deadline. */
static void run(fed *f, unsigned absent, int kill_after)
{
    fk_err err;
    for (int guard = 0; fk_engine_running(f->e) > 0; guard++) {
        assert_true(guard < 10000);
        int progress = 0;
        for (int k = 0; k < N_CLIENTS; k++) {
            int c = (5 * k + 2) % N_CLIENTS; /* arrival order differs from client order */
            if (!(absent >> c & 1u))
                progress += answer(f, c, kill_after);
        }
        f->now += 0.5;
        double next;
        assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
        if (!progress && isfinite(next) && next > f->now)
            f->now = next;
    }
}

static void model_of(fed *f, int64_t id, fk_bundle *model)
{
    fk_err err;
    if (fk_engine_result(f->e, id, model, NULL, &err))
        fail_msg("result: %s", err.msg);
}

static void sim_model(fed *f, const char *text, fk_bundle *model)
{
    fk_jobconf conf;
    fk_err err;
    assert_int_equal(fk_jobconf_parse(&conf, text, "job", &err), FK_OK);
    fk_sim_opts o = {.rounds = conf.rounds, .seed = conf.seed};
    if (fk_sim_run(find_test_method(conf.method, &err), &conf.params, f->data, N_CLIENTS, &o,
                   model, NULL, &err))
        fail_msg("sim: %s", err.msg);
    fk_jobconf_close(&conf);
}

/* The job's final model is bit-identical to the simulator's for the same config. */
static void assert_model_is_sim(fed *f, int64_t id, const char *text)
{
    fk_bundle daemon, sim;
    model_of(f, id, &daemon);
    sim_model(f, text, &sim);
    assert_bundles_equal(&daemon, &sim);
    fk_bundle_close(&daemon);
    fk_bundle_close(&sim);
}

static int job_state(fed *f, int64_t id, fk_job_status *s)
{
    fk_err err;
    assert_int_equal(fk_engine_status(f->e, id, s, &err), FK_OK);
    return s->state;
}

/* Drive the job to its end: done, the simulator's model, every update of every round stored. */
static void run_to_sim_model(fed *f, int64_t id, const char *text, int rounds)
{
    run(f, 0, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    assert_model_is_sim(f, id, text);
    int count;
    fk_err err;
    assert_int_equal(fk_store_update_count(f->st, id, &count, &err), FK_OK);
    assert_int_equal(count, rounds * N_CLIENTS);
}

/* --------------------------------------------------------------- tests */

static void check_same_as_sim(fed *f, const char *text)
{
    int64_t id = submit(f, text);
    run(f, 0, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    assert_int_equal(s.round, 5);
    assert_model_is_sim(f, id, text);
}

static void one_phase_same_model_as_sim(void **state)
{
    fed *f = *state;
    check_same_as_sim(f, job_text("fedmean", "sampling = 0.5\n"));
    close_clients(f);
    check_same_as_sim(f, job_text("fedmean", "aggregator = median\n"));
}

static void two_phases_same_model_as_sim(void **state)
{
    fed *f = *state;
    check_same_as_sim(f, job_text("fedvar", "sampling = 0.66\n"));
    /* Rounds store their planned clients and the metrics of the reports. */
    fk_store_round *rows;
    int n;
    fk_err err;
    assert_int_equal(fk_store_round_list(f->st, 1, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rows[i].n_planned, 4);
        assert_int_equal(rows[i].participants, 4);
        assert_int_equal(rows[i].closed, 1);
        fk_store_round_free(&rows[i]);
    }
    free(rows);
}

static void absent_client_is_a_dropout(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "quorum = 0.8\n"));
    double start = f->now;
    run(f, 1u << 4, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    /* Each of the 5 rounds waited for its deadline. */
    assert_true(f->now >= start + 5 * 30.0);
    fk_store_round *rows;
    int n;
    fk_err err;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rows[i].participants, 5);
        assert_int_equal(rows[i].dropouts, 1);
        assert_string_equal(rows[i].dropped, "4");
        assert_false(isnan(rows[i].loss));
        fk_store_round_free(&rows[i]);
    }
    free(rows);
    int count;
    assert_int_equal(fk_store_update_count(f->st, id, &count, &err), FK_OK);
    assert_int_equal(count, 25);
}

static void missed_quorum_retries_then_fails(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "quorum = 1\nretries = 2\n"));
    run(f, 1u << 1, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_FAILED);
    assert_int_equal(s.round, 1);
    assert_non_null(strstr(s.failure, "quorum"));
    assert_non_null(strstr(s.failure, "3 attempts"));
    fk_store_round *rows;
    int n;
    fk_err err;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 3);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rows[i].attempt, i);
        assert_int_equal(rows[i].closed, 2);
        assert_int_equal(rows[i].participants, 5);
        assert_string_equal(rows[i].dropped, "1");
        fk_store_round_free(&rows[i]);
    }
    free(rows);
    fk_bundle model;
    assert_int_equal(fk_engine_result(f->e, id, &model, NULL, &err), FK_ENOTFOUND);
    fk_bundle_close(&model);
}

/* With a partial sample, a retry draws a new sample: attempts that planned the
 * absent client are abandoned, the others complete. */
static void retry_draws_a_new_sample(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "quorum = 1\nretries = 50\nsampling = 0.5\n"));
    run(f, 1u << 2, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    fk_store_round *rows;
    int n, retried = 0;
    fk_err err;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    for (int i = 0; i < n; i++) {
        int has2 = 0;
        for (int k = 0; k < rows[i].n_planned; k++)
            has2 |= rows[i].planned[k] == 2;
        assert_int_equal(rows[i].closed, has2 ? 2 : 1);
        retried += rows[i].attempt > 0;
        fk_store_round_free(&rows[i]);
    }
    free(rows);
    assert_true(n > 5);
    assert_true(retried > 0);
}

static void resent_update_counts_once(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "quorum = 1\n"));
    fk_task_ref t;
    fk_err err;
    assert_int_equal(fk_engine_pull(f->e, "c3", f->now, &t, &err), FK_OK);
    assert_int_equal(t.client, 3);
    fk_bundle up;
    fk_bundle_init(&up);
    double delta[DIM] = {1, 2, 3};
    assert_int_equal(fk_bundle_put_vec(&up, "delta", DIM, delta), FK_OK);
    uint8_t *blob;
    size_t len;
    assert_int_equal(t_encode(&up, &blob, &len, &err), FK_OK);
    fk_push p = {.job = id, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                 .identity = "c3", .idem = t.idem, .blob = blob, .len = len};
    fk_report_init(&p.report);
    p.report.n_samples = 5;
    char idem[96];
    snprintf(idem, sizeof idem, "%s", t.idem);
    p.idem = idem;
    int dup = -1;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_OK);
    assert_int_equal(dup, 0);
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_OK);
    assert_int_equal(dup, 1);
    /* The same update_id with other bytes is not a resend (docs/protocol.md section 4:
     * ABORTED): nothing stored, nothing counted. */
    blob[len - 1] ^= 0x01;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_OK);
    assert_int_equal(dup, FK_STORE_IDEM_OTHER);
    blob[len - 1] ^= 0x01;
    fk_job_status s;
    job_state(f, id, &s);
    assert_int_equal(s.answered, 1);
    /* A second, different update for the same task is refused. */
    p.idem = "something-else";
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "already answered"));
    /* The answered client gets no task until the next phase. */
    assert_int_equal(fk_engine_pull(f->e, "c3", f->now, &t, &err), FK_ENOTFOUND);
    /* Unknown identities, bad bytes and wrong rounds are refused. */
    p.idem = "x1";
    p.identity = "mallory";
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_ESTATE);
    p.identity = "c0";
    p.round = 2;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "late"));
    p.round = 1;
    p.len = 3;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_EFORMAT);
    int count;
    assert_int_equal(fk_store_update_count(f->st, id, &count, &err), FK_OK);
    assert_int_equal(count, 1);
    fk_bundle_close(&up);
    /* The rest answer; the resend after the round closed is still acknowledged, not counted. */
    run(f, 0, -1);
    p.identity = "c3";
    p.idem = idem;
    p.len = len;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_OK);
    assert_int_equal(dup, 1);
    free(blob);
    assert_int_equal(fk_store_update_count(f->st, id, &count, &err), FK_OK);
    assert_int_equal(count, 30);
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
}

/* --------------------------------------------- group commit (stage/apply) */

/* A hand-made update for the task waiting for client c (fedmean: any delta). */
typedef struct staged_push {
    fk_push p;
    char identity[16];
    char idem[96];
    uint8_t *blob;
} staged_push;

static void make_push(fed *f, int c, staged_push *sp)
{
    memset(sp, 0, sizeof *sp);
    snprintf(sp->identity, sizeof sp->identity, "c%d", c);
    fk_task_ref t;
    fk_err err;
    assert_int_equal(fk_engine_pull(f->e, sp->identity, f->now, &t, &err), FK_OK);
    snprintf(sp->idem, sizeof sp->idem, "%s", t.idem);
    fk_bundle up;
    fk_bundle_init(&up);
    double delta[DIM] = {1.0 + c, 2.0, 3.0 * c};
    assert_int_equal(fk_bundle_put_vec(&up, "delta", DIM, delta), FK_OK);
    size_t len;
    assert_int_equal(t_encode(&up, &sp->blob, &len, &err), FK_OK);
    fk_bundle_close(&up);
    sp->p = (fk_push){.job = t.job, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                      .identity = sp->identity, .idem = sp->idem, .blob = sp->blob, .len = len};
    fk_report_init(&sp->p.report);
    sp->p.report.n_samples = 1 + c;
}

/* Updates committed by another connection (what survives a crash now). */
static int committed_count(fed *f, int64_t id)
{
    fk_store *other;
    fk_err err;
    assert_int_equal(fk_store_open(&other, f->path, &err), FK_OK);
    int n = -1;
    assert_int_equal(fk_store_update_count(other, id, &n, &err), FK_OK);
    fk_store_close(other);
    return n;
}

/* Several updates staged in one transaction are stored by its one commit and
 * counted only after it; a resend staged in the same batch counts once. */
static void batch_commits_together_then_counts(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "rounds = 2\n"));
    fk_err err;
    staged_push sp[N_CLIENTS];
    for (int c = 0; c < N_CLIENTS; c++)
        make_push(f, c, &sp[c]);
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    int dup[4] = {-1, -1, -1, -1};
    assert_int_equal(fk_engine_push_stage(f->e, &sp[2].p, f->now, &dup[0], &err), FK_OK);
    assert_int_equal(fk_engine_push_stage(f->e, &sp[0].p, f->now, &dup[1], &err), FK_OK);
    assert_int_equal(fk_engine_push_stage(f->e, &sp[2].p, f->now, &dup[2], &err), FK_OK);
    assert_int_equal(fk_engine_push_stage(f->e, &sp[4].p, f->now, &dup[3], &err), FK_OK);
    assert_int_equal(dup[0], 0);
    assert_int_equal(dup[1], 0);
    assert_int_equal(dup[2], 1); /* the resend inside the batch */
    assert_int_equal(dup[3], 0);
    /* Staged, not committed: nothing durable, nothing counted, tasks still open. */
    assert_int_equal(committed_count(f, id), 0);
    fk_job_status s;
    job_state(f, id, &s);
    assert_int_equal(s.answered, 0);
    assert_true(fk_engine_task_open(f->e, id, 1, 0, 0, "c2"));
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    assert_int_equal(committed_count(f, id), 3);
    fk_engine_push_apply(f->e, &sp[2].p, f->now);
    fk_engine_push_apply(f->e, &sp[0].p, f->now);
    fk_engine_push_apply(f->e, &sp[4].p, f->now);
    job_state(f, id, &s);
    assert_int_equal(s.answered, 3);
    assert_false(fk_engine_task_open(f->e, id, 1, 0, 0, "c2"));
    /* The rest in a second batch: its apply closes the phase and the round. */
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    int odd[3] = {1, 3, 5};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(fk_engine_push_stage(f->e, &sp[odd[k]].p, f->now, &dup[0], &err), FK_OK);
        assert_int_equal(dup[0], 0);
    }
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    for (int k = 0; k < 3; k++)
        fk_engine_push_apply(f->e, &sp[odd[k]].p, f->now);
    job_state(f, id, &s);
    assert_int_equal(s.round, 2);
    assert_int_equal(s.answered, 0);
    assert_int_equal(committed_count(f, id), N_CLIENTS);
    fk_store_round r;
    assert_int_equal(fk_store_round_get(f->st, id, 1, 0, &r, &err), FK_OK);
    assert_int_equal(r.closed, 1);
    assert_int_equal(r.participants, N_CLIENTS);
    fk_store_round_free(&r);
    for (int c = 0; c < N_CLIENTS; c++)
        free(sp[c].blob);
}

/* Issue 35: a check run off the loop (fk_engine_check_begin/run/end) pins the job: a phase
 * that completes meanwhile (the other clients answered) does not end, and no deadline ends
 * it, until the check is back; then the caller settles it. A stage that carries the check's
 * verdict does not call check_update again; a verdict taken on another state (the phase moved
 * on) is not used. */
static void pinned_check_defers_the_phase_end(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean-checked", "rounds = 2\n"));
    fk_err err;
    staged_push sp[N_CLIENTS];
    for (int c = 0; c < N_CLIENTS; c++)
        make_push(f, c, &sp[c]);
    /* client 0's check runs "on a worker" while the others are counted */
    fk_engine_check chk;
    assert_int_equal(fk_engine_check_begin(f->e, id, 1, 0, 0, "c0", &chk), 1);
    fk_engine_check none;
    assert_int_equal(fk_engine_check_begin(f->e, id, 2, 0, 0, "c0", &none), 0); /* not open */
    assert_int_equal(fk_engine_check_begin(f->e, id + 1, 1, 0, 0, "c0", &none), 0);
    for (int c = 1; c < N_CLIENTS; c++) {
        int dup = -1;
        assert_int_equal(fk_engine_push(f->e, &sp[c].p, f->now, &dup, &err), FK_OK);
        assert_int_equal(dup, 0);
    }
    /* client 0 never answers: its deadline passes, yet the pinned phase stays open */
    double next;
    assert_int_equal(fk_engine_tick(f->e, f->now + 1000.0, &next, &err), FK_OK);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    assert_int_equal(s.round, 1);
    assert_int_equal(s.answered, N_CLIENTS - 1);
    fk_bundle b;
    fk_bundle_init(&b);
    assert_int_equal(t_decode(sp[0].blob, sp[0].p.len, &b, &err), FK_OK);
    checks_run = 0;
    fk_engine_check_run(&chk, &b, &sp[0].p.report);
    assert_int_equal(checks_run, 1);
    assert_int_equal(chk.rc, FK_OK);
    assert_int_equal(fk_engine_check_end(f->e, &chk), 0); /* c0 still owes its update */
    /* the stage takes the verdict: check_update is not called again */
    sp[0].p.check = &chk;
    sp[0].p.msg = &b;
    int dup = -1;
    assert_int_equal(fk_engine_push(f->e, &sp[0].p, f->now, &dup, &err), FK_OK);
    assert_int_equal(checks_run, 1);
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    assert_int_equal(s.round, 2); /* its count closed round 1 */
    fk_bundle_close(&b);
    /* round 2: a verdict of round 1 is not reused, the stage checks again */
    for (int c = 0; c < N_CLIENTS; c++)
        free(sp[c].blob);
    for (int c = 0; c < N_CLIENTS; c++)
        make_push(f, c, &sp[c]);
    sp[1].p.check = &chk; /* round 1's, client 0's */
    assert_int_equal(fk_engine_push(f->e, &sp[1].p, f->now, &dup, &err), FK_OK);
    assert_int_equal(checks_run, 2);
    /* a phase completed while pinned: the check's end says so, settle closes it */
    assert_int_equal(fk_engine_check_begin(f->e, id, 2, 0, 0, "c0", &chk), 1);
    for (int c = 2; c < N_CLIENTS; c++)
        assert_int_equal(fk_engine_push(f->e, &sp[c].p, f->now, &dup, &err), FK_OK);
    assert_int_equal(fk_engine_fail(f->e, &sp[0].p, "test: its data is gone", f->now, &err), FK_OK);
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING); /* complete, but pinned */
    assert_int_equal(fk_engine_check_end(f->e, &chk), 1);
    fk_engine_settle(f->e, id, f->now);
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    for (int c = 0; c < N_CLIENTS; c++)
        free(sp[c].blob);
}

/* A cancel while a check has the job pinned: the job leaves the running set at once and is
 * freed when the check ends (ASan: no use after free, no leak). */
static void cancel_while_pinned_frees_at_check_end(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean-checked", "rounds = 2\n"));
    fk_err err;
    fk_engine_check chk;
    assert_int_equal(fk_engine_check_begin(f->e, id, 1, 0, 0, "c3", &chk), 1);
    assert_int_equal(fk_engine_cancel(f->e, id, f->now, &err), FK_OK);
    fk_task_ref t;
    assert_int_equal(fk_engine_pull(f->e, "c3", f->now, &t, &err), FK_ENOTFOUND);
    assert_false(fk_engine_task_open(f->e, id, 1, 0, 0, "c3"));
    assert_int_equal(fk_engine_check_end(f->e, &chk), 0);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_CANCELLED);
}

/* A batch whose commit fails stores nothing and changes nothing in memory;
 * the same updates resent later count, and the job still ends with the
 * simulator's model. */
static void failed_batch_commit_changes_nothing(void **state)
{
    fed *f = *state;
    const char *text = job_text("fedmean", "rounds = 3\n");
    int64_t id = submit(f, text);
    fk_err err;
    staged_push sp[N_CLIENTS];
    for (int c = 0; c < N_CLIENTS; c++)
        make_push(f, c, &sp[c]);
    fk_job_status before, after;
    job_state(f, id, &before);
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    int dup = -1;
    for (int c = 0; c < N_CLIENTS; c++) {
        assert_int_equal(fk_engine_push_stage(f->e, &sp[c].p, f->now, &dup, &err), FK_OK);
        assert_int_equal(dup, 0);
    }
    fk_store_test_fail_commits(f->st, 0, 1);
    assert_int_equal(fk_store_commit(f->st, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "commit"));
    /* Nothing applied: same position, nobody answered, every task still open. */
    job_state(f, id, &after);
    assert_int_equal(after.round, before.round);
    assert_int_equal(after.phase, before.phase);
    assert_int_equal(after.answered, 0);
    int n = -1;
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 0);
    assert_int_equal(committed_count(f, id), 0);
    for (int c = 0; c < N_CLIENTS; c++) {
        int known = 1;
        assert_int_equal(fk_store_update_known(f->st, sp[c].idem, sp[c].identity, &known, &err),
                         FK_OK);
        assert_int_equal(known, 0);
        assert_true(fk_engine_task_open(f->e, id, 1, 0, 0, sp[c].identity));
        free(sp[c].blob);
    }
    /* The clients resend (here: compute again) and the job ends as in the simulator. */
    run(f, 0, -1);
    assert_int_equal(job_state(f, id, &after), FK_JOB_DONE);
    assert_model_is_sim(f, id, text);
    assert_int_equal(committed_count(f, id), 3 * N_CLIENTS);
}

/* A client reporting it cannot do its task is not asked again in that phase,
 * counts as a dropout, and the phase closes as soon as the others answered
 * (no wait for the deadline); without quorum the round is retried at once. */
static void reported_failure_is_an_early_dropout(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "quorum = 0.5\nrounds = 1\n"));
    fk_task_ref t;
    fk_err err;
    assert_int_equal(fk_engine_pull(f->e, "c2", f->now, &t, &err), FK_OK);
    fk_push p = {.job = id, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                 .identity = "c2", .idem = "failure-report-1"};
    fk_report_init(&p.report);
    assert_int_equal(fk_engine_fail(f->e, &p, "state lost", f->now, &err), FK_OK);
    assert_int_equal(fk_engine_pull(f->e, "c2", f->now, &t, &err), FK_ENOTFOUND);
    assert_int_equal(fk_engine_task_open(f->e, id, 1, 0, 0, "c2"), 0);
    /* a second report, or an update after it, is late */
    assert_int_equal(fk_engine_fail(f->e, &p, "again", f->now, &err), FK_ESTATE);
    int64_t jobs[4];
    assert_int_equal(fk_engine_client_jobs(f->e, "c2", jobs, 4), 1);
    assert_int_equal(jobs[0], id);
    assert_int_equal(fk_engine_client_jobs(f->e, "c2", jobs, 0), -1);
    assert_int_equal(fk_engine_client_jobs(f->e, "mallory", jobs, 4), 0);
    double start = f->now;
    for (int c = 0; c < N_CLIENTS; c++)
        if (c != 2)
            assert_int_equal(answer(f, c, -1), 1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE); /* closed by the last push */
    assert_true(f->now == start);
    assert_int_equal(fk_engine_client_jobs(f->e, "c2", jobs, 4), 0);
    fk_store_round *rows;
    int n;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 1);
    assert_int_equal(rows[0].participants, 5);
    assert_int_equal(rows[0].dropouts, 1);
    assert_string_equal(rows[0].dropped, "2");
    fk_store_round_free(&rows[0]);
    free(rows);
    /* every client failing: no quorum, the round is retried without waiting */
    int64_t id2 = submit(f, job_text("fedmean", "quorum = 0.5\nrounds = 1\nretries = 1\n"));
    for (int attempt = 0; attempt < 2; attempt++)
        for (int c = 0; c < N_CLIENTS; c++) {
            char who[8];
            snprintf(who, sizeof who, "c%d", c);
            assert_int_equal(fk_engine_pull(f->e, who, f->now, &t, &err), FK_OK);
            assert_int_equal(t.attempt, attempt);
            fk_push q = {.job = id2, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                         .identity = who, .idem = "failure-report-2"};
            fk_report_init(&q.report);
            assert_int_equal(fk_engine_fail(f->e, &q,
                                            c == 0 ? "holds no data set 'synth' (it holds: none)"
                                                   : "cannot",
                                            f->now, &err),
                             FK_OK);
            if (c == 0) { /* a running job's status already says what the client said */
                assert_int_equal(job_state(f, id2, &s), FK_JOB_RUNNING);
                assert_non_null(strstr(s.failure, "client c0 holds no data set 'synth'"));
            }
        }
    /* the failed job names the cause first, each client once, then the missed quorum */
    assert_int_equal(job_state(f, id2, &s), FK_JOB_FAILED);
    assert_non_null(strstr(s.failure, "client c0 holds no data set 'synth' (it holds: none); "
                                      "client c1: cannot; client c2: cannot; and 3 more clients"));
    assert_non_null(strstr(s.failure, "quorum"));
    assert_true(f->now == start);
}

static void full_disk_refuses_then_recovers(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", "quorum = 1\nrounds = 2\n"));
    fk_err err;
    fk_task_ref t;
    assert_int_equal(fk_engine_pull(f->e, "c0", f->now, &t, &err), FK_OK);
    fk_bundle up;
    fk_bundle_init(&up);
    double *big = fk_bundle_add(&up, "delta", 1, (uint64_t[]){DIM});
    big[0] = 1.0;
    fk_bundle_add(&up, "padding", 1, (uint64_t[]){200000});
    uint8_t *blob;
    size_t len;
    assert_int_equal(t_encode(&up, &blob, &len, &err), FK_OK);
    fk_bundle_close(&up);
    fk_push p = {.job = id, .round = 1, .phase = 0, .identity = "c0", .idem = "big",
                 .blob = blob, .len = len};
    fk_report_init(&p.report);
    p.report.n_samples = 1;
    assert_int_equal(fk_store_set_limit(f->st, 512 * 1024, &err), FK_OK);
    int dup;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "full"));
    fk_job_status s;
    job_state(f, id, &s);
    assert_int_equal(s.answered, 0);
    assert_int_equal(fk_store_set_limit(f->st, 0, &err), FK_OK);
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_OK);
    assert_int_equal(dup, 0);
    job_state(f, id, &s);
    assert_int_equal(s.answered, 1);
    free(blob);
    run(f, 0, -1);
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
}

/* A full disk at any moment of a round's close: the last update is refused or
 * stored, the close is stored whole or not at all, and once space is back the
 * job ends with the simulator's model. */
static void full_disk_at_round_close(void **state)
{
    fed *f = *state;
    const char *text = job_text("fedmean", "quorum = 1\nrounds = 2\nckpt_pad = 3000\n");
    int refused = 0, close_failed = 0, stored = 0;
    for (int extra = 0; extra < 12; extra += 2) {
        int64_t id = submit(f, text);
        close_clients(f);
        for (int c = 0; c < N_CLIENTS - 1; c++)
            answer(f, c, -1);
        fk_err err;
        uint64_t size;
        assert_int_equal(fk_store_size(f->st, &size, &err), FK_OK);
        assert_int_equal(fk_store_set_limit(f->st, size + (uint64_t)extra * 4096, &err), FK_OK);
        int rc = answer_rc(f, N_CLIENTS - 1, -1, &err);
        assert_true(rc == 1 || rc == FK_EIO);
        fk_job_status s;
        job_state(f, id, &s);
        refused += rc == FK_EIO;
        close_failed += rc == 1 && s.round == 1;
        stored += rc == 1 && s.round == 2;
        double next;
        assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
        assert_int_equal(fk_store_set_limit(f->st, 0, &err), FK_OK);
        run_to_sim_model(f, id, text, 2);
    }
    /* The limits cover a refused update, a refused close and a stored close. */
    assert_true(refused + close_failed > 0);
    assert_true(close_failed > 0);
    assert_true(stored > 0);
}

/* The round's close is stored but the next round cannot be opened (disk full
 * right after the close): the job stalls instead of failing, takes no
 * updates and hands out no tasks while the store refuses writes, survives a
 * restart in that state, and once writes succeed again it goes on to the
 * simulator's model. */
static void full_disk_after_close_stalls_the_job(void **state)
{
    fed *f = *state;
    const char *text = job_text("fedmean", "quorum = 1\nrounds = 3\n");
    int64_t id = submit(f, text);
    for (int c = 0; c < N_CLIENTS - 1; c++)
        answer(f, c, -1);
    /* the last push and the close commit; every later commit fails */
    fk_store_test_fail_commits(f->st, 2, 1 << 20);
    assert_int_equal(answer(f, N_CLIENTS - 1, -1), 1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    assert_int_equal(s.round, 2);
    fk_err err;
    fk_task_ref t;
    for (int k = 0; k < 5; k++) {
        f->now += 1.0;
        double next;
        assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
        assert_true(isfinite(next) && next <= f->now + 1.0);
        assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
        assert_int_equal(fk_engine_pull(f->e, "c0", f->now, &t, &err), FK_ENOTFOUND);
        assert_false(fk_engine_task_open(f->e, id, 2, 0, 0, "c0"));
    }
    fk_engine_stats es;
    fk_engine_stats_get(f->e, &es);
    assert_int_equal(es.jobs_stalled, 1);
    fk_push p = {.job = id, .round = 2, .phase = 0, .identity = "c0", .idem = "while-stalled"};
    fk_report_init(&p.report);
    int dup;
    assert_int_equal(fk_engine_push(f->e, &p, f->now, &dup, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "cannot be stored"));
    /* A restart while the disk is still full: the server starts, the job waits. */
    close_engine(f);
    open_engine_failing(f, 1 << 20);
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    assert_int_equal(fk_engine_pull(f->e, "c0", f->now, &t, &err), FK_ENOTFOUND);
    fk_store_test_fail_commits(f->st, 0, 0);
    run_to_sim_model(f, id, text, 3);
    fk_engine_stats_get(f->e, &es);
    assert_int_equal(es.jobs_stalled, 0);
}

static void submit_and_cancel(void **state)
{
    fed *f = *state;
    fk_err err;
    int64_t id;
    assert_int_equal(fk_engine_submit(f->e, "method = fedmean\n", f->now, &id, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "dataset"));
    assert_int_equal(fk_engine_submit(f->e, job_text("kmeans", ""), f->now, &id, &err),
                     FK_ENOTFOUND);
    assert_non_null(strstr(err.msg, "kmeans"));
    assert_int_equal(fk_engine_submit(f->e, job_text("fedmean", "fail_init = 1\n"), f->now, &id,
                                      &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "fail_init"));
    int64_t *ids;
    int n;
    assert_int_equal(fk_store_job_ids(f->st, -1, &ids, &n, &err), FK_OK);
    assert_int_equal(n, 0);
    free(ids);
    id = submit(f, job_text("fedmean", ""));
    assert_int_equal(fk_engine_cancel(f->e, id, f->now, &err), FK_OK);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_CANCELLED);
    fk_task_ref t;
    assert_int_equal(fk_engine_pull(f->e, "c0", f->now, &t, &err), FK_ENOTFOUND);
    assert_int_equal(fk_engine_cancel(f->e, id, f->now, &err), FK_ESTATE);
    assert_int_equal(fk_engine_cancel(f->e, 77, f->now, &err), FK_ENOTFOUND);
    assert_int_equal(fk_engine_running(f->e), 0);
}

/* --------------------------------------------------------- crash/resume */

/* The reference: an unfaulted run's model and update count. */
static void reference(fed *f, const char *text, fk_bundle *model, int *updates, int *pushes)
{
    open_engine(f);
    int64_t id = submit(f, text);
    f->pushes = 0;
    run(f, 0, -1);
    *pushes = f->pushes;
    model_of(f, id, model);
    fk_err err;
    assert_int_equal(fk_store_update_count(f->st, id, updates, &err), FK_OK);
    close_engine(f);
    remove_db(f);
}

/* Child: submit and run, killing itself after `kill_after` pushes (or being
 * killed by the parent). Parent: reopen, resume, finish, compare. */
static void crash_and_resume(fed *f, const char *text, int kill_after, long kill_usec,
                             const fk_bundle *ref, int ref_updates)
{
    f->now = 5000.0;
    f->pushes = 0;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        open_engine(f);
        submit(f, text);
        run(f, 0, kill_after);
        _exit(kill_usec ? 0 : 3); /* finished before the kill */
    }
    if (kill_usec) {
        usleep((useconds_t)kill_usec);
        kill(pid, SIGKILL);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!kill_usec)
        assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    f->now = 6000.0;
    open_engine(f);
    fk_err err;
    int64_t *ids;
    int n;
    assert_int_equal(fk_store_job_ids(f->st, -1, &ids, &n, &err), FK_OK);
    if (n == 0) { /* killed before the job was stored: submit again */
        free(ids);
        submit(f, text);
        assert_int_equal(fk_store_job_ids(f->st, -1, &ids, &n, &err), FK_OK);
    }
    assert_int_equal(n, 1);
    int64_t id = ids[0];
    free(ids);
    run(f, 0, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    fk_bundle model;
    model_of(f, id, &model);
    assert_bundles_equal(&model, ref);
    fk_bundle_close(&model);
    int updates;
    assert_int_equal(fk_store_update_count(f->st, id, &updates, &err), FK_OK);
    assert_int_equal(updates, ref_updates);
    /* the default retention held through the crash: no update bytes of the finished job, the
     * newest 2 checkpoints, the last model */
    fk_store_usage u;
    assert_int_equal(fk_store_usage_get(f->st, &u, &err), FK_OK);
    assert_int_equal(u.update_bytes, 0);
    assert_true(u.checkpoints <= 2);
    assert_int_equal(u.models, 1);
    close_engine(f);
    remove_db(f);
}

static void check_crashes(fed *f, const char *text)
{
    f->retain = 1; /* kill -9 under the default retention resumes to the same model */
    fk_bundle ref, sim;
    int ref_updates, pushes;
    reference(f, text, &ref, &ref_updates, &pushes);
    sim_model(f, text, &sim);
    assert_bundles_equal(&ref, &sim);
    fk_bundle_close(&sim);
    for (int k = 1; k < pushes; k += 2)
        crash_and_resume(f, text, k, 0, &ref, ref_updates);
    /* Kills at arbitrary moments, inside transactions too. */
    static const long delays[] = {2000, 9000, 23000, 47000, 90000};
    for (size_t i = 0; i < sizeof delays / sizeof *delays; i++)
        crash_and_resume(f, text, -1, delays[i], &ref, ref_updates);
    fk_bundle_close(&ref);
    f->retain = 0;
    open_engine(f);
}

static void sigkill_mid_job_resumes_to_same_model(void **state)
{
    fed *f = *state;
    close_engine(f);
    remove_db(f);
    check_crashes(f, job_text("fedmean", "sampling = 0.5\n"));
}

static void sigkill_mid_round_of_two_phases(void **state)
{
    fed *f = *state;
    close_engine(f);
    remove_db(f);
    check_crashes(f, job_text("fedvar", "rounds = 4\n"));
}


/* ------------------------------------------------------ gone clients */

static int presence(void *ud, const char *identity)
{
    fed *f = ud;
    f->asked++;
    int c = identity[0] == 'c' ? atoi(identity + 1) : -1;
    return c >= 0 && c < N_CLIENTS && (f->gone >> c & 1u);
}

static void round_rows(fed *f, int64_t id, int want, int participants, const char *dropped)
{
    fk_store_round *rows;
    int n;
    fk_err err;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    assert_int_equal(n, want);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rows[i].closed, 1);
        assert_int_equal(rows[i].participants, participants);
        assert_string_equal(rows[i].dropped, dropped);
        fk_store_round_free(&rows[i]);
    }
    free(rows);
}

/* A client whose session ended is planned (the method's plan is unchanged) but is a dropout
 * from the phase's start: with quorum, no round waits its deadline for it. */
static void gone_client_is_not_waited_for(void **state)
{
    fed *f = *state;
    fk_engine_set_presence(f->e, presence, f);
    f->gone = 1u << 4;
    int64_t id = submit(f, job_text("fedmean", "quorum = 0.8\n"));
    double start = f->now;
    run(f, 1u << 4, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    assert_true(f->now < start + 30.0); /* five rounds, not one deadline waited */
    assert_true(f->asked >= 5 * N_CLIENTS);
    round_rows(f, id, 5, 5, "4");
}

/* A planned client's session ends mid-phase: the phase closes once the others answered. */
static void client_gone_mid_phase_closes_it(void **state)
{
    fed *f = *state;
    fk_engine_set_presence(f->e, presence, f);
    int64_t id = submit(f, job_text("fedmean", "quorum = 0.8\nrounds = 1\n"));
    for (int c = 0; c < N_CLIENTS - 1; c++)
        assert_int_equal(answer(f, c, -1), 1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    f->gone = 1u << 5;
    fk_engine_client_gone(f->e, "c5", f->now);
    fk_engine_client_gone(f->e, "c5", f->now); /* a second call changes nothing */
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    round_rows(f, id, 1, 5, "5");
}

/* The role client (c5, "unseen") of a job leaves mid-phase and does not come back: before,
 * the phase closed with the others' quorum and the job ended "done" without the result it
 * exists for; now the phase waits for it until its deadline, then the job fails naming it. A
 * training client that leaves is still a plain dropout (c4 here). */
static void role_client_gone_fails_the_job(void **state)
{
    fed *f = *state;
    fk_err err;
    fk_engine_set_presence(f->e, presence, f);
    int64_t id = submit(f, job_text("fedmean-roles", "quorum = 0.5\nrounds = 2\n"));
    double start = f->now;
    for (int c = 0; c < N_CLIENTS - 2; c++)
        assert_int_equal(answer(f, c, -1), 1);
    f->gone = 1u << 4 | 1u << 5;
    fk_engine_client_gone(f->e, "c4", f->now);
    fk_engine_client_gone(f->e, "c5", f->now);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING); /* quorum met, but c5 is needed */
    double next;
    f->now = start + 29.0;
    assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    assert_true(next <= start + 30.0);
    f->now = start + 30.5;
    assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
    assert_int_equal(job_state(f, id, &s), FK_JOB_FAILED);
    if (!strstr(s.failure, "client c5 (unseen) left during round 1 phase 0") ||
        !strstr(s.failure, "no byte received") || !strstr(s.failure, "--wait_clients") ||
        strstr(s.failure, "c4"))
        fail_msg("failure reason: %s", s.failure);
    assert_int_equal(fk_engine_running(f->e), 0);
}

/* The role client leaves and joins again before the deadline: it is asked again, answers,
 * and the job ends done; a training client gone for good is a dropout as before. */
static void role_client_back_in_time_finishes(void **state)
{
    fed *f = *state;
    fk_engine_set_presence(f->e, presence, f);
    int64_t id = submit(f, job_text("fedmean-roles", "quorum = 0.5\nrounds = 1\n"));
    for (int c = 0; c < N_CLIENTS - 2; c++)
        assert_int_equal(answer(f, c, -1), 1);
    f->gone = 1u << 4 | 1u << 5;
    fk_engine_client_gone(f->e, "c4", f->now);
    fk_engine_client_gone(f->e, "c5", f->now);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    f->now += 10;
    f->gone = 1u << 4;
    fk_engine_client_back(f->e, "c5");
    assert_int_equal(answer(f, 5, -1), 1);
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE); /* c4 gone: closed at once */
    round_rows(f, id, 1, 5, "4");
}

/* A role client already gone when the phase opens is waited for the same way. */
static void role_client_gone_at_phase_open_is_waited_for(void **state)
{
    fed *f = *state;
    fk_err err;
    fk_engine_set_presence(f->e, presence, f);
    f->gone = 1u << 5;
    int64_t id = submit(f, job_text("fedmean-roles", "quorum = 0.5\nrounds = 1\n"));
    for (int c = 0; c < N_CLIENTS - 1; c++)
        assert_int_equal(answer(f, c, -1), 1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    double next;
    f->now += 31;
    assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
    assert_int_equal(job_state(f, id, &s), FK_JOB_FAILED);
    if (!strstr(s.failure, "client c5 (unseen)"))
        fail_msg("failure reason: %s", s.failure);
}

/* A gone client that joins again (or sends its update anyway) is asked and counted again;
 * one the quorum needs is waited for until the deadline, as before. */
static void gone_client_comes_back(void **state)
{
    fed *f = *state;
    fk_err err;
    fk_engine_set_presence(f->e, presence, f);
    f->gone = 1u << 5 | 1u << 3;
    int64_t id = submit(f, job_text("fedmean", "quorum = 1\nrounds = 1\n"));
    char idem3[96];
    fk_task_ref t;
    assert_int_equal(fk_engine_pull(f->e, "c5", f->now, &t, &err), FK_ENOTFOUND);
    for (int c = 0; c < N_CLIENTS - 1; c++)
        assert_int_equal(answer(f, c, -1), c == 3 ? 0 : 1);
    /* the quorum needs both: the phase waits, ticks before the deadline change nothing */
    double next;
    f->now += 10;
    assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
    /* c5 joins again: its task is its own again */
    f->gone &= ~(1u << 5);
    fk_engine_client_back(f->e, "c5");
    assert_int_equal(answer(f, 5, -1), 1);
    /* c3 never rejoined but sends its update for this phase: it counts */
    snprintf(idem3, sizeof idem3, "j%lld-r1-a0-p0-c3", (long long)id);
    double v[DIM] = {1, 2, 3};
    fk_bundle up;
    fk_bundle_init(&up);
    assert_int_equal(fk_bundle_put_vec(&up, "delta", DIM, v), FK_OK);
    uint8_t *blob;
    size_t len;
    assert_int_equal(t_encode(&up, &blob, &len, &err), FK_OK);
    fk_report rep;
    fk_report_init(&rep);
    rep.n_samples = 3;
    fk_push p = {.job = id, .round = 1, .attempt = 0, .phase = 0, .identity = "c3",
                 .idem = idem3, .blob = blob, .len = len, .report = rep};
    int dup = 0;
    int rc = fk_engine_push(f->e, &p, f->now, &dup, &err);
    free(blob);
    fk_bundle_close(&up);
    if (rc)
        fail_msg("push from gone c3: %s", err.msg);
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    round_rows(f, id, 1, 6, "");
}

/* A client that answered and then went is not a dropout: a reload from the store (here the
 * stalled round close retried) counts its stored update, and the phase closes at once. */
static void answered_then_gone_survives_a_reload(void **state)
{
    fed *f = *state;
    fk_err err;
    fk_engine_set_presence(f->e, presence, f);
    int64_t id = submit(f, job_text("fedmean", "quorum = 1\nrounds = 1\n"));
    fk_store_test_fail_commits(f->st, N_CLIENTS, 1); /* the six updates, then the close fails */
    for (int c = 0; c < N_CLIENTS; c++)
        assert_int_equal(answer(f, c, -1), 1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING); /* stalled */
    f->gone = 1u << 0;
    fk_engine_client_gone(f->e, "c0", f->now); /* answered: nothing to drop */
    f->now += 1.5;
    double next;
    assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    round_rows(f, id, 1, 6, "");
}

/* Issue 33 row 1: a byte of a stored update flipped while the server was down (the pages stay
 * sound, quick_check passes). Before, the resumed job aggregated the changed bytes and ended
 * done with another model; now the resume stops with the job and the restore steps named. */
static void flipped_update_stops_the_resume(void **state)
{
    fed *f = *state;
    int64_t id = submit(f, job_text("fedmean", ""));
    for (int c = 0; c < 3; c++)
        assert_int_equal(answer(f, c, -1), 1);
    close_engine(f);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    sqlite3_stmt *q;
    assert_int_equal(sqlite3_prepare_v2(db, "SELECT blob FROM updates WHERE client = 1", -1, &q,
                                        NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(q), SQLITE_ROW);
    int n = sqlite3_column_bytes(q, 0);
    assert_true(n > 8);
    unsigned char *b = malloc((size_t)n);
    assert_non_null(b);
    memcpy(b, sqlite3_column_blob(q, 0), (size_t)n);
    sqlite3_finalize(q);
    b[n - 2] ^= 0x10; /* inside the last value: still a well-formed bundle */
    assert_int_equal(sqlite3_prepare_v2(db, "UPDATE updates SET blob = ?1 WHERE client = 1", -1,
                                        &q, NULL),
                     SQLITE_OK);
    sqlite3_bind_blob(q, 1, b, n, SQLITE_STATIC);
    assert_int_equal(sqlite3_step(q), SQLITE_DONE);
    sqlite3_finalize(q);
    sqlite3_close(db);
    free(b);
    fk_err err;
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    fk_engine_opts o = {.store = f->st, .codec = codec, .find = find_test_method};
    assert_int_equal(fk_engine_open(&f->e, &o, f->now, &err), FK_EFORMAT);
    assert_null(f->e);
    print_message("%s\n", err.msg);
    char want[64];
    snprintf(want, sizeof want, "resuming job %lld", (long long)id);
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "the update of client 1"));
    assert_non_null(strstr(err.msg, "restore the latest backup"));
    /* nothing was written: the job is still running in the file, for the restore */
    fk_store_job row;
    assert_int_equal(fk_store_job_get(f->st, id, &row, &err), FK_OK);
    assert_int_equal(row.state, FK_JOB_RUNNING);
    fk_store_job_free(&row);
}

/* ---------------------------------------------------- work off the loop */

/* The offload of a server, held: the test is the worker thread. */
typedef struct held {
    fk_engine_work *w;
    int submits;
} held;

static int hold_work(void *ud, fk_engine_work *w)
{
    held *h = ud;
    assert_null(h->w); /* one close at a time: the job is busy until it is done */
    h->w = w;
    h->submits++;
    return FK_OK;
}

/* Drive job id with every client present; each phase close the engine hands out is checked
 * while it is in flight (the job busy: no task handed out, deadlines wait, status answers),
 * then run as the worker would and handed back. Returns with the work of close number
 * stop_at still held (0: runs to the end). */
static void run_held(fed *f, held *h, int64_t id, int stop_at)
{
    fk_err err;
    for (int guard = 0; fk_engine_running(f->e) > 0; guard++) {
        assert_true(guard < 1000);
        for (int k = 0; k < N_CLIENTS; k++)
            answer(f, (5 * k + 2) % N_CLIENTS, -1);
        assert_non_null(h->w); /* everyone answered: the phase closed, its work handed out */
        assert_int_equal(fk_engine_in_flight(f->e), 1);
        fk_job_status s;
        assert_int_equal(job_state(f, id, &s), FK_JOB_RUNNING);
        assert_int_equal(s.aggregating, 1);
        for (int c = 0; c < N_CLIENTS; c++) {
            char who[8];
            fk_task_ref t;
            snprintf(who, sizeof who, "c%d", c);
            assert_int_equal(fk_engine_pull(f->e, who, f->now, &t, &err), FK_ENOTFOUND);
            assert_int_equal(fk_engine_task_open(f->e, id, s.round, s.attempt, s.phase, who), 0);
        }
        double next;
        assert_int_equal(fk_engine_tick(f->e, f->now + 1e4, &next, &err), FK_OK);
        assert_true(isinf(next)); /* its deadline waits for the work */
        assert_int_equal(fk_engine_in_flight(f->e), 1);
        if (h->submits == stop_at)
            return;
        fk_engine_work *w = h->w;
        h->w = NULL;
        fk_engine_work_run(w);
        fk_engine_work_done(f->e, w, f->now);
        f->now += 0.5;
    }
}

/* A two-phase job (fedvar, 5 rounds) on an engine whose phase closes the test holds. */
static const char *const HELD_JOB = "method = fedvar\ndataset = synth\nclients = c0, c1, c2, "
                                    "c3, c4, c5\nrounds = 5\nseed = 11\ndeadline = 30\n"
                                    "sampling = 0.66\n";

/* The job ended done with the simulator's model. */
static void assert_done_as_sim(fed *f, int64_t id)
{
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    assert_int_equal(fk_engine_in_flight(f->e), 0);
    assert_model_is_sim(f, id, HELD_JOB);
}

/* Phase closes handed to a worker give the simulator's model bit for bit, one work per
 * phase (5 rounds of 2 phases). */
static void offloaded_closes_same_model_as_sim(void **state)
{
    fed *f = *state;
    held h = {0};
    fk_engine_set_offload(f->e, hold_work, &h);
    int64_t id = submit(f, HELD_JOB);
    run_held(f, &h, id, 0);
    assert_int_equal(h.submits, 10);
    assert_done_as_sim(f, id);
}

/* The server dies while round 3's first phase is aggregated off the loop (the work ran, its
 * result was never stored): the restarted engine closes that phase again from the stored
 * updates, to the same model. */
static void restart_mid_aggregation_same_model(void **state)
{
    fed *f = *state;
    held h = {0};
    fk_engine_set_offload(f->e, hold_work, &h);
    int64_t id = submit(f, HELD_JOB);
    run_held(f, &h, id, 5);
    fk_engine_work_run(h.w); /* computed on the worker; the crash comes before the loop stores it */
    fk_engine_work_abandon(f->e, h.w);
    close_engine(f);
    f->now += 100.0;
    open_engine(f);
    run(f, 0, -1);
    assert_done_as_sim(f, id);
    int count;
    fk_err err;
    assert_int_equal(fk_store_update_count(f->st, id, &count, &err), FK_OK);
    assert_int_equal(count, 5 * 2 * 4);
}

/* A job cancelled while its phase is aggregated: the cancel is stored at once, the job leaves
 * the running list, and the work's result is dropped when it comes back. */
static void cancel_while_aggregating(void **state)
{
    fed *f = *state;
    held h = {0};
    fk_engine_set_offload(f->e, hold_work, &h);
    int64_t id = submit(f, job_text("fedmean", ""));
    for (int c = 0; c < N_CLIENTS; c++)
        answer(f, c, -1);
    assert_non_null(h.w);
    fk_err err;
    assert_int_equal(fk_engine_cancel(f->e, id, f->now, &err), FK_OK);
    assert_int_equal(fk_engine_running(f->e), 0);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_CANCELLED);
    fk_engine_work_run(h.w);
    fk_engine_work_done(f->e, h.w, f->now);
    assert_int_equal(fk_engine_in_flight(f->e), 0);
    assert_int_equal(job_state(f, id, &s), FK_JOB_CANCELLED);
    fk_bundle model;
    assert_int_equal(fk_engine_result(f->e, id, &model, NULL, &err), FK_ENOTFOUND);
    fk_bundle_close(&model);
}

/* ------------------------------------------ streaming aggregation (issue 35) */

/* HELD_JOB with the folding twin of fedvar: the same sums in the same order. */
static const char *const FOLD_JOB = "method = fedvar-fold\ndataset = synth\nclients = c0, c1, c2, "
                                    "c3, c4, c5\nrounds = 5\nseed = 11\ndeadline = 30\n"
                                    "sampling = 0.66\n";

/* Each phase close of a folding method streams the stored updates through fold on the worker
 * (its own read connection to the state file), in client order (fedvar-fold refuses anything
 * else); the model is the simulator's and, bit for bit, the batch aggregate's (fedvar's). */
static void folded_closes_same_model_as_batch(void **state)
{
    fed *f = *state;
    held h = {0};
    fk_engine_set_offload(f->e, hold_work, &h);
    int64_t id = submit(f, FOLD_JOB);
    run_held(f, &h, id, 0);
    assert_int_equal(h.submits, 10);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    assert_model_is_sim(f, id, FOLD_JOB);
    assert_model_is_sim(f, id, HELD_JOB); /* the batch aggregate's simulation */
    /* and inline (no offload: the loop's own connection), the same */
    fk_engine_set_offload(f->e, NULL, NULL);
    close_clients(f);
    int64_t id2 = submit(f, FOLD_JOB);
    run(f, 0, -1);
    assert_int_equal(job_state(f, id2, &s), FK_JOB_DONE);
    fk_bundle a, b;
    model_of(f, id, &a);
    model_of(f, id2, &b);
    assert_bundles_equal(&a, &b);
    fk_bundle_close(&a);
    fk_bundle_close(&b);
}

/* The server dies in the middle of a folding method's phase (half its updates in), and again
 * while a phase is folded off the loop: nothing of a partial fold is kept, the restarted
 * engine folds the stored updates again, to the same model. */
static void restart_mid_fold_same_model(void **state)
{
    fed *f = *state;
    held h = {0};
    int64_t id = submit(f, FOLD_JOB);
    int pushed = 0;
    for (int c = 0; c < N_CLIENTS && pushed < 2; c++)
        pushed += answer(f, c, -1);
    assert_int_equal(pushed, 2);
    close_engine(f);
    f->now += 1.0;
    open_engine(f);
    fk_engine_set_offload(f->e, hold_work, &h);
    run_held(f, &h, id, 3);
    fk_engine_work_run(h.w); /* folded on the worker; the crash comes before the loop stores it */
    fk_engine_work_abandon(f->e, h.w);
    close_engine(f);
    f->now += 100.0;
    open_engine(f);
    run(f, 0, -1);
    fk_job_status s;
    assert_int_equal(job_state(f, id, &s), FK_JOB_DONE);
    assert_model_is_sim(f, id, FOLD_JOB);
    assert_model_is_sim(f, id, HELD_JOB);
}

/* A method that needs a phase's updates at once must fit the aggregation memory budget
 * (n_clients x the largest update); a folding one holds one update at a time and is taken. */
static void memory_budget_refuses_batch_method(void **state)
{
    fed *f = *state;
    fk_engine_close(f->e);
    fk_engine_opts o = {.store = f->st, .codec = codec, .find = find_test_method,
                        .max_update = 1000, .aggregate_memory = 5999};
    fk_err err;
    assert_int_equal(fk_engine_open(&f->e, &o, f->now, &err), FK_OK);
    int64_t id = 0;
    assert_int_equal(fk_engine_submit(f->e, HELD_JOB, f->now, &id, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "fedvar aggregates a phase's updates all at once"));
    assert_non_null(strstr(err.msg, "6 clients x 1000 bytes"));
    assert_non_null(strstr(err.msg, "--aggregate_memory_mb"));
    assert_int_equal(fk_engine_running(f->e), 0);
    assert_int_equal(fk_engine_submit(f->e, FOLD_JOB, f->now, &id, &err), FK_OK);
    fk_engine_close(f->e);
    o.aggregate_memory = 6000; /* exactly enough */
    assert_int_equal(fk_engine_open(&f->e, &o, f->now, &err), FK_OK);
    assert_int_equal(fk_engine_submit(f->e, HELD_JOB, f->now, &id, &err), FK_OK);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(one_phase_same_model_as_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(two_phases_same_model_as_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(absent_client_is_a_dropout, setup, teardown),
        cmocka_unit_test_setup_teardown(missed_quorum_retries_then_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(retry_draws_a_new_sample, setup, teardown),
        cmocka_unit_test_setup_teardown(resent_update_counts_once, setup, teardown),
        cmocka_unit_test_setup_teardown(batch_commits_together_then_counts, setup, teardown),
        cmocka_unit_test_setup_teardown(pinned_check_defers_the_phase_end, setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_while_pinned_frees_at_check_end, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_batch_commit_changes_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(reported_failure_is_an_early_dropout, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_refuses_then_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_at_round_close, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_after_close_stalls_the_job, setup, teardown),
        cmocka_unit_test_setup_teardown(submit_and_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(sigkill_mid_job_resumes_to_same_model, setup, teardown),
        cmocka_unit_test_setup_teardown(sigkill_mid_round_of_two_phases, setup, teardown),
        cmocka_unit_test_setup_teardown(gone_client_is_not_waited_for, setup, teardown),
        cmocka_unit_test_setup_teardown(client_gone_mid_phase_closes_it, setup, teardown),
        cmocka_unit_test_setup_teardown(gone_client_comes_back, setup, teardown),
        cmocka_unit_test_setup_teardown(role_client_gone_fails_the_job, setup, teardown),
        cmocka_unit_test_setup_teardown(role_client_back_in_time_finishes, setup, teardown),
        cmocka_unit_test_setup_teardown(role_client_gone_at_phase_open_is_waited_for, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(answered_then_gone_survives_a_reload, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_update_stops_the_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(offloaded_closes_same_model_as_sim, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_mid_aggregation_same_model, setup, teardown),
        cmocka_unit_test_setup_teardown(cancel_while_aggregating, setup, teardown),
        cmocka_unit_test_setup_teardown(folded_closes_same_model_as_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(restart_mid_fold_same_model, setup, teardown),
        cmocka_unit_test_setup_teardown(memory_budget_refuses_batch_method, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
