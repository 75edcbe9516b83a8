/* First-order optimizers on flat parameter vectors: SGD and Adam. */
#ifndef FK_OPTIMIZER_H
#define FK_OPTIMIZER_H

#include <stddef.h>

#include "common/base/err.h"

typedef enum fk_opt_kind { FK_OPT_SGD = 0, FK_OPT_ADAM = 1 } fk_opt_kind;

typedef struct fk_opt {
    fk_opt_kind kind;
    size_t n;
    double lr, beta1, beta2, eps;
    double t;  /* steps taken (Adam bias correction) */
    double *m; /* first moments (Adam), n values */
    double *v; /* second moments (Adam), n values */
} fk_opt;

/* Adam uses beta = 0.9, 0.999 and eps = 1e-8. */
FK_CHECKRETURN int fk_opt_init(fk_opt *o, fk_opt_kind kind, size_t n, double lr, fk_err *err);
void fk_opt_close(fk_opt *o);
/* theta -= step(g). */
void fk_opt_step(fk_opt *o, double *theta, const double *g);
/* "sgd" or "adam". */
FK_CHECKRETURN int fk_opt_parse(const char *name, fk_opt_kind *kind, fk_err *err);

#endif
