/* On-disk cache of a computed matrix (e.g. the 70,000 x 10 t-SNE embedding):
 * a magic, a 256-byte key naming everything the matrix depends on, the shape
 * and the row-major doubles. Written to a temporary file then renamed, so a
 * reader never sees a partial file; validated on read. */
#ifndef FK_MAT_CACHE_H
#define FK_MAT_CACHE_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

enum { FK_MAT_CACHE_KEY = 256 };

/* Read path into Y (initialised here, rows x cols): FK_OK; FK_ENOTFOUND if the
 * file does not exist; FK_EFORMAT (message with the path and what to do) if
 * the magic, key, shape, size or values do not match. */
FK_CHECKRETURN int fk_mat_cache_read(const char *path, const char *key, size_t rows, size_t cols,
                                     fk_mat *Y, fk_err *err);
/* Write Y under key (tmp + fsync + rename); creates the directory of path. */
FK_CHECKRETURN int fk_mat_cache_write(const char *path, const char *key, const fk_mat *Y,
                                      fk_err *err);

/* dir for tool caches: dflt if set, else $XDG_CACHE_HOME/fedkern, else ~/.cache/fedkern. */
FK_CHECKRETURN int fk_mat_cache_dir(const char *dflt, char *out, size_t cap, fk_err *err);

#endif
