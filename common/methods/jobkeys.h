/* Which keys a job may set: the round engine's own (fk_jobkeys_generic) and the method's
 * (fk_method.keys). `fedkern job submit` (at the server) and `fedkern sim` refuse any
 * other key with the nearest known one, so a typo never runs a job on a default. */
#ifndef FK_JOBKEYS_H
#define FK_JOBKEYS_H

#include "common/base/params.h"
#include "common/methods/method.h"

/* The keys read by the round engine for every job type (method, dataset, clients, rounds,
 * seed, quorum, deadline, retries, max_refusals, name), NULL-terminated. */
extern const fk_param_doc fk_jobkeys_generic[];

enum {
    /* local.* keys the method documents are accepted: `fedkern sim` plays the clients too,
     * so it may give their consents; a job for the daemons never may (the clients' own
     * configs say them). */
    FK_JOBKEYS_LOCAL = 1,
};

/* FK_OK when every key of p is generic, in m->keys or in extra (may be NULL); else
 * FK_EINVAL naming each unknown key with the nearest known key, if one is close. A job type
 * that runs in one round (max_rounds 1) refuses `rounds` above 1 as well. */
FK_CHECKRETURN int fk_jobkeys_check(const fk_params *p, const fk_method *m,
                                    const fk_param_doc *extra, int flags, fk_err *err);

#endif
