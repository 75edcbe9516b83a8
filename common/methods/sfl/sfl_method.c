/* The sfl job type's operations table. */
#include "common/methods/sfl/sfl.h"
#include "common/methods/sfl/sfl_int.h"

const fk_method fk_method_sfl = {
    .name = "sfl",
    .summary = "sparse functional kernel learning, one-shot upload of critical samples (RAW "
               "ROWS leave the clients; opt-in on both ends)",
    .server_init = fk__sfl_srv_init,
    .server_close = fk__sfl_srv_close,
    .plan = fk__sfl_srv_plan,
    .task = fk__sfl_srv_task,
    .aggregate = fk__sfl_srv_aggregate,
    .model = fk__sfl_srv_model,
    .save = fk__sfl_srv_save,
    .load = fk__sfl_srv_load,
    .finished = fk__sfl_srv_finished,
    .max_rounds = fk__sfl_srv_max_rounds,
    .check_update = fk__sfl_check_update,
    .predict = fk__sfl_predict,
    .client_init = fk__sfl_cli_init,
    .client_close = fk__sfl_cli_close,
    .local_step = fk__sfl_cli_step,
    .evaluate = fk__sfl_cli_evaluate,
    .client_save = fk__sfl_cli_save,
    .client_load = fk__sfl_cli_load,
    .sim_data = fk__sfl_sim_data,
    .keys = fk__sfl_keys,
};
