/* (PI') baseline (spec §9.1): the classical kernel machine with one fixed width and its kernels
 * at the samples (representer theorem), min a^T K a subject to the same per-row constraints as
 * the sparse problems, solved on its dual with the same engine (FISTA, step 1/L):
 *   regression |(K a)_n - y_n| <= sqrt(eps):
 *       max_lambda  lambda^T y - sqrt(eps) ||lambda||_1 - 1/4 lambda^T K lambda,   a = lambda / 2
 *   classification y_n (K a)_n >= 1 - eps:
 *       max_{lambda >= 0} (1 - eps) sum lambda - 1/4 lambda^T Y K Y lambda [- ||lambda||^2/(2c)],
 *       a = Y lambda / 2 (a hard-margin SVM without bias; c > 0 the quadratic soft margin).
 * With kernels at M other centres Z (k-means centroids, spec §9.1 general form) the same dual
 * runs on the model's Gram form K_XZ K_ZZ^-1 K_XZ^T at the rows. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/sfl/sfl.h"

/* Top eigenvalue of the PSD matrix Q (N x N) by 50 power iterations, 2 % headroom (as the
 * sparse solver's step constant). */
static double top_eig(const double *Q, size_t N, double *u, double *t)
{
    fk_rng r;
    fk_rng_init(&r, 9001, 0);
    for (size_t n = 0; n < N; n++)
        u[n] = 0.5 + fk_rng_uniform(&r);
    double l = 0;
    for (int it = 0; it < 50; it++) {
        double nu = cblas_dnrm2((int)N, u, 1);
        if (!(nu > 0))
            return 1;
        cblas_dscal((int)N, 1 / nu, u, 1);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 1.0, Q, (int)N, u, 1, 0.0, t, 1);
        l = cblas_ddot((int)N, u, 1, t, 1);
        memcpy(u, t, N * sizeof *u);
    }
    return l > 0 ? 1.02 * l : 1;
}

/* The dual engine shared by both forms: FISTA with adaptive restart on
 *   regress   max_lambda  lambda^T y - sqrt(eps) ||lambda||_1 - 1/4 lambda^T Q lambda
 *   classify  max_{lambda >= 0} (1 - eps) sum lambda - 1/4 lambda^T Q lambda [- ||lambda||^2/(2c)]
 * (Q = the model's Gram form at the rows, times y_i y_j to classify), at most T iterations;
 * lam (N, zero on entry) gets the multipliers. Scratch: prev, hat, g (N each). */
static void pi_dual(const double *Q, const double *y, size_t N, int cls, double eps,
                    double c_soft, long T, double *lam, double *prev, double *hat, double *g,
                    fk_sfl_pi_info *info)
{
    /* gradient of the dual: b - (1/2) Q lambda [- lambda / c]; Lipschitz L = lmax(Q)/2 + 1/c */
    double L = 0.5 * top_eig(Q, N, hat, g) + (cls && c_soft > 0 ? 1 / c_soft : 0), eta = 1 / L,
           tube = sqrt(eps), scale = cls ? 1 - eps : (tube > 0 ? tube : 1), theta = 1;
    info->status = FK_SFL_MAXITER;
    long t;
    for (t = 1; t <= T; t++) {
        /* FISTA extrapolation, then one projected (classify) or proximal (regress) step */
        double th1 = (1 + sqrt(1 + 4 * theta * theta)) / 2, mom = (theta - 1) / th1;
        theta = th1;
        for (size_t n = 0; n < N; n++)
            hat[n] = lam[n] + mom * (lam[n] - prev[n]);
        memcpy(prev, lam, N * sizeof *lam);
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, -0.5, Q, (int)N, hat, 1, 0.0, g,
                    1);
        for (size_t n = 0; n < N; n++) {
            double z =
                hat[n] + eta * (g[n] + (cls ? 1 - eps - (c_soft > 0 ? hat[n] / c_soft : 0) : y[n]));
            lam[n] = cls ? fmax(z, 0) : copysign(fmax(fabs(z) - eta * tube, 0), z);
        }
        /* adaptive restart (O'Donoghue and Candes): momentum that points downhill is dropped;
         * the kernel matrices of wide kernels are ill-conditioned and plain FISTA oscillates */
        double dir = 0;
        for (size_t n = 0; n < N; n++)
            dir += (hat[n] - lam[n]) * (lam[n] - prev[n]);
        if (dir > 0)
            theta = 1;
        if (t % 50 && t != T)
            continue;
        /* every 50 iterations: violation of the constraints and the duality gap */
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)N, 0.5, Q, (int)N, lam, 1, 0.0, g, 1);
        double viol = 0, quad = cblas_ddot((int)N, lam, 1, g, 1) / 2, lin = 0, ridge = 0;
        for (size_t n = 0; n < N; n++) {
            /* classify: g = (1/2) Y K Y lambda, so y_n f_n = g_n; regress: g = f */
            double v = cls ? (1 - eps) - g[n] - (c_soft > 0 ? lam[n] / c_soft : 0)
                           : fabs(g[n] - y[n]) - tube;
            viol = fmax(viol, v);
            lin += cls ? (1 - eps) * lam[n] : lam[n] * y[n] - tube * fabs(lam[n]);
            ridge += c_soft > 0 && cls ? lam[n] * lam[n] / (2 * c_soft) : 0;
        }
        /* quad = 1/4 lambda^T Q lambda = a^T K a, the primal (+ the soft margin's slack cost) */
        double primal = quad + ridge, dual = lin - quad - ridge;
        info->viol = viol;
        info->gap = fabs(primal - dual) / fmax(1, fabs(primal));
        if (viol <= 1e-4 * scale && info->gap <= 1e-4) {
            info->status = FK_SFL_CONVERGED;
            break;
        }
    }
    info->iters = t > T ? T : t;
    for (size_t n = 0; n < N; n++)
        info->active += lam[n] != 0.0;
}

