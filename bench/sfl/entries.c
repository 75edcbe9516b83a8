/* The sparse functional learning family's benchmarks. bench/meson.build finds this folder because it is
 * named like common/methods/sfl/ and links fk_bench_family_sfl into `fedkern bench`. */
#include "bench/bench.h"
#include "bench/sfl/sfl_bench.h"

const fk_bench_entry fk_bench_family_sfl[] = {
    {"fidelity sfl", "sparse functional learning: E2.1-E2.3, E3.1, pen-digits, Parkinson's, resilient rows", fk_bench_fidelity_sfl},
    {"sfl", "sparse functional learning: time to stop, kernel GFLOP/s vs dgemm, upload bytes, server vs pooled", fk_bench_sfl},
    {NULL, NULL, NULL},
};
