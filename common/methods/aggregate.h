/* Server-side aggregators over one named tensor of many client updates:
 * plain mean, sample-weighted FedAvg, coordinate-wise median, trimmed mean. */
#ifndef FK_AGGREGATE_H
#define FK_AGGREGATE_H

#include "common/methods/method.h"

typedef enum fk_agg_kind {
    FK_AGG_MEAN,     /* unweighted average */
    FK_AGG_FEDAVG,   /* weights = report.n_samples */
    FK_AGG_MEDIAN,   /* coordinate-wise median */
    FK_AGG_TRIMMED,  /* coordinate-wise mean after dropping trim*n lowest and highest */
} fk_agg_kind;

typedef struct fk_aggregator {
    fk_agg_kind kind;
    double trim; /* FK_AGG_TRIMMED: fraction cut at each end, in [0, 0.5) */
} fk_aggregator;

/* Parse "mean", "fedavg", "median", "trimmed-mean" (trim from "trim" or 0.1). */
FK_CHECKRETURN int fk_aggregator_parse(fk_aggregator *a, const char *name, double trim,
                                       fk_err *err);

/* Aggregate tensor `name` (same length len in every update) into out[0..len).
 * Updates lacking the tensor or with another length give FK_EFORMAT. */
FK_CHECKRETURN int fk_aggregate_tensor(const fk_aggregator *a, const fk_update *ups, int n,
                                       const char *name, double *out, size_t len, fk_err *err);

#endif
