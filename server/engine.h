/* The round engine: every job as an event-driven state machine over the store.
 *
 * No network, no threads, no clock of its own: the server feeds it events
 * (submit, pull, push, tick) with the current time, and it calls the method
 * ops in the same order as the simulator (plan, task per client, aggregate),
 * so a daemon run and `fedkern sim` of the same job and seed agree.
 *
 * Durability: a push returns FK_OK only after the update is committed; a
 * round's close (its last phase, the method's checkpoint and the model) is one
 * transaction. fk_engine_open resumes every running job from the store:
 * checkpoint of the last closed round + the updates accepted since. */
#ifndef FK_ENGINE_H
#define FK_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/methods/jobconf.h"
#include "common/methods/method.h"
#include "server/store.h"

/* Bundle <-> bytes (the wire codec, also the on-disk format of blobs).
 * encode mallocs *out; decode fills an initialised bundle. */
typedef struct fk_blob_codec {
    int (*encode)(const fk_bundle *b, uint8_t **out, size_t *len, fk_err *err);
    int (*decode)(const uint8_t *buf, size_t len, fk_bundle *out, fk_err *err);
} fk_blob_codec;

typedef const fk_method *(*fk_method_lookup)(const char *name, fk_err *err);

/* A round that closed with an aggregate (what the server's metrics observe). */
typedef struct fk_round_event {
    int64_t job;
    const char *method;
    int round, participants, dropouts;
    double round_seconds; /* from the attempt's opening to its close (engine clock) */
    double agg_seconds;   /* in the method's aggregate op, for the round's last phase */
    double q[FK_REPORT_N_FIELDS]; /* the round's quality, as fk_report_fields; NaN: not measured */
    /* What each of the job's n_clients measured (fk_report_init: nothing), its identity, and
     * roles[k] (NULL, or every entry NULL: a training client; else e.g. "unseen", "target":
     * a client reported apart). Valid during the call. */
    const fk_report *clients;
    int n_clients;
    const char *const *identities;
    const char *const *roles;
} fk_round_event;

typedef struct fk_engine_opts {
    fk_store *store;           /* borrowed; outlives the engine */
    fk_blob_codec codec;
    fk_method_lookup find;     /* NULL: fk_method_find (the registry) */
    /* Optional: called after each round's close was committed. */
    void (*on_round)(void *ud, const fk_round_event *ev);
    void *on_round_ud;
    uint64_t max_update;       /* bytes of one client update the server accepts (0 = no
                                  limit known); every job gets it as FK_JOB_SERVER_MAX_UPDATE */
    uint64_t aggregate_memory; /* bytes a phase's updates may take in memory for a method
                                  that aggregates them all at once (no fold op): a job whose
                                  n_clients x max_update exceeds it is refused at submit;
                                  0 = no budget. Folding methods hold one update at a time. */
} fk_engine_opts;

typedef struct fk_engine fk_engine;

/* Open the engine and resume every running job found in the store. */
FK_CHECKRETURN int fk_engine_open(fk_engine **e, const fk_engine_opts *o, double now, fk_err *err);
void fk_engine_close(fk_engine *e);

/* Validate a job config (including the method's own server_init), store it
 * and start its first round. */
FK_CHECKRETURN int fk_engine_submit(fk_engine *e, const char *config, double now, int64_t *job,
                                    fk_err *err);
FK_CHECKRETURN int fk_engine_cancel(fk_engine *e, int64_t job, double now, fk_err *err);

/* A task handed to a client. Pointers stay valid until the next engine call. */
typedef struct fk_task_ref {
    int64_t job;
    int round, attempt, phase;
    int client;    /* index in the job */
    int n_clients;
    uint64_t seed;
    const char *method;
    const char *dataset;
    const char *config; /* the job's INI text: the client builds its method state from it */
    const uint8_t *task;
    size_t task_len;
    double deadline;
    char idem[96]; /* the idempotency id the update must carry */
} fk_task_ref;

/* The next task waiting for this client identity (lowest job id first):
 * FK_OK with *t filled, or FK_ENOTFOUND when there is none right now. */
FK_CHECKRETURN int fk_engine_pull(fk_engine *e, const char *identity, double now, fk_task_ref *t,
                                  fk_err *err);

typedef struct fk_push {
    int64_t job;
    int round, attempt, phase;
    const char *identity;
    const char *idem;
    const uint8_t *blob;
    size_t len;
    const fk_bundle *msg; /* blob decoded, when the caller has it (NULL: the engine decodes) */
    fk_report report;
    const uint8_t *sha256; /* SHA-256 of blob, when the caller has it (NULL: the engine hashes) */
    const struct fk_engine_check *check; /* the method's check_update, run off the loop by
                                          * the caller (NULL: the engine runs it) */
} fk_push;

