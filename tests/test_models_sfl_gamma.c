/* Sparse functional learning solver (common/models/sfl/sfl.h) against spec 004 §10.1 T10: the
 * monotone trends in gamma of Fig. 16b/c on the E3.1 generator (N = 270, resilient quadratic
 * c = 100, gamma in {0, 0.003, 0.01, 0.03, 0.1, 0.3}, warm starts). Apart from the other
 * oracle rows (test_models_sfl_oracle.c) because it is the slowest. FK_SFL_ORACLE_VERBOSE=1
 * prints the measured values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/models/sfl/sfl.h"
#include "tests/support_say.h"

/* ---- T10: monotone trends in gamma (Fig. 16b/c) ---- */

static double spearman(const double *a, const double *b, int n)
{
    double ra[16], rb[16];
    for (int i = 0; i < n; i++) { /* ranks with ties averaged */
        double lt = 0, eq = 0, lt2 = 0, eq2 = 0;
        for (int k = 0; k < n; k++) {
            lt += a[k] < a[i];
            eq += a[k] == a[i];
            lt2 += b[k] < b[i];
            eq2 += b[k] == b[i];
        }
        ra[i] = lt + (eq + 1) / 2;
        rb[i] = lt2 + (eq2 + 1) / 2;
    }
    double ma = 0, mb = 0, sab = 0, saa = 0, sbb = 0;
    for (int i = 0; i < n; i++) {
        ma += ra[i] / n;
        mb += rb[i] / n;
    }
    for (int i = 0; i < n; i++) {
        sab += (ra[i] - ma) * (rb[i] - mb);
        saa += (ra[i] - ma) * (ra[i] - ma);
        sbb += (rb[i] - mb) * (rb[i] - mb);
    }
    return sab / sqrt(saa * sbb);
}

