/* Predictions served by the clients (kahm mode B): the pending prediction requests.
 *
 * A Predict call on a finished job whose models stay on its clients becomes one request:
 * the query batch, the job's model and the identities of the clients to ask. Each of those
 * clients gets the batch once, as a predict task on its next PullTask; its answer is checked
 * by the method (check_answer) before it is taken. The request completes when every asked
 * client answered (or said it cannot), or when its deadline passes; the method then combines
 * the answers it took (combine_answers: a silent client contributes nothing, the method
 * names what could not be scored). Requests live in memory only: they are short-lived and a
 * server restart fails the calls that wait on them.
 *
 * No network and no clock: the service feeds it events with the current time. */
#ifndef FK_FANOUT_H
#define FK_FANOUT_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/methods/method.h"

/* Most requests pending at once (each holds its queries and answers in memory). */
enum { FK_FANOUT_MAX_PENDING = 16 };

typedef struct fk_fanout fk_fanout;

FK_CHECKRETURN int fk_fanout_open(fk_fanout **f, fk_err *err);
/* Drops every pending request (their ud is not called back: the caller answers its calls). */
void fk_fanout_close(fk_fanout *f);

/* A request. m, config, model, queries and identities are copied; ud is the caller's (the
 * waiting call). FK_ELIMIT when FK_FANOUT_MAX_PENDING requests are pending. */
typedef struct fk_fanout_spec {
    int64_t job;
    const fk_method *m;
    const char *config;            /* the job's INI text (a client rebuilds its state from it) */
    const fk_bundle *model;        /* the job's model, as check_answer and combine read it */
    const fk_bundle *queries;      /* "X" */
    const char *const *identities; /* the job's clients, index = client index in the job */
    const int *ask;                /* 1 for each client to ask (holds models) */
    int n_clients;
    double deadline;               /* absolute, seconds */
    void *ud;
} fk_fanout_spec;

FK_CHECKRETURN int fk_fanout_start(fk_fanout *f, const fk_fanout_spec *s, uint64_t *id,
                                   fk_err *err);

/* A predict task handed to a client; pointers valid until the next fk_fanout call. */
typedef struct fk_fanout_task {
    uint64_t id;
    int64_t job;
    int client;
    const char *method;
    const char *config;
    const uint8_t *queries; /* the encoded queries bundle */
    size_t queries_len;
} fk_fanout_task;

/* The oldest request that still waits for identity's answer and was not yet handed to it:
 * FK_OK (now handed out), or FK_ENOTFOUND. enc encodes the queries (once per request). */
FK_CHECKRETURN int fk_fanout_pull(fk_fanout *f, const char *identity,
                                  int (*enc)(const fk_bundle *b, uint8_t **out, size_t *len,
                                             fk_err *err),
                                  fk_fanout_task *t, fk_err *err);

/* identity's answer to request id (ans NULL: the client said it cannot answer).
 * FK_OK: taken (or the failure noted); *complete = 1 when every asked client is done.
 * FK_ESTATE: no such request, or identity was not asked or already answered (drop it).
 * FK_EINVAL: refused by check_answer (the message says why); the client counts as silent. */
FK_CHECKRETURN int fk_fanout_answer(fk_fanout *f, uint64_t id, const char *identity,
                                    const fk_bundle *ans, int *complete, fk_err *err);

/* The id of a request that is complete or whose deadline passed at `now` (FK_ENOTFOUND if
 * none); *next gets the earliest pending deadline (INFINITY when nothing waits). */
FK_CHECKRETURN int fk_fanout_due(fk_fanout *f, double now, uint64_t *id, double *next);

/* Remove request id and combine the answers taken into out (initialised by the caller):
 * the method's combine_answers result. *ud gets the request's ud (NULL if there is no such
 * request), *job its job, *answered and *asked the counts. The request is gone even when
 * the combine fails. */
FK_CHECKRETURN int fk_fanout_finish(fk_fanout *f, uint64_t id, fk_bundle *out, void **ud,
                                    int64_t *job, int *answered, int *asked, fk_err *err);

/* The request whose ud is ud: FK_OK with *id, or FK_ENOTFOUND. */
FK_CHECKRETURN int fk_fanout_find_ud(const fk_fanout *f, const void *ud, uint64_t *id);

/* Remove request id without an answer (its call was cancelled); *ud as above. */
void fk_fanout_drop(fk_fanout *f, uint64_t id, void **ud);

/* Changes whenever a request starts: the service looks for waiting clients only then. */
uint64_t fk_fanout_generation(const fk_fanout *f);
int fk_fanout_pending(const fk_fanout *f);

#endif
