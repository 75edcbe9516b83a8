/* From alpha on the atoms to a discrete model (spec §3.8): support model, bumps, one kernel
 * per bump at its peak, optional least-squares refit; and model evaluation. Also the storage
 * of a fit and of a model. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/sfl/sfl.h"

/* A fit of any of the solvers (sfl.c, sfl_alg1.c, sfl_ah.c): here, below them all, so that
 * none calls back into another for its storage. */
void fk_sfl_fit_close(fk_sfl_fit *f)
{
    if (!f)
        return;
    free(f->lambda);
    free(f->alpha);
    free(f->f);
    memset(f, 0, sizeof *f);
}

void fk_sfl_model_close(fk_sfl_model *m)
{
    if (!m)
        return;
    free(m->s);
    free(m->w);
    free(m->c);
    memset(m, 0, sizeof *m);
}

FK_CHECKRETURN static int model_alloc(fk_sfl_model *m, size_t K, int p, fk_err *err)
{
    memset(m, 0, sizeof *m);
    m->K = K;
    m->p = p;
    m->s = malloc((K ? K : 1) * (size_t)p * sizeof(double));
    m->w = malloc((K ? K : 1) * sizeof(double));
    m->c = malloc((K ? K : 1) * sizeof(double));
    if (!m->s || !m->w || !m->c) {
        fk_sfl_model_close(m);
        return fk_err_set(err, FK_ENOMEM, "sfl model: out of memory for %zu kernels", K);
    }
    return FK_OK;
}

int fk_sfl_model_support(const fk_sfl_atoms *a, const double *alpha, fk_sfl_model *m,
                         fk_err *err)
{
    size_t K = 0, p = (size_t)a->p;
    for (size_t j = 0; j < a->J; j++)
        K += alpha[j] != 0.0;
    int rc = model_alloc(m, K, a->p, err);
    if (rc)
        return rc;
    size_t k = 0;
    for (size_t j = 0; j < a->J; j++)
        if (alpha[j] != 0.0) {
            memcpy(m->s + k * p, a->s + j * p, p * sizeof(double));
            m->w[k] = a->w[j];
            m->c[k++] = a->v[j] * alpha[j];
        }
    return FK_OK;
}

/* Bumps on the grid: every support atom climbs to its steepest same-sign neighbour (largest
 * |alpha| among the 3^(p+1) - 1 grid neighbours) until a local maximum; a bump is the basin of
 * one local maximum. Within a connected same-sign component this splits hills that share a
 * ridge (E2.1: a blob over several widths holding several kernels), and gives exactly the
 * component when it has one maximum. */
FK_CHECKRETURN static int bumps_grid(const fk_sfl_atoms *a, const double *alpha, int *label, size_t *n_out,
                      fk_err *err)
{
    size_t J = a->J, D = (size_t)a->p + 1, n = 0, noff = 1;
    for (size_t d = 0; d < D; d++)
        noff *= 3;
    size_t *up = malloc((J ? J : 1) * sizeof *up);
    if (!up)
        return fk_err_set(err, FK_ENOMEM, "sfl bumps: out of memory");
    for (size_t j = 0; j < J; j++) {
        up[j] = j;
        if (alpha[j] == 0.0)
            continue;
        size_t c[FK_SFL_GRID_MAX_P + 1], r = j;
        for (size_t d = D; d-- > 0;) { /* grid coordinates of j */
            c[d] = r % a->dims[d];
            r /= a->dims[d];
        }
        double best = fabs(alpha[j]);
        for (size_t o = 0; o < noff; o++) { /* the 3^(p+1) - 1 neighbours */
            size_t q = o, nb = 0;
            int ok = 1;
            for (size_t d = 0; d < D; d++) {
                long cd = (long)c[d] + (long)(q % 3) - 1;
                q /= 3;
                if (cd < 0 || cd >= (long)a->dims[d])
                    ok = 0;
                nb = nb * a->dims[d] + (size_t)(cd < 0 ? 0 : cd);
            }
            if (!ok || nb == j || alpha[nb] == 0.0 || (alpha[nb] > 0) != (alpha[j] > 0))
                continue;
            double v = fabs(alpha[nb]);
            if (v > best || (v == best && nb < up[j])) { /* ties go to the lower index */
                best = v;
                up[j] = nb;
            }
        }
    }
    for (size_t j = 0; j < J; j++) /* roots (local maxima) get the bump numbers */
        if (alpha[j] != 0.0 && up[j] == j)
            label[j] = (int)n++;
    for (size_t j = 0; j < J; j++) {
        if (alpha[j] == 0.0)
            continue;
        size_t r = j;
        for (size_t steps = 0; up[r] != r && steps < J; steps++) /* strictly uphill: ends */
            r = up[r];
        label[j] = label[r];
    }
    free(up);
    *n_out = n;
    return FK_OK;
}

