/* Atom sets discretising the integral over centres x widths (spec §3.7) and the Gaussian
 * kernel matrix between rows and atoms. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/models/sfl/sfl.h"

void fk_sfl_widths(double wmin, double wmax, int Q, double *out)
{
    for (int q = 0; q < Q; q++)
        out[q] = Q == 1 ? wmin : wmin + (wmax - wmin) * q / (Q - 1);
}

static double width_step(const double *widths, int Q)
{
    return Q > 1 ? (widths[Q - 1] - widths[0]) / (Q - 1) : 1.0;
}

FK_CHECKRETURN static int check_widths(const double *widths, int Q, fk_err *err)
{
    if (Q < 1)
        return fk_err_set(err, FK_EINVAL, "sfl atoms: need at least one width (got %d)", Q);
    for (int q = 0; q < Q; q++)
        if (!(widths[q] > 0 && isfinite(widths[q])))
            return fk_err_set(err, FK_EINVAL, "sfl atoms: width %d is %g (must be finite, > 0)",
                              q, widths[q]);
    return FK_OK;
}

FK_CHECKRETURN static int atoms_alloc(fk_sfl_atoms *a, size_t J, int p, fk_err *err)
{
    memset(a, 0, sizeof *a);
    a->J = J;
    a->p = p;
    a->s = malloc((J ? J : 1) * (size_t)p * sizeof(double));
    a->w = malloc((J ? J : 1) * sizeof(double));
    a->v = malloc((J ? J : 1) * sizeof(double));
    if (!a->s || !a->w || !a->v) {
        fk_sfl_atoms_close(a);
        return fk_err_set(err, FK_ENOMEM, "sfl atoms: out of memory for %zu atoms", J);
    }
    return FK_OK;
}

int fk_sfl_atoms_grid(fk_sfl_atoms *a, int p, const double *lo, const double *hi, double h,
                      const double *widths, int Q, size_t n_rows, size_t max_bytes, fk_err *err)
{
    memset(a, 0, sizeof *a);
    if (p < 1 || p > FK_SFL_GRID_MAX_P)
        return fk_err_set(err, FK_EINVAL,
                          "sfl grid atoms: p = %d features; the tensor grid is for p <= %d (use "
                          "atoms = samples or candidates instead)",
                          p, FK_SFL_GRID_MAX_P);
    if (!(h > 0 && isfinite(h)))
        return fk_err_set(err, FK_EINVAL, "sfl grid atoms: spacing h = %g must be > 0", h);
    int rc = check_widths(widths, Q, err);
    if (rc)
        return rc;
    size_t dims[FK_SFL_GRID_MAX_P + 1], J = (size_t)Q;
    dims[0] = (size_t)Q;
    for (int k = 0; k < p; k++) {
        if (!(hi[k] >= lo[k]) || !isfinite(lo[k]) || !isfinite(hi[k]))
            return fk_err_set(err, FK_EINVAL, "sfl grid atoms: box axis %d is [%g, %g]", k,
                              lo[k], hi[k]);
        double n = floor((hi[k] - lo[k]) / h + 1e-9) + 1;
        if (n > 1e7)
            return fk_err_set(err, FK_ELIMIT, "sfl grid atoms: %g points on axis %d", n, k);
        dims[k + 1] = (size_t)n;
        J *= dims[k + 1];
    }
    double bytes = (double)J * (double)(n_rows ? n_rows : 1) * 8.0;
    if (max_bytes && bytes > (double)max_bytes)
        return fk_err_set(err, FK_ELIMIT,
                          "sfl grid atoms: %zu atoms x %zu rows need %.3g bytes for the kernel "
                          "matrix (budget %zu); use a coarser h, fewer widths, or atoms = samples",
                          J, n_rows, bytes, max_bytes);
    if ((rc = atoms_alloc(a, J, p, err)))
        return rc;
    double dw = width_step(widths, Q), vol = pow(h, p) * dw;
    for (size_t j = 0; j < J; j++) { /* decode j = ((q n_1 + i_1) n_2 + i_2) ... */
        size_t r = j;
        for (int k = p - 1; k >= 0; k--) {
            a->s[j * (size_t)p + (size_t)k] = lo[k] + h * (double)(r % dims[k + 1]);
            r /= dims[k + 1];
        }
        a->w[j] = widths[r];
        a->v[j] = vol;
    }
    a->grid = 1;
    memcpy(a->dims, dims, sizeof dims);
    a->dw = dw;
    return FK_OK;
}

int fk_sfl_atoms_candidates(fk_sfl_atoms *a, const double *Z, size_t M, int p,
                            const double *widths, int Q, fk_err *err)
{
    memset(a, 0, sizeof *a);
    if (p < 1 || M < 1)
        return fk_err_set(err, FK_EINVAL, "sfl candidate atoms: need M >= 1 centres of p >= 1 "
                                          "features (got %zu x %d)", M, p);
    int rc = check_widths(widths, Q, err);
    if (rc || (rc = atoms_alloc(a, M * (size_t)Q, p, err)))
        return rc;
    double dw = width_step(widths, Q);
    for (int q = 0; q < Q; q++)
        for (size_t m = 0; m < M; m++) {
            size_t j = (size_t)q * M + m;
            memcpy(a->s + j * (size_t)p, Z + m * (size_t)p, (size_t)p * sizeof(double));
            a->w[j] = widths[q];
            a->v[j] = dw;
        }
    a->dw = dw;
    return FK_OK;
}

void fk_sfl_atoms_close(fk_sfl_atoms *a)
{
    if (!a)
        return;
    free(a->s);
    free(a->w);
    free(a->v);
    memset(a, 0, sizeof *a);
}

void fk_sfl_kernel(const double *X, size_t N, int p, const fk_sfl_atoms *a, double *Kmat)
{
    size_t J = a->J;
    for (size_t n = 0; n < N; n++) {
        const double *x = X + n * (size_t)p;
        double *row = Kmat + n * J;
        for (size_t j = 0; j < J; j++) {
            const double *s = a->s + j * (size_t)p;
            double d2 = 0;
            for (int k = 0; k < p; k++) {
                double t = x[k] - s[k];
                d2 += t * t;
            }
            row[j] = exp(-d2 / (2.0 * a->w[j] * a->w[j]));
        }
    }
}
