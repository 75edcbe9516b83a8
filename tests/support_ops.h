/* Driving a method's operations table by hand in the tests (include after cmocka.h):
 * rounds with every phase, round 1's initialisation updates, and an aggregate with one
 * client's tensor replaced, a checkpoint round trip. At most SUPPORT_OPS_MAX clients. */
#ifndef FK_TEST_SUPPORT_OPS_H
#define FK_TEST_SUPPORT_OPS_H

#include <string.h>

#include "common/methods/method.h"
#include "common/methods/sim.h"

enum { SUPPORT_OPS_MAX = 16 };

/* Drive the ops by hand for rounds [r0, r1]. */
static void drive(const fk_method *m, void *srv, void **cli, int r0, int r1)
{
    fk_update ups[SUPPORT_OPS_MAX];
    fk_bundle task;
    fk_bundle_init(&task);
    int chosen[SUPPORT_OPS_MAX], nc;
    for (int round = r0; round <= r1; round++) {
        assert_int_equal(m->plan(srv, round, NULL, chosen, &nc, NULL), FK_OK);
        assert_true(nc <= SUPPORT_OPS_MAX);
        int done = 0;
        for (int phase = 0; !done; phase++) {
            for (int j = 0; j < nc; j++) {
                fk_bundle_clear(&task);
                assert_int_equal(m->task(srv, round, phase, chosen[j], &task, NULL), FK_OK);
                fk_bundle_init(&ups[j].msg);
                fk_report_init(&ups[j].report);
                ups[j].client = chosen[j];
                assert_int_equal(m->local_step(cli[chosen[j]], &task, &ups[j].msg, &ups[j].report,
                                               NULL),
                                 FK_OK);
            }
            assert_int_equal(m->aggregate(srv, round, phase, ups, nc, &done, NULL), FK_OK);
            for (int j = 0; j < nc; j++)
                fk_bundle_close(&ups[j].msg);
        }
    }
    fk_bundle_close(&task);
}

/* The updates of all n clients to (round, phase) tasks (phase 0 of round 1: initialisation). */
static void phase_updates(const fk_method *m, void *srv, void **cli, int n, int round, int phase,
                          fk_update *ups)
{
    fk_bundle task;
    fk_bundle_init(&task);
    for (int k = 0; k < n; k++) {
        fk_bundle_clear(&task);
        assert_int_equal(m->task(srv, round, phase, k, &task, NULL), FK_OK);
        fk_bundle_init(&ups[k].msg);
        fk_report_init(&ups[k].report);
        ups[k].client = k;
        assert_int_equal(m->local_step(cli[k], &task, &ups[k].msg, &ups[k].report, NULL), FK_OK);
    }
    fk_bundle_close(&task);
}

/* Run rounds 1..r_save, checkpoint server and clients, restore into fresh states, finish to
 * r_end on both: the models are equal, and equal to fk_sim_run's with the same seed. rep gets
 * the restored client 0's evaluation of the final model. */
static void checkpoint_round_trip(const fk_method *m, const fk_params *p, const fk_dataset *tasks,
                                  int n, uint64_t seed, int r_save, int r_end, fk_report *rep)
{
    void *srv, *srv2, *cli[SUPPORT_OPS_MAX], *cli2[SUPPORT_OPS_MAX];
    assert_true(n <= SUPPORT_OPS_MAX);
    assert_int_equal(m->server_init(&srv, p, n, seed, NULL), FK_OK);
    for (int k = 0; k < n; k++)
        assert_int_equal(m->client_init(&cli[k], p, &tasks[k], k, n, seed, NULL), FK_OK);
    drive(m, srv, cli, 1, r_save);
    fk_bundle sb, cb;
    fk_bundle_init(&sb);
    assert_int_equal(m->save(srv, &sb, NULL), FK_OK);
    assert_int_equal(m->server_init(&srv2, p, n, seed, NULL), FK_OK);
    assert_int_equal(m->load(srv2, &sb, NULL), FK_OK);
    for (int k = 0; k < n; k++) {
        fk_bundle_init(&cb);
        assert_int_equal(m->client_save(cli[k], &cb, NULL), FK_OK);
        assert_int_equal(m->client_init(&cli2[k], p, &tasks[k], k, n, seed, NULL), FK_OK);
        assert_int_equal(m->client_load(cli2[k], &cb, NULL), FK_OK);
        fk_bundle_close(&cb);
    }
    drive(m, srv, cli, r_save + 1, r_end);
    drive(m, srv2, cli2, r_save + 1, r_end);
    fk_bundle a, b, c;
    fk_bundle_init(&a);
    fk_bundle_init(&b);
    assert_int_equal(m->model(srv, &a, NULL), FK_OK);
    assert_int_equal(m->model(srv2, &b, NULL), FK_OK);
    fk_sim_opts o = {.rounds = r_end, .seed = seed};
    assert_int_equal(fk_sim_run(m, p, tasks, n, &o, &c, NULL, NULL), FK_OK);
    const char *names[2] = {"theta", "w"};
    for (int i = 0; i < 2; i++) {
        const fk_tensor *ta = fk_bundle_get(&a, names[i]), *tb = fk_bundle_get(&b, names[i]);
        const fk_tensor *tc = fk_bundle_get(&c, names[i]);
        assert_true(ta && tb && tc && ta->len == tb->len && ta->len == tc->len);
        assert_memory_equal(ta->data, tb->data, ta->len * sizeof(double));
        assert_memory_equal(ta->data, tc->data, ta->len * sizeof(double));
    }
    fk_report_init(rep);
    assert_int_equal(m->evaluate(cli2[0], &b, rep, NULL), FK_OK);
    fk_bundle_close(&a);
    fk_bundle_close(&b);
    fk_bundle_close(&c);
    fk_bundle_close(&sb);
    for (int k = 0; k < n; k++) {
        m->client_close(cli[k]);
        m->client_close(cli2[k]);
    }
    m->server_close(srv);
    m->server_close(srv2);
}

/* Aggregate the n updates with client 4's tensor `name` replaced; expect `code` and `what`
 * in the message. */
static void tampered(const fk_method *m, void *srv, fk_update *ups, int n, int round,
                     const char *name, int ndim, const uint64_t *shape, const double *vals,
                     int code, const char *what)
{
    fk_bundle keep = ups[4].msg, bad;
    assert_int_equal(fk_bundle_copy(&bad, &keep), FK_OK);
    assert_int_equal(fk_bundle_put(&bad, name, ndim, shape, vals), FK_OK);
    ups[4].msg = bad;
    fk_err err;
    int done;
    assert_int_equal(m->aggregate(srv, round, 0, ups, n, &done, &err), code);
    assert_non_null(strstr(err.msg, what));
    ups[4].msg = keep;
    fk_bundle_close(&bad);
}

#endif
