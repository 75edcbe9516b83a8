/* Pending prediction requests (server/fanout.c) with the real kahm job type in mode B:
 * each asked client gets the batch once, answers are checked before they are taken, the
 * request completes when every asked client is done or at its deadline, and its result is
 * the method's combine of the answers taken (silent clients named). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/kahm/kahm.h"
#include "common/methods/sim.h"
#include "server/fanout.h"

enum { K = 4, C = 6 };

static const char *const IDS[K] = {"c0", "c1", "c2", "c3"};

typedef struct fixture {
    fk_params p;
    fk_dataset ds[K];
    void *cli[K];
    fk_bundle model, q;
} fixture;

/* A finished mode-B job: the server's model and every client's fitted state. */
static int setup(void **state)
{
    fixture *x = calloc(1, sizeof *x);
    assert_non_null(x);
    fk_log_set_level(FK_LOG_ERROR);
    fk_params_init(&x->p);
    assert_int_equal(fk_params_set(&x->p, "classes", "6"), FK_OK);
    assert_int_equal(fk_params_set(&x->p, "sim_classes_per_client", "2"), FK_OK);
    fk_err err;
    assert_int_equal(fk_method_kahm.sim_data(&x->p, K, 7, x->ds, NULL, &err), FK_OK);
    fk_sim_opts o = {.rounds = 1, .seed = 7};
    assert_int_equal(fk_sim_run(&fk_method_kahm, &x->p, x->ds, K, &o, &x->model, NULL, &err),
                     FK_OK);
    for (int k = 0; k < K; k++) {
        assert_int_equal(fk_method_kahm.client_init(&x->cli[k], &x->p, &x->ds[k], k, K, 7, &err),
                         FK_OK);
        fk_bundle t, u;
        fk_bundle_init(&t);
        fk_bundle_init(&u);
        assert_int_equal(fk_bundle_put_scalar(&t, "upload", 0), FK_OK);
        fk_report r;
        fk_report_init(&r);
        assert_int_equal(fk_method_kahm.local_step(x->cli[k], &t, &u, &r, &err), FK_OK);
        fk_bundle_close(&t);
        fk_bundle_close(&u);
    }
    fk_bundle_init(&x->q);
    size_t n = 20, p = x->ds[1].X.cols;
    assert_int_equal(fk_bundle_put(&x->q, "X", 2, (uint64_t[]){n, p}, x->ds[1].X.data), FK_OK);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fixture *x = *state;
    for (int k = 0; k < K; k++) {
        fk_method_kahm.client_close(x->cli[k]);
        fk_dataset_close(&x->ds[k]);
    }
    fk_bundle_close(&x->model);
    fk_bundle_close(&x->q);
    fk_params_close(&x->p);
    free(x);
    return 0;
}

static int enc(const fk_bundle *b, uint8_t **out, size_t *len, fk_err *err)
{
    (void)b;
    (void)err;
    *out = malloc(4);
    memcpy(*out, "QQQQ", 4);
    *len = 4;
    return FK_OK;
}

static uint64_t start(fk_fanout *f, fixture *x, double deadline, void *ud)
{
    int ask[K] = {1, 1, 1, 1};
    fk_fanout_spec s = {.job = 3, .m = &fk_method_kahm, .config = "[job]\n", .model = &x->model,
                        .queries = &x->q, .identities = IDS, .ask = ask, .n_clients = K,
                        .deadline = deadline, .ud = ud};
    uint64_t id;
    fk_err err;
    assert_int_equal(fk_fanout_start(f, &s, &id, &err), FK_OK);
    return id;
}

/* Pull and answer as client k does (its class distances for the batch). */
static int answer(fk_fanout *f, fixture *x, int k, int *complete, fk_err *err)
{
    fk_fanout_task t;
    assert_int_equal(fk_fanout_pull(f, IDS[k], enc, &t, err), FK_OK);
    assert_int_equal(t.client, k);
    assert_int_equal(t.job, 3);
    assert_string_equal(t.method, "kahm");
    assert_int_equal(t.queries_len, 4);
    fk_bundle a;
    fk_bundle_init(&a);
    assert_int_equal(fk_method_kahm.client_predict(x->cli[k], &x->q, &a, err), FK_OK);
    int rc = fk_fanout_answer(f, t.id, IDS[k], &a, complete, err);
    fk_bundle_close(&a);
    return rc;
}

