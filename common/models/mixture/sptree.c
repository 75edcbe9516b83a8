#include "common/models/mixture/sptree.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/err.h"

typedef struct fk_spnode {
    uint32_t cum;     /* points in the subtree (duplicates included) */
    int32_t point;    /* the leaf's point, -1 if none */
    int32_t child;    /* first child, -1 if none (leaf) */
    int32_t sibling;  /* next child of the same parent, -1 at the end */
    uint32_t code;    /* orthant of this node within its parent: bit d = lower half in d */
    int32_t depth;
} fk_spnode;

typedef struct fk_spflat {
    uint32_t cum;
    int32_t point;
    int32_t first;  /* first child in the flat order */
    int32_t nchild; /* 0: leaf */
    int32_t depth;
} fk_spflat;

/* Give k's children the ids next.., then lay out their subtrees in turn. */
static void flatten(fk_sptree *t, int32_t k, int32_t id, int32_t *next)
{
    size_t D = (size_t)t->dims;
    const fk_spnode *nd = &t->node[k];
    fk_spflat *f = &t->flat[id];
    *f = (fk_spflat){.cum = nd->cum, .point = nd->point, .first = *next, .nchild = 0,
                     .depth = nd->depth};
    memcpy(t->fcom + (size_t)id * D, t->com + (size_t)k * D, D * sizeof(double));
    for (int32_t c = nd->child; c >= 0; c = t->node[c].sibling)
        f->nchild++;
    int32_t first = *next;
    *next += f->nchild;
    int32_t q = first;
    for (int32_t c = nd->child; c >= 0; c = t->node[c].sibling)
        flatten(t, c, q++, next);
}

static int32_t new_node(fk_sptree *t, const double *centre, uint32_t code, int depth)
{
    if (t->nodes == t->cap) {
        size_t cap = t->cap * 2, D = (size_t)t->dims;
        double *c = realloc(t->centre, cap * D * sizeof *c);
        if (c)
            t->centre = c;
        double *m = realloc(t->com, cap * D * sizeof *m);
        if (m)
            t->com = m;
        fk_spnode *nd = realloc(t->node, cap * sizeof *nd);
        if (nd)
            t->node = nd;
        if (!c || !m || !nd)
            return -1;
        t->cap = cap;
    }
    size_t k = t->nodes++, D = (size_t)t->dims;
    memcpy(t->centre + k * D, centre, D * sizeof *centre);
    memset(t->com + k * D, 0, D * sizeof(double));
    t->node[k] = (fk_spnode){.cum = 0, .point = -1, .child = -1, .sibling = -1, .code = code,
                             .depth = depth};
    return (int32_t)k;
}

static uint32_t orthant(const fk_sptree *t, int32_t k, const double *y)
{
    uint32_t code = 0;
    const double *c = t->centre + (size_t)k * (size_t)t->dims;
    for (int d = 0; d < t->dims; d++)
        code |= (uint32_t)(y[d] < c[d]) << d;
    return code;
}

/* The child of k in orthant code, created (empty) if absent; -1: out of memory. */
static int32_t child_of(fk_sptree *t, int32_t k, uint32_t code)
{
    for (int32_t c = t->node[k].child; c >= 0; c = t->node[c].sibling)
        if (t->node[c].code == code)
            return c;
    int D = t->dims, depth = t->node[k].depth + 1;
    double centre[32];
    double scale = ldexp(1.0, -depth); /* child half-width = root half-width / 2^depth */
    for (int d = 0; d < D; d++)
        centre[d] = t->centre[(size_t)k * (size_t)D + (size_t)d] +
                    ((code >> d) & 1 ? -1.0 : 1.0) * t->hw0[d] * scale;
    int32_t c = new_node(t, centre, code, depth);
    if (c < 0)
        return -1;
    t->node[c].sibling = t->node[k].child; /* t->node may have moved: index again */
    t->node[k].child = c;
    return c;
}

static void add_mass(fk_sptree *t, int32_t k, const double *y, uint32_t count)
{
    fk_spnode *nd = &t->node[k];
    double *m = t->com + (size_t)k * (size_t)t->dims;
    double a = (double)nd->cum / (double)(nd->cum + count), b = (double)count / (nd->cum + count);
    for (int d = 0; d < t->dims; d++)
        m[d] = a * m[d] + b * y[d];
    nd->cum += count;
}

