/* The helpers every loader shares (load_int.h): buffers, gzip reads, line reading, cells,
 * the size cap and the data set a loader hands back. fk_load itself is in load.c. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/data/load_int.h"

#define CHUNK_BYTES (1u << 16)
#define MAX_LINE_BYTES ((size_t)1 << 28) /* a line longer than 256 MiB is not a data row */

int fk__dbuf_reserve(fk__dbuf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return FK_OK;
    if (extra > SIZE_MAX / sizeof(double) / 2 - b->len)
        return FK_ENOMEM;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->len < extra)
        cap *= 2;
    double *v = realloc(b->v, cap * sizeof *v);
    if (!v)
        return FK_ENOMEM;
    b->v = v;
    b->cap = cap;
    return FK_OK;
}

int fk__dbuf_push(fk__dbuf *b, double x)
{
    if (b->len == b->cap && fk__dbuf_reserve(b, 1))
        return FK_ENOMEM;
    b->v[b->len++] = x;
    return FK_OK;
}

void fk__dbuf_free(fk__dbuf *b)
{
    free(b->v);
    *b = (fk__dbuf){0};
}

int fk__gz_open(gzFile *gz, const char *path, fk_err *err)
{
    errno = 0;
    *gz = gzopen(path, "rb");
    if (!*gz)
        return fk_err_set(err, FK_EIO, "%s: cannot open: %s", path,
                          errno ? strerror(errno) : "out of memory");
    gzbuffer(*gz, CHUNK_BYTES);
    return FK_OK;
}

/* FK_EFORMAT/FK_EIO from the gzip state after a short or failed read, or FK_OK. */
FK_CHECKRETURN static int gz_check(gzFile gz, const char *path, size_t off, fk_err *err)
{
    int code = Z_OK;
    const char *msg = gzerror(gz, &code);
    if (code == Z_OK || code == Z_STREAM_END)
        return FK_OK;
    if (code == Z_ERRNO)
        return fk_err_set(err, FK_EIO, "%s: read error at byte %zu: %s", path, off, strerror(errno));
    if (code == Z_BUF_ERROR)
        return fk_err_set(err, FK_EFORMAT,
                          "%s: truncated gzip stream at byte %zu of the uncompressed data; "
                          "the file is incomplete, fetch it again",
                          path, off);
    return fk_err_set(err, FK_EFORMAT, "%s: corrupt gzip data at byte %zu of the uncompressed data (%s)",
                      path, off, msg ? msg : "zlib error");
}

int fk__gz_read_exact(gzFile gz, const char *path, void *buf, size_t n, size_t *off, const char *what,
                     fk_err *err)
{
    size_t got = 0;
    while (got < n) {
        size_t want = n - got > (1u << 30) ? (1u << 30) : n - got;
        int r = gzread(gz, (char *)buf + got, (unsigned)want);
        if (r <= 0) {
            int rc = gz_check(gz, path, *off + got, err);
            if (rc)
                return rc;
            return fk_err_set(err, FK_EFORMAT,
                              "%s: truncated at byte %zu: file ends inside %s (%zu more bytes expected)",
                              path, *off + got, what, n - got);
        }
        got += (size_t)r;
    }
    *off += n;
    return FK_OK;
}

int fk__gz_plausible(gzFile gz, const char *path, size_t off, size_t need, fk_err *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size < 0)
        return FK_OK; /* not a regular file (pipe): the reads will tell */
    size_t size = (size_t)st.st_size;
    size_t cap = gzdirect(gz) ? size : (size > SIZE_MAX / 1100 ? SIZE_MAX : size * 1100 + 4096);
    if (need > cap || off > cap - need)
        return fk_err_set(err, FK_EFORMAT,
                          "%s: byte %zu: truncated: the header promises %zu more bytes than the file can hold",
                          path, off, need);
    return FK_OK;
}

int fk__lines_open(fk__lines *r, const char *path, fk_err *err)
{
    *r = (fk__lines){.path = path};
    r->chunk = malloc(CHUNK_BYTES);
    r->line_cap = 4096;
    r->line = malloc(r->line_cap);
    if (!r->chunk || !r->line) {
        fk__lines_close(r);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", path);
    }
    int rc = fk__gz_open(&r->gz, path, err);
    if (rc)
        fk__lines_close(r);
    return rc;
}

