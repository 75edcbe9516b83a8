/* Kernel DICA (spec dica.md §5): Gaussian Gram matrices, centring, the empirical kernel
 * map fed to the finite-feature solver (§5.3), projection of new points (§5.6) and the
 * direct O(n^3) solver of §5.2 the tests compare against. */
#include "common/models/dica/dica.h"
#include "common/models/dica/dica_int.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/la/blas.h"
#include "common/la/eig.h"
#include "common/la/rff.h"

int fk_dica_gauss_gram(const fk_mat *A, const fk_mat *B, double sigma, fk_mat *K, fk_err *err)
{
    *K = (fk_mat){0};
    if (!(sigma > 0))
        return fk_err_set(err, FK_EINVAL, "dica: sigma must be > 0 (got %g)", sigma);
    if (A->cols != B->cols)
        return fk_err_set(err, FK_EINVAL, "dica: inputs have %zu and %zu columns", A->cols,
                          B->cols);
    if (fk_mat_init(K, A->rows, B->rows))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for a %zu x %zu kernel", A->rows,
                          B->rows);
    /* Cross products: one dsyrk for a Gram matrix of one set (half the flops of the gemm,
     * and K exactly symmetric, §5.1 step 1), a dgemm otherwise. */
    int rc = A == B ? fk_syrk(FK_NOTRANS, 1.0, A, 0.0, K, err)
                    : fk_gemm(FK_NOTRANS, FK_TRANS, 1.0, A, B, 0.0, K, err);
    if (!rc)
        rc = fk_gauss_from_cross(A, B, sigma, K, "dica", err);
    if (rc)
        fk_mat_close(K);
    return rc;
}

/* K~ = H K H in place; colmean and grand of the uncentred K if asked. */
static void center_gram(fk_mat *K, double *colmean, double *grand)
{
    size_t n = K->rows;
    double *c = calloc(n, sizeof *c), g = 0;
    if (!c)
        return;
    for (size_t i = 0; i < n; i++)
        fk_axpy(n, 1.0 / (double)n, fk_mat_row(K, i), c);
    for (size_t j = 0; j < n; j++)
        g += c[j] / (double)n;
    for (size_t i = 0; i < n; i++) {
        double *r = fk_mat_row(K, i);
        for (size_t j = 0; j < n; j++)
            r[j] += g - c[i] - c[j];
    }
    if (colmean)
        memcpy(colmean, c, n * sizeof *c);
    if (grand)
        *grand = g;
    free(c);
}

/* Features of the centred PSD matrix A (n x n, destroyed): rows of U diag(sqrt(s)) for the
 * eigenvalues above FK__DICA_TAU_RANK * s_max, largest first. Umap (optional) = U diag(1/sqrt(s)).
 * partial: compute only those eigenpairs, by dsyevr with the value range (tau max_i A_ii, inf),
 * a superset of the kept ones (s_max >= max_i A_ii for a PSD matrix), cut at tau s_max: for
 * spectra that decay fast (the Gaussian kernel of a scalar target). A range covering most
 * of the spectrum makes dsyevr slower than dsyevd (bisection and inverse iteration instead
 * of MRRR: 5.6 against 1.4 CPU s at n = 2000), so the input kernel takes the full dsyevd. */
