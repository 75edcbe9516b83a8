/* Seeded synthetic domain-shift data: labelled source domains and one shifted
 * target domain sharing class structure. Each class has a prototype mean; each
 * domain adds its own offset (a large shift along random directions, which
 * TCA-style adaptation removes) and a per-domain feature scaling. Small and
 * fast: the demo's built-in data. */
#ifndef FK_SYNTH_SHIFT_H
#define FK_SYNTH_SHIFT_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"
#include "common/data/dataset.h"

typedef struct fk_synth_opts {
    int n_sources;       /* source domains (>= 1) */
    size_t n_per_domain; /* samples per domain */
    size_t d;            /* feature dimension */
    int n_classes;       /* classes (>= 2) */
    double class_sep;    /* distance scale of class prototypes */
    double noise;        /* within-class standard deviation */
    double shift;        /* norm of each domain's offset */
    uint64_t seed;
} fk_synth_opts;

/* Defaults: 3 sources, 200 samples, d = 32, 5 classes. */
void fk_synth_defaults(fk_synth_opts *o);

/* out[0..n_sources) are the labelled sources (names "src0"...), out[n_sources]
 * the target (labelled, name "target", labels for scoring only). The caller
 * provides n_sources + 1 datasets and closes them. */
FK_CHECKRETURN int fk_synth_shift(const fk_synth_opts *o, fk_dataset *out, fk_err *err);

/* Domain k (0..n_sources) alone, bit for bit out[k] of fk_synth_shift (each domain draws from
 * its own stream). Caller closes ds. */
FK_CHECKRETURN int fk_synth_shift_domain(const fk_synth_opts *o, int k, fk_dataset *ds,
                                         fk_err *err);

/* Domain k's name as fk_synth_shift gives it ("src0", ..., "target"). */
void fk_synth_shift_name(const fk_synth_opts *o, int k, char *name, size_t cap);

#endif
