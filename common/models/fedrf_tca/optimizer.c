#include "common/models/fedrf_tca/optimizer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int fk_opt_init(fk_opt *o, fk_opt_kind kind, size_t n, double lr, fk_err *err)
{
    *o = (fk_opt){.kind = kind, .n = n, .lr = lr, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8};
    if (!(lr > 0) || !isfinite(lr))
        return fk_err_set(err, FK_EINVAL, "optimizer: learning rate must be > 0 (got %g)", lr);
    if (kind == FK_OPT_ADAM) {
        o->m = calloc(n ? n : 1, sizeof *o->m);
        o->v = calloc(n ? n : 1, sizeof *o->v);
        if (!o->m || !o->v) {
            fk_opt_close(o);
            return fk_err_set(err, FK_ENOMEM, "optimizer: out of memory for %zu parameters", n);
        }
    }
    return FK_OK;
}

void fk_opt_close(fk_opt *o)
{
    free(o->m);
    free(o->v);
    o->m = o->v = NULL;
}

void fk_opt_step(fk_opt *o, double *theta, const double *g)
{
    if (o->kind == FK_OPT_SGD) {
        for (size_t i = 0; i < o->n; i++)
            theta[i] -= o->lr * g[i];
        return;
    }
    o->t += 1.0;
    double c1 = 1.0 - pow(o->beta1, o->t), c2 = 1.0 - pow(o->beta2, o->t);
    double a = o->lr * sqrt(c2) / c1;
    for (size_t i = 0; i < o->n; i++) {
        o->m[i] = o->beta1 * o->m[i] + (1 - o->beta1) * g[i];
        o->v[i] = o->beta2 * o->v[i] + (1 - o->beta2) * g[i] * g[i];
        theta[i] -= a * o->m[i] / (sqrt(o->v[i]) + o->eps * sqrt(c2));
    }
}

int fk_opt_parse(const char *name, fk_opt_kind *kind, fk_err *err)
{
    if (!strcmp(name, "sgd"))
        *kind = FK_OPT_SGD;
    else if (!strcmp(name, "adam"))
        *kind = FK_OPT_ADAM;
    else
        return fk_err_set(err, FK_EINVAL, "unknown optimizer '%s' (use sgd or adam)", name);
    return FK_OK;
}
