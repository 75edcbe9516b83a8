#ifndef FK_LA_VSINCOS_H
#define FK_LA_VSINCOS_H
/* Vectorizable fused sine and cosine over an array (the random Fourier feature map). */
#include <stddef.h>

/* Arguments with |x| <= FK_VSINCOS_MAX take the branch-free polynomial path; larger ones
 * and inf/NaN go to libm sin/cos, so every input gets a correct result. */
#define FK_VSINCOS_MAX 1048576.0

/* s[i] <- sin(x[i]), c[i] <- cos(x[i]) for i < n, within ~1 ulp (absolute error <= 4e-16)
 * for |x| <= FK_VSINCOS_MAX. s and c must not overlap
 * each other; x may be the same array as s or c. Results are bit-identical on every
 * machine and between the AVX2 and the scalar code (only IEEE + - * and no contraction). */
void fk_vsincos(const double *x, double *s, double *c, size_t n);

/* One argument through the same operations as fk_vsincos (the scalar reference). */
void fk_sincos1(double x, double *s, double *c);

#endif