typedef struct ranked {
    double a;
    size_t j;
} ranked;

static int by_abs_desc(const void *x, const void *y)
{
    const ranked *u = x, *v = y;
    return u->a < v->a ? 1 : u->a > v->a ? -1 : (u->j > v->j) - (u->j < v->j);
}

/* Greedy non-maximum suppression for unstructured atoms. */
FK_CHECKRETURN static int bumps_nms(const fk_sfl_atoms *a, const double *alpha, double r_nms, int *label,
                     size_t *n_out, fk_err *err)
{
    size_t J = a->J, p = (size_t)a->p, m = 0, n = 0;
    ranked *ord = malloc((J ? J : 1) * sizeof *ord);
    size_t *acc = malloc((J ? J : 1) * sizeof *acc);
    if (!ord || !acc) {
        free(ord);
        free(acc);
        return fk_err_set(err, FK_ENOMEM, "sfl bumps: out of memory");
    }
    for (size_t j = 0; j < J; j++)
        if (alpha[j] != 0.0)
            ord[m++] = (ranked){fabs(alpha[j]), j};
    qsort(ord, m, sizeof *ord, by_abs_desc);
    for (size_t i = 0; i < m; i++) {
        size_t j = ord[i].j;
        int hit = -1;
        for (size_t k = 0; k < n && hit < 0; k++) {
            size_t q = acc[k];
            if ((alpha[q] > 0) != (alpha[j] > 0) || fabs(a->w[q] - a->w[j]) > a->dw * (1 + 1e-9))
                continue;
            double d2 = 0, r = r_nms * fmin(a->w[q], a->w[j]);
            for (size_t t = 0; t < p; t++)
                d2 += (a->s[q * p + t] - a->s[j * p + t]) * (a->s[q * p + t] - a->s[j * p + t]);
            if (d2 <= r * r)
                hit = label[q];
        }
        if (hit >= 0) {
            label[j] = hit;
        } else {
            label[j] = (int)n;
            acc[n++] = j;
        }
    }
    free(ord);
    free(acc);
    *n_out = n;
    return FK_OK;
}

int fk_sfl_bumps(const fk_sfl_atoms *a, const double *alpha, double r_nms, int *label,
                 size_t *n_bumps, fk_err *err)
{
    for (size_t j = 0; j < a->J; j++)
        label[j] = -1;
    return a->grid ? bumps_grid(a, alpha, label, n_bumps, err)
                   : bumps_nms(a, alpha, r_nms, label, n_bumps, err);
}

void fk_sfl_predict(const fk_sfl_model *m, const double *X, size_t n, double *f)
{
    size_t p = (size_t)m->p;
    for (size_t i = 0; i < n; i++) {
        const double *x = X + i * p;
        double acc = 0;
        for (size_t k = 0; k < m->K; k++) {
            double d2 = 0;
            for (size_t t = 0; t < p; t++) {
                double u = x[t] - m->s[k * p + t];
                d2 += u * u;
            }
            acc += m->c[k] * exp(-d2 / (2.0 * m->w[k] * m->w[k]));
        }
        f[i] = acc;
    }
}

