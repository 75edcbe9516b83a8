/* fedkern demo: the showcase run on built-in data (grows with the daemons). */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/la/rng.h"

int fk_cmd_demo(int argc, char **argv)
{
    if (argc > 0 && (!strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))) {
        printf("usage: fedkern demo\n\nRuns the demo federation on built-in data.\n");
        return 0;
    }
    fk_rng r;
    fk_rng_init(&r, 42, 0);
    printf("fedkern demo: seed 42 first normals %.6f %.6f %.6f\n", fk_rng_normal(&r),
           fk_rng_normal(&r), fk_rng_normal(&r));
    return 0;
}
