/* Log-linear latency histogram for bench load (see load_hist.h). */
#include "bench/load_hist.h"

#include <math.h>
#include <string.h>

enum { HALF = FK_LHIST_SUB / 2, SUB_BITS = 7 }; /* FK_LHIST_SUB == 1 << SUB_BITS */

void fk_lhist_init(fk_lhist *h)
{
    memset(h, 0, sizeof *h);
}

int fk__lhist_index(uint64_t us)
{
    if (us < FK_LHIST_SUB)
        return (int)us;
    int msb = 63 - __builtin_clzll(us);
    if (msb > FK_LHIST_MSB_MAX)
        return FK_LHIST_N - 1;
    /* the top SUB_BITS bits of the value: 64 sub-buckets per power of two */
    int shift = msb - (SUB_BITS - 1);
    return FK_LHIST_SUB + (msb - SUB_BITS) * HALF + (int)((us >> shift) - HALF);
}

void fk__lhist_bounds(int idx, uint64_t *lo, uint64_t *hi)
{
    if (idx < FK_LHIST_SUB) {
        *lo = (uint64_t)idx;
        *hi = (uint64_t)idx + 1;
        return;
    }
    int k = idx - FK_LHIST_SUB, msb = SUB_BITS + k / HALF, shift = msb - (SUB_BITS - 1);
    uint64_t top = (uint64_t)(HALF + k % HALF);
    *lo = top << shift;
    *hi = (top + 1) << shift;
}

void fk_lhist_record(fk_lhist *h, double seconds)
{
    if (!(seconds > 0))
        seconds = 0;
    double us = seconds * 1e6;
    uint64_t v = us >= 0x1p62 ? (uint64_t)1 << 62 : (uint64_t)us;
    h->count[fk__lhist_index(v)]++;
    h->n++;
    h->sum_s += seconds;
    if (seconds > h->max_s)
        h->max_s = seconds;
}

void fk_lhist_merge(fk_lhist *into, const fk_lhist *from)
{
    for (int i = 0; i < FK_LHIST_N; i++)
        into->count[i] += from->count[i];
    into->n += from->n;
    into->sum_s += from->sum_s;
    if (from->max_s > into->max_s)
        into->max_s = from->max_s;
}

double fk_lhist_pct(const fk_lhist *h, double p)
{
    if (!h->n)
        return 0;
    if (p >= 1)
        return h->max_s;
    uint64_t rank = (uint64_t)ceil(p * (double)h->n);
    if (rank < 1)
        rank = 1;
    uint64_t seen = 0;
    for (int i = 0; i < FK_LHIST_N; i++) {
        seen += h->count[i];
        if (seen >= rank) {
            uint64_t lo, hi;
            fk__lhist_bounds(i, &lo, &hi);
            double mid = i < FK_LHIST_SUB ? (double)lo + 0.5 : 0.5 * (double)(lo + hi);
            double v = mid * 1e-6;
            return v < h->max_s ? v : h->max_s;
        }
    }
    return h->max_s;
}
