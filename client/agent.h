/* The client agent: one connection to the server, driven by the libuv loop.
 *
 * Joins, long-polls PullTask, runs the method's local_step on the thread pool
 * (heartbeats go on meanwhile), pushes the update (chunked when it does not
 * fit one message) and goes back to polling. On any network failure it drops
 * the connection and reconnects after an exponential backoff with full jitter
 * (capped); a pending update is kept and resent with the same update id, a
 * chunked one resumes from the chunks the server still misses (probe), so an
 * update is never counted twice. */
#ifndef FK_AGENT_H
#define FK_AGENT_H

#include <stdint.h>
#include <uv.h>

#include "common/data/dataset.h"
#include "common/methods/method.h"
#include "common/net/limits.h"
#include "common/net/tls.h"

/* The local data set the client holds under a job's dataset name (borrowed). */
typedef const fk_dataset *(*fk_agent_data_fn)(void *ud, const char *dataset, fk_err *err);
typedef const fk_method *(*fk_agent_method_fn)(const char *name, fk_err *err);

/* Most data sets a client declares and advertises at Join. */
enum { FK_AGENT_MAX_DATASETS = 16 };

/* A data set the client holds, as it advertises it when joining. */
typedef struct fk_agent_dataset {
    const char *name; /* the jobs' 'dataset' key */
    uint64_t rows, cols;
    uint32_t classes; /* 0: unlabelled */
    /* The preprocessing its loader applied (reported at Join, recorded in the model):
     * prep_listed set: n_prep steps (fk_prep_step codes), then the affine map when
     * affine_d > 0 (borrowed, affine_d values each). */
    int prep_listed;
    int n_prep;
    int prep[8];
    size_t affine_d;
    const double *affine_shift, *affine_scale;
} fk_agent_dataset;

typedef struct fk_agent_config {
    const char *host;        /* server address: IPv4/IPv6 literal or DNS name */
    int port;
    const char *server_name; /* expected in the server certificate's SAN */
    fk_tls_ctx *tls;         /* client context (borrowed; the agent takes a reference) */
    fk_net_limits limits;
    fk_agent_method_fn find;   /* NULL: the method registry */
    fk_agent_data_fn data;
    void *data_ud;
    /* What to advertise at Join (borrowed; at most FK_AGENT_MAX_DATASETS) when
     * datasets_listed is set: the server then refuses jobs naming a data set this client
     * lacks. Unset: the server does not know what the client holds (checks nothing). */
    const fk_agent_dataset *datasets;
    int n_datasets;
    int datasets_listed;
    uint64_t backoff_min_ms; /* first reconnect delay bound (default 200) */
    uint64_t backoff_max_ms; /* cap (default 15000) */
    uint64_t poll_ms;        /* PullTask deadline (default 20000) */
    uint64_t call_ms;        /* deadline of the other calls (default 30000) */
    /* Directory for the jobs' client-side method state (client/cstate.h), so a
     * restarted client continues its jobs; NULL: kept in memory only. */
    const char *state_dir;
    /* The client's own settings for methods (its config's [local] section: "local.KEY"),
     * e.g. consent to upload raw rows; copied into every job's parameters, where the
     * server cannot set them (a job config with a local.* key is refused). NULL: none. */
    const fk_params *local;
} fk_agent_config;

typedef struct fk_agent_stats {
    uint64_t connects, joins, tasks, steps, pushes, committed, duplicates, stale, chunks_sent;
    uint64_t reconnects, heartbeats, cancelled;
    int joined; /* 1 while the client holds a session */
    /* the latest step (metrics): its job, job type, round, wall time and what it reported */
    int64_t last_job;     /* 0: no step yet */
    char last_method[32];
    uint32_t last_round;
    double last_seconds, step_seconds_total;
    fk_report last_report;
} fk_agent_stats;

typedef struct fk_agent fk_agent;

FK_CHECKRETURN int fk_agent_start(fk_agent **out, uv_loop_t *loop, const fk_agent_config *cfg,
                                  fk_err *err);
/* Abandon the step in progress (its result is not sent), Leave, close; on_stopped
 * runs once everything is released, after which the agent is freed. */
void fk_agent_stop(fk_agent *a, void (*on_stopped)(void *ud), void *ud);
void fk_agent_stats_get(const fk_agent *a, fk_agent_stats *out);

/* Add the client's own local.* settings to a job's parameters; FK_EINVAL when the job itself
 * sets a local.* key (a server must not speak for the client, e.g. consent to raw uploads). */
FK_CHECKRETURN int fk_agent_local_params(fk_params *job_params, const fk_params *local, int64_t job,
                          fk_err *err);

/* Every local.* key a client may set (its config's [local] section or --local.KEY flags),
 * NULL-terminated: the union of the local.* keys of the registered job types. Any other
 * local.* key is a usage error (exit 2) with the nearest of these: a misspelt consent or cap
 * must never start a client on the default. */
extern const fk_param_doc fk_agent_local_docs[];

#endif
