/* Fuzz target: DICA / UDICA messages and checkpoints as the daemons receive them.
 * The job's messages are fk_bundles (the byte decoding is fk_codec_bundle_decode, fuzzed
 * by codec_bundle too); this target fuzzes what the job reads out of them. The input is
 * decoded as a Bundle and fed to a client as a task of every phase, to the server as an
 * update of every phase (after the earlier phases ran on real messages, so the server is
 * in the state that reads it) and to both as a checkpoint. Every outcome must be an error
 * code or a valid state: no crash, no leak, no non-finite model accepted. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/dica/dica_job.h"
#include "common/net/codec.h"
#include "tests/fuzz/fuzz_result.h"
#include "tests/fuzz/fuzz_round.h"

enum { K = 3, N = 40, P = 3 };

static void make_data(fk_dataset *d)
{
    for (int k = 0; k < K; k++) {
        if (fk_dataset_init(&d[k], N, P, 0) != FK_OK)
            abort();
        double y[N];
        for (int i = 0; i < N; i++) {
            for (int j = 0; j < P; j++)
                d[k].X.data[i * P + j] =
                    (i % 2 == j ? 2.0 : 0.0) + 0.1 * k + 0.05 * ((i * 7 + 3 * j + k) % 11);
            y[i] = i % 2;
        }
        if (fk_dataset_set_labels(&d[k], y, NULL) != FK_OK)
            abort();
    }
}

/* Accepted or refused, both are fine: the target looks for crashes and leaks. */
static void any_result(int rc)
{
    (void)rc;
}

static void check_model(const fk_method *m, void *srv)
{
    fk_bundle out;
    fk_err err;
    fk_bundle_init(&out);
    if (m->model(srv, &out, &err) == FK_OK)
        for (size_t i = 0; i < out.count; i++)
            if (strcmp(out.items[i].name, "sigma_y"))
                for (size_t j = 0; j < out.items[i].len; j++)
                    if (!(out.items[i].data[j] - out.items[i].data[j] == 0.0))
                        abort(); /* an accepted phase leaves a finite model */
    fk_bundle_close(&out);
}

/* The decoded bundle b as the update of `phase` after the phases before it ran. */
static void feed_phase(const fk_method *m, const fk_params *p, const fk_dataset *d,
                       const fk_bundle *b, int phase)
{
    fk_err err;
    void *srv = NULL, *cli[K] = {0};
    fuzz_round_open(m, p, d, K, &srv, cli);
    for (int ph = 0; ph < phase; ph++)
        fuzz_round_phase(m, srv, cli, K, ph);
    fk_update u[K];
    for (int k = 0; k < K; k++) {
        u[k] = (fk_update){.client = k, .msg = *b};
        fk_report_init(&u[k].report);
    }
    int done;
    any_result(m->check_update(srv, 1, phase, &u[0], &err));
    any_result(m->aggregate(srv, 1, phase, u, 1, &done, &err));
    check_model(m, srv);
    any_result(m->aggregate(srv, 1, phase, u, K, &done, &err));
    check_model(m, srv);
    fk_bundle out;
    fk_report rep;
    fk_bundle_init(&out);
    fk_report_init(&rep);
    any_result(m->local_step(cli[1], b, &out, &rep, &err)); /* as a task */
    fk_bundle_close(&out);
    any_result(m->evaluate(cli[2], b, &rep, &err)); /* as a final model */
    if (m->load(srv, b, &err) == FK_OK) /* as a checkpoint */
        check_model(m, srv);
    any_result(m->client_load(cli[0], b, &err));
    m->server_close(srv);
    for (int k = 0; k < K; k++)
        m->client_close(cli[k]);
}

static void feed(const fk_method *m, const fk_bundle *b)
{
    fk_params p;
    fk_params_init(&p);
    fuzz_setup(fk_params_set(&p, "R", "4"));
    fuzz_setup(fk_params_set(&p, "m", "1"));
    fuzz_setup(fk_params_set(&p, "min_domain_size", "2"));
    fk_dataset d[K];
    make_data(d);
    for (int phase = 0; phase < 4; phase++)
        feed_phase(m, &p, d, b, phase);
    for (int k = 0; k < K; k++)
        fk_dataset_close(&d[k]);
    fk_params_close(&p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fk_bundle b;
    fk_err err;
    fk_bundle_init(&b);
    if (fk_codec_bundle_decode(data, size, &b, &err) == FK_OK) {
        feed(&fk_method_dica, &b);
        feed(&fk_method_udica, &b);
    }
    fk_bundle_close(&b);
    return 0;
}
