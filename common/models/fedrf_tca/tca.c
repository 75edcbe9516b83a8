#include "common/models/fedrf_tca/tca.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/la/eig.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double fk_tca_gamma_normalized(double lambda_n, size_t n_s, size_t n_t)
{
    return lambda_n * (double)(n_s + n_t) / ((double)n_s * (double)n_t);
}

void fk_rows_l2_normalize(fk_mat *X)
{
    for (size_t i = 0; i < X->rows; i++) {
        double *r = fk_mat_row(X, i);
        double s = cblas_dnrm2((int)X->cols, r, 1);
        if (s > 0)
            cblas_dscal((int)X->cols, 1.0 / s, r, 1);
    }
}

/* What Y = gamma^-1/2 (Phi_c - c (Phi_c v) v^T) is made of, Phi_c column-centred:
 * Y_ij = g (Phi_ij - mu_j) - g c w_i v_j with g = gamma^-1/2 and w = Phi_c v. */
typedef struct yparts {
    const fk_mat *Phi;
    double *v;  /* D: Phi^T l (owned by the caller) */
    double *mu; /* D: column means */
    double *w;  /* n: Phi_c v */
    double g, c;
} yparts;

static void yparts_free(yparts *y)
{
    free(y->mu);
    free(y->w);
    y->mu = y->w = NULL;
}

/* v = Phi^T l, mu, w and c from Phi (read twice: v and mu together, then Phi v). */
FK_CHECKRETURN static int yparts_init(yparts *y, const fk_mat *Phi, size_t n_s, double gamma,
                                      double *v, fk_err *err)
{
    size_t n = Phi->rows, D = Phi->cols, n_t = n - n_s;
    *y = (yparts){.Phi = Phi, .v = v, .g = 1.0 / sqrt(gamma)};
    double *l = malloc(2 * n * sizeof *l), *vm = malloc(2 * D * sizeof *vm);
    y->mu = malloc(D * sizeof *y->mu);
    y->w = malloc(n * sizeof *y->w);
    if (!l || !vm || !y->mu || !y->w) {
        free(l);
        free(vm);
        yparts_free(y);
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory for %zux%zu features", n, D);
    }
    for (size_t i = 0; i < n; i++) {
        l[2 * i] = i < n_s ? 1.0 / (double)n_s : -1.0 / (double)n_t;
        l[2 * i + 1] = 1.0 / (double)n;
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, 2, (int)n, 1.0, Phi->data,
                (int)Phi->ld, l, 2, 0.0, vm, 2);
    for (size_t j = 0; j < D; j++) {
        v[j] = vm[2 * j];
        y->mu[j] = vm[2 * j + 1];
    }
    double a = cblas_ddot((int)D, v, 1, v, 1), muv = cblas_ddot((int)D, y->mu, 1, v, 1);
    y->c = a > 0 ? (1.0 - sqrt(gamma / (gamma + a))) / a : 0.0;
    /* Phi_c v = Phi v - (mu . v) 1 */
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)D, 1.0, Phi->data, (int)Phi->ld, v, 1,
                0.0, y->w, 1);
    for (size_t i = 0; i < n; i++)
        y->w[i] -= muv;
    free(l);
    free(vm);
    return FK_OK;
}

/* Y (initialised here, n x D) written in one pass over Phi. */
FK_CHECKRETURN static int build_y(const yparts *y, fk_mat *Y, fk_err *err)
{
    const fk_mat *Phi = y->Phi;
    size_t n = Phi->rows, D = Phi->cols;
    if (fk_mat_init_uninit(Y, n, D)) /* written in full below */
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory for %zux%zu features", n, D);
    for (size_t i = 0; i < n; i++) {
        const double *p = fk_mat_row(Phi, i);
        double *r = fk_mat_row(Y, i), cw = y->c * y->g * y->w[i];
        for (size_t j = 0; j < D; j++)
            r[j] = y->g * (p[j] - y->mu[j]) - cw * y->v[j];
    }
    return FK_OK;
}

/* x -> Y^T (Y x) for the Krylov solver, on a block of vectors as rows: in float32 on a float
 * copy of Y (first phase), or in double on Phi itself with the centring and the rank-one
 * term applied to the skinny products (second phase), so Y is never formed in double. */