FK_CHECKRETURN static int kernel_map(fk_mat *A, int partial, fk_mat *Phi, fk_mat *Umap, fk_err *err)
{
    size_t n = A->rows;
    *Phi = (fk_mat){0};
    double dmax = 0;
    for (size_t i = 0; i < n; i++)
        dmax = fmax(dmax, A->data[i * A->ld + i]);
    double *w = malloc(n * sizeof *w), *z = malloc(n * n * sizeof *z);
    lapack_int *sup = malloc(2 * n * sizeof *sup), got = 0;
    if (!w || !z || !sup) {
        free(w);
        free(z);
        free(sup);
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    }
    /* A is symmetric, so the row-major buffer read column-major is A itself: calling
     * LAPACK column-major skips LAPACKE's transposes; eigenvector k is column k of z. */
    lapack_int info = 0;
    if (!partial) {
        /* all pairs, in place; eigenvector k is column k of the column-major buffer */
        info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', (lapack_int)n, A->data, (lapack_int)A->ld,
                              w);
        got = (lapack_int)n;
        for (size_t i = 0; info == 0 && i < n; i++)
            memcpy(z + i * n, A->data + i * A->ld, n * sizeof *z);
    } else if (dmax > 0) {
        info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'V', 'U', (lapack_int)n, A->data,
                              (lapack_int)A->ld, FK__DICA_TAU_RANK * dmax, INFINITY, 0, 0, 0.0,
                              &got, w, z, (lapack_int)n, sup);
    }
    free(sup);
    if (info != 0) {
        free(w);
        free(z);
        return fk_err_set(err, FK_ENUMERIC, "dica: %s on the %zu x %zu kernel failed (%d)",
                          partial ? "dsyevr" : "dsyevd", n, n, (int)info);
    }
    size_t M = (size_t)got, r = 0;
    double smax = M ? w[M - 1] : 0;
    while (r < M && w[M - 1 - r] > FK__DICA_TAU_RANK * smax)
        r++;
    if (r == 0 || fk_mat_init(Phi, n, r) || (Umap && fk_mat_init(Umap, n, r))) {
        free(w);
        free(z);
        fk_mat_close(Phi);
        return fk_err_set(err, r ? FK_ENOMEM : FK_ENUMERIC,
                          r ? "dica: out of memory" : "dica: the centred kernel is zero");
    }
    /* Column src of z is eigenvector src; Phi and Umap hold them as columns: a transpose,
     * done in 64 x 64 tiles so neither side walks memory with a stride of n. */
    for (size_t k0 = 0; k0 < r; k0 += 64)
        for (size_t i0 = 0; i0 < n; i0 += 64)
            for (size_t k = k0; k < k0 + 64 && k < r; k++) {
                size_t src = M - 1 - k;
                double s = sqrt(w[src]);
                for (size_t i = i0; i < i0 + 64 && i < n; i++) {
                    double u = z[src * n + i];
                    Phi->data[i * Phi->ld + k] = u * s;
                    if (Umap)
                        Umap->data[i * Umap->ld + k] = u / s;
                }
            }
    free(w);
    free(z);
    return FK_OK;
}

/* The kernel map of K~ (§5.3 steps 1-2), computed once, when a fit first needs it. */
FK_CHECKRETURN static int ensure_map(fk_dica_kernel *k, fk_err *err)
{
    if (k->Phi.data)
        return FK_OK;
    fk_mat A;
    if (fk_mat_copy(&A, &k->Kc))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for the %zu x %zu kernel", k->n,
                          k->n);
    int rc = kernel_map(&A, 0, &k->Phi, &k->Umap, err);
    fk_mat_close(&A);
    k->r = rc == FK_OK ? k->Phi.cols : 0;
    return rc;
}

/* DICA/COIR without the kernel map (§3.3, eq. 11, solved through its rank as (S3) is):
 * with F~ = Psi~ (Psi~^T Psi~ / n + eps I)^{-1/2} / sqrt(n) (n x Dy, F~ F~^T = L~(L~ + n eps
 * I)^-1 for the output features Psi) every solution with gamma != 0 is B = R^-1 F~ a, and
 * (1/n) F~^T K~^2 R^-1 F~ a = gamma a. One Cholesky of R (n^3/3) and products with Dy
 * columns replace the eigendecomposition of K~. Columns normalised by beta^T R beta = 1
 * (§5.5 `constraint`), signs fixed. The fit's features are the centred kernel rows: W = B. */
