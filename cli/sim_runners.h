/* The generic runner of `fedkern sim METHOD` (cli/sim.c dispatches): any job type with
 * sim_data or one --data file per client (sim_generic.c). The paper-design simulations
 * (`sim fedgrem`, `sim fedgrem-mor`, `sim fedrf-tca`) are experiments of their method
 * families in bench/<family>/ (bench/sim_designs.h). Returns the process exit status
 * (0 ok, 1 failure, 2 usage). */
#ifndef FK_CLI_SIM_RUNNERS_H
#define FK_CLI_SIM_RUNNERS_H

#include "common/methods/method.h"

int fk_sim_generic(const fk_method *m, int argc, char **argv);

#endif