static void t10_gamma_trends(void **state)
{
    (void)state;
    /* Reduced from the spec's prototype: grid h = 1 with widths {1, 2, 3} (2352 atoms) instead
     * of h = 0.75 with 0.5..3 (8214 atoms), and 1 seed instead of 4 (each seed costs about 9
     * CPU-seconds; FK_SFL_ORACLE_FULL=1 runs the 4 seeds, which passed with min Spearman 1.0,
     * worst accuracy change 0.011 and smallest mean-count ratio 1.064). Coarser grids are not an
     * option: with h = 1.5, widths {1.5, 3} or h = 1, widths {1, 3} the atoms weigh 2 to 12
     * times more, so gamma = 0.03 already costs 3.6 to 7 accuracy points (measured). T = 4000
     * per phase as in the prototype (§11 item 3). */
    enum { G = 6, SMAX = 4, PER = 30, N = 9 * PER, NT = 1000 };
    const char *full = getenv("FK_SFL_ORACLE_FULL"); /* =1: the spec's 4 seeds */
    const int S = full && *full == '1' ? SMAX : 1;
    const double gammas[G] = {0, 0.003, 0.01, 0.03, 0.1, 0.3};
    double h = 1.0, wmin = 1.0;
    int Q = 3;
    long T = 4000;
    double lo[2] = {-18, -9}, hi[2] = {9, 18}, w[8];
    fk_sfl_widths(wmin, 3.0, Q, w);
    fk_sfl_atoms a;
    fk_err err = {0};
    assert_int_equal(fk_sfl_atoms_grid(&a, 2, lo, hi, h, w, Q, N, 0, &err), FK_OK);
    double *X = malloc(2 * N * sizeof *X), y[N], *lam = malloc(N * sizeof *lam), ft[NT];
    int idx[N];
    double sup[SMAX][G], crit[SMAX][G], acc[SMAX][G];
    fk_dataset test;
    assert_int_equal(fk_sfl_e31_make(9, -1, NT, 1000, &test, &err), FK_OK);
    for (int sd = 0; sd < S; sd++) {
        for (int k = 0; k < 9; k++) {
            fk_dataset d;
            assert_int_equal(fk_sfl_e31_make(9, k, PER, 100 + (uint64_t)sd, &d, &err), FK_OK);
            for (size_t i = 0; i < PER; i++) {
                memcpy(X + 2 * (k * PER + i), d.X.data + 2 * i, 2 * sizeof *X);
                y[k * PER + i] = d.y_raw[i] == 1 ? 1 : -1;
            }
            fk_dataset_close(&d);
        }
        fk_sfl_opts o;
        fk_sfl_opts_default(&o, FK_SFL_CLASSIFY);
        o.eps = 0.01;
        o.res = FK_SFL_QUAD;
        o.c = 100;
        o.n_ref = N;
        o.T = T;
        o.tau_act =
            INFINITY; /* critical = lambda > tau_crit max lambda (the job's rule, gamma > 0) */
        for (int g = 0; g < G; g++) {
            o.gamma = gammas[g];
            fk_sfl_fit f;
            assert_int_equal(fk_sfl_solve(X, y, N, 2, &a, &o, g ? lam : NULL, &f, &err), FK_OK);
            memcpy(lam, f.lambda, N * sizeof *lam); /* warm start of the next gamma */
            size_t nc = 0, notc = 0;
            fk_sfl_critical(&f, y, &o, idx, &nc, &notc);
            fk_sfl_model m;
            assert_int_equal(fk_sfl_model_support(&a, f.alpha, &m, &err), FK_OK);
            fk_sfl_predict(&m, test.X.data, NT, ft);
            double ok = 0;
            for (size_t i = 0; i < NT; i++)
                ok += (ft[i] >= 0) == (test.y_raw[i] == 1);
            sup[sd][g] = (double)f.support;
            crit[sd][g] = (double)nc;
            acc[sd][g] = ok / NT;
            SAY("T10 seed %d gamma %-5g: support %6zu critical %3zu accuracy %.3f (%s, %ld it)\n",
                sd, o.gamma, f.support, nc, ok / NT, fk_sfl_status_name(f.status), f.iters);
            fk_sfl_model_close(&m);
            fk_sfl_fit_close(&f);
        }
    }
    /* support strictly falling in every seed; Spearman(gamma, critical) >= 0.8 per seed;
     * accuracy at gamma <= 0.03 within 2 points of gamma = 0 per seed; mean critical count
     * non-decreasing with 5 % slack per step */
    int fails = 0;
    double minrho = 1, worst_acc = 0, worst_step = INFINITY;
    for (int sd = 0; sd < S; sd++) {
        for (int g = 1; g < G; g++)
            if (!(sup[sd][g] < sup[sd][g - 1])) {
                SAY("T10 seed %d: support %g -> %g at gamma %g\n", sd, sup[sd][g - 1], sup[sd][g],
                    gammas[g]);
                fails++;
            }
        double rho = spearman(gammas, crit[sd], G);
        minrho = fmin(minrho, rho);
        fails += !(rho >= 0.8);
        for (int g = 1; g < G && gammas[g] <= 0.03; g++) {
            worst_acc = fmax(worst_acc, fabs(acc[sd][g] - acc[sd][0]));
            fails += !(fabs(acc[sd][g] - acc[sd][0]) <= 0.02);
        }
    }
    for (int g = 1; g < G; g++) {
        double m0 = 0, m1 = 0;
        for (int sd = 0; sd < S; sd++) {
            m0 += crit[sd][g - 1] / S;
            m1 += crit[sd][g] / S;
        }
        worst_step = fmin(worst_step, m1 / m0);
        fails += !(m1 >= 0.95 * m0);
    }
    SAY("T10: min Spearman %.3f (bound 0.8); worst accuracy change at gamma <= 0.03 %.3f (bound "
        "0.02); smallest ratio of successive mean critical counts %.3f (bound 0.95)\n",
        minrho, worst_acc, worst_step);
    assert_int_equal(fails, 0);
    free(X);
    free(lam);
    fk_dataset_close(&test);
    fk_sfl_atoms_close(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t10_gamma_trends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
