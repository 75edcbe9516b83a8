#if defined(__GNUC__) && !defined(__clang__)
/* comparisons may not trap here (no FP exceptions are used): lets GCC if-convert the clamps */
#pragma GCC optimize("no-trapping-math")
#endif
#include "common/la/vexp.h"

#include <stdint.h>
#include <string.h>

/* Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, then a degree-13 Taylor polynomial
 * (truncation < 5e-18 relative) and 2^k from the exponent bits; branch-free so the compiler
 * vectorizes the loop (libm's exp is a call per element and dominated the E-step). */
static const double INV_LN2 = 1.44269504088896338700e+00;
static const double LN2_HI = 6.93147180369123816490e-01; /* trailing zeros: k LN2_HI exact */
static const double LN2_LO = 1.90821492927058770002e-10;
static const double SHIFT = 6755399441055744.0;          /* 1.5 2^52: round to nearest int */

static double exp1(double x)
{
    double ks = x * INV_LN2 + SHIFT; /* low mantissa bits hold 2^51 + k */
    double kd = ks - SHIFT;
    double r = (x - kd * LN2_HI) - kd * LN2_LO;
    double q = 1.0 / 6227020800.0;
    q = q * r + 1.0 / 479001600.0;
    q = q * r + 1.0 / 39916800.0;
    q = q * r + 1.0 / 3628800.0;
    q = q * r + 1.0 / 362880.0;
    q = q * r + 1.0 / 40320.0;
    q = q * r + 1.0 / 5040.0;
    q = q * r + 1.0 / 720.0;
    q = q * r + 1.0 / 120.0;
    q = q * r + 1.0 / 24.0;
    q = q * r + 1.0 / 6.0;
    q = q * r + 0.5;
    q = q * r * r + r; /* exp(r) - 1 without adding 1 early: keeps the small terms exact */
    uint64_t bits;
    memcpy(&bits, &ks, sizeof bits);
    bits = (bits + 1023) << 52; /* 2^51 and the exponent field shift out: bits of 2^k */
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return scale + scale * q;
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default"))) /* 4 lanes where the CPU has them */
#endif
void fk_vexp_nonpos(double *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v = x[i] >= -37.0 ? x[i] : -37.0; /* NaN too: keeps the integer cast defined */
        v = v <= 0.0 ? v : 0.0;
        double e = exp1(v);
        x[i] = x[i] >= -37.0 ? e : 0.0;
    }
}