typedef struct gram_op {
    const yparts *y;
    const float *yf;      /* n x D, Y rounded to float (float phase) */
    double *yt;           /* b x n: the block times Y^T */
    float *xf, *ytf, *of; /* float phase: the block, Y x and the result (b x D, b x n, b x D) */
    double *ab;           /* 2b: the block's dot products with mu and v, then with 1 and w */
    size_t cols;          /* vectors the operator was applied to, in double / in float */
    size_t cols_f;
    double seconds; /* wall time inside the operator */
} gram_op;

static void apply_gram(void *ctx, const double *X, size_t ldx, double *out, size_t ldo, size_t b)
{
    gram_op *o = ctx;
    const yparts *y = o->y;
    const fk_mat *Phi = y->Phi;
    size_t n = Phi->rows, D = Phi->cols;
    o->cols += b;
    double t0 = now(), g = y->g, c = y->c;
    double *a = o->ab, *bv = o->ab + b;
    /* Y x = g (Phi x - (mu . x) 1 - c (v . x) w) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)n, (int)D, 1.0, X, (int)ldx,
                Phi->data, (int)Phi->ld, 0.0, o->yt, (int)n);
    for (size_t k = 0; k < b; k++) {
        a[k] = cblas_ddot((int)D, X + k * ldx, 1, y->mu, 1);
        bv[k] = c * cblas_ddot((int)D, X + k * ldx, 1, y->v, 1);
    }
    for (size_t k = 0; k < b; k++) {
        double *z = o->yt + k * n;
        for (size_t i = 0; i < n; i++)
            z[i] = g * (z[i] - a[k] - bv[k] * y->w[i]);
    }
    /* Y^T z = g (Phi^T z - (1 . z) mu - c (w . z) v) */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, (int)D, (int)n, 1.0, o->yt,
                (int)n, Phi->data, (int)Phi->ld, 0.0, out, (int)ldo);
    for (size_t k = 0; k < b; k++) {
        const double *z = o->yt + k * n;
        double s = 0, t = 0;
        for (size_t i = 0; i < n; i++) {
            s += z[i];
            t += z[i] * y->w[i];
        }
        double *r = out + k * ldo;
        for (size_t j = 0; j < D; j++)
            r[j] = g * (r[j] - s * y->mu[j] - c * t * y->v[j]);
    }
    o->seconds += now() - t0;
}

static void apply_gram_f(void *ctx, const double *X, size_t ldx, double *out, size_t ldo, size_t b)
{
    gram_op *o = ctx;
    size_t n = o->y->Phi->rows, D = o->y->Phi->cols;
    o->cols_f += b;
    double t0 = now();
    for (size_t k = 0; k < b; k++)
        for (size_t j = 0; j < D; j++)
            o->xf[k * D + j] = (float)X[k * ldx + j];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)n, (int)D, 1.0f, o->xf,
                (int)D, o->yf, (int)D, 0.0f, o->ytf, (int)n);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, (int)D, (int)n, 1.0f, o->ytf,
                (int)n, o->yf, (int)D, 0.0f, o->of, (int)D);
    for (size_t k = 0; k < b; k++)
        for (size_t j = 0; j < D; j++)
            out[k * ldo + j] = (double)o->of[k * D + j];
    o->seconds += now() - t0;
}

static size_t round8(size_t x)
{
    return (x + 7) / 8 * 8;
}

/* Large problems with few components: block Krylov on Y^T Y without forming it, in two
 * phases. A float32 phase (sgemm runs the skinny products 2.2x faster than dgemm) goes as far
 * as float allows (residual 1e-6 theta_1 or its floor); its top Ritz vectors start a double
 * phase on the exact operator, which alone decides convergence (residual <= 1e-8 theta_1),
 * so the answer is double precision whatever the first phase reached. 1 if it converged into
 * U and theta, 0 to take the dense route. */
