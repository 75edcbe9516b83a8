/* The RF-TCA family's benchmarks. bench/meson.build finds this folder because it is
 * named like common/methods/fedrf_tca/ and links fk_bench_family_fedrf_tca into `fedkern bench`. */
#include "bench/bench.h"
#include "bench/fedrf_tca/rftca_bench.h"

const fk_bench_entry fk_bench_family_fedrf_tca[] = {
    {"fidelity rf-tca", "1-NN, TCA, RF-TCA on Office-Caltech10 SURF vs published; Table II, X", fk_bench_fidelity_rftca},
    {"rf-tca", "RF-TCA / kernel TCA fit+transform time, GFLOP/s vs dgemm, scaling", fk_bench_rftca},
    {NULL, NULL, NULL},
};
