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
/* fk_prep_zscore_cols that also records the per-column affine map it applied (d values each,
 * either may be NULL): X[:,j] = (X[:,j] - shift[j]) * scale[j], scale 0 for a constant column.
 * fk_prep_affine_cols with the same map gives the same values bit for bit. */
int fk_prep_zscore_cols_map(fk_mat *X, double *shift, double *scale);
/* X[:,j] = (X[:,j] - shift[j]) * scale[j] for every column (a saved z-score map). */
void fk_prep_affine_cols(fk_mat *X, const double *shift, const double *scale);

/* Every value divided by div (a catalog set's pixels / 255). */
void fk_prep_affine_div(fk_mat *X, double div);

#endif
