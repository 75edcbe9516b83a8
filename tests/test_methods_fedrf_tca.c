#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/synth_shift.h"
#include "common/methods/fedrf_tca/fedrf_tca.h"
#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/methods/sim.h"
#include "common/models/fedrf_tca/tca.h"

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
    assert_int_equal(fk_params_set(p, "N", "50"), FK_OK);
    assert_int_equal(fk_params_set(p, "m", "8"), FK_OK);
    assert_int_equal(fk_params_set(p, "hidden", "16"), FK_OK);
    assert_int_equal(fk_params_set(p, "batch", "32"), FK_OK);
    assert_int_equal(fk_params_set(p, "tc", "2"), FK_OK);
    assert_int_equal(fk_params_set(p, "lr", "0.01"), FK_OK);
    assert_int_equal(fk_params_set(p, "classes", "5"), FK_OK);
    assert_int_equal(fk_params_set(p, "rounds", rounds), FK_OK);
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
    /* orthogonal frequencies: also deterministic, and another model */
    fk_bundle o1, o2;
    assert_int_equal(fk_params_set(&p, "features", "orthogonal"), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &o1, NULL, &err), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &o2, NULL, &err), FK_OK);
    same_tensor(&o1, &o2, "W");
    const fk_tensor *wi = fk_bundle_get(&m1, "W"), *wo = fk_bundle_get(&o1, "W");
    assert_memory_not_equal(wi->data, wo->data, wi->len * sizeof(double));
    fk_bundle_close(&o1);
    fk_bundle_close(&o2);
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

/* Checkpoints of the server and every client of f into sv and cv[NC] (initialised here). */
static void fed_save(const fed *f, fk_bundle *sv, fk_bundle *cv)
{
    fk_err err;
    fk_bundle_init(sv);
    assert_int_equal(f->m->save(f->srv, sv, &err), FK_OK);
    for (int i = 0; i < NC; i++) {
        fk_bundle_init(&cv[i]);
        assert_int_equal(f->m->client_save(f->cli[i], &cv[i], &err), FK_OK);
    }
}

/* A federation restarted from fed_save's checkpoints: opened afresh, then loaded. */
static void fed_restore(fed *f, const fk_params *p, const fk_dataset *ds, uint64_t seed,
                        const fk_bundle *sv, const fk_bundle *cv)
{
    fk_err err;
    fed_open(f, p, ds, seed);
    assert_int_equal(f->m->load(f->srv, sv, &err), FK_OK);
    for (int i = 0; i < NC; i++)
        assert_int_equal(f->m->client_load(f->cli[i], &cv[i], &err), FK_OK);
}

static void saves_close(fk_bundle *sv, fk_bundle *cv)
{
    fk_bundle_close(sv);
    for (int i = 0; i < NC; i++)
        fk_bundle_close(&cv[i]);
}

/* The models of two federations, to compare (ma, mc initialised here). */
static void fed_models(const fed *a, const fed *c, fk_bundle *ma, fk_bundle *mc)
{
    fk_err err;
    fk_bundle_init(ma);
    fk_bundle_init(mc);
    assert_int_equal(a->m->model(a->srv, ma, &err), FK_OK);
    assert_int_equal(c->m->model(c->srv, mc, &err), FK_OK);
}

/* A second server restored from srv's checkpoint (a server restart), opened with p and seed. */
static void *server_restored(const fed *f, void *srv, const fk_params *p, uint64_t seed)
{
    fk_err err;
    fk_bundle sv;
    fk_bundle_init(&sv);
    assert_int_equal(f->m->save(srv, &sv, &err), FK_OK);
    void *back;
    assert_int_equal(f->m->server_init(&back, p, NC, seed, &err), FK_OK);
    assert_int_equal(f->m->load(back, &sv, &err), FK_OK);
    fk_bundle_close(&sv);
    return back;
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
    fed_save(&b, &sv, cv);
    fed_close(&b);
    fed_restore(&c, &p, ds, 5, &sv, cv);
    fed_rounds(&c, 5, 4, 6);
    fk_bundle ma, mc, ms;
    fed_models(&a, &c, &ma, &mc);
    same_tensor(&ma, &mc, "W");
    same_tensor(&ma, &mc, "C");
    /* and the in-process simulator runs the very same federation */
    fk_sim_opts o = {.rounds = 6, .seed = 5};
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &ms, NULL, &err), FK_OK);
    same_tensor(&ma, &ms, "W");
    /* a truncated checkpoint is rejected with a clear error */
    fk_bundle bad;
    fk_bundle_init(&bad);
    assert_int_equal(fk_bundle_put_vec(&bad, "meta", 2, (double[2]){1, 2}), FK_OK);
    assert_int_equal(c.m->load(c.srv, &bad, &err), FK_EFORMAT);
    assert_int_equal(c.m->client_load(c.cli[0], &bad, &err), FK_EFORMAT);
    fk_bundle_close(&bad);
    fk_bundle_close(&ma);
    fk_bundle_close(&mc);
    fk_bundle_close(&ms);
    saves_close(&sv, cv);
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
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
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

/* T15: |S_t| uniform on {0..K} (chi-square over 10^5 draws), each source in S_t
 * with probability 1/2, and the Table III sets nested element by element. */
static void subsets_are_uniform_and_nested(void **state)
{
    (void)state;
    fk_params p;
    base_params(&p, "6");
    assert_int_equal(fk_params_set(&p, "drop_setting", "III"), FK_OK);
    fk__fedrf_cfg cfg;
    fk_err err;
    assert_int_equal(fk__fedrf_parse_cfg(&p, NC, &cfg, &err), FK_OK);
    int count[K + 1] = {0}, member[K] = {0}, draws = 100000;
    for (int r = 1; r <= draws; r++) {
        fk_rng rng;
        unsigned char f[3 * NC];
        fk_sim_plan_rng(&rng, 3, r);
        assert_int_equal(fk__fedrf_draw_sets(&cfg, NC, r, &rng, f, f + NC, f + 2 * NC, &err),
                         FK_OK);
        int a = 0;
        for (int i = 0; i < NC; i++) {
            assert_true(f[2 * NC + i] <= f[NC + i] && f[NC + i] <= f[i]); /* C in B in A */
            a += f[i];
            if (i < K)
                member[i] += f[i];
        }
        assert_int_equal(f[K], 0); /* the target is never in S_t */
        count[a]++;
    }
    double chi = 0, e = (double)draws / (K + 1);
    for (int k = 0; k <= K; k++)
        chi += (count[k] - e) * (count[k] - e) / e;
    assert_true(chi < 16.27); /* chi-square, 3 dof, p = 0.001 */
    for (int i = 0; i < K; i++) /* P(i in S_t) = E|S_t| / K = 1/2; sd of the rate 0.0016 */
        assert_true(fabs((double)member[i] / draws - 0.5) < 0.01);
    fk_params_close(&p);
}

static void hard_voting_model(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 4);
    fk_params p;
    base_params(&p, "4");
    assert_int_equal(fk_params_set(&p, "voting", "1"), FK_OK);
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
    assert_int_equal(fk_params_set(&p, "order", ord), FK_OK);
    fk__fedrf_cfg c;
    fk_err err;
    assert_int_equal(fk__fedrf_parse_cfg(&p, NC, &c, &err), FK_OK);
    fk_rng rng;
    fk_sim_plan_rng(&rng, 4, r);
    assert_int_equal(fk__fedrf_draw_sets(&c, NC, r, &rng, f, f + NC, f + 2 * NC, &err), FK_OK);
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
    fk__fedrf_cfg c;
    fk_err err = {0};
    base_params(&p, "10");
    assert_int_equal(fk_params_set(&p, "order", "cyclic"), FK_OK);
    assert_int_equal(fk__fedrf_parse_cfg(&p, NC, &c, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "Table XVIII"));
    assert_int_equal(fk_params_set(&p, "order", "ordered"), FK_OK);
    assert_int_equal(fk_params_set(&p, "drop_setting", "III"), FK_OK);
    assert_int_equal(fk__fedrf_parse_cfg(&p, NC, &c, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "drop_setting"));
    assert_int_equal(fk_params_set(&p, "order", "subset"), FK_OK);
    assert_int_equal(fk_params_set(&p, "drop_setting", "I"), FK_OK);
    assert_int_equal(fk_params_set(&p, "features", "sobol"), FK_OK);
    assert_int_equal(fk__fedrf_parse_cfg(&p, NC, &c, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "features must be iid"));
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
    assert_int_equal(fk_params_set(&p, "voting", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "order", "ordered-random"), FK_OK);
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
    assert_int_equal(fk_params_set(&p, "common_init", "1"), FK_OK);
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
    assert_int_equal(fk_params_set(&p, "voting", "1"), FK_OK);
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