static int krylov_route(const yparts *y, size_t m, fk_mat *U, double *theta, fk_tca_times *tm)
{
    const fk_mat *Phi = y->Phi;
    size_t n = Phi->rows, D = Phi->cols, k = n < D ? n : D;
    if (k < 600 || 12 * m > k)
        return 0;
    double t0 = now();
    /* blocks: m + 4 vectors in the float phase, m rounded up to a multiple of 8 (OpenBLAS's
     * kernels are 4 x 8; 20 ran 30 % slower per vector than 24) in the double phase, started
     * from as many Ritz vectors */
    size_t b1 = round8(m + 4), b2 = round8(m);
    if (b1 > D / 2)
        b1 = b2 = m;
    fk_mat F = {0}, U1 = {0};
    gram_op g = {.y = y};
    g.yt = malloc(b2 * n * sizeof *g.yt);
    g.ab = malloc(2 * (b1 > b2 ? b1 : b2) * sizeof *g.ab);
    g.xf = malloc(b1 * D * sizeof *g.xf);
    g.ytf = malloc(b1 * n * sizeof *g.ytf);
    g.of = malloc(b1 * D * sizeof *g.of);
    /* float copy of Y, written in one pass over Phi (fk_mat gives huge pages; n x D floats
     * fill half of an n x D/2 double matrix) */
    int ok = g.yt && g.ab, low = ok && g.xf && g.ytf && g.of;
    double *th1 = malloc(b2 * sizeof *th1);
    fk_err e = {0};
    if (low && th1 && !fk_mat_init_uninit(&F, n, (D + 1) / 2)) {
        float *yf = (float *)F.data;
        for (size_t i = 0; i < n; i++) {
            const double *p = fk_mat_row(Phi, i);
            double cw = y->c * y->g * y->w[i];
            for (size_t j = 0; j < D; j++)
                yf[i * D + j] = (float)(y->g * (p[j] - y->mu[j]) - cw * y->v[j]);
        }
        g.yf = yf;
        fk_eig_op_opts o1 = {.block = b1,
                             .max_basis = 24 * (m + 8),
                             .tol = 1e-6,
                             .seed = 1,
                             .keep = b2,
                             .partial = 1,
                             .one_pass = 1};
        /* float trouble (an overflow, no memory) only costs the head start: the double phase
         * then begins from random vectors */
        if (fk_eig_op_top_ex(D, apply_gram_f, &g, m, &o1, th1, &U1, &e) != FK_OK)
            fk_mat_close(&U1);
    }
    fk_mat_close(&F);
    free(g.xf);
    free(g.ytf);
    free(g.of);
    free(th1);
    if (ok) {
        fk_eig_op_opts o2 = {.block = b2,
                             .max_basis = 24 * (m + 8),
                             .tol = 1e-8,
                             .seed = 2,
                             .start = U1.data ? &U1 : NULL};
        ok = fk_eig_op_top_ex(D, apply_gram, &g, m, &o2, theta, U, &e) == FK_OK;
    }
    fk_mat_close(&U1);
    free(g.yt);
    free(g.ab);
    if (tm) {
        tm->krylov = now() - t0;
        tm->krylov_ok = ok;
        tm->krylov_op = g.seconds;
        tm->krylov_flops = 4.0 * (double)n * (double)D * (double)(g.cols + g.cols_f);
        tm->krylov_cols_f = g.cols_f;
    }
    return ok;
}

/* Dense route: U (D x m), the top-m right singular vectors of Y (n x D) by the smaller Gram
 * matrix and dsyevr, theta = sigma^2. */
FK_CHECKRETURN static int dense_top(const fk_mat *Y, size_t m, fk_mat *U, double *theta,
                                    fk_tca_times *tm, fk_err *err)
{
    double t0 = now();
    size_t n = Y->rows, D = Y->cols;
    size_t k = n < D ? n : D;
    fk_mat G, Q;
    if (fk_mat_init(&G, k, k))
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory for the %zux%zu Gram matrix", k, k);
    if (D <= n)
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)D, (int)n, 1.0, Y->data, (int)Y->ld,
                    0.0, G.data, (int)G.ld);
    else
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)n, (int)D, 1.0, Y->data,
                    (int)Y->ld, 0.0, G.data, (int)G.ld);
    for (size_t i = 0; i < k; i++)
        for (size_t j = 0; j < i; j++)
            G.data[i * G.ld + j] = G.data[j * G.ld + i];
    double t1 = now();
    int rc = fk_eig_sym_top(&G, m, theta, &Q, err);
    fk_mat_close(&G);
    if (tm) {
        tm->gram = t1 - t0;
        tm->eig = now() - t1;
        tm->gram_dim = k;
        tm->other_dim = D <= n ? n : D;
    }
    if (rc)
        return rc;
    double tol = 1e-10 * (theta[0] > 0 ? theta[0] : 1.0);
    if (!(theta[m - 1] > tol)) {
        fk_mat_close(&Q);
        return fk_err_set(err, FK_ENUMERIC,
                          "TCA: only components below %zu carry variance (eigenvalue %zu is %g); "
                          "lower m", m, m, theta[m - 1]);
    }
    if (D <= n) {
        *U = Q;
        return FK_OK;
    }
    /* U = Y^T Q diag(theta)^-1/2 maps left singular vectors to right ones. */
    if (fk_mat_init(U, D, m)) {
        fk_mat_close(&Q);
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory");
    }
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)D, (int)m, (int)n, 1.0, Y->data,
                (int)Y->ld, Q.data, (int)Q.ld, 0.0, U->data, (int)U->ld);
    for (size_t j = 0; j < m; j++)
        cblas_dscal((int)D, 1.0 / sqrt(theta[j]), U->data + j, (int)U->ld);
    fk_mat_close(&Q);
    return FK_OK;
}

