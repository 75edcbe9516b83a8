#if defined(__GNUC__) && !defined(__clang__)
/* comparisons may not trap here (no FP exceptions are used): lets GCC if-convert the selects */
#pragma GCC optimize("no-trapping-math")
#endif
#include "common/la/vsincos.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Cody-Waite reduction x = k pi/2 + r, |r| <~ pi/4, with pi/2 in three parts (fdlibm's
 * pio2_1, pio2_2, pio2_2t): the first two have 33 significant bits, so k PIO2_1 and k PIO2_2
 * are exact for k < 2^20 and x - k PIO2_1 is exact (Sterbenz); the rounding errors of the
 * last two steps are carried in a tail lo (as fdlibm's rem_pio2 does). Then fdlibm's minimax
 * polynomials on [-pi/4, pi/4] (|error| < 2^-58) with the tail correction, and the quadrant
 * k mod 4 picks and signs the results with selects, no branches, so GCC vectorizes the loop
 * (libm's sin and cos are a call each per element). */
static const double INV_PIO2 = 0x1.45f306dc9c883p-1;  /* 2/pi */
static const double PIO2_1 = 0x1.921fb544p+0;          /* first 33 bits of pi/2 */
static const double PIO2_2 = 0x1.0b4611a6p-34;         /* next 33 bits */
static const double PIO2_2T = 0x1.3198a2e037073p-69;   /* pi/2 - PIO2_1 - PIO2_2 */
static const double SHIFT = 6755399441055744.0;        /* 1.5 2^52: round to nearest int */
static const double TINY = 0x1p-27;                    /* sin(r) rounds to r below this */

static const double S1 = -1.66666666666666324348e-01;
static const double S2 = 8.33333333332248946124e-03;
static const double S3 = -1.98412698298579493134e-04;
static const double S4 = 2.75573137070700676789e-06;
static const double S5 = -2.50507602534068634195e-08;
static const double S6 = 1.58969099521155010221e-10;
static const double C1 = 4.16666666666666019037e-02;
static const double C2 = -1.38888888888741095749e-03;
static const double C3 = 2.48015872894767294178e-05;
static const double C4 = -2.75573143513906633035e-07;
static const double C5 = 2.08757232129817482790e-09;
static const double C6 = -1.13596475577881948265e-11;

static inline uint64_t bits_of(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline double double_of(uint64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* Requires |x| <= FK_VSINCOS_MAX (not NaN): the callers check. */
static inline void sincos_reduced(double x, double *sp, double *cp)
{
    double ks = x * INV_PIO2 + SHIFT; /* low mantissa bits hold k mod 2^51 */
    double kd = ks - SHIFT;
    double y1 = x - kd * PIO2_1; /* exact */
    double t2 = kd * PIO2_2;      /* exact */
    double y2 = y1 - t2;
    double e2 = (y1 - y2) - t2; /* rounding error of y2 (Fast2Sum; 0 when y2 is exact) */
    double t3 = kd * PIO2_2T;
    double r = y2 - t3;
    double lo = ((y2 - r) - t3) + e2; /* x - k pi/2 = r + lo: the tail keeps the result < 1 ulp */
    uint64_t q = bits_of(ks);
    double z = r * r;
    double w = z * z;
    double vz = z * r;
    double ps = S2 + z * (S3 + z * S4) + z * w * (S5 + z * S6);
    double sr = r - ((z * (0.5 * lo - vz * ps) - lo) - vz * S1); /* fdlibm's sin(r + lo) */
    sr = fabs(r) < TINY ? r : sr; /* keeps -0 and tiny r exact, as libm does */
    double pc = z * (C1 + z * (C2 + z * C3)) + w * w * (C4 + z * (C5 + z * C6));
    double hz = 0.5 * z;
    double v = 1.0 - hz;
    double cr = v + (((1.0 - v) - hz) + (z * pc - r * lo)); /* (1 - v) - hz: v's rounding */
    /* quadrant q: sin x = (s, c, -s, -c), cos x = (c, -s, -c, s) for q mod 4 = 0, 1, 2, 3 */
    double sv = (q & 1) ? cr : sr;
    double cv = (q & 1) ? sr : cr;
    *sp = double_of(bits_of(sv) ^ ((q & 2) << 62));
    *cp = double_of(bits_of(cv) ^ (((q + 1) & 2) << 62));
}

void fk_sincos1(double x, double *s, double *c)
{
    if (fabs(x) <= FK_VSINCOS_MAX) {
        sincos_reduced(x, s, c);
    } else {
        *s = sin(x);
        *c = cos(x);
    }
}

enum { BLOCK = 256 };

/* The vector loop: restrict and a private copy of x let GCC vectorize without alias checks. */
static inline void block_fast(const double *restrict xb, double *restrict s, double *restrict c,
                              size_t m)
{
    for (size_t i = 0; i < m; i++)
        sincos_reduced(xb[i], &s[i], &c[i]);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
__attribute__((target_clones("avx2", "default"))) /* 4 lanes where the CPU has them */
#endif
void fk_vsincos(const double *x, double *s, double *c, size_t n)
{
    double xb[BLOCK];
    for (size_t i0 = 0; i0 < n; i0 += BLOCK) {
        size_t m = n - i0 < BLOCK ? n - i0 : BLOCK;
        int out = 0;
        for (size_t i = 0; i < m; i++) {
            xb[i] = x[i0 + i];
            out |= !(fabs(xb[i]) <= FK_VSINCOS_MAX); /* NaN too */
        }
        if (!out) {
            block_fast(xb, s + i0, c + i0, m);
            continue;
        }
        for (size_t i = 0; i < m; i++) /* rare: the same per-element result, through libm */
            fk_sincos1(xb[i], &s[i0 + i], &c[i0 + i]);
    }
}
