/* Internals of the sfl estimator shared by its files (not part of the model's API). */
#ifndef FK_MODELS_SFL_INT_H
#define FK_MODELS_SFL_INT_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"
#include "common/models/sfl/sfl.h"

/* Rows of the N x J kernel matrix on demand (issue 36). When N x J doubles fit in the budget
 * the whole matrix is allocated and each row is computed the first time it is asked for;
 * otherwise a cache of R rows (least recently used out) holds what fits, so memory stays
 * within the budget whatever N. Atom sets whose centres repeat with a period M (candidates and
 * grids, width-major) compute the M distances of a row once for all widths. */
typedef struct fk__sfl_rows {
    const double *X;
    size_t N, J, M, Q; /* J = Q M */
    int p;
    const double *S;     /* the M distinct centres, M x p (the atoms' first M) */
    double *sT;          /* (p + 1) x M: squared norms, then -2 x the centres, transposed */
    double *cw;          /* J: 1 / (2 w_j^2) */
    double *d2;          /* M distances of the row being built */
    fk_mat mem;          /* the storage of full or slot */
    double *full;        /* N x J, or NULL in cache mode */
    unsigned char *have; /* full mode: row n computed */
    double *slot;        /* cache mode: R x J */
    size_t R, *slot_row, *slot_used, clock;
    size_t *slot_of; /* cache mode: N, the slot holding row n or R */
    size_t computed; /* rows computed so far (a row recomputed counts again) */
} fk__sfl_rows;

/* budget: bytes for kernel rows (0: FK__SFL_CACHE_DEFAULT). */
enum { FK__SFL_CACHE_DEFAULT_MB = 1024 };
FK_CHECKRETURN int fk__sfl_rows_init(fk__sfl_rows *r, const double *X, size_t N, int p,
                                     const fk_sfl_atoms *a, double budget_bytes, fk_err *err);
/* Row n (J values); in cache mode valid until the next call. */
const double *fk__sfl_row(fk__sfl_rows *r, size_t n);
/* The whole matrix (full mode only; computes the missing rows), else NULL. */
const double *fk__sfl_rows_full(fk__sfl_rows *r);
void fk__sfl_rows_close(fk__sfl_rows *r);

#endif
