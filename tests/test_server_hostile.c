/* One client cannot break a job (issue 19): for every job type, a client whose update is NaN,
 * of the wrong shape, lacks a tensor, carries an extra one or holds +-1e300 is refused before
 * commit (FK_EINVAL naming the tensor), counts as a dropout, and the job finishes on the
 * other clients: with the model of a run in which that client simply missed the phase where
 * the protocol allows it (FedGrEM steps, fedgmm-mor steps, FedRF-TCA), with the model of the
 * clean run where the method repeats the step (pooled-em, pooled-em-mor). An aggregation error
 * that one client's data causes excludes that client instead of failing the job. The same
 * refusals in the in-process simulator. Real methods, real wire codec, a real store. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/data/synth_gmm.h"
#include "common/data/synth_mor.h"
#include "common/data/synth_shift.h"
#include "common/methods/sim.h"
#include "common/methods/update_check.h"
#include "common/net/codec.h"
#include "server/engine.h"
#include "tests/bundle_assert.h"

enum { K = 4 };

static const fk_blob_codec codec = {fk_codec_bundle_encode, fk_codec_bundle_decode};

/* ------------------------------------------------------------ hostility */

typedef enum hostile {
    H_NONE,
    H_LOST,     /* the client steps but its update is lost (the reference run) */
    H_NAN,      /* first value of the first tensor NaN */
    H_SHAPE,    /* first tensor one row longer */
    H_MISSING,  /* first tensor left out */
    H_EXTRA,    /* an extra tensor 'x' = [NaN] * 4 */
    H_HUGE,     /* last value of the first tensor +1e300 */
    H_NHUGE,    /* last value of the first tensor -1e300 */
    H_GARBAGE,  /* the bundle: only x = [NaN] * 4 */
    H_NANLOSS,  /* a good bundle, but the report's loss NaN */
    H_INFLOSS,  /* a good bundle, but the report's loss +Inf */
    H_D7,       /* fedrf-tca: feature dimension 'd' = 7 (passes the check, fails aggregation) */
} hostile;

static const char *const H_NAME[] = {"none",  "lost",   "nan",     "shape",   "missing", "extra",
                                     "huge",  "nhuge",  "garbage", "nanloss", "infloss", "d7"};

/* up made hostile in place (up has at least one tensor). */
static void corrupt(hostile h, fk_bundle *up, fk_report *rep)
{
    fk_bundle out;
    fk_bundle_init(&out);
    const fk_tensor *t0 = &up->items[0];
    for (size_t i = 0; i < up->count; i++) {
        const fk_tensor *t = &up->items[i];
        if (i == 0 && (h == H_MISSING || h == H_GARBAGE))
            continue;
        if (h == H_GARBAGE)
            continue;
        if (i == 0 && h == H_SHAPE) {
            uint64_t shape[FK_TENSOR_MAX_DIMS] = {2};
            int nd = t->ndim ? t->ndim : 1;
            for (int d = 0; d < t->ndim; d++)
                shape[d] = t->shape[d];
            shape[0] += t->ndim ? 1 : 0;
            double *d = fk_bundle_add(&out, t->name, nd, shape);
            assert_non_null(d);
            memcpy(d, t->data, t->len * sizeof *d);
            continue;
        }
        assert_int_equal(fk_bundle_put(&out, t->name, t->ndim, t->shape, t->data), FK_OK);
    }
    fk_tensor *o0 = out.count ? (fk_tensor *)fk_bundle_get(&out, t0->name) : NULL;
    if (h == H_NAN)
        o0->data[0] = NAN;
    if (h == H_HUGE || h == H_NHUGE)
        o0->data[o0->len - 1] = h == H_HUGE ? 1e300 : -1e300;
    if (h == H_EXTRA || h == H_GARBAGE) {
        const double x[4] = {NAN, NAN, NAN, NAN};
        assert_int_equal(fk_bundle_put_vec(&out, "x", 4, x), FK_OK);
    }
    if (h == H_D7) {
        fk_tensor *d = (fk_tensor *)fk_bundle_get(&out, "d");
        assert_non_null(d);
        d->data[0] = 7;
    }
    if (h == H_NANLOSS)
        rep->loss = NAN;
    if (h == H_INFLOSS)
        rep->loss = INFINITY;
    fk_bundle_close(up);
    *up = out;
}