/* The method's check_update of one update, off the loop (issue 35). On the loop,
 * fk_engine_check_begin pins the job when identity owes an update for exactly (job, round,
 * attempt, phase): until fk_engine_check_end the phase neither closes nor retries and the job
 * is not freed, so its method state stays as the check reads it. fk_engine_check_run (any
 * thread, one at a time with the engine's works) reads only the check and the method state.
 * A push carrying a check whose job state, position and client are still those of the stage
 * takes its verdict instead of calling check_update again; any other runs it on the loop, so
 * the outcome is the same either way. */
typedef struct fk_engine_check {
    void *j_; /* private: the pinned job */
    const fk_method *m;
    void *srv;
    int64_t job;
    int round, attempt, phase, client;
    int ran, rc; /* set by run */
    fk_err err;
} fk_engine_check;

/* 1 and pinned (c filled), or 0 when no such task is open now (nothing to end). */
int fk_engine_check_begin(fk_engine *e, int64_t job, int round, int attempt, int phase,
                          const char *identity, fk_engine_check *c);
void fk_engine_check_run(fk_engine_check *c, const fk_bundle *msg, const fk_report *report);
/* Unpin. 1 when the job's phase is complete now (a push, failure or departure came while it
 * was pinned): the caller closes its store transaction, then calls fk_engine_settle. */
int fk_engine_check_end(fk_engine *e, fk_engine_check *c);

/* Accept one update. FK_OK: committed, acknowledge it (*dup = FK_STORE_IDEM_SAME (1) for a
 * resend that was already counted; *dup = FK_STORE_IDEM_OTHER (2) when the update_id was used
 * before for other bytes: nothing stored, answer ABORTED). FK_ESTATE: late or not expected,
 * drop it.
 * FK_EFORMAT: undecodable. FK_EINVAL: refused by the report check or the method's
 * check_update (the message names the tensor and the reason): never stored, the client is a
 * dropout of the phase. FK_EIO: could not be stored; refuse, the client may resend later. */
FK_CHECKRETURN int fk_engine_push(fk_engine *e, const fk_push *p, double now, int *dup,
                                  fk_err *err);

/* fk_engine_push in two steps, so that several updates share one commit
 * (group commit). Stage: validate and insert the update inside the caller's
 * open store transaction (fk_store_begin); nothing changes in memory but a
 * refusal (FK_EINVAL: its client becomes a dropout of the phase, see
 * fk_engine_settle), and the results are those of fk_engine_push (a resend of an update staged in the same
 * transaction gives *dup = 1). After an FK_EIO or FK_ENOMEM the transaction may
 * be lost: roll it back. Apply: only once that transaction committed, count a
 * staged update that was not a duplicate (may close the phase and the round,
 * in their own transactions); never for a rolled-back one. */
FK_CHECKRETURN int fk_engine_push_stage(fk_engine *e, const fk_push *p, double now, int *dup,
                                        fk_err *err);
void fk_engine_push_apply(fk_engine *e, const fk_push *p, double now);
/* A stage that refused an update (FK_EINVAL: the report, or the method's check_update, named
 * the tensor and the reason) made its client a dropout of the phase in memory, nothing
 * stored; once the caller's transaction is over, this closes the phase if that completed it. */
void fk_engine_settle(fk_engine *e, int64_t job, double now);
/* The client cannot do its task for (job, round, attempt, phase) (e.g. its
 * method state is lost): it is not asked again in this phase and counts as a
 * dropout with `reason` logged; a phase whose other clients all answered
 * closes at once. FK_ESTATE: no such open task (late), as for a push. */
FK_CHECKRETURN int fk_engine_fail(fk_engine *e, const fk_push *p, const char *reason, double now,
                                  fk_err *err);

/* Ids of the running jobs that list identity, at most cap; -1 if there are more. */
int fk_engine_client_jobs(const fk_engine *e, const char *identity, int64_t *ids, int cap);

/* 1 if identity still owes an update for exactly (job, round, attempt, phase):
 * a client working on anything else should drop it (heartbeat cancel_task). */
int fk_engine_task_open(const fk_engine *e, int64_t job, int round, int attempt, int phase,
                        const char *identity);

/* Presence: gone(ud, identity) is 1 for a client whose session ended (Leave, or 3 heartbeat
 * intervals with no call, no byte received and no connection close) and who has not joined
 * again. A phase that opens makes such planned clients dropouts at once, so a round does not
 * wait its deadline for a client killed without a word; the plan itself (the method's, from
 * the seed) is unchanged, so a run where every client stays is the simulator's bit for bit. A
 * phase whose quorum needs a gone client still waits for it until the deadline. A gone role
 * client (the method's client_roles: dica/udica "unseen", fedrf-tca "target") is always waited
 * for until the deadline; if it is not back by then the job fails naming it and its role.
 * NULL (the default): every client counts as present. */