/* T15: hard voting is a majority with ties to the smallest class. Softmax
 * classifiers (hidden = none: weights m x C, then C biases) with zero weights
 * and one positive bias always predict that class, so the vote's accuracy is
 * the share of target labels equal to the winning class. */
static void voting_majority_ties_to_smallest_class(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 9);
    /* target labels with class counts 10, 15, 20, 25, 30: every class scores differently */
    for (size_t i = 0; i < ds[K].X.rows; i++)
        ds[K].y[i] = i < 10 ? 0 : i < 25 ? 1 : i < 45 ? 2 : i < 70 ? 3 : 4;
    fk_params p;
    base_params(&p, "3");
    assert_int_equal(fk_params_set(&p, "hidden", "none"), FK_OK);
    void *cli;
    fk_err err;
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, &p, &ds[K], K, NC, 5, &err), FK_OK);
    size_t m = 8, C = 5, pc = m * C + C;
    const int cases[3][3] = {{3, 1, -1}, {3, 1, 3}, {4, 2, 0}}; /* -1: only two voters */
    const int winner[3] = {1, 3, 0};
    for (int t = 0; t < 3; t++) {
        int k = cases[t][2] < 0 ? 2 : 3;
        double *v = calloc((size_t)k * pc, sizeof *v);
        for (int i = 0; i < k; i++)
            v[(size_t)i * pc + m * C + (size_t)cases[t][i]] = 1.0;
        fk_bundle model;
        fk_bundle_init(&model);
        uint64_t shape[2] = {(uint64_t)k, pc};
        assert_int_equal(fk_bundle_put(&model, "votes", 2, shape, v), 0);
        fk_report rep;
        fk_report_init(&rep);
        assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &model, &rep, &err), FK_OK);
        size_t hit = 0, n = ds[K].X.rows;
        for (size_t i = 0; i < n; i++)
            hit += ds[K].y[i] == winner[t];
        assert_int_equal(hit, 10 + 5 * (size_t)winner[t]);
        assert_true(rep.accuracy == (double)hit / (double)n);
        fk_bundle_close(&model);
        free(v);
    }
    fk_method_fedrf_tca.client_close(cli);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* One round driven by hand (as the simulator does) with everything that passes
 * between server and clients recorded: payload values (statistics, W, C), scalar
 * control values, the W and C uploads, and each client's parameters before the
 * round and after its local step (phase 1), i.e. before any averaging. */
typedef struct probe {
    size_t payload, control, wm, pc;
    unsigned char inA[NC], inW[NC], inC[NC];
    int s_seen, c_up, c_down, nw, nc;
    double before[NC][2048], pre[NC][2048], wsum[2048], csum[2048];
} probe;

static int is_payload(const char *name)
{
    return !strcmp(name, "s") || !strcmp(name, "s_peer") || !strcmp(name, "s_src") ||
           !strcmp(name, "W") || !strcmp(name, "C") || !strncmp(name, "sel_", 4);
}

static void tally(probe *pr, const fk_bundle *b, size_t D)
{
    for (size_t t = 0; t < b->count; t++) {
        const fk_tensor *x = &b->items[t];
        if (!is_payload(x->name)) {
            assert_int_equal(x->len, 1); /* only flags pass besides messages: never Omega or data */
            pr->control++;
            continue;
        }
        pr->payload += x->len;
        if (x->name[0] == 's' && strncmp(x->name, "sel_", 4)) {
            pr->s_seen = 1;
            assert_int_equal(x->shape[x->ndim - 1], D); /* statistics have length 2N */
        }
    }
}

static double *cli_par(const fed *f, int i)
{
    return ((fk__fedrf_client *)f->cli[i])->par;
}

static void probe_round(fed *f, uint64_t seed, int round, probe *pr)
{
    const fk__fedrf_client *c0 = f->cli[0];
    const fk__fedrf_server *srv = f->srv;
    size_t P = c0->WM + c0->PC;
    assert_true(P <= 2048);
    memset(pr, 0, sizeof *pr);
    pr->wm = c0->WM;
    pr->pc = c0->PC;
    for (int i = 0; i < NC; i++)
        memcpy(pr->before[i], cli_par(f, i), P * sizeof(double));
    fk_err err;
    fk_rng rng;
    int chosen[NC], n = 0, done = 0;
    fk_sim_plan_rng(&rng, seed, round);
    assert_int_equal(f->m->plan(f->srv, round, &rng, chosen, &n, &err), FK_OK);
    memcpy(pr->inA, srv->inA, NC);
    memcpy(pr->inW, srv->inW, NC);
    memcpy(pr->inC, srv->inC, NC);
    fk_update ups[NC];
    fk_bundle task;
    fk_bundle_init(&task);
    for (int k = 0; k < NC; k++)
        fk_bundle_init(&ups[k].msg);
    for (int phase = 0; !done; phase++) {
        assert_true(phase < 8);
        for (int k = 0; k < n; k++) {
            fk_bundle_clear(&task);
            fk_bundle_clear(&ups[k].msg);
            fk_report_init(&ups[k].report);
            ups[k].client = chosen[k];
            assert_int_equal(f->m->task(f->srv, round, phase, chosen[k], &task, &err), FK_OK);
            tally(pr, &task, c0->D);
            pr->c_down += fk_bundle_get(&task, "C") != NULL;
            assert_int_equal(f->m->local_step(f->cli[chosen[k]], &task, &ups[k].msg,
                                              &ups[k].report, &err), FK_OK);
            tally(pr, &ups[k].msg, c0->D);
            const fk_tensor *W = fk_bundle_get(&ups[k].msg, "W"),
                            *C = fk_bundle_get(&ups[k].msg, "C");
            if (W) {
                for (size_t j = 0; j < pr->wm; j++)
                    pr->wsum[j] += W->data[j];
                pr->nw++;
            }
            if (C) {
                for (size_t j = 0; j < pr->pc; j++)
                    pr->csum[j] += C->data[j];
                pr->nc++;
                pr->c_up++;
            }
            if (phase == 1)
                memcpy(pr->pre[chosen[k]], cli_par(f, chosen[k]), P * sizeof(double));
        }
        assert_int_equal(f->m->aggregate(f->srv, round, phase, ups, n, &done, &err), FK_OK);
    }
    for (int k = 0; k < NC; k++)
        fk_bundle_close(&ups[k].msg);
    fk_bundle_close(&task);
}

static int count_sources(const unsigned char *f)
{
    int k = 0;
    for (int i = 0; i < K; i++)
        k += f[i];
    return k;
}

/* |a - sum/k| elementwise; the server averages in double, in client order. */
static void is_average(const double *a, const double *sum, int k, size_t len)
{
    for (size_t j = 0; j < len; j++)
        assert_true(fabs(a[j] - sum[j] / k) <= 1e-14); /* values are O(1): rounding only */
}

/* T15: after a round W_T and W_i (i in S_t) are bitwise equal to the plain
 * average, clients outside S_t keep their own W; classifiers change (by
 * averaging) only when t mod T_C = 0 and S_t is not empty; an empty S_t
 * exchanges and averages nothing. */
static void aggregation_follows_the_round_rules(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 11);
    fk_params p;
    base_params(&p, "1000"); /* far past the rounds run: no final collection round */
    assert_int_equal(fk_params_set(&p, "tc", "3"), FK_OK);
    fed f;
    fed_open(&f, &p, ds, 21);
    static probe pr;
    int empty = 0, c_rounds = 0, w_rounds = 0;
    for (int round = 1; round <= 24; round++) {
        probe_round(&f, 21, round, &pr);
        int s = count_sources(pr.inA), tc_round = round % 3 == 0 && s > 0;
        size_t wm = pr.wm, pc = pr.pc;
        const double *T = cli_par(&f, K);
        assert_memory_equal(pr.inA, pr.inW, NC); /* drop setting I: W and C from S_t */
        assert_memory_equal(pr.inA, pr.inC, NC);
        /* classifiers travel only in T_C rounds with someone in S_t */
        assert_int_equal(pr.c_up, tc_round ? s : 0);
        assert_int_equal(pr.c_down, tc_round ? s + 1 : 0);
        /* the target's classifier is not trained locally: it moves only by averaging */
        assert_memory_equal(pr.pre[K] + wm, pr.before[K] + wm, pc * sizeof(double));
        if (tc_round)
            is_average(T + wm, pr.csum, s, pc);
        else
            assert_memory_equal(T + wm, pr.before[K] + wm, pc * sizeof(double));
        if (s > 0)
            is_average(T, pr.wsum, s + 1, wm); /* W_T and the W_i of S_t, plain average */
        else
            assert_memory_equal(T, pr.before[K], (wm + pc) * sizeof(double));
        for (int i = 0; i < K; i++) {
            const double *Pi = cli_par(&f, i);
            assert_memory_equal(Pi, pr.inA[i] ? T : pr.pre[i], wm * sizeof(double));
            assert_memory_equal(Pi + wm, tc_round && pr.inA[i] ? T + wm : pr.pre[i] + wm,
                                pc * sizeof(double));
        }
        if (s == 0) {
            assert_int_equal(pr.payload, 0); /* nothing exchanged */
            assert_int_equal(pr.s_seen, 0);
        }
        empty += s == 0;
        c_rounds += tc_round;
        w_rounds += s > 0;
    }
    /* the seeds give every kind of round (fixed plan: deterministic) */
    assert_true(empty >= 1 && c_rounds >= 2 && w_rounds >= 10);
    fed_close(&f);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* T15: with lambda = 0 (the "without Sigma l" baseline) no statistics pass and
 * the target's W_T changes only by averaging. */
