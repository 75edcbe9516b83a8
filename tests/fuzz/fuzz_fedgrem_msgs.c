/* Fuzz target: FedGrEM messages and checkpoints as the daemons receive them, for the
 * Gaussian-mixture (fedgrem), the mixture-of-regressions (fedgrem-mor) and the pooled-em
 * tables.
 * The input is decoded as a Bundle and fed to a client as a task, to the
 * server as an update (initialisation and step phases), and to both as a
 * checkpoint. Every outcome must be an error code or a valid state: no crash,
 * no leak, no non-finite estimate accepted silently. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgmm_mor.h"
#include "common/methods/mixture/fedgrem.h"
#include "common/methods/mixture/pooled_em.h"
#include "common/net/codec.h"
#include "tests/fuzz/fuzz_result.h"
#include "tests/fuzz/fuzz_round.h"

enum { K = 3, N = 20, P = 2 };

static void make_data(fk_dataset *d)
{
    for (int k = 0; k < K; k++) {
        if (fk_dataset_init(&d[k], N, P, 0))
            abort();                  /* the harness, not the input */
        for (int i = 0; i < N; i++) { /* two clusters at 0 and 3 with a small deterministic spread */
            d[k].X.data[i * P] = (i % 2 ? 3.0 : 0.0) + 0.01 * ((i * 7 + k) % 11);
            d[k].X.data[i * P + 1] = 0.02 * ((i * 5 + 3 * k) % 13);
        }
        double y[N]; /* fedgrem-mor's target: two regressions, by parity */
        for (int i = 0; i < N; i++)
            y[i] = (i % 2 ? 1.0 : -1.0) * (d[k].X.data[i * P] + 2.0 * d[k].X.data[i * P + 1]) +
                   0.01 * ((i * 3 + k) % 7);
        if (fk_dataset_set_target(&d[k], y, NULL))
            abort(); /* fixed, valid data: only a harness fault gets here */
    }
}

/* Run round 1 (initialisation and first step) so the states are mid-job. */
static void start(const fk_method *m, const fk_params *p, const fk_dataset *d, void **srv,
                  void **cli)
{
    fuzz_round_open(m, p, d, K, srv, cli);
    for (int phase = 0; phase < 2; phase++)
        fuzz_round_phase(m, *srv, cli, K, phase);
}

/* The decoded bundle b as every message and checkpoint of method m. */
static void feed(const fk_method *m, const fk_bundle *b)
{
    fk_bundle out;
    fk_err err;
    fk_params p;
    fk_params_init(&p);
    fuzz_setup(fk_params_set(&p, "R", "2"));
    fuzz_setup(fk_params_set(&p, "restarts", "1"));
    fuzz_setup(fk_params_set(&p, "align_B", "1"));
    fk_dataset d[K];
    make_data(d);
    void *srv = NULL, *cli[K] = {0};
    start(m, &p, d, &srv, cli);
    fk_report rep;
    fk_report_init(&rep);
    fk_bundle_init(&out); /* as a task */
    /* Refusals are verdicts on the input (kept in `refused` only so that no result is dropped
     * unseen); the target checks memory safety and that accepted rounds stay finite. */
    int refused = m->local_step(cli[0], b, &out, &rep, &err);
    fk_bundle_close(&out);
    fk_update u = {.client = 1, .msg = *b}; /* as a step update */
    fk_report_init(&u.report);
    int done;
    int agg = m->aggregate(srv, 2, 0, &u, 1, &done, &err);
    fk_update all[K]; /* as every client's step update */
    for (int k = 0; k < K; k++) {
        all[k] = (fk_update){.client = k, .msg = *b};
        fk_report_init(&all[k].report);
    }
    if (agg == FK_OK)
        agg = m->aggregate(srv, 2, 0, all, K, &done, &err);
    fk_bundle_init(&out);
    if (agg == FK_OK && m->model(srv, &out, &err) == FK_OK) {
        const fk_tensor *t = fk_bundle_get(&out, "theta");
        for (size_t i = 0; t && i < t->len; i++)
            if (!(t->data[i] - t->data[i] == 0.0))
                abort(); /* an accepted round has finite estimates */
    }
    fk_bundle_close(&out);
    refused |= m->load(srv, b, &err); /* as checkpoints */
    refused |= m->client_load(cli[2], b, &err);
    m->server_close(srv);
    void *fresh; /* as an initialisation update */
    if (m->server_init(&fresh, &p, K, 5, &err) == FK_OK) {
        fk_update ups[K];
        for (int k = 0; k < K; k++)
            ups[k] = (fk_update){.client = k, .msg = *b};
        refused |= m->aggregate(fresh, 1, 0, ups, K, &done, &err);
        m->server_close(fresh);
    }
    for (int k = 0; k < K; k++) {
        m->client_close(cli[k]);
        fk_dataset_close(&d[k]);
    }
    fk_params_close(&p);
    (void)refused;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_bundle b;
    fk_err err;
    fk_bundle_init(&b);
    if (fk_codec_bundle_decode(data, size, &b, &err) == FK_OK) {
        feed(&fk_method_fedgrem, &b);
        feed(&fk_method_fedgrem_mor, &b);
        feed(&fk_method_local_em_mor, &b); /* its step only evaluates the task's estimate */
        feed(&fk_method_pooled_grem_mor, &b); /* the server's summed MoR step */
        feed(&fk_method_pooled_em, &b);       /* summed EEE statistics, seeds, checkpoints */
        feed(&fk_method_pooled_em_mor, &b);   /* summed least-squares statistics */
        feed(&fk_method_fedgmm_mor, &b);      /* x-moments, coefficients, client pi */
    }
    fk_bundle_close(&b);
    return 0;
}
