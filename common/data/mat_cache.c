#include "common/data/mat_cache.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char MAGIC[8] = "FKMATC1\n";

int fk_mat_cache_dir(const char *dflt, char *out, size_t cap, fk_err *err)
{
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int w;
    if (dflt && *dflt)
        w = snprintf(out, cap, "%s", dflt);
    else if (x && *x)
        w = snprintf(out, cap, "%s/fedkern", x);
    else if (h && *h)
        w = snprintf(out, cap, "%s/.cache/fedkern", h);
    else
        return fk_err_set(err, FK_ENOTFOUND,
                          "cache: no directory (neither XDG_CACHE_HOME nor HOME is set); pass one");
    if (w < 0 || (size_t)w >= cap)
        return fk_err_set(err, FK_EINVAL, "cache: directory name too long");
    return FK_OK;
}

/* mkdir -p of the directory part of path. */
static int mkdir_parent(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return -1;
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = 0;
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            int bad = mkdir(buf, 0777) && errno != EEXIST;
            *s = '/';
            if (bad)
                return -1;
        }
    return mkdir(buf, 0777) && errno != EEXIST ? -1 : 0;
}

int fk_mat_cache_read(const char *path, const char *key, size_t rows, size_t cols, fk_mat *Y,
                      fk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return FK_ENOTFOUND;
    char magic[8], k[FK_MAT_CACHE_KEY];
    uint64_t dim[2];
    long expect = (long)(sizeof magic + sizeof k + sizeof dim + rows * cols * sizeof(double));
    const char *why = NULL;
    int have = 0;
    if (fseek(f, 0, SEEK_END) || ftell(f) != expect || fseek(f, 0, SEEK_SET))
        why = "wrong size";
    else if (fread(magic, sizeof magic, 1, f) != 1 || memcmp(magic, MAGIC, sizeof magic))
        why = "bad magic";
    else if (fread(k, sizeof k, 1, f) != 1 || strncmp(k, key, sizeof k))
        why = "other key";
    else if (fread(dim, sizeof dim, 1, f) != 1 || dim[0] != rows || dim[1] != cols)
        why = "other shape";
    if (!why && fk_mat_init(Y, rows, cols)) {
        fclose(f);
        return fk_err_set(err, FK_ENOMEM, "cache: out of memory for %zu x %zu", rows, cols);
    }
    have = !why;
    if (!why && fread(Y->data, sizeof(double), rows * cols, f) != rows * cols)
        why = "short read";
    for (size_t i = 0; !why && i < rows * cols; i++)
        if (!isfinite(Y->data[i]))
            why = "non-finite value";
    fclose(f);
    if (why) {
        if (have)
            fk_mat_close(Y);
        return fk_err_set(err, FK_EFORMAT,
                          "cache %s is corrupt or stale (%s; expected %ld bytes for key '%s'); "
                          "delete it to recompute",
                          path, why, expect, key);
    }
    return FK_OK;
}

int fk_mat_cache_write(const char *path, const char *key, const fk_mat *Y, fk_err *err)
{
    char tmp[4200], k[FK_MAT_CACHE_KEY] = {0};
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return fk_err_set(err, FK_EINVAL, "cache: path too long");
    snprintf(k, sizeof k, "%s", key);
    if (Y->ld != Y->cols)
        return fk_err_set(err, FK_EINVAL, "cache: the matrix must be dense");
    uint64_t dim[2] = {Y->rows, Y->cols};
    FILE *f = mkdir_parent(path) ? NULL : fopen(tmp, "wb");
    if (!f)
        return fk_err_set(err, FK_EIO, "cache: cannot create %s: %s", tmp, strerror(errno));
    int ok = fwrite(MAGIC, sizeof MAGIC, 1, f) == 1 && fwrite(k, sizeof k, 1, f) == 1 &&
             fwrite(dim, sizeof dim, 1, f) == 1 &&
             fwrite(Y->data, sizeof(double), Y->rows * Y->cols, f) == Y->rows * Y->cols;
    ok = fflush(f) == 0 && fsync(fileno(f)) == 0 && ok;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        int e = errno;
        remove(tmp);
        return fk_err_set(err, FK_EIO, "cache: cannot write %s: %s", path, strerror(e));
    }
    return FK_OK;
}
