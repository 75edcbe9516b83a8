/* Barnes-Hut space-partitioning tree in any dimension (the 2^D-ary SPTree of
 * bhtsne / Rtsne): each node is a box (centre, half-widths), keeps the centre
 * of mass and the count of the points below it, and holds at most one point
 * as a leaf. Children are created lazily and only non-empty ones are stored,
 * so D = 10 costs no 1024-slot arrays. Used for t-SNE repulsive forces. */
#ifndef FK_SPTREE_H
#define FK_SPTREE_H

#include <stddef.h>

typedef struct fk_sptree {
    int dims;
    size_t n;            /* points */
    const double *Y;     /* n x dims, row-major, borrowed */
    size_t nodes, cap;   /* node pool */
    double *centre;      /* cap x dims */
    double *com;         /* cap x dims, centre of mass */
    double *hw0;         /* dims: root half-widths */
    double maxhw0;       /* largest root half-width */
    struct fk_spnode *node;
    /* after the build: nodes renumbered so every node's children are
     * contiguous (the force walk then streams through memory) */
    struct fk_spflat *flat;
    double *fcom;        /* nodes x dims, in the flat order */
} fk_sptree;

/* Build the tree over the n rows of Y (the root box spans them, as Rtsne). */
int fk_sptree_init(fk_sptree *t, const double *Y, size_t n, int dims);
void fk_sptree_close(fk_sptree *t);

/* Repulsion on point i: adds sum_j q_ij^2 (y_i - y_j) (unnormalised) to neg_f
 * (dims) and sum_j q_ij to *sum_q, q_ij = 1 / (1 + |y_i - y_j|^2), cells
 * summarised when max_half_width / |y_i - com| < theta (theta = 0: exact). */
void fk_sptree_repulsion(const fk_sptree *t, size_t i, double theta, double *neg_f,
                         double *sum_q);

#endif
