/* The mixture family's paper-design simulations of `fedkern sim` (bench/sim_designs.h). */
#include "bench/mixture/sim_fedgrem.h"
#include "bench/sim_designs.h"

const fk_bench_entry fk_sim_family_mixture[] = {
    {"fedgrem", "FedGrEM and mixture baselines on the paper's simulation design", fk_sim_fedgrem},
    {"fedgrem-mor",
     "the *-mor job types (fedgrem, fedem, local-em, local-grem, pooled-grem, pooled-em, "
     "fedgmm) on the mixture-of-regressions design",
     fk_sim_fedgrem_mor_jobs},
    {NULL, NULL, NULL},
};
