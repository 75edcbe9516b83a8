/* What each client holds: the data sets it advertised when it last joined (fedkern.v1
 * JoinRequest.datasets), kept in memory per certificate identity, and the check of a
 * submitted job against it. A client that joined without the list (an old client) is
 * "unknown holdings": nothing is checked for it. The service also stores every Join's list
 * (fk_store_roster_put) and loads them at start, so a restarted server checks submits against
 * what the clients last advertised, before they rejoin. */
#ifndef FK_ROSTER_H
#define FK_ROSTER_H

#include <stdint.h>

#include "common/base/bundle.h"
#include "common/data/prep_model.h"
#include "common/methods/jobconf.h"

typedef struct fk_roster_set {
    char name[64];
    uint64_t rows, cols;
    uint32_t classes;
    /* The preprocessing the client reported for it (known 0: not reported, e.g. an old
     * client, or loaded from the store, which does not keep it: known again at the next
     * Join). fk_roster_join copies the map; the roster owns its copy. */
    fk_prep_record prep;
} fk_roster_set;

typedef struct fk_roster fk_roster;

FK_CHECKRETURN int fk_roster_new(fk_roster **out);
void fk_roster_free(fk_roster *r);

/* Record a Join: listed = 0 forgets what the client held (unknown); otherwise sets[0..n)
 * replace its list. FK_ENOMEM leaves the roster as it was. */
FK_CHECKRETURN int fk_roster_join(fk_roster *r, const char *identity, int listed,
                                  const fk_roster_set *sets, int n);

/* 1 if identity's recorded holdings are exactly (listed, sets[0..n)): a Join that changes
 * nothing, which need not be stored again. */
int fk_roster_same(const fk_roster *r, const char *identity, int listed, const fk_roster_set *sets,
                   int n);

/* 1 if identity joined since the server started or is in the stored roster (listed or not). */
int fk_roster_seen(const fk_roster *r, const char *identity);

/* Whether the server has ever seen identity (e.g. in its store), for clients that have not
 * rejoined since a restart. */
typedef int (*fk_roster_known_fn)(void *ud, const char *identity);

/* FK_EINVAL, one message naming every offending client (the first few of each kind), when
 * the job lists clients unknown to the server (neither joined nor known(ud, id)), clients
 * that advertised their data sets without the job's, or holders whose column counts differ.
 * known may be NULL (only joins count). */
FK_CHECKRETURN int fk_roster_check(const fk_roster *r, const fk_jobconf *job,
                                   fk_roster_known_fn known, void *ud, fk_err *err);

/* Add to model m what the job's clients reported of their preprocessing of job->dataset
 * (common/data/prep_model.h): nothing when a client's is unknown (*unknown, if not NULL,
 * then names the first such client; else ""). FK_ENOMEM, FK_EINVAL (maps that disagree in
 * width). */
FK_CHECKRETURN int fk_roster_model_prep(const fk_roster *r, const fk_jobconf *job, fk_bundle *m,
                                        const char **unknown, fk_err *err);

#endif
