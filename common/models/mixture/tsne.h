/* t-SNE (van der Maaten & Hinton 2008; van der Maaten 2014) with the Rtsne
 * defaults the FedGrEM spec names (perplexity 30 over 3*30 exact nearest
 * neighbours, early exaggeration 12 for 250 iterations, momentum 0.5 -> 0.8,
 * learning rate 200, adaptive gains, re-centring), seeded through fk_rng.
 * theta = 0: exact dense path (O(N^2) memory, N up to ~10^4).
 * theta > 0: Rtsne's Barnes-Hut path: blockwise exact kNN, sparse symmetric P,
 * repulsion through a 2^dims-ary space-partitioning tree (sptree.h); memory
 * O(N k), so all 70,000 Fashion-MNIST images fit. Both paths use Rtsne's
 * gradient, which omits the paper's factor 4, and its start Y = 1e-4 N(0, I). */
#ifndef FK_TSNE_H
#define FK_TSNE_H

#include <stdint.h>

#include "common/base/err.h"
#include "common/la/mat.h"

typedef struct fk_tsne_opts {
    int dims;           /* output dimension (10) */
    double perplexity;  /* 30 */
    int iters;          /* 1000 */
    double lr;          /* 200 */
    int exag_iters;     /* 250 */
    double exag;        /* 12 */
    uint64_t seed;
    double theta;       /* 0.5 (Rtsne); 0 selects the exact dense path */
    int verbose;        /* 1: progress and seconds per iteration on stderr */
    int threads;        /* Barnes-Hut repulsion threads (0, 1: none); results do not depend on it */
} fk_tsne_opts;

void fk_tsne_defaults(fk_tsne_opts *o);

/* Embed X (n x d, n > 3 * perplexity + 1) into Y (initialised here, n x dims).
 * X is used as given (callers reduce it with PCA first when d is large). */
FK_CHECKRETURN int fk_tsne(const fk_mat *X, const fk_tsne_opts *o, fk_mat *Y, fk_err *err);

#endif
