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

FK_CHECKRETURN static int check_opts(const fk_synth_gmm *o, fk_err *err)
{
    if (o->K < 1 || o->n < 1 || o->n_outlier < 0 || o->n_outlier >= o->K || o->h < 0 ||
        o->dir_alpha <= 0 || o->out_var < 0)
        return fk_err_set(err, FK_EINVAL,
                          "synth_gmm: need K >= 1, n >= 1, 0 <= outliers < K, h >= 0, alpha > 0");
    return FK_OK;
}

/* Task k from the common centres c: its truth (th: R x p, wk: R) and, if task is not NULL,
 * its data. Every draw comes from the task's own streams (per purpose), so a task made alone
 * is bit for bit the task made among all K. */
FK_CHECKRETURN static int make_task(const fk_synth_gmm *o, uint64_t seed, const double *c, int k,
                                    fk_dataset *task, double *th, double *wk, fk_err *err)
{
    int R = o->R, p = o->p;
    int good = k < o->K - o->n_outlier;
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
    if (task) {
        if (fk_dataset_init(task, (size_t)o->n, (size_t)p, 1))
            return fk_err_set(err, FK_ENOMEM, "synth_gmm: out of memory for task %d", k);
        task->n_classes = R;
        stream(&r, seed, good ? S_DATA : S_OUTLIER, k);
        for (int i = 0; i < o->n; i++) {
            double *x = fk_mat_row(&task->X, (size_t)i);
            int z = 0;
            if (good) {
                double u = fk_rng_uniform(&r), acc = 0.0;
                for (z = 0; z < R - 1; z++) {
                    acc += wk[z];
                    if (u < acc)
                        break;
                }
            }
            task->y[i] = z;
            for (int j = 0; j < p; j++)
                x[j] = good ? th[z * p + j] + fk_rng_normal(&r)
                            : o->out_mean + sqrt(o->out_var) * fk_rng_normal(&r);
        }
    }
    if (!good)
        for (int q = 0; q < R * p; q++)
            th[q] = NAN;
    if (!good)
        for (int q = 0; q < R; q++)
            wk[q] = NAN;
    return FK_OK;
}

void fk_synth_gmm_task_name(const fk_synth_gmm *o, int k, char *name, size_t cap)
{
    snprintf(name, cap, "%s%d", k < o->K - o->n_outlier ? "task" : "outlier", k);
}

int fk_synth_gmm_make(const fk_synth_gmm *o, uint64_t seed, fk_dataset *tasks, double *theta,
                      double *w, fk_err *err)
{
    return fk_synth_gmm_make_some(o, seed, tasks, theta, w, NULL, err);
}

int fk_synth_gmm_make_some(const fk_synth_gmm *o, uint64_t seed, fk_dataset *tasks, double *theta,
                           double *w, const unsigned char *want, fk_err *err)
{
    int rc = check_opts(o, err);
    if (rc)
        return rc;
    int R = o->R, p = o->p;
    double *c = malloc((size_t)R * p * sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "synth_gmm: out of memory");
    rc = fk_synth_gmm_centres(o, seed, c, err);
    for (int k = 0; k < o->K && rc == FK_OK; k++) {
        int data = !want || want[k];
        rc = make_task(o, seed, c, k, data ? &tasks[k] : NULL, theta + (size_t)k * R * p,
                       w + (size_t)k * R, err);
        if (!rc)
            fk_synth_gmm_task_name(o, k, tasks[k].name, sizeof tasks[k].name);
    }
    free(c);
    return rc;
}

int fk_synth_gmm_task(const fk_synth_gmm *o, uint64_t seed, int k, fk_dataset *task,
                      double *theta_k, double *w_k, fk_err *err)
{
    int rc = check_opts(o, err);
    if (!rc && (k < 0 || k >= o->K))
        rc = fk_err_set(err, FK_EINVAL, "synth_gmm: task %d of %d", k, o->K);
    if (rc)
        return rc;
    double *c = malloc((size_t)o->R * o->p * sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "synth_gmm: out of memory");
    rc = fk_synth_gmm_centres(o, seed, c, err);
    if (!rc)
        rc = make_task(o, seed, c, k, task, theta_k, w_k, err);
    if (!rc && task)
        fk_synth_gmm_task_name(o, k, task->name, sizeof task->name);
    free(c);
    return rc;
}
