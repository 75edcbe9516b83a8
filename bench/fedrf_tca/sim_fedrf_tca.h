/* `fedkern sim fedrf-tca`, the paper-design simulation (bench/sim_designs.h), and its data. */
#ifndef FK_BENCH_SIM_FEDRF_TCA_H
#define FK_BENCH_SIM_FEDRF_TCA_H

#include "common/base/params.h"
#include "common/data/dataset.h"

int fk_sim_fedrf_tca(int argc, char **argv);

/* Sources then the target (last) into *ds (allocated, n_clients entries):
 * synthetic data (options sources, seed) or the SURF domains named by
 * source/target under data_dir. */
FK_CHECKRETURN int fk_fedrf_sim_load(const fk_params *a, int synthetic, fk_dataset **ds,
                                     int *n_clients, fk_err *err);

#endif
