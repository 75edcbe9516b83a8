/* fedkern-server: the aggregation daemon. */
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-server [--config FILE] [options]\n"
                 "\n"
                 "The fedkern aggregation server. Options:\n"
                 "  --help      this text\n"
                 "  --version   print the version\n");
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("fedkern-server %s\n", FK_VERSION);
            return 0;
        }
        fprintf(stderr, "fedkern-server: unknown option '%s'; see --help\n", argv[i]);
        return 2;
    }
    usage(stderr);
    return 2;
}