static void lambda_zero_moves_target_w_only_by_averaging(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 12);
    fk_params p;
    base_params(&p, "1000");
    assert_int_equal(fk_params_set(&p, "lambda", "0"), FK_OK);
    fed f;
    fed_open(&f, &p, ds, 22);
    static probe pr;
    int averaged = 0, kept = 0;
    for (int round = 1; round <= 16; round++) {
        probe_round(&f, 22, round, &pr);
        int s = count_sources(pr.inA);
        const double *T = cli_par(&f, K);
        assert_int_equal(pr.s_seen, 0);
        /* no local step on the target */
        assert_memory_equal(pr.pre[K], pr.before[K], pr.wm * sizeof(double));
        if (s > 0) {
            assert_int_equal(pr.nw, s + 1);
            is_average(T, pr.wsum, s + 1, pr.wm);
            averaged++;
        } else {
            assert_memory_equal(T, pr.before[K], pr.wm * sizeof(double));
            kept++;
        }
    }
    assert_true(averaged >= 5 && kept >= 1);
    fed_close(&f);
    fk_params_close(&p);
    close_data(ds, NC);
}

static void record_bytes(const fk_sim_round *r, void *ctx)
{
    ((uint64_t *)ctx)[r->round] = r->bytes;
}

/* T14: the per-round count of §2.4 equals the values that actually pass
 * (statistics relayed by the server), and the simulator's byte counter is
 * exactly 8 bytes per value that passed, messages and control flags. */
static void round_count_matches_the_channel(void **state)
{
    (void)state;
    /* the third run adds select_holdout: every source scores each round's model once a
     * classifier exists, fk_fedrf_select_values on top of the round count */
    const char *settings[3] = {"I", "III", "I"};
    enum { R = 12 };
    int scored_rounds = 0;
    for (int st = 0; st < 3; st++) {
        fk_dataset ds[NC];
        make_data(ds, 13);
        fk_params p;
        base_params(&p, "1000");
        assert_int_equal(fk_params_set(&p, "drop_setting", settings[st]), FK_OK);
        if (st == 2)
            assert_int_equal(fk_params_set(&p, "select_holdout", "0.25"), FK_OK);
        size_t N = 50, m = 8;
        fed f;
        fed_open(&f, &p, ds, 23);
        static probe pr;
        size_t expect[R + 1];
        int seen_c = 0, seen_empty = 0;
        for (int round = 1; round <= R; round++) {
            probe_round(&f, 23, round, &pr);
            int s = count_sources(pr.inA), w = count_sources(pr.inW);
            int c = round % 2 == 0 ? count_sources(pr.inC) : 0; /* tc = 2 */
            fk_fedrf_round_values v;
            fk_fedrf_round_count(N, m, pr.pc, s, w, c, &v);
            const fk__fedrf_server *srv = f.srv; /* phase 2 leaves these as phase 2 saw them */
            int scored = st == 2 && srv->have_Wmodel && srv->have_Cmodel ? K : 0;
            scored_rounds += scored > 0;
            assert_int_equal(pr.payload,
                             v.relayed + fk_fedrf_select_values(N, m, pr.pc, 0, scored, 1));
            if (st == 0 && s > 0) /* the spec's formula, setting I (w = c = s) */
                assert_int_equal(v.direct, 4 * s * N + 2 * (s + 1) * 2 * N * m +
                                               (round % 2 == 0 ? (2 * s + 1) * pr.pc : 0));
            expect[round] = 8 * (pr.payload + pr.control);
            seen_c += c > 0;
            seen_empty += s == 0;
        }
        assert_true(seen_c >= 1 && seen_empty >= 1);
        fed_close(&f);
        uint64_t bytes[R + 1] = {0};
        fk_sim_opts o = {.rounds = R, .seed = 23, .progress = record_bytes, .ctx = bytes};
        fk_err err;
        assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, NULL, NULL, &err), FK_OK);
        for (int round = 1; round <= R; round++)
            assert_int_equal(bytes[round], expect[round]);
        fk_params_close(&p);
        close_data(ds, NC);
    }
    assert_true(scored_rounds >= 5); /* the selection run did score */
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
    assert_int_equal(fk_params_set(&p, "sigma", "0"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "sigma"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "sigma", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "N", "0"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "N "), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "N", "3"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "2N"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "N", "200"), FK_OK);
    assert_int_equal(fk_params_set(&p, "m", "150"), FK_OK); /* more than the samples: taken (issue 19) */
    void *big = NULL;
    fk_err berr;
    assert_true(ds[0].X.rows < 150);
    assert_int_equal(fk_method_fedrf_tca.client_init(&big, &p, &ds[0], 0, NC, 1, &berr), FK_OK);
    fk_method_fedrf_tca.client_close(big);
    assert_int_equal(fk_params_set(&p, "m", "8"), FK_OK);
    /* a target with another feature dimension is caught when statistics meet */
    fk_dataset odd[NC];
    for (int i = 0; i < K; i++)
        odd[i] = ds[i];
    fk_dataset t;
    assert_int_equal(fk_dataset_init(&t, 50, ds[K].X.cols + 2, 1), FK_OK);
    for (size_t i = 0; i < 50; i++)
        t.y[i] = (int)(i % 5);
    for (size_t i = 0; i < 50 * t.X.cols; i++)
        t.X.data[i] = (double)(i % 7);
    t.n_classes = 5;
    odd[K] = t;
    fk_sim_opts o = {.rounds = 5, .seed = 1};
    fk_bundle m;
    fk_err err;
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, odd, NC, &o, &m, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "features"));
    fk_dataset_close(&t);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* avg_last: W_avg / C_avg are the means of the models aggregated in the last avg_last rounds
 * (each round's model read by hand; the classifier only in the rounds that average it), survive
 * a checkpoint, and use_avg scores them. */
static void tail_average_of_the_last_rounds(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 6);
    fk_params p;
    base_params(&p, "6");
    assert_int_equal(fk_params_set(&p, "avg_last", "3"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    fk_err err;
    fed a;
    fed_open(&a, &p, ds, 3);
    fk__fedrf_server *srv = a.srv;
    size_t WM = srv->WM, PC = srv->PC;
    double *wsum = calloc(WM, sizeof *wsum), *csum = calloc(PC, sizeof *csum);
    assert_non_null(wsum);
    assert_non_null(csum);
    fk_bundle sv;
    fk_bundle_init(&sv);
    for (int r = 1; r <= 6; r++) {
        fed_rounds(&a, 3, r, r);
        if (r == 4)
            assert_int_equal(a.m->save(a.srv, &sv, &err), FK_OK);
        if (r <= 3)
            continue;
        fk_bundle m;
        fk_bundle_init(&m);
        assert_int_equal(a.m->model(a.srv, &m, &err), FK_OK);
        const fk_tensor *w = fk_bundle_get(&m, "W"), *c = fk_bundle_get(&m, "C");
        assert_non_null(w);
        assert_non_null(c);
        for (size_t i = 0; i < WM; i++)
            wsum[i] += w->data[i] / 3.0;
        for (size_t i = 0; i < PC && r % 2 == 0; i++) /* tc = 2: fresh classifiers in 4 and 6 */
            csum[i] += c->data[i] / 2.0;
        fk_bundle_close(&m);
    }
    fk_bundle m;
    fk_bundle_init(&m);
    assert_int_equal(a.m->model(a.srv, &m, &err), FK_OK);
    const fk_tensor *wa = fk_bundle_get(&m, "W_avg"), *ca = fk_bundle_get(&m, "C_avg");
    assert_non_null(wa);
    assert_non_null(ca);
    for (size_t i = 0; i < WM; i++)
        assert_true(fabs(wa->data[i] - wsum[i]) <= 1e-12 * (1 + fabs(wsum[i])));
    for (size_t i = 0; i < PC; i++)
        assert_true(fabs(ca->data[i] - csum[i]) <= 1e-12 * (1 + fabs(csum[i])));
    /* the averaged model is not the final one, and use_avg scores it */
    const fk_tensor *w = fk_bundle_get(&m, "W");
    assert_memory_not_equal(w->data, wa->data, WM * sizeof(double));
    void *cli;
    fk_report r1, r2, r3;
    fk_report_init(&r1);
    fk_report_init(&r2);
    fk_report_init(&r3);
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, &p, &ds[K], K, NC, 3, &err), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &m, &r1, &err), FK_OK);
    fk_bundle only; /* W = W_avg, C = C_avg by hand */
    fk_bundle_init(&only);
    assert_int_equal(fk_bundle_put(&only, "W", 2, (uint64_t[2]){srv->D, 8}, wa->data), FK_OK);
    assert_int_equal(fk_bundle_put_vec(&only, "C", PC, ca->data), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &only, &r3, &err), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&m, "use_avg", 1), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &m, &r2, &err), FK_OK);
    assert_true(r2.accuracy == r3.accuracy);
    assert_true(r1.accuracy >= 0 && r2.accuracy >= 0);
    fk_method_fedrf_tca.client_close(cli);
    /* a server restored after round 4 ends with the same average */
    void *srv2;
    assert_int_equal(a.m->server_init(&srv2, &p, NC, 3, &err), FK_OK);
    assert_int_equal(a.m->load(srv2, &sv, &err), FK_OK);
    fk__fedrf_server *s2 = srv2;
    assert_true(s2->nWsum == 1 && s2->nCsum == 1);
    a.m->server_close(srv2);
    fk_bundle_close(&only);
    fk_bundle_close(&m);
    fk_bundle_close(&sv);
    free(wsum);
    free(csum);
    fed_close(&a);
    fk_params_close(&p);
    close_data(ds, NC);
}

