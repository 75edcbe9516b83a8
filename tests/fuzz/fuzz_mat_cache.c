/* Fuzz target: the on-disk matrix cache reader (common/data/mat_cache.c), bytes
 * a later run reads back from the cache directory. The input is read as it is,
 * then once more padded to the expected size with the magic, key and shape made
 * right as its first bytes ask, so mutations reach the value checks behind them.
 * A successful read must give the asked shape and finite values. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/data/mat_cache.h"
#include "tests/fuzz/fuzz_memfd.h"

enum { ROWS = 3, COLS = 2, HEAD = 8 + FK_MAT_CACHE_KEY + 16, FULL = HEAD + ROWS * COLS * 8 };
static const char KEY[] = "fuzz-key";

static void one(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return;
    fk_mat Y;
    fk_err err = {0};
    int rc = fk_mat_cache_read(path, KEY, ROWS, COLS, &Y, &err);
    if (rc == FK_OK) {
        if (Y.rows != ROWS || Y.cols != COLS)
            abort();
        for (size_t i = 0; i < ROWS * COLS; i++)
            if (!isfinite(Y.data[i]))
                abort();
        fk_mat_close(&Y);
    } else if (rc != FK_ENOTFOUND && !err.msg[0]) {
        abort(); /* every failure carries a message */
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    one(data, size);
    uint8_t buf[FULL] = {0};
    memcpy(buf, data, size < FULL ? size : FULL);
    if (size > 0 && (data[0] & 1)) {
        memcpy(buf, "FKMATC1\n", 8);
        memset(buf + 8, 0, FK_MAT_CACHE_KEY);
        memcpy(buf + 8, KEY, sizeof KEY);
    }
    if (size > 1 && (data[1] & 1)) {
        uint64_t dim[2] = {ROWS, COLS};
        memcpy(buf + 8 + FK_MAT_CACHE_KEY, dim, sizeof dim);
    }
    one(buf, FULL);
    return 0;
}