FK_CHECKRETURN static int refit_direct(fk_dica_kernel *k, const fk_mat *Psi, const long *dom,
                                       const fk_dica_opts *o, fk_err *err)
{
    size_t n = k->n, Dy = Psi->cols, m = o->m;
    if (!(o->lambda > 0) || !isfinite(o->lambda))
        return fk_err_set(err, FK_EINVAL, "dica: lambda must be > 0 (got %g)", o->lambda);
    if (!(o->eps > 0) || !isfinite(o->eps))
        return fk_err_set(err, FK_EINVAL, "dica: eps must be > 0 (got %g)", o->eps);
    if (!(o->q_weight >= 0) || !isfinite(o->q_weight))
        return fk_err_set(err, FK_EINVAL, "dica: q_weight must be >= 0 (got %g)", o->q_weight);
    if (m == 0 || m >= n)
        return fk_err_set(err, FK_EINVAL, "dica: m = %zu components must be in [1, %zu)", m, n);
    fk_mat Yc = {0}, F = {0}, R = {0}, Mk = {0}, Y = {0}, KY = {0}, KKY = {0}, B = {0}, UB = {0};
    long *ids = malloc(n * sizeof *ids);
    size_t *di = malloc(n * sizeof *di);
    double *cnt = calloc(n, sizeof *cnt), *Cyy = malloc(Dy * Dy * sizeof *Cyy);
    double *T = malloc(Dy * Dy * sizeof *T), *ybar = calloc(Dy, sizeof *ybar);
    double *gamma = calloc(m, sizeof *gamma), *pb = calloc(n, sizeof *pb);
    int rc = (ids && di && cnt && Cyy && T && ybar && gamma && pb && !fk_mat_init(&Yc, n, Dy) &&
              !fk_mat_init(&F, n, Dy) && !fk_mat_copy(&R, &k->Kc) && !fk_mat_init(&Y, n, Dy) &&
              !fk_mat_init(&KY, n, Dy) && !fk_mat_init(&KKY, n, Dy) && !fk_mat_init(&B, n, m))
                 ? FK_OK
                 : fk_err_set(err, FK_ENOMEM, "dica: out of memory (n=%zu, Dy=%zu)", n, Dy);
    size_t N = 0;
    double dvar = 0;
    if (rc == FK_OK) {
        N = fk__dica_domain_index(dom, n, ids, di, cnt);
        for (size_t q = 0; q < N && rc == FK_OK; q++)
            if (cnt[q] < o->min_domain)
                rc = fk_err_set(err, FK_EINVAL,
                                "dica: domain %ld has %.0f samples, below the minimum %.0f; "
                                "merge or drop it",
                                ids[q], cnt[q], o->min_domain);
    }
    /* F~ from the centred outputs (§7.4 step 4 in n-space). */
    for (size_t i = 0; rc == FK_OK && i < n; i++)
        fk_axpy(Dy, 1.0 / (double)n, fk_mat_row(Psi, i), ybar);
    for (size_t i = 0; rc == FK_OK && i < n; i++)
        for (size_t j = 0; j < Dy; j++)
            Yc.data[i * Dy + j] = fk_mat_get(Psi, i, j) - ybar[j];
    if (rc == FK_OK) {
        fk_mat Cm = fk_mat_view(Cyy, Dy, Dy, Dy);
        rc = fk_syrk(FK_TRANS, 1.0 / (double)n, &Yc, 0.0, &Cm, err);
    }
    if (rc == FK_OK)
        rc = fk__dica_inv_sqrt_sym(Cyy, Dy, o->eps, err);
    if (rc == FK_OK) {
        fk_mat Cm = fk_mat_view(Cyy, Dy, Dy, Dy);
        rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0 / sqrt((double)n), &Yc, &Cm, 0.0, &F, err);
    }
    /* R = q K~QK~ + K~ + lambda I, K~QK~ = (1/N) (M H_N)(M H_N)^T with M the per-domain row
     * means of K~ (§5.1 step 4); tr S_Q = tr(K~Q) from the domain-block means. */
    if (rc == FK_OK && N > 1 && o->q_weight > 0) {
        if (fk_mat_init(&Mk, n, N)) {
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        } else {
            for (size_t i = 0; i < n; i++) {
                const double *kr = fk_mat_row(&k->Kc, i);
                double *mr = fk_mat_row(&Mk, i);
                for (size_t j = 0; j < n; j++)
                    mr[di[j]] += kr[j] / cnt[di[j]];
            }
            double gsum = 0, gtr = 0;
            for (size_t i = 0; i < n; i++)
                for (size_t q = 0; q < N; q++) {
                    double v = Mk.data[i * N + q] / cnt[di[i]];
                    gsum += v;
                    gtr += q == di[i] ? v : 0;
                }
            dvar = gtr / (double)N - gsum / ((double)N * (double)N);
            for (size_t i = 0; i < n; i++) {
                double *mr = fk_mat_row(&Mk, i), mean = 0;
                for (size_t q = 0; q < N; q++)
                    mean += mr[q] / (double)N;
                for (size_t q = 0; q < N; q++)
                    mr[q] -= mean;
            }
            rc = fk_syrk(FK_NOTRANS, o->q_weight / (double)N, &Mk, 1.0, &R, err);
        }
    }
    for (size_t i = 0; rc == FK_OK && i < n; i++)
        R.data[i * R.ld + i] += o->lambda;
    /* R = U^T U with U in R's row-major upper triangle: LAPACK's column-major lower factor
     * of the same buffer (R is symmetric), so LAPACKE neither transposes the n x n matrix
     * into a copy and back (22 % of the fit with its page faults, issue 36) nor scans it
     * for NaN (every entry of R is a finite kernel value plus finite terms). */
    if (rc == FK_OK) {
        lapack_int info =
            LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'L', (lapack_int)n, R.data, (lapack_int)R.ld);
        if (info != 0)
            rc = fk_err_set(err, FK_ENUMERIC,
                            "dica: q K~QK~ + K~ + lambda I is not positive definite (minor %d); "
                            "raise lambda",
                            (int)info);
    }
    /* Y = R^-1 F~, T = (1/n) F~^T K~ (K~ Y), then a, gamma and B = Y a. */
    if (rc == FK_OK) {
        memcpy(Y.data, F.data, n * Dy * sizeof *Y.data);
        cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasTrans, CblasNonUnit, (int)n, (int)Dy,
                    1.0, R.data, (int)R.ld, Y.data, (int)Dy);
        cblas_dtrsm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, (int)n,
                    (int)Dy, 1.0, R.data, (int)R.ld, Y.data, (int)Dy);
    }
    if (rc == FK_OK)
        rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &k->Kc, &Y, 0.0, &KY, err);
    if (rc == FK_OK)
        rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &k->Kc, &KY, 0.0, &KKY, err);
    if (rc == FK_OK) {
        fk_mat Tm = fk_mat_view(T, Dy, Dy, Dy);
        rc = fk_gemm(FK_TRANS, FK_NOTRANS, 1.0 / (double)n, &F, &KKY, 0.0, &Tm, err);
    }
    if (rc == FK_OK)
        rc = fk__dica_top_real(T, Dy, Y.data, n, m, o->rank_check, gamma, &B, err);
    /* beta^T R beta = |U beta|^2 with R = U^T U (the Cholesky factor in R's upper part). */
    if (rc == FK_OK)
        rc = fk_mat_copy(&UB, &B) ? fk_err_set(err, FK_ENOMEM, "dica: out of memory") : FK_OK;
    if (rc == FK_OK)
        cblas_dtrmm(CblasRowMajor, CblasLeft, CblasUpper, CblasNoTrans, CblasNonUnit, (int)n,
                    (int)m, 1.0, R.data, (int)R.ld, UB.data, (int)UB.ld);
    for (size_t c = 0; rc == FK_OK && c < m; c++) {
        double q = 0;
        for (size_t i = 0; i < n; i++)
            q += UB.data[i * m + c] * UB.data[i * m + c];
        if (q == 0 && !o->rank_check)
            continue; /* a zero component (m above the output rank), kept as zero */
        if (!(q > 0) || !isfinite(q)) {
            rc = fk_err_set(err, FK_ENUMERIC, "dica: component %zu has zero norm", c + 1);
            break;
        }
        for (size_t i = 0; i < n; i++)
            B.data[i * m + c] /= sqrt(q);
    }
    if (rc == FK_OK) {
        fk_eig_fix_signs(&B);
        k->fit = (fk_dica_fit){.D = n,
                               .m = m,
                               .W = B,
                               .gamma = gamma,
                               .phi_bar = pb,
                               .n_domains = (int)N,
                               .dvar_in = dvar};
        B = (fk_mat){0};
        gamma = pb = NULL;
        k->direct = 1;
    }
    free(ids);
    free(di);
    free(cnt);
    free(Cyy);
    free(T);
    free(ybar);
    free(gamma);
    free(pb);
    fk_mat_close(&Yc);
    fk_mat_close(&F);
    fk_mat_close(&R);
    fk_mat_close(&Mk);
    fk_mat_close(&Y);
    fk_mat_close(&KY);
    fk_mat_close(&KKY);
    fk_mat_close(&B);
    fk_mat_close(&UB);
    return rc;
}