static void record_acc(const fk_sim_round *r, void *ctx)
{
    double *acc = ctx;
    acc[r->round] = r->accuracy;
}

/* Without voting the target reports no accuracy before the sources' averaged classifier exists
 * (round tc): its own classifier is never trained; from round tc on it scores the average. */
static void no_accuracy_before_tc(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 7);
    fk_params p;
    base_params(&p, "6");
    assert_int_equal(fk_params_set(&p, "tc", "3"), FK_OK);
    double acc[7];
    fk_sim_opts o = {.rounds = 6, .seed = 4, .progress = record_acc, .ctx = acc};
    fk_bundle m;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m, NULL, &err), FK_OK);
    for (int r = 1; r <= 6; r++)
        print_message("round %d: target accuracy %g\n", r, acc[r]);
    for (int r = 1; r < 3; r++)
        assert_true(isnan(acc[r]));
    for (int r = 3; r <= 6; r++)
        assert_true(acc[r] >= 0 && acc[r] <= 1);
    fk_bundle_close(&m);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* Voting: the rounds report the vote (in the last round, once the classifiers are in), never
 * the target's own untrained classifier; it equals the final model's score on the target. */
static void voting_rounds_report_the_vote(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 7);
    fk_params p;
    base_params(&p, "5");
    assert_int_equal(fk_params_set(&p, "voting", "1"), FK_OK);
    double acc[6];
    fk_sim_opts o = {.rounds = 5, .seed = 4, .progress = record_acc, .ctx = acc};
    fk_bundle m;
    fk_err err;
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, &m, NULL, &err), FK_OK);
    for (int r = 1; r < 5; r++)
        assert_true(isnan(acc[r]));
    void *cli;
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(fk_method_fedrf_tca.client_init(&cli, &p, &ds[K], K, NC, 4, &err), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.evaluate(cli, &m, &rep, &err), FK_OK);
    assert_true(rep.accuracy == acc[5]);
    fk_method_fedrf_tca.client_close(cli);
    fk_bundle_close(&m);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* target_opt = sgd (the default): the target's W takes plain gradient steps (no Adam moments
 * in its checkpoint, the sources keep theirs) and a restored federation continues bit for bit;
 * bad values are refused. */
