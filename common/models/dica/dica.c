/* DICA / UDICA estimator core: variants, the §7.3 sufficient statistics and the
 * finite-feature solver of spec dica.md §6 / §7.4 that every version shares. */
#include "common/models/dica/dica.h"
#include "common/models/dica/dica_int.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include "common/la/blas.h"
#include "common/la/eig.h"

static const char *const VARIANT_NAMES[4] = {"dica", "udica", "coir", "kpca"};

const char *fk_dica_variant_name(fk_dica_variant v)
{
    return (unsigned)v < 4 ? VARIANT_NAMES[v] : "?";
}

int fk_dica_supervised(fk_dica_variant v)
{
    return v == FK_DICA_DICA || v == FK_DICA_COIR;
}

void fk_dica_opts_default(fk_dica_opts *o, fk_dica_variant v, size_t m)
{
    *o = (fk_dica_opts){.variant = v,
                        .m = m,
                        .lambda = 1.0,
                        .eps = 1e-3,
                        .q_weight = 1.0,
                        .delta = 1e-8,
                        .min_domain = 2,
                        .rank_check = 1};
}

/* ---------------- statistics ---------------- */

int fk_dica_stats_init(fk_dica_stats *st, size_t D, size_t Dy, fk_err *err)
{
    *st = (fk_dica_stats){.D = D, .Dy = Dy};
    if (D == 0)
        return fk_err_set(err, FK_EINVAL, "dica: feature dimension must be positive");
    st->S = calloc(D * D, sizeof *st->S);
    if (Dy) {
        st->s_psi = calloc(Dy, sizeof *st->s_psi);
        st->C = calloc(D * Dy, sizeof *st->C);
        st->Syy = calloc(Dy * Dy, sizeof *st->Syy);
    }
    if (!st->S || (Dy && (!st->s_psi || !st->C || !st->Syy))) {
        fk_dica_stats_close(st);
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for statistics (D=%zu)", D);
    }
    return FK_OK;
}

void fk_dica_stats_close(fk_dica_stats *st)
{
    free(st->S);
    free(st->dom_id);
    free(st->dom_n);
    free(st->dom_sum);
    free(st->s_psi);
    free(st->C);
    free(st->Syy);
    *st = (fk_dica_stats){0};
}

long fk_dica_stats_domain(fk_dica_stats *st, long id, fk_err *err)
{
    for (size_t i = 0; i < st->n_dom; i++)
        if (st->dom_id[i] == id)
            return (long)i;
    if (st->n_dom == st->cap_dom) {
        size_t cap = st->cap_dom ? 2 * st->cap_dom : 8;
        long *ids = realloc(st->dom_id, cap * sizeof *ids);
        if (ids)
            st->dom_id = ids;
        double *nn = realloc(st->dom_n, cap * sizeof *nn);
        if (nn)
            st->dom_n = nn;
        double *ss = realloc(st->dom_sum, cap * st->D * sizeof *ss);
        if (ss)
            st->dom_sum = ss;
        if (!ids || !nn || !ss) {
            fk_err_set(err, FK_ENOMEM, "dica: out of memory for %zu domains", cap);
            return -1;
        }
        st->cap_dom = cap;
    }
    size_t i = st->n_dom++;
    st->dom_id[i] = id;
    st->dom_n[i] = 0;
    memset(st->dom_sum + i * st->D, 0, st->D * sizeof *st->dom_sum);
    return (long)i;
}

size_t fk__dica_domain_index(const long *dom, size_t n, long *ids, size_t *di, double *cnt)
{
    size_t N = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < N && ids[k] != dom[i])
            k++;
        if (k == N)
            ids[N++] = dom[i];
        di[i] = k;
        cnt[k] += 1;
    }
    return N;
}

int fk__dica_all_finite(const double *a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(a[i]))
            return 0;
    return 1;
}

/* A (k x k, symmetric in both triangles) += f x x^T, each product computed once and written
 * to both triangles so A stays exactly symmetric (a checkpoint keeps one triangle). */
static void sym_rank1(double *A, size_t k, double f, const double *x)
{
    for (size_t i = 0; i < k; i++) {
        double fx = f * x[i];
        for (size_t j = i; j < k; j++) {
            double v = fx * x[j];
            A[i * k + j] += v;
            if (j != i)
                A[j * k + i] += v;
        }
    }
}

