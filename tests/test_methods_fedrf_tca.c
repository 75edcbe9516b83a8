#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/synth_shift.h"
#include "common/methods/fedrf_tca.h"
#include "common/methods/fedrf_tca_int.h"
#include "common/methods/sim.h"

enum { K = 3, NC = K + 1 };

static void make_data(fk_dataset *ds, uint64_t seed)
{
    fk_synth_opts o;
    fk_synth_defaults(&o);
    o.n_sources = K;
    o.n_per_domain = 100;
    o.seed = seed;
    fk_err err;
    assert_int_equal(fk_synth_shift(&o, ds, &err), FK_OK);
}

static void close_data(fk_dataset *ds, int n)
{
    for (int i = 0; i < n; i++)
        fk_dataset_close(&ds[i]);
}

static void base_params(fk_params *p, const char *rounds)
{
    fk_params_init(p);
    fk_params_set(p, "N", "50");
    fk_params_set(p, "m", "8");
    fk_params_set(p, "hidden", "16");
    fk_params_set(p, "batch", "32");
    fk_params_set(p, "tc", "2");
    fk_params_set(p, "lr", "0.01");
    fk_params_set(p, "classes", "5");
    fk_params_set(p, "rounds", rounds);
}

static void same_tensor(const fk_bundle *a, const fk_bundle *b, const char *name)
{
    const fk_tensor *x = fk_bundle_get(a, name), *y = fk_bundle_get(b, name);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->len, y->len);
    assert_memory_equal(x->data, y->data, x->len * sizeof(double));
}

static void sim_is_deterministic(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 1);
    fk_params p;
    base_params(&p, "6");
    fk_sim_opts o = {.rounds = 6, .seed = 9};
    fk_bundle m1, m2;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m1, NULL, &err), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m2, NULL, &err), FK_OK);
    same_tensor(&m1, &m2, "W");
    same_tensor(&m1, &m2, "C");
    fk_bundle_close(&m1);
    fk_bundle_close(&m2);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* The simulator's loop, by hand, so states can be saved between rounds. */
typedef struct fed {
    const fk_method *m;
    void *srv;
    void *cli[NC];
} fed;

static void fed_open(fed *f, const fk_params *p, const fk_dataset *ds, uint64_t seed)
{
    fk_err err;
    f->m = &fk_method_fedrf_tca;
    assert_int_equal(f->m->server_init(&f->srv, p, NC, seed, &err), FK_OK);
    for (int i = 0; i < NC; i++)
        assert_int_equal(f->m->client_init(&f->cli[i], p, &ds[i], i, NC, seed, &err), FK_OK);
}

static void fed_close(fed *f)
{
    f->m->server_close(f->srv);
    for (int i = 0; i < NC; i++)
        f->m->client_close(f->cli[i]);
}

static void fed_rounds(fed *f, uint64_t seed, int r0, int r1)
{
    fk_err err;
    fk_update ups[NC];
    fk_bundle task;
    fk_bundle_init(&task);
    for (int i = 0; i < NC; i++)
        fk_bundle_init(&ups[i].msg);
    for (int round = r0; round <= r1; round++) {
        fk_rng rng;
        int chosen[NC], n = 0, done = 0;
        fk_sim_plan_rng(&rng, seed, round);
        assert_int_equal(f->m->plan(f->srv, round, &rng, chosen, &n, &err), FK_OK);
        for (int phase = 0; !done; phase++) {
            assert_true(phase < 8);
            for (int k = 0; k < n; k++) {
                fk_bundle_clear(&task);
                fk_bundle_clear(&ups[k].msg);
                fk_report_init(&ups[k].report);
                ups[k].client = chosen[k];
                assert_int_equal(f->m->task(f->srv, round, phase, chosen[k], &task, &err), FK_OK);
                assert_int_equal(f->m->local_step(f->cli[chosen[k]], &task, &ups[k].msg,
                                                  &ups[k].report, &err), FK_OK);
            }
            assert_int_equal(f->m->aggregate(f->srv, round, phase, ups, n, &done, &err), FK_OK);
        }
    }
    for (int i = 0; i < NC; i++)
        fk_bundle_close(&ups[i].msg);
    fk_bundle_close(&task);
}