static void target_opt_and_avg_keys(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 8);
    fk_params p;
    base_params(&p, "6");
    fed a, b, c;
    /* the default: SGD at the target, the optimizer key's (Adam) at the sources */
    fed_open(&a, &p, ds, 2);
    assert_int_equal(((fk__fedrf_client *)a.cli[K])->optW.kind, FK_OPT_SGD);
    assert_int_equal(((fk__fedrf_client *)a.cli[0])->optW.kind, FK_OPT_ADAM);
    fed_close(&a);
    assert_int_equal(fk_params_set(&p, "target_opt", "sgd"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    fed_open(&a, &p, ds, 2);
    fed_rounds(&a, 2, 1, 6);
    fed_open(&b, &p, ds, 2);
    fed_rounds(&b, 2, 1, 3);
    fk__fedrf_client *tc = b.cli[K], *sc = b.cli[0];
    assert_int_equal(tc->optW.kind, FK_OPT_SGD);
    assert_int_equal(sc->optW.kind, FK_OPT_ADAM);
    fk_bundle sv, cv[NC];
    fed_save(&b, &sv, cv);
    assert_null(fk_bundle_get(&cv[K], "optW_m"));
    assert_non_null(fk_bundle_get(&cv[0], "optW_m"));
    fed_close(&b);
    fed_restore(&c, &p, ds, 2, &sv, cv);
    fed_rounds(&c, 2, 4, 6);
    fk_bundle ma, mc;
    fed_models(&a, &c, &ma, &mc);
    same_tensor(&ma, &mc, "W");
    same_tensor(&ma, &mc, "C");
    fk_bundle_close(&ma);
    fk_bundle_close(&mc);
    saves_close(&sv, cv);
    fed_close(&a);
    fed_close(&c);
    assert_int_equal(fk_params_set(&p, "target_opt", "rmsprop"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "target_opt"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "target_opt", "adam"), FK_OK);
    assert_int_equal(fk_params_set(&p, "avg_last", "-1"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "avg_last"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "avg_last", "x"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "avg_last"), FK_EINVAL);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* Central differences of the client's local loss against its gradient in the dense extractor's
 * parameters; the loss is rebuilt from the mini-batch (extractor, features, own statistic). */
static void fd_check(fk__fedrf_client *c, const fk_tensor *s_peer, const fk_tensor *s_src,
                     double *max_rel, double *gnorm)
{
    fk_err err;
    double L0;
    assert_int_equal(fk__fedrf_client_load_batch(c, &err), FK_OK);
    assert_int_equal(fk__fedrf_client_grad(c, s_peer, s_src, &L0, &err), FK_OK);
    double *g = malloc(c->PE * sizeof *g);
    assert_non_null(g);
    memcpy(g, c->gext, c->PE * sizeof *g);
    *max_rel = 0;
    *gnorm = 0;
    for (size_t j = 0; j < c->PE; j++)
        *gnorm += g[j] * g[j];
    *gnorm = sqrt(*gnorm);
    const double h = 1e-6;
    for (size_t t = 0; t < 40; t++) {
        size_t j = t < 30 ? (t * 7919) % c->PE : c->PE - 1 - (t - 30); /* weights and biases */
        double keep = c->ext[j], Lp, Lm;
        c->ext[j] = keep + h;
        assert_int_equal(fk__fedrf_client_load_batch(c, &err), FK_OK);
        assert_int_equal(fk__fedrf_client_grad(c, s_peer, s_src, &Lp, &err), FK_OK);
        c->ext[j] = keep - h;
        assert_int_equal(fk__fedrf_client_load_batch(c, &err), FK_OK);
        assert_int_equal(fk__fedrf_client_grad(c, s_peer, s_src, &Lm, &err), FK_OK);
        c->ext[j] = keep;
        double fd = (Lp - Lm) / (2 * h), rel = fabs(fd - g[j]) / (fabs(fd) + fabs(g[j]) + 1e-7);
        if (rel > *max_rel)
            *max_rel = rel;
    }
    assert_int_equal(fk__fedrf_client_load_batch(c, &err), FK_OK);
    free(g);
}

/* The dense extractor's gradient (classification + MMD at a source, MMD alone at the target)
 * matches central differences, and the MMD part is not cut (the reference code's detach). */
static void dense_extractor_gradient(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 9);
    fk_params p;
    base_params(&p, "4");
    assert_int_equal(fk_params_set(&p, "extractor", "dense"), FK_OK);
    assert_int_equal(fk_params_set(&p, "ext_dim", "12"), FK_OK);
    assert_int_equal(fk_params_set(&p, "N", "20"), FK_OK);
    assert_int_equal(fk_params_set(&p, "m", "6"), FK_OK);
    assert_int_equal(fk_params_set(&p, "lambda", "50"), FK_OK);
    fk_err err;
    void *vs, *vt;
    assert_int_equal(fk_method_fedrf_tca.client_init(&vs, &p, &ds[0], 0, NC, 3, &err), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.client_init(&vt, &p, &ds[K], K, NC, 3, &err), FK_OK);
    fk__fedrf_client *src = vs, *tgt = vt;
    assert_int_equal(src->rff.d, 12);
    fk_bundle task, up, msgs;
    fk_bundle_init(&task);
    fk_bundle_init(&up);
    fk_bundle_init(&msgs);
    fk_report rep;
    assert_int_equal(fk_bundle_put_scalar(&task, "phase", 0), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&task, "mmd", 1), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.local_step(vs, &task, &up, &rep, &err), FK_OK);
    fk_bundle_clear(&up);
    assert_int_equal(fk_method_fedrf_tca.local_step(vt, &task, &up, &rep, &err), FK_OK);
    assert_int_equal(fk_bundle_put_vec(&msgs, "s_peer", src->D, tgt->s_own), FK_OK);
    assert_int_equal(fk_bundle_put(&msgs, "s_src", 2, (uint64_t[2]){1, src->D}, src->s_own), FK_OK);
    const fk_tensor *s_peer = fk_bundle_get(&msgs, "s_peer"), *s_src = fk_bundle_get(&msgs, "s_src");
    double rel, gn;
    fd_check(src, s_peer, NULL, &rel, &gn);
    assert_true(rel < 1e-5);
    assert_true(gn > 0);
    /* the MMD term moves the source's extractor gradient */
    double *with = malloc(src->PE * sizeof *with), L;
    assert_non_null(with);
    memcpy(with, src->gext, src->PE * sizeof *with);
    assert_int_equal(fk__fedrf_client_grad(src, NULL, NULL, &L, &err), FK_OK);
    assert_memory_not_equal(with, src->gext, src->PE * sizeof *with);
    free(with);
    /* the target's extractor gets the MMD gradient */
    fd_check(tgt, NULL, s_src, &rel, &gn);
    assert_true(rel < 1e-5);
    assert_true(gn > 0);
    fk_bundle_close(&task);
    fk_bundle_close(&up);
    fk_bundle_close(&msgs);
    fk_method_fedrf_tca.client_close(vs);
    fk_method_fedrf_tca.client_close(vt);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* Dense extractor runs: deterministic, checkpointed bit for bit mid-run, never sent (no
 * update carries it), refusals of bad keys. */
static void dense_extractor_federation(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 10);
    fk_params p;
    base_params(&p, "6");
    assert_int_equal(fk_params_set(&p, "extractor", "dense"), FK_OK);
    assert_int_equal(fk_params_set(&p, "ext_dim", "16"), FK_OK);
    assert_int_equal(fk_params_set(&p, "avg_last", "2"), FK_OK);
    fk_err err;
    fed a, b, c;
    fed_open(&a, &p, ds, 7);
    fed_rounds(&a, 7, 1, 6);
    fed_open(&b, &p, ds, 7);
    fed_rounds(&b, 7, 1, 3);
    fk_bundle sv, cv[NC];
    fed_save(&b, &sv, cv);
    for (int i = 0; i < NC; i++)
        assert_non_null(fk_bundle_get(&cv[i], "ext"));
    fed_close(&b);
    fed_restore(&c, &p, ds, 7, &sv, cv);
    fed_rounds(&c, 7, 4, 6);
    for (int i = 0; i < NC; i++) {
        fk__fedrf_client *x = a.cli[i], *y = c.cli[i];
        assert_memory_equal(x->ext, y->ext, x->PE * sizeof(double));
    }
    /* the extractor trained: it is not where it started */
    void *fresh;
    assert_int_equal(fk_method_fedrf_tca.client_init(&fresh, &p, &ds[K], K, NC, 7, &err), FK_OK);
    fk__fedrf_client *f0 = fresh, *ft = a.cli[K];
    assert_memory_not_equal(f0->ext, ft->ext, f0->PE * sizeof(double));
    fk_method_fedrf_tca.client_close(fresh);
    fk_bundle ma, mc;
    fed_models(&a, &c, &ma, &mc);
    same_tensor(&ma, &mc, "W");
    same_tensor(&ma, &mc, "W_avg");
    /* the model holds W, C, their averages and the scalars predict reads; no extractor */
    static const char *const allowed[] = {"W",     "C",  "W_avg",     "C_avg", "rff_seed",
                                          "rff_orthogonal", "sigma", "d", "eps", "n_classes",
                                          "dense", "hidden", NULL};
    for (size_t i = 0; i < ma.count; i++) {
        int ok = 0;
        for (int k = 0; allowed[k]; k++)
            ok |= !strcmp(ma.items[i].name, allowed[k]);
        assert_true(ok);
    }
    /* and predict refuses it: the extractor stayed on the clients */
    fk_bundle q, res;
    fk_bundle_init(&q);
    fk_bundle_init(&res);
    assert_int_equal(fk_bundle_put(&q, "X", 2, (uint64_t[]){1, ds[K].X.cols}, ds[K].X.data),
                     FK_OK);
    assert_int_equal(fk_method_fedrf_tca.predict(&ma, &q, &res, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "dense"));
    fk_bundle_close(&q);
    fk_bundle_close(&res);
    /* the live target scores the model with its own extractor */
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(a.m->evaluate(a.cli[K], &ma, &rep, &err), FK_OK);
    assert_true(rep.accuracy >= 0 && rep.accuracy <= 1);
    fk_bundle_close(&ma);
    fk_bundle_close(&mc);
    saves_close(&sv, cv);
    fed_close(&a);
    fed_close(&c);
    assert_int_equal(fk_params_set(&p, "extractor", "conv"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "extractor"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "extractor", "dense"), FK_OK);
    assert_int_equal(fk_params_set(&p, "ext_dim", "0"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "ext_dim"), FK_EINVAL);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* warm_start: from the clients' round-1 moments the server's W equals the RF-TCA closed form
 * on the pooled rows (sources first), every client starts round 1 from it, bad keys refused. */
static void warm_start_is_the_pooled_closed_form(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 11);
    fk_params p;
    base_params(&p, "3");
    assert_int_equal(fk_params_set(&p, "warm_start", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    assert_int_equal(fk_params_set(&p, "gamma", "0.05"), FK_OK);
    fk_err err;
    fed a;
    fed_open(&a, &p, ds, 5);
    fed_rounds(&a, 5, 1, 1);
    fk__fedrf_server *srv = a.srv;
    assert_true(srv->have_W0);
    /* the pooled problem, from the rows themselves */
    size_t n = 0, ns = 0, D = srv->D;
    for (int i = 0; i < NC; i++) {
        fk__fedrf_client *c = a.cli[i];
        n += c->X.rows;
        ns += i == K ? 0 : c->X.rows;
    }
    fk_mat Phi, Wref;
    assert_int_equal(fk_mat_init(&Phi, n, D), FK_OK);
    size_t r = 0;
    for (int i = 0; i < NC; i++) { /* client order puts the sources (0..K-1) first */
        fk__fedrf_client *c = a.cli[i];
        fk_mat part = fk_mat_rows(&Phi, r, c->X.rows);
        assert_int_equal(fk_rff_map_into(&c->rff, &c->X, &part, &err), FK_OK);
        r += c->X.rows;
    }
    double theta[8];
    assert_int_equal(fk_tca_solve(&Phi, ns, 0.05, 8, FK_TCA_NORM_B, &Wref, theta, &err), FK_OK);
    /* the same matrix up to the scale the server gives it (the random start's norm sqrt(m/3)) */
    double big = 0, diff = 0, nref = 0, n0 = 0;
    for (size_t i = 0; i < D * 8; i++) {
        nref += Wref.data[i] * Wref.data[i];
        n0 += srv->W0[i] * srv->W0[i];
    }
    assert_true(fabs(sqrt(n0) - sqrt(8.0 / 3.0)) < 1e-12);
    double f = sqrt(n0 / nref);
    for (size_t i = 0; i < D * 8; i++) {
        big = fabs(Wref.data[i] * f) > big ? fabs(Wref.data[i] * f) : big;
        double e = fabs(Wref.data[i] * f - srv->W0[i]);
        diff = e > diff ? e : diff;
    }
    assert_true(big > 0);
    assert_true(diff <= 1e-7 * big);
    /* the target's W after round 1 is the warm start moved by averaged steps of at most ~lr */
    fk__fedrf_client *t = a.cli[K];
    double far = 0;
    for (size_t i = 0; i < D * 8; i++)
        far = fabs(t->par[i] - srv->W0[i]) > far ? fabs(t->par[i] - srv->W0[i]) : far;
    assert_true(far <= 0.0101);
    /* a server restarted inside round 1 (after phase 0) keeps the warm start: the checkpoint
     * carries W0, and the reloaded server's round-1 phase-1 task sends it as W_init */
    {
        fk_bundle t1, t2;
        fk_bundle_init(&t1);
        fk_bundle_init(&t2);
        void *back = server_restored(&a, a.srv, &p, 5);
        fk__fedrf_server *b = back;
        assert_true(b->have_W0);
        assert_memory_equal(b->W0, srv->W0, srv->WM * sizeof(double));
        assert_int_equal(a.m->task(a.srv, 1, 1, K, &t1, &err), FK_OK);
        assert_int_equal(a.m->task(back, 1, 1, K, &t2, &err), FK_OK);
        assert_non_null(fk_bundle_get(&t2, "W_init"));
        same_tensor(&t1, &t2, "W_init");
        a.m->server_close(back);
        fk_bundle_close(&t1);
        fk_bundle_close(&t2);
    }
    fk_mat_close(&Phi);
    fk_mat_close(&Wref);
    fed_close(&a);
    /* the moments are what the update checker lets through in round 1, and only then */
    fk_update up = {.client = 0};
    fk_bundle_init(&up.msg);
    void *srv2;
    assert_int_equal(fk_method_fedrf_tca.server_init(&srv2, &p, NC, 5, &err), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "n", 2.5), FK_OK);
    assert_int_equal(fk_method_fedrf_tca.check_update(srv2, 1, 0, &up, &err), FK_EINVAL);
    assert_int_equal(fk_method_fedrf_tca.check_update(srv2, 2, 0, &up, &err), FK_EINVAL);
    fk_method_fedrf_tca.server_close(srv2);
    fk_bundle_close(&up.msg);
    assert_int_equal(fk_params_set(&p, "gamma", "-1"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "gamma"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "gamma", "0"), FK_OK);
    assert_int_equal(fk_params_set(&p, "warm_start", "maybe"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "warm_start"), FK_EINVAL);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* Pooled held-out accuracy of a model (W and the classifier C, or the vote of the k classifiers
 * V) over the sources' held-out rows, recomputed here through evaluate on a copy of each source
 * restricted to those rows. */
static double held_out_acc_v(fed *f, const double *W, const double *C, const double *V, size_t k)
{
    fk__fedrf_server *srv = f->srv;
    double ok = 0, cnt = 0;
    fk_err err;
    for (int i = 0; i < K; i++) {
        fk__fedrf_client *c = f->cli[i];
        size_t nh = c->X.rows - c->n_train;
        assert_true(nh >= 1);
        fk_bundle m;
        fk_bundle_init(&m);
        assert_int_equal(fk__fedrf_put_mat(&m, "W", srv->D, (size_t)srv->c.m, W, &err), FK_OK);
        if (C) {
            assert_int_equal(fk__fedrf_put_vec(&m, "C", srv->PC, C, &err), FK_OK);
        } else {
            double *dst = fk_bundle_add(&m, "votes", 2, (uint64_t[2]){k, srv->PC});
            assert_non_null(dst);
            memcpy(dst, V, k * srv->PC * sizeof(double));
        }
        /* the client's rows viewed as only its held-out part */
        fk_mat all = c->X;
        int *yall = c->y;
        c->X = fk_mat_rows(&all, c->n_train, nh);
        c->y = yall + c->n_train;
        fk_report rep;
        fk_report_init(&rep);
        assert_int_equal(f->m->evaluate(c, &m, &rep, &err), FK_OK);
        c->X = all;
        c->y = yall;
        ok += rep.accuracy * (double)nh;
        cnt += (double)nh;
        fk_bundle_close(&m);
    }
    return ok / cnt;
}

static double held_out_acc(fed *f, const double *W, const double *C)
{
    return held_out_acc_v(f, W, C, NULL, 0);
}

/* select_holdout: sources never train on their held-out rows; after every round the server's
 * selection is the round model best on those rows so far (recomputed here), the final model
 * carries it, a checkpoint keeps it, and evaluate scores it with use_sel. */
static void select_holdout_keeps_the_best_round(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 12);
    fk_params p;
    base_params(&p, "6");
    assert_int_equal(fk_params_set(&p, "select_holdout", "0.25"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    /* a batch above the 75 training rows: the mini-batch shrinks to them (buffers sized so) */
    assert_int_equal(fk_params_set(&p, "batch", "90"), FK_OK);
    assert_int_equal(fk_params_set(&p, "tc", "1"), FK_OK);
    fk_err err;
    fed a;
    fed_open(&a, &p, ds, 9);
    fk__fedrf_server *srv = a.srv;
    double best = -1;
    int best_round = 0;
    for (int r = 1; r <= 6; r++) {
        fed_rounds(&a, 9, r, r);
        double acc = held_out_acc(&a, srv->Wmodel, srv->Cmodel);
        if (acc > best + 1e-12) {
            best = acc;
            best_round = r;
        }
        assert_true(srv->have_sel);
        assert_true(fabs(srv->sel_acc - best) < 1e-12);
        assert_int_equal((int)srv->sel_round, best_round);
        for (int i = 0; i < K; i++) { /* the mini-batch pool stays in the training rows */
            fk__fedrf_client *c = a.cli[i];
            assert_int_equal(c->n_train, c->X.rows - (size_t)floor(0.25 * (double)c->X.rows));
            assert_int_equal(c->b, c->n_train);
            for (size_t q = 0; q < c->b; q++)
                assert_true((size_t)c->perm[q] < c->n_train);
        }
        fk__fedrf_client *tc = a.cli[K]; /* the target holds nothing out */
        assert_int_equal(tc->n_train, tc->X.rows);
    }
    assert_true(fabs(held_out_acc(&a, srv->Wsel, srv->Csel) - srv->sel_acc) < 1e-12);
    /* the model carries the selection; use_sel scores it */
    fk_bundle m;
    fk_bundle_init(&m);
    assert_int_equal(a.m->model(a.srv, &m, &err), FK_OK);
    assert_non_null(fk_bundle_get(&m, "W_sel"));
    assert_non_null(fk_bundle_get(&m, "C_sel"));
    assert_int_equal((int)fk__fedrf_scalar(&m, "sel_round", 0), best_round);
    double *flag = fk_bundle_add(&m, "use_sel", 0, NULL);
    assert_non_null(flag);
    *flag = 1;
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(a.m->evaluate(a.cli[K], &m, &rep, &err), FK_OK);
    assert_true(rep.accuracy >= 0 && rep.accuracy <= 1);
    /* checkpoint round trip keeps the selection */
    void *back = server_restored(&a, a.srv, &p, 9);
    fk__fedrf_server *b = back;
    assert_true(b->have_sel);
    assert_true(b->sel_acc == srv->sel_acc && b->sel_round == srv->sel_round);
    assert_memory_equal(b->Wsel, srv->Wsel, srv->WM * sizeof(double));
    assert_memory_equal(b->Csel, srv->Csel, srv->PC * sizeof(double));
    /* the checker: counts only from the asked sources, whole and 0 <= ok <= n */
    fk_update up = {.client = 0};
    fk_bundle_init(&up.msg);
    assert_int_equal(a.m->check_update(back, 2, 2, &up, &err), FK_EINVAL); /* counts missing */
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_ok", 5), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_n", 4), FK_OK);
    assert_int_equal(a.m->check_update(back, 2, 2, &up, &err), FK_EINVAL);
    fk_bundle_clear(&up.msg);
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_ok", 3), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_n", 4), FK_OK);
    assert_int_equal(a.m->check_update(back, 2, 2, &up, &err), FK_OK);
    up.client = K; /* the target is never asked */
    assert_int_equal(a.m->check_update(back, 2, 2, &up, &err), FK_EINVAL);
    fk_bundle_close(&up.msg);
    a.m->server_close(back);
    fk_bundle_close(&m);
    fed_close(&a);
    /* bad values */
    assert_int_equal(fk_params_set(&p, "select_holdout", "0.95"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "select_holdout"), FK_EINVAL);
    assert_int_equal(fk_params_set(&p, "select_holdout", "0.001"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "select_holdout"), FK_EINVAL);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* The values of the select_holdout tensors in a bundle (models to score and counts). */
