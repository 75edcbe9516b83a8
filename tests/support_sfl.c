/* See support_sfl.h. */
#include "tests/support_sfl.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"

static const fk_method *M = &fk_method_sfl;

double fk_test_scalar(const fk_bundle *b, const char *name)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    assert_non_null(t);
    assert_int_equal(t->len, 1);
    return t->data[0];
}

void fk_test_sfl_open(const fk_params *p, const fk_dataset *ds, int K, uint64_t seed, void **srv,
                      void **cli)
{
    fk_err err = {0};
    assert_int_equal(M->server_init(srv, p, K, seed, &err), FK_OK);
    for (int k = 0; k < K; k++)
        assert_int_equal(M->client_init(&cli[k], p, &ds[k], k, K, seed, &err), FK_OK);
}

void fk_test_sfl_phase(void *srv, void **cli, int K, int ph, fk_update *ups)
{
    fk_err err = {0};
    fk_bundle task;
    fk_bundle_init(&task);
    for (int k = 0; k < K; k++) {
        fk_bundle_clear(&task);
        assert_int_equal(M->task(srv, 1, ph, k, &task, &err), FK_OK);
        fk_bundle_init(&ups[k].msg);
        fk_report_init(&ups[k].report);
        ups[k].client = k;
        assert_int_equal(M->local_step(cli[k], &task, &ups[k].msg, &ups[k].report, &err), FK_OK);
        if (M->check_update(srv, 1, ph, &ups[k], &err))
            fail_msg("client %d phase %d: %s", k, ph, err.msg);
    }
    fk_bundle_close(&task);
}

void fk_test_sfl_close_ups(fk_update *ups, int K)
{
    for (int k = 0; k < K; k++)
        fk_bundle_close(&ups[k].msg);
}

void fk_test_sfl_uploads(void *srv, void **cli, int K, fk_update *ups)
{
    fk_err err = {0};
    int done = 0;
    fk_test_sfl_phase(srv, cli, K, 0, ups);
    assert_int_equal(M->aggregate(srv, 1, 0, ups, K, &done, &err), FK_OK);
    fk_test_sfl_close_ups(ups, K);
    fk_test_sfl_phase(srv, cli, K, 1, ups);
}

void fk_test_sfl_restart(void *srv, const fk_params *p, int K, uint64_t seed, fk_bundle *ck,
                         void **srv2)
{
    fk_err err = {0};
    fk_bundle_clear(ck);
    assert_int_equal(M->save(srv, ck, &err), FK_OK);
    if (*srv2)
        M->server_close(*srv2);
    *srv2 = NULL;
    assert_int_equal(M->server_init(srv2, p, K, seed, &err), FK_OK);
    assert_int_equal(M->load(*srv2, ck, &err), FK_OK);
}

void fk_test_sfl_refuse(void *srv, fk_update *u, const char *name, size_t i, double v,
                        const char *want)
{
    fk_err err = {0};
    fk_tensor *t = (fk_tensor *)fk_bundle_get(&u->msg, name);
    assert_non_null(t);
    assert_true(i < t->len);
    double keep = t->data[i];
    t->data[i] = v;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("'%s'[%zu] = %g: message '%s' lacks '%s'", name, i, v, err.msg, want);
    t->data[i] = keep;
    assert_int_equal(M->check_update(srv, 1, 1, u, &err), FK_OK);
}

void fk_test_sfl_sine(fk_dataset *ds, int K, size_t n, double x0, double span)
{
    fk_err err = {0};
    double *t = malloc(n * sizeof *t);
    assert_non_null(t);
    for (int k = 0; k < K; k++) {
        fk_rng r;
        fk_rng_init(&r, 5, (uint64_t)k);
        assert_int_equal(fk_dataset_init(&ds[k], n, 1, 0), FK_OK);
        for (size_t i = 0; i < n; i++) {
            double x = x0 + span * fk_rng_uniform(&r);
            ds[k].X.data[i * ds[k].X.ld] = x;
            t[i] = sin(x) + 0.01 * fk_rng_normal(&r);
        }
        assert_int_equal(fk_dataset_set_target(&ds[k], t, &err), FK_OK);
    }
    free(t);
}