static void save_load_round_trip(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 2);
    fk_params p;
    base_params(&p, "6");
    fk_err err;
    fed a, b, c;
    fed_open(&a, &p, ds, 5);
    fed_rounds(&a, 5, 1, 6);
    fed_open(&b, &p, ds, 5);
    fed_rounds(&b, 5, 1, 3);
    fk_bundle sv, cv[NC];
    fk_bundle_init(&sv);
    assert_int_equal(b.m->save(b.srv, &sv, &err), FK_OK);
    for (int i = 0; i < NC; i++) {
        fk_bundle_init(&cv[i]);
        assert_int_equal(b.m->client_save(b.cli[i], &cv[i], &err), FK_OK);
    }
    fed_close(&b);
    fed_open(&c, &p, ds, 5);
    assert_int_equal(c.m->load(c.srv, &sv, &err), FK_OK);
    for (int i = 0; i < NC; i++)
        assert_int_equal(c.m->client_load(c.cli[i], &cv[i], &err), FK_OK);
    fed_rounds(&c, 5, 4, 6);
    fk_bundle ma, mc, ms;
    fk_bundle_init(&ma);
    fk_bundle_init(&mc);
    assert_int_equal(a.m->model(a.srv, &ma, &err), FK_OK);
    assert_int_equal(c.m->model(c.srv, &mc, &err), FK_OK);
    same_tensor(&ma, &mc, "W");
    same_tensor(&ma, &mc, "C");
    /* and the in-process simulator runs the very same federation */
    fk_sim_opts o = {.rounds = 6, .seed = 5};
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &ms, NULL, &err), FK_OK);
    same_tensor(&ma, &ms, "W");
    /* a truncated checkpoint is rejected with a clear error */
    fk_bundle bad;
    fk_bundle_init(&bad);
    fk_bundle_put_vec(&bad, "meta", 2, (double[2]){1, 2});
    assert_int_equal(c.m->load(c.srv, &bad, &err), FK_EFORMAT);
    assert_int_equal(c.m->client_load(c.cli[0], &bad, &err), FK_EFORMAT);
    fk_bundle_close(&bad);
    fk_bundle_close(&ma);
    fk_bundle_close(&mc);
    fk_bundle_close(&ms);
    fk_bundle_close(&sv);
    for (int i = 0; i < NC; i++)
        fk_bundle_close(&cv[i]);
    fed_close(&a);
    fed_close(&c);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* A client restarted between phase 0 and phase 1 of a round: its saved state
 * rebuilds the mini-batch, so its phase-1 update equals the uninterrupted one;
 * without the state the step is refused (FK_ESTATE), never run on no batch. */
