#include "common/la/mat.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int fk_mat_init(fk_mat *m, size_t rows, size_t cols)
{
    *m = (fk_mat){0};
    if (rows && cols > SIZE_MAX / sizeof(double) / rows)
        return FK_ENOMEM;
    size_t bytes = rows * cols * sizeof(double);
    size_t padded = (bytes + 63) / 64 * 64;
    double *d = aligned_alloc(64, padded ? padded : 64);
    if (!d)
        return FK_ENOMEM;
    memset(d, 0, padded ? padded : 64);
    *m = (fk_mat){.data = d, .rows = rows, .cols = cols, .ld = cols, .owned = 1};
    return FK_OK;
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
    int rc = fk_mat_init(dst, src->rows, src->cols);
    if (rc)
        return rc;
    for (size_t i = 0; i < src->rows; i++)
        memcpy(fk_mat_row(dst, i), fk_mat_row(src, i), src->cols * sizeof(double));
    return FK_OK;
}
