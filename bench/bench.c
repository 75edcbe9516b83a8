#include "bench/bench.h"
#include "bench/rftca.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* One line per benchmark; each lives in its own file in bench/. */
const fk_bench_entry fk_benches[] = {
    {"fidelity fedgrem", "FedGrEM paper cells: simulation, Pen-digits, Fashion-MNIST", fk_bench_fidelity_fedgrem},
    {"sfl", "sparse functional learning: time to stop, kernel GFLOP/s vs dgemm, upload bytes, server vs pooled", fk_bench_sfl},
    {"fidelity sfl", "sparse functional learning: E2.1, E3.1 federated vs pooled, pen-digits pairs", fk_bench_fidelity_sfl},
    {"fedgrem", "FedGrEM wall time (simulation, T=1000) and K/p/R scaling", fk_bench_fedgrem},
    {"blas", "dgemm GFLOP/s and dsyevr top-m eigenpair time (baselines)", fk_bench_blas},
    {"fidelity rf-tca", "1-NN, TCA, RF-TCA on Office-Caltech10 SURF vs published; Table II, X", fk_bench_fidelity_rftca},
    {"rf-tca", "RF-TCA / kernel TCA fit+transform time, GFLOP/s vs dgemm, scaling", fk_bench_rftca},
    {"fidelity kahm", "KAHM: Pen-digits, Fashion-MNIST label skew and single-class clients vs spec/paper", fk_bench_fidelity_kahm},
    {"kahm", "KAHM fit time per class model, queries/s, GFLOP/s vs dgemm, upload bytes", fk_bench_kahm},
    {"fidelity dica", "DICA/UDICA/KPCA/COIR and federated RF DICA on Office-Caltech10 SURF LODO", fk_bench_fidelity_dica},
    {"dica", "DICA client statistics, server solve and kernel solver time, GFLOP/s vs dgemm", fk_bench_dica},
    {"fidelity knn", "1-NN accuracy on the 12 Office-Caltech10 SURF pairs", fk_bench_fidelity_knn},
    {"load", "1000 concurrent mTLS clients: memory per connection, fd leak, heartbeat p99", fk_bench_load},
    {"wire", "gRPC over mutual TLS: latency, call rate, throughput vs grpcio", fk_bench_wire},
    {"server", "aggregation server under a load generator: rounds/s, overhead, GB/s, RSS, CPU", fk_bench_server},
    {NULL, NULL, NULL},
};

double fk_bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int fk_bench_data_dir(const char *dir, fk_err *err)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fk_err_set(err, FK_EIO, "data dir '%s' does not exist; pass --data-dir pointing at "
                          "the shared data folder (e.g. ../shared/data)", dir);
    return FK_OK;
}

void fk_bench_emit(int json, const char *bench, const char *case_name, const char *metric,
                   double value, const char *extra)
{
    if (json)
        printf("{\"bench\":\"%s\",\"case\":\"%s\",\"metric\":\"%s\",\"value\":%.9g%s%s}\n", bench,
               case_name, metric, value, extra ? "," : "", extra ? extra : "");
    else
        printf("%-12s %-28s %-22s %14.6g%s%s\n", bench, case_name, metric, value, extra ? "  " : "",
               extra ? extra : "");
    fflush(stdout);
}

/* Number of leading argv words that spell name ("fidelity knn" = 2 words), or 0. */
static int match_words(const char *name, int argc, char **argv)
{
    int used = 0;
    const char *p = name;
    while (*p) {
        size_t len = strcspn(p, " ");
        if (used >= argc || strlen(argv[used]) != len || strncmp(argv[used], p, len) != 0)
            return 0;
        used++;
        p += len;
        while (*p == ' ')
            p++;
    }
    return used;
}

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern bench NAME [options]\n\nbenchmarks:\n");
    for (int i = 0; fk_benches[i].name; i++)
        fprintf(out, "  %-22s %s\n", fk_benches[i].name, fk_benches[i].summary);
    fprintf(out, "\nEvery benchmark takes --json for JSON-lines output.\n");
}

int fk_bench_main(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    int best = -1, best_words = 0;
    for (int i = 0; fk_benches[i].name; i++) {
        int w = match_words(fk_benches[i].name, argc, argv);
        if (w > best_words) {
            best = i;
            best_words = w;
        }
    }
    if (best < 0) {
        fprintf(stderr, "fedkern bench: unknown benchmark '%s'; run 'fedkern bench --help' for the list\n",
                argv[0]);
        return 2;
    }
    return fk_benches[best].run(argc - best_words, argv + best_words);
}
