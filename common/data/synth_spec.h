/* Built-in synthetic data sets named by a spec string, so a client daemon can hold
 * the demo's data without files:
 *
 *   synthetic/shift:client=I[,sources=3,seed=1,samples=200,dims=32,classes=5]
 *       domain I of fk_synth_shift (0..sources-1 labelled sources, sources = target)
 *   synthetic/gmm:client=I[,tasks=10,outliers=1,seed=1,samples=150]
 *       task I of the FedGrEM simulation design (fk_synth_gmm_make; the last
 *       `outliers` tasks are outliers)
 *   synthetic/mor:client=I[,tasks=10,outliers=1,seed=1,samples=200,components=5,dims=10,
 *                 h=0,out_coef=-3]
 *       task I of the mixture-of-regressions design (fk_mor_make): X and the regression
 *       target y (in y_raw), for fedgrem-mor / fedem-mor
 *
 * Every client of a federation passes the same options but its own index, and gets
 * exactly the dataset the in-process simulator gives that client for the same seed. */
#ifndef FK_SYNTH_SPEC_H
#define FK_SYNTH_SPEC_H

#include <stdint.h>

#include "common/base/err.h"
#include "common/data/dataset.h"
#include "common/data/synth_gmm.h"
#include "common/data/synth_mor.h"
#include "common/data/synth_shift.h"

typedef enum fk_synth_kind { FK_SYNTH_SHIFT = 1, FK_SYNTH_GMM = 2, FK_SYNTH_MOR = 3 } fk_synth_kind;

typedef struct fk_synth_spec {
    fk_synth_kind kind;
    int client;          /* which domain / task */
    uint64_t seed;
    fk_synth_opts shift; /* FK_SYNTH_SHIFT */
    fk_synth_gmm gmm;    /* FK_SYNTH_GMM */
    fk_synth_mor mor;    /* FK_SYNTH_MOR */
} fk_synth_spec;

/* 1 if src starts with "synthetic/" (and is meant as a spec), else 0. */
int fk_synth_spec_is(const char *src);

/* Parse and validate; FK_EINVAL with a message naming the spec and the key. */
FK_CHECKRETURN int fk_synth_spec_parse(const char *spec, fk_synth_spec *out, fk_err *err);

/* Parse and generate the one client's dataset (only its own part of the design). */
FK_CHECKRETURN int fk_synth_spec_load(fk_dataset *ds, const char *spec, fk_err *err);

/* Parse; *ds gets the name fk_synth_spec_load gives the data set and no rows (a process
 * that does not hold this client: `fedkern sim` under mpirun). */
FK_CHECKRETURN int fk_synth_spec_name(fk_dataset *ds, const char *spec, fk_err *err);

#endif
