/* Fuzz target: the Predict admin call as the server and the CLI receive it. The input is
 * decoded as a PredictRequest (server side) and as a PredictResponse (CLI side); a decoded
 * request's queries go to kahm's predict op against a small mode-A model, and the input as
 * a plain bundle goes to predict as the model. Every outcome must be an error code or a
 * result with one label and one distance per query: no crash, no leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/kahm/kahm.h"
#include "common/methods/sim.h"
#include "common/net/codec.h"
#include "tests/fuzz/fuzz_result.h"
#include "tests/fuzz/fuzz_kahm_data.h"

enum { K = FUZZ_KAHM_K, P = FUZZ_KAHM_P };

/* A mode-A kahm model: two clients with classes {0, 1} and {1, 2}. */
static int make_model(fk_bundle *model)
{
    fk_params p;
    fk_params_init(&p);
    fuzz_setup(fk_params_set(&p, "classes", "3"));
    fuzz_setup(fk_params_set(&p, "holdout", "0"));
    fuzz_setup(fk_params_set(&p, "upload_models", "1"));
    fuzz_setup(fk_params_set(&p, "local.allow_model_upload", "1"));
    fk_dataset d[K];
    fuzz_kahm_data(d);
    fk_sim_opts o = {.rounds = 1, .seed = 5};
    fk_err err;
    int rc = fk_sim_run(&fk_method_kahm, &p, d, K, &o, model, NULL, &err);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&d[k]);
    fk_params_close(&p);
    return rc;
}

static void check_result(const fk_bundle *res, const fk_bundle *q)
{
    const fk_tensor *x = fk_bundle_get(q, "X"), *l = fk_bundle_get(res, "labels"),
                    *d = fk_bundle_get(res, "distances");
    if (!x || !l || !d || l->len != x->shape[0] || d->len != x->shape[0])
        abort(); /* an accepted call answers every query */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_log_set_level(FK_LOG_ERROR);
    static fk_bundle model;
    static int have_model;
    if (!have_model) {
        if (make_model(&model))
            abort();
        have_model = 1;
    }
    fk_err err;
    fk_bundle q, res;
    fk_bundle_init(&q);
    fedkern_v1_PredictRequest in;
    if (fk_codec_decode_predict_request(data, size, &in, &q, &err) == FK_OK) {
        fk_codec_release(fedkern_v1_PredictRequest_fields, &in);
        fk_bundle_init(&res);
        if (fk_method_kahm.predict(&model, &q, &res, &err) == FK_OK)
            check_result(&res, &q);
        fk_bundle_close(&res);
    }
    fk_bundle_close(&q);
    fk_bundle_init(&res);
    fedkern_v1_PredictResponse out;
    if (fk_codec_decode_predict_response(data, size, &out, &res, &err) == FK_OK)
        fk_codec_release(fedkern_v1_PredictResponse_fields, &out);
    fk_bundle_close(&res);
    fk_bundle b; /* the input as a model */
    fk_bundle_init(&b);
    if (fk_codec_bundle_decode(data, size, &b, &err) == FK_OK) {
        fk_bundle qq;
        fk_bundle_init(&qq);
        fk_bundle_init(&res);
        double x[2 * P] = {0.1, -0.2, 0.3, 1.0, 0.5, -0.7};
        if (fk_bundle_put(&qq, "X", 2, (uint64_t[]){2, P}, x) != FK_OK)
            abort();
        if (fk_method_kahm.predict(&b, &qq, &res, &err) == FK_OK)
            check_result(&res, &qq);
        fk_bundle_close(&res);
        fk_bundle_close(&qq);
    }
    fk_bundle_close(&b);
    return 0;
}