void fk_dica_kernel_close(fk_dica_kernel *k)
{
    fk_dica_fit_close(&k->fit);
    fk_mat_close(&k->X);
    fk_mat_close(&k->Umap);
    fk_mat_close(&k->Phi);
    fk_mat_close(&k->Kc);
    fk_mat_close(&k->Z);
    free(k->colmean);
    *k = (fk_dica_kernel){0};
}

/* §5.5 `ref`: beta_k = Umap w_k has |beta_k|^2 = sum_i w_ik^2 / s_i (U orthonormal), so
 * w_k /= |beta_k| sqrt(n gamma_k) gives the reference code's unit-then-1/sqrt(n gamma) rule. */
FK_CHECKRETURN static int ref_normalise(fk_dica_kernel *k, int allow_zero, fk_err *err)
{
    fk_mat *W = &k->fit.W;
    double *s = calloc(W->rows, sizeof *s); /* s_i = |Phi column i|^2 */
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    for (size_t r = 0; r < k->n; r++)
        for (size_t i = 0; i < W->rows; i++)
            s[i] += fk_mat_get(&k->Phi, r, i) * fk_mat_get(&k->Phi, r, i);
    int rc = FK_OK;
    for (size_t c = 0; c < W->cols && rc == FK_OK; c++) {
        double b2 = 0, g = k->fit.gamma[c];
        for (size_t i = 0; i < W->rows; i++)
            b2 += fk_mat_get(W, i, c) * fk_mat_get(W, i, c) / s[i];
        if ((!(g > 0) || !(b2 > 0)) && allow_zero) {
            /* a component past the output kernel's rank (regression): kept as zero, as under
             * `constraint` (the reference code drops eigenvalues <= 1e-8 the same way) */
            for (size_t i = 0; i < W->rows; i++)
                W->data[i * W->ld + c] = 0;
            continue;
        }
        if (!(g > 0) || !(b2 > 0)) {
            rc = fk_err_set(err, FK_ENUMERIC, "dica: normalise = ref needs gamma_%zu > 0 (got %g)",
                            c + 1, g);
            break;
        }
        double scale = 1.0 / (sqrt(b2) * sqrt((double)k->n * g));
        for (size_t i = 0; i < W->rows; i++)
            W->data[i * W->ld + c] *= scale;
    }
    free(s);
    return rc;
}