FK_CHECKRETURN static int check_pi(const double *X, const double *y, size_t N, int p, double w, int mode,
                    double eps, double c_soft, long T, fk_err *err)
{
    if (!X || !y || N == 0 || p < 1 || !(w > 0) || !isfinite(w) || !(eps >= 0) ||
        (mode == FK_SFL_CLASSIFY && !(eps < 1)) || !(c_soft >= 0) || T < 1 ||
        (mode != FK_SFL_REGRESS && mode != FK_SFL_CLASSIFY))
        return fk_err_set(err, FK_EINVAL,
                          "sfl (PI'): need rows, width > 0, eps >= 0 (< 1 to classify), "
                          "c >= 0, T >= 1 and mode regress or classify (got w %g eps %g c %g)",
                          w, eps, c_soft);
    return FK_OK;
}

static double sqdist(const double *a, const double *b, size_t P)
{
    double d2 = 0;
    for (size_t t = 0; t < P; t++)
        d2 += (a[t] - b[t]) * (a[t] - b[t]);
    return d2;
}

int fk_sfl_pi_fit(const double *X, const double *y, size_t N, int p, double w, int mode, double eps,
                  double c_soft, long T, fk_sfl_model *m, fk_sfl_pi_info *info, fk_err *err)
{
    memset(m, 0, sizeof *m);
    memset(info, 0, sizeof *info);
    int rc = check_pi(X, y, N, p, w, mode, eps, c_soft, T, err);
    if (rc)
        return rc;
    size_t P = (size_t)p;
    double *Q = malloc(N * N * sizeof *Q), *lam = calloc(N, sizeof *lam),
           *prev = calloc(N, sizeof *prev), *hat = malloc(N * sizeof *hat),
           *g = malloc(N * sizeof *g);
    if (!Q || !lam || !prev || !hat || !g) {
        free(Q);
        free(lam);
        free(prev);
        free(hat);
        free(g);
        return fk_err_set(err, FK_ENOMEM, "sfl (PI'): out of memory for %zu rows", N);
    }
    int cls = mode == FK_SFL_CLASSIFY;
    for (size_t i = 0; i < N; i++) /* Q = K (regress) or Y K Y (classify) */
        for (size_t j = 0; j <= i; j++) {
            double k = exp(-sqdist(X + i * P, X + j * P, P) / (2 * w * w)) * (cls ? y[i] * y[j] : 1);
            Q[i * N + j] = Q[j * N + i] = k;
        }
    pi_dual(Q, y, N, cls, eps, c_soft, T, lam, prev, hat, g, info);
    free(Q);
    free(prev);
    free(hat);
    free(g);
    m->K = N;
    m->p = p;
    m->s = malloc(N * P * sizeof(double));
    m->w = malloc(N * sizeof(double));
    m->c = lam; /* becomes a = lambda / 2 (times y_n to classify) */
    if (!m->s || !m->w) {
        fk_sfl_model_close(m);
        return fk_err_set(err, FK_ENOMEM, "sfl (PI'): out of memory for %zu rows", N);
    }
    memcpy(m->s, X, N * P * sizeof(double));
    for (size_t n = 0; n < N; n++) {
        m->w[n] = w;
        m->c[n] = lam[n] / 2 * (cls ? y[n] : 1);
    }
    return FK_OK;
}

