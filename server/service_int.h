/* Internals of the Federation service, shared by its files (libuv's uv__ convention: the
 * fk__service_ names are not part of the server's interface):
 *   service.c          sessions, Join, PullTask, PushUpdate, Heartbeat, Leave, the commit batch,
 *                      the tick, init and shutdown;
 *   service_admin.c    the admin RPCs (SubmitJob, JobStatus, JobResult, ListJobs, CancelJob,
 *                      DeleteJob);
 *   service_predict.c  Predict: on the server (off the loop) or fanned out to the clients. */
#ifndef FK_SERVICE_INT_H
#define FK_SERVICE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/base/bundle.h"
#include "common/base/err.h"
#include "common/net/certs.h"
#include "common/net/chunk.h"
#include "common/net/codec.h"
#include "fedkern.pb.h"
#include "server/clients.h"
#include "server/fanout.h"
#include "server/offload.h"
#include "server/roster.h"
#include "server/service.h"

/* A PullTask call waiting for a task. */
typedef struct waiter {
    struct fk_service *s;
    fk_grpc_call *call; /* NULL once answered */
    char identity[FK_IDENTITY_CAP];
    int counted; /* in its client record's polls */
    uv_timer_t timer;
    struct waiter *next, **pprev; /* doubly linked: a drop is O(1), not a scan of the list */
} waiter;

/* A chunked update being reassembled. */
typedef struct partial {
    char update_id[64];
    char identity[FK_IDENTITY_CAP];
    int64_t job; /* the task it answers: dropped once that phase no longer waits for it */
    int round, attempt, phase;
    fk_reasm r;
    double touched;
} partial;

/* An update staged in the open batch transaction, answered after its commit. */
typedef struct staged {
    fk_grpc_call *call;
    fk_push p; /* blob unused; identity and idem are set to the copies below on use */
    char identity[FK_IDENTITY_CAP];
    char idem[128];
    int rc, dup; /* the stage's verdict, final only once the batch committed */
    fk_err err;
} staged;

struct fk_service {
    uv_loop_t *loop;
    fk_grpc_server *srv;
    fk_engine *e;
    fk_store *st;
    fk_service_config cfg;
    uv_timer_t tick;
    waiter *waiting;
    partial *partials;
    int n_partials;
    fk_clients clients;      /* by identity and session id; last_seen writes queued there */
    double sessions_checked; /* when expire_sessions last looked */
    uv_check_t batch_check;  /* commits the batch after the loop's I/O callbacks */
    uv_idle_t batch_idle;    /* keeps the next poll from blocking while a batch is open */
    staged *batch;           /* updates staged in the open transaction, arrival order */
    int n_batch, cap_batch;
    int batch_open;
    /* committed batches whose -wal fdatasync runs on libuv's pool (issue 35): answered, in
     * commit order, once a sync that began after their commit is done */
    staged *synced;       /* committed, waiting for the sync, commit order */
    uint64_t *synced_seq; /* the commit number of each */
    int n_synced, cap_synced;
    uint64_t commit_seq; /* batches committed */
    uv_work_t sync_req;
    int sync_busy;      /* a sync is in flight */
    uint64_t sync_upto; /* it covers the batches committed up to this number */
    int sync_rc;
    fk_err sync_err;
    char sync_path[512];
    /* the -wal's checkpoints on libuv's pool, with their own connection (NULL: SQLite's at
     * commit, on the loop, as for an in-memory store) */
    double engine_next; /* the engine's next deadline, from its last tick */
    fk_store *ckpt;
    uv_work_t ckpt_req;
    int ckpt_busy, ckpt_rc, ckpt_left;
    fk_err ckpt_err;
    fk_service_stats stats;
    int closing, handles; /* handles: timers not yet closed */
    uint64_t woken_gen;   /* engine generation the waiters were last matched against */
    fk_fanout *fo;        /* prediction requests waiting for the clients' answers */
    fk_roster *roster;    /* the data sets each client advertised at its last Join */
    uint64_t woken_fo_gen;
    fk_offload off; /* the engine's phase closes and the Predict calls, off the loop */
    void (*on_closed)(void *);
    void *closed_ud;
};

/* service.c: the calls' common steps (access, decoding, replies) */
const char *fk__service_identity_of(const fk_tls_peer *peer);
int fk__service_admin(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer);
int fk__service_job_access(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer, int64_t job);
void fk__service_reply_err(fk_grpc_call *call, int rc, const fk_err *err);
int fk__service_decode_req(fk_grpc_call *call, const pb_msgdesc_t *fields, void *msg,
                           const uint8_t *req, size_t len);
void fk__service_reply_msg(fk_service *s, fk_grpc_call *call, const pb_msgdesc_t *fields,
                           const void *msg);

/* service.c: tasks, waiters and the commit batch */
FK_CHECKRETURN int fk__service_payload_tx(const uint8_t *blob, size_t blen, size_t room,
                                          uint32_t chunk_index, fedkern_v1_Chunk *hdr, fk_bundle *b,
                                          fk_codec_tx *tx, fk_err *err);
void fk__service_wake_waiters(fk_service *s);
void fk__service_batch_flush(fk_service *s);
void fk__service_reply_push(fk_service *s, fk_grpc_call *call, int state, const uint32_t *missing,
                            size_t n_missing, const char *message);

/* service_predict.c */
void fk__service_predict_finish(fk_service *s, uint64_t id);
void fk__service_predict_answer(fk_service *s, fk_grpc_call *call, const char *identity,
                                const fedkern_v1_PushUpdateRequest *in, const fk_bundle *ans,
                                int64_t job);
void fk__service_on_predict(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                            size_t len, uint64_t deadline, void *ud);

/* service_admin.c */
int fk__service_job_status(fk_service *s, fk_grpc_call *call, const char *job_id, int64_t *job,
                           fk_job_status *st);
void fk__service_on_submit(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud);
void fk__service_on_status(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud);
void fk__service_on_result(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud);
void fk__service_on_list(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                         size_t len, uint64_t deadline, void *ud);
void fk__service_on_cancel(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud);
void fk__service_on_delete(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud);

#endif
