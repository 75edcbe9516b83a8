/* Driving a method's operations table by hand in the tests (include after cmocka.h):
 * rounds with every phase, round 1's initialisation updates, and an aggregate with one
 * client's tensor replaced. At most SUPPORT_OPS_MAX clients. */
#ifndef FK_TEST_SUPPORT_OPS_H
#define FK_TEST_SUPPORT_OPS_H

#include <string.h>

#include "common/methods/method.h"

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

/* Round 1's initialisation updates of all n clients (fresh states). */
static void init_updates(const fk_method *m, void *srv, void **cli, int n, fk_update *ups)
{
    fk_bundle task;
    fk_bundle_init(&task);
    for (int k = 0; k < n; k++) {
        fk_bundle_clear(&task);
        assert_int_equal(m->task(srv, 1, 0, k, &task, NULL), FK_OK);
        fk_bundle_init(&ups[k].msg);
        fk_report_init(&ups[k].report);
        ups[k].client = k;
        assert_int_equal(m->local_step(cli[k], &task, &ups[k].msg, &ups[k].report, NULL), FK_OK);
    }
    fk_bundle_close(&task);
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
