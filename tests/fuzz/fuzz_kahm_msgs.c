/* Fuzz target: kahm messages and checkpoints as the daemons receive them. The input is
 * decoded as a Bundle (the wire codec) and fed to a client as a task, to a mode-A and a
 * mode-B server as an update (check_update first, as the daemon does, then aggregate), to
 * both as a checkpoint, and to a client as the job's model and as its own checkpoint.
 * Mode-B serving: to a fitted client as a query batch (client_predict), and to the server
 * as a holder's answer (check_answer first, then combine_answers, which must then succeed).
 * Every outcome must be an error code or a valid state: no crash, no leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/kahm/kahm.h"
#include "common/net/codec.h"
#include "tests/fuzz/fuzz_kahm_data.h"
#include "tests/fuzz/fuzz_result.h"
#include "tests/fuzz/fuzz_round.h"

enum { K = FUZZ_KAHM_K };

static void feed(const fk_bundle *b, int upload)
{
    fk_params p;
    fk_params_init(&p);
    fuzz_setup(fk_params_set(&p, "classes", "3"));
    fuzz_setup(fk_params_set(&p, "holdout", "0"));
    fuzz_setup(fk_params_set(&p, "upload_models", upload ? "1" : "0"));
    fuzz_setup(fk_params_set(&p, "local.allow_model_upload", "1"));
    fk_dataset d[K];
    fuzz_kahm_data(d);
    const fk_method *m = &fk_method_kahm;
    fk_err err;
    void *srv = NULL, *cli[K] = {0};
    fuzz_round_open(m, &p, d, K, &srv, cli);
    fk_report rep;
    fk_report_init(&rep);
    fk_bundle out;
    fk_bundle_init(&out); /* as a task */
    fuzz_any_result(m->local_step(cli[0], b, &out, &rep, &err));
    fk_bundle_close(&out);
    fk_update u = {.client = 1, .msg = *b}; /* as an update */
    fk_report_init(&u.report);
    int done;
    if (m->check_update(srv, 1, 0, &u, &err) == FK_OK) {
        if (m->aggregate(srv, 1, 0, &u, 1, &done, &err))
            abort();
        fk_bundle_init(&out);
        if (m->model(srv, &out, &err) == FK_OK) /* the model a client then scores */
            fuzz_any_result(m->evaluate(cli[0], &out, &rep, &err));
        fk_bundle_close(&out);
    }
    fuzz_any_result(m->load(srv, b, &err)); /* as checkpoints */
    fuzz_any_result(m->client_load(cli[1], b, &err));
    fuzz_any_result(m->evaluate(cli[1], b, &rep, &err)); /* as the job's model */
    m->server_close(srv);
    for (int k = 0; k < K; k++) {
        m->client_close(cli[k]);
        fk_dataset_close(&d[k]);
    }
    fk_params_close(&p);
}

/* Mode-B serving: both clients fit, the server takes their class lists; the input is a
 * query batch for client 0 and an answer from client 0 and from client 1. */
static void feed_serving(const fk_bundle *b)
{
    fk_params p;
    fk_params_init(&p);
    fuzz_setup(fk_params_set(&p, "classes", "3"));
    fuzz_setup(fk_params_set(&p, "holdout", "0"));
    fk_dataset d[K];
    fuzz_kahm_data(d);
    const fk_method *m = &fk_method_kahm;
    fk_err err;
    void *srv = NULL, *cli[K] = {0};
    if (m->server_init(&srv, &p, K, 5, &err))
        abort();
    fk_update ups[K];
    fk_bundle task, model, q, out;
    fk_bundle_init(&task);
    fk_bundle_init(&model);
    fk_bundle_init(&q);
    if (fk_bundle_put_scalar(&task, "upload", 0))
        abort();
    for (int k = 0; k < K; k++) {
        ups[k].client = k;
        fk_report_init(&ups[k].report);
        fk_bundle_init(&ups[k].msg);
        if (m->client_init(&cli[k], &p, &d[k], k, K, 5, &err) ||
            m->local_step(cli[k], &task, &ups[k].msg, &ups[k].report, &err) ||
            m->check_update(srv, 1, 0, &ups[k], &err))
            abort();
    }
    int done;
    if (m->aggregate(srv, 1, 0, ups, K, &done, &err) || m->model(srv, &model, &err))
        abort();
    double *x = fk_bundle_add(&q, "X", 2, (uint64_t[]){4, FUZZ_KAHM_P});
    if (!x)
        abort();
    memcpy(x, d[0].X.data, 4 * FUZZ_KAHM_P * sizeof(double));
    fk_bundle_init(&out); /* as a query batch */
    fuzz_any_result(m->client_predict(cli[0], b, &out, &err));
    fk_bundle_close(&out);
    for (int k = 0; k < K; k++) { /* as an answer */
        fk_update a = {.client = k, .msg = *b};
        fk_report_init(&a.report);
        if (m->check_answer(&model, &q, &a, &err) == FK_OK) {
            fk_bundle_init(&out);
            if (m->combine_answers(&model, &q, &a, 1, &out, &err))
                abort(); /* a checked answer must combine */
            fk_bundle_close(&out);
        }
    }
    fk_bundle_init(&out); /* as the queries of a combine with client 0's checked answer */
    fuzz_any_result(m->combine_answers(&model, b, &ups[0], 0, &out, &err));
    fk_bundle_close(&out);
    for (int k = 0; k < K; k++) {
        fk_bundle_close(&ups[k].msg);
        m->client_close(cli[k]);
        fk_dataset_close(&d[k]);
    }
    fk_bundle_close(&task);
    fk_bundle_close(&model);
    fk_bundle_close(&q);
    m->server_close(srv);
    fk_params_close(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_log_set_level(FK_LOG_ERROR);
    fk_bundle b;
    fk_err err;
    fk_bundle_init(&b);
    if (fk_codec_bundle_decode(data, size, &b, &err) == FK_OK) {
        feed(&b, 1);
        feed(&b, 0);
        feed_serving(&b);
    }
    fk_bundle_close(&b);
    return 0;
}
