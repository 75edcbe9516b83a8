#include "common/data/synth_shift.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/la/rng.h"

void fk_synth_defaults(fk_synth_opts *o)
{
    *o = (fk_synth_opts){.n_sources = 3, .n_per_domain = 200, .d = 32, .n_classes = 5,
                         .class_sep = 0.5, .noise = 1.0, .shift = 8.0, .seed = 1};
}

/* One domain: x = scale .* (proto[y] + noise) + offset. */
FK_CHECKRETURN static int make_domain(const fk_synth_opts *o, const double *proto, int dom, fk_dataset *ds,
                       fk_err *err)
{
    size_t d = o->d, n = o->n_per_domain;
    if (fk_dataset_init(ds, n, d, 1))
        return fk_err_set(err, FK_ENOMEM, "synthetic data: out of memory");
    ds->n_classes = o->n_classes;
    fk_rng g;
    fk_rng_init(&g, o->seed, 0x73796e7400000000ULL + (uint64_t)dom);
    double *offset = malloc(d * sizeof *offset), *scale = malloc(d * sizeof *scale);
    if (!offset || !scale) {
        free(offset);
        free(scale);
        fk_dataset_close(ds);
        return fk_err_set(err, FK_ENOMEM, "synthetic data: out of memory");
    }
    double nrm = 0;
    for (size_t j = 0; j < d; j++) {
        offset[j] = fk_rng_normal(&g);
        nrm += offset[j] * offset[j];
        scale[j] = 0.6 + 0.8 * fk_rng_uniform(&g);
    }
    for (size_t j = 0; j < d; j++)
        offset[j] *= o->shift / sqrt(nrm);
    for (size_t i = 0; i < n; i++) {
        int y = (int)(i % (size_t)o->n_classes); /* balanced classes */
        ds->y[i] = y;
        double *x = fk_mat_row(&ds->X, i);
        for (size_t j = 0; j < d; j++)
            x[j] = scale[j] * (proto[(size_t)y * d + j] + o->noise * fk_rng_normal(&g)) + offset[j];
    }
    free(offset);
    free(scale);
    return FK_OK;
}

/* The class prototypes every domain shares (their own stream); NULL: out of memory. */
static double *make_proto(const fk_synth_opts *o, fk_err *err)
{
    double *proto = malloc((size_t)o->n_classes * o->d * sizeof *proto);
    if (!proto) {
        fk_err_set(err, FK_ENOMEM, "synthetic data: out of memory");
        return NULL;
    }
    fk_rng g;
    fk_rng_init(&g, o->seed, 0x70726f746f000000ULL);
    for (size_t i = 0; i < (size_t)o->n_classes * o->d; i++)
        proto[i] = o->class_sep * fk_rng_normal(&g);
    return proto;
}

FK_CHECKRETURN static int check_opts(const fk_synth_opts *o, fk_err *err)
{
    if (o->n_sources < 1 || o->n_classes < 2 || o->d < 1 || o->n_per_domain < (size_t)o->n_classes)
        return fk_err_set(err, FK_EINVAL,
                          "synthetic data: need >= 1 source, >= 2 classes, d >= 1 and at least one "
                          "sample per class per domain");
    return FK_OK;
}

void fk_synth_shift_name(const fk_synth_opts *o, int k, char *name, size_t cap)
{
    if (k < o->n_sources)
        snprintf(name, cap, "src%d", k);
    else
        snprintf(name, cap, "target");
}

int fk_synth_shift_domain(const fk_synth_opts *o, int k, fk_dataset *ds, fk_err *err)
{
    int rc = check_opts(o, err);
    if (!rc && (k < 0 || k > o->n_sources))
        rc = fk_err_set(err, FK_EINVAL, "synthetic data: domain %d of %d", k, o->n_sources + 1);
    if (rc)
        return rc;
    double *proto = make_proto(o, err);
    if (!proto)
        return FK_ENOMEM;
    rc = make_domain(o, proto, k, ds, err);
    if (!rc)
        fk_synth_shift_name(o, k, ds->name, sizeof ds->name);
    free(proto);
    return rc;
}

int fk_synth_shift(const fk_synth_opts *o, fk_dataset *out, fk_err *err)
{
    int rc = check_opts(o, err);
    if (rc)
        return rc;
    double *proto = make_proto(o, err);
    if (!proto)
        return FK_ENOMEM;
    int made = 0;
    for (int k = 0; k <= o->n_sources && !rc; k++) {
        rc = make_domain(o, proto, k, &out[k], err);
        if (!rc) {
            made++;
            fk_synth_shift_name(o, k, out[k].name, sizeof out[k].name);
        }
    }
    free(proto);
    if (rc)
        for (int k = 0; k < made; k++)
            fk_dataset_close(&out[k]);
    return rc;
}
