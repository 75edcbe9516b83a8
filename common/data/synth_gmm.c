#include "common/data/synth_gmm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"

/* Spec 4.2 table (reference signs). */
static const double PAPER_CENTRES[5][10] = {
    {1, 0, 3, -1, 1, -1, 0, 1, 1, -1},   {0, 1, -1, -3, 2, -1, 2, -1, 1, -1},
    {-3, -1, 2, -1, 2, -1, 1, -3, -1, -2}, {1, -2, 0, -1, -2, 2, 1, 3, 1, -1},
    {3, 1, 2, -1, -2, 1, 2, -1, -1, 2},
};

/* Independent stream per (purpose, task). */
enum { S_CENTRES = 1, S_DIR, S_WEIGHTS, S_DATA, S_OUTLIER };

static void stream(fk_rng *r, uint64_t seed, int purpose, int k)
{
    fk_rng_init(r, seed, ((uint64_t)purpose << 32) | (uint32_t)k);
}

void fk_synth_gmm_defaults(fk_synth_gmm *o)
{
    *o = (fk_synth_gmm){.K = 10, .R = 5, .p = 10, .n = 150, .n_outlier = 1, .h = 0.0,
                        .dir_alpha = 5.0, .out_mean = 2.5, .out_var = 4.0};
}

int fk_synth_gmm_centres(const fk_synth_gmm *o, uint64_t seed, double *centres, fk_err *err)
{
    if (o->R < 1 || o->p < 1)
        return fk_err_set(err, FK_EINVAL, "synth_gmm: R and p must be positive");
    if (o->R == 5 && o->p == 10) {
        memcpy(centres, PAPER_CENTRES, sizeof PAPER_CENTRES);
        return FK_OK;
    }
    fk_rng r;
    stream(&r, seed, S_CENTRES, 0);
    for (int i = 0; i < o->R * o->p; i++)
        centres[i] = 3.0 * fk_rng_normal(&r);
    return FK_OK;
}

int fk_synth_gmm_make(const fk_synth_gmm *o, uint64_t seed, fk_dataset *tasks, double *theta,
                      double *w, fk_err *err)
{
    if (o->K < 1 || o->n < 1 || o->n_outlier < 0 || o->n_outlier >= o->K || o->h < 0 ||
        o->dir_alpha <= 0 || o->out_var < 0)
        return fk_err_set(err, FK_EINVAL,
                          "synth_gmm: need K >= 1, n >= 1, 0 <= outliers < K, h >= 0, alpha > 0");
    int R = o->R, p = o->p;
    double *c = malloc((size_t)R * p * sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "synth_gmm: out of memory");
    int rc = fk_synth_gmm_centres(o, seed, c, err);
    for (int k = 0; k < o->K && rc == FK_OK; k++) {
        int good = k < o->K - o->n_outlier;
        double *th = theta + (size_t)k * R * p, *wk = w + (size_t)k * R;
        fk_rng r;
        stream(&r, seed, S_DIR, k);
        for (int q = 0; q < R; q++) {
            double z[p], s = 0.0;
            for (int j = 0; j < p; j++) {
                z[j] = fk_rng_normal(&r);
                s += z[j] * z[j];
            }
            s = sqrt(s);
            for (int j = 0; j < p; j++)
                th[q * p + j] = c[q * p + j] + (s > 0 ? o->h * z[j] / s : 0.0);
        }
        stream(&r, seed, S_WEIGHTS, k);
        double tot = 0.0;
        for (int q = 0; q < R; q++)
            tot += wk[q] = fk_rng_gamma(&r, o->dir_alpha);
        for (int q = 0; q < R; q++)
            wk[q] /= tot;
        rc = fk_dataset_init(&tasks[k], (size_t)o->n, (size_t)p, 1);
        if (rc) {
            rc = fk_err_set(err, rc, "synth_gmm: out of memory for task %d", k);
            break;
        }
        tasks[k].n_classes = R;
        snprintf(tasks[k].name, sizeof tasks[k].name, "%s%d", good ? "task" : "outlier", k);
        stream(&r, seed, good ? S_DATA : S_OUTLIER, k);
        for (int i = 0; i < o->n; i++) {
            double *x = fk_mat_row(&tasks[k].X, (size_t)i);
            int z = 0;
            if (good) {
                double u = fk_rng_uniform(&r), acc = 0.0;
                for (z = 0; z < R - 1; z++) {
                    acc += wk[z];
                    if (u < acc)
                        break;
                }
            }
            tasks[k].y[i] = z;
            for (int j = 0; j < p; j++)
                x[j] = good ? th[z * p + j] + fk_rng_normal(&r)
                            : o->out_mean + sqrt(o->out_var) * fk_rng_normal(&r);
        }
        if (!good)
            for (int q = 0; q < R * p; q++)
                th[q] = NAN;
        if (!good)
            for (int q = 0; q < R; q++)
                wk[q] = NAN;
    }
    free(c);
    return rc;
}
