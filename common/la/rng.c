#include "common/la/rng.h"

#include <math.h>

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void fk_rng_init(fk_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
    r->has_spare = 0;
    r->spare = 0.0;
}

uint64_t fk_rng_u64(fk_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double fk_rng_uniform(fk_rng *r)
{
    return (double)(fk_rng_u64(r) >> 11) * 0x1.0p-53;
}

uint64_t fk_rng_below(fk_rng *r, uint64_t n)
{
    if (n == 0) /* documented as invalid; answer 0 rather than divide by zero */
        return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = fk_rng_u64(r);
    while (x >= limit);
    return x % n;
}

/* fdlibm's reduction: x = 2^e * (1 + f), 1 + f in [sqrt(1/2), sqrt(2)), and
 * log(1 + f) = f - (f^2/2 - s*(f^2/2 + R)), s = f/(2 + f), R = 2(s^2/3 + s^4/5 + ...),
 * so the exact f dominates and rounding in the small correction stays below 1 ulp.
 * R is a Horner sum of the atanh series (|s| <= 0.1716: 12 terms reach double
 * precision). frexp is exact; everything else is IEEE +,-,*,/. */
double fk_rng_log(double x)
{
    static const double ln2_hi = 6.93147180369123816490e-01;
    static const double ln2_lo = 1.90821492927058770002e-10;
    if (!(x > 0.0) || x == INFINITY) /* log(0) = -inf, log(inf) = inf, negative or NaN: NaN */
        return x == 0.0 ? -INFINITY : (x == INFINITY ? x : NAN);
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e -= 1;
    }
    double f = m - 1.0;
    double hfsq = 0.5 * f * f;
    double s = f / (2.0 + f);
    double z = s * s;
    double R = 0.0;
    for (int k = 12; k >= 1; k--)
        R = z * (2.0 / (double)(2 * k + 1) + R);
    double dk = (double)e;
    return dk * ln2_hi - ((hfsq - (s * (hfsq + R) + dk * ln2_lo)) - f);
}

double fk_rng_normal(fk_rng *r)
{
    if (r->has_spare) {
        r->has_spare = 0;
        return r->spare;
    }
    double u, v, q;
    do {
        u = 2.0 * fk_rng_uniform(r) - 1.0;
        v = 2.0 * fk_rng_uniform(r) - 1.0;
        q = u * u + v * v;
    } while (q >= 1.0 || q == 0.0);
    double f = sqrt(-2.0 * fk_rng_log(q) / q);
    r->spare = v * f;
    r->has_spare = 1;
    return u * f;
}

double fk_rng_gamma(fk_rng *r, double shape)
{
    if (!(shape > 0.0)) /* NaN or non-positive shape would loop forever below */
        return NAN;
    if (shape < 1.0) {
        /* Boost: Gamma(a) = Gamma(a + 1) * U^(1/a), with U^(1/a) = exp(log(U)/a) via exp2-free pow-by-log. */
        double g = fk_rng_gamma(r, shape + 1.0);
        double u;
        do
            u = fk_rng_uniform(r);
        while (u == 0.0);
        /* exp(y) for y <= 0 by argument halving and a Taylor series: IEEE ops only. */
        double y = fk_rng_log(u) / shape;
        if (y < -746.0) /* exp(y) underflows to 0; also stops -inf from a tiny shape */
            return 0.0;
        int halvings = 0;
        while (y < -0.5 && halvings < 60) {
            y *= 0.5;
            halvings++;
        }
        double t = 1.0, ex = 1.0;
        for (int k = 1; k < 20; k++) {
            t *= y / (double)k;
            ex += t;
        }
        for (int i = 0; i < halvings; i++)
            ex *= ex;
        return g * ex;
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = fk_rng_normal(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = fk_rng_uniform(r);
        if (u < 1.0 - 0.0331 * (x * x) * (x * x))
            return d * v;
        if (u > 0.0 && fk_rng_log(u) < 0.5 * x * x + d * (1.0 - v + fk_rng_log(v)))
            return d * v;
    }
}

void fk_rng_shuffle(fk_rng *r, int *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)fk_rng_below(r, i);
        int t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}