/* The tensor a refusal of h must name ("" = any message). */
static const char *named(hostile h, const fk_bundle *up)
{
    if (h == H_EXTRA || h == H_GARBAGE)
        return "'x'";
    if (h == H_NANLOSS || h == H_INFLOSS)
        return "loss";
    static char q[FK_TENSOR_NAME_MAX + 2];
    snprintf(q, sizeof q, "'%s'", up->items[0].name);
    return q;
}

/* ------------------------------------------------------------- fixtures */

typedef struct jobcase {
    const char *method;
    const char *extra;         /* job keys */
    int data;                  /* 0 = GMM, 1 = MoR, 2 = domain shift */
    int round, phase;          /* where the hostile client (1) strikes */
    int ref_lost;              /* reference: client 1's update lost there (else: the clean run) */
    const char *skip_in_model; /* a model tensor that counts repeats (differs from the clean run) */
} jobcase;

typedef struct fed {
    char dir[64], path[128];
    fk_dataset data[K];
    int have_data;
    fk_store *st;
    fk_engine *e;
    double now;
    const fk_method *m;
    fk_jobconf conf;
    int have_conf;
    void *cli[K];
    /* the hostile client 1 */
    hostile h;
    int h_round, h_phase, h_always; /* h_always: every phase from (h_round, h_phase) on */
    int refusals;                   /* pushes refused with FK_EINVAL */
    char last_refusal[512];
    const char *want;               /* text each refusal must contain */
    int saw_excluded;               /* job status named an excluded client while running */
    char lost[96];                  /* the task whose update was lost: not done twice */
    int restart_round;              /* restart the server once the job reaches it (0: never) */
} fed;

static void make_data(fed *f, int kind)
{
    fk_err err;
    if (f->have_data)
        for (int c = 0; c < K; c++)
            fk_dataset_close(&f->data[c]);
    memset(f->data, 0, sizeof f->data);
    if (kind == 0) {
        fk_synth_gmm o;
        fk_synth_gmm_defaults(&o);
        o.K = K, o.R = 2, o.p = 3, o.n = 60, o.n_outlier = 0;
        double theta[K * 2 * 3], w[K * 2];
        assert_int_equal(fk_synth_gmm_make(&o, 5, f->data, theta, w, &err), FK_OK);
    } else if (kind == 1) {
        fk_mor_data d;
        assert_int_equal(fk_mor_make(K, 2, 2, 100, 0, 0.0, -3.0, 5, &d, &err), FK_OK);
        for (int c = 0; c < K; c++)
            assert_int_equal(fk_mor_task_dataset(&d, c, &f->data[c], &err), FK_OK);
        fk_mor_data_close(&d);
    } else {
        fk_synth_opts o;
        fk_synth_defaults(&o);
        o.n_sources = K - 1, o.n_per_domain = 60, o.d = 8, o.n_classes = 3, o.seed = 5;
        assert_int_equal(fk_synth_shift(&o, f->data, &err), FK_OK);
    }
    f->have_data = 1;
}

static void open_engine(fed *f)
{
    fk_err err;
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    fk_engine_opts o = {.store = f->st, .codec = codec};
    if (fk_engine_open(&f->e, &o, f->now, &err))
        fail_msg("engine open: %s", err.msg);
}

static void close_clients(fed *f)
{
    for (int c = 0; c < K; c++)
        if (f->cli[c])
            f->m->client_close(f->cli[c]);
    memset(f->cli, 0, sizeof f->cli);
    if (f->have_conf)
        fk_jobconf_close(&f->conf);
    f->have_conf = 0;
}

