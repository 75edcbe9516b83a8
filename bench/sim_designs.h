/* The paper-design simulations of `fedkern sim NAME` (cli/sim.c dispatches): experiments
 * around a job type, not a job type's runner. Each repeats fk_sim_run over replications or
 * scores the final model its own way (FedGrEM's E_theta and E_w against the true mixture,
 * FedRF-TCA's target accuracy and message counts) and prints the paper's numbers; any job
 * type runs as the daemons run it through the generic runner (cli/sim_generic.c). A method
 * family with such a design has a file bench/<family>/sim_entries.c that defines
 * `const fk_bench_entry fk_sim_family_<family>[]`; bench/meson.build finds it, as it finds the
 * families' benchmarks. */
#ifndef FK_BENCH_SIM_DESIGNS_H
#define FK_BENCH_SIM_DESIGNS_H

#include "bench/bench.h"

/* The designs' tables, NULL-terminated; each table ends with a {NULL, NULL, NULL} entry.
 * An entry's run takes the words after `fedkern sim NAME` and returns the exit status. */
extern const fk_bench_entry *const fk_sim_designs[];

/* The design named `name`, or NULL. */
const fk_bench_entry *fk_sim_design_find(const char *name);

/* Print "fedkern CMD: message" to stderr (as the CLI's commands do) and return 1. */
int fk_sim_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