static int insert(fk_sptree *t, int32_t i)
{
    size_t D = (size_t)t->dims;
    const double *y = t->Y + (size_t)i * D;
    int32_t k = 0;
    for (;;) {
        add_mass(t, k, y, 1);
        if (t->node[k].child < 0) {
            int32_t p = t->node[k].point;
            if (p < 0 && t->node[k].cum == 1) { /* empty leaf */
                t->node[k].point = i;
                return FK_OK;
            }
            if (p < 0 || !memcmp(t->Y + (size_t)p * D, y, D * sizeof *y))
                return FK_OK; /* duplicate of the leaf's point: counted, not stored (Rtsne) */
            /* split: push the resident point (and its duplicates) one level down */
            int32_t c = child_of(t, k, orthant(t, k, t->Y + (size_t)p * D));
            if (c < 0)
                return FK_ENOMEM;
            add_mass(t, c, t->Y + (size_t)p * D, t->node[k].cum - 1);
            t->node[c].point = p;
            t->node[k].point = -1;
        }
        int32_t c = child_of(t, k, orthant(t, k, y));
        if (c < 0)
            return FK_ENOMEM;
        k = c;
    }
}

int fk_sptree_init(fk_sptree *t, const double *Y, size_t n, int dims)
{
    memset(t, 0, sizeof *t);
    if (dims < 1 || dims > 31 || n < 1 || n > INT32_MAX)
        return FK_EINVAL;
    t->dims = dims;
    t->n = n;
    t->Y = Y;
    t->cap = 2 * n + 16;
    size_t D = (size_t)dims;
    t->centre = malloc(t->cap * D * sizeof *t->centre);
    t->com = malloc(t->cap * D * sizeof *t->com);
    t->node = malloc(t->cap * sizeof *t->node);
    t->hw0 = malloc(D * sizeof *t->hw0);
    double *lo = malloc(D * sizeof *lo), *hi = malloc(D * sizeof *hi), *mean = calloc(D, sizeof *mean);
    int rc = (t->centre && t->com && t->node && t->hw0 && lo && hi && mean) ? FK_OK : FK_ENOMEM;
    if (!rc) {
        /* root box as Rtsne: centred on the mean, half-width = max deviation + 1e-5 */
        for (size_t d = 0; d < D; d++)
            lo[d] = hi[d] = Y[d];
        for (size_t i = 0; i < n; i++)
            for (size_t d = 0; d < D; d++) {
                double v = Y[i * D + d];
                mean[d] += v;
                lo[d] = v < lo[d] ? v : lo[d];
                hi[d] = v > hi[d] ? v : hi[d];
            }
        t->maxhw0 = 0;
        for (size_t d = 0; d < D; d++) {
            mean[d] /= (double)n;
            t->hw0[d] = fmax(hi[d] - mean[d], mean[d] - lo[d]) + 1e-5;
            t->maxhw0 = fmax(t->maxhw0, t->hw0[d]);
        }
        if (new_node(t, mean, 0, 0) < 0)
            rc = FK_ENOMEM;
    }
    for (size_t i = 0; !rc && i < n; i++)
        rc = insert(t, (int32_t)i);
    if (!rc) {
        t->flat = malloc(t->nodes * sizeof *t->flat);
        t->fcom = malloc(t->nodes * D * sizeof *t->fcom);
        if (t->flat && t->fcom) {
            int32_t next = 1;
            flatten(t, 0, 0, &next);
        } else {
            rc = FK_ENOMEM;
        }
        free(t->centre); /* the build arrays are done with */
        free(t->com);
        free(t->node);
        t->centre = t->com = NULL;
        t->node = NULL;
    }
    free(lo);
    free(hi);
    free(mean);
    if (rc)
        fk_sptree_close(t);
    return rc;
}

void fk_sptree_close(fk_sptree *t)
{
    free(t->centre);
    free(t->com);
    free(t->node);
    free(t->hw0);
    free(t->flat);
    free(t->fcom);
    memset(t, 0, sizeof *t);
}

static void force(const fk_sptree *t, int32_t k, int32_t i, const double *y, double theta,
                  double *neg_f, double *sum_q)
{
    const fk_spflat *nd = &t->flat[k];
    if (nd->cum == 0 || (nd->nchild == 0 && nd->cum == 1 && nd->point == i))
        return;
    int D = t->dims;
    const double *m = t->fcom + (size_t)k * (size_t)D;
    double d2 = 0.0;
    for (int d = 0; d < D; d++)
        d2 += (y[d] - m[d]) * (y[d] - m[d]);
    double maxhw = ldexp(t->maxhw0, -nd->depth);
    if (nd->nchild == 0 || maxhw * maxhw < theta * theta * d2) { /* maxhw / dist < theta */
        double q = 1.0 / (1.0 + d2), mult = (double)nd->cum * q;
        *sum_q += mult;
        mult *= q;
        for (int d = 0; d < D; d++)
            neg_f[d] += mult * (y[d] - m[d]);
        return;
    }
    for (int32_t c = nd->first; c < nd->first + nd->nchild; c++)
        force(t, c, i, y, theta, neg_f, sum_q);
}

void fk_sptree_repulsion(const fk_sptree *t, size_t i, double theta, double *neg_f,
                         double *sum_q)
{
    force(t, 0, (int32_t)i, t->Y + i * (size_t)t->dims, theta, neg_f, sum_q);
}
