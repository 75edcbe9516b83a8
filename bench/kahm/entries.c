/* The KAHM family's benchmarks. bench/meson.build finds this folder because it is
 * named like common/methods/kahm/ and links fk_bench_family_kahm into `fedkern bench`. */
#include "bench/bench.h"
#include "bench/kahm/kahm_bench.h"

const fk_bench_entry fk_bench_family_kahm[] = {
    {"fidelity kahm", "KAHM: Pen-digits, Fashion-MNIST label skew and single-class clients vs spec/paper", fk_bench_fidelity_kahm},
    {"kahm serve", "KAHM mode-B prediction latency through the server and 100 client agents (p50/p99, queries/s)", fk_bench_kahm_serve},
    {"kahm", "KAHM fit time per class model, queries/s, GFLOP/s vs dgemm, upload bytes", fk_bench_kahm},
    {NULL, NULL, NULL},
};
