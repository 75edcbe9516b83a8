/* The Federation service: gRPC handlers (fedkern.v1.Federation + grpc.health.v1)
 * that turn calls into round-engine events on the libuv loop.
 *
 * PullTask is a long poll: a call with no task waiting is parked and answered
 * as soon as the engine has a task for that client, or shortly before the
 * call's deadline with TASK_NONE. PushUpdate answers UPDATE_COMMITTED only
 * after the engine committed the update: the updates of one loop iteration are
 * staged in one transaction and answered after its one commit (group commit,
 * counted in fk_service_stats.batches); chunked updates are reassembled in
 * memory (a probe after a reconnect lists the missing chunks). Admin calls
 * (SubmitJob, JobStatus, JobResult, CancelJob) need an identity listed as
 * admin; every other call an identity on the allow-list (when one is set). */
#ifndef FK_SERVICE_H
#define FK_SERVICE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/net/grpc_server.h"
#include "server/engine.h"
#include "server/store.h"

/* Default of fk_service_config.reasm_limit: the largest update the server reassembles from
 * chunks, and so the largest a client may send (the engine tells jobs; fk_engine_opts). */
#define FK_SERVICE_REASM_DEFAULT ((size_t)1 << 30)
/* Defaults of the caps on what partial (chunked, not yet complete) uploads hold: of one
 * client (its largest update must fit) and of all clients together. */
#define FK_SERVICE_PARTIAL_CLIENT_DEFAULT ((size_t)1 << 30)
#define FK_SERVICE_PARTIAL_TOTAL_DEFAULT ((size_t)2 << 30)

/* Default of fk_service_config.stage_min: below it a hop to a worker costs more than it saves. */
#define FK_SERVICE_STAGE_MIN_DEFAULT ((size_t)64 << 10)

/* Query rows one Predict call may carry, for every job type (RESOURCE_EXHAUSTED beyond). */
#define FK_PREDICT_MAX_QUERIES 100000

typedef struct fk_service_config {
    char **allow;  /* client identities allowed; n_allow == 0 lets any CA-signed client in */
    int n_allow;
    char **admins; /* identities allowed to call the admin RPCs */
    int n_admins;
    uint32_t heartbeat_ms;  /* interval clients are told to use (default 5000) */
    uint32_t max_message;   /* bytes of one gRPC message (the server's net limit) */
    uint64_t poll_max_ms;   /* longest a PullTask waits when the call has no deadline (30000) */
    uint64_t poll_margin_ms;/* answer a waiting PullTask this long before its deadline (300) */
    uint64_t tick_ms;       /* how often deadlines are checked (200) */
    size_t reasm_limit;     /* bytes one chunked update may hold (FK_SERVICE_REASM_DEFAULT) */
    /* Chunked uploads are reassembled only for a task the sender owes in an open phase, in
     * memory that grows with the chunks received; these cap the bytes they hold. */
    size_t partial_client_limit; /* of one client (FK_SERVICE_PARTIAL_CLIENT_DEFAULT) */
    size_t partial_total_limit;  /* of all clients (FK_SERVICE_PARTIAL_TOTAL_DEFAULT) */
    /* the job types submit checks look up (the clients a type needs connected); NULL: the
     * registry (fk_method_find), as the engine's fk_engine_opts.find */
    fk_method_lookup find;
    /* PushUpdate requests (and chunked updates once complete) from this many bytes are
     * decoded, hashed and checked off the loop (issue 35); 0: FK_SERVICE_STAGE_MIN_DEFAULT */
    size_t stage_min;
} fk_service_config;

typedef struct fk_service fk_service;

/* Counters for metrics and tests. */
typedef struct fk_service_stats {
    uint64_t joins, pulls, tasks_sent, pushes, committed, duplicates, stale, refused;
    uint64_t bytes_in, bytes_out;
    uint64_t batches, batch_failures; /* update transactions (group commits), rolled back ones */
    int waiting_polls;
    int sessions; /* clients joined (one session each) */
    /* Predict calls answered from the model at the server / from the clients' answers (mode
     * B), refused or failed, the queries they answered, and the mode-B holders that did not
     * answer in time and the classes left unscored, summed over the calls. */
    uint64_t predict_server, predict_clients, predict_failed, predict_queries;
    uint64_t predict_missing_clients, predict_unscored_classes;
    size_t index_bytes; /* the client index (by identity and session id) */
    int seen_queued;    /* last_seen writes waiting for the next tick's transaction */
    uint64_t heartbeats, health; /* Heartbeat and health Check calls answered */
    uint64_t leaves;             /* Leave calls (each ends its client's session at once) */
    uint64_t expired;            /* sessions ended for silence (no call, no byte) */
    /* Work off the loop (phase closes, predictions): waiting or running, done, seconds run
     * on the worker and waited for it. */
    uint64_t uploads_offloaded; /* PushUpdate steps (decode, encode, SHA-256, check) handed to
                                 * the offload (issue 35) */
    int works_pending;
    uint64_t works_done;
    double work_seconds, work_wait_seconds;
    uint64_t wakes;      /* times new tasks were matched against the parked polls */
    double wake_seconds; /* wall time of those (encoding and sending the tasks included) */
} fk_service_stats;

/* Register the handlers on srv (not yet listening) and start the tick timer. */
FK_CHECKRETURN int fk_service_init(fk_service **out, uv_loop_t *loop, fk_grpc_server *srv,
                                   fk_engine *e, fk_store *st, const fk_service_config *cfg,
                                   fk_err *err);
/* Answer parked polls (TASK_NONE), stop timers; on_closed runs once all is released. */
void fk_service_close(fk_service *s, void (*on_closed)(void *ud), void *ud);
/* Free after on_closed ran. */
void fk_service_free(fk_service *s);
void fk_service_stats_get(const fk_service *s, fk_service_stats *out);

/* Wall-clock seconds (deadlines are stored, so they must survive restarts). */
double fk_service_now(void);

/* "ID.ATTEMPT" task ids on the wire -> numbers. */
int fk_task_id_parse(const char *s, int64_t *job, int *attempt);

#endif
