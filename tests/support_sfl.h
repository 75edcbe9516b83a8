/* Shared pieces of the sfl job tests (methods_sfl, methods_sfl_ovo): the job's ops driven by
 * hand through round 1 (phase 0: counts, phase 1: uploads), checkpoint restarts and refused
 * uploads. Failures are cmocka assertions. */
#ifndef FK_TEST_SUPPORT_SFL_H
#define FK_TEST_SUPPORT_SFL_H

#include <stddef.h>
#include <stdint.h>

#include "common/methods/method.h"

/* The one-element tensor name of b. */
double fk_test_scalar(const fk_bundle *b, const char *name);
/* *srv and cli[0..K) opened on job p, client k on ds[k], all with seed. */
void fk_test_sfl_open(const fk_params *p, const fk_dataset *ds, int K, uint64_t seed, void **srv,
                      void **cli);
/* Phase ph of round 1: every client's update in ups (initialised here), each passing
 * check_update. */
void fk_test_sfl_phase(void *srv, void **cli, int K, int ph, fk_update *ups);
void fk_test_sfl_close_ups(fk_update *ups, int K);
/* Regression clients ds[0..K): n rows each, x = x0 + span * U(0, 1), y = sin(x) + N(0, 0.01^2),
 * client k from fk_rng stream (5, k). */
void fk_test_sfl_sine(fk_dataset *ds, int K, size_t n, double x0, double span);
/* Phase 0 run and aggregated, then phase 1's uploads in ups (checked, not aggregated). */
void fk_test_sfl_uploads(void *srv, void **cli, int K, fk_update *ups);
/* A server restarted from srv's checkpoint: ck (cleared first) holds the save, *srv2 (closed
 * first unless NULL) is a new server of job p that loaded it. */
void fk_test_sfl_restart(void *srv, const fk_params *p, int K, uint64_t seed, fk_bundle *ck,
                         void **srv2);
/* Tensor name[i] = v: check_update refuses the phase-1 upload with a message naming want;
 * restored, it passes. */
void fk_test_sfl_refuse(void *srv, fk_update *u, const char *name, size_t i, double v,
                        const char *want);

#endif
