/* fedkern state compact|info PATH: the server's state file, offline (issue 35). */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "common/base/log.h"
#include "server/store.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern state compact PATH   rewrite the state file without its free space\n"
            "       fedkern state info PATH      what the state file holds and its start-up check\n"
            "\n"
            "PATH is the server's --state file (/var/lib/fedkern/state.db).\n"
            "compact runs SQLite's VACUUM on the file with the server stopped (refused while a\n"
            "fedkern-server has it open): the space of deleted jobs and of what retention pruned\n"
            "goes back to the file system. It needs free disk space for a copy of the live data\n"
            "and takes time proportional to it; take a backup first (docs/operations.md).\n"
            "info opens the file as the server would (the same start-up check) and prints its\n"
            "size, free space and the rows and bytes of updates, checkpoints and models.\n");
}

static double mib(uint64_t b)
{
    return (double)b / (1 << 20);
}

FK_CHECKRETURN static int info(const char *path)
{
    fk_store *st;
    fk_err err = {0};
    if (fk_store_open(&st, path, &err))
        return fk_cli_fail("state info", "%s", err.msg);
    fk_store_usage u;
    fk_store_startup su;
    fk_store_startup_get(st, &su);
    int rc = fk_store_usage_get(st, &u, &err);
    fk_store_close(st);
    if (rc)
        return fk_cli_fail("state info", "%s", err.msg);
    printf("state file %s: %.1f MiB (-wal %.1f MiB), %.1f MiB free inside\n", path,
           mib(u.file_bytes), mib(u.wal_bytes), mib(u.free_bytes));
    printf("jobs %lld, rounds %lld\n", (long long)u.jobs, (long long)u.rounds);
    printf("updates %lld (%lld without their bytes: retention), %.1f MiB\n", (long long)u.updates,
           (long long)u.updates_pruned, mib(u.update_bytes));
    printf("checkpoints %lld, %.1f MiB\n", (long long)u.checkpoints, mib(u.checkpoint_bytes));
    printf("models %lld, %.1f MiB\n", (long long)u.models, mib(u.model_bytes));
    printf("start-up check: %s (%s), %lld rows, %.3f s\n", su.mode, su.reason, (long long)su.rows,
           su.seconds);
    return 0;
}

int fk_cmd_state(int argc, char **argv)
{
    if (argc >= 1 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        usage(stdout);
        return 0;
    }
    if (argc != 2 || (strcmp(argv[0], "compact") && strcmp(argv[0], "info"))) {
        usage(stderr);
        return 2;
    }
    const char *path = argv[1];
    struct stat sb;
    if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return fk_cli_fail("state", "%s is not a state file (no such regular file)", path);
    fk_log_set_level(FK_LOG_WARN);
    if (!strcmp(argv[0], "info"))
        return info(path);
    uint64_t before, after;
    fk_err err = {0};
    if (fk_store_compact(path, &before, &after, &err))
        return fk_cli_fail("state compact", "%s", err.msg);
    printf("state file %s compacted: %.1f MiB -> %.1f MiB\n", path, mib(before), mib(after));
    return 0;
}
