/* One-vs-one multiclass for the sfl job (spec A14, dissertation §2.4.3-2.4.4): the pair
 * enumeration and the majority vote shared by the client's evaluation and the tests. */
#include <math.h>
#include <stdlib.h>

#include "common/methods/sfl/sfl_int.h"

int fk__sfl_ovo_pairs(int n_cls)
{
    return n_cls * (n_cls - 1) / 2;
}

void fk__sfl_ovo_pair(int n_cls, int q, int *a, int *b)
{
    int i = 0;
    while (q >= n_cls - 1 - i) { /* row i of the upper triangle has n_cls-1-i pairs */
        q -= n_cls - 1 - i;
        i++;
    }
    *a = i;
    *b = i + 1 + q;
}

void fk__sfl_ovo_vote(const fk_sfl_model *m, const double *mK, int n_cls, const double *X,
                      size_t n, double *f, int *votes, double *margin, int *pred)
{
    int P = fk__sfl_ovo_pairs(n_cls);
    for (size_t i = 0; i < n * (size_t)n_cls; i++) {
        votes[i] = 0;
        margin[i] = 0;
    }
    size_t off = 0;
    for (int q = 0; q < P; q++) {
        int a, b;
        fk__sfl_ovo_pair(n_cls, q, &a, &b);
        /* problem q's kernels, a view into the concatenated model */
        fk_sfl_model v = {(size_t)mK[q], m->p, NULL, NULL, NULL};
        if (v.K) {
            v.s = m->s + off * (size_t)m->p;
            v.w = m->w + off;
            v.c = m->c + off;
        }
        off += (size_t)mK[q];
        fk_sfl_predict(&v, X, n, f);
        for (size_t i = 0; i < n; i++) { /* sign(0) := +1, as the binary job */
            size_t w = i * (size_t)n_cls + (size_t)(f[i] >= 0 ? a : b);
            votes[w]++;
            margin[w] += fabs(f[i]);
        }
    }
    /* spec §6.6: most votes; ties to the larger sum of |f_b| over the won problems, then (strict
     * comparisons in ascending order) to the smaller class */
    for (size_t i = 0; i < n; i++) {
        const int *v = votes + i * (size_t)n_cls;
        const double *g = margin + i * (size_t)n_cls;
        int best = 0;
        for (int j = 1; j < n_cls; j++)
            if (v[j] > v[best] || (v[j] == v[best] && g[j] > g[best]))
                best = j;
        pred[i] = best;
    }
}
