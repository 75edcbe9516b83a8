/* Fuzz targets call fallible functions for what they do to the state: accepted or refused,
 * both are fine, the target looks for crashes, leaks and broken invariants. Passing the
 * result here uses it on purpose, so FK_CHECKRETURN still catches an ignored one elsewhere. */
#ifndef FK_FUZZ_RESULT_H
#define FK_FUZZ_RESULT_H

#include <stdlib.h>

static inline void fuzz_any_result(int rc)
{
    (void)rc;
}

/* A step of the target's own setup (not of the input) that must work: abort() otherwise,
 * which the fuzzer reports, instead of fuzzing a half-built state. */
static inline void fuzz_setup(int rc)
{
    if (rc != 0)
        abort();
}

#endif
