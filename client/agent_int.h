/* Internals of the client agent, shared by its files (fk__agent_*):
 *   agent.c          the connection, the calls and their completions, Join, Heartbeat, the
 *                    decision of the next call (fk__agent_next), start and stop
 *   agent_jobs.c     the method state of the jobs this client holds (in memory and in the
 *                    state dir: restore, reload after a restart, forget ended jobs)
 *   agent_task.c     a training task: PullTask (whole or chunked), the step on the thread
 *                    pool, the state file, PushUpdate (whole, chunked or a failure report)
 *   agent_predict.c  a prediction task (TASK_PREDICT) of a finished job and its answer
 * Everything runs on the loop thread but the two thread-pool functions (the step and the
 * prediction), which touch only their work item. */
#ifndef FK_AGENT_INT_H
#define FK_AGENT_INT_H

#include "client/agent.h"
#include "client/cstate.h"
#include "common/la/rng.h"
#include "common/net/chunk.h"
#include "common/net/grpc_client.h"
#include "fedkern.pb.h"

enum { FK__AGENT_MAX_JOBS = 8 };

/* Method state of one job on this client. */
typedef struct fk__agent_job {
    int64_t job;
    char *config;
    fk_params params;
    const fk_method *m;
    void *cli;
    int client, n_clients;
    uint8_t digest[32]; /* names the job in its state file */
    fk_cstate saved;    /* restored from disk: the update of the last step before the restart */
    int has_saved;
} fk__agent_job;

/* The task being fetched or run, then the update being sent. */
typedef struct fk__agent_work {
    int active;       /* a task is held (fetching, running or pushing) */
    char task_id[64]; /* "JOB.ATTEMPT" as the server sent it */
    int64_t job;
    uint32_t round, phase;
    fk_reasm reasm; /* chunked task */
    fk_bundle task;
    fk__agent_job *ctx;
    /* the step on the thread pool */
    int running, cancelled;
    uv_work_t req;
    int step_rc;
    fk_err step_err;
    fk_bundle update;
    fk_report report;
    double seconds;
    int save_rc; /* the state file could not be written */
    fk_err save_err;
    int from_disk; /* the update is the restored one: no step runs */
    /* the update */
    int ready; /* update encoded, not yet committed */
    char update_id[64];
    uint8_t *blob;
    size_t blob_len;
    int chunked;
    fk_chunker chunker;
    uint32_t next_chunk;
    int probe_first; /* after a reconnect: ask the server what it holds */
    int failure;     /* the update is a failure report: report.error, no payload */
    char error[256];
} fk__agent_work;

/* A prediction task of a finished job (TASK_PREDICT): one at a time, while the agent is
 * otherwise idle; answered from the job's kept method state, never stored. */
typedef struct fk__agent_pwork {
    int running, ready;
    uv_work_t req;
    fk__agent_job *ctx;
    int64_t job;
    uint64_t id;
    fk_bundle q, ans;
    int rc;
    fk_err err;
    double seconds;
} fk__agent_pwork;

struct fk_agent {
    uv_loop_t *loop;
    fk_agent_config cfg;
    fk_grpc_client *cl;
    uint64_t gen; /* connection generation: stale completions are ignored */
    int up, joined, in_flight, hb_in_flight;
    int leaving; /* the Leave call of a stop is in flight: the client closes after it */
    char client_id[128];
    char session_id[64];
    uint32_t heartbeat_ms, max_message;
    uv_timer_t retry, hb;
    unsigned backoff_n;
    unsigned fail_n; /* tasks failed in a row: the pause after a failure grows with it */
    fk_rng jitter;
    fk__agent_job *jobs[FK__AGENT_MAX_JOBS]; /* oldest first */
    int n_jobs;
    fk__agent_work w;
    fk__agent_pwork p;
    fk_agent_stats stats;
    int stopping, closing_client, handles;
    int reloaded; /* the held models of ended jobs were rebuilt from the state dir */
    void (*on_stopped)(void *);
    void *stopped_ud;
};

enum {
    FK__AGENT_CALL_JOIN,
    FK__AGENT_CALL_PULL,
    FK__AGENT_CALL_PUSH,
    FK__AGENT_CALL_HB,
    FK__AGENT_CALL_LEAVE
};

/* agent.c */
double fk__agent_mono(void);
/* Start a call of kind FK__AGENT_CALL_* (takes req): FK_OK when done will run. */
FK_CHECKRETURN int fk__agent_call(fk_agent *a, int kind, const char *method, uint8_t *req,
                                  size_t len, uint64_t timeout_ms, fk_grpc_done done, fk_err *err);
/* The common start of a completion: the agent if the caller should handle it, else NULL. */
fk_agent *fk__agent_completion(void *ud, int status, const char *msg);
void fk__agent_session_lost(fk_agent *a, const char *rpc);
void fk__agent_request_disconnect(fk_agent *a, const char *why);
/* Poll again after ms (the server's retry_after_ms). */
void fk__agent_retry_in(fk_agent *a, uint64_t ms);
void fk__agent_pause_polling(fk_agent *a);
void fk__agent_not_sent(fk_agent *a, const char *what, const fk_err *err);
/* Decide the next call on an idle connection. */
void fk__agent_next(fk_agent *a);
void fk__agent_maybe_finish_stop(fk_agent *a);

/* agent_jobs.c */
void fk__agent_job_free(fk__agent_job *j);
void fk__agent_remove_state(const char *dir, int64_t job);
/* The job's method state, made (or restored from the state dir) on first use; NULL and err
 * when it cannot be. */
fk__agent_job *fk__agent_job_context(fk_agent *a, int64_t job, const char *method,
                                     const char *config, fk_err *err);
void fk__agent_reload_held(fk_agent *a);
void fk__agent_forget_ended_jobs(fk_agent *a, const fedkern_v1_PullTaskResponse *out);

/* agent_task.c */
void fk__agent_work_reset(fk__agent_work *w);
void fk__agent_cancel_step(fk_agent *a);
void fk__agent_new_update_id(char *out, size_t cap);
/* PullTask: a new task (task_id NULL) or chunk `chunk` of the task being received. */
void fk__agent_send_pull(fk_agent *a, const char *task_id, uint32_t round, uint32_t phase,
                         uint32_t chunk);
void fk__agent_send_push(fk_agent *a);

/* agent_predict.c */
void fk__agent_pwork_reset(fk__agent_pwork *p);
/* Takes q. */
void fk__agent_start_predict(fk_agent *a, const fedkern_v1_PullTaskResponse *out, fk_bundle *q);
void fk__agent_send_predict_answer(fk_agent *a);

#endif
