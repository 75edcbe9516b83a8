/* The FedGrEM simulation design's 10 tasks (5 components in 10 dimensions, 150 points each)
 * as a test fixture (include after cmocka.h). */
#ifndef FK_TEST_SUPPORT_GMM_H
#define FK_TEST_SUPPORT_GMM_H

#include "common/data/synth_gmm.h"

typedef struct fixture {
    fk_dataset tasks[10];
    double th[500], w[50]; /* true centres and weights of every task */
} fixture;

/* The design with `outliers` outlier tasks last, drawn from seed. */
static void make(fixture *f, uint64_t seed, int outliers)
{
    fk_synth_gmm o;
    fk_synth_gmm_defaults(&o);
    o.n_outlier = outliers;
    assert_int_equal(fk_synth_gmm_make(&o, seed, f->tasks, f->th, f->w, NULL), FK_OK);
}

static void drop(fixture *f)
{
    for (int k = 0; k < 10; k++)
        fk_dataset_close(&f->tasks[k]);
}

#endif