int fk_sfl_kmeans(const double *X, size_t N, int p, size_t M, uint64_t seed, double *C,
                  size_t *iters, fk_err *err)
{
    if (!X || !C || N == 0 || p < 1 || M < 1 || M > N)
        return fk_err_set(err, FK_EINVAL, "sfl k-means: need 1 <= M <= N rows (got M %zu, N %zu)",
                          M, N);
    size_t P = (size_t)p;
    double *d = malloc(N * sizeof *d), *sum = malloc(M * P * sizeof *sum);
    size_t *cnt = malloc(M * sizeof *cnt), *as = malloc(N * sizeof *as);
    if (!d || !sum || !cnt || !as) {
        free(d);
        free(sum);
        free(cnt);
        free(as);
        return fk_err_set(err, FK_ENOMEM, "sfl k-means: out of memory for %zu rows", N);
    }
    fk_rng r;
    fk_rng_init(&r, seed, 0x6b6d65616e73ULL);
    /* k-means++: the first centre uniform, each next one with probability ~ D^2 */
    size_t first = (size_t)(fk_rng_uniform(&r) * (double)N);
    memcpy(C, X + (first < N ? first : N - 1) * P, P * sizeof *C);
    for (size_t n = 0; n < N; n++)
        d[n] = sqdist(X + n * P, C, P);
    for (size_t k = 1; k < M; k++) {
        double tot = 0;
        for (size_t n = 0; n < N; n++)
            tot += d[n];
        size_t pick = N - 1;
        if (tot > 0) {
            double u = fk_rng_uniform(&r) * tot, acc = 0;
            for (size_t n = 0; n < N; n++) {
                acc += d[n];
                if (acc > u && d[n] > 0) {
                    pick = n;
                    break;
                }
            }
        } else { /* fewer distinct rows than M: repeat one */
            pick = k % N;
        }
        memcpy(C + k * P, X + pick * P, P * sizeof *C);
        for (size_t n = 0; n < N; n++)
            d[n] = fmin(d[n], sqdist(X + n * P, C + k * P, P));
    }
    /* Lloyd: assign, move, until no row changes cluster or 100 iterations (spec §9.5) */
    size_t it;
    for (size_t n = 0; n < N; n++)
        as[n] = M; /* none yet */
    for (it = 1; it <= 100; it++) {
        size_t moved = 0;
        for (size_t n = 0; n < N; n++) {
            size_t best = 0;
            double bd = INFINITY;
            for (size_t k = 0; k < M; k++) {
                double e = sqdist(X + n * P, C + k * P, P);
                if (e < bd) {
                    bd = e;
                    best = k;
                }
            }
            moved += as[n] != best;
            as[n] = best;
            d[n] = bd;
        }
        if (!moved)
            break;
        memset(sum, 0, M * P * sizeof *sum);
        memset(cnt, 0, M * sizeof *cnt);
        for (size_t n = 0; n < N; n++) {
            cnt[as[n]]++;
            for (size_t t = 0; t < P; t++)
                sum[as[n] * P + t] += X[n * P + t];
        }
        for (size_t k = 0; k < M; k++) {
            if (cnt[k]) {
                for (size_t t = 0; t < P; t++)
                    C[k * P + t] = sum[k * P + t] / (double)cnt[k];
                continue;
            }
            /* an empty cluster takes the row farthest from its centre */
            size_t far = 0;
            for (size_t n = 1; n < N; n++)
                far = d[n] > d[far] ? n : far;
            memcpy(C + k * P, X + far * P, P * sizeof *C);
            d[far] = 0;
        }
    }
    if (iters)
        *iters = it > 100 ? 100 : it;
    free(d);
    free(sum);
    free(cnt);
    free(as);
    return FK_OK;
}

