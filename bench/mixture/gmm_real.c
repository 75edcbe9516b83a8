#include "bench/mixture/gmm_real.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/mixture/gmm_run.h"
#include "common/data/catalog.h"
#include "common/data/mat_cache.h"
#include "common/data/prep.h"
#include "common/la/hungarian.h"
#include "common/models/mixture/tsne.h"

enum { S_ASSIGN = 1, S_SPLIT, S_CONTAM_PICK, S_CONTAM_NOISE };

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void fk_gmm_real_close(fk_gmm_real *r)
{
    fk_dataset_close(&r->d);
    free(r->mean);
    free(r->sd);
    *r = (fk_gmm_real){0};
}

/* Concatenate two labelled datasets with the same columns. */
FK_CHECKRETURN static int concat(fk_dataset *out, const fk_dataset *a, const fk_dataset *b, fk_err *err)
{
    if (a->X.cols != b->X.cols)
        return fk_err_set(err, FK_EFORMAT, "train and test have different feature counts");
    size_t n = a->X.rows + b->X.rows, d = a->X.cols;
    if (fk_dataset_init(out, n, d, 1))
        return fk_err_set(err, FK_ENOMEM, "out of memory for %zu x %zu", n, d);
    memcpy(out->X.data, a->X.data, a->X.rows * d * sizeof(double));
    memcpy(out->X.data + a->X.rows * d, b->X.data, b->X.rows * d * sizeof(double));
    memcpy(out->y, a->y, a->X.rows * sizeof(int));
    memcpy(out->y + a->X.rows, b->y, b->X.rows * sizeof(int));
    out->n_classes = a->n_classes > b->n_classes ? a->n_classes : b->n_classes;
    return FK_OK;
}

/* Top-k principal component scores via the covariance (dsyrk + dsyevr). */
FK_CHECKRETURN static int pca_scores(fk_dataset *ds, int k, fk_err *err)
{
    size_t n = ds->X.rows, d = ds->X.cols;
    double *m = calloc(d, sizeof *m), *C = malloc(d * d * sizeof *C);
    double *ev = malloc(d * sizeof *ev), *V = malloc(d * (size_t)k * sizeof *V);
    int *sup = malloc(2 * (size_t)k * sizeof *sup);
    fk_mat Z = {0};
    int rc = (m && C && ev && V && sup) ? fk_mat_init(&Z, n, (size_t)k) : FK_ENOMEM;
    if (rc) {
        rc = fk_err_set(err, FK_ENOMEM, "PCA: out of memory");
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        cblas_daxpy((int)d, 1.0 / (double)n, fk_mat_row(&ds->X, i), 1, m, 1);
    for (size_t i = 0; i < n; i++)
        cblas_daxpy((int)d, -1.0, m, 1, fk_mat_row(&ds->X, i), 1);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)d, (int)n, 1.0 / (double)(n - 1),
                ds->X.data, (int)d, 0.0, C, (int)d);
    lapack_int found = 0;
    if (LAPACKE_dsyevr(LAPACK_ROW_MAJOR, 'V', 'I', 'U', (lapack_int)d, C, (lapack_int)d, 0, 0,
                       (lapack_int)(d - (size_t)k + 1), (lapack_int)d, 0.0, &found, ev, V, k,
                       sup) != 0 ||
        found != k) {
        rc = fk_err_set(err, FK_ENUMERIC, "PCA: eigen-decomposition failed");
        goto done;
    }
    /* eigenvalues ascend: reverse the columns so score 0 has the largest variance */
    double *Vr = C; /* reuse */
    for (size_t j = 0; j < d; j++)
        for (int c = 0; c < k; c++)
            Vr[j * (size_t)k + (size_t)c] = V[j * (size_t)k + (size_t)(k - 1 - c)];
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, k, (int)d, 1.0, ds->X.data,
                (int)d, Vr, k, 0.0, Z.data, k);
    fk_mat_close(&ds->X);
    ds->X = Z;
    Z = (fk_mat){0};
done:
    fk_mat_close(&Z);
    free(m);
    free(C);
    free(ev);
    free(V);
    free(sup);
    return rc;
}

/* Rtsne's normalize_input: centre the columns, divide by the largest |entry|. */
static void normalize_max(fk_mat *X)
{
    size_t n = X->rows, d = X->cols;
    double mx = 0.0;
    for (size_t j = 0; j < d; j++) {
        double m = 0.0;
        for (size_t i = 0; i < n; i++)
            m += fk_mat_get(X, i, j) / (double)n;
        for (size_t i = 0; i < n; i++) {
            double v = fk_mat_get(X, i, j) - m;
            fk_mat_set(X, i, j, v);
            mx = fabs(v) > mx ? fabs(v) : mx;
        }
    }
    for (size_t i = 0; mx > 0 && i < n * d; i++)
        X->data[i] /= mx;
}