void fk_dica_stats_sum_phi(const fk_dica_stats *st, double *out)
{
    memset(out, 0, st->D * sizeof *out);
    for (size_t k = 0; k < st->n_dom; k++)
        fk_axpy(st->D, 1.0, st->dom_sum + k * st->D, out);
}

int fk_dica_stats_shift(fk_dica_stats *st, double nb, const double *sum_phi, const double *sum_psi,
                        fk_err *err)
{
    size_t D = st->D, Dy = st->Dy;
    double na = st->n;
    if (!(na > 0) || !(nb > 0))
        return FK_OK;
    double *dx = malloc((D + Dy + 1) * sizeof *dx), *dy = dx ? dx + D : NULL;
    if (!dx)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory (D=%zu)", D);
    fk_dica_stats_sum_phi(st, dx);
    for (size_t j = 0; j < D; j++)
        dx[j] = dx[j] / na - sum_phi[j] / nb;
    for (size_t j = 0; j < Dy; j++)
        dy[j] = st->s_psi[j] / na - sum_psi[j] / nb;
    double f = na * nb / (na + nb);
    if (st->diag) {
        for (size_t j = 0; j < D; j++)
            st->S[j * D + j] += f * dx[j] * dx[j];
    } else {
        sym_rank1(st->S, D, f, dx);
    }
    if (Dy) {
        cblas_dger(CblasRowMajor, (int)D, (int)Dy, f, dx, 1, dy, 1, st->C, (int)Dy);
        sym_rank1(st->Syy, Dy, f, dy);
    }
    free(dx);
    return FK_OK;
}

/* Rows of A (n x k) minus their column means into Ac (initialised here); the sums into sum. */
FK_CHECKRETURN static int centred_copy(const fk_mat *A, fk_mat *Ac, double *sum, fk_err *err)
{
    size_t n = A->rows, k = A->cols;
    memset(sum, 0, k * sizeof *sum);
    for (size_t i = 0; i < n; i++)
        fk_axpy(k, 1.0, fk_mat_row(A, i), sum);
    if (fk_mat_init(Ac, n, k))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for %zu x %zu centred rows", n, k);
    for (size_t i = 0; i < n; i++) {
        const double *a = fk_mat_row(A, i);
        double *c = fk_mat_row(Ac, i);
        for (size_t j = 0; j < k; j++)
            c[j] = a[j] - sum[j] / (double)n;
    }
    return FK_OK;
}