/* U (D x m): top-m right singular vectors of Y (n x D) and theta = sigma^2. */
FK_CHECKRETURN static int top_right_vectors(const yparts *yp, size_t m, fk_mat *U, double *theta,
                                            fk_tca_times *tm, fk_err *err)
{
    if (krylov_route(yp, m, U, theta, tm)) {
        double tol = 1e-10 * (theta[0] > 0 ? theta[0] : 1.0);
        if (theta[m - 1] > tol)
            return FK_OK;
        fk_mat_close(U); /* rank check below decides with the dense solver */
    }
    fk_mat Y;
    int rc = build_y(yp, &Y, err);
    if (rc)
        return rc;
    rc = dense_top(&Y, m, U, theta, tm, err);
    fk_mat_close(&Y);
    return rc;
}

static void normalize_columns(fk_mat *W, const double *theta, fk_tca_norm norm)
{
    for (size_t j = 0; j < W->cols; j++) {
        double s = 1.0;
        if (norm == FK_TCA_NORM_A)
            s = 1.0 / sqrt(theta[j]);
        else if (norm == FK_TCA_NORM_E)
            s = 1.0 / cblas_dnrm2((int)W->rows, W->data + j, (int)W->ld);
        if (s != 1.0)
            cblas_dscal((int)W->rows, s, W->data + j, (int)W->ld);
    }
}

/* W (initialised here, D x m) = P U = gamma^-1/2 (U - c v (v^T U)), U the top-m eigenvectors of
 * P A P taken back through P (§1.5), columns normalised by norm, signs fixed. */
FK_CHECKRETURN static int back_transform(const fk_mat *U, size_t m, const double *v, double c,
                                         double gamma, const double *theta, fk_tca_norm norm,
                                         fk_mat *W, fk_err *err)
{
    size_t D = U->rows;
    double *vu = malloc(m * sizeof *vu);
    if (!vu || fk_mat_init(W, D, m)) {
        free(vu);
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory");
    }
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)D, (int)m, 1.0, U->data, (int)U->ld, v, 1, 0.0,
                vu, 1);
    double g = 1.0 / sqrt(gamma);
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < m; j++)
            W->data[i * W->ld + j] = g * (U->data[i * U->ld + j] - c * v[i] * vu[j]);
    normalize_columns(W, theta, norm);
    fk_eig_fix_signs(W);
    free(vu);
    return FK_OK;
}

int fk_tca_solve(const fk_mat *Phi, size_t n_s, double gamma, size_t m, fk_tca_norm norm,
                 fk_mat *W, double *theta, fk_err *err)
{
    return fk_tca_solve_timed(Phi, n_s, gamma, m, norm, W, theta, NULL, err);
}

