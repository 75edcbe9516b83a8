/* fedkern sim METHOD: in-process federations, one runner per method. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/sim_fedrf_tca.h"
#include "cli/sim_runners.h"
#include "common/methods/method.h"

typedef struct sim_entry {
    const char *method;
    const char *summary;
    int (*run)(int argc, char **argv);
} sim_entry;

/* Methods with a runner of their own (cli/sim_<method>.c: paper designs, several
 * replications); every other job type runs through the generic runner (sim_generic.c). */
static const sim_entry sims[] = {
    {"fedrf-tca", "federated domain adaptation with random-feature TCA", fk_sim_fedrf_tca},
    {"fedgrem", "FedGrEM and mixture baselines on the paper's simulation design", fk_sim_fedgrem},
    {"fedgrem-mor",
     "the *-mor job types (fedgrem, fedem, local-em, local-grem, pooled-grem, pooled-em, "
     "fedgmm) on the mixture-of-regressions design",
     fk_sim_fedgrem_mor_jobs},
    {NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern sim METHOD [options]\n\nRuns a federation of simulated clients in "
                 "this process.\n\nmethods:\n");
    for (int i = 0; sims[i].method; i++)
        fprintf(out, "  %-12s %s\n", sims[i].method, sims[i].summary);
    for (int i = 0; fk_methods[i]; i++)
        if (fk_methods[i]->sim_data)
            fprintf(out, "  %-12s %s\n", fk_methods[i]->name, fk_methods[i]->summary);
    fprintf(out, "\nAny other job type runs with one --data FILE per client.\n"
                 "fedkern sim METHOD --help lists the method's options.\n");
}

int fk_cmd_sim(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    for (int i = 0; sims[i].method; i++)
        if (!strcmp(argv[0], sims[i].method))
            return sims[i].run(argc - 1, argv + 1);
    for (int i = 0; fk_methods[i]; i++)
        if (!strcmp(argv[0], fk_methods[i]->name))
            return fk_sim_generic(fk_methods[i], argc - 1, argv + 1);
    return fk_cli_fail("sim", "unknown method '%s'; run 'fedkern sim --help' for the list", argv[0]);
}