int fk_dica_stats_add(fk_dica_stats *st, const fk_mat *Phi, const fk_mat *Psi, const long *dom,
                      fk_err *err)
{
    size_t n = Phi->rows, D = st->D, Dy = st->Dy;
    if (Phi->cols != D)
        return fk_err_set(err, FK_EINVAL, "dica: features have %zu columns, statistics expect %zu",
                          Phi->cols, D);
    if ((Dy > 0) != (Psi != NULL) || (Psi && (Psi->cols != Dy || Psi->rows != n)))
        return fk_err_set(err, FK_EINVAL, "dica: outputs must be %zu x %zu for these statistics", n,
                          Dy);
    for (size_t i = 0; i < n; i++) {
        if (!fk__dica_all_finite(fk_mat_row(Phi, i), D) ||
            (Psi && !fk__dica_all_finite(fk_mat_row(Psi, i), Dy)))
            return fk_err_set(err, FK_EINVAL, "dica: row %zu has a NaN or Inf feature", i);
        if (dom[i] < 0)
            return fk_err_set(err, FK_EINVAL, "dica: row %zu has negative domain id %ld", i,
                              dom[i]);
    }
    if (n == 0)
        return FK_OK;
    /* Two passes: the batch's means, then its second moments about them by BLAS (S +=
     * Pc^T Pc, only the diagonal when it is known to be diagonal: the n D^2 syrk would
     * compute zeros; C += Pc^T Yc, Syy += Yc^T Yc), joined to st by Chan's rule. */
    fk_mat Pc = {0}, Yc = {0};
    double *sx = malloc((D + Dy + 1) * sizeof *sx), *sy = sx ? sx + D : NULL;
    int rc = sx ? centred_copy(Phi, &Pc, sx, err)
                : fk_err_set(err, FK_ENOMEM, "dica: out of memory (D=%zu)", D);
    if (rc == FK_OK && Psi)
        rc = centred_copy(Psi, &Yc, sy, err);
    if (rc == FK_OK)
        rc = fk_dica_stats_shift(st, (double)n, sx, Psi ? sy : NULL, err);
    fk_mat S = fk_mat_view(st->S, D, D, D);
    if (rc == FK_OK && st->diag) { /* column sums of squares onto the diagonal */
        for (size_t j = 0; j < D; j++)
            sx[j] = 0;
        for (size_t i = 0; i < n; i++) {
            const double *r = fk_mat_row(&Pc, i);
            for (size_t j = 0; j < D; j++)
                sx[j] += r[j] * r[j];
        }
        for (size_t j = 0; j < D; j++)
            st->S[j * D + j] += sx[j];
    } else if (rc == FK_OK) {
        rc = fk_syrk(FK_TRANS, 1.0, &Pc, 1.0, &S, err);
    }
    if (rc == FK_OK && Psi) {
        fk_mat C = fk_mat_view(st->C, D, Dy, Dy), Y = fk_mat_view(st->Syy, Dy, Dy, Dy);
        rc = fk_gemm(FK_TRANS, FK_NOTRANS, 1.0, &Pc, &Yc, 1.0, &C, err);
        if (rc == FK_OK)
            rc = fk_syrk(FK_TRANS, 1.0, &Yc, 1.0, &Y, err);
        if (rc == FK_OK)
            fk_axpy(Dy, 1.0, sy, st->s_psi);
    }
    free(sx);
    fk_mat_close(&Pc);
    fk_mat_close(&Yc);
    /* First moments per domain, in row order. */
    for (size_t i = 0; rc == FK_OK && i < n; i++) {
        long k = fk_dica_stats_domain(st, dom[i], err);
        if (k < 0)
            return FK_ENOMEM;
        st->dom_n[k] += 1.0;
        fk_axpy(D, 1.0, fk_mat_row(Phi, i), st->dom_sum + (size_t)k * D);
    }
    st->n += rc == FK_OK ? (double)n : 0.0;
    return rc;
}

int fk_dica_stats_merge(fk_dica_stats *st, const fk_dica_stats *o, fk_err *err)
{
    if (o->diag != st->diag)
        return fk_err_set(err, FK_EINVAL, "dica: statistics with and without a diagonal second "
                                          "moment cannot be added");
    if (o->D != st->D || o->Dy != st->Dy)
        return fk_err_set(err, FK_EINVAL,
                          "dica: statistics of dimension %zu/%zu cannot be added to %zu/%zu", o->D,
                          o->Dy, st->D, st->Dy);
    size_t D = st->D, Dy = st->Dy;
    double *so = malloc(D * sizeof *so);
    if (!so)
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory (D=%zu)", D);
    fk_dica_stats_sum_phi(o, so);
    int rc = fk_dica_stats_shift(st, o->n, so, o->s_psi, err);
    free(so);
    if (rc)
        return rc;
    fk_axpy(D * D, 1.0, o->S, st->S);
    if (Dy) {
        fk_axpy(Dy, 1.0, o->s_psi, st->s_psi);
        fk_axpy(D * Dy, 1.0, o->C, st->C);
        fk_axpy(Dy * Dy, 1.0, o->Syy, st->Syy);
    }
    for (size_t i = 0; i < o->n_dom; i++) {
        long k = fk_dica_stats_domain(st, o->dom_id[i], err);
        if (k < 0)
            return FK_ENOMEM;
        st->dom_n[k] += o->dom_n[i];
        fk_axpy(D, 1.0, o->dom_sum + i * D, st->dom_sum + (size_t)k * D);
    }
    st->n += o->n;
    return FK_OK;
}

/* ---------------- the finite-feature solver (§6, §7.4) ---------------- */

void fk_dica_fit_close(fk_dica_fit *f)
{
    fk_mat_close(&f->W);
    free(f->gamma);
    free(f->phi_bar);
    *f = (fk_dica_fit){0};
}

/* Insertion sort of domain indices by id (n is the number of domains, small). */
static void sort_by_id(const long *ids, size_t *idx, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        size_t v = idx[i], j = i;
        while (j > 0 && ids[idx[j - 1]] > ids[v]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = v;
    }
}

