/* Allocation failures reach the caller. The test program is linked with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc (tests/meson.build), so every allocation the
 * fedkern libraries make goes through the counting wrappers below; the N-th one can be made to
 * fail. Each case runs a path once without failures for a reference, then again with the
 * 1st, 2nd, ... allocation failing until a run makes no more allocations than N. After an
 * injected failure a run must either report an error (negative code, a message) or, when the
 * code has a fallback for that allocation, give exactly the reference result: never FK_OK with
 * stale or partial state. The paths below have no fallback, so every such run must fail. Allocations made by shared libraries (OpenBLAS, libc internals)
 * are not counted. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/data/dataset.h"
#include "common/data/synth_shift.h"
#include "common/la/rng.h"
#include "common/methods/classes.h"
#include "common/methods/dica/dica_job.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/methods/jobconf.h"
#include "common/methods/kahm/kahm.h"
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/pooled_em.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sim.h"
#include "common/models/mixture/gmm.h"
#include "tests/bundle_assert.h"

/* ---- the counting allocator ---- */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);

static long alloc_count; /* allocations since arm() */
static long fail_at;     /* 1-based allocation that fails; 0: none */

/* Count from zero and fail the n-th allocation; arm(0) stops failing (the count stays). */
static void arm(long n)
{
    if (n)
        alloc_count = 0;
    fail_at = n;
}

/* Called for the allocation that fails (a place for a debugger's breakpoint: `break
 * alloc_refused if fail_at == N`); returns 1. */
static int __attribute__((noinline)) alloc_refused(void)
{
    __asm__ volatile("");
    return 1;
}

/* 1 when this allocation is the one to fail. */
static int failing(void)
{
    if (fail_at > 0 && ++alloc_count == fail_at)
        return alloc_refused();
    return 0;
}

void *__wrap_malloc(size_t size)
{
    return failing() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return failing() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
    return failing() ? NULL : __real_realloc(p, size);
}

/* After a run with fail_at = n: whether the n-th allocation happened (so was refused). */
static int injected(long n)
{
    return alloc_count >= n;
}

/* ---- helpers ---- */

static int same_tensor(const fk_bundle *a, const fk_bundle *b, const char *name)
{
    const fk_tensor *x = fk_bundle_get(a, name), *y = fk_bundle_get(b, name);
    return x && y && x->len == y->len && !memcmp(x->data, y->data, x->len * sizeof(double));
}

/* The outcome of one run with an injected failure: an error that reached the caller, or the
 * reference result. Counts each kind. */
typedef struct tally {
    int runs, errors, fallbacks;
} tally;

static void check_outcome(tally *t, int rc, const fk_err *err, int same_as_reference, long n)
{
    t->runs++;
    if (rc != FK_OK) {
        if (rc >= 0 || !err->msg[0])
            fail_msg("allocation %ld failed: code %d, message '%s'", n, rc, err->msg);
        t->errors++;
        return;
    }
    if (!same_as_reference)
        fail_msg("allocation %ld failed yet the call returned FK_OK with another result", n);
    t->fallbacks++;
}

/* ---- fedrf-tca: the server's plan (its sets of senders) ---- */

enum { NC = 4 };

static void fedrf_params(fk_params *p, const char *rounds)
{
    fk_params_init(p);
    assert_int_equal(fk_params_set(p, "N", "20"), FK_OK);
    assert_int_equal(fk_params_set(p, "m", "4"), FK_OK);
    assert_int_equal(fk_params_set(p, "hidden", "8"), FK_OK);
    assert_int_equal(fk_params_set(p, "batch", "16"), FK_OK);
    assert_int_equal(fk_params_set(p, "tc", "2"), FK_OK);
    assert_int_equal(fk_params_set(p, "classes", "5"), FK_OK);
    assert_int_equal(fk_params_set(p, "rounds", rounds), FK_OK);
}

/* The plan op after a failed allocation: an error, never the previous round's sets (the
 * plan used to return FK_OK with them). The sets are compared with a twin server's. */
