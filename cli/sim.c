/* fedkern sim METHOD: in-process federations through the generic runner (sim_generic.c), or
 * one of the paper-design simulations of the method families (bench/sim_designs.h). */
#include <stdio.h>
#include <string.h>

#include "bench/sim_designs.h"
#include "cli/cli.h"
#include "cli/sim_runners.h"
#include "common/base/params.h"
#include "common/methods/method.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern sim METHOD [options]\n\nRuns a federation of simulated clients in "
                 "this process.\n\nmethods:\n");
    for (int t = 0; fk_sim_designs[t]; t++)
        for (const fk_bench_entry *e = fk_sim_designs[t]; e->name; e++)
            fprintf(out, "  %-12s %s\n", e->name, e->summary);
    for (int i = 0; fk_methods[i]; i++)
        if (fk_methods[i]->sim_data)
            fprintf(out, "  %-12s %s\n", fk_methods[i]->name, fk_methods[i]->summary);
    fprintf(out, "\nAny other job type runs with one --data FILE per client.\n"
                 "fedkern sim METHOD --help lists the method's options.\n"
                 "fedkern sim --job FILE --data NAME=FILE... runs a job file of `fedkern job submit`\n"
                 "in this process (its method through the generic runner), NAME a client of its\n"
                 "`clients`; so does fedkern sim METHOD --job FILE, also for the methods with a\n"
                 "runner of their own above. The loader options of `fedkern data info` (--label,\n"
                 "--header, --delim, --prep, ...) apply to every --data file.\n");
}

/* Whether the job type name belongs to the paper design `fedkern sim runner`: the same name,
 * or for fedgrem-mor any *-mor job type. */
static int runs_under(const char *runner, const char *name)
{
    size_t n = strlen(name);
    if (!strcmp(runner, "fedgrem-mor"))
        return n > 4 && !strcmp(name + n - 4, "-mor");
    return !strcmp(runner, name);
}

/* --job FILE (or --job=FILE) among the words. */
static int has_job(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--job") || !strncmp(argv[i], "--job=", 6))
            return 1;
    return 0;
}

/* fedkern sim --job FILE ...: the method named by the job file, through the generic runner
 * whatever runner `fedkern sim METHOD` would pick, so the file runs as the daemons run it. */
static int sim_job_file(int argc, char **argv, const char *runner)
{
    const char *path = NULL;
    for (int i = 0; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--job"))
            path = argv[i + 1];
    for (int i = 0; i < argc; i++)
        if (!strncmp(argv[i], "--job=", 6))
            path = argv[i] + 6;
    if (!path) {
        fprintf(stderr, "fedkern sim: name a METHOD or give --job FILE; see fedkern sim --help\n");
        return 2;
    }
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    const fk_method *m = NULL;
    int rc = fk_params_load_ini(&p, path, &err);
    const char *name = rc ? NULL : fk_params_get(&p, "method");
    if (!rc && !name && runner)
        name = runner; /* fedkern sim METHOD --job FILE: the method named here */
    if (!rc && !name)
        rc = fk_err_set(&err, FK_EINVAL, "%s: no 'method = NAME' line", path);
    if (!rc && runner && !runs_under(runner, name))
        rc = fk_err_set(&err, FK_EINVAL, "%s is a job file for method %s, not for 'sim %s'",
                        path, name, runner);
    if (!rc && !(m = fk_method_find(name, &err)))
        rc = FK_ENOTFOUND;
    fk_params_close(&p);
    if (rc) {
        fprintf(stderr, "fedkern sim: %s\n", err.msg);
        return 2;
    }
    return fk_sim_generic(m, argc, argv);
}

int fk_cmd_sim(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    if (!strncmp(argv[0], "--", 2))
        return sim_job_file(argc, argv, NULL);
    /* A job file goes through the generic runner even when the name is a paper design's: the
     * file runs as the daemons run it (their per-round metrics); the designs keep their own
     * flags. */
    const fk_bench_entry *design = fk_sim_design_find(argv[0]);
    if (design)
        return has_job(argc - 1, argv + 1) ? sim_job_file(argc - 1, argv + 1, design->name)
                                           : design->run(argc - 1, argv + 1);
    for (int i = 0; fk_methods[i]; i++)
        if (!strcmp(argv[0], fk_methods[i]->name))
            return fk_sim_generic(fk_methods[i], argc - 1, argv + 1);
    return fk_cli_fail("sim", "unknown method '%s'; run 'fedkern sim --help' for the list", argv[0]);
}