/* Symmetric inverse square root (A + eps I)^{-1/2} of a Dy x Dy matrix, in place. */
int fk__dica_inv_sqrt_sym(double *A, size_t k, double eps, fk_err *err)
{
    double *w = malloc(k * sizeof *w), *V = malloc(k * k * sizeof *V);
    if (!w || !V) {
        free(w);
        free(V);
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory (output dimension %zu)", k);
    }
    memcpy(V, A, k * k * sizeof *V);
    /* LAPACK's scaling of out-of-range input misbehaves on Inf: refuse it first. */
    if (!fk__dica_all_finite(V, k * k)) {
        free(w);
        free(V);
        return fk_err_set(err, FK_ENUMERIC, "dica: the output covariance is not finite");
    }
    lapack_int info =
        LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', (lapack_int)k, V, (lapack_int)k, w);
    int rc = FK_OK;
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC, "dica: dsyevd on the output covariance failed (%d)",
                        (int)info);
    } else {
        for (size_t i = 0; i < k; i++)
            for (size_t j = 0; j < k; j++) {
                double s = 0;
                for (size_t l = 0; l < k; l++) {
                    double e = w[l] > 0 ? w[l] : 0.0;
                    s += V[i * k + l] * V[j * k + l] / sqrt(e + eps);
                }
                A[i * k + j] = s;
            }
    }
    free(w);
    free(V);
    return rc;
}

typedef struct solve_ws {
    double *phibar, *G, *Ginv, *P, *Pf, *F, *Y1, *GY, *T, *tmp;
    size_t *dom_idx;
} solve_ws;

static void ws_free(solve_ws *w)
{
    free(w->phibar);
    free(w->G);
    free(w->Ginv);
    free(w->P);
    free(w->Pf);
    free(w->F);
    free(w->Y1);
    free(w->GY);
    free(w->T);
    free(w->tmp);
    free(w->dom_idx);
}

FK_CHECKRETURN static int check_opts(const fk_dica_opts *o, const fk_dica_stats *st, fk_err *err)
{
    if (!(o->lambda > 0) || !isfinite(o->lambda))
        return fk_err_set(err, FK_EINVAL, "dica: lambda must be > 0 (got %g)", o->lambda);
    if (fk_dica_supervised(o->variant) && (!(o->eps > 0) || !isfinite(o->eps)))
        return fk_err_set(err, FK_EINVAL, "dica: eps must be > 0 (got %g)", o->eps);
    if (!(o->q_weight >= 0) || !isfinite(o->q_weight))
        return fk_err_set(err, FK_EINVAL, "dica: q_weight must be >= 0 (got %g)", o->q_weight);
    if (!(o->delta >= 0))
        return fk_err_set(err, FK_EINVAL, "dica: delta must be >= 0 (got %g)", o->delta);
    if (o->m == 0 || o->m >= st->D)
        return fk_err_set(err, FK_EINVAL,
                          "dica: m = %zu components must be in [1, %zu) (the feature rank r = %zu)",
                          o->m, st->D, st->D);
    if (fk_dica_supervised(o->variant) && st->Dy == 0)
        return fk_err_set(err, FK_EINVAL, "dica: variant %s needs outputs (labels or targets)",
                          fk_dica_variant_name(o->variant));
    return FK_OK;
}

/* w^T P w for column k of W (D x m row-major). */
double fk__dica_quad_col(const double *P, const fk_mat *W, size_t k, double *tmp)
{
    size_t D = W->rows;
    for (size_t i = 0; i < D; i++)
        tmp[i] = W->data[i * W->ld + k];
    double s = 0;
    for (size_t i = 0; i < D; i++)
        s += tmp[i] * cblas_ddot((int)D, P + i * D, 1, tmp, 1);
    return s;
}