void fk_engine_set_presence(fk_engine *e, int (*gone)(void *ud, const char *identity), void *ud);
/* identity's session ended: its open tasks become dropouts now (a phase may close). */
void fk_engine_client_gone(fk_engine *e, const char *identity, double now);
/* identity joined again: the open tasks it dropped out of by going are its own again. */
void fk_engine_client_back(fk_engine *e, const char *identity);

/* Heavy work off the loop. A phase that closes hands its aggregation, the method's solves
 * and, for a round's last phase, the checkpoint and model encode to a work: the loop copies the
 * phase's stored updates, fk_engine_work_run (on any thread) decodes and aggregates them and
 * touches nothing but the job's method state and the work, and fk_engine_work_done (back on
 * the loop) writes the result to the store and opens the next phase or round. Until then the
 * job is busy: its tasks are not handed out, updates for the closing phase are late
 * (FK_ESTATE), deadlines wait, status and result answer from what is stored; every other job
 * goes on. submit(ud, w) hands w to a worker and returns FK_OK, or fails and the engine runs
 * the work at once (as it does with no offload set: tests, the simulator's order). The store is
 * written on the loop only. Runs of the same job are bit for bit those of the inline engine. */
typedef struct fk_engine_work fk_engine_work;
void fk_engine_set_offload(fk_engine *e, int (*submit)(void *ud, fk_engine_work *w), void *ud);
/* On the worker: the method ops of the work; touches only the work and its job's method state. */
void fk_engine_work_run(fk_engine_work *w);
/* On the loop, once fk_engine_work_run returned: store the result and go on; frees w. Commit
 * the caller's open store transaction first (the engine writes in its own). */
void fk_engine_work_done(fk_engine *e, fk_engine_work *w, double now);
/* Drop a work that will never be done (a crash in a test: the stored updates are closed again
 * by the next engine on the store); frees w. */
void fk_engine_work_abandon(fk_engine *e, fk_engine_work *w);
/* Works handed out and not yet done: fk_engine_close needs 0. */
int fk_engine_in_flight(const fk_engine *e);

/* Close phases whose deadline passed (with quorum) or retry/fail them.
 * *next gets the earliest pending deadline (INFINITY when nothing waits). */
FK_CHECKRETURN int fk_engine_tick(fk_engine *e, double now, double *next, fk_err *err);

typedef struct fk_job_status {
    int64_t job;
    char name[64];
    char method[64];
    int state; /* fk_job_state */
    int round, attempt, phase, rounds;
    int planned, answered, quorum; /* current phase (running jobs) */
    int n_clients;                 /* the clients the job's config names */
    double deadline;
    int aggregating;   /* its phase closed and is being aggregated (off the loop) */
    char failure[512]; /* why it failed; for a running job, which clients it excluded and why */
} fk_job_status;

FK_CHECKRETURN int fk_engine_status(fk_engine *e, int64_t job, fk_job_status *s, fk_err *err);
/* Latest model of a job (its round in *round, may be NULL); model initialised here. */
FK_CHECKRETURN int fk_engine_result(fk_engine *e, int64_t job, fk_bundle *model, int *round,
                                    fk_err *err);
/* Jobs running in memory. */
int fk_engine_running(const fk_engine *e);

/* Changes whenever new tasks were made (a phase or round opened): a server
 * needs to look for waiting clients only then. */
uint64_t fk_engine_generation(const fk_engine *e);

/* Counters since the engine opened (metrics). */
typedef struct fk_engine_stats {
    uint64_t rounds_closed, retries, participants, dropouts;
    uint64_t updates_refused;  /* by the report or method checks, or blamed for an aggregation */
    uint64_t clients_excluded; /* from a job after max_refusals refusals */
    double aggregation_seconds;
    /* Closing phases and rounds once their last update is in (aggregate, checkpoint, the next
     * round's plan and tasks): wall and thread CPU seconds, and the wall seconds of the store
     * commits among them (the fsync share). Per round: the round's overhead on the server. */
    uint64_t phase_ends;
    double end_seconds, end_cpu_seconds, end_commit_seconds;
    int jobs_stalled; /* running jobs waiting for the state store to take writes again */
    int in_flight;    /* phase closes being aggregated off the loop (fk_engine_set_offload) */
} fk_engine_stats;
void fk_engine_stats_get(const fk_engine *e, fk_engine_stats *out);

/* 1 while the engine holds the job in memory (running, or its last work still in flight). */
int fk_engine_has_job(const fk_engine *e, int64_t id);

#endif
