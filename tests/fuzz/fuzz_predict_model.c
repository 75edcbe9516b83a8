/* Fuzz target: every job type's predict op on a model file from disk (what `fedkern model
 * eval|predict` runs on a file it did not write) with a small query batch, and every
 * export_arrays op (`fedkern model export`): the ops check the
 * model's tensors before they use them, so a hostile file gets an error, never a crash. The
 * input is a model file; its last bytes also pick the queries' width and values. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/data/prep_model.h"
#include "common/methods/method.h"
#include "common/net/modelfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_bundle model;
    fk_bundle_init(&model);
    fk_model_info info;
    fk_err err;
    if (fk_modelfile_decode(data, size, &model, &info, &err) != FK_OK) {
        fk_bundle_close(&model);
        return 0;
    }
    /* queries: 3 rows of w columns, values from the input; w from the tail byte (1..16) and
     * the width the model names (its "p", "d" or theta's last dimension, when small) */
    size_t ws[2] = {size ? 1 + data[size - 1] % 16 : 1, 0};
    const fk_tensor *t = fk_bundle_get(&model, "p");
    if (!t || t->len != 1)
        t = fk_bundle_get(&model, "d");
    if (t && t->len == 1 && t->data[0] >= 1 && t->data[0] <= 64)
        ws[1] = (size_t)t->data[0];
    t = fk_bundle_get(&model, "theta");
    if (!ws[1] && t && t->ndim == 3 && t->shape[2] >= 1 && t->shape[2] <= 64)
        ws[1] = (size_t)t->shape[2];
    for (int pass = 0; pass < 2; pass++) {
        size_t w = ws[pass];
        if (!w)
            continue;
        fk_bundle q;
        fk_bundle_init(&q);
        double *x = fk_bundle_add(&q, "X", 2, (uint64_t[]){3, w});
        double *y = fk_bundle_add(&q, "y", 1, (uint64_t[]){3});
        if (x && y && fk_bundle_put_scalar(&q, "client", 0) == FK_OK) {
            for (size_t i = 0; i < 3 * w; i++)
                x[i] = size ? (double)data[i % size] / 64.0 - 2.0 : 0.0;
            for (size_t i = 0; i < 3; i++)
                y[i] = x[i];
            for (const fk_method *const *m = fk_methods; *m; m++) {
                if (!(*m)->predict)
                    continue;
                fk_bundle out;
                fk_bundle_init(&out);
                err.msg[0] = '\0';
                if ((*m)->predict(&model, &q, &out, &err) == FK_OK) {
                    const fk_tensor *l = fk_bundle_get(&out, "labels");
                    if (!l || l->len != 3) /* an answer has one label per query */
                        abort();
                } else if (!err.msg[0]) {
                    abort(); /* a refusal always says why */
                }
                fk_bundle_close(&out);
            }
        }
        fk_bundle_close(&q);
    }
    /* the clients' preprocessing the file records (issue 34), read and applied to the
     * queries as `model eval` does, for every row of it */
    int rows = fk_prep_model_rows(&model);
    for (int r = -1; r < (rows > 4 ? 4 : rows); r++) {
        fk_prep_record rec;
        err.msg[0] = '\0';
        if (fk_prep_model_get(&model, r, &rec, &err) != FK_OK) {
            if (!err.msg[0])
                abort();
            continue;
        }
        size_t w = rec.d ? rec.d : ws[0];
        if (w > 256)
            continue;
        fk_mat X;
        if (fk_mat_init(&X, 3, w) != FK_OK)
            continue;
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < w; j++)
                fk_mat_row(&X, i)[j] = size ? (double)data[(i * w + j) % size] / 64.0 - 2.0 : 0.0;
        err.msg[0] = '\0';
        if (fk_prep_record_apply(&rec, 0, &X, &err) != FK_OK && !err.msg[0])
            abort();
        char buf[160];
        fk_prep_record_describe(&rec, buf, sizeof buf);
        fk_mat_close(&X);
    }
    /* and what `fedkern model export` adds (the random frequencies): checked first too */
    for (const fk_method *const *m = fk_methods; *m; m++) {
        if (!(*m)->export_arrays)
            continue;
        fk_bundle out;
        fk_bundle_init(&out);
        err.msg[0] = '\0';
        if ((*m)->export_arrays(&model, &out, &err) != FK_OK && !err.msg[0])
            abort();
        fk_bundle_close(&out);
    }
    fk_bundle_close(&model);
    return 0;
}
