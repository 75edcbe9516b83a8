/* Kernel rows on demand for the sfl solver (see sfl_int.h). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/vexp.h"
#include "common/models/sfl/sfl_int.h"

/* The smallest period M of the centres (J = Q M, centre j = centre j mod M), else J. */
static size_t centre_period(const fk_sfl_atoms *a)
{
    size_t J = a->J, p = (size_t)a->p, Q = 1;
    for (size_t j = 1; j < J; j++) /* widths: count the distinct width blocks */
        if (a->w[j] != a->w[j - 1])
            Q++;
    if (Q < 2 || J % Q)
        return J;
    size_t M = J / Q;
    for (size_t j = M; j < J; j++)
        if (memcmp(a->s + j * p, a->s + (j % M) * p, p * sizeof(double)))
            return J;
    return M;
}

int fk__sfl_rows_init(fk__sfl_rows *r, const double *X, size_t N, int p, const fk_sfl_atoms *a,
                      double budget_bytes, fk_err *err)
{
    memset(r, 0, sizeof *r);
    r->X = X;
    r->N = N;
    r->J = a->J;
    r->p = p;
    r->M = centre_period(a);
    r->Q = r->J / r->M;
    if (!(budget_bytes > 0))
        budget_bytes = (double)FK__SFL_CACHE_DEFAULT_MB * 1048576.0;
    double row_bytes = (double)r->J * sizeof(double);
    r->sT = malloc(r->M * (size_t)(p + 1) * sizeof *r->sT);
    r->cw = malloc(r->J * sizeof *r->cw);
    r->d2 = malloc(r->M * sizeof *r->d2);
    int ok = r->sT && r->cw && r->d2;
    /* fk_mat: huge pages for the matrix or the cache (a fresh 58 MB matrix took 100 ms of
     * 4 KiB page faults per solve on the benches' virtual machine, issue 36) */
    if (ok && (double)N * row_bytes <= budget_bytes) {
        ok = fk_mat_init_uninit(&r->mem, N, r->J) == FK_OK;
        r->full = r->mem.data;
        r->have = calloc(N, 1);
        ok = ok && r->have;
    } else if (ok) {
        double R = floor(budget_bytes / row_bytes);
        r->R = R < 2 ? 2 : R > (double)N ? N : (size_t)R;
        ok = fk_mat_init_uninit(&r->mem, r->R, r->J) == FK_OK;
        r->slot = r->mem.data;
        r->slot_row = malloc(r->R * sizeof *r->slot_row);
        r->slot_used = calloc(r->R, sizeof *r->slot_used);
        r->slot_of = malloc(N * sizeof *r->slot_of);
        ok = r->slot && r->slot_row && r->slot_used && r->slot_of;
        for (size_t i = 0; ok && i < r->R; i++)
            r->slot_row[i] = N;
        for (size_t n = 0; ok && n < N; n++)
            r->slot_of[n] = r->R;
    }
    if (!ok) {
        fk__sfl_rows_close(r);
        return fk_err_set(err, FK_ENOMEM,
                          "sfl solve: out of memory for the kernel rows (%zu rows x %zu atoms, "
                          "budget %.0f MB)",
                          N, a->J, budget_bytes / 1048576.0);
    }
    r->S = a->s;
    for (size_t m = 0; m < r->M; m++) {
        double q = 0;
        for (int k = 0; k < p; k++)
            q += a->s[m * (size_t)p + (size_t)k] * a->s[m * (size_t)p + (size_t)k];
        r->sT[m] = q;
        for (int k = 0; k < p; k++)
            r->sT[(size_t)(k + 1) * r->M + m] = -2.0 * a->s[m * (size_t)p + (size_t)k];
    }
    for (size_t j = 0; j < r->J; j++)
        r->cw[j] = 1.0 / (2.0 * a->w[j] * a->w[j]);
    return FK_OK;
}

/* exp(-d2 c) of the Q width blocks from the M squared distances in d2 (which may be the first
 * block of out: it is written last), by the shared vectorised exp (libm's call per entry was
 * most of a pooled solve, issue 36); an exponent below -37 gives 0 instead of a value under
 * 1e-16, below the last bit of the kernel sums it enters. */
static void widths_exp(const fk__sfl_rows *r, const double *d2, double *out)
{
    size_t M = r->M;
    for (size_t q = r->Q; q-- > 0;) {
        double *o = out + q * M;
        const double *c = r->cw + q * M;
        for (size_t m = 0; m < M; m++)
            o[m] = -(d2[m] > 0 ? d2[m] : 0.0) * c[m];
        fk_vexp_nonpos(o, M);
    }
}

/* Squared distances |x|^2 + |s|^2 - 2 x.s of row n into d2 (M values): a loop the compiler
 * vectorises over the centres, the same sums at any BLAS thread count (and in both clones:
 * no FMA, element by element in the same order). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default"))) /* 4 lanes where the CPU has them */
#endif
static void
dist2(const fk__sfl_rows *r, size_t n, double *d2)
{
    size_t M = r->M;
    int p = r->p;
    const double *x = r->X + n * (size_t)p;
    double xx = 0;
    for (int k = 0; k < p; k++)
        xx += x[k] * x[k];
    for (size_t m = 0; m < M; m++)
        d2[m] = xx + r->sT[m];
    for (int k = 0; k < p; k++) {
        const double xk = x[k], *c = r->sT + (size_t)(k + 1) * M;
        for (size_t m = 0; m < M; m++)
            d2[m] += xk * c[m];
    }
}

static void compute(fk__sfl_rows *r, size_t n, double *out)
{
    dist2(r, n, r->d2);
    widths_exp(r, r->d2, out);
    r->computed++;
}

/* Full mode: row n in place (its distances into its first width block), the first time it is
 * asked for: a pass over the rows (the solver's evaluation) computes each row while it is in
 * cache and uses it at once. */
static const double *full_row(fk__sfl_rows *r, size_t n)
{
    double *row = r->full + n * r->J;
    if (!r->have[n]) {
        dist2(r, n, row);
        widths_exp(r, row, row);
        r->have[n] = 1;
        r->computed++;
    }
    return row;
}

const double *fk__sfl_row(fk__sfl_rows *r, size_t n)
{
    if (r->full)
        return full_row(r, n);
    size_t s = r->slot_of[n];
    if (s < r->R) {
        r->slot_used[s] = ++r->clock;
        return r->slot + s * r->J;
    }
    size_t v = 0; /* least recently used slot */
    for (size_t i = 1; i < r->R; i++)
        if (r->slot_used[i] < r->slot_used[v])
            v = i;
    if (r->slot_row[v] < r->N)
        r->slot_of[r->slot_row[v]] = r->R;
    r->slot_row[v] = n;
    r->slot_of[n] = v;
    r->slot_used[v] = ++r->clock;
    compute(r, n, r->slot + v * r->J);
    return r->slot + v * r->J;
}

const double *fk__sfl_rows_full(fk__sfl_rows *r)
{
    if (!r->full)
        return NULL;
    for (size_t n = 0; n < r->N; n++)
        (void)fk__sfl_row(r, n);
    return r->full;
}

void fk__sfl_rows_close(fk__sfl_rows *r)
{
    if (!r)
        return;
    free(r->sT);
    free(r->cw);
    free(r->d2);
    fk_mat_close(&r->mem);
    free(r->have);
    free(r->slot_row);
    free(r->slot_used);
    free(r->slot_of);
    memset(r, 0, sizeof *r);
}
