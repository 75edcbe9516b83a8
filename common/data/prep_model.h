/* The clients' own preprocessing of their raw files, as a model records it (issue 34).
 *
 * A client reports at Join, per data set, the steps its loader applied (a catalog set's
 * standard ones, then data.NAME.prep) and its saved affine map (data.NAME.affine). The
 * server (JobResult) and `fedkern sim` add to the model what the job's clients did:
 *
 *   data_prep        (K x FK_PREP_MODEL_STEPS) step codes in order, 0-padded: 1 rows / row
 *                    sum, 2 rows / norm, 3 z-score of each column on the query file's own
 *                    mean and population std, 4 values / 255
 *   data_prep_shift  (K x d), data_prep_scale (K x d): the affine map applied after the
 *                    steps, x[j] = (x[j] - shift[j]) * scale[j]; present when some client
 *                    had one (a client without one: shift 0, scale 1, which changes nothing)
 *
 * K = 1 when every client of the job did the same (steps and map bit for bit), else one row
 * per client in the order of the job's clients (prediction then needs --client N). No
 * data_prep: the preprocessing is unknown (an old client or model). A z-score step is
 * recorded as a step, not as the client's mean and std: each client standardised its own
 * file on its own statistics (the per-domain protocol), and a query file is standardised on
 * its own the same way. */
#ifndef FK_PREP_MODEL_H
#define FK_PREP_MODEL_H

#include <stddef.h>

#include "common/base/bundle.h"
#include "common/la/mat.h"

enum { FK_PREP_MODEL_STEPS = 8, FK_PREP_CODE_MAX = 4 };

/* One client's record of one data set. */
typedef struct fk_prep_record {
    int known; /* 0: not reported */
    int n;     /* steps */
    int code[FK_PREP_MODEL_STEPS];
    size_t d;                    /* affine map width; 0: none */
    const double *shift, *scale; /* borrowed, d each */
} fk_prep_record;

/* 1 if a and b are both known and equal (steps, and the map bit for bit). */
int fk_prep_record_same(const fk_prep_record *a, const fk_prep_record *b);

/* Add the tensors above for the k clients' records to m. Any record unknown: nothing is
 * added (*unknown_at, if not NULL, gets the first unknown client's index, else -1). Maps of
 * different widths: FK_EINVAL. FK_ENOMEM. */
FK_CHECKRETURN int fk_prep_model_put(fk_bundle *m, const fk_prep_record *rec, int k,
                                     int *unknown_at, fk_err *err);

/* Rows of data_prep (1 shared, K per client), 0 when the model does not record it. */
int fk_prep_model_rows(const fk_bundle *m);

/* Read row `client` of the model's record (client < 0: the shared row; FK_EINVAL naming
 * --client when the clients differ). Checks the tensors (a model file is untrusted):
 * FK_EFORMAT for bad shapes, codes or non-finite map values. rec borrows m's storage. */
FK_CHECKRETURN int fk_prep_model_get(const fk_bundle *m, int client, fk_prep_record *rec,
                                     fk_err *err);

/* Apply rec's steps from step `from` on, then its map, to X in place. FK_EINVAL when the map's
 * width is not X's; FK_ENOMEM. */
FK_CHECKRETURN int fk_prep_record_apply(const fk_prep_record *rec, int from, fk_mat *X,
                                        fk_err *err);

/* "l1, zscore, then an affine map (800 columns)" / "none" into buf. */
void fk_prep_record_describe(const fk_prep_record *rec, char *buf, size_t cap);

#endif
