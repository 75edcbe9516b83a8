#include "common/data/prep_model.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/data/prep.h"

static const char *const step_names[FK_PREP_CODE_MAX + 1] = {"", "l1", "l2", "zscore", "div255"};

int fk_prep_record_same(const fk_prep_record *a, const fk_prep_record *b)
{
    if (!a->known || !b->known || a->n != b->n || a->d != b->d)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (a->code[i] != b->code[i])
            return 0;
    return !a->d || (!memcmp(a->shift, b->shift, a->d * sizeof *a->shift) &&
                     !memcmp(a->scale, b->scale, a->d * sizeof *a->scale));
}

int fk_prep_model_put(fk_bundle *m, const fk_prep_record *rec, int k, int *unknown_at, fk_err *err)
{
    if (unknown_at)
        *unknown_at = -1;
    if (k <= 0)
        return FK_OK;
    size_t d = 0;
    int same = 1;
    for (int i = 0; i < k; i++) {
        if (!rec[i].known || rec[i].n < 0 || rec[i].n > FK_PREP_MODEL_STEPS) {
            if (unknown_at)
                *unknown_at = i;
            return FK_OK;
        }
        if (rec[i].d && d && rec[i].d != d)
            return fk_err_set(err, FK_EINVAL,
                              "the clients' affine maps have %zu and %zu columns; their "
                              "data.NAME.affine files must fit the same columns",
                              d, rec[i].d);
        if (rec[i].d)
            d = rec[i].d;
        same &= fk_prep_record_same(&rec[0], &rec[i]);
    }
    int rows = same ? 1 : k;
    uint64_t sh[2] = {(uint64_t)rows, FK_PREP_MODEL_STEPS};
    double *c = fk_bundle_add(m, "data_prep", 2, sh);
    double *shift = NULL, *scale = NULL;
    if (c && d) {
        sh[1] = d;
        shift = fk_bundle_add(m, "data_prep_shift", 2, sh);
        scale = shift ? fk_bundle_add(m, "data_prep_scale", 2, sh) : NULL;
    }
    if (!c || (d && !scale))
        return fk_err_set(err, FK_ENOMEM, "out of memory recording the clients' preprocessing");
    /* fk_bundle_add may move earlier storage: look the tensors up again */
    c = fk_bundle_get(m, "data_prep")->data;
    if (d) {
        shift = fk_bundle_get(m, "data_prep_shift")->data;
        scale = fk_bundle_get(m, "data_prep_scale")->data;
    }
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < rec[r].n; i++)
            c[(size_t)r * FK_PREP_MODEL_STEPS + (size_t)i] = rec[r].code[i];
        for (size_t j = 0; j < d; j++) {
            shift[(size_t)r * d + j] = rec[r].d ? rec[r].shift[j] : 0.0;
            scale[(size_t)r * d + j] = rec[r].d ? rec[r].scale[j] : 1.0;
        }
    }
    return FK_OK;
}

int fk_prep_model_rows(const fk_bundle *m)
{
    const fk_tensor *t = fk_bundle_get(m, "data_prep");
    return t && t->ndim == 2 && t->shape[1] == FK_PREP_MODEL_STEPS && t->shape[0] >= 1 &&
                   t->shape[0] <= 1000000
               ? (int)t->shape[0]
               : 0;
}

