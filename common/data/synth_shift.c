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

int fk_synth_shift(const fk_synth_opts *o, fk_dataset *out, fk_err *err)
{
    if (o->n_sources < 1 || o->n_classes < 2 || o->d < 1 || o->n_per_domain < (size_t)o->n_classes)
        return fk_err_set(err, FK_EINVAL,
                          "synthetic data: need >= 1 source, >= 2 classes, d >= 1 and at least one "
                          "sample per class per domain");
    double *proto = malloc((size_t)o->n_classes * o->d * sizeof *proto);
    if (!proto)
        return fk_err_set(err, FK_ENOMEM, "synthetic data: out of memory");
    fk_rng g;
    fk_rng_init(&g, o->seed, 0x70726f746f000000ULL);
    for (size_t i = 0; i < (size_t)o->n_classes * o->d; i++)
        proto[i] = o->class_sep * fk_rng_normal(&g);
    int rc = FK_OK, made = 0;
    for (int k = 0; k <= o->n_sources && !rc; k++) {
        rc = make_domain(o, proto, k, &out[k], err);
        if (!rc) {
            made++;
            if (k < o->n_sources)
                snprintf(out[k].name, sizeof out[k].name, "src%d", k);
            else
                snprintf(out[k].name, sizeof out[k].name, "target");
        }
    }
    free(proto);
    if (rc)
        for (int k = 0; k < made; k++)
            fk_dataset_close(&out[k]);
    return rc;
}