int fk__dica_top_real(double *T, size_t Dy, const double *Y, size_t rows, size_t m, int rank_check,
                      double *gamma, fk_mat *W, fk_err *err)
{
    if (Dy == 0)
        return fk_err_set(err, FK_EINVAL, "dica: supervised variant without outputs");
    if (!fk__dica_all_finite(T, Dy * Dy)) /* dgeev's scaling breaks on Inf */
        return fk_err_set(err, FK_ENUMERIC,
                          "dica: the reduced %zu x %zu problem is not finite (statistics out of "
                          "range)",
                          Dy, Dy);
    double *wr = malloc(Dy * sizeof *wr), *wi = malloc(Dy * sizeof *wi);
    double *vr = malloc(Dy * Dy * sizeof *vr);
    size_t *ord = malloc(Dy * sizeof *ord);
    int rc = FK_OK;
    if (!wr || !wi || !vr || !ord) {
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory (Dy=%zu)", Dy);
        goto out;
    }
    lapack_int info = LAPACKE_dgeev(LAPACK_ROW_MAJOR, 'N', 'V', (lapack_int)Dy, T, (lapack_int)Dy,
                                    wr, wi, NULL, 1, vr, (lapack_int)Dy);
    if (info != 0) {
        rc =
            fk_err_set(err, FK_ENUMERIC, "dica: dgeev on the %zu x %zu reduced problem failed (%d)",
                       Dy, Dy, (int)info);
        goto out;
    }
    /* Order by real part, descending; check the rank and the imaginary parts. */
    for (size_t i = 0; i < Dy; i++)
        ord[i] = i;
    for (size_t i = 1; i < Dy; i++) {
        size_t v = ord[i], j = i;
        while (j > 0 && wr[ord[j - 1]] < wr[v]) {
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = v;
    }
    double g1 = fabs(wr[ord[0]]);
    size_t rank = 0;
    for (size_t i = 0; i < Dy; i++)
        rank += wr[ord[i]] > FK__DICA_TAU_RANK * g1;
    if (rank_check && m > rank) {
        rc = fk_err_set(err, FK_EINVAL,
                        "dica: m = %zu exceeds the rank of the output kernel (%zu non-zero "
                        "eigenvalues; C classes give at most C-1); lower m",
                        m, rank);
        goto out;
    }
    /* Without the rank check (smooth regression outputs) components beyond the Dy of the
     * outputs stay zero: W column 0, gamma 0 (the spec's --allow-zero-components). */
    for (size_t k = 0; k < m && k < Dy && rc == FK_OK; k++) {
        size_t j = ord[k];
        if (fabs(wi[j]) > FK__DICA_COMPLEX_TOL * g1) {
            rc = fk_err_set(err, FK_ENUMERIC,
                            "dica: complex eigenpairs among the leading %zu (gamma_%zu = %g%+gi)",
                            m, k + 1, wr[j], wi[j]);
            break;
        }
        size_t col = (wi[j] < 0 && j > 0) ? j - 1 : j; /* real part of a conjugate pair */
        gamma[k] = wr[j];
        /* column k of W = Y a */
        for (size_t i = 0; i < rows; i++) {
            double s = 0;
            for (size_t l = 0; l < Dy; l++)
                s += Y[i * Dy + l] * vr[l * Dy + col];
            W->data[i * W->ld + k] = s;
        }
    }
out:
    free(wr);
    free(wi);
    free(vr);
    free(ord);
    return rc;
}

/* DICA/COIR: the small non-symmetric problem (S3) and W = P^-1 G^-1 F a. */
FK_CHECKRETURN static int solve_supervised(const fk_dica_stats *st, const fk_dica_opts *o, solve_ws *w,
                            fk_dica_fit *fit, fk_err *err)
{
    size_t D = st->D, Dy = st->Dy, m = o->m;
    double n = st->n;
    if (Dy == 0)
        return fk_err_set(err, FK_EINVAL, "dica: supervised variant without outputs");
    /* Centred covariances (§7.4 step 4) and F = C_xy (C_yy + eps I)^-1/2. */
    double *Cyy = malloc(Dy * Dy * sizeof *Cyy);
    double *Cxy = malloc(D * Dy * sizeof *Cxy);
    w->F = malloc(D * Dy * sizeof *w->F);
    w->Y1 = malloc(D * Dy * sizeof *w->Y1);
    w->GY = malloc(D * Dy * sizeof *w->GY);
    w->T = malloc(Dy * Dy * sizeof *w->T);
    int rc = FK_OK;
    if (!Cyy || !Cxy || !w->F || !w->Y1 || !w->GY || !w->T) {
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory (D=%zu, Dy=%zu)", D, Dy);
        goto out;
    }
    /* the statistics are centred already (Chan's rule), so no mean is subtracted here */
    for (size_t i = 0; i < Dy * Dy; i++)
        Cyy[i] = st->Syy[i] / n;
    for (size_t i = 0; i < D * Dy; i++)
        Cxy[i] = st->C[i] / n;
    rc = fk__dica_inv_sqrt_sym(Cyy, Dy, o->eps, err);
    if (rc)
        goto out;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)Dy, (int)Dy, 1.0, Cxy,
                (int)Dy, Cyy, (int)Dy, 0.0, w->F, (int)Dy);
    /* Y1 = P^-1 G^-1 F, T = F^T G Y1 (§7.4 step 6). */
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)Dy, (int)D, 1.0, w->Ginv,
                (int)D, w->F, (int)Dy, 0.0, w->Y1, (int)Dy);
    lapack_int info = LAPACKE_dpotrs(LAPACK_ROW_MAJOR, 'U', (lapack_int)D, (lapack_int)Dy, w->Pf,
                                     (lapack_int)D, w->Y1, (lapack_int)Dy);
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC, "dica: solve with P failed (%d)", (int)info);
        goto out;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)D, (int)Dy, (int)D, 1.0, w->G,
                (int)D, w->Y1, (int)Dy, 0.0, w->GY, (int)Dy);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Dy, (int)Dy, (int)D, 1.0, w->F,
                (int)Dy, w->GY, (int)Dy, 0.0, w->T, (int)Dy);
    rc = fk__dica_top_real(w->T, Dy, w->Y1, D, m, o->rank_check, fit->gamma, &fit->W, err);
