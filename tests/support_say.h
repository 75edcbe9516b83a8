/* Measured values printed only when asked: the oracle tests check bounds, and
 * FK_SFL_ORACLE_VERBOSE=1 makes them say what they measured (docs/sfl.md quotes those). */
#ifndef FK_TEST_SUPPORT_SAY_H
#define FK_TEST_SUPPORT_SAY_H

#include <stdio.h>
#include <stdlib.h>

static inline int fk_test_verbose(void)
{
    const char *e = getenv("FK_SFL_ORACLE_VERBOSE");
    return e && *e == '1';
}

#define SAY(...)                                                                                   \
    do {                                                                                           \
        if (fk_test_verbose())                                                                     \
            printf(__VA_ARGS__);                                                                   \
    } while (0)

#endif
