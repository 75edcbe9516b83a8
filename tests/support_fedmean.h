/* Test-only methods for the server tests: "fedmean" (one phase: clients send
 * their mean minus the global mean, the server moves half way, with the job's
 * aggregator and an optional random sample) and "fedvar" (two phases: global
 * mean, then variance). Parameters: sampling, aggregator, trim, ckpt_pad
 * (extra checkpoint values), task_pad / update_pad (extra values in every task
 * / update, to force chunking), fail_init (server_init refuses). */
#ifndef FK_TEST_SUPPORT_FEDMEAN_H
#define FK_TEST_SUPPORT_FEDMEAN_H

#include "common/methods/method.h"

enum { FK_TEST_DIM = 3 };

extern const fk_method fk_test_fedmean;
extern const fk_method fk_test_fedvar;
extern const fk_method fk_test_fedvar_fold; /* fedvar with the fold ops (streaming) */
const fk_method *fk_test_find_method(const char *name, fk_err *err);

#endif
