#include "common/data/dataset.h"

#include <stdlib.h>
#include <string.h>

int fk_dataset_init(fk_dataset *ds, size_t n, size_t d, int labelled)
{
    memset(ds, 0, sizeof *ds);
    int rc = fk_mat_init(&ds->X, n, d);
    if (rc)
        return rc;
    if (labelled) {
        ds->y = calloc(n ? n : 1, sizeof *ds->y);
        if (!ds->y) {
            fk_mat_close(&ds->X);
            return FK_ENOMEM;
        }
    }
    return FK_OK;
}

void fk_dataset_close(fk_dataset *ds)
{
    fk_mat_close(&ds->X);
    free(ds->y);
    memset(ds, 0, sizeof *ds);
}

int fk_dataset_subset(fk_dataset *dst, const fk_dataset *src, const int *rows, size_t n)
{
    int rc = fk_dataset_init(dst, n, src->X.cols, src->y != NULL);
    if (rc)
        return rc;
    for (size_t i = 0; i < n; i++) {
        memcpy(fk_mat_row(&dst->X, i), fk_mat_row(&src->X, (size_t)rows[i]),
               src->X.cols * sizeof(double));
        if (src->y)
            dst->y[i] = src->y[rows[i]];
    }
    dst->n_classes = src->n_classes;
    memcpy(dst->name, src->name, sizeof dst->name);
    return FK_OK;
}