/* Least squares of y on the model's kernels, ridge 1e-8, by Cholesky (dposv). */
FK_CHECKRETURN static int refit(fk_sfl_model *m, const double *X, const double *y, size_t N, fk_err *err)
{
    size_t K = m->K, p = (size_t)m->p;
    if (K == 0)
        return FK_OK;
    double *A = malloc(N * K * sizeof *A), *G = malloc(K * K * sizeof *G);
    if (!A || !G) {
        free(A);
        free(G);
        return fk_err_set(err, FK_ENOMEM, "sfl refit: out of memory");
    }
    for (size_t n = 0; n < N; n++)
        for (size_t k = 0; k < K; k++) {
            double d2 = 0;
            for (size_t t = 0; t < p; t++) {
                double u = X[n * p + t] - m->s[k * p + t];
                d2 += u * u;
            }
            A[n * K + k] = exp(-d2 / (2.0 * m->w[k] * m->w[k]));
        }
    cblas_dsyrk(CblasRowMajor, CblasLower, CblasTrans, (int)K, (int)N, 1.0, A, (int)K, 0.0, G,
                (int)K);
    for (size_t k = 0; k < K; k++)
        G[k * K + k] += 1e-8;
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)K, 1.0, A, (int)K, y, 1, 0.0, m->c, 1);
    lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'L', (lapack_int)K, 1, G, (lapack_int)K,
                                    m->c, 1);
    free(A);
    free(G);
    if (info != 0)
        return fk_err_set(err, FK_ENUMERIC,
                          "sfl refit: normal equations of %zu kernels not positive definite "
                          "(dposv info %d); use the support model",
                          K, (int)info);
    return FK_OK;
}

/* Split every grid bump into segments: per centre coordinate t the bump's extent
 * [min_t, max_t] is cut into n_t = ceil(extent / (split w_b)) equal pieces, w_b the bump's
 * |alpha| v weighted mean width; a segment is one cell of that product. Why: with a fixed
 * width a smooth target gives alpha one broad bump (E2.2: the whole data range), and one
 * kernel of width w cannot represent a bump many w wide; pieces no longer than split w carry
 * their mass on kernels spaced like the quadrature of the integral (2.7) and like the
 * unstructured atoms' non-maximum suppression (radius r_nms w, i.e. pieces 2 w long at
 * split = 2). Widths are not cut: a ridge over widths at one centre stays one kernel. */
