/* Shared by the fuzz targets of file readers: the input becomes an in-memory
 * file (memfd) that the reader opens by its /proc/self/fd path. */
#ifndef FK_FUZZ_MEMFD_H
#define FK_FUZZ_MEMFD_H

#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* The file's descriptor (close it after use) and its path in path, or -1. */
static inline int fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t cap)
{
    int fd = memfd_create("fuzz", 0);
    if (fd < 0)
        return -1;
    for (size_t off = 0; off < size;) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
