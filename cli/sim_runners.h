/* The runners of `fedkern sim METHOD` (cli/sim.c dispatches): the generic one for
 * any job type with sim_data (sim_generic.c) and the paper-design runners of the
 * mixture family (sim_fedgrem.c, sim_fedgrem_mor.c). Each returns the process exit
 * status (0 ok, 1 failure, 2 usage). */
#ifndef FK_CLI_SIM_RUNNERS_H
#define FK_CLI_SIM_RUNNERS_H

#include <stdint.h>

#include "common/base/params.h"
#include "common/methods/method.h"

int fk_sim_generic(const fk_method *m, int argc, char **argv);
int fk_sim_fedgrem(int argc, char **argv);
int fk_sim_fedgrem_mor_jobs(int argc, char **argv);
/* `sim fedgrem --model mor`: the direct MoR simulation (sim_fedgrem_mor.c). */
int fk_sim_fedgrem_mor(fk_params *p, const char *method, long rounds, long reps, uint64_t seed,
                       long K, long R, long dim, long n, long outl, double h, int json);

#endif