static void client_state_mid_round(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 4);
    fk_params p;
    base_params(&p, "4");
    fk_err err;
    fed f;
    fed_open(&f, &p, ds, 9);
    fed_rounds(&f, 9, 1, 2);
    fk_rng rng;
    int chosen[NC], n = 0, done = 0;
    fk_sim_plan_rng(&rng, 9, 3);
    assert_int_equal(f.m->plan(f.srv, 3, &rng, chosen, &n, &err), FK_OK);
    fk_bundle task, up, up2;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    fk_bundle_init(&up2);
    fk_update ups[NC];
    for (int k = 0; k < n; k++) {
        fk_bundle_clear(&task);
        fk_bundle_init(&ups[k].msg);
        fk_report_init(&ups[k].report);
        ups[k].client = chosen[k];
        assert_int_equal(f.m->task(f.srv, 3, 0, chosen[k], &task, &err), FK_OK);
        assert_int_equal(f.m->local_step(f.cli[chosen[k]], &task, &ups[k].msg, &ups[k].report,
                                         &err), FK_OK);
    }
    assert_int_equal(f.m->aggregate(f.srv, 3, 0, ups, n, &done, &err), FK_OK);
    for (int k = 0; k < n; k++)
        fk_bundle_close(&ups[k].msg);
    for (int i = 0; i < NC; i++) {
        fk_bundle sv;
        fk_bundle_init(&sv);
        assert_int_equal(f.m->client_save(f.cli[i], &sv, &err), FK_OK);
        void *fresh, *lost;
        assert_int_equal(f.m->client_init(&fresh, &p, &ds[i], i, NC, 9, &err), FK_OK);
        assert_int_equal(f.m->client_init(&lost, &p, &ds[i], i, NC, 9, &err), FK_OK);
        assert_int_equal(f.m->client_load(fresh, &sv, &err), FK_OK);
        fk_bundle_clear(&task);
        fk_bundle_clear(&up);
        fk_bundle_clear(&up2);
        fk_report r1, r2;
        fk_report_init(&r1);
        fk_report_init(&r2);
        assert_int_equal(f.m->task(f.srv, 3, 1, i, &task, &err), FK_OK);
        assert_int_equal(f.m->local_step(f.cli[i], &task, &up, &r1, &err), FK_OK);
        assert_int_equal(f.m->local_step(fresh, &task, &up2, &r2, &err), FK_OK);
        assert_int_equal(up.count, up2.count);
        for (size_t t = 0; t < up.count; t++)
            same_tensor(&up, &up2, up.items[t].name);
        assert_memory_equal(&r1.loss, &r2.loss, sizeof r1.loss);
        fk_bundle_clear(&up2);
        assert_int_equal(f.m->local_step(lost, &task, &up2, &r2, &err), FK_ESTATE);
        assert_non_null(strstr(err.msg, "phase 0"));
        f.m->client_close(fresh);
        f.m->client_close(lost);
        fk_bundle_close(&sv);
    }
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    fk_bundle_close(&up2);
    fed_close(&f);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* With every source in every round the averaged W reaches everybody. */
static void full_participation_synchronises_w(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 3);
    fk_params p;
    base_params(&p, "3");
    fk_params_set(&p, "participation", "all");
    fed f;
    fed_open(&f, &p, ds, 1);
    fed_rounds(&f, 1, 1, 2);
    fk_bundle s[NC];
    fk_err err;
    for (int i = 0; i < NC; i++) {
        fk_bundle_init(&s[i]);
        assert_int_equal(f.m->client_save(f.cli[i], &s[i], &err), FK_OK);
    }
    size_t wm = 100 * 8; /* 2N x m */
    for (int i = 1; i < NC; i++) {
        assert_memory_equal(fk_bundle_get(&s[i], "par")->data, fk_bundle_get(&s[0], "par")->data,
                            wm * sizeof(double));
        /* round 2 is a T_C round: classifiers are averaged as well */
        assert_memory_equal(fk_bundle_get(&s[i], "par")->data + wm,
                            fk_bundle_get(&s[0], "par")->data + wm, 16 * sizeof(double));
    }
    for (int i = 0; i < NC; i++)
        fk_bundle_close(&s[i]);
    fed_close(&f);
    fk_params_close(&p);
    close_data(ds, NC);
}

static void subsets_are_uniform_and_nested(void **state)
{
    (void)state;
    fk_params p;
    base_params(&p, "6");
    fk_params_set(&p, "drop_setting", "III");
    int count[K + 1] = {0}, draws = 8000;
    fk_err err;
    for (int r = 1; r <= draws; r++) {
        fk_rng rng;
        int a, w, c;
        fk_sim_plan_rng(&rng, 3, r);
        assert_int_equal(fk_fedrf_round_sets(&p, NC, r, &rng, &a, &w, &c, &err), FK_OK);
        assert_true(c <= w && w <= a && a <= K);
        count[a]++;
    }
    double chi = 0, e = (double)draws / (K + 1);
    for (int k = 0; k <= K; k++)
        chi += (count[k] - e) * (count[k] - e) / e;
    assert_true(chi < 16.27); /* chi-square, 3 dof, p = 0.001 */
    fk_params_close(&p);
}

