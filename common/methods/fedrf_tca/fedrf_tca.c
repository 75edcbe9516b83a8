/* FedRF-TCA operations table: the same code runs in `fedkern sim` and in the
 * daemons. Server side in fedrf_tca_server.c, client side in
 * fedrf_tca_client.c, checkpoints in fedrf_tca_ckpt.c. */
#include "common/methods/fedrf_tca/fedrf_tca.h"

#include "common/methods/fedrf_tca/fedrf_tca_int.h"

const fk_method fk_method_fedrf_tca = {
    .name = "fedrf-tca",
    .summary = "federated domain adaptation with random-feature TCA (Feng et al.)",
    .server_init = fk__fedrf_server_init,
    .server_close = fk__fedrf_server_close,
    .plan = fk__fedrf_server_plan,
    .task = fk__fedrf_server_task,
    .aggregate = fk__fedrf_server_aggregate,
    .check_update = fk__fedrf_server_check,
    .model = fk__fedrf_server_model,
    .save = fk__fedrf_server_save,
    .load = fk__fedrf_server_load,
    .client_init = fk__fedrf_client_init,
    .client_close = fk__fedrf_client_close,
    .local_step = fk__fedrf_client_step,
    .evaluate = fk__fedrf_client_evaluate,
    .client_save = fk__fedrf_client_save,
    .client_load = fk__fedrf_client_load,
};