static void fedrf_plan(void **state)
{
    (void)state;
    const fk_method *m = &fk_method_fedrf_tca;
    fk_params p;
    fedrf_params(&p, "3");
    fk_err err;
    tally t = {0};
    for (long n = 1;; n++) {
        void *srv;
        int chosen[NC], nc;
        fk_rng rng;
        assert_int_equal(m->server_init(&srv, &p, NC, 7, &err), FK_OK);
        fk_sim_plan_rng(&rng, 7, 1);
        assert_int_equal(m->plan(srv, 1, &rng, chosen, &nc, &err), FK_OK);
        fk_sim_plan_rng(&rng, 7, 2); /* reference sets of round 2, from a twin server */
        void *twin;
        assert_int_equal(m->server_init(&twin, &p, NC, 7, &err), FK_OK);
        fk_rng r1;
        fk_sim_plan_rng(&r1, 7, 1);
        assert_int_equal(m->plan(twin, 1, &r1, chosen, &nc, &err), FK_OK);
        assert_int_equal(m->plan(twin, 2, &rng, chosen, &nc, &err), FK_OK);
        fk_sim_plan_rng(&rng, 7, 2);
        err.msg[0] = '\0';
        arm(n);
        int rc = m->plan(srv, 2, &rng, chosen, &nc, &err);
        arm(0);
        const fk__fedrf_server *a = srv, *b = twin;
        int same = !memcmp(a->inA, b->inA, NC) && !memcmp(a->inW, b->inW, NC) &&
                   !memcmp(a->inC, b->inC, NC);
        int more = injected(n);
        if (more)
            check_outcome(&t, rc, &err, same, n);
        else
            assert_int_equal(rc, FK_OK);
        m->server_close(srv);
        m->server_close(twin);
        if (!more)
            break;
    }
    print_message("fedrf-tca plan: %d runs with a failed allocation, %d errors, %d fallbacks\n",
                  t.runs, t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0); /* none of these paths has a fallback */
    fk_params_close(&p);
}

/* Whole fedrf-tca jobs in the simulator (2 rounds, 4 clients) with each allocation failing
 * in turn: an error or the reference model. */
static void fedrf_sim(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    fk_synth_opts so;
    fk_synth_defaults(&so);
    so.n_sources = NC - 1;
    so.n_per_domain = 40;
    so.seed = 3;
    fk_err err;
    assert_int_equal(fk_synth_shift(&so, ds, &err), FK_OK);
    fk_params p;
    fedrf_params(&p, "2");
    fk_sim_opts o = {.rounds = 2, .seed = 9};
    fk_bundle ref;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &ref, NULL, &err), FK_OK);
    tally t = {0};
    for (long n = 1;; n++) {
        fk_bundle got;
        err.msg[0] = '\0';
        arm(n);
        int rc = fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &got, NULL, &err);
        arm(0);
        int more = injected(n);
        int same = !rc && same_tensor(&ref, &got, "W") && same_tensor(&ref, &got, "C");
        if (!rc)
            fk_bundle_close(&got);
        if (!more) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    print_message("fedrf-tca sim: %d runs with a failed allocation, %d errors, %d fallbacks\n",
                  t.runs, t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0); /* none of these paths has a fallback */
    fk_bundle_close(&ref);
    fk_params_close(&p);
    for (int i = 0; i < NC; i++)
        fk_dataset_close(&ds[i]);
}

/* ---- mixtures ---- */

enum { MK = 3, MN = 40, MP = 2 };

/* MK clients of MN points in MP dimensions: two clusters at 0 and 3 (deterministic). */
static void mixture_data(fk_dataset *d)
{
    for (int k = 0; k < MK; k++) {
        assert_int_equal(fk_dataset_init(&d[k], MN, MP, 0), FK_OK);
        for (int i = 0; i < MN; i++) {
            d[k].X.data[i * MP] = (i % 2 ? 3.0 : 0.0) + 0.05 * ((i * 7 + k) % 11);
            d[k].X.data[i * MP + 1] = 0.1 * ((i * 5 + 3 * k) % 13);
        }
    }
}

/* The EEE fit (k-means++ and Lloyd, then EM): kmeans used to skip its Lloyd steps when its
 * label buffer could not be had, and the fit went on. */