int fk_tca_solve_timed(const fk_mat *Phi, size_t n_s, double gamma, size_t m, fk_tca_norm norm,
                       fk_mat *W, double *theta, fk_tca_times *tm, fk_err *err)
{
    if (tm)
        *tm = (fk_tca_times){0};
    *W = (fk_mat){0};
    size_t n = Phi->rows, D = Phi->cols;
    if (n_s == 0 || n_s >= n)
        return fk_err_set(err, FK_EINVAL, "TCA: need source and target samples (n_s=%zu, n=%zu)",
                          n_s, n);
    if (!(gamma > 0) || !isfinite(gamma))
        return fk_err_set(err, FK_EINVAL, "TCA: regularizer gamma must be > 0 (got %g)", gamma);
    if (m == 0 || m >= n || m > D)
        return fk_err_set(err, FK_EINVAL,
                          "TCA: projected dimension m=%zu must satisfy 1 <= m < n=%zu samples and "
                          "m <= D=%zu features", m, n, D);
    fk_mat U = {0};
    yparts yp = {0};
    double *v = malloc(D * sizeof *v);
    int rc = v ? FK_OK : fk_err_set(err, FK_ENOMEM, "TCA: out of memory");
    double t0 = now();
    if (!rc)
        rc = yparts_init(&yp, Phi, n_s, gamma, v, err);
    if (tm)
        tm->center = now() - t0;
    if (!rc)
        rc = top_right_vectors(&yp, m, &U, theta, tm, err);
    double c = yp.c;
    yparts_free(&yp);
    double t3 = now();
    if (rc) {
        free(v);
        return rc;
    }
    rc = back_transform(&U, m, v, c, gamma, theta, norm, W, err);
    if (tm && !rc)
        tm->back = now() - t3;
    free(v);
    fk_mat_close(&U);
    return rc;
}

int fk_tca_solve_moments(const fk_mat *A, const double *v, double gamma, size_t m,
                         fk_tca_norm norm, fk_mat *W, double *theta, fk_err *err)
{
    *W = (fk_mat){0};
    size_t D = A->rows;
    if (A->cols != D)
        return fk_err_set(err, FK_EINVAL, "TCA moments: A must be square (%zu x %zu)", D, A->cols);
    if (!(gamma > 0) || !isfinite(gamma))
        return fk_err_set(err, FK_EINVAL, "TCA: regularizer gamma must be > 0 (got %g)", gamma);
    if (m == 0 || m > D)
        return fk_err_set(err, FK_EINVAL, "TCA: projected dimension m=%zu must be in 1..D=%zu",
                          m, D);
    /* C = P A P with P = gamma^-1/2 (I - c v v^T) (§1.5), by rank-one updates:
     * gamma C = A - c (Av) v^T - c v (Av)^T + c^2 (v^T A v) v v^T. */
    double a = cblas_ddot((int)D, v, 1, v, 1);
    double c = a > 0 ? (1.0 - sqrt(gamma / (gamma + a))) / a : 0.0;
    fk_mat C = {0}, U = {0};
    double *Av = malloc(D * sizeof *Av);
    if (!Av || fk_mat_init(&C, D, D)) {
        free(Av);
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory");
    }
    for (size_t i = 0; i < D; i++) /* full symmetric A from its upper triangle */
        for (size_t j = 0; j < D; j++)
            C.data[i * C.ld + j] = j >= i ? A->data[i * A->ld + j] : A->data[j * A->ld + i];
    cblas_dsymv(CblasRowMajor, CblasUpper, (int)D, 1.0, C.data, (int)C.ld, v, 1, 0.0, Av, 1);
    double vAv = cblas_ddot((int)D, v, 1, Av, 1);
    cblas_dger(CblasRowMajor, (int)D, (int)D, -c, Av, 1, v, 1, C.data, (int)C.ld);
    cblas_dger(CblasRowMajor, (int)D, (int)D, -c, v, 1, Av, 1, C.data, (int)C.ld);
    cblas_dger(CblasRowMajor, (int)D, (int)D, c * c * vAv, v, 1, v, 1, C.data, (int)C.ld);
    cblas_dscal((int)(D * C.ld), 1.0 / gamma, C.data, 1);
    int rc = fk_eig_sym_top(&C, m, theta, &U, err);
    fk_mat_close(&C);
    free(Av);
    if (rc)
        return rc;
    double tol = 1e-10 * (theta[0] > 0 ? theta[0] : 1.0);
    if (!(theta[m - 1] > tol)) {
        fk_mat_close(&U);
        return fk_err_set(err, FK_ENUMERIC,
                          "TCA: only components below %zu carry variance (eigenvalue %zu is %g); "
                          "lower m", m, m, theta[m - 1]);
    }
    rc = back_transform(&U, m, v, c, gamma, theta, norm, W, err);
    fk_mat_close(&U);
    return rc;
}

