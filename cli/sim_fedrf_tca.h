/* The fedrf-tca simulation runner and its data loading (shared with the demo). */
#ifndef FK_CLI_SIM_FEDRF_TCA_H
#define FK_CLI_SIM_FEDRF_TCA_H

#include "common/base/params.h"
#include "common/data/dataset.h"

int fk_sim_fedrf_tca(int argc, char **argv);

/* Sources then the target (last) into *ds (allocated, n_clients entries):
 * synthetic data (options sources, seed) or the SURF domains named by
 * source/target under data_dir. */
FK_CHECKRETURN int fk_fedrf_cli_load(const fk_params *a, int synthetic, fk_dataset **ds,
                                     int *n_clients, fk_err *err);

#endif
