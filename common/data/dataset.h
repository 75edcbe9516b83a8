/* A labelled (or unlabelled) sample matrix: what loaders produce and methods consume.
 *
 * Labels. A loader reads each sample's label as a number ("raw" value: 1..10 in the
 * Office files, 0..9 in pendigits). The data set keeps both views:
 *   - y_raw[i]   the raw value as stored in the file (double, exact for integers);
 *   - classes[k] the distinct raw values in ascending order (n_classes of them);
 *   - y[i]       the 0-based class index: classes[y[i]] == y_raw[i], y[i] in [0, n_classes).
 * Two domains loaded separately index their own class lists; fk_dataset_align_labels
 * re-indexes several domains against the union of their raw values so that the same
 * raw label gets the same index everywhere (the catalog does this for every domain).
 *
 * Regression targets (e.g. UPDRS) are stored in y_raw with y == NULL, classes == NULL
 * and n_classes == 0: unlabelled for classification, target available for regression.
 * group (optional) holds a per-sample group id (subject, writer) for partitioning. */
#ifndef FK_DATASET_H
#define FK_DATASET_H

#include "common/la/mat.h"

typedef struct fk_dataset {
    fk_mat X;         /* n x d, one sample per row */
    int *y;           /* n labels in [0, n_classes), or NULL when unlabelled */
    int n_classes;    /* 0 when unlabelled */
    double *y_raw;    /* n raw label values (or regression target), or NULL */
    double *classes;  /* n_classes raw values, ascending: classes[y[i]] == y_raw[i] */
    int *group;       /* n group ids (subject, writer), or NULL */
    char name[64];    /* domain / client name, for messages */
} fk_dataset;

/* Allocate X (n x d, zeroed) and, if labelled, y (all 0, no raw values yet). */
FK_CHECKRETURN int fk_dataset_init(fk_dataset *ds, size_t n, size_t d, int labelled);
void fk_dataset_close(fk_dataset *ds);
/* New dataset holding the given rows (copied), labels, raw labels, class list and groups kept. */
FK_CHECKRETURN int fk_dataset_subset(fk_dataset *dst, const fk_dataset *src, const int *rows,
                                     size_t n);

/* Set labels from n raw values (copied): builds classes (sorted distinct) and y.
 * Non-finite raw values give FK_EFORMAT naming the sample. */
FK_CHECKRETURN int fk_dataset_set_labels(fk_dataset *ds, const double *raw, fk_err *err);
/* Set a regression target (copied into y_raw); y, classes and n_classes are cleared. */
FK_CHECKRETURN int fk_dataset_set_target(fk_dataset *ds, const double *target, fk_err *err);
/* Re-index ds's labels against the given ascending class list (k raw values), e.g. a data
 * set's documented label set, so every domain uses the same indices. FK_EINVAL if a raw
 * label is not in the list. */
FK_CHECKRETURN int fk_dataset_use_classes(fk_dataset *ds, const double *classes, int k,
                                          fk_err *err);
/* Re-index the labels of m labelled data sets against the union of their raw values,
 * so equal raw labels share one class index. Every data set ends with the same classes. */
FK_CHECKRETURN int fk_dataset_align_labels(fk_dataset *const *ds, int m, fk_err *err);
/* FK_EINVAL with a message naming both domains unless a and b have the same number of
 * feature columns. */
FK_CHECKRETURN int fk_dataset_check_dims(const fk_dataset *a, const fk_dataset *b, fk_err *err);
/* Set the name used in messages (truncated to fit). */
void fk_dataset_set_name(fk_dataset *ds, const char *name);

#endif
