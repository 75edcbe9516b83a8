/* Portable seeded RNG: xoshiro256** seeded by splitmix64.
 *
 * Every output is computed with integer arithmetic and IEEE-754 +,-,*,/,sqrt
 * only (no libm transcendental calls), so a seed gives bit-identical streams
 * on every machine, compiler and thread count. Normals use the Marsaglia
 * polar method with fk_rng_log, a portable natural logarithm. */
#ifndef FK_RNG_H
#define FK_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct fk_rng {
    uint64_t s[4];
    double spare;  /* second normal of the last polar pair */
    int has_spare;
} fk_rng;

/* Seed a stream; (seed, stream) pairs give independent generators, e.g.
 * stream = client index, so per-client draws do not depend on client count. */
void fk_rng_init(fk_rng *r, uint64_t seed, uint64_t stream);
uint64_t fk_rng_u64(fk_rng *r);
/* Uniform on [0, 1) with 53 random bits. */
double fk_rng_uniform(fk_rng *r);
/* Uniform integer in [0, n), unbiased (rejection). n must be > 0 (n = 0 gives 0). */
uint64_t fk_rng_below(fk_rng *r, uint64_t n);
/* Standard normal N(0, 1). */
double fk_rng_normal(fk_rng *r);
/* Gamma(shape, 1), Marsaglia-Tsang; shape > 0 (otherwise NaN, no draw). */
double fk_rng_gamma(fk_rng *r, double shape);
/* Fisher-Yates shuffle of idx[0..n). */
void fk_rng_shuffle(fk_rng *r, int *idx, size_t n);
/* Portable natural log for x > 0 (within 2 ulp of libm, bit-identical everywhere);
 * 0 gives -inf, +inf gives +inf, negative or NaN gives NaN. */
double fk_rng_log(double x);

#endif
