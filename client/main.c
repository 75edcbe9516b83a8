/* fedkern-client: the client daemon. */
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-client [--config FILE] [options]\n"
                 "\n"
                 "The fedkern client daemon. Options:\n"
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
            printf("fedkern-client %s\n", FK_VERSION);
            return 0;
        }
        fprintf(stderr, "fedkern-client: unknown option '%s'; see --help\n", argv[i]);
        return 2;
    }
    usage(stderr);
    return 2;
}