int fk_dica_kernel_refit(fk_dica_kernel *k, const int *y, int C, const double *t, double sigma_y,
                         const long *dom, const fk_dica_opts *o, fk_err *err)
{
    size_t n = k->n;
    int sup = fk_dica_supervised(o->variant);
    if (sup && !y && !t)
        return fk_err_set(err, FK_EINVAL, "dica: variant %s needs labels or targets",
                          fk_dica_variant_name(o->variant));
    if (sup && !y && !(sigma_y > 0))
        return fk_err_set(err, FK_EINVAL, "dica: sigma_y must be > 0 (got %g)", sigma_y);
    fk_mat Psi = {0}, L = {0};
    fk_dica_stats st = {0};
    int rc = FK_OK;
    /* Output features: one-hot for labels (exact delta kernel), the kernel map of the
     * centred Gaussian output kernel for targets. */
    if (sup) {
        if (y) {
            rc = fk_dica_onehot(y, n, C, &Psi, err);
        } else {
            fk_mat T = fk_mat_view((double *)t, n, 1, 1);
            rc = fk_dica_gauss_gram(&T, &T, sigma_y, &L, err);
            if (rc == FK_OK) {
                center_gram(&L, NULL, NULL);
                rc = kernel_map(&L, 1, &Psi, NULL, err);
            }
        }
    }
    fk_dica_fit_close(&k->fit);
    fk_mat_close(&k->Z);
    k->direct = 0;
    fk_dica_opts od = *o;
    od.rank_check = o->rank_check && y != NULL; /* smooth regression outputs: no rank cut */
    if (rc == FK_OK && sup && !o->ref_norm && !o->kernel_map) {
        rc = refit_direct(k, &Psi, dom, &od, err);
    } else {
        if (rc == FK_OK)
            rc = ensure_map(k, err);
        if (rc == FK_OK)
            rc = fk_dica_stats_init(&st, k->Phi.cols, sup ? Psi.cols : 0, err);
        st.diag = 1; /* Phi = U diag(sqrt(s)): orthogonal columns, G = diag(s) (§5.3 step 2) */
        if (rc == FK_OK)
            rc = fk_dica_stats_add(&st, &k->Phi, sup ? &Psi : NULL, dom, err);
        od.delta = 0; /* G = diag(s) exactly: no ridge needed */
        if (rc == FK_OK)
            rc = fk_dica_solve(&st, &od, &k->fit, err);
        if (rc == FK_OK && o->ref_norm)
            rc = ref_normalise(k, !od.rank_check, err);
    }
    /* training embedding: the fit applied to the training rows in its own coordinates */
    if (rc == FK_OK)
        rc = fk_dica_project(&k->fit, k->direct ? &k->Kc : &k->Phi, NULL, &k->Z, err);
    fk_mat_close(&L);
    fk_mat_close(&Psi);
    fk_dica_stats_close(&st);
    return rc;
}

