/* Real-data protocol of the FedGrEM paper (spec fedgrem.md 4.5): pooled,
 * preprocessed data; per replication random clients, an 80/20 split inside
 * every client, contaminated clients, one method run on the training points,
 * and the mis-clustering error on the good clients' test points. */
#ifndef FK_GMM_REAL_H
#define FK_GMM_REAL_H

#include <stdint.h>

#include "common/base/params.h"
#include "common/data/dataset.h"

typedef struct fk_gmm_real {
    fk_dataset d;      /* pooled, preprocessed; labels 0..n_classes-1 */
    double *mean, *sd; /* coordinate-wise mean and sd of d.X (contamination scale) */
    int equal_split;   /* 1: clients get equal shares (pendigits); 0: each sample picks a client */
} fk_gmm_real;

/* Names: "pendigits" (train+test pooled, z-scored, 16-d), "fashion-mnist-pca10"
 * (70,000 images / 255, PCA to 10 dims, scores as they are),
 * "fashion-mnist-pca10z" (the same, z-scored) and "fashion-mnist-tsne10-subN"
 * (a fixed random subsample of N images, PCA-50, exact t-SNE to 10-d) and
 * "fashion-mnist-tsne10" (all 70,000 images, PCA-50, Barnes-Hut t-SNE to 10-d
 * as Rtsne; the embedding is cached, see fk_gmm_real_opts). */
FK_CHECKRETURN int fk_gmm_real_load(fk_gmm_real *r, const char *data_dir, const char *name,
                                    fk_err *err);

typedef struct fk_gmm_real_opts {
    const char *cache_dir; /* NULL: $XDG_CACHE_HOME/fedkern, else ~/.cache/fedkern */
    int tsne_iters;        /* 0: the Rtsne default 1000 (fewer: timing runs) */
    int tsne_threads;      /* Barnes-Hut repulsion threads (same result for any count) */
    uint64_t tsne_seed;    /* 0: seed 1 */
} fk_gmm_real_opts;

FK_CHECKRETURN int fk_gmm_real_load_opts(fk_gmm_real *r, const char *data_dir, const char *name,
                                         const fk_gmm_real_opts *o, fk_err *err);
void fk_gmm_real_close(fk_gmm_real *r);

typedef struct fk_gmm_real_out {
    double error;    /* mean mis-clustering rate over good clients, in [0, 1] */
    double seconds;  /* wall time of the method run (init included) */
} fk_gmm_real_out;

/* One replication with K clients of which n_contam are contaminated. */
FK_CHECKRETURN int fk_gmm_real_rep(const fk_gmm_real *r, int K, int n_contam, const char *method,
                                   const fk_params *p, int rounds, uint64_t seed,
                                   fk_gmm_real_out *out, fk_err *err);

#endif