/* Rtsne's defaults with the caller's seed, iteration count and threads. */
static void tsne_opts(fk_tsne_opts *o, const fk_gmm_real_opts *ro)
{
    fk_tsne_defaults(o);
    o->verbose = 1;
    if (!ro)
        return;
    if (ro->tsne_iters > 0)
        o->iters = ro->tsne_iters;
    o->threads = ro->tsne_threads;
    if (ro->tsne_seed)
        o->seed = ro->tsne_seed;
}

/* Rtsne preprocessing on a seeded random subsample of n rows: PCA-50 scores,
 * centred and divided by the largest absolute entry, then exact t-SNE to 10-d.
 * The subsample is fixed; ro's t-SNE seed and iteration count apply as in tsne_full. */
FK_CHECKRETURN static int tsne_subsample(fk_dataset *ds, size_t n, const fk_gmm_real_opts *ro, fk_err *err)
{
    if (n < 100 || n > ds->X.rows)
        return fk_err_set(err, FK_EINVAL, "t-SNE subsample must be in [100, %zu]", ds->X.rows);
    int rc = pca_scores(ds, 50, err);
    int *idx = malloc(ds->X.rows * sizeof *idx);
    if (!rc && !idx)
        rc = fk_err_set(err, FK_ENOMEM, "t-SNE: out of memory");
    fk_dataset sub;
    memset(&sub, 0, sizeof sub);
    if (!rc) {
        fk_rng g;
        fk_rng_init(&g, 1, 0x7473756200000000ULL);
        for (size_t i = 0; i < ds->X.rows; i++)
            idx[i] = (int)i;
        fk_rng_shuffle(&g, idx, ds->X.rows);
        if (fk_dataset_subset(&sub, ds, idx, n))
            rc = fk_err_set(err, FK_ENOMEM, "t-SNE: out of memory");
    }
    free(idx);
    if (rc)
        return rc;
    normalize_max(&sub.X);
    fk_tsne_opts o;
    tsne_opts(&o, ro);
    o.verbose = 0;
    o.theta = 0; /* exact dense t-SNE: the subsample is small */
    fk_mat Y;
    rc = fk_tsne(&sub.X, &o, &Y, err);
    if (rc) {
        fk_dataset_close(&sub);
        return rc;
    }
    fk_mat_close(&sub.X);
    sub.X = Y;
    fk_dataset_close(ds);
    *ds = sub;
    return FK_OK;
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

/* Rtsne preprocessing of all rows: PCA-50 scores, normalize_max, Barnes-Hut
 * t-SNE (theta 0.5) to 10-d; the embedding is cached on disk keyed by the
 * seed, n and every t-SNE parameter (it takes tens of minutes or more). */
FK_CHECKRETURN static int tsne_full(fk_dataset *ds, const fk_gmm_real_opts *ro, fk_err *err)
{
    fk_tsne_opts o;
    tsne_opts(&o, ro);
    size_t n = ds->X.rows;
    char key[FK_MAT_CACHE_KEY], dir[4000], path[4200];
    snprintf(key, sizeof key,
             "fedkern t-SNE v2 fashion-mnist pca50 normalize_max n=%zu dims=%d perp=%g iters=%d "
             "lr=%g exag=%g exag_iters=%d theta=%g seed=%llu",
             n, o.dims, o.perplexity, o.iters, o.lr, o.exag, o.exag_iters, o.theta,
             (unsigned long long)o.seed);
    fk_err cerr = {0};
    int have_dir = fk_mat_cache_dir(ro ? ro->cache_dir : NULL, dir, sizeof dir, &cerr) == FK_OK;
    if (have_dir)
        snprintf(path, sizeof path, "%s/fashion-mnist-tsne10-n%zu-seed%llu-it%d-%016llx.f64", dir,
                 n, (unsigned long long)o.seed, o.iters, (unsigned long long)fnv1a(key));
    fk_mat Y = {0};
    int rc = have_dir ? fk_mat_cache_read(path, key, n, (size_t)o.dims, &Y, err) : FK_ENOTFOUND;
    if (rc == FK_OK) {
        fprintf(stderr, "t-SNE: using the cached embedding %s\n", path);
    } else if (rc == FK_ENOTFOUND) {
        rc = pca_scores(ds, 50, err);
        if (!rc) {
            normalize_max(&ds->X);
            double t0 = now();
            rc = fk_tsne(&ds->X, &o, &Y, err);
            if (!rc)
                fprintf(stderr, "t-SNE: %zu x %d embedding in %.1f s\n", n, o.dims, now() - t0);
        }
        if (!rc && (!have_dir || fk_mat_cache_write(path, key, &Y, &cerr)))
            fprintf(stderr, "t-SNE: warning: the embedding is not cached (%s); continuing\n",
                    cerr.msg);
        else if (!rc)
            fprintf(stderr, "t-SNE: cached the embedding in %s\n", path);
    }
    if (rc)
        return rc;
    fk_mat_close(&ds->X);
    ds->X = Y;
    return FK_OK;
}

FK_CHECKRETURN static int moments(fk_gmm_real *r, fk_err *err)
{
    size_t n = r->d.X.rows, d = r->d.X.cols;
    r->mean = calloc(d, sizeof(double));
    r->sd = calloc(d, sizeof(double));
    if (!r->mean || !r->sd)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            r->mean[j] += fk_mat_get(&r->d.X, i, j) / (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++) {
            double v = fk_mat_get(&r->d.X, i, j) - r->mean[j];
            r->sd[j] += v * v / (double)n;
        }
    for (size_t j = 0; j < d; j++)
        r->sd[j] = sqrt(r->sd[j]);
    return FK_OK;
}

int fk_gmm_real_load(fk_gmm_real *r, const char *data_dir, const char *name, fk_err *err)
{
    return fk_gmm_real_load_opts(r, data_dir, name, NULL, err);
}

int fk_gmm_real_load_opts(fk_gmm_real *r, const char *data_dir, const char *name,
                          const fk_gmm_real_opts *ro, fk_err *err)
{
    *r = (fk_gmm_real){0};
    const char *base;
    int pca = 0, z = 0;
    size_t tsne_n = 0;
    int tsne_all = 0;
    if (!strcmp(name, "pendigits")) {
        base = "pendigits";
        z = 1;
        r->equal_split = 1;
    } else if (!strcmp(name, "fashion-mnist-pca10") || !strcmp(name, "fashion-mnist-pca10z")) {
        base = "fashion-mnist";
        pca = 1;
        z = name[strlen(name) - 1] == 'z';
    } else if (!strcmp(name, "fashion-mnist-tsne10") || !strcmp(name, "fashion-mnist-tsne10z")) {
        base = "fashion-mnist"; /* ...z: the spec's z-scored sensitivity variant */
        tsne_all = 1;
        z = name[strlen(name) - 1] == 'z';
    } else if (!strncmp(name, "fashion-mnist-tsne10-sub", 24) && atol(name + 24) > 0) {
        base = "fashion-mnist";
        tsne_n = (size_t)atol(name + 24);
    } else {
        return fk_err_set(err, FK_ENOTFOUND,
                          "unknown data '%s' (pendigits, fashion-mnist-pca10, fashion-mnist-pca10z, "
                          "fashion-mnist-tsne10, fashion-mnist-tsne10z, fashion-mnist-tsne10-subN)",
                          name);
    }
    char a[64], b[64];
    snprintf(a, sizeof a, "%s/train", base);
    snprintf(b, sizeof b, "%s/test", base);
    fk_dataset tr, te;
    memset(&tr, 0, sizeof tr);
    memset(&te, 0, sizeof te);
    int rc = fk_catalog_load(&tr, data_dir, a, err);
    if (!rc)
        rc = fk_catalog_load(&te, data_dir, b, err);
    if (!rc)
        rc = concat(&r->d, &tr, &te, err);
    fk_dataset_close(&tr);
    fk_dataset_close(&te);
    if (!rc && pca)
        rc = pca_scores(&r->d, 10, err);
    if (!rc && tsne_n)
        rc = tsne_subsample(&r->d, tsne_n, ro, err);
    if (!rc && tsne_all)
        rc = tsne_full(&r->d, ro, err);
    if (!rc && z && fk_prep_zscore_cols(&r->d.X))
        rc = fk_err_set(err, FK_ENOMEM, "z-score: out of memory");
    if (!rc)
        rc = moments(r, err);
    if (rc)
        fk_gmm_real_close(r);
    return rc;
}

static void stream(fk_rng *g, uint64_t seed, int purpose)
{
    fk_rng_init(g, seed, 0x7265616c00000000ULL | ((uint64_t)purpose << 16));
}

int fk_gmm_real_rep(const fk_gmm_real *r, int K, int n_contam, const char *method,
                    const fk_params *p, int rounds, uint64_t seed, fk_gmm_real_out *out,
                    fk_err *err)
{
    size_t n = r->d.X.rows, d = r->d.X.cols;
    if (K < 1 || (size_t)K > n || n_contam < 0 || n_contam >= K)
        return fk_err_set(err, FK_EINVAL, "need 1 <= K <= n and 0 <= contaminated < K");
    int *client = malloc(n * sizeof *client), *order = malloc(n * sizeof *order);
    int *count = calloc((size_t)K, sizeof *count), *start = calloc((size_t)K + 1, sizeof *start);
    int *cperm = malloc((size_t)K * sizeof *cperm), *lab = malloc(n * sizeof *lab);
    fk_dataset *train = calloc((size_t)K, sizeof *train), *test = calloc((size_t)K, sizeof *test);
    int rc = FK_OK;
    fk_gmm_result res = {0};
    if (!client || !order || !count || !start || !cperm || !lab || !train || !test) {
        rc = fk_err_set(err, FK_ENOMEM, "real-data replication: out of memory");
        goto done;
    }
    fk_rng g;
    stream(&g, seed, S_ASSIGN);
    for (size_t i = 0; i < n; i++)
        order[i] = (int)i;
    if (r->equal_split) { /* shuffle and deal equal shares */
        fk_rng_shuffle(&g, order, n);
        for (size_t i = 0; i < n; i++)
            client[order[i]] = (int)(i % (size_t)K);
    } else {
        for (size_t i = 0; i < n; i++)
            client[i] = (int)fk_rng_below(&g, (uint64_t)K);
    }
    for (size_t i = 0; i < n; i++)
        count[client[i]]++;
    for (int k = 0; k < K; k++)
        start[k + 1] = start[k] + count[k];
    memset(count, 0, (size_t)K * sizeof *count);
    for (size_t i = 0; i < n; i++) /* group sample indices by client, ascending */
        order[start[client[i]] + count[client[i]]++] = (int)i;
    /* contaminated clients: a random subset, renumbered last */
    stream(&g, seed, S_CONTAM_PICK);
    for (int k = 0; k < K; k++)
        cperm[k] = k;
    fk_rng_shuffle(&g, cperm, (size_t)K);
    fk_rng split, noise;
    stream(&split, seed, S_SPLIT);
    stream(&noise, seed, S_CONTAM_NOISE);
    for (int j = 0; j < K && rc == FK_OK; j++) {
        /* slot j: good clients first (cperm[n_contam..]), contaminated last */
        int src = j < K - n_contam ? cperm[n_contam + j] : cperm[j - (K - n_contam)];
        int nk = start[src + 1] - start[src], *idx = order + start[src];
        if (nk < 2) {
            rc = fk_err_set(err, FK_EINVAL, "client %d has %d samples; use fewer clients", src, nk);
            break;
        }
        fk_rng_shuffle(&split, idx, (size_t)nk);
        int ntr = (int)lround(0.8 * nk);
        rc = fk_dataset_subset(&train[j], &r->d, idx, (size_t)ntr);
        if (!rc)
            rc = fk_dataset_subset(&test[j], &r->d, idx + ntr, (size_t)(nk - ntr));
        if (rc) {
            rc = fk_err_set(err, FK_ENOMEM, "out of memory for client %d", j);
            break;
        }
        snprintf(train[j].name, sizeof train[j].name, "client%d", j);
        if (j >= K - n_contam) /* m + s (2.5 + 2 xi), train and test */
            for (int t = 0; t < 2; t++) {
                fk_dataset *ds = t ? &test[j] : &train[j];
                for (size_t i = 0; i < ds->X.rows; i++)
                    for (size_t c = 0; c < d; c++)
                        fk_mat_set(&ds->X, i, c,
                                   r->mean[c] + r->sd[c] * (2.5 + 2.0 * fk_rng_normal(&noise)));
            }
    }
    double t0 = now();
    if (!rc)
        rc = fk_gmm_run(method, p, train, K, rounds, seed, NULL, NULL, &res, err);
    out->seconds = now() - t0;
    double sum = 0.0;
    for (int k = 0; rc == FK_OK && k < K - n_contam; k++) {
        double rate = 0.0;
        rc = fk_gmm_result_labels(&res, k, test[k].X.data, test[k].X.rows, lab, err);
        if (!rc)
            rc = fk_misclustering_rate(test[k].y, lab, test[k].X.rows, r->d.n_classes, res.R,
                                       &rate, err);
        sum += rate;
    }
    out->error = sum / (K - n_contam);
done:
    fk_gmm_result_close(&res);
    for (int k = 0; train && test && k < K; k++) {
        fk_dataset_close(&train[k]);
        fk_dataset_close(&test[k]);
    }
    free(client);
    free(order);
    free(count);
    free(start);
    free(cperm);
    free(lab);
    free(train);
    free(test);
    return rc;
}
