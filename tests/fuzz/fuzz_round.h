/* The fuzz targets of job messages bring a method's states to the point where they read the
 * input by running real rounds first. These steps are the target's own setup, not the input:
 * abort() if one fails (see fuzz_setup), instead of fuzzing a half-built state. */
#ifndef FK_FUZZ_ROUND_H
#define FK_FUZZ_ROUND_H

#include <stdlib.h>

#include "common/methods/method.h"

enum { FUZZ_ROUND_MAX_K = 8 };

/* The server and clients cli[0..K) of job p, client k on d[k], with seed 5. */
static inline void fuzz_round_open(const fk_method *m, const fk_params *p, const fk_dataset *d,
                                   int K, void **srv, void **cli)
{
    fk_err err;
    if (m->server_init(srv, p, K, 5, &err))
        abort();
    for (int k = 0; k < K; k++)
        if (m->client_init(&cli[k], p, &d[k], k, K, 5, &err))
            abort();
}

/* Phase `phase` of round 1: every client's task and step, then the server's aggregate. */
static inline void fuzz_round_phase(const fk_method *m, void *srv, void **cli, int K, int phase)
{
    fk_err err;
    fk_update ups[FUZZ_ROUND_MAX_K];
    if (K > FUZZ_ROUND_MAX_K)
        abort();
    for (int k = 0; k < K; k++) {
        fk_bundle t;
        fk_bundle_init(&t);
        fk_bundle_init(&ups[k].msg);
        fk_report_init(&ups[k].report);
        ups[k].client = k;
        if (m->task(srv, 1, phase, k, &t, &err) ||
            m->local_step(cli[k], &t, &ups[k].msg, &ups[k].report, &err))
            abort();
        fk_bundle_close(&t);
    }
    int done;
    if (m->aggregate(srv, 1, phase, ups, K, &done, &err))
        abort();
    for (int k = 0; k < K; k++)
        fk_bundle_close(&ups[k].msg);
}

#endif