static size_t sel_values(const fk_bundle *b)
{
    size_t v = 0;
    for (size_t t = 0; t < b->count; t++)
        if (!strncmp(b->items[t].name, "sel_", 4))
            v += b->items[t].len;
    return v;
}

/* Plan round `round` and run its phases 0 and 1 (phase 2 is the caller's). */
static void run_to_phase2(fed *f, uint64_t seed, int round)
{
    fk_err err;
    fk_update ups[NC];
    fk_bundle task;
    fk_bundle_init(&task);
    fk_rng rng;
    int chosen[NC], n = 0, done = 0;
    fk_sim_plan_rng(&rng, seed, round);
    assert_int_equal(f->m->plan(f->srv, round, &rng, chosen, &n, &err), FK_OK);
    assert_int_equal(n, NC);
    for (int phase = 0; phase < 2; phase++) {
        for (int k = 0; k < n; k++) {
            fk_bundle_init(&ups[k].msg);
            fk_report_init(&ups[k].report);
            ups[k].client = chosen[k];
            fk_bundle_clear(&task);
            assert_int_equal(f->m->task(f->srv, round, phase, chosen[k], &task, &err), FK_OK);
            assert_int_equal(f->m->local_step(f->cli[chosen[k]], &task, &ups[k].msg,
                                              &ups[k].report, &err), FK_OK);
            assert_int_equal(f->m->check_update(f->srv, round, phase, &ups[k], &err), FK_OK);
        }
        assert_int_equal(f->m->aggregate(f->srv, round, phase, ups, n, &done, &err), FK_OK);
        assert_false(done);
        for (int k = 0; k < n; k++)
            fk_bundle_close(&ups[k].msg);
    }
    fk_bundle_close(&task);
}

