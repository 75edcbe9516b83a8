/* Job type kahm: the job keys, the built-in synthetic clients and the method table (the job
 * configuration the ops share is in kahm_job.c). */
#include "common/methods/kahm/kahm_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/classes.h"

static const uint64_t SIM_STREAM = 0x6b73696d00000000ULL; /* "ksim" */

/* Synthetic clients: C shared class generators (centre + 4-d linear structure + noise,
 * in [-1, 1] after tanh); client i holds sim_classes_per_client classes, round robin, with
 * sim_samples samples of each, so every class is held by some client when K*k >= C. */
FK_CHECKRETURN static int sim_data(const fk_params *p, int n_clients, uint64_t seed,
                                   fk_dataset *clients, const unsigned char *want, fk_err *err)
{
    long C, per, d, k;
    fk_classes cls;
    int rc = fk_classes_parse(&cls, p, 10, 100000, FK_CLASSES_COUNT_RANGE, err);
    if (rc)
        return rc;
    C = cls.n;
    if (!rc) rc = fk_params_int(p, "sim_samples", 80, 4, 1000000, &per, err);
    if (!rc) rc = fk_params_int(p, "sim_dim", 16, 2, 100000, &d, err);
    if (!rc) rc = fk_params_int(p, "sim_classes_per_client", 3, 1, 100000, &k, err);
    if (rc) {
        fk_classes_close(&cls);
        return rc;
    }
    if (k > C)
        k = C;
    fk_rng r;
    fk_rng_init(&r, seed, SIM_STREAM);
    size_t D = (size_t)d;
    double *mu = malloc((size_t)C * D * sizeof(double));
    double *A = malloc((size_t)C * 4 * D * sizeof(double));
    double *raw = malloc((size_t)(k * per) * sizeof(double));
    if (!mu || !A || !raw) {
        free(mu);
        free(A);
        free(raw);
        fk_classes_close(&cls);
        return fk_err_set(err, FK_ENOMEM, "kahm sim: out of memory");
    }
    for (size_t i = 0; i < (size_t)C * D; i++)
        mu[i] = 0.5 * fk_rng_normal(&r);
    for (size_t i = 0; i < (size_t)C * 4 * D; i++)
        A[i] = 0.35 * fk_rng_normal(&r);
    for (int q = 0; q < n_clients && !rc; q++) {
        fk_dataset *ds = &clients[q];
        if (want && !want[q]) { /* its own stream (the class generators above are shared) */
            char nm[32];
            snprintf(nm, sizeof nm, "kahm-sim-%d", q);
            fk_dataset_set_name(ds, nm);
            continue;
        }
        rc = fk_dataset_init(ds, (size_t)(k * per), D, 1);
        fk_rng cr;
        fk_rng_init(&cr, seed, SIM_STREAM + 1 + (uint64_t)q);
        for (long a = 0; !rc && a < k; a++) {
            long c = ((long)q * k + a) % C;
            for (long s = 0; s < per; s++) {
                size_t i = (size_t)(a * per + s);
                double z[4];
                for (int t = 0; t < 4; t++)
                    z[t] = fk_rng_normal(&cr);
                for (size_t j = 0; j < D; j++) {
                    double v = mu[(size_t)c * D + j] + 0.05 * fk_rng_normal(&cr);
                    for (int t = 0; t < 4; t++)
                        v += A[((size_t)c * 4 + (size_t)t) * D + j] * z[t];
                    ds->X.data[i * ds->X.ld + j] = v;
                }
                raw[i] = cls.v[c]; /* the job's raw label of class c */
            }
        }
        if (!rc)
            rc = fk_dataset_set_labels(ds, raw, err);
        if (!rc) {
            char nm[32];
            snprintf(nm, sizeof nm, "kahm-sim-%d", q);
            fk_dataset_set_name(ds, nm);
        }
    }
    free(mu);
    free(A);
    free(raw);
    fk_classes_close(&cls);
    return rc;
}

static int max_rounds(const fk_params *p)
{
    (void)p;
    return 1;
}

static const fk_param_doc keys[] = {
    {"classes LIST|C", "the classes by raw label value, e.g. 1,2,5 or 1..10 (class id = position; "
                        "predictions answer the raw label; a label not listed is refused), or a "
                        "count C: the labels 0..C-1 (10)"},
    {"upload_models 0|1", "mode A: clients upload their KAHMs to the server (they CONTAIN the "
                          "training samples); each client must also allow it in its own "
                          "config ([local] allow_model_upload = true), else it refuses the task (0: mode B, models "
                          "stay on the clients, only class ids and counts are sent)"},
    {"local.allow_model_upload 0|1", "copied by the client daemon from its own [local] "
                                      "section; a job that sets it is refused (sim only)"},
    {"dim D", "expected input dimension; updates of another dimension are refused (0: any)"},
    {"scale S", "inputs are multiplied by S before tanh (1; e.g. 1/255 for raw pixels); a "
                "client warns when more than 25 % of its |S x| exceed 3 (tanh flat) and, "
                "with the default, refuses when more than half do, naming a scale to set"},
    {"tanh 0|1", "apply tanh elementwise after scaling (1, the paper's preprocessing)"},
    {"holdout F", "share of each class a client keeps aside to score the model (0.2)"},
    {"n_max N", "subspace dimension cap of App. B (20)"},
    {"nb N", "samples per KAHM before a class is split by k-means (1000)"},
    {"partition round|ceil", "cluster count round(N/nb) (reference code) or ceil (eq. 65)"},
    {"min_cluster N", "smallest k-means cluster (30)"},
    {"kmeans_restarts N", "k-means++ restarts (10)"},
    {"lambda_tol T", "absolute stop of the ridge fixed point (0.01)"},
    {"lambda_maxit N", "iterations of the ridge fixed point (100)"},
    {"lambda_final last-used|converged", "ridge kept: the reference's last used, or the final"},
    {"sim_samples N", "fedkern sim: samples per class per synthetic client (80)"},
    {"sim_dim D", "fedkern sim: dimension of the synthetic data (16)"},
    {"sim_classes_per_client K", "fedkern sim: classes each synthetic client holds (3)"},
    {NULL, NULL},
};

const fk_method fk_method_kahm = {
    .name = "kahm",
    .summary = "kernel affine hull machines: one-shot class models, min-distance classifier "
               "(Kumar et al. 2025)",
    .server_init = fk__kahm_srv_init,
    .server_close = fk__kahm_srv_close,
    .plan = fk__kahm_plan,
    .task = fk__kahm_task,
    .aggregate = fk__kahm_aggregate,
    .model = fk__kahm_model,
    .save = fk__kahm_save,
    .load = fk__kahm_load,
    .finished = fk__kahm_finished,
    .max_rounds = max_rounds,
    .check_update = fk__kahm_check_update,
    .predict = fk__kahm_predict,
    .holds_models = fk__kahm_holds_models,
    .check_answer = fk__kahm_check_answer,
    .combine_answers = fk__kahm_combine,
    .client_init = fk__kahm_cli_init,
    .client_close = fk__kahm_cli_close,
    .local_step = fk__kahm_local_step,
    .evaluate = fk__kahm_evaluate,
    .client_save = fk__kahm_cli_save,
    .client_load = fk__kahm_cli_load,
    .client_predict = fk__kahm_client_predict,
    .sim_data = sim_data,
    .keys = keys,
};