out:
    free(Cyy);
    free(Cxy);
    return rc;
}

int fk_dica_solve(const fk_dica_stats *st, const fk_dica_opts *o, fk_dica_fit *fit, fk_err *err)
{
    *fit = (fk_dica_fit){0};
    int rc = check_opts(o, st, err);
    if (rc)
        return rc;
    size_t D = st->D, m = o->m;
    solve_ws w = {0};
    w.dom_idx = malloc((st->n_dom + 1) * sizeof *w.dom_idx);
    w.phibar = calloc(D, sizeof *w.phibar);
    w.G = malloc(D * D * sizeof *w.G);
    w.Ginv = malloc(D * D * sizeof *w.Ginv);
    w.P = calloc(D * D, sizeof *w.P);
    w.Pf = malloc(D * D * sizeof *w.Pf);
    w.tmp = malloc(D * sizeof *w.tmp);
    fit->gamma = calloc(m, sizeof *fit->gamma);
    if (!w.dom_idx || !w.phibar || !w.G || !w.Ginv || !w.P || !w.Pf || !w.tmp || !fit->gamma ||
        fk_mat_init(&fit->W, D, m)) {
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory for the D = %zu solve", D);
        goto out;
    }
    /* Domains in increasing id order so the result does not depend on arrival order. */
    size_t N = 0;
    for (size_t i = 0; i < st->n_dom; i++) {
        if (st->dom_n[i] <= 0)
            continue;
        if (st->dom_n[i] < o->min_domain) {
            rc = fk_err_set(err, FK_EINVAL,
                            "dica: domain %ld has %.0f samples, below the minimum %.0f; merge or "
                            "drop it",
                            st->dom_id[i], st->dom_n[i], o->min_domain);
            goto out;
        }
        w.dom_idx[N++] = i;
    }
    sort_by_id(st->dom_id, w.dom_idx, N);
    if (N == 0 || !(st->n >= 2)) {
        rc = fk_err_set(err, FK_EINVAL, "dica: no domain with samples to solve on");
        goto out;
    }
    double n = st->n;
    /* phi_bar and the centred second moment G (§7.4 steps 1-2). */
    for (size_t k = 0; k < N; k++)
        fk_axpy(D, 1.0, st->dom_sum + w.dom_idx[k] * D, w.phibar);
    fk_scal(D, 1.0 / n, w.phibar);
    /* G is S itself: the statistics hold the second moment about phi_bar (two passes and
     * Chan's rule, fk_dica_stats_add), not sum phi phi^T - n phi_bar phi_bar^T */
    if (st->diag) { /* G = diag(s) (§5.3 step 2): keep it exactly diagonal */
        memset(w.G, 0, D * D * sizeof *w.G);
        for (size_t i = 0; i < D; i++)
            w.G[i * D + i] = st->S[i * D + i];
    } else {
        memcpy(w.G, st->S, D * D * sizeof *w.G);
    }
    double tr = 0;
    for (size_t i = 0; i < D; i++)
        tr += w.G[i * D + i];
    if (!(tr > 0) || !isfinite(tr)) {
        rc = fk_err_set(err, FK_ENUMERIC, "dica: the feature covariance is zero or not finite");
        goto out;
    }
    for (size_t i = 0; i < D; i++)
        w.G[i * D + i] += o->delta * tr / (double)D;
    /* S_Q = (1/N) sum (mu_i - mubar)(mu_i - mubar)^T (S1), into P, scaled by q_weight. */
    double *Mc = malloc(N * D * sizeof *Mc);
    if (!Mc) {
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
        goto out;
    }
    memset(w.tmp, 0, D * sizeof *w.tmp);
    for (size_t k = 0; k < N; k++) {
        size_t i = w.dom_idx[k];
        for (size_t j = 0; j < D; j++)
            Mc[k * D + j] = st->dom_sum[i * D + j] / st->dom_n[i];
        fk_axpy(D, 1.0 / (double)N, Mc + k * D, w.tmp);
    }
    double dvar = 0;
    for (size_t k = 0; k < N; k++) {
        fk_axpy(D, -1.0, w.tmp, Mc + k * D);
        dvar += fk_dot(D, Mc + k * D, Mc + k * D);
    }
    fit->dvar_in = dvar / (double)N;
    if (o->q_weight > 0)
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, (int)D, (int)N, o->q_weight / (double)N,
                    Mc, (int)D, 0.0, w.P, (int)D);
    free(Mc);
    /* G^-1 by Cholesky (§7.4 step 5); P = q S_Q + I + lambda G^-1 (upper triangle). */
    memcpy(w.Ginv, w.G, D * D * sizeof *w.Ginv);
    lapack_int info = 0;
    if (st->diag) { /* diagonal G: its inverse without the D^3 Cholesky */
        for (size_t i = 0; i < D && info == 0; i++) {
            double g = w.G[i * D + i];
            if (!(g > 0) || !isfinite(g))
                info = (lapack_int)i + 1;
            else
                w.Ginv[i * D + i] = 1.0 / g;
        }
    } else {
        info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', (lapack_int)D, w.Ginv, (lapack_int)D);
        if (info == 0)
            info = LAPACKE_dpotri(LAPACK_ROW_MAJOR, 'U', (lapack_int)D, w.Ginv, (lapack_int)D);
    }
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC,
                        "dica: the feature covariance G is not positive definite (minor %d); "
                        "raise delta or use fewer features",
                        (int)info);
        goto out;
    }
    for (size_t i = 0; i < D; i++)
        for (size_t j = 0; j < i; j++)
            w.Ginv[i * D + j] = w.Ginv[j * D + i];
    for (size_t i = 0; i < D; i++) {
        for (size_t j = i; j < D; j++)
            w.P[i * D + j] += o->lambda * w.Ginv[i * D + j];
        w.P[i * D + i] += 1.0;
        for (size_t j = 0; j < i; j++)
            w.P[i * D + j] = w.P[j * D + i];
    }
    memcpy(w.Pf, w.P, D * D * sizeof *w.Pf);
    info = LAPACKE_dpotrf(LAPACK_ROW_MAJOR, 'U', (lapack_int)D, w.Pf, (lapack_int)D);
    if (info != 0) {
        rc = fk_err_set(err, FK_ENUMERIC, "dica: P is not positive definite (minor %d)", (int)info);
        goto out;
    }
    if (fk_dica_supervised(o->variant)) {
        rc = solve_supervised(st, o, &w, fit, err);
    } else {
        /* UDICA/KPCA: (1/n) G W = P W Gamma (S4), symmetric-definite. */
        fk_mat A = fk_mat_view(w.G, D, D, D), B = fk_mat_view(w.P, D, D, D);
        fk_mat Wt;
        rc = fk_mat_scal(1.0 / n, &A, err);
        if (rc == FK_OK)
            rc = fk_eig_gen_top(&A, &B, m, fit->gamma, &Wt, err);
        if (rc == FK_OK) {
            for (size_t i = 0; i < D; i++)
                memcpy(fk_mat_row(&fit->W, i), fk_mat_row(&Wt, i), m * sizeof(double));
            fk_mat_close(&Wt);
        }
    }
    if (rc)
        goto out;
    /* Normalise w^T P w = 1 (§5.5 constraint), then a deterministic sign (§7.4 step 7). */
    for (size_t k = 0; k < m; k++) {
        double q = fk__dica_quad_col(w.P, &fit->W, k, w.tmp);
        if (q == 0 && !o->rank_check)
            continue; /* a zero component (m above the output rank), kept as zero */
        if (!(q > 0) || !isfinite(q)) {
            rc = fk_err_set(err, FK_ENUMERIC, "dica: component %zu has zero norm", k + 1);
            goto out;
        }
        double s = 1.0 / sqrt(q);
        for (size_t i = 0; i < D; i++)
            fit->W.data[i * fit->W.ld + k] *= s;
    }
    fk_eig_fix_signs(&fit->W);
    fit->D = D;
    fit->m = m;
    fit->n_domains = (int)N;
    fit->phi_bar = w.phibar;
    w.phibar = NULL;
