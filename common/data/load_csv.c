/* CSV loader: one sample per line, numeric cells, label column first, last, numbered or none. */
#include <string.h>

#include "common/data/load_int.h"

typedef struct csv_state {
    fk__dbuf x, y;
    size_t rows;
    size_t cells;      /* cells per row, fixed by the first data row */
    size_t first_line; /* line number of the first data row, for ragged-row messages */
} csv_state;

static int is_blank(const char *s)
{
    return s[strspn(s, " \t")] == '\0';
}

/* Parse one data row of the line into st. */
FK_CHECKRETURN static int parse_row(csv_state *st, const fk__lines *r, char *line, char delim, fk_label_pos lab,
                     size_t label_col, size_t max_values, fk_err *err)
{
    size_t ncell = 1;
    for (const char *p = line; (p = strchr(p, delim)); p++)
        ncell++;
    if (st->rows == 0) {
        size_t need = lab == FK_LABEL_NONE ? 1 : 2;
        if (ncell < need)
            return fk_err_set(err, FK_EFORMAT,
                              "%s:%zu: row has 1 cell but a label column and at least one feature "
                              "are expected; pass --label none for unlabelled data",
                              r->path, r->lineno);
        if (lab == FK_LABEL_INDEX && (label_col == 0 || label_col > ncell))
            return fk_err_set(err, FK_EINVAL,
                              "%s:%zu: label column %zu does not exist (the row has %zu cells); "
                              "give --label first, last, none or a column number 1..%zu",
                              r->path, r->lineno, label_col, ncell, ncell);
        st->cells = ncell;
        st->first_line = r->lineno;
    } else if (ncell != st->cells) {
        return fk_err_set(err, FK_EFORMAT, "%s:%zu: ragged row: %zu cells, but line %zu has %zu",
                          r->path, r->lineno, ncell, st->first_line, st->cells);
    }
    size_t nfeat = lab == FK_LABEL_NONE ? ncell : ncell - 1;
    if (nfeat > max_values || st->x.len > max_values - nfeat)
        return fk_err_set(err, FK_ELIMIT, "%s:%zu: more than %zu values; raise the limit if intended",
                          r->path, r->lineno, max_values);
    if (fk__dbuf_reserve(&st->x, nfeat) || (lab != FK_LABEL_NONE && fk__dbuf_reserve(&st->y, 1)))
        return fk_err_set(err, FK_ENOMEM, "%s:%zu: out of memory", r->path, r->lineno);
    char *cell = line;
    for (size_t c = 0; c < ncell; c++) {
        char *end = strchr(cell, delim);
        if (end)
            *end = '\0';
        double v;
        const char *why = fk__parse_cell(cell, &v);
        if (why)
            return fk_err_set(err, FK_EFORMAT, "%s:%zu: column %zu: %s '%.40s'", r->path, r->lineno,
                              c + 1, why, cell);
        int is_label = (lab == FK_LABEL_FIRST && c == 0) || (lab == FK_LABEL_LAST && c == ncell - 1) ||
                       (lab == FK_LABEL_INDEX && c + 1 == label_col);
        if (is_label)
            st->y.v[st->y.len++] = v;
        else
            st->x.v[st->x.len++] = v;
        cell = end ? end + 1 : cell;
    }
    st->rows++;
    return FK_OK;
}

int fk__load_csv(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{
    fk_label_pos lab = o->label == FK_LABEL_DEFAULT ? FK_LABEL_FIRST : o->label;
    char delim = o->delim ? o->delim : ',';
    size_t max_values = fk__load_max_values(o);
    fk__lines r;
    int rc = fk__lines_open(&r, path, err);
    if (rc)
        return rc;
    csv_state st = {0};
    int skip_header = o->header;
    char *line;
    size_t len;
    while ((rc = fk__lines_next(&r, &line, &len, err)) == 1) {
        if (is_blank(line))
            continue;
        if (skip_header) {
            skip_header = 0;
            continue;
        }
        rc = parse_row(&st, &r, line, delim, lab, o->label_col, max_values, err);
        if (rc)
            break;
    }
    if (rc == 0 && st.rows == 0)
        rc = fk_err_set(err, FK_EFORMAT, "%s: no data rows (empty file%s)", path,
                        o->header ? " or only a header" : "");
    if (rc == 0)
        rc = fk__load_finish(ds, path, st.x.v, st.rows, st.x.len / st.rows,
                            lab == FK_LABEL_NONE ? NULL : st.y.v, err);
    fk__lines_close(&r);
    fk__dbuf_free(&st.x);
    fk__dbuf_free(&st.y);
    return rc;
}