static void hard_voting_model(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 4);
    fk_params p;
    base_params(&p, "4");
    fk_params_set(&p, "voting", "1");
    fk_sim_opts o = {.rounds = 4, .seed = 2};
    fk_bundle m;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m, NULL, &err), FK_OK);
    const fk_tensor *v = fk_bundle_get(&m, "votes");
    assert_non_null(v);
    assert_int_equal(v->shape[0], K);
    assert_null(fk_bundle_get(&m, "C"));
    void *cli;
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, &p, &ds[K], K, NC, 2, &err), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &m, &rep, &err), FK_OK);
    assert_true(rep.accuracy >= 0 && rep.accuracy <= 1);
    fk_method_fedrf_tca.client_close(cli);
    fk_bundle_close(&m);
    fk_params_close(&p);
    close_data(ds, NC);
}

static void table_two_counts(void **state)
{
    (void)state;
    size_t h[2] = {100, 100};
    fk_fedrf_counts k;
    fk_fedrf_message_params(1000, 800, h, 2, 10, &k);
    assert_int_equal(k.w_rf, 1600000);
    assert_int_equal(k.classifier, 91210);
    assert_int_equal(k.model, 1691210);
    assert_int_equal(k.total_paper, 1692210);
    assert_int_equal(k.total_sent, 1693210);
}

/* Flags of round r under order `ord` (sources are clients 0..K-1, target K). */
static void order_flags(const char *ord, int r, unsigned char *f)
{
    fk_params p;
    base_params(&p, "10");
    fk_params_set(&p, "order", ord);
    fk_fedrf_cfg c;
    fk_err err;
    assert_int_equal(fk_fedrf_parse_cfg(&p, NC, &c, &err), FK_OK);
    fk_rng rng;
    fk_sim_plan_rng(&rng, 4, r);
    fk_fedrf_draw_sets(&c, NC, r, &rng, f, f + NC, f + 2 * NC);
    assert_int_equal(f[K] + f[NC + K] + f[2 * NC + K], 0); /* the target never "sends" */
    fk_params_close(&p);
}

static int count(const unsigned char *f)
{
    int k = 0;
    for (int i = 0; i < NC; i++)
        k += f[i];
    return k;
}

static int member(const unsigned char *f)
{
    for (int i = 0; i < NC; i++)
        if (f[i])
            return i;
    return -1;
}

static void table_xviii_orders(void **state)
{
    (void)state;
    unsigned char f[3 * NC];
    for (int r = 1; r <= 2 * K; r++) {
        order_flags("all", r, f);
        assert_int_equal(count(f), K);
        assert_int_equal(count(f + NC), K);
        assert_int_equal(count(f + 2 * NC), K);
        /* (B) one source per round, cycling 1..K, sends both */
        order_flags("ordered", r, f);
        assert_int_equal(count(f), 1);
        assert_int_equal(member(f), (r - 1) % K);
        assert_memory_equal(f, f + NC, NC);
        assert_memory_equal(f + NC, f + 2 * NC, NC);
        /* (C) Sigma l cyclic, W from one random source */
        order_flags("ordered-random", r, f);
        assert_int_equal(member(f), (r - 1) % K);
        assert_int_equal(count(f + NC), 1);
    }
    /* (D) and (E): one sender each, uniform over the sources; (E) draws them independently */
    int hits[K] = {0}, differ = 0, draws = 3000;
    for (int r = 1; r <= draws; r++) {
        order_flags("random", r, f);
        assert_int_equal(count(f), 1);
        assert_memory_equal(f, f + NC, NC);
        hits[member(f)]++;
        order_flags("random-random", r, f);
        assert_int_equal(count(f), 1);
        assert_int_equal(count(f + NC), 1);
        differ += member(f) != member(f + NC);
    }
    double chi = 0, e = (double)draws / K;
    for (int k = 0; k < K; k++)
        chi += (hits[k] - e) * (hits[k] - e) / e;
    assert_true(chi < 13.82); /* chi-square, 2 dof, p = 0.001 */
    /* independent picks differ with probability 1 - 1/K = 2/3 */
    assert_true(fabs((double)differ / draws - 2.0 / 3.0) < 0.05);
    /* bad values and conflicting options: one clear error each */
    fk_params p;
    fk_fedrf_cfg c;
    fk_err err = {0};
    base_params(&p, "10");
    fk_params_set(&p, "order", "cyclic");
    assert_int_equal(fk_fedrf_parse_cfg(&p, NC, &c, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "Table XVIII"));
    fk_params_set(&p, "order", "ordered");
    fk_params_set(&p, "drop_setting", "III");
    assert_int_equal(fk_fedrf_parse_cfg(&p, NC, &c, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "drop_setting"));
    fk_params_close(&p);
}