int fk_tca_project(const fk_mat *Phi, const fk_mat *W, fk_mat *Z, fk_err *err)
{
    *Z = (fk_mat){0};
    if (Phi->cols != W->rows)
        return fk_err_set(err, FK_EINVAL, "TCA projection: features have %zu columns, W has %zu rows",
                          Phi->cols, W->rows);
    if (fk_mat_init(Z, Phi->rows, W->cols))
        return fk_err_set(err, FK_ENOMEM, "TCA projection: out of memory");
    if (Phi->rows)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)Phi->rows, (int)W->cols,
                    (int)Phi->cols, 1.0, Phi->data, (int)Phi->ld, W->data, (int)W->ld, 0.0,
                    Z->data, (int)Z->ld);
    return FK_OK;
}

int fk_kernel_matrix(const fk_mat *X, fk_kernel_kind kind, double sigma, fk_mat *K, fk_err *err)
{
    *K = (fk_mat){0};
    size_t n = X->rows;
    if (kind == FK_KERNEL_GAUSS && (!(sigma > 0) || !isfinite(sigma)))
        return fk_err_set(err, FK_EINVAL, "kernel: Gaussian width sigma must be > 0 (got %g)", sigma);
    if (fk_mat_init(K, n, n))
        return fk_err_set(err, FK_ENOMEM, "kernel: out of memory for a %zux%zu kernel matrix", n, n);
    cblas_dsyrk(CblasRowMajor, CblasUpper, CblasNoTrans, (int)n, (int)X->cols, 1.0, X->data,
                (int)X->ld, 0.0, K->data, (int)K->ld);
    if (kind == FK_KERNEL_GAUSS) {
        double s = -1.0 / (2 * sigma * sigma);
        for (size_t i = 0; i < n; i++)
            for (size_t j = i + 1; j < n; j++) {
                double d2 = K->data[i * n + i] + K->data[j * n + j] - 2 * K->data[i * n + j];
                K->data[i * n + j] = exp(s * (d2 > 0 ? d2 : 0));
            }
        for (size_t i = 0; i < n; i++)
            K->data[i * n + i] = 1.0;
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++)
            K->data[i * n + j] = K->data[j * n + i];
    return FK_OK;
}

int fk_tca_check_domains(const fk_mat *Xs, const fk_mat *Xt, size_t m, fk_err *err)
{
    if (Xs->cols != Xt->cols)
        return fk_err_set(err, FK_EINVAL,
                          "source has %zu features but target has %zu; domains must share one "
                          "feature space", Xs->cols, Xt->cols);
    if (Xs->rows == 0 || Xt->rows == 0)
        return fk_err_set(err, FK_EINVAL, "empty domain (source %zu, target %zu samples)", Xs->rows,
                          Xt->rows);
    if (m == 0 || m >= Xs->rows + Xt->rows)
        return fk_err_set(err, FK_EINVAL,
                          "projected dimension m=%zu must be >= 1 and below the %zu samples", m,
                          Xs->rows + Xt->rows);
    return FK_OK;
}

int fk_tca_stack(const fk_mat *Xs, const fk_mat *Xt, fk_mat *X, fk_err *err)
{
    if (fk_mat_init(X, Xs->rows + Xt->rows, Xs->cols))
        return fk_err_set(err, FK_ENOMEM, "out of memory stacking %zu + %zu samples", Xs->rows,
                          Xt->rows);
    for (size_t i = 0; i < Xs->rows; i++)
        memcpy(fk_mat_row(X, i), fk_mat_row(Xs, i), Xs->cols * sizeof(double));
    for (size_t i = 0; i < Xt->rows; i++)
        memcpy(fk_mat_row(X, Xs->rows + i), fk_mat_row(Xt, i), Xt->cols * sizeof(double));
    return FK_OK;
}

/* Split Z (n x m) into the first n_s rows and the rest. */
FK_CHECKRETURN static int split_rows(const fk_mat *Z, size_t n_s, fk_mat *Zs, fk_mat *Zt,
                                     fk_err *err)
{
    fk_mat a = fk_mat_rows(Z, 0, n_s), b = fk_mat_rows(Z, n_s, Z->rows - n_s);
    if (fk_mat_copy(Zs, &a) || fk_mat_copy(Zt, &b)) {
        fk_mat_close(Zs);
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory");
    }
    return FK_OK;
}

