/* Latency histogram of `fedkern bench load`: log-linear buckets (HDR style) from 1 us to
 * about 19 hours with a relative bucket width of 1/64 (exact below 128 us). Recording is a
 * shift, a compare and an add, with no allocation; the histograms of several generator
 * processes merge exactly (counts add), so percentiles over all of them are those of one
 * histogram that saw every call. */
#ifndef FK_BENCH_LOAD_HIST_H
#define FK_BENCH_LOAD_HIST_H

#include <stdint.h>

enum {
    FK_LHIST_SUB = 128,                                 /* exact microseconds below this */
    FK_LHIST_MSB_MAX = 36,                              /* 2^37 us: larger values are clamped */
    FK_LHIST_N = FK_LHIST_SUB + (FK_LHIST_MSB_MAX - 6) * (FK_LHIST_SUB / 2)
};

typedef struct fk_lhist {
    uint64_t n;
    uint64_t count[FK_LHIST_N];
    double max_s, sum_s; /* exact maximum and sum, in seconds */
} fk_lhist;

/* An empty histogram (equivalently: zero-fill). */
void fk_lhist_init(fk_lhist *h);

/* Record one latency in seconds (negative counts as 0). */
void fk_lhist_record(fk_lhist *h, double seconds);

/* into += from. */
void fk_lhist_merge(fk_lhist *into, const fk_lhist *from);

/* The p-quantile (0 <= p <= 1) in seconds: the smallest recorded value v with at least
 * ceil(p * n) values <= v, given as its bucket's midpoint (within 1/128 of the value) and
 * never above the exact maximum; p = 1 gives the exact maximum, 0 when empty. */
double fk_lhist_pct(const fk_lhist *h, double p);

/* Bucket index of a value in microseconds, and the bucket's [lo, hi) in microseconds
 * (exposed for the unit test). */
int fk__lhist_index(uint64_t us);
void fk__lhist_bounds(int idx, uint64_t *lo, uint64_t *hi);

#endif