int fk_dica_kernel_fit(fk_dica_kernel *k, const fk_mat *X, const int *y, int C, const double *t,
                       double sigma_y, const long *dom, double sigma, const fk_dica_opts *o,
                       fk_err *err)
{
    *k = (fk_dica_kernel){0};
    size_t n = X->rows;
    if (n < 2)
        return fk_err_set(err, FK_EINVAL, "dica: need at least 2 samples (got %zu)", n);
    for (size_t i = 0; i < n; i++)
        if (!fk__dica_all_finite(fk_mat_row(X, i), X->cols))
            return fk_err_set(err, FK_EINVAL, "dica: input row %zu has a NaN or Inf", i);
    if (fk_dica_supervised(o->variant) && !y && !t)
        return fk_err_set(err, FK_EINVAL, "dica: variant %s needs labels or targets",
                          fk_dica_variant_name(o->variant));
    k->colmean = malloc(n * sizeof *k->colmean);
    int rc = k->colmean ? FK_OK : fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    /* The centred Gram matrix (§5.1 steps 1-2), kept: every variant solves from it, and
     * the kernel map (§5.3) is computed from it only when a variant needs the map. */
    if (rc == FK_OK)
        rc = fk_dica_gauss_gram(X, X, sigma, &k->Kc, err);
    if (rc == FK_OK)
        center_gram(&k->Kc, k->colmean, &k->grand);
    if (rc == FK_OK)
        rc = fk_mat_copy(&k->X, X) ? fk_err_set(err, FK_ENOMEM, "dica: out of memory") : FK_OK;
    k->n = n;
    k->d = X->cols;
    k->sigma = sigma;
    if (rc == FK_OK)
        rc = fk_dica_kernel_refit(k, y, C, t, sigma_y, dom, o, err);
    if (rc)
        fk_dica_kernel_close(k);
    return rc;
}

int fk_dica_kernel_project(const fk_dica_kernel *k, const fk_mat *Xt, int batch, fk_mat *Z,
                           fk_err *err)
{
    *Z = (fk_mat){0};
    if (Xt->cols != k->d)
        return fk_err_set(err, FK_EINVAL, "dica: test inputs have %zu columns, training had %zu",
                          Xt->cols, k->d);
    fk_mat Kt = {0}, F = {0};
    int rc = fk_dica_gauss_gram(Xt, &k->X, k->sigma, &Kt, err);
    size_t nt = Xt->rows, n = k->n;
    /* K~_t = (K_t - 1 c^T) H_n (train) or H_t K_t H_n (batch), §5.6. */
    double *cm = rc == FK_OK ? calloc(n, sizeof *cm) : NULL;
    if (rc == FK_OK && !cm)
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (rc == FK_OK) {
        if (batch)
            for (size_t i = 0; i < nt; i++)
                fk_axpy(n, 1.0 / (double)nt, fk_mat_row(&Kt, i), cm);
        else
            memcpy(cm, k->colmean, n * sizeof *cm);
        double g = 0;
        for (size_t j = 0; j < n; j++)
            g += cm[j] / (double)n;
        for (size_t i = 0; i < nt; i++) {
            double *r = fk_mat_row(&Kt, i), rm = 0;
            for (size_t j = 0; j < n; j++)
                rm += r[j] / (double)n;
            for (size_t j = 0; j < n; j++)
                r[j] += g - rm - cm[j];
        }
        if (!k->direct && fk_mat_init(&F, nt, k->r))
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    }
    /* direct fits take the centred kernel rows as features; map fits map them first */
    if (rc == FK_OK && !k->direct)
        rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &Kt, &k->Umap, 0.0, &F, err);
    if (rc == FK_OK)
        rc = fk_dica_project(&k->fit, k->direct ? &Kt : &F, NULL, Z, err);
    free(cm);
    fk_mat_close(&Kt);
    fk_mat_close(&F);
    return rc;
}

