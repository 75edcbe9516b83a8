/* The mixture (FedGrEM) family's benchmarks. bench/meson.build finds this folder because it is
 * named like common/methods/mixture/ and links fk_bench_family_mixture into `fedkern bench`. */
#include "bench/bench.h"
#include "bench/mixture/fedgrem_bench.h"

const fk_bench_entry fk_bench_family_mixture[] = {
    {"fidelity fedgrem", "FedGrEM paper cells: simulation, Pen-digits, Fashion-MNIST", fk_bench_fidelity_fedgrem},
    {"fedgrem", "FedGrEM wall time (simulation, T=1000) and K/p/R scaling", fk_bench_fedgrem},
    {NULL, NULL, NULL},
};