void fk__lines_close(fk__lines *r)
{
    if (r->gz)
        gzclose_r(r->gz);
    free(r->chunk);
    free(r->line);
    *r = (fk__lines){0};
}

/* Append n bytes to the current line, growing it. */
FK_CHECKRETURN static int line_append(fk__lines *r, size_t *len, const char *p, size_t n, fk_err *err)
{
    if (*len + n + 1 > MAX_LINE_BYTES)
        return fk_err_set(err, FK_ELIMIT, "%s:%zu: line longer than %zu bytes; not a data file?", r->path,
                          r->lineno + 1, MAX_LINE_BYTES);
    if (*len + n + 1 > r->line_cap) {
        size_t cap = r->line_cap;
        while (cap < *len + n + 1)
            cap *= 2;
        char *l = realloc(r->line, cap);
        if (!l)
            return fk_err_set(err, FK_ENOMEM, "%s:%zu: out of memory for a line", r->path, r->lineno + 1);
        r->line = l;
        r->line_cap = cap;
    }
    memcpy(r->line + *len, p, n);
    *len += n;
    return FK_OK;
}

int fk__lines_next(fk__lines *r, char **line, size_t *len_out, fk_err *err)
{
    size_t len = 0;
    int any = 0;
    for (;;) {
        if (r->chunk_pos == r->chunk_len) {
            if (r->eof)
                break;
            int n = gzread(r->gz, r->chunk, CHUNK_BYTES);
            if (n <= 0) {
                int rc = gz_check(r->gz, r->path, (size_t)gztell(r->gz), err);
                if (rc)
                    return rc;
                r->eof = 1;
                break;
            }
            r->chunk_len = (size_t)n;
            r->chunk_pos = 0;
        }
        any = 1;
        const char *p = r->chunk + r->chunk_pos;
        size_t avail = r->chunk_len - r->chunk_pos;
        const char *nl = memchr(p, '\n', avail);
        size_t take = nl ? (size_t)(nl - p) : avail;
        int rc = line_append(r, &len, p, take, err);
        if (rc)
            return rc;
        r->chunk_pos += take + (nl ? 1 : 0);
        if (nl)
            break;
    }
    if (!any && len == 0)
        return 0;
    r->lineno++;
    if (len && r->line[len - 1] == '\r')
        len--;
    r->line[len] = '\0';
    if (memchr(r->line, '\0', len))
        return fk_err_set(err, FK_EFORMAT, "%s:%zu: NUL byte in a text line; binary file given as text?",
                          r->path, r->lineno);
    /* a UTF-8 byte order mark (spreadsheet exports write one) is not part of the first cell */
    size_t bom = r->lineno == 1 && len >= 3 && !memcmp(r->line, "\xEF\xBB\xBF", 3) ? 3 : 0;
    *line = r->line + bom;
    *len_out = len - bom;
    return 1;
}

const char *fk__parse_cell(char *cell, double *out)
{
    while (*cell == ' ' || *cell == '\t')
        cell++;
    size_t n = strlen(cell);
    while (n && (cell[n - 1] == ' ' || cell[n - 1] == '\t'))
        cell[--n] = '\0';
    if (n == 0)
        return "empty cell";
    char *end = NULL;
    errno = 0;
    double v = strtod(cell, &end);
    if (end != cell + n || isspace((unsigned char)cell[0]))
        return "non-numeric cell";
    if (!isfinite(v))
        return "NaN or Inf value (or out of double range)";
    *out = v;
    return NULL;
}

size_t fk__load_max_values(const fk_load_opts *o)
{
    return o && o->max_values ? o->max_values : (size_t)1 << 31;
}

const char *fk__load_base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

int fk__load_finish(fk_dataset *ds, const char *path, const double *x, size_t n, size_t d,
                   const double *labels, fk_err *err)
{
    if (n == 0 || d == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: no samples or no features (%zu x %zu); empty file?", path,
                          n, d);
    if (fk_dataset_init(ds, n, d, 0))
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu x %zu values", path, n, d);
    fk_dataset_set_name(ds, fk__load_base_name(path));
    for (size_t i = 0; i < n; i++)
        memcpy(fk_mat_row(&ds->X, i), x + i * d, d * sizeof *x);
    if (labels) {
        int rc = fk_dataset_set_labels(ds, labels, err);
        if (rc) {
            fk_dataset_close(ds);
            return rc;
        }
    }
    return FK_OK;
}