static void gmm_fit(void **state)
{
    (void)state;
    fk_dataset d[MK];
    mixture_data(d);
    double w[2], mu[2 * MP], sg[MP * MP], w2[2], mu2[2 * MP], sg2[MP * MP];
    fk_eee_fit ref = {.w = w, .mu = mu, .sigma = sg}, got = {.w = w2, .mu = mu2, .sigma = sg2};
    fk_err err;
    fk_rng rng;
    fk_rng_init(&rng, 5, 0);
    assert_int_equal(fk_gmm_fit_eee(d[0].X.data, MN, MP, 2, 3, &rng, &ref, &err), FK_OK);
    tally t = {0};
    for (long n = 1;; n++) {
        fk_rng_init(&rng, 5, 0);
        err.msg[0] = '\0';
        arm(n);
        int rc = fk_gmm_fit_eee(d[0].X.data, MN, MP, 2, 3, &rng, &got, &err);
        arm(0);
        int same = !rc && !memcmp(w, w2, sizeof w) && !memcmp(mu, mu2, sizeof mu) &&
                   !memcmp(sg, sg2, sizeof sg) && ref.loglik == got.loglik;
        if (!injected(n)) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    print_message("EEE fit: %d runs with a failed allocation, %d errors, %d fallbacks\n", t.runs,
                  t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0); /* none of these paths has a fallback */
    for (int k = 0; k < MK; k++)
        fk_dataset_close(&d[k]);
}

/* fedgrem and pooled-em jobs in the simulator: an error or the reference model. */
static void mixture_sim_one(const fk_method *m, int rounds)
{
    fk_dataset d[MK];
    mixture_data(d);
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set(&p, "R", "2"), FK_OK);
    assert_int_equal(fk_params_set(&p, "restarts", "2"), FK_OK);
    fk_sim_opts o = {.rounds = rounds, .seed = 4};
    fk_err err;
    fk_bundle ref;
    if (fk_sim_run(m, &p, d, MK, &o, &ref, NULL, &err))
        fail_msg("%s: %s", m->name, err.msg);
    tally t = {0};
    for (long n = 1;; n++) {
        fk_bundle got;
        err.msg[0] = '\0';
        arm(n);
        int rc = fk_sim_run(m, &p, d, MK, &o, &got, NULL, &err);
        arm(0);
        int same = !rc && same_tensor(&ref, &got, "theta") && same_tensor(&ref, &got, "w");
        if (!rc)
            fk_bundle_close(&got);
        if (!injected(n)) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    print_message("%s sim: %d runs with a failed allocation, %d errors, %d fallbacks\n", m->name,
                  t.runs, t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0); /* none of these paths has a fallback */
    fk_bundle_close(&ref);
    fk_params_close(&p);
    for (int k = 0; k < MK; k++)
        fk_dataset_close(&d[k]);
}

static void fedgrem_sim(void **state)
{
    (void)state;
    mixture_sim_one(&fk_method_fedgrem, 3);
}

static void pooled_em_sim(void **state)
{
    (void)state;
    mixture_sim_one(&fk_method_pooled_em, fk_pooled_em_rounds(2));
}

/* ---- the server's job configs ---- */

static void jobconf(void **state)
{
    (void)state;
    const char *text = "method = fedgrem\n"
                       "dataset = toy\n"
                       "rounds = 4\n"
                       "clients = site[0-9], extra\n"
                       "aggregator = trimmed-mean\n"
                       "trim = 0.2\n"
                       "R = 3\n";
    fk_jobconf ref;
    fk_err err;
    assert_int_equal(fk_jobconf_parse(&ref, text, "job.conf", &err), FK_OK);
    tally t = {0};
    for (long n = 1;; n++) {
        fk_jobconf got;
        err.msg[0] = '\0';
        arm(n);
        int rc = fk_jobconf_parse(&got, text, "job.conf", &err);
        arm(0);
        int same = !rc && got.n_clients == ref.n_clients && got.rounds == ref.rounds &&
                   fk_jobconf_client_index(&got, "extra") == fk_jobconf_client_index(&ref, "extra") &&
                   !strcmp(fk_params_str(&got.params, "R", ""), "3");
        fk_jobconf_close(&got);
        if (!injected(n)) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    print_message("jobconf: %d runs with a failed allocation, %d errors, %d fallbacks\n", t.runs,
                  t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0); /* none of these paths has a fallback */
    fk_jobconf_close(&ref);
}

/* ---- one class list per job: the list and the rows indexed by it ---- */

static void classes_index(void **state)
{
    (void)state;
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set(&p, "classes", "30, 10 20"), FK_OK);
    fk_dataset d;
    fk_err err;
    assert_int_equal(fk_dataset_init(&d, 6, 2, 1), FK_OK);
    assert_int_equal(fk_dataset_set_labels(&d, (double[]){10, 30, 30, 10, 30, 10}, &err), FK_OK);
    tally t = {0};
    for (long n = 1;; n++) {
        fk_classes c = {0};
        int *y = NULL;
        err.msg[0] = '\0';
        arm(n);
        int rc = fk_classes_parse(&c, &p, 0, 100, FK_CLASSES_COUNT_OWN, &err);
        if (!rc)
            rc = fk_classes_index(&c, &d, "test", &y, &err);
        arm(0);
        int same = !rc && y[0] == 0 && y[1] == 2 && c.n == 3;
        free(y);
        fk_classes_close(&c);
        if (!injected(n)) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0);
    fk_dataset_close(&d);
    fk_params_close(&p);
}

/* kahm's client with a class block left out (one sample): a failed allocation is an error,
 * never an update that silently lost another class (the server side is left out here: a
 * failed allocation in check_update refuses the update, so fk_sim_run counts a dropout) */
static void kahm_left_out_step(void **state)
{
    (void)state;
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set(&p, "classes", "3"), FK_OK);
    assert_int_equal(fk_params_set(&p, "holdout", "0"), FK_OK);
    fk_dataset d;
    fk_err err;
    double y[13];
    assert_int_equal(fk_dataset_init(&d, 13, 3, 1), FK_OK);
    for (int i = 0; i < 13; i++) {
        for (int j = 0; j < 3; j++)
            d.X.data[i * 3 + j] = 0.1 * ((i * 7 + j * 3) % 11) + 0.3 * (i % 2) * j;
        y[i] = i == 12 ? 2 : i % 2; /* one row of class 2 */
    }
    assert_int_equal(fk_dataset_set_labels(&d, y, &err), FK_OK);
    fk_bundle task, ref;
    fk_bundle_init(&task);
    fk_bundle_init(&ref);
    assert_int_equal(fk_bundle_put_scalar(&task, "upload", 0), FK_OK);
    int level = fk_log_level();
    fk_log_set_level(FK_LOG_ERROR); /* one warning per left-out block and run */
    void *cli;
    fk_report rep;
    assert_int_equal(fk_method_kahm.client_init(&cli, &p, &d, 0, 1, 3, &err), FK_OK);
    assert_int_equal(fk_method_kahm.local_step(cli, &task, &ref, &rep, &err), FK_OK);
    fk_method_kahm.client_close(cli);
    assert_non_null(fk_bundle_get(&ref, "left_out"));
    tally t = {0};
    for (long n = 1;; n++) {
        fk_bundle got;
        fk_bundle_init(&got);
        err.msg[0] = '\0';
        cli = NULL;
        arm(n);
        int rc = fk_method_kahm.client_init(&cli, &p, &d, 0, 1, 3, &err);
        if (!rc)
            rc = fk_method_kahm.local_step(cli, &task, &got, &rep, &err);
        arm(0);
        int same = !rc && same_tensor(&got, &ref, "held") && same_tensor(&got, &ref, "left_out");
        fk_method_kahm.client_close(cli);
        fk_bundle_close(&got);
        if (!injected(n)) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    fk_log_set_level(level);
    print_message("kahm left out: %d runs with a failed allocation, %d errors, %d fallbacks\n",
                  t.runs, t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0);
    fk_bundle_close(&task);
    fk_bundle_close(&ref);
    fk_dataset_close(&d);
    fk_params_close(&p);
}

/* ---- dica, udica, kahm and sfl: whole jobs in the simulator ---- */

/* Whether two models hold the same tensors, bit for bit (assert_bundles_equal, as a test). */
static int same_model(const fk_bundle *a, const fk_bundle *b)
{
    if (a->count != b->count)
        return 0;
    for (size_t i = 0; i < a->count; i++) {
        const fk_tensor *t = fk_bundle_get(b, a->items[i].name);
        if (!t || t->len != a->items[i].len ||
            memcmp(t->data, a->items[i].data, t->len * sizeof(double)))
            return 0;
    }
    return 1;
}

enum { SK = 3 };

/* A job of type m with the keys kv (NULL-terminated pairs) on the type's built-in data for SK
 * clients, run by fk_sim_run with each allocation failing in turn (data made before arming):
 * every run reports an error with a message, or gives the reference model. The warnings of
 * the runs (kahm's left-out blocks, sfl's consent notice) are silenced. */
static void method_sim_one(const fk_method *m, const char *const *kv, int rounds)
{
    fk_params p;
    fk_params_init(&p);
    for (int i = 0; kv[i]; i += 2)
        assert_int_equal(fk_params_set(&p, kv[i], kv[i + 1]), FK_OK);
    fk_dataset d[SK];
    memset(d, 0, sizeof d);
    fk_err err = {0};
    if (m->sim_data(&p, SK, 6, d, NULL, &err))
        fail_msg("%s data: %s", m->name, err.msg);
    int level = fk_log_level();
    fk_log_set_level(FK_LOG_ERROR);
    fk_sim_opts o = {.rounds = rounds, .seed = 6};
    fk_bundle ref;
    if (fk_sim_run(m, &p, d, SK, &o, &ref, NULL, &err))
        fail_msg("%s: %s", m->name, err.msg);
    tally t = {0};
    for (long n = 1;; n++) {
        fk_bundle got;
        err.msg[0] = '\0';
        arm(n);
        int rc = fk_sim_run(m, &p, d, SK, &o, &got, NULL, &err);
        arm(0);
        int same = !rc && same_model(&ref, &got);
        if (!rc)
            fk_bundle_close(&got);
        if (!injected(n)) {
            assert_int_equal(rc, FK_OK);
            break;
        }
        check_outcome(&t, rc, &err, same, n);
    }
    fk_log_set_level(level);
    print_message("%s sim: %d runs with a failed allocation, %d errors, %d fallbacks\n", m->name,
                  t.runs, t.errors, t.fallbacks);
    assert_true(t.errors > 0);
    assert_int_equal(t.fallbacks, 0); /* none of these paths has a fallback */
    fk_bundle_close(&ref);
    fk_params_close(&p);
    for (int k = 0; k < SK; k++)
        fk_dataset_close(&d[k]);
}

static void dica_sim(void **state)
{
    (void)state;
    method_sim_one(&fk_method_dica,
                   (const char *const[]){"R", "12", "sim_n", "30", "holdout", "last", NULL}, 1);
}

static void udica_sim(void **state)
{
    (void)state;
    method_sim_one(&fk_method_udica,
                   (const char *const[]){"R", "12", "sim_n", "30", "holdout", "last", NULL}, 1);
}

static void dica_regression_sim(void **state)
{
    (void)state;
    method_sim_one(&fk_method_dica,
                   (const char *const[]){"R", "12", "sim_n", "30", "task", "regression", NULL}, 1);
}

static void kahm_sim(void **state)
{
    (void)state;
    /* mode B (the class holders) and mode A (class models uploaded, with both consents) */
    method_sim_one(&fk_method_kahm,
                   (const char *const[]){"classes", "4", "sim_samples", "8", "sim_dim", "3",
                                         "holdout", "0", NULL},
                   1);
    method_sim_one(&fk_method_kahm,
                   (const char *const[]){"classes", "4", "sim_samples", "8", "sim_dim", "3",
                                         "holdout", "0", "upload_models", "1",
                                         "local.allow_model_upload", "true", NULL},
                   1);
}

static void sfl_sim(void **state)
{
    (void)state;
    const char *const base[] = {"raw_sample_upload", "acknowledged", "local.allow_raw_upload",
                                "true", "sim_n", "12", "n_widths", "2", NULL};
    method_sim_one(&fk_method_sfl, base, 1);
    method_sim_one(&fk_method_sfl,
                   (const char *const[]){"raw_sample_upload", "acknowledged",
                                         "local.allow_raw_upload", "true", "sim_n", "8",
                                         "n_widths", "2", "multiclass", "ovo", "classes", "0, 1, 2", NULL},
                   1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(fedrf_plan),    cmocka_unit_test(fedrf_sim),
        cmocka_unit_test(gmm_fit),       cmocka_unit_test(fedgrem_sim),
        cmocka_unit_test(pooled_em_sim), cmocka_unit_test(jobconf),
        cmocka_unit_test(classes_index), cmocka_unit_test(kahm_left_out_step),
        cmocka_unit_test(dica_sim),      cmocka_unit_test(udica_sim),
        cmocka_unit_test(dica_regression_sim), cmocka_unit_test(kahm_sim),
        cmocka_unit_test(sfl_sim),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
