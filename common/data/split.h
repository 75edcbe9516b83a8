/* Splitting one data set into K client shares, to rehearse a federation from one file
 * (`fedkern data split`). Deterministic for a seed: randomness only from fk_rng.
 *
 *   iid            rows shuffled and dealt round-robin (shares differ by at most one row)
 *   label-skew     rows sorted by class (ties in random order) and cut into K contiguous
 *                  runs: with C classes each client holds about C/K of them
 *   dirichlet:A    per class, shares drawn from Dirichlet(A,...,A) (Hsu et al. 2019): small
 *                  A = few classes per client, large A = close to iid; redrawn (same stream)
 *                  until every client has a row, at most 100 times
 *   column:N       rows grouped by the value of feature column N (1-based; a subject or
 *                  site id); whole groups go to the client holding the fewest rows so far,
 *                  largest groups first, so a group never spans two clients */
#ifndef FK_SPLIT_H
#define FK_SPLIT_H

#include <stdint.h>

#include "common/data/dataset.h"

typedef enum fk_split_kind {
    FK_SPLIT_IID = 1,
    FK_SPLIT_LABEL_SKEW,
    FK_SPLIT_DIRICHLET,
    FK_SPLIT_COLUMN,
} fk_split_kind;

typedef struct fk_split_spec {
    fk_split_kind kind;
    double alpha;  /* dirichlet */
    size_t column; /* column: 1-based feature column */
} fk_split_spec;

/* "iid", "label-skew", "dirichlet:ALPHA" (0 < ALPHA <= 1e6) or "column:N". */
FK_CHECKRETURN int fk_split_parse(fk_split_spec *s, const char *by, fk_err *err);

/* client[i] in [0, k) for each of the n rows of ds. FK_EINVAL when the split needs labels
 * and ds has none, a column does not exist or has fewer distinct values than k, or a client
 * would get no rows. */
FK_CHECKRETURN int fk_split_assign(const fk_dataset *ds, const fk_split_spec *s, int k,
                                   uint64_t seed, int *client, fk_err *err);

#endif