/* Fit on Phi and write the split embedding. */
FK_CHECKRETURN static int fit_split(const fk_mat *Phi, size_t n_s, double gamma, size_t m,
                                    fk_tca_norm norm, fk_mat *Zs, fk_mat *Zt, fk_err *err)
{
    fk_mat W, Z;
    double *theta = malloc(m * sizeof *theta);
    if (!theta)
        return fk_err_set(err, FK_ENOMEM, "TCA: out of memory");
    int rc = fk_tca_solve(Phi, n_s, gamma, m, norm, &W, theta, err);
    free(theta);
    if (rc)
        return rc;
    rc = fk_tca_project(Phi, &W, &Z, err);
    fk_mat_close(&W);
    if (!rc)
        rc = split_rows(&Z, n_s, Zs, Zt, err);
    fk_mat_close(&Z);
    return rc;
}

/* K (initialised here) = kernel matrix of [Xs; Xt], after the domain checks. */
FK_CHECKRETURN static int stacked_kernel(const fk_mat *Xs, const fk_mat *Xt, fk_kernel_kind kind,
                                         double sigma, size_t m, fk_mat *K, fk_err *err)
{
    int rc = fk_tca_check_domains(Xs, Xt, m, err);
    if (rc)
        return rc;
    fk_mat X;
    if ((rc = fk_tca_stack(Xs, Xt, &X, err)))
        return rc;
    rc = fk_kernel_matrix(&X, kind, sigma, K, err);
    fk_mat_close(&X);
    return rc;
}

int fk_ktca_fit(const fk_mat *Xs, const fk_mat *Xt, fk_kernel_kind kind, double sigma,
                double gamma, size_t m, fk_tca_norm norm, fk_mat *Zs, fk_mat *Zt, fk_err *err)
{
    *Zs = *Zt = (fk_mat){0};
    fk_mat K;
    int rc = stacked_kernel(Xs, Xt, kind, sigma, m, &K, err);
    if (rc)
        return rc;
    rc = fit_split(&K, Xs->rows, gamma, m, norm, Zs, Zt, err);
    fk_mat_close(&K);
    return rc;
}

int fk_ltca_fit(const fk_mat *Xs, const fk_mat *Xt, double gamma, size_t m, fk_tca_norm norm,
                fk_mat *Zs, fk_mat *Zt, fk_err *err)
{
    *Zs = *Zt = (fk_mat){0};
    int rc = fk_tca_check_domains(Xs, Xt, m, err);
    if (rc)
        return rc;
    fk_mat X;
    if ((rc = fk_tca_stack(Xs, Xt, &X, err)))
        return rc;
    rc = fit_split(&X, Xs->rows, gamma, m, norm, Zs, Zt, err);
    fk_mat_close(&X);
    return rc;
}

int fk_rtca_embed(const fk_mat *K, size_t n_s, double gamma, size_t m, fk_mat *F, double *theta,
                  fk_err *err)
{
    *F = (fk_mat){0};
    size_t n = K->rows;
    if (K->cols != n)
        return fk_err_set(err, FK_EINVAL, "R-TCA: kernel matrix must be square (got %zux%zu)", n,
                          K->cols);
    if (n_s == 0 || n_s >= n)
        return fk_err_set(err, FK_EINVAL, "R-TCA: need source and target samples (n_s=%zu, n=%zu)",
                          n_s, n);
    if (!(gamma > 0) || !isfinite(gamma))
        return fk_err_set(err, FK_EINVAL, "R-TCA: regularizer gamma must be > 0 (got %g)", gamma);
    if (m == 0 || m >= n)
        return fk_err_set(err, FK_EINVAL, "R-TCA: projected dimension m=%zu must be in 1..%zu", m,
                          n - 1);
    fk_mat A;
    double *l = malloc(n * sizeof *l), *u = malloc(n * sizeof *u), *mu = malloc(n * sizeof *mu);
    if (!l || !u || !mu || fk_mat_init(&A, n, n)) {
        free(l);
        free(u);
        free(mu);
        return fk_err_set(err, FK_ENOMEM, "R-TCA: out of memory for a %zux%zu matrix", n, n);
    }
    for (size_t i = 0; i < n; i++)
        l[i] = i < n_s ? 1.0 / (double)n_s : -1.0 / (double)(n - n_s);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0, K->data, (int)K->ld, l, 1, 0.0, u,
                1);
    double s = 1.0 / (gamma + cblas_ddot((int)n, l, 1, u, 1));
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            A.data[i * n + j] = K->data[i * K->ld + j] - s * u[i] * u[j];
    /* H M H: subtract row and column means (M is symmetric, so they coincide) and add the grand mean. */
    double all = 0;
    for (size_t i = 0; i < n; i++) {
        double r = 0;
        for (size_t j = 0; j < n; j++)
            r += A.data[i * n + j];
        mu[i] = r / (double)n;
        all += r;
    }
    all /= (double)n * (double)n;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            A.data[i * n + j] = (A.data[i * n + j] - mu[i] - mu[j] + all) / gamma;
    int rc = fk_eig_sym_top(&A, m, theta, F, err);
    if (!rc)
        fk_eig_fix_signs(F);
    fk_mat_close(&A);
    free(l);
    free(u);
    free(mu);
    return rc;
}