FK_CHECKRETURN static int split_bumps(const fk_sfl_atoms *a, const double *alpha, double split, int *label,
                       size_t *n_bumps, fk_err *err)
{
    size_t nb = *n_bumps, p = (size_t)a->p, J = a->J;
    double *lo = malloc((nb ? nb : 1) * p * sizeof *lo),
           *hi = malloc((nb ? nb : 1) * p * sizeof *hi);
    double *wm = calloc(nb ? nb : 1, sizeof *wm), *ms = calloc(nb ? nb : 1, sizeof *ms);
    size_t *cells = malloc((nb ? nb : 1) * (p + 1) * sizeof *cells);
    size_t *key = malloc((J ? J : 1) * sizeof *key), *first = NULL;
    int rc = FK_OK;
    if (!lo || !hi || !wm || !ms || !cells || !key) {
        rc = fk_err_set(err, FK_ENOMEM, "sfl peaks: out of memory");
        goto out;
    }
    for (size_t b = 0; b < nb * p; b++) {
        lo[b] = INFINITY;
        hi[b] = -INFINITY;
    }
    for (size_t j = 0; j < J; j++) { /* extent and mean width of every bump */
        if (label[j] < 0)
            continue;
        size_t b = (size_t)label[j];
        double q = fabs(alpha[j]) * a->v[j];
        wm[b] += q * a->w[j];
        ms[b] += q;
        for (size_t t = 0; t < p; t++) {
            lo[b * p + t] = fmin(lo[b * p + t], a->s[j * p + t]);
            hi[b * p + t] = fmax(hi[b * p + t], a->s[j * p + t]);
        }
    }
    size_t total = 0; /* cells[b*(p+1)] = first new label of bump b, then n_t per axis */
    for (size_t b = 0; b < nb; b++) {
        double len = split * wm[b] / ms[b];
        size_t nc = 1;
        for (size_t t = 0; t < p; t++) {
            double n_t = ceil((hi[b * p + t] - lo[b * p + t]) / len - 1e-9);
            cells[b * (p + 1) + 1 + t] = n_t < 1 ? 1 : (size_t)n_t;
            nc *= cells[b * (p + 1) + 1 + t];
        }
        cells[b * (p + 1)] = total;
        total += nc;
    }
    for (size_t j = 0; j < J; j++) { /* cell of every support atom, as a label in [0, total) */
        if (label[j] < 0)
            continue;
        size_t b = (size_t)label[j], k = 0;
        for (size_t t = 0; t < p; t++) {
            size_t n_t = cells[b * (p + 1) + 1 + t];
            double ext = hi[b * p + t] - lo[b * p + t];
            size_t i =
                ext > 0 ? (size_t)((a->s[j * p + t] - lo[b * p + t]) / ext * (double)n_t) : 0;
            k = k * n_t + (i >= n_t ? n_t - 1 : i);
        }
        key[j] = cells[b * (p + 1)] + k;
    }
    first = malloc((total ? total : 1) * sizeof *first); /* empty cells get no bump */
    if (!first) {
        rc = fk_err_set(err, FK_ENOMEM, "sfl peaks: out of memory");
        goto out;
    }
    for (size_t k = 0; k < total; k++)
        first[k] = (size_t)-1;
    size_t n = 0;
    for (size_t j = 0; j < J; j++) { /* renumber the non-empty cells in atom order */
        if (label[j] < 0)
            continue;
        if (first[key[j]] == (size_t)-1)
            first[key[j]] = n++;
        label[j] = (int)first[key[j]];
    }
    *n_bumps = n;
out:
    free(lo);
    free(hi);
    free(wm);
    free(ms);
    free(cells);
    free(key);
    free(first);
    return rc;
}

int fk_sfl_model_peaks(const fk_sfl_atoms *a, const double *alpha, const double *X, const double *y,
                       size_t N, int do_refit, int centroid, double split, fk_sfl_model *m,
                       fk_err *err)
{
    memset(m, 0, sizeof *m);
    if (!(split >= 0) || !isfinite(split))
        return fk_err_set(err, FK_EINVAL,
                          "sfl peaks: split %g must be 0 (off) or a positive number of widths",
                          split);
    int *label = malloc((a->J ? a->J : 1) * sizeof *label);
    if (!label)
        return fk_err_set(err, FK_ENOMEM, "sfl peaks: out of memory");
    size_t nb = 0, p = (size_t)a->p;
    int rc = fk_sfl_bumps(a, alpha, 1.0, label, &nb, err);
    if (!rc && split > 0 && a->grid)
        rc = split_bumps(a, alpha, split, label, &nb, err);
    size_t *peak = rc ? NULL : malloc((nb ? nb : 1) * sizeof *peak);
    if (!rc && !peak)
        rc = fk_err_set(err, FK_ENOMEM, "sfl peaks: out of memory");
    if (!rc)
        rc = model_alloc(m, nb, a->p, err);
    if (rc) {
        free(label);
        free(peak);
        return rc;
    }
    for (size_t b = 0; b < nb; b++) {
        peak[b] = (size_t)-1;
        m->c[b] = 0;
    }
    for (size_t j = 0; j < a->J; j++) { /* peak = largest |alpha| of the bump; mass = sum */
        if (label[j] < 0)
            continue;
        size_t b = (size_t)label[j];
        if (peak[b] == (size_t)-1 || fabs(alpha[j]) > fabs(alpha[peak[b]]))
            peak[b] = j;
        m->c[b] += a->v[j] * alpha[j];
    }
    for (size_t b = 0; b < nb; b++) {
        memcpy(m->s + b * p, a->s + peak[b] * p, p * sizeof(double));
        m->w[b] = a->w[peak[b]];
    }
    if (centroid) { /* |alpha| v weighted mean of the bump's centres and widths */
        double *mass = calloc(nb ? nb : 1, sizeof *mass);
        if (!mass) {
            free(label);
            free(peak);
            fk_sfl_model_close(m);
            return fk_err_set(err, FK_ENOMEM, "sfl peaks: out of memory");
        }
        memset(m->s, 0, nb * p * sizeof(double));
        memset(m->w, 0, nb * sizeof(double));
        for (size_t j = 0; j < a->J; j++) {
            if (label[j] < 0)
                continue;
            size_t b = (size_t)label[j];
            double q = fabs(alpha[j]) * a->v[j];
            mass[b] += q;
            m->w[b] += q * a->w[j];
            for (size_t t = 0; t < p; t++)
                m->s[b * p + t] += q * a->s[j * p + t];
        }
        for (size_t b = 0; b < nb; b++) {
            m->w[b] /= mass[b];
            for (size_t t = 0; t < p; t++)
                m->s[b * p + t] /= mass[b];
        }
        free(mass);
    }
    free(label);
    free(peak);
    if (do_refit && (rc = refit(m, X, y, N, err)))
        fk_sfl_model_close(m);
    return rc;
}

