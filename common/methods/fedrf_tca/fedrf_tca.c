/* FedRF-TCA operations table: the same code runs in `fedkern sim` and in the
 * daemons. Server side in fedrf_tca_server.c, client side in
 * fedrf_tca_client.c, checkpoints in fedrf_tca_ckpt.c. */
#include "common/methods/fedrf_tca/fedrf_tca.h"

#include "common/methods/fedrf_tca/fedrf_tca_int.h"

/* The job keys fk__fedrf_parse_cfg reads (docs/fedrf-tca.md describes each). */
static const fk_param_doc keys[] = {
    {"classes LIST|C", "the classes by raw label value, e.g. 1,2,5 or 1..10 (a class is the same "
                        "output on every client; a label not listed is refused), or a count C, "
                        "which needs every client to hold all C classes (required)"},
    {"N N", "random frequencies (1000)"},
    {"m M", "adaptive-layer width, 1..2N (100)"},
    {"sigma X", "kernel width, > 0 (1)"},
    {"features iid|orthogonal", "how the random frequencies are drawn (iid)"},
    {"lambda X", "MMD weight (1)"},
    {"lr X", "learning rate (1e-3)"},
    {"optimizer adam|sgd", "local optimiser (adam)"},
    {"eps X", "optimiser epsilon (1e-5)"},
    {"batch B", "minibatch size (128)"},
    {"tc N", "classifier averaging interval in rounds (50)"},
    {"target I", "index of the unlabelled target client (the last)"},
    {"eval_every N", "score the target every N rounds (1)"},
    {"voting 0|1", "hard voting: no classifier averaging, the final model carries every "
                    "source's classifier as votes (0)"},
    {"hidden N,N,...", "classifier hidden layers, none = softmax (100,100)"},
    {"participation random|all", "the sources of a round: a random subset (size uniform on 0..K), or "
                                  "all (random)"},
    {"drop_setting I|II|III", "dropout setting of Table III (I)"},
    {"order subset|all|ordered|ordered-random|random|random-random",
     "who sends Sigma l and W (Table XVIII; subset)"},
    {"common_init 0|1", "every client starts from the same W and classifier (0)"},
    {"target_opt sgd|adam", "optimiser of the target's W (sgd; adam, the paper's, amplifies the MMD's noise)"},
    {"avg_last R", "also keep the mean of the models aggregated in the last R rounds (0: off)"},
    {"extractor identity|dense", "fixed inputs, or one local trainable layer, never sent (identity)"},
    {"ext_dim H", "width of the dense extractor (256)"},
    {"warm_start 0|1", "round 1 starts W from the RF-TCA closed form of the pooled moments (0)"},
    {"gamma G", "the warm start's regulariser (0: n / (n_S n_T))"},
    {"source_only 0|1", "baseline: no statistics, the target sends no W and is scored with the "
                        "sources' average (0)"},
    {"select_holdout F", "hold out this fraction of each source's labelled rows; the server keeps "
                         "the round's model best on them (W_sel, C_sel; 0: off)"},
    {NULL, NULL},
};

/* The target site (its accuracy is the job's measure; the sources measure none) apart. */
FK_CHECKRETURN static int client_roles(const fk_params *p, int n_clients, const char **roles,
                                       fk_err *err)
{
    long target;
    int rc = fk_params_int(p, "target", n_clients - 1, 0, n_clients - 1, &target, err);
    for (int k = 0; !rc && k < n_clients; k++)
        roles[k] = k == target ? "target" : NULL;
    return rc;
}

const fk_method fk_method_fedrf_tca = {
    .name = "fedrf-tca",
    .summary = "federated domain adaptation with random-feature TCA (Feng et al.)",
    .server_init = fk__fedrf_server_init,
    .server_close = fk__fedrf_server_close,
    .plan = fk__fedrf_server_plan,
    .task = fk__fedrf_server_task,
    .aggregate = fk__fedrf_server_aggregate,
    .fold_begin = fk__fedrf_server_fold_begin,
    .fold = fk__fedrf_server_fold,
    .fold_end = fk__fedrf_server_fold_end,
    .check_update = fk__fedrf_server_check,
    .model = fk__fedrf_server_model,
    .save = fk__fedrf_server_save,
    .load = fk__fedrf_server_load,
    .client_init = fk__fedrf_client_init,
    .client_close = fk__fedrf_client_close,
    .local_step = fk__fedrf_client_step,
    .evaluate = fk__fedrf_client_evaluate,
    .predict = fk__fedrf_predict,
    .export_arrays = fk__fedrf_export,
    .client_save = fk__fedrf_client_save,
    .client_load = fk__fedrf_client_load,
    .keys = keys,
    .client_roles = client_roles,
};
