#include "common/la/mat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Matrices of 4 MiB and more start on a 2 MiB boundary and ask for transparent huge pages:
 * each first touch of a 4 KiB page is a page fault, and on a virtual machine the faults of a
 * fresh n x n kernel cost as much as the BLAS work on it (26 % of a DICA fit at n = 2376 was
 * page faults, issue 36). A hint only: without THP the pages are plain 4 KiB. */
enum { HUGE_ALIGN = 2u << 20, HUGE_MIN = 4u << 20 };

/* rows x cols, uninitialised. */
static int mat_alloc(fk_mat *m, size_t rows, size_t cols, size_t *padded_out)
{
    *m = (fk_mat){0};
    if (rows && cols > SIZE_MAX / sizeof(double) / rows)
        return FK_ENOMEM;
    size_t bytes = rows * cols * sizeof(double);
    size_t padded = (bytes + 63) / 64 * 64;
    int huge = padded >= HUGE_MIN && padded <= SIZE_MAX - HUGE_ALIGN;
    if (huge)
        padded = (padded + HUGE_ALIGN - 1) / HUGE_ALIGN * HUGE_ALIGN;
    if (!padded)
        padded = 64;
    double *d = aligned_alloc(huge ? HUGE_ALIGN : 64, padded);
    if (!d)
        return FK_ENOMEM;
#ifdef MADV_HUGEPAGE
    if (huge)
        (void)madvise(d, padded, MADV_HUGEPAGE);
#endif
    *m = (fk_mat){.data = d, .rows = rows, .cols = cols, .ld = cols, .owned = 1};
    *padded_out = padded;
    return FK_OK;
}

int fk_mat_init(fk_mat *m, size_t rows, size_t cols)
{
    size_t padded;
    int rc = mat_alloc(m, rows, cols, &padded);
    if (rc == FK_OK)
        memset(m->data, 0, padded);
    return rc;
}

int fk_mat_init_uninit(fk_mat *m, size_t rows, size_t cols)
{
    size_t padded;
    return mat_alloc(m, rows, cols, &padded);
}

void fk_mat_close(fk_mat *m)
{
    if (m->owned)
        free(m->data);
    *m = (fk_mat){0};
}

fk_mat fk_mat_view(double *data, size_t rows, size_t cols, size_t ld)
{
    return (fk_mat){.data = data, .rows = rows, .cols = cols, .ld = ld, .owned = 0};
}

fk_mat fk_mat_rows(const fk_mat *m, size_t r0, size_t n)
{
    return fk_mat_view(m->data + r0 * m->ld, n, m->cols, m->ld);
}

int fk_mat_copy(fk_mat *dst, const fk_mat *src)
{
    size_t padded;
    int rc = mat_alloc(dst, src->rows, src->cols, &padded);
    if (rc)
        return rc;
    /* every element written below; the padding past them is zeroed, never read */
    size_t bytes = src->rows * src->cols * sizeof(double);
    if (src->ld == src->cols && src->rows)
        memcpy(dst->data, src->data, bytes);
    else
        for (size_t i = 0; i < src->rows; i++)
            memcpy(fk_mat_row(dst, i), fk_mat_row(src, i), src->cols * sizeof(double));
    memset((char *)dst->data + bytes, 0, padded - bytes);
    return FK_OK;
}