static int setup(void **state)
{
    fed *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/fk-hostile-XXXXXX");
    if (!mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/state.db", f->dir);
    f->now = 1000.0;
    open_engine(f);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fed *f = *state;
    close_clients(f);
    fk_engine_close(f->e);
    fk_store_close(f->st);
    const char *suffix[] = {"", "-wal", "-shm", ".run"};
    for (int i = 0; i < 4; i++) {
        char p[160];
        snprintf(p, sizeof p, "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    if (f->have_data)
        for (int c = 0; c < K; c++)
            fk_dataset_close(&f->data[c]);
    free(f);
    return 0;
}

static const char *job_text(const jobcase *jc, const char *more)
{
    static char text[1024];
    snprintf(text, sizeof text,
             "method = %s\ndataset = synth\nclients = c0, c1, c2, c3\nseed = 3\ndeadline = 30\n"
             "quorum = 0.5\n%s%s",
             jc->method, jc->extra, more ? more : "");
    return text;
}

static int strikes(const fed *f, const fk_task_ref *t)
{
    if (f->h == H_NONE || t->client != 1)
        return 0;
    if (f->h_always)
        return t->round > f->h_round || (t->round == f->h_round && t->phase >= f->h_phase);
    return t->round == f->h_round && t->phase == f->h_phase && t->attempt == 0;
}

/* Client c answers its waiting task, if any: 1 if it pushed or was refused, 0 otherwise. */
static int answer(fed *f, int c)
{
    char id[16];
    snprintf(id, sizeof id, "c%d", c);
    fk_task_ref t;
    fk_err err;
    int rc = fk_engine_pull(f->e, id, f->now, &t, &err);
    if (rc == FK_ENOTFOUND)
        return 0;
    assert_int_equal(rc, FK_OK);
    int hit = strikes(f, &t);
    if (hit && f->h == H_LOST && !strcmp(t.idem, f->lost))
        return 0;
    if (!f->have_conf) {
        assert_int_equal(fk_jobconf_parse(&f->conf, t.config, "task", &err), FK_OK);
        f->have_conf = 1;
        f->m = fk_method_find(t.method, &err);
        assert_non_null(f->m);
    }
    if (!f->cli[c])
        if (f->m->client_init(&f->cli[c], &f->conf.params, &f->data[c], t.client, t.n_clients,
                              t.seed, &err))
            fail_msg("client %d init: %s", c, err.msg);
    fk_bundle task, up;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    assert_int_equal(codec.decode(t.task, t.task_len, &task, &err), FK_OK);
    fk_report rep;
    fk_report_init(&rep);
    if (f->m->local_step(f->cli[c], &task, &up, &rep, &err))
        fail_msg("client %d step: %s", c, err.msg);
    const char *want = "";
    if (hit && f->h == H_LOST) {
        snprintf(f->lost, sizeof f->lost, "%s", t.idem);
        fk_bundle_close(&task);
        fk_bundle_close(&up);
        return 0;
    }
    if (hit) {
        if (!up.count) /* nothing to spoil in this phase: only an extra tensor */
            assert_true(f->h == H_EXTRA || f->h == H_GARBAGE);
        want = up.count ? named(f->h, &up) : "'x'";
        if (up.count || f->h == H_EXTRA || f->h == H_GARBAGE) {
            if (!up.count) {
                const double x[4] = {NAN, NAN, NAN, NAN};
                assert_int_equal(fk_bundle_put_vec(&up, "x", 4, x), FK_OK);
            } else {
                corrupt(f->h, &up, &rep);
            }
        }
    }
    uint8_t *blob;
    size_t len;
    assert_int_equal(codec.encode(&up, &blob, &len, &err), FK_OK);
    fk_push p = {.job = t.job, .round = t.round, .attempt = t.attempt, .phase = t.phase,
                 .identity = id, .idem = t.idem, .blob = blob, .len = len, .report = rep};
    int dup = 0;
    rc = fk_engine_push(f->e, &p, f->now, &dup, &err);
    free(blob);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    if (hit && f->h != H_D7) {
        if (rc != FK_EINVAL)
            fail_msg("%s update of c1 (round %d phase %d) not refused: rc %d", H_NAME[f->h],
                     t.round, t.phase, rc);
        if (!strstr(err.msg, want))
            fail_msg("refusal does not name %s: %s", want, err.msg);
        f->refusals++;
        snprintf(f->last_refusal, sizeof f->last_refusal, "%s", err.msg);
        /* a resend is not taken either: the client is a dropout of this phase */
        fk_bundle_init(&up);
        return 1;
    }
    if (rc)
        fail_msg("push from c%d (round %d phase %d): %s", c, t.round, t.phase, err.msg);
    return 1;
}

/* Drive every running job to its end; time jumps to the next deadline when nobody can answer. */
static void run(fed *f, int64_t id)
{
    fk_err err;
    for (int guard = 0; fk_engine_running(f->e) > 0; guard++) {
        assert_true(guard < 20000);
        int progress = 0;
        for (int k = 0; k < K; k++)
            progress += answer(f, (3 * k + 1) % K);
        f->now += 0.5;
        double next;
        assert_int_equal(fk_engine_tick(f->e, f->now, &next, &err), FK_OK);
        fk_job_status s;
        if (fk_engine_status(f->e, id, &s, &err) == FK_OK && s.state == FK_JOB_RUNNING &&
            strstr(s.failure, "excluded"))
            f->saw_excluded = 1;
        if (f->restart_round && s.state == FK_JOB_RUNNING && s.round >= f->restart_round) {
            /* the server restarts: the job resumes from the store (the clients keep going) */
            f->restart_round = 0;
            fk_engine_close(f->e);
            fk_store_close(f->st);
            open_engine(f);
        }
        if (!progress && isfinite(next) && next > f->now)
            f->now = next;
    }
}

/* Submit the case with client 1 behaving as h; run to the end; the job's state and model. */
static int run_case(fed *f, const jobcase *jc, hostile h, int always, const char *more,
                    fk_bundle *model, fk_job_status *st)
{
    fk_err err;
    close_clients(f);
    f->h = h;
    f->h_round = jc->round;
    f->h_phase = jc->phase;
    f->h_always = always;
    f->refusals = 0;
    f->saw_excluded = 0;
    f->lost[0] = '\0';
    int64_t id = 0;
    if (fk_engine_submit(f->e, job_text(jc, more), f->now, &id, &err))
        fail_msg("submit %s: %s", jc->method, err.msg);
    run(f, id);
    assert_int_equal(fk_engine_status(f->e, id, st, &err), FK_OK);
    if (model && st->state == FK_JOB_DONE)
        assert_int_equal(fk_engine_result(f->e, id, model, NULL, &err), FK_OK);
    return st->state;
}

/* a and b equal but for the tensor `skip` (NULL: none). */
static void assert_models_equal(const fk_bundle *a, const fk_bundle *b, const char *skip)
{
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const fk_tensor *x = &a->items[i], *y = fk_bundle_get(b, x->name);
        assert_non_null(y);
        if (skip && !strcmp(x->name, skip))
            continue;
        assert_int_equal(x->len, y->len);
        for (size_t k = 0; k < x->len; k++)
            if (!(x->data[k] == y->data[k] || (isnan(x->data[k]) && isnan(y->data[k]))))
                fail_msg("model tensor '%s' value %zu: %.17g vs %.17g", x->name, k, x->data[k],
                         y->data[k]);
    }
}

static void all_finite(const fk_bundle *b)
{
    for (size_t i = 0; i < b->count; i++)
        for (size_t k = 0; k < b->items[i].len; k++)
            if (!isfinite(b->items[i].data[k]))
                fail_msg("model tensor '%s' value %zu is %g", b->items[i].name, k,
                         b->items[i].data[k]);
}

/* Every kind of bad update from client 1 at (round, phase): refused, naming the tensor, the
 * job done with the reference model (client 1's update lost there, or the clean run). */
static void hostile_case(fed *f, const jobcase *jc)
{
    make_data(f, jc->data);
    fk_bundle ref;
    fk_job_status st;
    assert_int_equal(run_case(f, jc, jc->ref_lost ? H_LOST : H_NONE, 0, NULL, &ref, &st),
                     FK_JOB_DONE);
    all_finite(&ref);
    const hostile hs[] = {H_NAN, H_SHAPE, H_MISSING, H_EXTRA, H_HUGE, H_NHUGE};
    for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) {
        fk_bundle got;
        int state = run_case(f, jc, hs[i], 0, NULL, &got, &st);
        if (state != FK_JOB_DONE)
            fail_msg("%s with a %s update: job %s: %s", jc->method, H_NAME[hs[i]],
                     fk_job_state_name(state), st.failure);
        assert_int_equal(f->refusals, 1);
        assert_models_equal(&got, &ref, jc->skip_in_model);
        fk_bundle_close(&got);
    }
    fk_bundle_close(&ref);
}

/* --------------------------------------------------------------- tests */

static const jobcase FEDGREM = {"fedgrem", "R = 2\nrestarts = 2\nalign_B = 5\nrounds = 4\n", 0,
                                2, 0, 1, NULL};
static const jobcase FEDGREM_MOR = {"fedgrem-mor",
                                    "R = 2\nrestarts = 2\nalign_B = 5\nrounds = 3\n", 1, 2, 0, 1,
                                    NULL};
static const jobcase FEDGMM_MOR = {"fedgmm-mor",
                                   "R = 2\nrestarts = 2\nalign_B = 5\nfedgmm_R1 = 2\nrounds = 3\n",
                                   1, 2, 0, 1, NULL};
static const jobcase POOLED_EM = {"pooled-em", "R = 2\nrestarts = 2\n", 0, 3, 0, 0, "repeats"};
static const jobcase POOLED_EM_MOR = {"pooled-em-mor", "R = 2\nrestarts = 2\n", 1, 2, 0, 0,
                                      "repeats"};
static const jobcase FEDRF = {"fedrf-tca",
                              "N = 20\nm = 4\nhidden = 8\nbatch = 16\ntc = 1\nclasses = 3\n"
                              "rounds = 3\nparticipation = all\n",
                              2, 2, 1, 1, NULL};

static void fedgrem_bad_updates_are_dropouts(void **state)
{
    hostile_case(*state, &FEDGREM);
}

static void fedgrem_mor_bad_updates_are_dropouts(void **state)
{
    hostile_case(*state, &FEDGREM_MOR);
}

static void fedgmm_mor_bad_updates_are_dropouts(void **state)
{
    hostile_case(*state, &FEDGMM_MOR);
}

static void pooled_em_bad_updates_repeat_the_step(void **state)
{
    hostile_case(*state, &POOLED_EM);
}

static void pooled_em_mor_bad_updates_repeat_the_step(void **state)
{
    hostile_case(*state, &POOLED_EM_MOR);
}

static void fedrf_tca_bad_updates_are_dropouts(void **state)
{
    hostile_case(*state, &FEDRF);
}

/* The case: at FedGrEM's initialisation (which needs every client) client 1 sends
 * only x = [NaN] * 4. Refused, naming 'x'; the round is retried; the job completes. */
static void fedgrem_garbage_at_init_retries_the_round(void **state)
{
    fed *f = *state;
    make_data(f, 0);
    jobcase jc = FEDGREM;
    jc.round = 1, jc.phase = 0;
    fk_bundle got;
    fk_job_status st;
    int s = run_case(f, &jc, H_GARBAGE, 0, NULL, &got, &st);
    if (s != FK_JOB_DONE)
        fail_msg("job %s: %s", fk_job_state_name(s), st.failure);
    assert_int_equal(f->refusals, 1);
    assert_non_null(strstr(f->last_refusal, "unexpected tensor 'x'"));
    all_finite(&got);
    fk_bundle_close(&got);
}

/* A client bad at every step: refused max_refusals times, then excluded (job status says so
 * while the job runs); the job completes on the others. */
static void always_bad_client_is_excluded(void **state)
{
    fed *f = *state;
    make_data(f, 0);
    jobcase jc = FEDGREM;
    jc.extra = "R = 2\nrestarts = 2\nalign_B = 5\nrounds = 8\n";
    fk_bundle got;
    fk_job_status st;
    int s = run_case(f, &jc, H_NAN, 1, "max_refusals = 2\n", &got, &st);
    if (s != FK_JOB_DONE)
        fail_msg("job %s: %s", fk_job_state_name(s), st.failure);
    assert_int_equal(f->refusals, 2);
    assert_true(f->saw_excluded);
    all_finite(&got);
    fk_bundle_close(&got);
}

/* The report: loss NaN where FedGrEM always measures it, and loss +Inf for any method. */
static void bad_reports_are_refused(void **state)
{
    fed *f = *state;
    make_data(f, 0);
    fk_bundle ref, got;
    fk_job_status st;
    assert_int_equal(run_case(f, &FEDGREM, H_LOST, 0, NULL, &ref, &st), FK_JOB_DONE);
    const hostile hs[] = {H_NANLOSS, H_INFLOSS};
    for (int i = 0; i < 2; i++) {
        assert_int_equal(run_case(f, &FEDGREM, hs[i], 0, NULL, &got, &st), FK_JOB_DONE);
        assert_int_equal(f->refusals, 1);
        assert_models_equal(&got, &ref, NULL);
        fk_bundle_close(&got);
    }
    fk_bundle_close(&ref);
    make_data(f, 2);
    assert_int_equal(run_case(f, &FEDRF, H_INFLOSS, 0, NULL, &got, &st), FK_JOB_DONE);
    assert_int_equal(f->refusals, 1);
    fk_bundle_close(&got);
}

/* fk_update_check_report: what NaN may mean and what is refused. */
static void report_check_rules(void **state)
{
    (void)state;
    fk_report r;
    fk_err err;
    fk_report_init(&r);
    assert_int_equal(fk_update_check_report(&r, 0, &err), FK_OK); /* nothing measured */
    r.n_samples = NAN;
    assert_int_equal(fk_update_check_report(&r, 0, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "n_samples"));
    fk_report_init(&r);
    r.accuracy = 1.5;
    assert_int_equal(fk_update_check_report(&r, 0, &err), FK_EINVAL);
    fk_report_init(&r);
    r.error = -INFINITY;
    assert_int_equal(fk_update_check_report(&r, 0, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "error"));
    fk_report_init(&r);
    r.loss = 1e300; /* a diverged model's loss is information, not refused */
    assert_int_equal(fk_update_check_report(&r, 0, &err), FK_OK);
    r.loss = 2.5;
    r.n_samples = 10;
    assert_int_equal(fk_update_check_report(&r, 0, &err), FK_OK);
    assert_int_equal(fk_update_check_measured(&r, offsetof(fk_report, accuracy), "accuracy", 0,
                                              &err),
                     FK_EINVAL);
}

/* One client's feature dimension disagrees: no per-update check can see it (the first
 * client's d is only known at the aggregation), so the aggregation fails; the engine finds
 * the client without which it succeeds, drops its update and closes the phase without it. */
static void aggregation_error_excludes_one_client(void **state)
{
    fed *f = *state;
    make_data(f, 2);
    jobcase jc = FEDRF;
    jc.round = 1, jc.phase = 0;
    fk_bundle ref, got;
    fk_job_status st;
    assert_int_equal(run_case(f, &jc, H_LOST, 0, NULL, &ref, &st), FK_JOB_DONE);
    int s = run_case(f, &jc, H_D7, 0, NULL, &got, &st);
    if (s != FK_JOB_DONE)
        fail_msg("job %s: %s", fk_job_state_name(s), st.failure);
    assert_models_equal(&got, &ref, NULL);
    fk_bundle_close(&got);
    /* a restart after the blame replays the round from the store without that update */
    f->restart_round = 1;
    s = run_case(f, &jc, H_D7, 0, NULL, &got, &st);
    assert_int_equal(f->restart_round, 0);
    if (s != FK_JOB_DONE)
        fail_msg("job after a restart %s: %s", fk_job_state_name(s), st.failure);
    assert_models_equal(&got, &ref, NULL);
    fk_bundle_close(&got);
    fk_bundle_close(&ref);
}

/* A FedRF-TCA client with fewer samples (60) than m (80) used to be refused at init ("m must
 * be below the samples"); W is learned on mini-batches, so the job runs to a finite model
 * that scores the target. */
static void fedrf_tca_fewer_samples_than_m(void **state)
{
    fed *f = *state;
    make_data(f, 2);
    jobcase jc = FEDRF;
    jc.extra = "N = 50\nm = 80\nhidden = 8\nbatch = 16\ntc = 1\nclasses = 3\nrounds = 3\n"
               "participation = all\n";
    assert_true(f->data[0].X.rows < 80);
    fk_bundle got;
    fk_job_status st;
    int s = run_case(f, &jc, H_NONE, 0, NULL, &got, &st);
    if (s != FK_JOB_DONE)
        fail_msg("job %s: %s", fk_job_state_name(s), st.failure);
    all_finite(&got);
    const fk_tensor *W = fk_bundle_get(&got, "W");
    assert_non_null(W);
    assert_int_equal(W->len, 100 * 80);
    fk_report rep;
    fk_report_init(&rep);
    fk_err err;
    assert_int_equal(f->m->evaluate(f->cli[K - 1], &got, &rep, &err), FK_OK);
    assert_true(rep.accuracy >= 0.0 && rep.accuracy <= 1.0);
    fk_bundle_close(&got);
}

/* ------------------------------------------------------------ simulator */

/* The simulator wraps the method: client 1's update spoiled in round 2. */
static const fk_method *sim_inner;
static void *sim_cli1;
static hostile sim_h;
static int sim_round, sim_strike, sim_refused;

static int sim_client_init(void **cli, const fk_params *p, const fk_dataset *d, int client, int n,
                           uint64_t seed, fk_err *err)
{
    int rc = sim_inner->client_init(cli, p, d, client, n, seed, err);
    if (!rc && client == 1)
        sim_cli1 = *cli;
    return rc;
}

static int sim_step(void *cli, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    int rc = sim_inner->local_step(cli, task, up, rep, err);
    if (!rc && cli == sim_cli1 && ++sim_round == sim_strike && up->count)
        corrupt(sim_h, up, rep);
    return rc;
}

static void sim_count(const fk_sim_round *r, void *ctx)
{
    (void)ctx;
    sim_refused += r->refused;
}

static void sim_refuses_bad_updates(void **state)
{
    fed *f = *state;
    const jobcase *cases[] = {&FEDGREM, &FEDGMM_MOR, &FEDRF, &POOLED_EM};
    const int strike[] = {3, 3, 5, 3}; /* client 1's local step that is spoiled: in round 2+ */
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        sim_strike = strike[c];
        make_data(f, cases[c]->data);
        fk_err err;
        fk_jobconf conf;
        assert_int_equal(fk_jobconf_parse(&conf, job_text(cases[c], NULL), "job", &err), FK_OK);
        sim_inner = fk_method_find(cases[c]->method, &err);
        assert_non_null(sim_inner);
        fk_jobconf_set_method(&conf, sim_inner);
        fk_method m = *sim_inner;
        m.client_init = sim_client_init;
        m.local_step = sim_step;
        const hostile hs[] = {H_NAN, H_SHAPE, H_MISSING, H_EXTRA, H_HUGE};
        for (size_t i = 0; i < sizeof hs / sizeof *hs; i++) {
            sim_h = hs[i];
            sim_round = sim_refused = 0;
            /* the refusal is counted in the round it happened; the run goes on */
            fk_sim_opts o = {.rounds = conf.rounds, .seed = conf.seed, .progress = sim_count};
            fk_bundle model;
            int rc = fk_sim_run(&m, &conf.params, f->data, K, &o, &model, NULL, &err);
            if (rc)
                fail_msg("sim %s with a %s update: %s", cases[c]->method, H_NAME[hs[i]],
                         err.msg);
            if (sim_refused != 1)
                fail_msg("sim %s with a %s update: %d refusals", cases[c]->method,
                         H_NAME[hs[i]], sim_refused);
            all_finite(&model);
            fk_bundle_close(&model);
        }
        fk_jobconf_close(&conf);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(report_check_rules),
        cmocka_unit_test_setup_teardown(fedgrem_bad_updates_are_dropouts, setup, teardown),
        cmocka_unit_test_setup_teardown(fedgrem_mor_bad_updates_are_dropouts, setup, teardown),
        cmocka_unit_test_setup_teardown(fedgmm_mor_bad_updates_are_dropouts, setup, teardown),
        cmocka_unit_test_setup_teardown(pooled_em_bad_updates_repeat_the_step, setup, teardown),
        cmocka_unit_test_setup_teardown(pooled_em_mor_bad_updates_repeat_the_step, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(fedrf_tca_bad_updates_are_dropouts, setup, teardown),
        cmocka_unit_test_setup_teardown(fedgrem_garbage_at_init_retries_the_round, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(always_bad_client_is_excluded, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_reports_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(aggregation_error_excludes_one_client, setup, teardown),
        cmocka_unit_test_setup_teardown(sim_refuses_bad_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(fedrf_tca_fewer_samples_than_m, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
