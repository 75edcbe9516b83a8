/* One class list per job, by raw label value.
 *
 * A client's data set indexes its labels against its own sorted distinct values (dataset.h),
 * so a site that lacks a class would shift every class after it. Job types that learn from
 * labels index them here instead, against the job's list:
 *
 *   classes = 1,2,3,5      the raw label values (commas or spaces; sorted here; distinct)
 *   classes = 1..10        an integer range, the same as 1,2,...,10
 *   classes = C            a count (the older form); what it means is the job type's
 *                          (fk_classes_count): the raw values 0..C-1, or each data set's own
 *                          list, which must then hold exactly C classes.
 *
 * With a list every client maps raw value v to its position in the list, so class k means
 * the same class on every client whatever it holds; a row whose label is not listed is
 * refused with its value and row. */
#ifndef FK_CLASSES_H
#define FK_CLASSES_H

#include "common/base/params.h"
#include "common/data/dataset.h"

/* What a bare count C in `classes` means for a job type. */
typedef enum fk_classes_count {
    FK_CLASSES_COUNT_RANGE = 0, /* the raw values 0, 1, ..., C-1 (kahm) */
    FK_CLASSES_COUNT_OWN,       /* each data set's own list; it must hold exactly C classes */
} fk_classes_count;

typedef struct fk_classes {
    double *v;  /* n raw label values, ascending; NULL for a count of kind OWN or n == 0 */
    int n;      /* the number of classes; 0 when the key is absent and has no default */
    int listed; /* 1 when v holds the values (a list, a range or a RANGE count) */
    fk_classes_count count;
} fk_classes;

/* Read the job's `classes` key (absent: a count of dflt, 0 = none) with at most max classes
 * and at least 2 when given. FK_EINVAL naming the key and the fault. fk_classes_close frees. */
FK_CHECKRETURN int fk_classes_parse(fk_classes *c, const fk_params *p, long dflt, long max,
                                    fk_classes_count count, fk_err *err);
void fk_classes_close(fk_classes *c);
/* Only the number of classes of the job's `classes` (what a server sizes its model by). */
FK_CHECKRETURN int fk_classes_count_of(const fk_params *p, long dflt, long max,
                                       fk_classes_count count, long *n, fk_err *err);

/* The raw label of row i: y_raw, else the data set's class list, else the index itself. */
double fk_classes_raw(const fk_dataset *ds, size_t i);

/* Position of raw value v in the list, or -1. */
int fk_classes_find(const fk_classes *c, double v);

/* y (n = ds rows, malloc'ed, the caller frees) = the job's class index of every row of a
 * labelled ds. FK_EINVAL when ds has no labels, when a row's label is not in the list ("data
 * set 'x': row R (1-based) has label V, which is not one of the job's classes ...: add it to
 * 'classes' or remove the row"), or, for a count of kind OWN, when ds's own list does not hold
 * exactly n classes. who prefixes the messages ("fedrf-tca: client 2"). */
FK_CHECKRETURN int fk_classes_index(const fk_classes *c, const fk_dataset *ds, const char *who,
                                    int **y, fk_err *err);

#endif
