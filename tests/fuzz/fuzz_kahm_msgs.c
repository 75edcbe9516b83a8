/* Fuzz target: kahm messages and checkpoints as the daemons receive them. The input is
 * decoded as a Bundle (the wire codec) and fed to a client as a task, to a mode-A and a
 * mode-B server as an update (check_update first, as the daemon does, then aggregate), to
 * both as a checkpoint, and to a client as the job's model and as its own checkpoint.
 * Every outcome must be an error code or a valid state: no crash, no leak. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/kahm/kahm.h"
#include "common/net/codec.h"
#include "tests/fuzz/fuzz_kahm_data.h"
#include "tests/fuzz/fuzz_result.h"

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
    if (m->server_init(&srv, &p, K, 5, &err))
        abort();
    for (int k = 0; k < K; k++)
        if (m->client_init(&cli[k], &p, &d[k], k, K, 5, &err))
            abort();
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_log_set_level(FK_LOG_ERROR);
    fk_bundle b;
    fk_err err;
    fk_bundle_init(&b);
    if (fk_codec_bundle_decode(data, size, &b, &err) == FK_OK) {
        feed(&b, 1);
        feed(&b, 0);
    }
    fk_bundle_close(&b);
    return 0;
}
