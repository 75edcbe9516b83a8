/* Shared by the loader fuzz targets: fk_load reads the input as a memfd file,
 * with a small value limit so a hostile header cannot allocate gigabytes. */
#ifndef FK_FUZZ_LOAD_H
#define FK_FUZZ_LOAD_H

#include <stdint.h>
#include <unistd.h>

#include "common/data/load.h"
#include "tests/fuzz/fuzz_memfd.h"

static inline void fuzz_load(const uint8_t *data, size_t size, fk_load_opts *o)
{
    char path[64];
    int fd = fuzz_memfd(data, size, path, sizeof path);
    if (fd < 0)
        return;
    o->max_values = (size_t)1 << 20;
    fk_dataset ds;
    fk_err err = {0};
    if (fk_load(&ds, path, o, &err) == FK_OK) {
        /* a successful load must be internally consistent */
        for (size_t i = 0; ds.y && i < ds.X.rows; i++)
            if (ds.y[i] < 0 || ds.y[i] >= ds.n_classes || ds.classes[ds.y[i]] != ds.y_raw[i])
                __builtin_trap();
        fk_dataset_close(&ds);
    } else if (!err.msg[0]) {
        __builtin_trap(); /* every failure carries a message */
    }
    close(fd);
}

#endif