/* The combine of these clients' answers, straight from the method. */
static void direct(fixture *x, const int *who, int n, fk_bundle *out)
{
    fk_update u[K];
    fk_err err;
    for (int i = 0; i < n; i++) {
        u[i].client = who[i];
        fk_bundle_init(&u[i].msg);
        assert_int_equal(fk_method_kahm.client_predict(x->cli[who[i]], &x->q, &u[i].msg, &err),
                         FK_OK);
    }
    fk_bundle_init(out);
    assert_int_equal(fk_method_kahm.combine_answers(&x->model, &x->q, u, n, out, &err), FK_OK);
    for (int i = 0; i < n; i++)
        fk_bundle_close(&u[i].msg);
}

static void all_answer(void **state)
{
    fixture *x = *state;
    fk_fanout *f;
    fk_err err;
    assert_int_equal(fk_fanout_open(&f, &err), FK_OK);
    uint64_t g0 = fk_fanout_generation(f);
    int tag;
    uint64_t id = start(f, x, 100.0, &tag);
    assert_true(fk_fanout_generation(f) != g0);
    fk_fanout_task t;
    assert_int_equal(fk_fanout_pull(f, "stranger", enc, &t, &err), FK_ENOTFOUND);
    double next;
    uint64_t due;
    int complete;
    for (int k = 0; k < K; k++) {
        assert_int_equal(fk_fanout_due(f, 1.0, &due, &next), FK_ENOTFOUND);
        assert_true(next == 100.0);
        assert_int_equal(answer(f, x, k, &complete, &err), FK_OK);
        assert_int_equal(complete, k == K - 1);
        /* handed out once; a second answer is not taken */
        assert_int_equal(fk_fanout_pull(f, IDS[k], enc, &t, &err), FK_ENOTFOUND);
    }
    fk_bundle none;
    fk_bundle_init(&none);
    assert_int_equal(fk_fanout_answer(f, id, IDS[0], &none, &complete, &err), FK_ESTATE);
    assert_int_equal(fk_fanout_due(f, 1.0, &due, &next), FK_OK);
    assert_true(due == id);
    fk_bundle out, want;
    fk_bundle_init(&out);
    void *ud;
    int answered, asked;
    int64_t job;
    assert_int_equal(fk_fanout_finish(f, id, &out, &ud, &job, &answered, &asked, &err), FK_OK);
    assert_ptr_equal(ud, &tag);
    assert_int_equal(job, 3);
    assert_int_equal(answered, K);
    assert_int_equal(asked, K);
    fk_bundle gone;
    fk_bundle_init(&gone);
    assert_int_equal(fk_fanout_finish(f, id, &gone, &ud, &job, &answered, &asked, &err),
                     FK_ENOTFOUND);
    assert_null(ud);
    fk_bundle_close(&gone);
    direct(x, (const int[]){0, 1, 2, 3}, K, &want);
    size_t n = fk_bundle_get(&want, "distances")->len;
    assert_memory_equal(fk_bundle_get(&out, "distances")->data,
                        fk_bundle_get(&want, "distances")->data, n * sizeof(double));
    assert_memory_equal(fk_bundle_get(&out, "labels")->data,
                        fk_bundle_get(&want, "labels")->data, n * sizeof(double));
    assert_int_equal(fk_bundle_get(&out, "missing_clients")->len, 0);
    assert_int_equal(fk_fanout_pending(f), 0);
    fk_bundle_close(&out);
    fk_bundle_close(&want);
    fk_fanout_close(f);
}

/* Client 1 never answers, client 2 answers NaN (refused, counted silent), client 3 says it
 * cannot: at the deadline the result is the combine of client 0's answer alone and names
 * clients 1, 2, 3 as missing. */
