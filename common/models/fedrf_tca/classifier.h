/* Classifiers on feature rows: softmax regression (no hidden layer) and the
 * paper's small MLPs (ReLU hidden layers, e.g. m -> 100 -> 100 -> C), with
 * mean cross-entropy loss and hand-written backprop on BLAS. Parameters live
 * in one flat vector (layer by layer: weights in x out row-major, then
 * biases) so they can be averaged, sent and checkpointed as one tensor. */
#ifndef FK_CLASSIFIER_H
#define FK_CLASSIFIER_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"
#include "common/la/rng.h"
#include "common/models/fedrf_tca/optimizer.h"

#define FK_MLP_MAX_HIDDEN 4

typedef struct fk_mlp {
    int n_layers;                        /* hidden layers + 1 */
    size_t sizes[FK_MLP_MAX_HIDDEN + 2]; /* in, hidden..., classes */
    size_t n_params;
} fk_mlp;

FK_CHECKRETURN int fk_mlp_layout(fk_mlp *net, size_t in, const size_t *hidden, int n_hidden,
                                 size_t classes, fk_err *err);
/* Uniform fan-in initialisation U(-1/sqrt(fan_in), 1/sqrt(fan_in)) of weights and biases. */
void fk_mlp_init_params(const fk_mlp *net, double *theta, fk_rng *rng);

/* Mean cross-entropy of rows X (b x in) with labels y. gtheta (n_params, may
 * be NULL) receives dL/dtheta, gX (b x in, may be NULL) dL/dX. */
FK_CHECKRETURN int fk_mlp_loss_grad(const fk_mlp *net, const double *theta, const fk_mat *X,
                                    const int *y, double *loss, double *gtheta, fk_mat *gX,
                                    fk_err *err);
/* Arg-max class per row (ties to the smallest class). */
FK_CHECKRETURN int fk_mlp_predict(const fk_mlp *net, const double *theta, const fk_mat *X,
                                  int *pred, fk_err *err);

/* Check that labels exist and span at least two classes below n_classes. */
FK_CHECKRETURN int fk_labels_check(const int *y, size_t n, int n_classes, const char *what,
                                   fk_err *err);

/* Mini-batch training for `epochs` passes with the given optimizer. */
typedef struct fk_train_opts {
    int epochs;
    size_t batch;
    double lr;
    fk_opt_kind opt;
} fk_train_opts;
FK_CHECKRETURN int fk_mlp_train(const fk_mlp *net, double *theta, const fk_mat *X, const int *y,
                                int n_classes, const fk_train_opts *o, fk_rng *rng, fk_err *err);

#endif