out:
    ws_free(&w);
    if (rc)
        fk_dica_fit_close(fit);
    return rc;
}

int fk_dica_project(const fk_dica_fit *f, const fk_mat *Phi, const double *center, fk_mat *Z,
                    fk_err *err)
{
    *Z = (fk_mat){0};
    if (Phi->cols != f->D)
        return fk_err_set(err, FK_EINVAL, "dica: features have %zu columns, the fit has %zu",
                          Phi->cols, f->D);
    const double *c = center ? center : f->phi_bar;
    if (fk_mat_init(Z, Phi->rows, f->m))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for %zu projections", Phi->rows);
    int rc = fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, Phi, &f->W, 0.0, Z, err);
    /* subtract c^T W from every row */
    double *cw = calloc(f->m, sizeof *cw);
    if (!cw)
        rc = fk_err_set(err, FK_ENOMEM, "dica: out of memory");
    if (rc == FK_OK)
        rc = fk_gemv(FK_TRANS, 1.0, &f->W, c, f->D, 0.0, cw, f->m, err);
    if (rc == FK_OK) {
        for (size_t i = 0; i < Z->rows; i++)
            fk_axpy(f->m, -1.0, cw, fk_mat_row(Z, i));
    }
    free(cw);
    if (rc)
        fk_mat_close(Z);
    return rc;
}