/* Ordered messages with one-shot voting (the Table XVIII setting) run end to
 * end, deterministically, and every source's classifier reaches the vote. */
static void ordered_voting_sim(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 6);
    fk_params p;
    base_params(&p, "5");
    fk_params_set(&p, "voting", "1");
    fk_params_set(&p, "order", "ordered-random");
    fk_sim_opts o = {.rounds = 5, .seed = 3};
    fk_bundle m1, m2;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m1, NULL, &err), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m2, NULL, &err), FK_OK);
    const fk_tensor *v = fk_bundle_get(&m1, "votes");
    assert_non_null(v);
    assert_int_equal(v->shape[0], K);
    same_tensor(&m1, &m2, "W");
    same_tensor(&m1, &m2, "votes");
    fk_bundle_close(&m1);
    fk_bundle_close(&m2);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* Initial parameters (W then classifier) of client idx. */
static void initial_params(const fk_params *p, const fk_dataset *d, int idx, fk_bundle *out)
{
    void *cli;
    fk_err err;
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, p, d, idx, NC, 7, &err), FK_OK);
    fk_bundle_init(out);
    assert_int_equal(fk_method_fedrf_tca.client_save(cli, out, &err), FK_OK);
    fk_method_fedrf_tca.client_close(cli);
}

static void common_init_gives_one_start(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 7);
    fk_params p;
    base_params(&p, "2");
    fk_bundle a, b;
    initial_params(&p, &ds[0], 0, &a);
    initial_params(&p, &ds[2], 2, &b);
    const fk_tensor *x = fk_bundle_get(&a, "par"), *y = fk_bundle_get(&b, "par");
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal(x->len, y->len);
    assert_memory_not_equal(x->data, y->data, x->len * sizeof(double)); /* per-client streams */
    fk_bundle_close(&a);
    fk_bundle_close(&b);
    fk_params_set(&p, "common_init", "1");
    initial_params(&p, &ds[0], 0, &a);
    initial_params(&p, &ds[K], K, &b);
    same_tensor(&a, &b, "par");
    fk_bundle_close(&a);
    fk_bundle_close(&b);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* T15: hard voting with one source is that source's classifier. */
static void voting_with_one_source_is_its_classifier(void **state)
{
    (void)state;
    fk_synth_opts so;
    fk_synth_defaults(&so);
    so.n_sources = 1;
    so.n_per_domain = 100;
    so.seed = 8;
    fk_dataset ds[2];
    fk_err err;
    assert_int_equal(fk_synth_shift(&so, ds, &err), FK_OK);
    fk_params p;
    base_params(&p, "3");
    fk_params_set(&p, "voting", "1");
    fk_sim_opts o = {.rounds = 3, .seed = 5};
    fk_bundle m, single;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, 2, &o, &m, NULL, &err), FK_OK);
    const fk_tensor *v = fk_bundle_get(&m, "votes"), *W = fk_bundle_get(&m, "W");
    assert_non_null(v);
    assert_non_null(W);
    assert_int_equal(v->shape[0], 1);
    fk_bundle_init(&single);
    assert_int_equal(fk_bundle_put(&single, "W", W->ndim, W->shape, W->data), 0);
    assert_int_equal(fk_bundle_put_vec(&single, "C", v->len, v->data), 0);
    void *cli;
    fk_report a, b;
    fk_report_init(&a);
    fk_report_init(&b);
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, &p, &ds[1], 1, 2, 5, &err), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &m, &a, &err), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &single, &b, &err), FK_OK);
    assert_true(a.accuracy >= 0 && a.accuracy <= 1);
    assert_true(a.accuracy == b.accuracy);
    fk_method_fedrf_tca.client_close(cli);
    fk_bundle_close(&m);
    fk_bundle_close(&single);
    fk_params_close(&p);
    close_data(ds, 2);
}

