/* A labelled (or unlabelled) sample matrix: what loaders produce and methods consume. */
#ifndef FK_DATASET_H
#define FK_DATASET_H

#include "common/la/mat.h"

typedef struct fk_dataset {
    fk_mat X;       /* n x d, one sample per row */
    int *y;         /* n labels in [0, n_classes), or NULL when unlabelled */
    int n_classes;  /* 0 when unlabelled */
    char name[64];  /* domain / client name, for messages */
} fk_dataset;

/* Allocate X (n x d, zeroed) and, if labelled, y. */
int fk_dataset_init(fk_dataset *ds, size_t n, size_t d, int labelled);
void fk_dataset_close(fk_dataset *ds);
/* New dataset holding the given rows (copied), labels kept. */
int fk_dataset_subset(fk_dataset *dst, const fk_dataset *src, const int *rows, size_t n);

#endif