int fk_sfl_pi_fit_centres(const double *X, const double *y, size_t N, int p, const double *Z,
                          size_t M, double w, int mode, double eps, double c_soft, long T,
                          fk_sfl_model *m, fk_sfl_pi_info *info, fk_err *err)
{
    memset(m, 0, sizeof *m);
    memset(info, 0, sizeof *info);
    int rc = check_pi(X, y, N, p, w, mode, eps, c_soft, T, err);
    if (rc)
        return rc;
    if (!Z || M < 1)
        return fk_err_set(err, FK_EINVAL, "sfl (PI') at centres: need at least one centre");
    for (size_t i = 0; i < M * (size_t)p; i++)
        if (!isfinite(Z[i]))
            return fk_err_set(err, FK_EINVAL, "sfl (PI') at centres: centre value %zu is not "
                                              "finite", i);
    size_t P = (size_t)p;
    int cls = mode == FK_SFL_CLASSIFY;
    double *Kzz = malloc(M * M * sizeof *Kzz), *Phi = malloc(N * M * sizeof *Phi),
           *Q = malloc(N * N * sizeof *Q), *lam = calloc(N, sizeof *lam),
           *prev = calloc(N, sizeof *prev), *hat = malloc(N * sizeof *hat),
           *g = malloc(N * sizeof *g), *a = malloc(M * sizeof *a);
    if (!Kzz || !Phi || !Q || !lam || !prev || !hat || !g || !a) {
        rc = fk_err_set(err, FK_ENOMEM, "sfl (PI') at centres: out of memory for %zu x %zu", N, M);
        goto out;
    }
    /* K_ZZ + 1e-10 tr(K_ZZ)/M I = L L^T (spec §9.1); Phi = K_XZ L^-T, so Phi Phi^T =
     * K_XZ K_ZZ^-1 K_XZ^T is the Gram form of the model at the rows and ||b||^2 = a^T K_ZZ a
     * with b = L^T a: the dual is the one at the samples with Q = Phi Phi^T */
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j <= i; j++)
            Kzz[i * M + j] = Kzz[j * M + i] =
                exp(-sqdist(Z + i * P, Z + j * P, P) / (2 * w * w)) + (i == j ? 1e-10 : 0);
    lapack_int li = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'L', (lapack_int)M, Kzz, (lapack_int)M);
    if (li) {
        rc = fk_err_set(err, FK_ENUMERIC, "sfl (PI') at centres: the centres' kernel matrix is "
                                           "not positive definite (dpotrf info %d); use fewer or "
                                           "distinct centres", (int)li);
        goto out;
    }
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < M; k++)
            Phi[n * M + k] = exp(-sqdist(X + n * P, Z + k * P, P) / (2 * w * w));
    /* Phi <- Phi L^-T: solve X L^T = Phi from the right */
    cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (int)N, (int)M,
                1.0, Kzz, (int)M, Phi, (int)M);
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)N, (int)M, 1.0, Phi, (int)M, 0.0, Q,
                (int)N);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j <= i; j++)
            Q[j * N + i] = Q[i * N + j] *= cls ? y[i] * y[j] : 1;
    pi_dual(Q, y, N, cls, eps, c_soft, T, lam, prev, hat, g, info);
    /* a = 1/2 L^-T Phi^T (Y) lambda */
    for (size_t n = 0; n < N; n++)
        g[n] = lam[n] * (cls ? y[n] : 1);
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)M, 0.5, Phi, (int)M, g, 1, 0.0, a, 1);
    cblas_dtrsv(CblasRowMajor, CblasLower, CblasTrans, CblasNonUnit, (int)M, Kzz, (int)M, a, 1);
    m->K = M;
    m->p = p;
    m->s = malloc(M * P * sizeof(double));
    m->w = malloc(M * sizeof(double));
    m->c = a;
    a = NULL;
    if (!m->s || !m->w) {
        fk_sfl_model_close(m);
        rc = fk_err_set(err, FK_ENOMEM, "sfl (PI') at centres: out of memory");
        goto out;
    }
    memcpy(m->s, Z, M * P * sizeof(double));
    for (size_t k = 0; k < M; k++)
        m->w[k] = w;
out:
    free(Kzz);
    free(Phi);
    free(Q);
    free(lam);
    free(prev);
    free(hat);
    free(g);
    free(a);
    return rc;
}
