#ifndef FK_LA_VEXP_H
#define FK_LA_VEXP_H
/* Vectorizable exp for the non-positive arguments of log-sum-exp (softmax) loops. */
#include <stddef.h>

/* x[i] <- exp(x[i]) for x[i] in [-37, 0] (relative error <= 2^-51 against libm exp);
 * x[i] < -37 (and NaN) give 0 (exp(-37) < 2^-53 is below the last bit of a sum >= 1).
 * Arguments above 0 are clamped to 0: callers subtract the row maximum first. */
void fk_vexp_nonpos(double *x, size_t n);

#endif
