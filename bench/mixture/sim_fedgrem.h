/* `fedkern sim fedgrem` and `fedkern sim fedgrem-mor`: the FedGrEM paper's simulation designs
 * (bench/sim_designs.h). Each returns the process exit status (0 ok, 1 failure, 2 usage). */
#ifndef FK_BENCH_SIM_FEDGREM_H
#define FK_BENCH_SIM_FEDGREM_H

#include <stdint.h>

#include "common/base/params.h"

int fk_sim_fedgrem(int argc, char **argv);
int fk_sim_fedgrem_mor_jobs(int argc, char **argv);
/* `sim fedgrem --model mor`: the direct MoR simulation (sim_fedgrem_mor.c). */
int fk_sim_fedgrem_mor(fk_params *p, const char *method, long rounds, long reps, uint64_t seed,
                       long K, long R, long dim, long n, long outl, double h, int json);

#endif
