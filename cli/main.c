/* fedkern: the operator CLI (data inspection, simulation, benchmarks, demo). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bench/bench.h"
#include "cli/cli.h"
#include "cli/sim_mpi.h"
#include "common/base/options.h"
#include "common/la/blas_core.h"
#include "common/la/blas_threads.h"

static int cmd_bench(int argc, char **argv);

static const fk_cli_cmd commands[] = {
    {"demo", "run the demo federation on built-in data", fk_cmd_demo},
    {"bench", "run a benchmark (fedkern bench --help lists them)", cmd_bench},
    {"data", "inspect data files and the benchmark catalog", fk_cmd_data},
    {"sim", "simulate a federation in this process", fk_cmd_sim},
    {"certs", "create the CA and issue server/client/admin certificates", fk_cmd_certs},
    {"job", "submit, inspect, fetch and cancel jobs on a fedkern-server", fk_cmd_job},
    {"state", "the server's state file offline: compact, info", fk_cmd_state},
    {"health", "ask a fedkern-server whether it serves (exit 0: SERVING)", fk_cmd_health},
    {"model", "show a model file, score it on labelled data, write its predictions, export it",
     fk_cmd_model},
    {NULL, NULL, NULL},
};

int fk_cli_fail(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "fedkern %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

static int cmd_bench(int argc, char **argv)
{
    return fk_bench_main(argc, argv);
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern COMMAND [options]\n"
            "\n"
            "fedkern is the operator tool of the fedkern federated kernel-learning system.\n"
            "\n"
            "commands:\n");
    for (int i = 0; commands[i].name; i++)
        fprintf(out, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(out,
            "\n"
            "  fedkern COMMAND --help   describes one command\n"
            "  fedkern --version        prints the version, the BLAS thread count and kernels\n");
}

static int run(int argc, char **argv);

int main(int argc, char **argv)
{
    /* first: may re-execute this program with kernels that match the CPU */
    fk_blas_core_select(argv);
    /* under mpirun / srun: every fk_sim_run over the ranks (cli/sim_mpi.c) */
    fk_err err = {0};
    if (fk_mpi_start(&argc, &argv, &err) != FK_OK) {
        fprintf(stderr, "fedkern: %s\n", err.msg);
        return fk_mpi_finish(2);
    }
    return fk_mpi_finish(run(argc, argv));
}

static int run(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    int blas_threads;
    fk_err err = {0};
    if (fk_blas_threads_setup(&blas_threads, &err) != FK_OK) {
        fprintf(stderr, "fedkern: %s\n", err.msg);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        /* the BLAS count and kernels decide a model's last bits: say which ones run */
        char core[256];
        fk_blas_core_describe("", core, sizeof core);
        printf("fedkern %s\nblas threads=%d %s\n", FK_VERSION, blas_threads, core);
        return 0;
    }
    /* Option names are words joined by '_'; the '-' spellings of 0.1 work, with a warning. */
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strncmp(argv[i], "--", 2) && argv[i][2]) {
            char key[128];
            snprintf(key, sizeof key, "%.*s", (int)strcspn(argv[i] + 2, "="), argv[i] + 2);
            fk_options_warn_old(key, "fedkern", NULL, stderr);
        }
    for (int i = 0; commands[i].name; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "fedkern: unknown command '%s'; run 'fedkern --help' for the list\n", argv[1]);
    return 2;
}
