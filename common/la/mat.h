/* Dense row-major matrices of double. Samples are rows, features are columns. */
#ifndef FK_MAT_H
#define FK_MAT_H

#include <stddef.h>

#include "common/base/err.h"

typedef struct fk_mat {
    double *data; /* element (i, j) is data[i * ld + j] */
    size_t rows;
    size_t cols;
    size_t ld;    /* leading dimension, >= cols */
    int owned;    /* 1: fk_mat_close frees data; 0: a view into someone else's memory */
} fk_mat;

/* Allocate rows x cols, zero-filled, 64-byte aligned. */
FK_CHECKRETURN int fk_mat_init(fk_mat *m, size_t rows, size_t cols);
/* The same without the zero fill, for outputs that are written in full before they are read
 * (a fresh n x n buffer's memset costs a pass over memory; issue 36). */
FK_CHECKRETURN int fk_mat_init_uninit(fk_mat *m, size_t rows, size_t cols);
/* Free owned data and reset to empty; safe on an empty or view matrix. */
void fk_mat_close(fk_mat *m);
/* Non-owning view of existing memory. */
fk_mat fk_mat_view(double *data, size_t rows, size_t cols, size_t ld);
/* View of rows [r0, r0 + n). */
fk_mat fk_mat_rows(const fk_mat *m, size_t r0, size_t n);
/* Deep copy into a freshly initialised dst. */
FK_CHECKRETURN int fk_mat_copy(fk_mat *dst, const fk_mat *src);

static inline double *fk_mat_row(const fk_mat *m, size_t i)
{
    return m->data + i * m->ld;
}

static inline double fk_mat_get(const fk_mat *m, size_t i, size_t j)
{
    return m->data[i * m->ld + j];
}

static inline void fk_mat_set(fk_mat *m, size_t i, size_t j, double v)
{
    m->data[i * m->ld + j] = v;
}

#endif
