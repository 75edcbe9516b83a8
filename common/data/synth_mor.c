#include "common/data/synth_mor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/synth_gmm.h"
#include "common/la/rng.h"

static const uint64_t X_STREAM = 0x6d6f727800000000ULL; /* x and noise of task k */

void fk_synth_mor_defaults(fk_synth_mor *o)
{
    *o = (fk_synth_mor){.K = 10, .R = 5, .p = 10, .n = 200, .n_outlier = 1, .h = 0.0,
                        .out_coef = -3.0};
}

void fk_mor_data_close(fk_mor_data *d)
{
    free(d->X);
    free(d->y);
    free(d->theta);
    free(d->w);
    *d = (fk_mor_data){0};
}

/* Task k's x and y from its latent labels z and its truth th (R x p), from its own stream. */
static void task_rows(uint64_t seed, int k, int good, int n, int p, const int *z, const double *th,
                      double out_coef, double *X, double *y)
{
    fk_rng g;
    fk_rng_init(&g, seed, X_STREAM + (uint64_t)k);
    for (int i = 0; i < n; i++) {
        double *x = X + (size_t)i * p, mean = 0.0;
        for (int j = 0; j < p; j++)
            x[j] = fk_rng_normal(&g);
        const double *t = good ? th + (size_t)z[i] * p : NULL;
        for (int j = 0; j < p; j++)
            mean += x[j] * (good ? t[j] : out_coef);
        y[i] = mean + fk_rng_normal(&g);
    }
}

int fk_mor_make(int K, int R, int p, int n, int n_outlier, double h, double out_coef,
                uint64_t seed, fk_mor_data *d, fk_err *err)
{
    *d = (fk_mor_data){.K = K, .R = R, .p = p, .n = n, .n_outlier = n_outlier};
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.K = K;
    o.R = R;
    o.p = p;
    o.n = n;
    o.n_outlier = n_outlier;
    o.h = h;
    fk_dataset *ts = calloc((size_t)K, sizeof *ts);
    d->X = malloc((size_t)K * n * p * sizeof(double));
    d->y = malloc((size_t)K * n * sizeof(double));
    d->theta = malloc((size_t)K * R * p * sizeof(double));
    d->w = malloc((size_t)K * R * sizeof(double));
    if (!ts || !d->X || !d->y || !d->theta || !d->w) {
        free(ts);
        fk_mor_data_close(d);
        return fk_err_set(err, FK_ENOMEM, "mor: out of memory for K=%d n=%d p=%d", K, n, p);
    }
    /* the GMM design supplies the centres, perturbations, weights and latent labels */
    int rc = fk_synth_gmm_make(&o, seed, ts, d->theta, d->w, err);
    for (int k = 0; rc == FK_OK && k < K; k++)
        task_rows(seed, k, k < K - n_outlier, n, p, ts[k].y, d->theta + (size_t)k * R * p, out_coef,
                  d->X + (size_t)k * n * p, d->y + (size_t)k * n);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&ts[k]);
    free(ts);
    if (rc)
        fk_mor_data_close(d);
    return rc;
}

int fk_mor_task_dataset(const fk_mor_data *d, int k, fk_dataset *ds, fk_err *err)
{
    if (k < 0 || k >= d->K)
        return fk_err_set(err, FK_EINVAL, "mor: task %d out of range (K=%d)", k, d->K);
    if (fk_dataset_init(ds, (size_t)d->n, (size_t)d->p, 0))
        return fk_err_set(err, FK_ENOMEM, "mor: out of memory for task %d", k);
    memcpy(ds->X.data, d->X + (size_t)k * d->n * d->p, (size_t)d->n * d->p * sizeof(double));
    char name[32];
    snprintf(name, sizeof name, "mor-task%d", k);
    fk_dataset_set_name(ds, name);
    int rc = fk_dataset_set_target(ds, d->y + (size_t)k * d->n, err);
    if (rc)
        fk_dataset_close(ds);
    return rc;
}

int fk_mor_task_make(int K, int R, int p, int n, int n_outlier, double h, double out_coef,
                     uint64_t seed, int k, fk_dataset *ds, fk_err *err)
{
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.K = K;
    o.R = R;
    o.p = p;
    o.n = n;
    o.n_outlier = n_outlier;
    o.h = h;
    fk_dataset lab = {0};
    fk_mor_data d = {.K = 1, .R = R, .p = p, .n = n};
    d.X = malloc((size_t)n * p * sizeof(double));
    d.y = malloc((size_t)n * sizeof(double));
    d.theta = malloc((size_t)R * p * sizeof(double));
    d.w = malloc((size_t)R * sizeof(double));
    int rc =
        d.X && d.y && d.theta && d.w
            ? fk_synth_gmm_task(&o, seed, k, &lab, d.theta, d.w, err)
            : fk_err_set(err, FK_ENOMEM, "mor: out of memory for task %d (n=%d p=%d)", k, n, p);
    if (!rc) {
        task_rows(seed, k, k < K - n_outlier, n, p, lab.y, d.theta, out_coef, d.X, d.y);
        rc = fk_mor_task_dataset(&d, 0, ds, err);
    }
    if (!rc) { /* task k's name, not the one-task set's */
        char name[32];
        snprintf(name, sizeof name, "mor-task%d", k);
        fk_dataset_set_name(ds, name);
    }
    fk_dataset_close(&lab);
    fk_mor_data_close(&d);
    return rc;
}
