/* 1-nearest-neighbour classification (Euclidean), the base classifier of the
 * domain-adaptation protocol. */
#ifndef FK_KNN_H
#define FK_KNN_H

#include "common/la/mat.h"

/* pred[i] = ytrain of the training row nearest to test row i; ties go to the lowest
 * training index. Squared distances come from ||a||^2 + ||b||^2 - 2 a.b with the cross
 * terms from dgemm in blocks of test rows. FK_EINVAL on a feature-count mismatch or an
 * empty training set, FK_ENOMEM if the block buffer cannot be allocated. */
FK_CHECKRETURN int fk_knn1_predict(const fk_mat *train, const int *ytrain, const fk_mat *test,
                                   int *pred, fk_err *err);

#endif