/* The last round's phase 2 with select_holdout and avg_last: every source also scores the tail
 * average (sel_W_avg, sel_C_avg; the target never), the traffic is fk_fedrf_select_values with two
 * candidates, the server records the average's held-out accuracy (recomputed here) and keeps the
 * better candidate, the average winning ties (sel_round 0). A checkpoint keeps it; the checker
 * wants sel_ok_avg in the last round, within 0..sel_n; crafted counts where only the average
 * scores pick the average, bit for bit W_avg and C_avg. */
static void select_tail_average_is_a_candidate(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 14);
    fk_params p;
    base_params(&p, "6");
    assert_int_equal(fk_params_set(&p, "select_holdout", "0.25"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    assert_int_equal(fk_params_set(&p, "tc", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "avg_last", "3"), FK_OK);
    fk_err err;
    fed a;
    fed_open(&a, &p, ds, 4);
    fk__fedrf_server *srv = a.srv;
    fed_rounds(&a, 4, 1, 5);
    run_to_phase2(&a, 4, 6);
    double round_acc = held_out_acc(&a, srv->Wmodel, srv->Cmodel);
    double best = srv->sel_acc > round_acc ? srv->sel_acc : round_acc;
    int best_round = srv->sel_acc >= round_acc ? (int)srv->sel_round : 6;
    /* the tail average the server holds */
    double *Wa = malloc(srv->WM * sizeof *Wa), *Ca = malloc(srv->PC * sizeof *Ca);
    assert_non_null(Wa);
    assert_non_null(Ca);
    assert_true(srv->nWsum == 3 && srv->nCsum == 3);
    for (size_t i = 0; i < srv->WM; i++)
        Wa[i] = srv->Wsum[i] / srv->nWsum;
    for (size_t i = 0; i < srv->PC; i++)
        Ca[i] = srv->Csum[i] / srv->nCsum;
    double avg_acc = held_out_acc(&a, Wa, Ca);
    /* phase 2 of the last round */
    fk_update ups[NC];
    fk_bundle task;
    fk_bundle_init(&task);
    size_t traffic = 0;
    int done = 0;
    for (int k = 0; k < NC; k++) {
        fk_bundle_init(&ups[k].msg);
        fk_report_init(&ups[k].report);
        ups[k].client = k;
        fk_bundle_clear(&task);
        assert_int_equal(a.m->task(srv, 6, 2, k, &task, &err), FK_OK);
        assert_true((fk_bundle_get(&task, "sel_W_avg") != NULL) == (k != K));
        assert_true((fk_bundle_get(&task, "sel_C_avg") != NULL) == (k != K));
        traffic += sel_values(&task);
        assert_int_equal(a.m->local_step(a.cli[k], &task, &ups[k].msg, &ups[k].report, &err),
                         FK_OK);
        traffic += sel_values(&ups[k].msg);
        assert_int_equal(a.m->check_update(srv, 6, 2, &ups[k], &err), FK_OK);
    }
    const fk__fedrf_client *c0 = a.cli[0];
    assert_int_equal(traffic, fk_fedrf_select_values((size_t)srv->c.N, (size_t)srv->c.m,
                                                     srv->PC, 0, K, 2));
    assert_int_equal(c0->WM, srv->WM);
    assert_int_equal(a.m->aggregate(srv, 6, 2, ups, NC, &done, &err), FK_OK);
    assert_true(done);
    assert_true(fabs(srv->sel_avg_acc - avg_acc) < 1e-12);
    if (avg_acc >= best) {
        assert_int_equal((int)srv->sel_round, 0);
        assert_memory_equal(srv->Wsel, Wa, srv->WM * sizeof(double));
        assert_memory_equal(srv->Csel, Ca, srv->PC * sizeof(double));
    } else {
        assert_int_equal((int)srv->sel_round, best_round);
        assert_true(fabs(srv->sel_acc - best) < 1e-12);
    }
    /* the model reports the average's score; a checkpoint keeps the selection */
    fk_bundle m;
    fk_bundle_init(&m);
    assert_int_equal(a.m->model(srv, &m, &err), FK_OK);
    assert_true(fabs(fk__fedrf_scalar(&m, "sel_avg_acc", -1) - avg_acc) < 1e-12);
    void *back = server_restored(&a, srv, &p, 4);
    fk__fedrf_server *b = back;
    assert_true(b->sel_avg_acc == srv->sel_avg_acc && b->sel_round == srv->sel_round &&
                b->sel_acc == srv->sel_acc);
    /* the checker in the last round: sel_ok_avg wanted, whole, within 0..sel_n */
    fk_update up = {.client = 1};
    fk_bundle_init(&up.msg);
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_ok", 1), FK_OK);
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_n", 10), FK_OK);
    assert_int_equal(a.m->check_update(back, 6, 2, &up, &err), FK_EINVAL);
    assert_int_equal(a.m->check_update(back, 5, 2, &up, &err), FK_OK); /* not the last round */
    assert_int_equal(fk_bundle_put_scalar(&up.msg, "sel_ok_avg", 11), FK_OK);
    assert_int_equal(a.m->check_update(back, 6, 2, &up, &err), FK_EINVAL);
    fk_bundle_clear(&up.msg);
    fk_update crafted[K];
    for (int k = 0; k < K; k++) {
        crafted[k].client = k;
        fk_bundle_init(&crafted[k].msg);
        fk_report_init(&crafted[k].report);
        assert_int_equal(fk_bundle_put_scalar(&crafted[k].msg, "sel_ok", 0), FK_OK);
        assert_int_equal(fk_bundle_put_scalar(&crafted[k].msg, "sel_n", 10), FK_OK);
        assert_int_equal(fk_bundle_put_scalar(&crafted[k].msg, "sel_ok_avg", 10), FK_OK);
        assert_int_equal(a.m->check_update(back, 6, 2, &crafted[k], &err), FK_OK);
    }
    assert_int_equal(a.m->aggregate(back, 6, 2, crafted, K, &done, &err), FK_OK);
    assert_int_equal((int)b->sel_round, 0);
    assert_true(b->sel_acc == 1.0);
    assert_memory_equal(b->Wsel, Wa, srv->WM * sizeof(double));
    assert_memory_equal(b->Csel, Ca, srv->PC * sizeof(double));
    for (int k = 0; k < K; k++)
        fk_bundle_close(&crafted[k].msg);
    fk_bundle_close(&up.msg);
    a.m->server_close(back);
    for (int k = 0; k < NC; k++)
        fk_bundle_close(&ups[k].msg);
    fk_bundle_close(&task);
    fk_bundle_close(&m);
    free(Wa);
    free(Ca);
    fed_close(&a);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* select_holdout with voting: every source sends its classifier every round, the candidates are
 * each round's W with the vote of the sources' current classifiers and, in the last round, the
 * tail average W_avg with that vote; the selection is the best of them on the held-out rows
 * (recomputed here). The model carries W_sel and votes_sel, use_sel scores them, a checkpoint
 * keeps them, and a whole simulated run passes check_update. */
static void select_holdout_with_voting(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 15);
    fk_params p;
    base_params(&p, "5");
    assert_int_equal(fk_params_set(&p, "select_holdout", "0.25"), FK_OK);
    assert_int_equal(fk_params_set(&p, "voting", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "avg_last", "2"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    fk_err err;
    fed a;
    fed_open(&a, &p, ds, 6);
    fk__fedrf_server *srv = a.srv;
    double best = -1;
    int best_round = -1;
    double *V = malloc((size_t)K * srv->PC * sizeof *V), *Wa = malloc(srv->WM * sizeof *Wa);
    assert_non_null(V);
    assert_non_null(Wa);
    for (int r = 1; r <= 5; r++) {
        fed_rounds(&a, 6, r, r);
        for (int i = 0; i < K; i++) { /* every source's classifier arrived this round */
            assert_true(srv->has_vote[i]);
            assert_memory_equal(srv->votes + (size_t)i * srv->PC, cli_par(&a, i) + srv->WM,
                                srv->PC * sizeof(double));
        }
        assert_false(srv->has_vote[K]);
        memcpy(V, srv->votes, (size_t)K * srv->PC * sizeof *V);
        double acc = held_out_acc_v(&a, srv->Wmodel, NULL, V, K);
        if (acc > best + 1e-12) {
            best = acc;
            best_round = r;
        }
        if (r == 5) {
            for (size_t i = 0; i < srv->WM; i++)
                Wa[i] = srv->Wsum[i] / srv->nWsum;
            double aa = held_out_acc_v(&a, Wa, NULL, V, K);
            assert_true(fabs(srv->sel_avg_acc - aa) < 1e-12);
            if (aa >= best - 1e-12) {
                best = aa;
                best_round = 0;
            }
        }
        assert_true(srv->have_sel);
        assert_true(fabs(srv->sel_acc - best) < 1e-12);
        assert_int_equal((int)srv->sel_round, best_round);
    }
    fk_bundle m;
    fk_bundle_init(&m);
    assert_int_equal(a.m->model(srv, &m, &err), FK_OK);
    const fk_tensor *vs = fk_bundle_get(&m, "votes_sel");
    assert_non_null(vs);
    assert_int_equal(vs->shape[0], K);
    assert_null(fk_bundle_get(&m, "C_sel"));
    double *flag = fk_bundle_add(&m, "use_sel", 0, NULL);
    assert_non_null(flag);
    *flag = 1;
    fk_report rep;
    fk_report_init(&rep);
    assert_int_equal(a.m->evaluate(a.cli[K], &m, &rep, &err), FK_OK);
    assert_true(rep.accuracy >= 0 && rep.accuracy <= 1);
    void *back = server_restored(&a, srv, &p, 6);
    fk__fedrf_server *b = back;
    assert_memory_equal(b->Vsel, srv->Vsel, (size_t)NC * srv->PC * sizeof(double));
    assert_memory_equal(b->has_vsel, srv->has_vsel, NC);
    assert_memory_equal(b->Wsel, srv->Wsel, srv->WM * sizeof(double));
    a.m->server_close(back);
    fk_bundle_close(&m);
    fed_close(&a);
    /* a whole run through the simulator, which checks every update */
    fk_sim_opts o = {.rounds = 5, .seed = 6};
    assert_int_equal(fk_sim_run(&fk_method_fedrf_tca, &p, ds, NC, &o, NULL, NULL, &err), FK_OK);
    free(V);
    free(Wa);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* warm_start with select_holdout: a source's round-1 moments cover its training rows only. */
static void warm_moments_skip_held_out_rows(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 16);
    fk_params p;
    base_params(&p, "3");
    assert_int_equal(fk_params_set(&p, "warm_start", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "select_holdout", "0.25"), FK_OK);
    fk_err err;
    void *cv;
    assert_int_equal(fk_method_fedrf_tca.client_init(&cv, &p, &ds[0], 0, NC, 3, &err), FK_OK);
    fk__fedrf_client *c = cv;
    assert_true(c->n_train < c->X.rows);
    fk_bundle up;
    fk_bundle_init(&up);
    assert_int_equal(fk__fedrf_client_moments(c, &up, &err), FK_OK);
    assert_true(fk__fedrf_scalar(&up, "n", -1) == (double)c->n_train);
    fk_mat Phi;
    double *norms = malloc(c->X.rows * sizeof *norms);
    assert_non_null(norms);
    fk_mat Xt = fk_mat_rows(&c->X, 0, c->n_train);
    assert_int_equal(fk__fedrf_features(c, &Xt, &Phi, norms, &err), FK_OK);
    const fk_tensor *sum = fk_bundle_get(&up, "sum"), *S = fk_bundle_get(&up, "scatter");
    assert_non_null(sum);
    assert_non_null(S);
    for (size_t j = 0; j < c->D; j++) {
        double ref = 0, sref = 0;
        for (size_t i = 0; i < c->n_train; i++) {
            ref += fk_mat_row(&Phi, i)[j];
            sref += fk_mat_row(&Phi, i)[j] * fk_mat_row(&Phi, i)[0];
        }
        assert_true(fabs(sum->data[j] - ref) < 1e-9);
        assert_true(fabs(S->data[j * c->D] - sref) < 1e-9);
    }
    fk_mat_close(&Phi);
    free(norms);
    fk_bundle_close(&up);
    fk_method_fedrf_tca.client_close(cv);
    fk_params_close(&p);
    close_data(ds, NC);
}

/* source_only: no statistics are asked and the target is told not to send W (and refused when it
 * does), so the server's model is the sources' average alone. warm_start is refused. */
static void source_only_uses_no_target(void **state)
{
    (void)state;
    fk_dataset ds[NC];
    make_data(ds, 13);
    fk_params p;
    base_params(&p, "3");
    assert_int_equal(fk_params_set(&p, "source_only", "1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "participation", "all"), FK_OK);
    assert_int_equal(fk_params_set(&p, "lambda", "1"), FK_OK);
    fk_err err;
    fed a;
    fed_open(&a, &p, ds, 4);
    fed_rounds(&a, 4, 1, 2);
    fk_bundle t;
    fk_bundle_init(&t);
    for (int c = 0; c < NC; c++) {
        fk_bundle_clear(&t);
        assert_int_equal(a.m->task(a.srv, 3, 0, c, &t, &err), FK_OK);
        assert_true(fk__fedrf_scalar(&t, "mmd", -1) == 0);
    }
    fk_bundle_clear(&t);
    assert_int_equal(a.m->task(a.srv, 3, 1, K, &t, &err), FK_OK); /* the last round */
    assert_true(fk__fedrf_scalar(&t, "send_W", -1) == 0);
    fk_bundle_close(&t);
    /* a W from the target is refused, so the average holds the sources' W alone */
    fk__fedrf_server *srv = a.srv;
    fk_update up = {.client = K};
    fk_bundle_init(&up.msg);
    assert_int_equal(fk__fedrf_put_mat(&up.msg, "W", srv->D, (size_t)srv->c.m, srv->Wmodel, &err),
                     FK_OK);
    assert_int_equal(a.m->check_update(a.srv, 3, 1, &up, &err), FK_EINVAL);
    fk_bundle_close(&up.msg);
    fed_close(&a);
    assert_int_equal(fk_params_set(&p, "warm_start", "1"), FK_OK);
    assert_int_equal(init_error(&p, &ds[0], 0, "warm_start"), FK_EINVAL);
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
        cmocka_unit_test(aggregation_follows_the_round_rules),
        cmocka_unit_test(lambda_zero_moves_target_w_only_by_averaging),
        cmocka_unit_test(round_count_matches_the_channel),
        cmocka_unit_test(voting_majority_ties_to_smallest_class),
        cmocka_unit_test(tail_average_of_the_last_rounds),
        cmocka_unit_test(voting_rounds_report_the_vote),
        cmocka_unit_test(no_accuracy_before_tc),
        cmocka_unit_test(target_opt_and_avg_keys),
        cmocka_unit_test(dense_extractor_gradient),
        cmocka_unit_test(dense_extractor_federation),
        cmocka_unit_test(warm_start_is_the_pooled_closed_form),
        cmocka_unit_test(select_holdout_keeps_the_best_round),
        cmocka_unit_test(source_only_uses_no_target),
        cmocka_unit_test(select_tail_average_is_a_candidate),
        cmocka_unit_test(select_holdout_with_voting),
        cmocka_unit_test(warm_moments_skip_held_out_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