/* ---- direct solver (§5.2) ---- */

int fk_dica_direct(const fk_mat *K, const fk_mat *L, const long *dom, const fk_dica_opts *o,
                   double *gamma, fk_mat *Z, fk_err *err)
{
    *Z = (fk_mat){0};
    size_t n = K->rows, m = o->m;
    int sup = fk_dica_supervised(o->variant);
    if (sup && !L)
        return fk_err_set(err, FK_EINVAL, "dica: the direct solver needs L for %s",
                          fk_dica_variant_name(o->variant));
    if (m == 0 || m >= n)
        return fk_err_set(err, FK_EINVAL, "dica: m = %zu must be in [1, %zu)", m, n);
    fk_mat Kc = {0}, R = {0}, Cn = {0}, Lc = {0}, Mk = {0}, B = {0}, tmp = {0};
    long *ids = malloc(n * sizeof *ids);
    double *cnt = calloc(n, sizeof *cnt);
    int rc = (ids && cnt && !fk_mat_copy(&Kc, K) && !fk_mat_init(&R, n, n) &&
              !fk_mat_init(&Cn, n, n) && !fk_mat_init(&tmp, n, n) && !fk_mat_init(&Mk, n, n))
                 ? FK_OK
                 : fk_err_set(err, FK_ENOMEM, "dica: out of memory (direct, n=%zu)", n);
    if (rc)
        goto out;
    center_gram(&Kc, NULL, NULL);
    /* K~ Q K~ = (1/N) (M H_N)(M H_N)^T with M the per-domain row means of K~ (§5.1 step 4). */
    size_t *di = malloc(n * sizeof *di);
    if (!di) {
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        goto out;
    }
    size_t N = fk__dica_domain_index(dom, n, ids, di, cnt);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            Mk.data[i * Mk.ld + di[j]] += Kc.data[i * Kc.ld + j] / cnt[di[j]];
    free(di);
    for (size_t i = 0; i < n; i++) {
        double mean = 0;
        for (size_t k = 0; k < N; k++)
            mean += Mk.data[i * Mk.ld + k] / (double)N;
        for (size_t k = 0; k < N; k++)
            Mk.data[i * Mk.ld + k] -= mean;
    }
    fk_mat Mv = fk_mat_view(Mk.data, n, N, Mk.ld);
    rc = fk_syrk(FK_NOTRANS, o->q_weight / (double)N, &Mv, 0.0, &R, err);
    if (rc)
        goto out;
    rc = fk_mat_axpy(1.0, &Kc, &R, err);
    for (size_t i = 0; i < n; i++)
        R.data[i * R.ld + i] += o->lambda;
    /* C_num = (1/n) K~^2, supervised (1/n) L~ (L~ + n eps I)^-1 K~^2. */
    if (rc == FK_OK)
        rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0 / (double)n, &Kc, &Kc, 0.0, &Cn, err);
    if (rc == FK_OK && sup) {
        rc = fk_mat_copy(&Lc, L) ? fk_err_set(err, FK_ENOMEM, "dica: out of memory") : FK_OK;
        if (rc)
            goto out;
        center_gram(&Lc, NULL, NULL);
        /* (L~ + n eps)^-1 L~ K~^2/n = L~ (L~ + n eps)^-1 K~^2/n: they commute. */
        fk_mat_close(&tmp);
        rc = fk_mat_copy(&tmp, &Lc) ? fk_err_set(err, FK_ENOMEM, "dica: out of memory") : FK_OK;
        for (size_t i = 0; rc == FK_OK && i < n; i++)
            tmp.data[i * tmp.ld + i] += (double)n * o->eps;
        fk_mat LC;
        if (rc == FK_OK && fk_mat_init(&LC, n, n))
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        if (rc == FK_OK) {
            rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &Lc, &Cn, 0.0, &LC, err);
            lapack_int info =
                LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)n, (lapack_int)n, tmp.data,
                              (lapack_int)tmp.ld, LC.data, (lapack_int)LC.ld);
            if (rc == FK_OK && info != 0)
                rc = fk_err_set(err, FK_ENUMERIC, "dica: L~ + n eps I is not definite (%d)",
                                (int)info);
            fk_mat_close(&Cn);
            Cn = LC;
        }
    }
    if (rc)
        goto out;
    if (!sup) {
        rc = fk_eig_gen_top(&Cn, &R, m, gamma, &B, err);
    } else {
        /* A = R^-1 C_num, dgeev, top m by real part (§5.2). */
        fk_mat_close(&tmp);
        if (fk_mat_copy(&tmp, &R) || fk_mat_init(&B, n, m)) {
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
            goto out;
        }
        lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', (lapack_int)n, (lapack_int)n,
                                        tmp.data, (lapack_int)tmp.ld, Cn.data, (lapack_int)Cn.ld);
        double *wr = malloc(n * sizeof *wr), *wi = malloc(n * sizeof *wi);
        double *vr = malloc(n * n * sizeof *vr);
        size_t *ord = malloc(n * sizeof *ord);
        if (!wr || !wi || !vr || !ord)
            rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        if (rc == FK_OK && info == 0 && !fk__dica_all_finite(Cn.data, n * n))
            rc = fk_err_set(err, FK_ENUMERIC, "dica: direct solver: R^-1 C is not finite");
        if (rc == FK_OK && info == 0)
            info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'V', (lapack_int)n, Cn.data,
                                 (lapack_int)Cn.ld, wr, wi, NULL, 1, vr, (lapack_int)n);
        if (rc == FK_OK && info != 0)
            rc = fk_err_set(err, FK_ENUMERIC, "dica: direct solve failed (%d)", (int)info);
        for (size_t i = 0; rc == FK_OK && i < n; i++)
            ord[i] = i;
        for (size_t i = 1; rc == FK_OK && i < n; i++) {
            size_t v = ord[i], j = i;
            while (j > 0 && wr[ord[j - 1]] < wr[v]) {
                ord[j] = ord[j - 1];
                j--;
            }
            ord[j] = v;
        }
        for (size_t k = 0; rc == FK_OK && k < m; k++) {
            size_t j = ord[k];
            if (fabs(wi[j]) > FK__DICA_COMPLEX_TOL * fabs(wr[ord[0]])) {
                rc = fk_err_set(err, FK_ENUMERIC, "dica: complex eigenpairs (direct solver)");
                break;
            }
            size_t col = (wi[j] < 0 && j > 0) ? j - 1 : j;
            gamma[k] = wr[j];
            for (size_t i = 0; i < n; i++)
                B.data[i * B.ld + k] = vr[i * n + col];
        }
        free(wr);
        free(wi);
        free(vr);
        free(ord);
    }
    if (rc)
        goto out;
    /* beta^T R beta = 1, then Z = K~ B. */
    double *tv = malloc(n * sizeof *tv);
    if (!tv) {
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        goto out;
    }
    for (size_t k = 0; k < m; k++) {
        double q = fk__dica_quad_col(R.data, &B, k, tv);
        for (size_t i = 0; i < n; i++)
            B.data[i * B.ld + k] /= sqrt(q);
    }
    free(tv);
    if (fk_mat_init(Z, n, m))
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    else
        rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, &Kc, &B, 0.0, Z, err);
out:
    free(ids);
    free(cnt);
    fk_mat_close(&Kc);
    fk_mat_close(&R);
    fk_mat_close(&Cn);
    fk_mat_close(&Lc);
    fk_mat_close(&Mk);
    fk_mat_close(&B);
    fk_mat_close(&tmp);
    if (rc)
        fk_mat_close(Z);
    return rc;
}