static int init_error(const fk_params *p, const fk_dataset *d, int idx, const char *needle)
{
    void *cli = NULL;
    fk_err err = {0};
    int rc = fk_method_fedrf_tca.client_init(&cli, p, d, idx, NC, 1, &err);
    if (cli)
        fk_method_fedrf_tca.client_close(cli);
    assert_non_null(strstr(err.msg, needle));
    return rc;
}

static void bad_input(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 5);
    fk_params p;
    base_params(&p, "2");
    /* source without labels */
    int *y = ds[0].y;
    ds[0].y = NULL;
    assert_int_equal(init_error(&p, &ds[0], 0, "no labels"), FK_EINVAL);
    ds[0].y = y;
    /* source with one class */
    int *one = calloc(ds[1].X.rows, sizeof *one);
    int *y1 = ds[1].y;
    ds[1].y = one;
    assert_int_equal(init_error(&p, &ds[1], 1, "one class"), FK_EINVAL);
    ds[1].y = y1;
    free(one);
    fk_params_set(&p, "sigma", "0");
    assert_int_equal(init_error(&p, &ds[0], 0, "sigma"), FK_EINVAL);
    fk_params_set(&p, "sigma", "1");
    fk_params_set(&p, "N", "0");
    assert_int_equal(init_error(&p, &ds[0], 0, "N "), FK_EINVAL);
    fk_params_set(&p, "N", "3");
    assert_int_equal(init_error(&p, &ds[0], 0, "2N"), FK_EINVAL);
    fk_params_set(&p, "N", "200");
    fk_params_set(&p, "m", "150");
    assert_int_equal(init_error(&p, &ds[0], 0, "samples"), FK_EINVAL);
    fk_params_set(&p, "m", "8");
    /* a target with another feature dimension is caught when statistics meet */
    fk_dataset odd[NC];
    for (int i = 0; i < K; i++)
        odd[i] = ds[i];
    fk_dataset t;
    fk_dataset_init(&t, 50, ds[K].X.cols + 2, 1);
    for (size_t i = 0; i < 50; i++)
        t.y[i] = (int)(i % 5);
    for (size_t i = 0; i < 50 * t.X.cols; i++)
        t.X.data[i] = (double)(i % 7);
    t.n_classes = 5;
    odd[K] = t;
    fk_sim_opts o = {.rounds = 5, .seed = 1};
    fk_bundle m;
    fk_err err;
    fk_params_set(&p, "participation", "all");
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, odd, NC, &o, &m, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "features"));
    fk_dataset_close(&t);
    fk_params_close(&p);
    close_data(ds, NC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sim_is_deterministic),
        cmocka_unit_test(save_load_round_trip),
        cmocka_unit_test(client_state_mid_round),
        cmocka_unit_test(full_participation_synchronises_w),
        cmocka_unit_test(subsets_are_uniform_and_nested),
        cmocka_unit_test(hard_voting_model),
        cmocka_unit_test(table_two_counts),
        cmocka_unit_test(bad_input),
        cmocka_unit_test(table_xviii_orders),
        cmocka_unit_test(ordered_voting_sim),
        cmocka_unit_test(common_init_gives_one_start),
        cmocka_unit_test(voting_with_one_source_is_its_classifier),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
