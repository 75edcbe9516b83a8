/* LIBSVM / SVMlight loader: "label idx:value idx:value ..." with 1-based, strictly
 * increasing indices; missing entries are 0 in the dense result. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/load_int.h"

typedef struct svm_state {
    fk__dbuf val, idx, y; /* indices stored as doubles: exact below 2^53 */
    size_t *row_end;     /* entries of row i end at row_end[i] */
    size_t rows, cap_rows;
    size_t max_index;
} svm_state;

static int push_row_end(svm_state *st)
{
    if (st->rows == st->cap_rows) {
        size_t cap = st->cap_rows ? st->cap_rows * 2 : 1024;
        size_t *r = realloc(st->row_end, cap * sizeof *r);
        if (!r)
            return FK_ENOMEM;
        st->row_end = r;
        st->cap_rows = cap;
    }
    st->row_end[st->rows++] = st->val.len;
    return FK_OK;
}

/* Next whitespace-separated token of *p (NUL-terminated in place), or NULL. */
static char *token(char **p)
{
    char *s = *p + strspn(*p, " \t");
    if (!*s)
        return NULL;
    char *e = s + strcspn(s, " \t");
    if (*e)
        *e++ = '\0';
    *p = e;
    return s;
}

static int parse_line(svm_state *st, const fk__lines *r, char *line, size_t limit, fk_err *err)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    char *p = line, *tok = token(&p);
    if (!tok)
        return FK_OK; /* blank or comment line */
    double y;
    const char *why = fk__parse_cell(tok, &y);
    if (why)
        return fk_err_set(err, FK_EFORMAT, "%s:%zu: label: %s '%.40s'", r->path, r->lineno, why, tok);
    if (fk__dbuf_push(&st->y, y))
        return fk_err_set(err, FK_ENOMEM, "%s:%zu: out of memory", r->path, r->lineno);
    unsigned long long prev = 0;
    while ((tok = token(&p))) {
        char *colon = strchr(tok, ':'), *end;
        if (!colon)
            return fk_err_set(err, FK_EFORMAT, "%s:%zu: '%.40s' is not index:value", r->path, r->lineno, tok);
        *colon = '\0';
        errno = 0;
        unsigned long long k = strtoull(tok, &end, 10);
        if (end == tok || *end || tok[0] == '-' || errno || k == 0 || k > limit)
            return fk_err_set(err, FK_EFORMAT, "%s:%zu: bad feature index '%.40s' (1-based, at most %zu)",
                              r->path, r->lineno, tok, limit);
        if (k <= prev)
            return fk_err_set(err, FK_EFORMAT, "%s:%zu: feature index %llu after %llu; indices must increase",
                              r->path, r->lineno, k, prev);
        prev = k;
        double v;
        why = fk__parse_cell(colon + 1, &v);
        if (why)
            return fk_err_set(err, FK_EFORMAT, "%s:%zu: feature %llu: %s '%.40s'", r->path, r->lineno, k, why,
                              colon + 1);
        if (st->val.len >= limit)
            return fk_err_set(err, FK_ELIMIT, "%s:%zu: more than %zu entries", r->path, r->lineno, limit);
        if (fk__dbuf_push(&st->val, v) || fk__dbuf_push(&st->idx, (double)(k - 1)))
            return fk_err_set(err, FK_ENOMEM, "%s:%zu: out of memory", r->path, r->lineno);
        if (k > st->max_index)
            st->max_index = (size_t)k;
    }
    if (push_row_end(st))
        return fk_err_set(err, FK_ENOMEM, "%s:%zu: out of memory", r->path, r->lineno);
    return FK_OK;
}

FK_CHECKRETURN static int densify(fk_dataset *ds, const char *path, const svm_state *st, size_t d, size_t limit, int labelled,
                   fk_err *err)
{
    if (st->rows == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: no data rows (empty file)", path);
    if (d == 0)
        return fk_err_set(err, FK_EFORMAT, "%s: no feature in any row; pass --cols N", path);
    if (d > limit / st->rows)
        return fk_err_set(err, FK_ELIMIT, "%s: dense %zu x %zu matrix exceeds the limit of %zu values", path,
                          st->rows, d, limit);
    if (fk_dataset_init(ds, st->rows, d, 0))
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory for %zu x %zu values", path, st->rows, d);
    size_t e = 0;
    for (size_t i = 0; i < st->rows; i++)
        for (; e < st->row_end[i]; e++)
            fk_mat_set(&ds->X, i, (size_t)st->idx.v[e], st->val.v[e]);
    const char *b = strrchr(path, '/');
    fk_dataset_set_name(ds, b ? b + 1 : path);
    return labelled ? fk_dataset_set_labels(ds, st->y.v, err) : FK_OK;
}

int fk__load_libsvm(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{
    size_t limit = fk__load_max_values(o);
    fk__lines r;
    int rc = fk__lines_open(&r, path, err);
    if (rc)
        return rc;
    svm_state st = {0};
    char *line;
    size_t len;
    while ((rc = fk__lines_next(&r, &line, &len, err)) == 1)
        if ((rc = parse_line(&st, &r, line, o->cols ? o->cols : limit, err)))
            break;
    if (rc == 0) {
        size_t d = o->cols ? o->cols : st.max_index;
        rc = densify(ds, path, &st, d, limit, o->label != FK_LABEL_NONE, err);
        if (rc)
            fk_dataset_close(ds);
    }
    fk__lines_close(&r);
    fk__dbuf_free(&st.val);
    fk__dbuf_free(&st.idx);
    fk__dbuf_free(&st.y);
    free(st.row_end);
    return rc;
}
