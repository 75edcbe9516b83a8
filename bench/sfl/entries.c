/* The sparse functional learning family's benchmarks. bench/meson.build finds this folder because it is
 * named like common/methods/sfl/ and links fk_bench_family_sfl into `fedkern bench`. */
#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"

const fk_bench_entry fk_bench_family_sfl[] = {
    {"fidelity sfl", "sparse functional learning: E2.1, E3.1 federated vs pooled, pen-digits pairs", fk_bench_fidelity_sfl},
    {NULL, NULL, NULL},
};
