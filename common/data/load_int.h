/* Internal to the loaders: growable sample buffers, a streaming line reader over
 * zlib (plain and gzip files alike) and the per-format entry points. */
#ifndef FK_LOAD_INT_H
#define FK_LOAD_INT_H

#include <stddef.h>
#include <zlib.h>

#include "common/data/load.h"

/* Growable array of doubles. */
typedef struct fk__dbuf {
    double *v;
    size_t len;
    size_t cap;
} fk__dbuf;

int fk__dbuf_reserve(fk__dbuf *b, size_t extra);
int fk__dbuf_push(fk__dbuf *b, double x);
void fk__dbuf_free(fk__dbuf *b);

/* Lines of a text file read through gzread in chunks; '\n' ends a line, a trailing
 * '\r' is dropped. The line is NUL-terminated and may be modified by the caller. */
typedef struct fk__lines {
    gzFile gz;
    const char *path;
    char *chunk;
    size_t chunk_len, chunk_pos;
    char *line;
    size_t line_cap;
    size_t lineno; /* 1-based number of the line last returned */
    int eof;
} fk__lines;

FK_CHECKRETURN int fk__lines_open(fk__lines *r, const char *path, fk_err *err);
/* 1 and a line, 0 at end of file, or an error code. */
FK_CHECKRETURN int fk__lines_next(fk__lines *r, char **line, size_t *len, fk_err *err);
void fk__lines_close(fk__lines *r);

/* Read exactly n bytes from gz at uncompressed offset *off (advanced); short reads and
 * gzip errors give FK_EFORMAT "PATH: truncated at byte ..." naming what was being read. */
FK_CHECKRETURN int fk__gz_read_exact(gzFile gz, const char *path, void *buf, size_t n, size_t *off,
                                     const char *what, fk_err *err);
/* Before allocating for an array whose header promises need more bytes at uncompressed
 * offset off: FK_EFORMAT if the file cannot hold them (plain: its size; gzip: deflate
 * expands at most ~1032:1), so a lying header in a small file costs no memory. */
FK_CHECKRETURN int fk__gz_plausible(gzFile gz, const char *path, size_t off, size_t need,
                                    fk_err *err);
/* gzopen with a clear error. */
FK_CHECKRETURN int fk__gz_open(gzFile *gz, const char *path, fk_err *err);

/* Fill ds from n x d row-major values and optional raw labels (NULL). */
FK_CHECKRETURN int fk__load_finish(fk_dataset *ds, const char *path, const double *x, size_t n,
                                   size_t d, const double *labels, fk_err *err);
/* The value limit in effect. */
size_t fk__load_max_values(const fk_load_opts *o);
/* The file name without its directories (a loaded data set's name). */
const char *fk__load_base_name(const char *path);
/* Parse a whole cell as a finite double; 0 on success, else a reason string. */
const char *fk__parse_cell(char *cell, double *out);

FK_CHECKRETURN int fk__load_csv(fk_dataset *ds, const char *path, const fk_load_opts *o,
                                fk_err *err);
FK_CHECKRETURN int fk__load_libsvm(fk_dataset *ds, const char *path, const fk_load_opts *o,
                                   fk_err *err);
FK_CHECKRETURN int fk__load_idx(fk_dataset *ds, const char *path, const fk_load_opts *o,
                                fk_err *err);
FK_CHECKRETURN int fk__load_mat(fk_dataset *ds, const char *path, const fk_load_opts *o,
                                fk_err *err);
FK_CHECKRETURN int fk__load_npy(fk_dataset *ds, const char *path, const fk_load_opts *o,
                                fk_err *err);

#endif
