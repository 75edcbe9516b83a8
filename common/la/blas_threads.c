#include "common/la/blas_threads.h"

#include <cblas.h>
#include <errno.h>
#include <stdlib.h>

int fk_blas_threads_setup(int *threads, fk_err *err)
{
    const char *s = getenv("FK_BLAS_THREADS");
    long n = FK_BLAS_THREADS_DEFAULT;
    if (s && *s) {
        char *end;
        errno = 0;
        n = strtol(s, &end, 10);
        /* "2x", "0", "-1" or an overflow: refuse rather than guess, since the count decides the
         * bits of every model this program computes */
        if (errno || *end || end == s || n < 1 || n > FK_BLAS_THREADS_MAX)
            return fk_err_set(err, FK_EINVAL,
                              "FK_BLAS_THREADS = '%.40s' is not a thread count; set a whole "
                              "number from 1 to %d, or unset it for %d (the same model bits on "
                              "every machine)",
                              s, FK_BLAS_THREADS_MAX, FK_BLAS_THREADS_DEFAULT);
    }
    openblas_set_num_threads((int)n);
    *threads = (int)n;
    return FK_OK;
}

const char *fk_blas_core_name(void)
{
    const char *name = openblas_get_corename();
    return name ? name : "unknown";
}