/* Z = gamma^-1 (K F - s u (u^T F)) diag(theta)^-1/2, u = K l, s = 1 / (gamma + l^T u). */
FK_CHECKRETURN static int rtca_lift(const fk_mat *K, size_t n_s, double gamma, const fk_mat *F,
                     const double *theta, fk_mat *Z, fk_err *err)
{
    size_t n = K->rows, m = F->cols;
    double *l = malloc(n * sizeof *l), *u = malloc(n * sizeof *u), *uf = malloc(m * sizeof *uf);
    int rc = FK_OK;
    if (!l || !u || !uf || fk_mat_init(Z, n, m)) {
        rc = fk_err_set(err, FK_ENOMEM, "R-TCA: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        l[i] = i < n_s ? 1.0 / (double)n_s : -1.0 / (double)(n - n_s);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)n, (int)n, 1.0, K->data, (int)K->ld, l, 1, 0.0, u,
                1);
    double s = 1.0 / (gamma + cblas_ddot((int)n, l, 1, u, 1));
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)n, (int)m, 1.0, F->data, (int)F->ld, u, 1, 0.0, uf,
                1);
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)m, (int)n, 1.0, K->data,
                (int)K->ld, F->data, (int)F->ld, 0.0, Z->data, (int)Z->ld);
    cblas_dger(CblasRowMajor, (int)n, (int)m, -s, u, 1, uf, 1, Z->data, (int)Z->ld);
    for (size_t j = 0; j < m; j++)
        cblas_dscal((int)n, 1.0 / (gamma * sqrt(theta[j])), Z->data + j, (int)Z->ld);
out:
    free(l);
    free(u);
    free(uf);
    return rc;
}

int fk_rtca_project(const fk_mat *K, size_t n_s, double gamma, size_t m, fk_mat *Z, fk_err *err)
{
    *Z = (fk_mat){0};
    fk_mat F;
    double *theta = malloc((m ? m : 1) * sizeof *theta); /* m = 0 gets fk_rtca_embed's error */
    if (!theta)
        return fk_err_set(err, FK_ENOMEM, "R-TCA: out of memory");
    int rc = fk_rtca_embed(K, n_s, gamma, m, &F, theta, err);
    if (!rc && !(theta[m - 1] > 1e-10 * theta[0]))
        rc = fk_err_set(err, FK_ENUMERIC, "R-TCA: only components below %zu carry variance; "
                        "lower m", m);
    if (!rc)
        rc = rtca_lift(K, n_s, gamma, &F, theta, Z, err);
    fk_mat_close(&F);
    free(theta);
    return rc;
}

int fk_rtca_fit(const fk_mat *Xs, const fk_mat *Xt, double sigma, double gamma, size_t m,
                fk_mat *Zs, fk_mat *Zt, fk_err *err)
{
    *Zs = *Zt = (fk_mat){0};
    fk_mat K, Z;
    int rc = stacked_kernel(Xs, Xt, FK_KERNEL_GAUSS, sigma, m, &K, err);
    if (rc)
        return rc;
    rc = fk_rtca_project(&K, Xs->rows, gamma, m, &Z, err);
    fk_mat_close(&K);
    if (!rc)
        rc = split_rows(&Z, Xs->rows, Zs, Zt, err);
    fk_mat_close(&Z);
    return rc;
}
