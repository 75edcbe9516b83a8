#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/la/vsincos.h"

enum { SWEEP = 1000000 };

/* Error in units of the last place of the libm value (ulp of a normal double near ref). */
static double ulps(double got, double ref)
{
    double a = fabs(ref) > DBL_MIN ? fabs(ref) : DBL_MIN;
    int e;
    frexp(a, &e);
    return fabs(got - ref) / ldexp(1.0, e - 53);
}

/* Uniform arguments over [-1e4, 1e4] plus small ones near 0: every result within 4e-16
 * of libm and within 2 ulp of it. */
static void sweep_matches_libm(void **state)
{
    (void)state;
    double *x = malloc(SWEEP * sizeof *x), *s = malloc(SWEEP * sizeof *s),
           *c = malloc(SWEEP * sizeof *c);
    assert_non_null(x);
    assert_non_null(s);
    assert_non_null(c);
    fk_rng g;
    fk_rng_init(&g, 11, 3);
    for (size_t i = 0; i < SWEEP; i++)
        x[i] = i % 10 ? -1e4 + 2e4 * fk_rng_uniform(&g) : (fk_rng_uniform(&g) - 0.5) * 8.0;
    fk_vsincos(x, s, c, SWEEP);
    double abs_s = 0, abs_c = 0, ulp_s = 0, ulp_c = 0;
    for (size_t i = 0; i < SWEEP; i++) {
        double rs = sin(x[i]), rc = cos(x[i]);
        abs_s = fmax(abs_s, fabs(s[i] - rs));
        abs_c = fmax(abs_c, fabs(c[i] - rc));
        ulp_s = fmax(ulp_s, ulps(s[i], rs));
        ulp_c = fmax(ulp_c, ulps(c[i], rc));
    }
    printf("max abs error sin %.3g cos %.3g; max ulp sin %.3g cos %.3g\n", abs_s, abs_c, ulp_s,
           ulp_c);
    assert_true(abs_s <= 4e-16);
    assert_true(abs_c <= 4e-16);
    assert_true(ulp_s <= 2.0);
    assert_true(ulp_c <= 2.0);
    free(x);
    free(s);
    free(c);
}

/* Multiples of pi/2 (the worst case for the reduction) and every quadrant sign. */
static void near_multiples_of_half_pi(void **state)
{
    (void)state;
    for (int k = -4000; k <= 4000; k++) {
        double base = k * (M_PI / 2);
        for (int d = -3; d <= 3; d++) {
            double x = base;
            for (int j = 0; j < (d < 0 ? -d : d); j++)
                x = nextafter(x, d < 0 ? -INFINITY : INFINITY);
            double s, c;
            fk_vsincos(&x, &s, &c, 1);
            assert_true(fabs(s - sin(x)) <= 4e-16);
            assert_true(fabs(c - cos(x)) <= 4e-16);
        }
    }
}

static void special_values(void **state)
{
    (void)state;
    const double x[] = {0.0, -0.0, 1e-300, -1e-300, 4.9e-324, 1e-9, -1e-9,
                        FK_VSINCOS_MAX, -FK_VSINCOS_MAX, nextafter(FK_VSINCOS_MAX, INFINITY),
                        1e7, -3e15, 1e300, DBL_MAX, INFINITY, -INFINITY, NAN};
    size_t n = sizeof x / sizeof x[0];
    double s[sizeof x / sizeof x[0]], c[sizeof x / sizeof x[0]];
    fk_vsincos(x, s, c, n);
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i]) || isinf(x[i])) {
            assert_true(isnan(s[i]));
            assert_true(isnan(c[i]));
            continue;
        }
        assert_true(fabs(s[i] - sin(x[i])) <= 4e-16);
        assert_true(fabs(c[i] - cos(x[i])) <= 4e-16);
        if (fabs(x[i]) > FK_VSINCOS_MAX) { /* the libm fallback: identical */
            assert_true(s[i] == sin(x[i]));
            assert_true(c[i] == cos(x[i]));
        }
    }
    assert_true(signbit(s[1]) && !signbit(s[0])); /* sin(-0) = -0 */
    assert_true(c[0] == 1.0 && c[1] == 1.0);
    assert_true(s[2] == 1e-300 && s[3] == -1e-300 && s[4] == 4.9e-324);
}

/* The array function (AVX2 clone where the CPU has it), the scalar reference, a block that
 * falls back to libm for one element, and in-place use all give the same bits. */
static void vector_scalar_inplace_bit_identical(void **state)
{
    (void)state;
    enum { N = 1000 };
    double x[N], s[N], c[N], s1[N], c1[N], y[N], cy[N];
    fk_rng g;
    fk_rng_init(&g, 5, 9);
    for (size_t i = 0; i < N; i++)
        x[i] = (fk_rng_uniform(&g) - 0.5) * 200.0;
    fk_vsincos(x, s, c, N);
    for (size_t i = 0; i < N; i++)
        fk_sincos1(x[i], &s1[i], &c1[i]);
    assert_memory_equal(s, s1, sizeof s);
    assert_memory_equal(c, c1, sizeof c);
    memcpy(y, x, sizeof y);
    fk_vsincos(y, y, cy, N); /* sin in place over the arguments, as the feature map does */
    assert_memory_equal(y, s, sizeof y);
    assert_memory_equal(cy, c, sizeof cy);
    memcpy(y, x, sizeof y);
    y[7] = INFINITY; /* its block takes the per-element path */
    fk_vsincos(y, s1, c1, N);
    assert_true(isnan(s1[7]) && isnan(c1[7]));
    s1[7] = s[7];
    c1[7] = c[7];
    assert_memory_equal(s1, s, sizeof s);
    assert_memory_equal(c1, c, sizeof c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sweep_matches_libm),
        cmocka_unit_test(near_multiples_of_half_pi),
        cmocka_unit_test(special_values),
        cmocka_unit_test(vector_scalar_inplace_bit_identical),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