int fk_prep_model_get(const fk_bundle *m, int client, fk_prep_record *rec, fk_err *err)
{
    *rec = (fk_prep_record){0};
    const fk_tensor *t = fk_bundle_get(m, "data_prep");
    if (!t)
        return FK_OK; /* unknown */
    int rows = fk_prep_model_rows(m);
    if (!rows)
        return fk_err_set(err, FK_EFORMAT,
                          "the model's data_prep is not a K x %d table of step codes",
                          FK_PREP_MODEL_STEPS);
    if (rows > 1 && client < 0)
        return fk_err_set(err, FK_EINVAL,
                          "the job's %d clients preprocessed their files differently (model "
                          "show lists each): give --client N to use client N's preprocessing, "
                          "or your own --prep/--affine with --model_prep 0",
                          rows);
    if (rows > 1 && client >= rows)
        return fk_err_set(err, FK_EINVAL, "--client %d: the model records %d clients (0..%d)",
                          client, rows, rows - 1);
    int r = rows > 1 ? client : 0;
    const double *c = t->data + (size_t)r * FK_PREP_MODEL_STEPS;
    int n = 0, ended = 0;
    for (int i = 0; i < FK_PREP_MODEL_STEPS; i++) {
        double v = c[i];
        if (!(v >= 0 && v <= FK_PREP_CODE_MAX) || v != floor(v) || (ended && v != 0))
            return fk_err_set(err, FK_EFORMAT,
                              "the model's data_prep row %d holds %g; step codes are 1..%d, "
                              "then 0s",
                              r, v, FK_PREP_CODE_MAX);
        if (v == 0)
            ended = 1;
        else
            rec->code[n++] = (int)v;
    }
    rec->n = n;
    const fk_tensor *sh = fk_bundle_get(m, "data_prep_shift"),
                    *sc = fk_bundle_get(m, "data_prep_scale");
    if (sh || sc) {
        if (!sh || !sc || sh->ndim != 2 || sc->ndim != 2 || sh->shape[0] != (uint64_t)rows ||
            sc->shape[0] != (uint64_t)rows || sh->shape[1] != sc->shape[1] || !sh->shape[1])
            return fk_err_set(err, FK_EFORMAT,
                              "the model's data_prep_shift and data_prep_scale are not two "
                              "%d x d tables",
                              rows);
        size_t d = (size_t)sh->shape[1];
        rec->shift = sh->data + (size_t)r * d;
        rec->scale = sc->data + (size_t)r * d;
        for (size_t j = 0; j < d; j++)
            if (!isfinite(rec->shift[j]) || !isfinite(rec->scale[j]))
                return fk_err_set(err, FK_EFORMAT,
                                  "the model's affine map has a non-finite value in column %zu", j);
        rec->d = d;
    }
    rec->known = 1;
    return FK_OK;
}

int fk_prep_record_apply(const fk_prep_record *rec, int from, fk_mat *X, fk_err *err)
{
    for (int i = from < 0 ? 0 : from; i < rec->n; i++) {
        int rc = FK_OK;
        switch (rec->code[i]) {
        case 1: rc = fk_prep_l1_rows(X); break;
        case 2: fk_prep_l2_rows(X); break;
        case 3: rc = fk_prep_zscore_cols(X); break;
        case 4: fk_prep_affine_div(X, 255.0); break;
        default: return fk_err_set(err, FK_EINVAL, "unknown preprocessing step %d", rec->code[i]);
        }
        if (rc)
            return fk_err_set(err, FK_ENOMEM, "out of memory in the model's preprocessing");
    }
    if (!rec->d)
        return FK_OK;
    if (rec->d != X->cols)
        return fk_err_set(err, FK_EINVAL,
                          "the model's affine map (the clients' data.NAME.affine) has %zu "
                          "columns, the data %zu",
                          rec->d, X->cols);
    fk_prep_affine_cols(X, rec->shift, rec->scale);
    return FK_OK;
}

void fk_prep_record_describe(const fk_prep_record *rec, char *buf, size_t cap)
{
    if (!cap)
        return;
    buf[0] = '\0';
    if (!rec->known) {
        snprintf(buf, cap, "unknown");
        return;
    }
    size_t len = 0;
    for (int i = 0; i < rec->n && len < cap; i++) {
        int c = rec->code[i];
        int w = snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
                         c >= 1 && c <= FK_PREP_CODE_MAX ? step_names[c] : "?");
        len += w > 0 ? (size_t)w : 0;
    }
    if (len < cap && rec->d)
        snprintf(buf + len, cap - len, "%san affine map (%zu columns)", rec->n ? ", then " : "",
                 rec->d);
    else if (len < cap && !rec->n)
        snprintf(buf, cap, "none");
}
