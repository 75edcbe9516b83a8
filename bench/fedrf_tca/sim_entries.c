/* The RF-TCA family's paper-design simulation of `fedkern sim` (bench/sim_designs.h). */
#include "bench/fedrf_tca/sim_fedrf_tca.h"
#include "bench/sim_designs.h"

const fk_bench_entry fk_sim_family_fedrf_tca[] = {
    {"fedrf-tca", "federated domain adaptation with random-feature TCA", fk_sim_fedrf_tca},
    {NULL, NULL, NULL},
};