/* Why adaptive: the piece length that keeps the fit depends on how broad the bumps are, which
 * the caller cannot know; the fit to keep is either the problem's own (the tube
 * |f - y| <= sqrt(eps)) or that of the exact atom model the peaks are read from. */
int fk_sfl_model_peaks_fit(const fk_sfl_atoms *a, const double *alpha, const double *X,
                           const double *y, size_t N, double tube, double *split_used,
                           fk_sfl_model *m, fk_err *err)
{
    static const double splits[] = {0, 4, 2.83, 2, 1.41, 1, 0.71, 0.5, 0.35, 0.25};
    enum { NS = sizeof splits / sizeof splits[0] };
    memset(m, 0, sizeof *m);
    if (!(tube >= 0) || !isfinite(tube))
        return fk_err_set(err, FK_EINVAL,
                          "sfl peaks: tube %g must be 0 (support model's fit) or positive", tube);
    double *f = malloc((N ? N : 1) * sizeof *f), goal = tube;
    if (!f)
        return fk_err_set(err, FK_ENOMEM, "sfl peaks: out of memory");
    int rc = FK_OK;
    if (tube == 0) { /* the support model's training MSE is the goal */
        fk_sfl_model sm;
        if ((rc = fk_sfl_model_support(a, alpha, &sm, err))) {
            free(f);
            return rc;
        }
        fk_sfl_predict(&sm, X, N, f);
        fk_sfl_model_close(&sm);
        goal = 0;
        for (size_t n = 0; n < N; n++)
            goal += (f[n] - y[n]) * (f[n] - y[n]) / (double)N;
    }
    for (int i = 0; i < NS; i++) {
        fk_sfl_model t;
        if ((rc = fk_sfl_model_peaks(a, alpha, X, y, N, 1, 1, splits[i], &t, err))) {
            if (i > 0) /* finer pieces not solvable (near-equal kernels): keep the coarser */
                rc = FK_OK;
            break;
        }
        fk_sfl_predict(&t, X, N, f);
        double worst = 0, mse = 0;
        for (size_t n = 0; n < N; n++) {
            worst = fmax(worst, fabs(f[n] - y[n]));
            mse += (f[n] - y[n]) * (f[n] - y[n]) / (double)N;
        }
        fk_sfl_model_close(m);
        *m = t;
        if (split_used)
            *split_used = splits[i];
        if ((tube > 0 ? worst : mse) <= goal || !a->grid) /* met, or nothing to split */
            break;
    }
    free(f);
    return rc;
}
