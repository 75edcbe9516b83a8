/* Standard per-domain preprocessing of sample matrices (samples in rows), in place. */
#ifndef FK_PREP_H
#define FK_PREP_H

#include "common/la/mat.h"

/* Divide each row by its sum (MATLAB X ./ sum(X,2)); rows summing to 0 stay as they are.
 * FK_ENOMEM if the work vectors cannot be allocated. */
int fk_prep_l1_rows(fk_mat *X);
/* Divide each row by its Euclidean norm; zero rows stay zero. */
void fk_prep_l2_rows(fk_mat *X);
/* Centre each column and divide by its population std (MATLAB zscore(X,1));
 * constant columns become 0. FK_ENOMEM if the work vectors cannot be allocated. */
int fk_prep_zscore_cols(fk_mat *X);

#endif
