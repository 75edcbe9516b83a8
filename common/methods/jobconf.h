/* Job configuration: one INI text per job (what `fedkern job submit` sends).
 *
 * The keys below are read by the round engine; every key, these included, is
 * also handed to the method's server_init/client_init unchanged, so the same
 * file drives `fedkern sim` and a daemon run. */
#ifndef FK_JOBCONF_H
#define FK_JOBCONF_H

#include <stdint.h>

#include "common/base/params.h"
#include "common/methods/method.h"

/* Most clients one job may list, ranges expanded (parse fails with FK_ELIMIT beyond):
 * bounds the memory and time a submitted config can cost the server. */
enum { FK_JOBCONF_MAX_CLIENTS = 100000 };

typedef struct fk_jobconf {
    char method[64];   /* method = fedrf-tca            (required) */
    char dataset[64];  /* dataset = NAME the clients hold (required) */
    char name[64];     /* name = label for humans        (default: the method) */
    int rounds;        /* rounds = R       (default 10; fk_jobconf_set_method: the method's) */
    uint64_t seed;     /* seed = S                        (default 1) */
    double quorum;     /* quorum = fraction of a phase's planned clients needed at the deadline (0.5) */
    double deadline;   /* deadline = seconds a phase waits for its clients (60) */
    int retries;       /* retries = new samples tried for a round that misses its quorum (3) */
    int max_refusals;  /* max_refusals = refused updates after which a client is left out of
                        * the job's later phases (3; 0 = never) */
    char **clients;    /* clients = id1, id2, site[0-99], ...: certificate identities; index = position */
    int n_clients;
    int cap_clients;   /* allocated entries of clients */
    struct fk_jobconf_slot *sorted; /* identities by name, for duplicates and lookups */
    fk_params params;  /* every key, for the method */
} fk_jobconf;

/* Parse and validate; errors name origin and key. c is zeroed first and must
 * be closed even on failure. */
FK_CHECKRETURN int fk_jobconf_parse(fk_jobconf *c, const char *text, const char *origin,
                                    fk_err *err);
void fk_jobconf_close(fk_jobconf *c);
/* Only the `clients` list (ranges expanded, duplicates refused) into a zeroed c, as
 * fk_jobconf_parse reads it: for `fedkern sim --job`, which needs no dataset. */
FK_CHECKRETURN int fk_jobconf_parse_clients(fk_jobconf *c, const char *list, const char *origin,
                                            fk_err *err);
/* Once the job's method is known: a config without `rounds` gets the method's budget
 * (fk_method_default_rounds), e.g. as many rounds as pooled-em can need. */
void fk_jobconf_set_method(fk_jobconf *c, const fk_method *m);

/* Updates needed to close a phase of `planned` clients at its deadline (>= 1). */
int fk_jobconf_quorum(const fk_jobconf *c, int planned);
/* Client index of a certificate identity, or -1 if it is not in the job. */
int fk_jobconf_client_index(const fk_jobconf *c, const char *identity);
/* Identities are 1..127 characters of [A-Za-z0-9._@:-]. */
int fk_identity_valid(const char *identity);

#endif