double fk_dica_domain_variance(const fk_mat *Z, const long *dom)
{
    size_t n = Z->rows, m = Z->cols, *di = malloc(n * sizeof *di);
    long *ids = malloc(n * sizeof *ids);
    double *cnt = calloc(n, sizeof *cnt), *mean = calloc(n * m, sizeof *mean);
    double *bar = calloc(m, sizeof *bar), v = NAN;
    if (!di || !ids || !cnt || !mean || !bar)
        goto out;
    size_t N = fk__dica_domain_index(dom, n, ids, di, cnt);
    for (size_t i = 0; i < n; i++)
        fk_axpy(m, 1.0, fk_mat_row(Z, i), mean + di[i] * m);
    for (size_t k = 0; k < N; k++) {
        fk_scal(m, 1.0 / cnt[k], mean + k * m);
        fk_axpy(m, 1.0 / (double)N, mean + k * m, bar);
    }
    v = 0;
    for (size_t k = 0; k < N; k++) {
        fk_axpy(m, -1.0, bar, mean + k * m);
        v += fk_dot(m, mean + k * m, mean + k * m);
    }
    v /= (double)N;
out:
    free(di);
    free(ids);
    free(cnt);
    free(mean);
    free(bar);
    return v;
}

int fk_dica_onehot(const int *y, size_t n, int C, fk_mat *Psi, fk_err *err)
{
    *Psi = (fk_mat){0};
    if (C < 1)
        return fk_err_set(err, FK_EINVAL, "dica: need at least one class (got %d)", C);
    if (fk_mat_init(Psi, n, (size_t)C))
        return fk_err_set(err, FK_ENOMEM, "dica: out of memory for one-hot outputs");
    for (size_t i = 0; i < n; i++) {
        if (y[i] < 0 || y[i] >= C) {
            fk_mat_close(Psi);
            return fk_err_set(err, FK_EINVAL, "dica: label %d of sample %zu is outside [0, %d)",
                              y[i], i, C);
        }
        fk_mat_set(Psi, i, (size_t)y[i], 1.0);
    }
    return FK_OK;
}
