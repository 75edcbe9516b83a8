/* Shared by the loader fuzz targets: the input becomes an in-memory file (memfd) that
 * fk_load opens by its /proc/self/fd path, with a small value limit so a hostile
 * header cannot make the run allocate gigabytes. */
#ifndef FK_FUZZ_LOAD_H
#define FK_FUZZ_LOAD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/data/load.h"

static inline void fuzz_load(const uint8_t *data, size_t size, fk_load_opts *o)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
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
