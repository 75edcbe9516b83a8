/* Fuzz target: sfl job messages and checkpoints as the daemons receive them (the job type
 * speaks fk_bundle only, so this drives the bundle decoder into the sfl ops). The input is
 * decoded as a Bundle and fed to a client as a task and as the final model (evaluate), to the
 * server as a phase-1 upload (through check_update, as the daemon does, then aggregate), and
 * to both as checkpoints, with grid atoms (p = 2) and candidate atoms (p = 4, where it is also
 * fed as a client's centres). Every outcome must be an error code or a valid state. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/sfl/sfl.h"
#include "common/net/codec.h"
#include "tests/fuzz/fuzz_result.h"
#include "tests/fuzz/fuzz_round.h"

enum { K = 2, N = 12 };

/* p = 2 (grid atoms by default) or 4 (candidate atoms: a centres phase before the upload) */
static void make_data(fk_dataset *d, size_t p)
{
    for (int k = 0; k < K; k++) {
        if (fk_dataset_init(&d[k], N, p, 0) != FK_OK)
            abort();
        double lab[N];
        for (int i = 0; i < N; i++) {
            d[k].X.data[p * (size_t)i] = (i % 2 ? 2.0 : -2.0) + 0.1 * ((i * 7 + k) % 5);
            for (size_t j = 1; j < p; j++)
                d[k].X.data[p * (size_t)i + j] = 0.2 * (double)((i * 5 + 3 * k + (int)j) % 7);
            lab[i] = i % 2;
        }
        if (fk_dataset_set_labels(&d[k], lab, NULL) != FK_OK)
            abort();
    }
}

static void params(fk_params *p)
{
    fk_params_init(p);
    fuzz_setup(fk_params_set(p, "raw_sample_upload", "acknowledged"));
    fuzz_setup(fk_params_set(p, "local.allow_raw_upload", "true"));
    fuzz_setup(fk_params_set(p, "T_client", "200"));
    fuzz_setup(fk_params_set(p, "T_server", "200"));
    fuzz_setup(fk_params_set(p, "n_widths", "2"));
}

/* A server after phase 0 (p = 4: and the centres phase, collecting uploads) and K clients;
 * centres = 1 stops p = 4 before the centres phase (b is then fed as centres). */
static void start(const fk_params *p, const fk_dataset *d, size_t dim, int centres, void **srv,
                  void **cli)
{
    fuzz_round_open(&fk_method_sfl, p, d, K, srv, cli);
    fuzz_round_phase(&fk_method_sfl, *srv, cli, K, 0);
    if (dim > 2 && !centres)
        fuzz_round_phase(&fk_method_sfl, *srv, cli, K, 1);
}

static void feed(const fk_bundle *b, size_t dim, int centres)
{
    const fk_method *m = &fk_method_sfl;
    fk_err err;
    fk_params p;
    params(&p);
    fk_dataset d[K];
    make_data(d, dim);
    void *srv = NULL, *cli[K] = {0};
    start(&p, d, dim, centres, &srv, cli);
    fk_report rep;
    fk_report_init(&rep);
    fk_bundle out;
    fk_bundle_init(&out); /* as a task */
    fuzz_any_result(m->local_step(cli[0], b, &out, &rep, &err));
    fk_bundle_close(&out);
    fk_report_init(&rep); /* as the model */
    fuzz_any_result(m->evaluate(cli[1], b, &rep, &err));
    fk_update u[K]; /* as both clients' uploads, through the gate */
    int n = 0, done;
    for (int k = 0; k < K; k++) {
        u[n] = (fk_update){.client = k, .msg = *b};
        fk_report_init(&u[n].report);
        if (m->check_update(srv, 1, 1, &u[n], &err) == FK_OK)
            n++;
    }
    fk_bundle_init(&out);
    if (n && m->aggregate(srv, 1, 1, u, n, &done, &err) == FK_OK &&
        m->model(srv, &out, &err) == FK_OK) {
        const fk_tensor *c = fk_bundle_get(&out, "c");
        for (size_t i = 0; c && i < c->len; i++)
            if (!(c->data[i] - c->data[i] == 0.0))
                abort(); /* an accepted solve has finite weights */
    }
    fk_bundle_close(&out);
    fuzz_any_result(m->load(srv, b, &err)); /* as checkpoints */
    fuzz_any_result(m->client_load(cli[1], b, &err));
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
        feed(&b, 2, 0); /* grid atoms: b as the upload */
        feed(&b, 4, 1); /* candidate atoms: b as a client's centres */
        feed(&b, 4, 0); /* candidate atoms: b as the upload */
    }
    fk_bundle_close(&b);
    return 0;
}