static void deadline_and_refusals(void **state)
{
    fixture *x = *state;
    fk_fanout *f;
    fk_err err;
    assert_int_equal(fk_fanout_open(&f, &err), FK_OK);
    uint64_t id = start(f, x, 50.0, NULL), due;
    int complete;
    assert_int_equal(answer(f, x, 0, &complete, &err), FK_OK);
    fk_fanout_task t;
    assert_int_equal(fk_fanout_pull(f, IDS[2], enc, &t, &err), FK_OK);
    fk_bundle a;
    fk_bundle_init(&a);
    assert_int_equal(fk_method_kahm.client_predict(x->cli[2], &x->q, &a, &err), FK_OK);
    fk_bundle_get(&a, "D")->data[0] = NAN;
    assert_int_equal(fk_fanout_answer(f, id, IDS[2], &a, &complete, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "is not a distance"));
    fk_bundle_close(&a);
    assert_int_equal(fk_fanout_pull(f, IDS[3], enc, &t, &err), FK_OK);
    assert_int_equal(fk_fanout_answer(f, id, IDS[3], NULL, &complete, &err), FK_OK);
    assert_int_equal(complete, 0);
    double next;
    assert_int_equal(fk_fanout_due(f, 49.0, &due, &next), FK_ENOTFOUND);
    assert_int_equal(fk_fanout_due(f, 50.0, &due, &next), FK_OK);
    assert_true(due == id);
    fk_bundle out, want;
    fk_bundle_init(&out);
    void *ud;
    int answered, asked;
    int64_t job;
    assert_int_equal(fk_fanout_finish(f, id, &out, &ud, &job, &answered, &asked, &err), FK_OK);
    assert_int_equal(answered, 1);
    assert_int_equal(asked, K);
    direct(x, (const int[]){0}, 1, &want);
    size_t n = fk_bundle_get(&want, "distances")->len;
    assert_memory_equal(fk_bundle_get(&out, "distances")->data,
                        fk_bundle_get(&want, "distances")->data, n * sizeof(double));
    const fk_tensor *mi = fk_bundle_get(&out, "missing_clients");
    assert_int_equal(mi->len, 3);
    assert_true(mi->data[0] == 1 && mi->data[1] == 2 && mi->data[2] == 3);
    const fk_tensor *un = fk_bundle_get(&out, "unscored_classes");
    assert_int_equal(un->len, C - 2); /* client 0 holds 2 of the 6 classes */
    fk_bundle_close(&out);
    fk_bundle_close(&want);
    fk_fanout_close(f);
}

/* At most FK_FANOUT_MAX_PENDING requests; dropping one makes room; close frees the rest. */
static void bounded(void **state)
{
    fixture *x = *state;
    fk_fanout *f;
    fk_err err;
    assert_int_equal(fk_fanout_open(&f, &err), FK_OK);
    uint64_t first = 0;
    for (int i = 0; i < FK_FANOUT_MAX_PENDING; i++) {
        uint64_t id = start(f, x, 10.0, NULL);
        if (!i)
            first = id;
    }
    int ask[K] = {1, 1, 1, 1};
    fk_fanout_spec s = {.job = 3, .m = &fk_method_kahm, .model = &x->model, .queries = &x->q,
                        .identities = IDS, .ask = ask, .n_clients = K, .deadline = 10.0};
    uint64_t id;
    assert_int_equal(fk_fanout_start(f, &s, &id, &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "16"));
    void *ud;
    fk_fanout_drop(f, first, &ud);
    assert_int_equal(fk_fanout_pending(f), FK_FANOUT_MAX_PENDING - 1);
    assert_int_equal(fk_fanout_start(f, &s, &id, &err), FK_OK);
    /* a job type without the serving ops is refused */
    fk_method plain = fk_method_kahm;
    plain.combine_answers = NULL;
    s.m = &plain;
    fk_fanout_drop(f, id, &ud);
    assert_int_equal(fk_fanout_start(f, &s, &id, &err), FK_EINVAL);
    fk_fanout_close(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(all_answer),
        cmocka_unit_test(deadline_and_refusals),
        cmocka_unit_test(bounded),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
