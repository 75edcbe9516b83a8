/* The DICA family's benchmarks. bench/meson.build finds this folder because it is
 * named like common/methods/dica/ and links fk_bench_family_dica into `fedkern bench`. */
#include "bench/bench.h"
#include "bench/dica/dica_bench.h"

const fk_bench_entry fk_bench_family_dica[] = {
    {"fidelity dica", "DICA/UDICA/KPCA/COIR and federated RF DICA on Office-Caltech10 SURF LODO", fk_bench_fidelity_dica},
    {"dica", "DICA client statistics, server solve and kernel solver time, GFLOP/s vs dgemm", fk_bench_dica},
    {NULL, NULL, NULL},
};
