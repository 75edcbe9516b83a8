#include "server/service.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"
#include "common/methods/jobconf.h"
#include "common/methods/method.h"
#include "common/net/certs.h"
#include "common/net/chunk.h"
#include "common/net/codec.h"
#include "fedkern.pb.h"
#include "health.pb.h"
#include "server/clients.h"
#include "server/fanout.h"
#include "server/offload.h"
#include "server/owners.h"
#include "server/roster.h"

#define FED "/fedkern.v1.Federation/"

/* Predict timeouts when the clients answer (PredictRequest.timeout_ms). */
enum { PREDICT_DEFAULT_MS = 5000, PREDICT_MAX_MS = 600000 };

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
    fk_clients clients; /* by identity and session id; last_seen writes queued there */
    double sessions_checked; /* when expire_sessions last looked */
    uv_check_t batch_check; /* commits the batch after the loop's I/O callbacks */
    uv_idle_t batch_idle;   /* keeps the next poll from blocking while a batch is open */
    staged *batch;          /* updates staged in the open transaction, arrival order */
    int n_batch, cap_batch;
    int batch_open;
    /* committed batches whose -wal fdatasync runs on libuv's pool (issue 35): answered, in
     * commit order, once a sync that began after their commit is done */
    staged *synced;         /* committed, waiting for the sync, commit order */
    uint64_t *synced_seq;   /* the commit number of each */
    int n_synced, cap_synced;
    uint64_t commit_seq;    /* batches committed */
    uv_work_t sync_req;
    int sync_busy;          /* a sync is in flight */
    uint64_t sync_upto;     /* it covers the batches committed up to this number */
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

double fk_service_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void fk_task_id_format(char *out, size_t cap, int64_t job, int attempt)
{
    snprintf(out, cap, "%" PRId64 ".%d", job, attempt);
}

int fk_task_id_parse(const char *s, int64_t *job, int *attempt)
{
    char *end;
    long long j = strtoll(s, &end, 10);
    if (end == s || j <= 0)
        return FK_EINVAL;
    long a = 0;
    if (*end == '.') {
        const char *p = end + 1;
        a = strtol(p, &end, 10);
        if (end == p || a < 0 || a > 1000000)
            return FK_EINVAL;
    }
    if (*end)
        return FK_EINVAL;
    *job = j;
    *attempt = (int)a;
    return FK_OK;
}

/* ------------------------------------------------------------ helpers */

static int listed(char **list, int n, const char *id)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(list[i], id))
            return 1;
    return 0;
}

/* The fedkern identity: NAME of the certificate's urn:fedkern:ROLE:NAME SAN. */
static const char *identity_of(const fk_tls_peer *peer)
{
    return peer->id;
}

/* The caller may use the Federation calls: a client certificate, on the
 * allow-list when one is set. */
static int allowed(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer)
{
    const char *id = identity_of(peer);
    if (peer->role != FK_ROLE_CLIENT || !*id) {
        fk_log(FK_LOG_WARN, "client_refused", "peer=%s cn=%s path=%s reason=not_a_client_certificate",
               peer->addr, peer->cn, fk_grpc_call_method(call));
        s->stats.refused++;
        fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED,
                           "this call needs a client certificate (fedkern certs issue --client NAME)",
                           NULL, 0);
        return 0;
    }
    if (s->cfg.n_allow > 0 && !listed(s->cfg.allow, s->cfg.n_allow, id)) {
        fk_log(FK_LOG_WARN, "client_refused", "identity=\"%s\" peer=%s path=%s reason=not_allowed",
               id, peer->addr, fk_grpc_call_method(call));
        s->stats.refused++;
        fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED,
                           "this client identity is not on the server's allow-list", NULL, 0);
        return 0;
    }
    return 1;
}

/* Admin calls: an admin certificate, listed in 'admins' when that is set. */
static int admin(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer)
{
    const char *id = identity_of(peer);
    if (peer->role != FK_ROLE_ADMIN || !*id ||
        fk_owners_role(s->cfg.admins, s->cfg.n_admins, id) == FK_ADMIN_NONE) {
        fk_log(FK_LOG_WARN, "admin_refused", "identity=\"%s\" peer=%s path=%s", id, peer->addr,
               fk_grpc_call_method(call));
        fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED,
                           "admin calls need an admin certificate (fedkern certs issue --admin "
                           "NAME) allowed by the server's 'admins'",
                           NULL, 0);
        return 0;
    }
    return 1;
}

/* The job's owner or an operator (server/owners.h); 0 = answered PERMISSION_DENIED. A job
 * the store cannot read is left to the call, which answers why. */
static int job_access(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer, int64_t job)
{
    const char *id = identity_of(peer);
    int role = fk_owners_role(s->cfg.admins, s->cfg.n_admins, id);
    if (role == FK_ADMIN_OPERATOR)
        return 1;
    fk_store_job row;
    fk_err err;
    if (fk_store_job_get(s->st, job, &row, &err) != FK_OK)
        return 1;
    char owner[256];
    fk_owners_of(row.config, owner, sizeof owner);
    fk_store_job_free(&row);
    if (fk_owners_may(role, owner, id))
        return 1;
    fk_log(FK_LOG_WARN, "admin_refused", "identity=\"%s\" peer=%s path=%s job=%" PRId64
           " reason=not_owner", id, peer->addr, fk_grpc_call_method(call), job);
    char msg[200];
    snprintf(msg, sizeof msg,
             "job %" PRId64 " belongs to another admin: only its owner or an operator "
             "(server option admins = NAME:operator) may use it",
             job);
    fk_grpc_call_reply(call, FK_GRPC_PERMISSION_DENIED, msg, NULL, 0);
    return 0;
}

static int status_of(int rc)
{
    switch (rc) {
    case FK_EINVAL:
    case FK_EFORMAT:
        return FK_GRPC_INVALID_ARGUMENT;
    case FK_ENOTFOUND:
        return FK_GRPC_NOT_FOUND;
    case FK_ESTATE:
        return FK_GRPC_FAILED_PRECONDITION;
    case FK_ELIMIT:
    case FK_ENOMEM:
        return FK_GRPC_RESOURCE_EXHAUSTED;
    case FK_EIO:
        return FK_GRPC_UNAVAILABLE;
    default:
        return FK_GRPC_INTERNAL;
    }
}

static void reply_err(fk_grpc_call *call, int rc, const fk_err *err)
{
    fk_grpc_call_reply(call, status_of(rc), err->msg, NULL, 0);
}

/* Decode the request into msg: FK_OK, or the decoder's code after answering the call with it
 * (the convention of fk_codec_decode). */
static int decode_req(fk_grpc_call *call, const pb_msgdesc_t *fields, void *msg,
                      const uint8_t *req, size_t len)
{
    fk_err err = {0};
    int rc = fk_codec_decode(fields, msg, req, len, &err);
    if (rc)
        reply_err(call, rc, &err);
    return rc;
}

/* Encode msg and send it (the buffer moves to the server). */
static void reply_msg(fk_service *s, fk_grpc_call *call, const pb_msgdesc_t *fields,
                      const void *msg)
{
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    int rc = fk_codec_encode(fields, msg, 0, &buf, &len, &err);
    if (rc) {
        reply_err(call, rc, &err);
        return;
    }
    s->stats.bytes_out += len;
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, len, free);
}

/* Seconds between two stored last_seen of one heartbeating client. */
#define SEEN_WRITE_S 30.0

/* Queue the client's last_seen write; the service tick stores the queue in one transaction
 * (one fsync a tick, not one a client: a reconnect storm of 10,000 Joins was 10,000). */
static void note_seen(fk_service *s, fk_client_rec *r, int force)
{
    fk_clients_mark(&s->clients, r, fk_service_now(), SEEN_WRITE_S, force);
}

/* Store the queued last_seen values (service tick and close). A failure is logged and the
 * queue kept for the next tick. */
static void seen_flush(fk_service *s)
{
    fk_clients *c = &s->clients;
    if (c->n_queue == 0)
        return;
    fk_err err = {0};
    int own = !s->batch_open; /* an open update batch takes the writes along */
    int rc = own ? fk_store_begin(s->st, &err) : FK_OK;
    for (int i = 0; i < c->n_queue && !rc; i++) {
        fk_client_rec *r = fk_clients_queued(c, i);
        rc = fk_store_client_seen(s->st, r->identity, r->seen, &err);
    }
    if (own && !rc)
        rc = fk_store_commit(s->st, &err); /* rolls back on failure */
    else if (own)
        fk_store_rollback(s->st);
    if (rc)
        fk_log(FK_LOG_WARN, "client_seen_not_stored", "clients=%d error=\"%s\"", c->n_queue,
               err.msg);
    fk_clients_queue_done(c, rc == FK_OK);
}

/* --------------------------------------------------------- long polls */

static void handle_gone(fk_service *s)
{
    if (--s->handles == 0 && s->closing && s->on_closed)
        s->on_closed(s->closed_ud);
}

static void waiter_closed(uv_handle_t *h)
{
    waiter *w = h->data;
    fk_service *s = w->s;
    free(w);
    handle_gone(s);
}

/* Unlink w and release its timer (the call must already be answered). */
static void waiter_drop(fk_service *s, waiter *w)
{
    *w->pprev = w->next;
    if (w->next)
        w->next->pprev = w->pprev;
    fk_client_rec *r = w->counted ? fk_clients_find(&s->clients, w->identity) : NULL;
    if (r && r->polls > 0)
        r->polls--;
    s->stats.waiting_polls--;
    FK_UV_MUST(uv_timer_stop(&w->timer));
    uv_close((uv_handle_t *)&w->timer, waiter_closed);
}

/* identity (may be NULL): list its running jobs, so it can drop the state of the others. */
static void reply_no_task(fk_service *s, fk_grpc_call *call, const char *identity,
                          uint32_t retry_ms)
{
    fedkern_v1_PullTaskResponse msg = fedkern_v1_PullTaskResponse_init_zero;
    msg.kind = fedkern_v1_TaskKind_TASK_NONE;
    msg.retry_after_ms = retry_ms;
    enum { CAP = sizeof msg.running_jobs / sizeof msg.running_jobs[0] };
    int64_t ids[CAP];
    int n = identity ? fk_engine_client_jobs(s->e, identity, ids, CAP) : -1;
    if (n >= 0) {
        msg.running_jobs_listed = true;
        msg.running_jobs_count = (pb_size_t)n;
        for (int i = 0; i < n; i++)
            snprintf(msg.running_jobs[i], sizeof msg.running_jobs[i], "%" PRId64, ids[i]);
    }
    reply_msg(s, call, fedkern_v1_PullTaskResponse_fields, &msg);
}

/* What a response carries of an encoded bundle: the bundle inline when it fits
 * room and chunk 0 is asked for, else chunk chunk_index of it (header in *hdr). */
FK_CHECKRETURN static int payload_tx(const uint8_t *blob, size_t blen, size_t room, uint32_t chunk_index,
                      fedkern_v1_Chunk *hdr, fk_bundle *b, fk_codec_tx *tx, fk_err *err)
{
    if (blen <= room && chunk_index == 0) {
        tx->bundle = b;
        return fk_codec_bundle_decode(blob, blen, b, err);
    }
    fk_chunker ch;
    const uint8_t *data = NULL;
    size_t len = 0;
    int rc = fk_chunker_init(&ch, blob, blen, room, err);
    if (!rc)
        rc = fk_chunker_get(&ch, chunk_index, hdr, &data, &len, err);
    tx->chunk_data = data;
    tx->chunk_len = len;
    return rc;
}

/* Answer with the task (inline bundle, or its first chunk when too large). */
static void reply_task(fk_service *s, fk_grpc_call *call, const fk_task_ref *t,
                       uint32_t chunk_index)
{
    fedkern_v1_PullTaskResponse msg = fedkern_v1_PullTaskResponse_init_zero;
    msg.kind = fedkern_v1_TaskKind_TASK_RUN;
    fk_task_id_format(msg.job_id, sizeof msg.job_id, t->job, t->attempt);
    snprintf(msg.method, sizeof msg.method, "%.31s", t->method);
    msg.round = (uint32_t)t->round;
    msg.phase = (uint32_t)t->phase;
    msg.params = (char *)t->config;
    size_t extra = strlen(t->config);
    size_t room = fk_chunk_data_max(s->cfg.max_message, extra);
    fk_codec_tx tx = {0};
    fk_bundle b;
    fk_bundle_init(&b);
    fk_err err = {0};
    int rc = payload_tx(t->task, t->task_len, room, chunk_index, &msg.chunk, &b, &tx, &err);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!rc)
        rc = fk_codec_encode_pull_task_response(&msg, &tx, 0, &buf, &len, &err);
    fk_bundle_close(&b);
    if (rc) {
        fk_log(FK_LOG_ERROR, "task_not_sent", "job=%" PRId64 " error=\"%s\"", t->job, err.msg);
        reply_err(call, rc, &err);
        return;
    }
    s->stats.tasks_sent++;
    s->stats.bytes_out += len;
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, len, free);
}

FK_CHECKRETURN static int encode_queries(const fk_bundle *b, uint8_t **out, size_t *len, fk_err *err)
{
    return fk_codec_bundle_encode(b, out, len, err);
}

/* A predict task for identity, if a prediction request waits for it: answered on call. */
static int reply_predict_task(fk_service *s, fk_grpc_call *call, const char *identity)
{
    fk_fanout_task t;
    fk_err err = {0};
    int rc = fk_fanout_pull(s->fo, identity, encode_queries, &t, &err);
    if (rc == FK_ENOTFOUND)
        return 0;
    if (rc) {
        fk_log(FK_LOG_ERROR, "predict_task_not_sent", "identity=%s error=\"%s\"", identity,
               err.msg);
        return 0;
    }
    fedkern_v1_PullTaskResponse msg = fedkern_v1_PullTaskResponse_init_zero;
    msg.kind = fedkern_v1_TaskKind_TASK_PREDICT;
    snprintf(msg.job_id, sizeof msg.job_id, "%" PRId64, t.job);
    snprintf(msg.method, sizeof msg.method, "%.31s", t.method);
    msg.params = (char *)t.config;
    msg.predict_id = t.id;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_codec_tx tx = {.bundle = &b};
    uint8_t *buf = NULL;
    size_t len = 0;
    /* The request was sized to fit one message when it started. */
    rc = fk_codec_bundle_decode(t.queries, t.queries_len, &b, &err);
    if (!rc)
        rc = fk_codec_encode_pull_task_response(&msg, &tx, 0, &buf, &len, &err);
    fk_bundle_close(&b);
    if (rc) {
        fk_log(FK_LOG_ERROR, "predict_task_not_sent", "identity=%s error=\"%s\"", identity,
               err.msg);
        reply_err(call, rc, &err);
        return 1;
    }
    fk_log(FK_LOG_DEBUG, "predict_task_sent", "identity=%s job=%" PRId64 " request=%" PRIu64,
           identity, t.job, t.id);
    s->stats.bytes_out += len;
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, len, free);
    return 1;
}

/* Give every waiting client the task the engine, or a prediction request, now has for it
 * (only after new tasks or requests were made: a scan per event would be quadratic). */
static void wake_waiters(fk_service *s)
{
    uint64_t gen = fk_engine_generation(s->e), fgen = fk_fanout_generation(s->fo);
    if (gen == s->woken_gen && fgen == s->woken_fo_gen)
        return;
    s->woken_gen = gen;
    s->woken_fo_gen = fgen;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    waiter *w = s->waiting;
    while (w) {
        waiter *next = w->next;
        fk_task_ref t;
        fk_err err = {0};
        if (w->call && reply_predict_task(s, w->call, w->identity)) {
            w->call = NULL;
            waiter_drop(s, w);
        } else if (w->call &&
                   fk_engine_pull(s->e, w->identity, fk_service_now(), &t, &err) == FK_OK) {
            fk_grpc_call *call = w->call;
            w->call = NULL;
            reply_task(s, call, &t, 0);
            waiter_drop(s, w);
        }
        w = next;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    s->stats.wakes++;
    s->stats.wake_seconds +=
        (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

static void waiter_timeout(uv_timer_t *timer)
{
    waiter *w = timer->data;
    if (w->call) {
        fk_grpc_call *call = w->call;
        w->call = NULL;
        reply_no_task(w->s, call, w->identity, 0);
    }
    waiter_drop(w->s, w);
}

static void waiter_cancelled(fk_grpc_call *call, void *ud)
{
    waiter *w = ud;
    if (w->call == call) {
        w->call = NULL;
        fk_grpc_call_reply(call, FK_GRPC_CANCELLED, NULL, NULL, 0);
        waiter_drop(w->s, w);
    }
}

static void park(fk_service *s, fk_grpc_call *call, const char *identity, uint64_t deadline_ms)
{
    uint64_t now = uv_now(s->loop);
    uint64_t wait = s->cfg.poll_max_ms;
    if (deadline_ms) {
        uint64_t left = deadline_ms > now ? deadline_ms - now : 0;
        wait = left > s->cfg.poll_margin_ms ? left - s->cfg.poll_margin_ms : 0;
        if (wait > s->cfg.poll_max_ms)
            wait = s->cfg.poll_max_ms;
    }
    waiter *w = calloc(1, sizeof *w);
    if (!w || wait == 0) {
        free(w);
        reply_no_task(s, call, identity, 0);
        return;
    }
    w->s = s;
    w->call = call;
    snprintf(w->identity, sizeof w->identity, "%s", identity);
    fk_client_rec *r = fk_clients_find(&s->clients, identity);
    if (r) {
        r->polls++;
        w->counted = 1;
    }
    FK_UV_MUST(uv_timer_init(s->loop, &w->timer));
    s->handles++;
    w->timer.data = w;
    w->next = s->waiting;
    w->pprev = &s->waiting;
    if (s->waiting)
        s->waiting->pprev = &w->next;
    s->waiting = w;
    s->stats.waiting_polls++;
    fk_grpc_call_on_cancel(call, waiter_cancelled, w);
    FK_UV_MUST(uv_timer_start(&w->timer, waiter_timeout, wait, 0));
}

/* ----------------------------------------------------------- handlers */

static void on_health(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                      size_t len, uint64_t deadline, void *ud)
{
    (void)peer;
    (void)deadline;
    fk_service *s = ud;
    grpc_health_v1_HealthCheckRequest in = grpc_health_v1_HealthCheckRequest_init_zero;
    if (decode_req(call, grpc_health_v1_HealthCheckRequest_fields, &in, req, len) != FK_OK)
        return;
    fk_codec_release(grpc_health_v1_HealthCheckRequest_fields, &in);
    if (in.service[0] && strcmp(in.service, "fedkern.v1.Federation")) {
        fk_grpc_call_reply(call, FK_GRPC_NOT_FOUND, "unknown service", NULL, 0);
        return;
    }
    grpc_health_v1_HealthCheckResponse msg = grpc_health_v1_HealthCheckResponse_init_zero;
    msg.status = s->closing ? grpc_health_v1_HealthCheckResponse_ServingStatus_NOT_SERVING
                            : grpc_health_v1_HealthCheckResponse_ServingStatus_SERVING;
    s->stats.health++;
    reply_msg(s, call, grpc_health_v1_HealthCheckResponse_fields, &msg);
}

/* A new session for the client's record (a new Join replaces the old session). */
FK_CHECKRETURN static int new_session(fk_service *s, fk_client_rec *r, fk_err *err)
{
    unsigned char raw[16];
    char id[33];
    if (RAND_bytes(raw, sizeof raw) != 1)
        return fk_err_set(err, FK_EIO, "no random bytes for a session id");
    for (int i = 0; i < 16; i++)
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
    return fk_clients_set_session(&s->clients, r, id, err);
}

static void batch_flush(fk_service *s);

/* The round engine asks this when a phase opens: a client gone is planned as a dropout. */
static int presence_gone(void *ud, const char *identity)
{
    const fk_client_rec *r = fk_clients_find(&((fk_service *)ud)->clients, identity);
    return r && r->gone;
}

/* r's session ended (expired or Leave): the phases waiting for it stop waiting (with quorum).
 * The engine may close a phase here, so staged updates are committed and counted first. */
static void client_gone(fk_service *s, fk_client_rec *r, double now)
{
    if (r->gone)
        return;
    r->gone = 1;
    batch_flush(s);
    fk_engine_client_gone(s->e, r->identity, now);
}

/* A call from a client that has joined before: it is alive (its session's clock restarts), and
 * one taken for gone is planned again (its session, if it ended, still needs a new Join). */
static void client_called(fk_service *s, const char *identity)
{
    fk_client_rec *r = fk_clients_find(&s->clients, identity);
    if (!r)
        return;
    note_seen(s, r, 0);
    if (r->gone) {
        r->gone = 0;
        fk_engine_client_back(s->e, identity);
    }
}

/* A client that sends no call for SESSION_MISSED heartbeat intervals, no byte on any of its
 * connections for as long (its stall detection PINGs, docs/daemons.md "Sessions"), whose last
 * connection closed at least as long ago, and has no PullTask parked has gone (killed, or
 * stopped while a long poll kept it from sending Leave): its session ends, so the clients-connected gauge counts live clients, and the rounds stop waiting
 * for it. One that comes back is told to Join again. A parked poll is cancelled when its
 * connection closes, so it keeps only a connected client alive; a slow heartbeat behind a
 * large upload (latency) does not end the session of a client that is still pulling and
 * pushing. */
enum { SESSION_MISSED = 3 };
static void expire_sessions(fk_service *s, double now)
{
    double idle = SESSION_MISSED * (double)s->cfg.heartbeat_ms / 1000.0;
    if (now - s->sessions_checked < 0.25 * idle)
        return; /* a look every quarter of the limit: O(clients) a few times per limit */
    s->sessions_checked = now;
    for (int i = 0; i < s->clients.n; i++) {
        fk_client_rec *r = &s->clients.recs[i];
        if (r->session[0] && now - r->seen > idle && !r->polls) {
            /* bytes from it (a PING on a connection stalled mid-record), or its connection's
             * close, within the limit: it is still there, or reconnecting */
            uint64_t quiet =
                s->srv ? fk_grpc_server_peer_idle_ms(s->srv, r->identity) : UINT64_MAX;
            if ((double)quiet < 1000.0 * idle)
                continue;
            fk_log(FK_LOG_INFO, "session_expired",
                   "client=%s session=%s idle_seconds=%.1f msg=\"no call and no byte for %d "
                   "intervals\"",
                   r->identity, r->session, now - r->seen, SESSION_MISSED);
            s->stats.expired++;
            fk_clients_end_session(&s->clients, r);
            client_gone(s, r, now);
        }
    }
}

/* Every call after Join names the caller's session (docs/protocol.md section 2): an unknown,
 * expired or another client's session_id is answered FAILED_PRECONDITION and the client joins
 * again. Identity still comes from the certificate; the session only says the caller joined
 * this server (since its last restart). 1 = the session is the caller's, 0 = answered. */
static int session_ok(fk_service *s, fk_grpc_call *call, const char *identity,
                      const char *session, const char *rpc)
{
    const fk_client_rec *r = session[0] ? fk_clients_by_session(&s->clients, session) : NULL;
    if (r && !strcmp(r->identity, identity))
        return 1;
    fk_log(FK_LOG_INFO, "session_refused", "client=%s rpc=%s reason=%s", identity, rpc,
           !session[0] ? "none" : r ? "another_client" : "unknown_or_expired");
    fk_grpc_call_reply(call, FK_GRPC_FAILED_PRECONDITION,
                       "unknown or expired session_id (sessions end with Leave, after 3 missed "
                       "heartbeats and at a server restart): Join again",
                       NULL, 0);
    return 0;
}

static void on_join(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    fedkern_v1_JoinRequest in;
    if (decode_req(call, fedkern_v1_JoinRequest_fields, &in, req, len) != FK_OK)
        return;
    const char *id = identity_of(peer);
    int status = FK_GRPC_OK;
    const char *why = NULL;
    if (in.name[0] && strcmp(in.name, id)) {
        status = FK_GRPC_PERMISSION_DENIED;
        why = "JoinRequest.name differs from the certificate identity";
    } else if (in.protocol_version != 1) {
        status = FK_GRPC_FAILED_PRECONDITION;
        why = "unsupported protocol_version; this server speaks fedkern.v1 (1)";
    }
    fk_client_rec *ss = NULL;
    fk_err err = {0};
    if (!why && (fk_clients_get(&s->clients, id, &ss, &err) || new_session(s, ss, &err))) {
        fk_log(FK_LOG_WARN, "session_not_created", "client=%s error=\"%s\"", id, err.msg);
        status = FK_GRPC_RESOURCE_EXHAUSTED;
        why = "cannot create a session";
    }
    if (why) {
        fk_codec_release(fedkern_v1_JoinRequest_fields, &in);
        fk_grpc_call_reply(call, status, why, NULL, 0);
        return;
    }
    s->stats.joins++;
    note_seen(s, ss, 1);
    client_called(s, id); /* back, if it was taken for gone */
    fk_roster_set sets[16];
    int n_sets = 0;
    for (pb_size_t i = 0; in.datasets_listed && i < in.datasets_count && i < 16; i++) {
        const fedkern_v1_DataSetInfo *di = &in.datasets[i];
        sets[n_sets] = (fk_roster_set){.rows = di->rows, .cols = di->cols, .classes = di->classes};
        fk_prep_record *p = &sets[n_sets].prep; /* issue 34: what the model will record */
        int steps_ok = di->prep_count <= FK_PREP_MODEL_STEPS;
        for (pb_size_t k = 0; steps_ok && k < di->prep_count; k++)
            steps_ok = di->prep[k] >= 1 && di->prep[k] <= FK_PREP_CODE_MAX;
        size_t d = di->affine_shift_count;
        int map_ok = d == di->affine_scale_count && (!d || d == di->cols);
        for (size_t j = 0; map_ok && j < d; j++)
            map_ok = isfinite(di->affine_shift[j]) && isfinite(di->affine_scale[j]);
        if (di->prep_listed && steps_ok && map_ok) {
            p->known = 1;
            p->n = (int)di->prep_count;
            for (int k = 0; k < p->n; k++)
                p->code[k] = (int)di->prep[k];
            p->d = d;
            p->shift = di->affine_shift;
            p->scale = di->affine_scale;
        } else if (di->prep_listed) {
            fk_log(FK_LOG_WARN, "client_prep_ignored",
                   "client=%s dataset=%.63s reason=\"step codes outside 1..%d or an affine map "
                   "that does not fit its %" PRIu64 " columns; its preprocessing counts as "
                   "unknown\"",
                   id, di->name, FK_PREP_CODE_MAX, di->cols);
        }
        snprintf(sets[n_sets++].name, sizeof sets[0].name, "%s", in.datasets[i].name);
    }
    int same = fk_roster_same(s->roster, id, in.datasets_listed, sets, n_sets); /* a rejoin */
    if (fk_roster_join(s->roster, id, in.datasets_listed, sets, n_sets))
        fk_log(FK_LOG_WARN, "client_datasets_unknown", "client=%s reason=\"out of memory\"", id);
    else if (!same && fk_store_roster_put(s->st, id, in.datasets_listed, sets, n_sets, &err))
        /* kept in memory: only a restart before the client's next Join forgets it */
        fk_log(FK_LOG_WARN, "client_datasets_not_stored", "client=%s error=\"%s\"", id, err.msg);
    char held[256] = "";
    for (int i = 0, at = 0; i < n_sets && at >= 0 && (size_t)at < sizeof held; i++) {
        int w = snprintf(held + at, sizeof held - (size_t)at, "%s%s:%" PRIu64 "x%" PRIu64,
                         i ? "," : "", sets[i].name, sets[i].rows, sets[i].cols);
        at = w < 0 ? -1 : at + w;
    }
    fk_log(FK_LOG_INFO, "client_joined",
           "client=%s session=%s peer=%s software=\"%s\" samples=%" PRIu64 " datasets=%s", id,
           ss->session, peer->addr, in.software, in.n_samples,
           in.datasets_listed ? (n_sets ? held : "none") : "unknown");
    fk_codec_release(fedkern_v1_JoinRequest_fields, &in);
    fedkern_v1_JoinResponse out = fedkern_v1_JoinResponse_init_zero;
    snprintf(out.session_id, sizeof out.session_id, "%s", ss->session);
    snprintf(out.client_id, sizeof out.client_id, "%.127s", id);
    out.heartbeat_interval_ms = s->cfg.heartbeat_ms;
    out.max_message_size = s->cfg.max_message;
    out.protocol_version = 1;
    snprintf(out.software, sizeof out.software, "fedkern-server %s", FK_VERSION);
    reply_msg(s, call, fedkern_v1_JoinResponse_fields, &out);
}

static void on_pull(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    fedkern_v1_PullTaskRequest in;
    if (decode_req(call, fedkern_v1_PullTaskRequest_fields, &in, req, len) != FK_OK)
        return;
    if (!session_ok(s, call, identity_of(peer), in.session_id, "PullTask")) {
        fk_codec_release(fedkern_v1_PullTaskRequest_fields, &in);
        return;
    }
    client_called(s, identity_of(peer));
    s->stats.pulls++;
    s->stats.bytes_in += len;
    const char *id = identity_of(peer);
    /* Predictions first: an admin waits on them, with a short deadline. */
    if (!in.job_id[0] && !s->closing && reply_predict_task(s, call, id))
        return;
    fk_task_ref t;
    fk_err err = {0};
    int rc = fk_engine_pull(s->e, id, fk_service_now(), &t, &err);
    if (in.job_id[0]) {
        /* A later chunk of a task that did not fit one message. */
        int64_t job;
        int attempt;
        if (rc == FK_OK && fk_task_id_parse(in.job_id, &job, &attempt) == FK_OK &&
            job == t.job && attempt == t.attempt && (int)in.round == t.round &&
            (int)in.phase == t.phase)
            reply_task(s, call, &t, in.chunk_index);
        else
            reply_no_task(s, call, NULL, 0); /* that task is over: poll again */
        return;
    }
    if (rc == FK_OK)
        reply_task(s, call, &t, 0);
    else if (s->closing)
        reply_no_task(s, call, NULL, 1000);
    else
        park(s, call, id, deadline);
}

static void reply_push(fk_service *s, fk_grpc_call *call, int state, const uint32_t *missing,
                       size_t n_missing, const char *message)
{
    fedkern_v1_PushUpdateResponse out = fedkern_v1_PushUpdateResponse_init_zero;
    out.state = state;
    out.missing = (uint32_t *)missing;
    out.missing_count = (pb_size_t)n_missing;
    snprintf(out.message, sizeof out.message, "%s", message ? message : "");
    reply_msg(s, call, fedkern_v1_PushUpdateResponse_fields, &out);
}

static partial *find_partial(fk_service *s, const char *update_id, const char *identity)
{
    for (int i = 0; i < s->n_partials; i++)
        if (!strcmp(s->partials[i].update_id, update_id) &&
            !strcmp(s->partials[i].identity, identity))
            return &s->partials[i];
    return NULL;
}

static void drop_partial(fk_service *s, partial *p)
{
    fk_reasm_close(&p->r);
    *p = s->partials[--s->n_partials];
}

/* Bytes the chunked uploads hold: of one sender (identity non-NULL) or of all. */
static size_t partial_bytes(const fk_service *s, const char *identity)
{
    size_t n = 0;
    for (int i = 0; i < s->n_partials; i++)
        if (!identity || !strcmp(s->partials[i].identity, identity))
            n += fk_reasm_held(&s->partials[i].r);
    return n;
}

static partial *new_partial(fk_service *s, const char *update_id, const char *identity)
{
    partial *g = realloc(s->partials, (size_t)(s->n_partials + 1) * sizeof *g);
    if (!g)
        return NULL;
    s->partials = g;
    partial *p = &s->partials[s->n_partials++];
    memset(p, 0, sizeof *p);
    snprintf(p->update_id, sizeof p->update_id, "%s", update_id);
    snprintf(p->identity, sizeof p->identity, "%s", identity);
    /* one update may not hold more than its sender may hold in all */
    fk_reasm_init(&p->r, s->cfg.reasm_limit < s->cfg.partial_client_limit
                             ? s->cfg.reasm_limit
                             : s->cfg.partial_client_limit);
    p->touched = fk_service_now();
    return p;
}

static void reply_missing(fk_service *s, fk_grpc_call *call, const partial *p, int state)
{
    size_t n = fk_reasm_missing(&p->r, NULL, 0);
    uint32_t *miss = n ? malloc(n * sizeof *miss) : NULL;
    if (n && !miss) {
        fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory", NULL, 0);
        return;
    }
    fk_reasm_missing(&p->r, miss, n);
    reply_push(s, call, state, miss, n, NULL);
    free(miss);
}

/* ------------------------------------------------------- group commit
 *
 * Updates that arrive in the same loop iteration are staged in one store
 * transaction; a uv_check handle commits it once the iteration's I/O callbacks
 * ran, and only then are they counted (fk_engine_push_apply) and answered. A
 * failed commit rolls back: nothing is counted and every staged update is
 * refused with UNAVAILABLE (its client resends). Other writes of the engine
 * (submit, cancel, tick) flush the batch first; last_seen writes may join it. */

enum { BATCH_MAX = 512 }; /* updates per transaction: bounds the memory of one batch */

static void answer_staged(fk_service *s, staged *q, int commit_rc, const fk_err *commit_err,
                          double now)
{
    q->p.identity = q->identity; /* the queue may have moved since staging */
    q->p.idem = q->idem;
    if (commit_rc) {
        reply_err(q->call, commit_rc, commit_err);
    } else if (q->rc == FK_OK && !q->dup) {
        fk_engine_push_apply(s->e, &q->p, now);
        s->stats.committed++;
        reply_push(s, q->call, fedkern_v1_UpdateState_UPDATE_COMMITTED, NULL, 0, NULL);
    } else if (q->rc == FK_OK && q->dup == FK_STORE_IDEM_OTHER) {
        fk_log(FK_LOG_WARN, "update_id_reused", "identity=%s job=%" PRId64 " update_id=%s",
               q->identity, q->p.job, q->idem);
        fk_grpc_call_reply(q->call, FK_GRPC_ABORTED,
                           "update_id was committed before with other bytes; an update_id names "
                           "one payload: send a new update with a fresh update_id",
                           NULL, 0);
    } else if (q->rc == FK_OK) {
        s->stats.duplicates++;
        reply_push(s, q->call, fedkern_v1_UpdateState_UPDATE_DUPLICATE, NULL, 0,
                   "this update was committed before");
    } else if (q->rc == FK_ESTATE) {
        s->stats.stale++;
        reply_push(s, q->call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0, q->err.msg);
    } else {
        fk_log(FK_LOG_WARN, "update_refused", "identity=%s job=%" PRId64 " error=\"%s\"",
               q->identity, q->p.job, q->err.msg);
        reply_err(q->call, q->rc, &q->err);
        if (q->rc == FK_EINVAL) /* a refused update is a dropout: it may complete the phase */
            fk_engine_settle(s->e, q->p.job, now);
    }
}

/* Answer the committed batches up to commit number upto (all: UINT64_MAX), in order, with the
 * sync's verdict (a failed fdatasync: UNAVAILABLE, the client sends again and is told it
 * was a duplicate once a later sync succeeded). */
static void answer_synced(fk_service *s, uint64_t upto, int rc, const fk_err *err)
{
    double now = fk_service_now();
    int k = 0;
    while (k < s->n_synced && s->synced_seq[k] <= upto)
        k++;
    if (k == 0)
        return;
    staged *done = malloc((size_t)k * sizeof *done);
    if (!done) { /* answer in place: nothing stages while we answer (apply only counts) */
        for (int i = 0; i < k; i++)
            answer_staged(s, &s->synced[i], rc, err, now);
    } else {
        memcpy(done, s->synced, (size_t)k * sizeof *done);
    }
    memmove(s->synced, s->synced + k, (size_t)(s->n_synced - k) * sizeof *s->synced);
    memmove(s->synced_seq, s->synced_seq + k, (size_t)(s->n_synced - k) * sizeof *s->synced_seq);
    s->n_synced -= k;
    if (done) { /* an answer may close a phase, whose engine writes flush a batch: re-entrant */
        for (int i = 0; i < k; i++)
            answer_staged(s, &done[i], rc, err, now);
        free(done);
    }
    if (!rc)
        wake_waiters(s);
}

static void sync_start(fk_service *s);

static void sync_work(uv_work_t *req)
{
    fk_service *s = req->data; /* reads sync_path, writes sync_rc / sync_err only */
    s->sync_err = (fk_err){0};
    s->sync_rc = fk_store_sync_wal(s->sync_path, &s->sync_err);
}

static void sync_after(uv_work_t *req, int status)
{
    fk_service *s = req->data;
    (void)status;
    s->sync_busy = 0;
    fk_err err = s->sync_err;
    int rc = s->sync_rc;
    if (rc)
        fk_log(FK_LOG_ERROR, "updates_not_synced", "error=\"%s\"", err.msg);
    answer_synced(s, s->sync_upto, rc, &err);
    sync_start(s); /* batches committed while this one ran */
}

static void sync_start(fk_service *s)
{
    if (s->sync_busy || s->n_synced == 0)
        return;
    s->sync_busy = 1;
    s->sync_upto = s->commit_seq;
    snprintf(s->sync_path, sizeof s->sync_path, "%s", fk_store_path(s->st));
    s->sync_req.data = s;
    FK_UV_MUST(uv_queue_work(s->loop, &s->sync_req, sync_work, sync_after));
}

/* Commit the open batch, then count and answer its updates in arrival order. The commit is
 * relaxed (no fsync on the loop); with defer the -wal's fdatasync runs on libuv's pool and the
 * answers wait for it (sync_after), else it runs here and every batch still waiting for a
 * sync is answered first, in commit order. Either way an update is acknowledged only once it
 * is on disk, as with synchronous=FULL. */
static void batch_flush_mode(fk_service *s, int defer)
{
    if (!s->batch_open)
        return;
    s->batch_open = 0;
    FK_UV_MUST(uv_check_stop(&s->batch_check));
    FK_UV_MUST(uv_idle_stop(&s->batch_idle));
    fk_err err = {0};
    int rc = fk_store_commit(s->st, &err); /* rolls back on failure */
    s->stats.batches++;
    s->stats.batch_failures += rc != FK_OK;
    if (rc)
        fk_log(FK_LOG_ERROR, "updates_not_stored", "updates=%d error=\"%s\"", s->n_batch,
               err.msg);
    int n = s->n_batch;
    if (!rc && fk_store_sync_deferred(s->st)) {
        if (s->n_synced + n > s->cap_synced) {
            int cap = s->cap_synced ? 2 * s->cap_synced : 16;
            while (cap < s->n_synced + n)
                cap *= 2;
            staged *g = realloc(s->synced, (size_t)cap * sizeof *g);
            if (g)
                s->synced = g;
            uint64_t *gs = g ? realloc(s->synced_seq, (size_t)cap * sizeof *gs) : NULL;
            if (gs) {
                s->synced_seq = gs;
                s->cap_synced = cap;
            } else {
                defer = 0; /* no room to wait: sync here */
            }
        }
        s->commit_seq++;
        if (defer) {
            memcpy(s->synced + s->n_synced, s->batch, (size_t)n * sizeof *s->batch);
            for (int i = 0; i < n; i++)
                s->synced_seq[s->n_synced + i] = s->commit_seq;
            s->n_synced += n;
            s->n_batch = 0;
            sync_start(s);
            return;
        }
        rc = fk_store_sync_wal(fk_store_path(s->st), &err);
        if (rc)
            fk_log(FK_LOG_ERROR, "updates_not_synced", "error=\"%s\"", err.msg);
        answer_synced(s, UINT64_MAX, rc, &err); /* earlier batches first: this sync covers them */
    }
    double now = fk_service_now();
    s->n_batch = 0; /* an answer below may not stage anything, but keep the queue sound */
    for (int i = 0; i < n; i++)
        answer_staged(s, &s->batch[i], rc, &err, now);
    if (!rc)
        wake_waiters(s);
}

/* Every staged and committed update answered before the caller goes on (the engine's own
 * writes, a probe, a failure report, shutdown): the sync, if any, runs here. */
static void batch_flush(fk_service *s)
{
    batch_flush_mode(s, 0);
    if (s->n_synced && !s->batch_open) { /* committed earlier, its sync still in flight */
        fk_err err = {0};
        int rc = fk_store_sync_wal(fk_store_path(s->st), &err);
        answer_synced(s, UINT64_MAX, rc, &err);
    }
}

/* Store failed inside the batch: SQLite may have dropped the transaction, so
 * refuse everything staged so far. */
static void batch_abort(fk_service *s, const fk_err *why)
{
    fk_store_rollback(s->st);
    s->stats.batches++;
    s->stats.batch_failures++;
    fk_log(FK_LOG_ERROR, "updates_not_stored", "updates=%d error=\"%s\"", s->n_batch, why->msg);
    s->batch_open = 0;
    FK_UV_MUST(uv_check_stop(&s->batch_check));
    FK_UV_MUST(uv_idle_stop(&s->batch_idle));
    int n = s->n_batch;
    s->n_batch = 0;
    for (int i = 0; i < n; i++)
        reply_err(s->batch[i].call, why->code, why);
}

static void on_batch_check(uv_check_t *h)
{
    batch_flush_mode(h->data, 1);
}

static void on_batch_idle(uv_idle_t *h)
{
    (void)h; /* only there so the loop polls without blocking until the check commits */
}

/* Room for one more staged update and an open transaction; FK_OK or an error. */
FK_CHECKRETURN static int batch_reserve(fk_service *s, fk_err *err)
{
    /* Closed: the batch handles are gone. A call can still arrive (with net.io_threads it may
     * wait in the I/O threads' queue): UNAVAILABLE, so the client sends it again later. */
    if (s->closing)
        return fk_err_set(err, FK_EIO, "the server is shutting down; send the update again "
                                       "once it is back");
    if (s->n_batch == s->cap_batch) {
        int cap = s->cap_batch ? 2 * s->cap_batch : 4; /* small: tests cross a regrowth */
        staged *g = realloc(s->batch, (size_t)cap * sizeof *g);
        if (!g)
            return fk_err_set(err, FK_ENOMEM, "server out of memory queueing an update");
        s->batch = g;
        s->cap_batch = cap;
    }
    if (s->batch_open)
        return FK_OK;
    int rc = fk_store_begin_relaxed(s->st, err); /* synced before the answers: batch_flush */
    if (rc)
        return rc;
    s->batch_open = 1;
    FK_UV_MUST(uv_check_start(&s->batch_check, on_batch_check));
    FK_UV_MUST(uv_idle_start(&s->batch_idle, on_batch_idle));
    return FK_OK;
}

/* ------------------------------------------------- work off the loop */

/* A phase's close of the engine, run by the offload (fk_engine_set_offload). */
typedef struct engine_item {
    fk_offload_item it; /* first: the offload hands this back */
    fk_service *s;
    fk_engine_work *w;
} engine_item;

static void engine_item_run(fk_offload_item *it)
{
    fk_engine_work_run(((engine_item *)it)->w);
}

static void engine_item_done(fk_offload_item *it)
{
    engine_item *x = (engine_item *)it;
    fk_service *s = x->s;
    batch_flush(s); /* the engine writes in transactions of its own; staged updates count first */
    fk_engine_work_done(s->e, x->w, fk_service_now());
    free(x);
    wake_waiters(s); /* the next phase's or round's tasks */
}

static int offload_engine(void *ud, fk_engine_work *w)
{
    fk_service *s = ud;
    engine_item *x = calloc(1, sizeof *x);
    if (!x)
        return FK_ENOMEM; /* the engine runs the work at once */
    x->it.run = engine_item_run;
    x->it.done = engine_item_done;
    x->s = s;
    x->w = w;
    fk_offload_submit(&s->off, &x->it);
    return FK_OK;
}

/* Hand a complete update (encoded bundle) to the engine; it is answered once
 * the batch it was staged in committed. */
static void commit_update(fk_service *s, fk_grpc_call *call, const char *identity,
                          const fedkern_v1_PushUpdateRequest *in, int64_t job, int attempt,
                          const uint8_t *blob, size_t len, const fk_bundle *msg)
{
    fk_err err = {0};
    int rc = batch_reserve(s, &err);
    if (rc) {
        fk_log(FK_LOG_WARN, "update_refused", "identity=%s job=%" PRId64 " error=\"%s\"",
               identity, job, err.msg);
        reply_err(call, rc, &err);
        return;
    }
    staged *q = &s->batch[s->n_batch];
    memset(q, 0, sizeof *q);
    q->call = call;
    snprintf(q->identity, sizeof q->identity, "%s", identity);
    snprintf(q->idem, sizeof q->idem, "%s", in->update_id);
    q->p = (fk_push){.job = job, .round = (int)in->round, .attempt = attempt,
                     .phase = (int)in->phase, .identity = q->identity, .idem = q->idem,
                     .blob = blob, .len = len, .msg = msg};
    fk_report_init(&q->p.report);
    if (in->has_report) {
        q->p.report.n_samples = (double)in->report.n_samples;
        q->p.report.loss = in->report.loss;
        q->p.report.accuracy = in->report.accuracy;
        for (pb_size_t i = 0; i < in->report.metrics_count; i++) /* unknown names: ignored */
            if (strcmp(in->report.metrics[i].name, "loss") &&
                strcmp(in->report.metrics[i].name, "accuracy"))
                fk_report_set(&q->p.report, in->report.metrics[i].name,
                              in->report.metrics[i].value);
    }
    q->rc = fk_engine_push_stage(s->e, &q->p, fk_service_now(), &q->dup, &q->err);
    q->p.blob = NULL; /* stored (or not) now; the caller frees it */
    q->p.len = 0;
    q->p.msg = NULL;
    s->n_batch++;
    if (q->rc == FK_EIO || q->rc == FK_ENOMEM) {
        fk_err why = q->err;
        batch_abort(s, &why);
    } else if (s->n_batch >= BATCH_MAX) {
        batch_flush_mode(s, 1);
    }
}

static void handle_chunk(fk_service *s, fk_grpc_call *call, const char *identity,
                         const fedkern_v1_PushUpdateRequest *in, const fk_codec_rx *rx,
                         int64_t job, int attempt)
{
    partial *p = find_partial(s, in->update_id, identity);
    /* Reassembly only for the task the sender owes now (issue 33): a chunk for a job, round or
     * phase that does not wait for this client holds nothing; an update_id is one task's. */
    if (p && (p->job != job || p->round != (int)in->round || p->attempt != attempt ||
              p->phase != (int)in->phase)) {
        fk_grpc_call_reply(call, FK_GRPC_INVALID_ARGUMENT,
                           "chunk for another task than the earlier chunks of this update_id",
                           NULL, 0);
        return;
    }
    if (!p && !fk_engine_task_open(s->e, job, (int)in->round, attempt, (int)in->phase,
                                   identity)) {
        s->stats.stale++;
        reply_push(s, call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0,
                   "no open phase of this job waits for an update from you; chunks are taken "
                   "only for your current task: pull a new task");
        return;
    }
    /* Caps on what partial uploads hold, per sender and in all (memory grows with the chunks
     * that arrived, never with what a header announces). Over a cap: RESOURCE_EXHAUSTED, the
     * client reconnects and resends the missing chunks later. */
    size_t mine = partial_bytes(s, identity), all = partial_bytes(s, NULL);
    size_t more = rx->chunk_len; /* and, for the first chunk, the index fk_reasm allocates */
    if (!p)
        more += (size_t)in->chunk.total * sizeof(void *) + in->chunk.total / 8 + 1;
    if (mine + more > s->cfg.partial_client_limit || all + more > s->cfg.partial_total_limit) {
        int per_client = mine + more > s->cfg.partial_client_limit;
        char msg[256];
        snprintf(msg, sizeof msg,
                 "partial uploads hold %zu bytes %s; one more chunk would pass the server's "
                 "limit of %zu bytes (%s); send it again later",
                 per_client ? mine : all, per_client ? "of yours" : "in all",
                 per_client ? s->cfg.partial_client_limit : s->cfg.partial_total_limit,
                 per_client ? "partial_client_mb" : "partial_total_mb");
        fk_log(FK_LOG_WARN, "chunk_refused", "identity=%s job=%" PRId64 " held=%zu reason=\"%s\"",
               identity, job, per_client ? mine : all, msg);
        fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, msg, NULL, 0);
        return;
    }
    if (!p && !(p = new_partial(s, in->update_id, identity))) {
        fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory", NULL, 0);
        return;
    }
    p->job = job;
    p->round = (int)in->round;
    p->attempt = attempt;
    p->phase = (int)in->phase;
    p->touched = fk_service_now();
    int complete = 0;
    fk_err err = {0};
    int rc = fk_reasm_add(&p->r, &in->chunk, rx->chunk_data, rx->chunk_len, &complete, &err);
    if (rc) {
        drop_partial(s, p);
        reply_err(call, rc, &err);
        return;
    }
    if (!complete) {
        reply_missing(s, call, p, fedkern_v1_UpdateState_UPDATE_PARTIAL);
        return;
    }
    uint8_t *blob;
    size_t len;
    rc = fk_reasm_take(&p->r, &blob, &len, &err);
    drop_partial(s, p);
    if (rc) {
        reply_err(call, rc, &err);
        return;
    }
    commit_update(s, call, identity, in, job, attempt, blob, len, NULL);
    free(blob);
}

/* ------------------------------------------------- predictions by the clients */

/* The prediction counters (fk_service_stats) for one Predict call's outcome. */
static void count_predict(fk_service *s, int rc, const fk_bundle *res, int by_clients)
{
    if (rc) {
        s->stats.predict_failed++;
        return;
    }
    const fk_tensor *lab = fk_bundle_get(res, "labels"), *mi = fk_bundle_get(res, "missing_clients"),
                    *un = fk_bundle_get(res, "unscored_classes");
    *(by_clients ? &s->stats.predict_clients : &s->stats.predict_server) += 1;
    s->stats.predict_queries += lab ? lab->len : 0;
    s->stats.predict_missing_clients += mi ? mi->len : 0;
    s->stats.predict_unscored_classes += un ? un->len : 0;
}

/* Answer the Predict call of request id with the combine of the answers taken. */
static void predict_finish(fk_service *s, uint64_t id)
{
    fk_bundle res;
    fk_bundle_init(&res);
    void *ud;
    int64_t job;
    int answered, asked;
    fk_err err = {0};
    int rc = fk_fanout_finish(s->fo, id, &res, &ud, &job, &answered, &asked, &err);
    fk_grpc_call *call = ud;
    const fk_tensor *miss = fk_bundle_get(&res, "missing_clients");
    fk_log(rc ? FK_LOG_WARN : FK_LOG_INFO, "predict_answered",
           "request=%" PRIu64 " clients_asked=%d answered=%d missing=%zu job=%" PRId64 "%s%s", id,
           asked, answered, miss ? miss->len : (size_t)0, job, rc ? " error=" : "",
           rc ? err.msg : "");
    uint8_t *buf = NULL;
    size_t olen = 0;
    fedkern_v1_PredictResponse out = fedkern_v1_PredictResponse_init_zero;
    snprintf(out.job_id, sizeof out.job_id, "%" PRId64, job);
    fk_codec_tx tx = {.bundle = &res};
    if (!rc)
        rc = fk_codec_encode_predict_response(&out, &tx, &buf, &olen, &err);
    count_predict(s, rc, &res, 1);
    fk_bundle_close(&res);
    if (!call)
        return;
    fk_grpc_call_on_cancel(call, NULL, NULL);
    if (rc) {
        free(buf);
        reply_err(call, rc, &err);
        return;
    }
    s->stats.bytes_out += olen;
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, olen, free);
}

/* The admin gave up on a Predict call (its deadline or a cancel): drop its request. */
static void predict_cancelled(fk_grpc_call *call, void *ud)
{
    fk_service *s = ud;
    uint64_t id;
    void *owner;
    if (fk_fanout_find_ud(s->fo, call, &id) == FK_OK) {
        fk_fanout_drop(s->fo, id, &owner);
        fk_log(FK_LOG_INFO, "predict_cancelled", "request=%" PRIu64, id);
    }
    fk_grpc_call_reply(call, FK_GRPC_CANCELLED, NULL, NULL, 0);
}

/* A client's answer to a predict task: checked by the method, taken or refused. */
static void predict_answer(fk_service *s, fk_grpc_call *call, const char *identity,
                           const fedkern_v1_PushUpdateRequest *in, const fk_bundle *ans,
                           int64_t job)
{
    fk_err err = {0};
    int complete = 0, failed = in->has_report && in->report.error[0];
    if (failed)
        fk_log(FK_LOG_WARN, "client_predict_failed",
               "identity=%s job=%" PRId64 " request=%" PRIu64 " error=\"%s\"", identity, job,
               in->predict_id, in->report.error);
    fk_bundle empty;
    fk_bundle_init(&empty);
    int rc = fk_fanout_answer(s->fo, in->predict_id, identity, failed ? NULL : ans ? ans : &empty,
                              &complete, &err);
    if (rc == FK_ESTATE)
        reply_push(s, call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0, err.msg);
    else if (rc) {
        fk_log(FK_LOG_WARN, "predict_answer_refused", "identity=%s job=%" PRId64 " error=\"%s\"",
               identity, job, err.msg);
        reply_err(call, rc, &err);
    } else {
        reply_push(s, call, fedkern_v1_UpdateState_UPDATE_COMMITTED, NULL, 0, NULL);
    }
    if (complete)
        predict_finish(s, in->predict_id);
}

/* Mode B of kahm and the like: ask the clients that hold the job's models (the request
 * copies model and q); the call is answered later, by predict_finish. */
FK_CHECKRETURN static int predict_start(fk_service *s, fk_grpc_call *call, int64_t job, const fk_method *m,
                         const fk_bundle *model, const fk_bundle *q, uint32_t timeout_ms,
                         fk_err *err)
{
    if (!m->check_answer || !m->combine_answers)
        return fk_err_set(err, FK_EINVAL, "job %" PRId64 " (%s): the models stay on the clients "
                          "and this job type cannot ask them", job, m->name);
    if (timeout_ms > PREDICT_MAX_MS)
        return fk_err_set(err, FK_EINVAL, "Predict: timeout_ms %u is more than %d", timeout_ms,
                          (int)PREDICT_MAX_MS);
    /* The queries are checked once here (a combine of no answers), not by every client. */
    fk_bundle dry;
    fk_bundle_init(&dry);
    int rc = m->combine_answers(model, q, NULL, 0, &dry, err);
    fk_bundle_close(&dry);
    if (rc)
        return rc;
    fk_store_job sj;
    memset(&sj, 0, sizeof sj);
    rc = fk_store_job_get(s->st, job, &sj, err);
    if (rc)
        return rc;
    /* The task must fit one message: the queries, the job config and the envelope. */
    size_t qsize = 0;
    rc = fk_codec_bundle_size(q, FK_DTYPE_F64, &qsize, err);
    if (!rc && qsize + strlen(sj.config) + 1024 > s->cfg.max_message)
        rc = fk_err_set(err, FK_ELIMIT, "Predict: the query batch (%zu bytes) and the job "
                        "config do not fit one task message to the clients (max_message %u "
                        "bytes); send fewer queries per call", qsize, s->cfg.max_message);
    fk_jobconf conf;
    int parsed = 0;
    if (!rc && !(rc = fk_jobconf_parse(&conf, sj.config, "job config", err)))
        parsed = 1;
    int *ask = NULL;
    if (!rc && !(ask = calloc((size_t)conf.n_clients, sizeof *ask)))
        rc = fk_err_set(err, FK_ENOMEM, "out of memory");
    int n_ask = 0;
    for (int k = 0; !rc && k < conf.n_clients; k++)
        n_ask += ask[k] = m->holds_models ? m->holds_models(model, k) : 1;
    uint64_t id = 0;
    if (!rc) {
        uint32_t ms = timeout_ms ? timeout_ms : PREDICT_DEFAULT_MS;
        fk_fanout_spec sp = {.job = job, .m = m, .config = sj.config, .model = model,
                             .queries = q, .identities = (const char *const *)conf.clients,
                             .ask = ask, .n_clients = conf.n_clients,
                             .deadline = fk_service_now() + 1e-3 * ms, .ud = call};
        rc = fk_fanout_start(s->fo, &sp, &id, err);
    }
    free(ask);
    if (parsed)
        fk_jobconf_close(&conf);
    fk_store_job_free(&sj);
    if (rc)
        return rc;
    fk_log(FK_LOG_INFO, "predict_asked", "job=%" PRId64 " request=%" PRIu64 " clients=%d",
           job, id, n_ask);
    fk_grpc_call_on_cancel(call, predict_cancelled, s);
    wake_waiters(s);
    double next;
    uint64_t due;
    if (fk_fanout_due(s->fo, fk_service_now(), &due, &next) == FK_OK && due == id)
        predict_finish(s, id); /* nobody holds models: answer at once */
    return FK_OK;
}

static void on_push(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    const char *id = identity_of(peer);
    s->stats.pushes++;
    s->stats.bytes_in += len;
    fedkern_v1_PushUpdateRequest in;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_codec_rx rx = {.bundle = &b};
    fk_err err = {0};
    int rc = fk_codec_decode_push_update_request(req, len, &in, &rx, &err);
    int decoded = rc == FK_OK;
    if (decoded && !session_ok(s, call, id, in.session_id, "PushUpdate")) {
        fk_bundle_close(&b);
        fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &in);
        return;
    }
    client_called(s, id);
    int64_t job = 0;
    int attempt = 0;
    if (!rc && fk_task_id_parse(in.job_id, &job, &attempt))
        rc = fk_err_set(&err, FK_EINVAL, "PushUpdate: job_id '%s' is not a task id", in.job_id);
    if (!rc && strlen(in.update_id) < 8)
        rc = fk_err_set(&err, FK_EINVAL, "PushUpdate: update_id must have at least 8 characters");
    if (rc) {
        reply_err(call, rc, &err);
    } else if (in.predict_id) {
        predict_answer(s, call, id, &in, rx.has_bundle ? &b : NULL, job);
    } else if (in.has_report && in.report.error[0]) {
        fk_log(FK_LOG_WARN, "client_task_failed", "identity=%s job=%s round=%u phase=%u error=\"%s\"",
               id, in.job_id, in.round, in.phase, in.report.error);
        fk_push p = {.job = job, .round = (int)in.round, .attempt = attempt,
                     .phase = (int)in.phase, .identity = id, .idem = in.update_id};
        batch_flush(s); /* staged updates count first: the failure may close the phase */
        rc = fk_engine_fail(s->e, &p, in.report.error, fk_service_now(), &err);
        if (rc == FK_OK)
            wake_waiters(s); /* the phase may have closed: new tasks */
        reply_push(s, call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0,
                   rc == FK_OK ? "failure noted; the client counts as a dropout of this phase"
                               : err.msg);
    } else if (in.probe) {
        batch_flush(s); /* a staged update is not known until it committed */
        int known = 0;
        partial *p = find_partial(s, in.update_id, id);
        if (fk_store_update_known(s->st, in.update_id, id, &known, &err) == FK_OK && known)
            reply_push(s, call, fedkern_v1_UpdateState_UPDATE_DUPLICATE, NULL, 0, NULL);
        else if (p)
            reply_missing(s, call, p, fedkern_v1_UpdateState_UPDATE_PARTIAL);
        else
            reply_push(s, call, fedkern_v1_UpdateState_UPDATE_UNKNOWN, NULL, 0, NULL);
    } else if (rx.has_chunk) {
        handle_chunk(s, call, id, &in, &rx, job, attempt);
    } else if (rx.has_bundle) {
        uint8_t *blob;
        size_t blen;
        rc = fk_codec_bundle_encode(&b, &blob, &blen, &err);
        if (rc) {
            reply_err(call, rc, &err);
        } else {
            /* b is blob decoded: the engine's checks read it instead of decoding again */
            commit_update(s, call, id, &in, job, attempt, blob, blen, &b);
            free(blob);
        }
    } else {
        fk_grpc_call_reply(call, FK_GRPC_INVALID_ARGUMENT, "PushUpdate without a payload", NULL,
                           0);
    }
    fk_bundle_close(&b);
    if (decoded)
        fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &in);
}

static void on_heartbeat(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                         size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    fedkern_v1_HeartbeatRequest in;
    if (decode_req(call, fedkern_v1_HeartbeatRequest_fields, &in, req, len) != FK_OK)
        return;
    const char *id = identity_of(peer);
    if (!session_ok(s, call, id, in.session_id, "Heartbeat")) {
        fk_codec_release(fedkern_v1_HeartbeatRequest_fields, &in);
        return;
    }
    fk_client_rec *ss = fk_clients_by_session(&s->clients, in.session_id);
    note_seen(s, ss, 0);
    fedkern_v1_HeartbeatResponse out = fedkern_v1_HeartbeatResponse_init_zero;
    out.heartbeat_interval_ms = s->cfg.heartbeat_ms;
    int64_t job;
    int attempt;
    if (in.job_id[0]) {
        out.cancel_task = fk_task_id_parse(in.job_id, &job, &attempt) != FK_OK ||
                          !fk_engine_task_open(s->e, job, (int)in.round, attempt, (int)in.phase, id);
    }
    fk_codec_release(fedkern_v1_HeartbeatRequest_fields, &in);
    s->stats.heartbeats++;
    reply_msg(s, call, fedkern_v1_HeartbeatResponse_fields, &out);
}

static void on_leave(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                     uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    fedkern_v1_LeaveRequest in;
    if (decode_req(call, fedkern_v1_LeaveRequest_fields, &in, req, len) != FK_OK)
        return;
    if (!session_ok(s, call, identity_of(peer), in.session_id, "Leave")) {
        fk_codec_release(fedkern_v1_LeaveRequest_fields, &in);
        return;
    }
    fk_log(FK_LOG_INFO, "client_left", "identity=%s reason=\"%s\"", identity_of(peer), in.reason);
    s->stats.leaves++;
    fk_codec_release(fedkern_v1_LeaveRequest_fields, &in);
    fk_client_rec *r;
    fk_err err = {0};
    if (fk_clients_get(&s->clients, identity_of(peer), &r, &err) == FK_OK) {
        note_seen(s, r, 1);
        fk_clients_end_session(&s->clients, r); /* gone: no longer counted as connected */
        client_gone(s, r, fk_service_now());
        wake_waiters(s); /* a phase may have closed: new tasks */
    }
    fedkern_v1_LeaveResponse out = fedkern_v1_LeaveResponse_init_zero;
    reply_msg(s, call, fedkern_v1_LeaveResponse_fields, &out);
}

/* -------------------------------------------------------------- admin */

static int job_state_pb(int state)
{
    switch (state) {
    case FK_JOB_RUNNING:
        return fedkern_v1_JobState_JOB_RUNNING;
    case FK_JOB_DONE:
        return fedkern_v1_JobState_JOB_DONE;
    case FK_JOB_FAILED:
        return fedkern_v1_JobState_JOB_FAILED;
    default:
        return fedkern_v1_JobState_JOB_CANCELLED;
    }
}

/* An admin call's job id: a plain positive integer ("1", as `fedkern job list` shows it); a
 * task id ("1.0"), a fraction or trailing text is refused, not read as job 1. */
static int parse_job_id(fk_grpc_call *call, const char *text, int64_t *job)
{
    char *end;
    errno = 0;
    long long j = strtoll(text, &end, 10);
    if (end != text && !*end && j > 0 && errno == 0 && (text[0] >= '0' && text[0] <= '9')) {
        *job = j;
        return 1;
    }
    char msg[200];
    snprintf(msg, sizeof msg,
             "job_id '%.40s' is not a job id: give the job's number as 'fedkern job list' shows "
             "it (e.g. 1), without a fraction or suffix",
             text);
    fk_grpc_call_reply(call, FK_GRPC_INVALID_ARGUMENT, msg, NULL, 0);
    return 0;
}

/* The prologue of every admin call: close the batch (the engine's own
 * transactions need it closed), check the caller, decode; 0 = answered. */
static int admin_req(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer,
                     const pb_msgdesc_t *fields, void *msg, const uint8_t *req, size_t len)
{
    batch_flush(s);
    return admin(s, call, peer) && decode_req(call, fields, msg, req, len) == FK_OK;
}

/* The job named by job_id and its engine status; 0 = answered with the error. */
static int job_status(fk_service *s, fk_grpc_call *call, const char *job_id, int64_t *job,
                      fk_job_status *st)
{
    if (!parse_job_id(call, job_id, job))
        return 0;
    fk_err err = {0};
    int rc = fk_engine_status(s->e, *job, st, &err);
    if (rc)
        reply_err(call, rc, &err);
    return rc == FK_OK;
}

/* A client the store has seen (joined before a restart) counts as known. */
static int store_knows(void *ud, const char *identity)
{
    fk_service *s = ud;
    double when;
    fk_err err = {0};
    return fk_store_client_last_seen(s->st, identity, &when, &err) == FK_OK;
}

/* Whether identity has a live session now: joined (since the server started), not left, not
 * expired. */
static int live(const fk_service *s, const char *identity)
{
    const fk_client_rec *r = fk_clients_find(&s->clients, identity);
    return r && r->session[0] && !r->gone;
}

/* The clients the job cannot do without that have no live session: those the job type names
 * with a role (client_roles: dica/udica's test-only "unseen" domain, fedrf-tca's "target"
 * site). A training client may be missing (quorum and the deadline cover it); one of these
 * would leave the job "done" without the result it exists for. FK_EINVAL naming them (the
 * CLI's --wait_clients retries while the refusal says "not connected"). */
FK_CHECKRETURN static int check_presence(fk_service *s, const fk_jobconf *conf, fk_err *err)
{
    fk_err ignore = {0};
    const fk_method *m = (s->cfg.find ? s->cfg.find : fk_method_find)(conf->method, &ignore);
    int n = conf->n_clients;
    if (!m || !m->client_roles || n <= 0)
        return FK_OK;
    const char **roles = calloc((size_t)n, sizeof *roles);
    if (!roles)
        return fk_err_set(err, FK_ENOMEM, "out of memory checking the job's clients");
    if (m->client_roles(&conf->params, n, roles, &ignore)) {
        free(roles); /* a config the method refuses: the engine says why */
        return FK_OK;
    }
    char names[768] = "";
    size_t at = 0;
    int missing = 0;
    for (int i = 0; i < n; i++) {
        if (!roles[i] || live(s, conf->clients[i]))
            continue;
        if (missing < 8 && at < sizeof names) {
            int w = snprintf(names + at, sizeof names - at, "%s%s (%s)", missing ? ", " : "",
                             conf->clients[i], roles[i]);
            at = w < 0 ? sizeof names : at + (size_t)w;
        }
        missing++;
    }
    free(roles);
    if (!missing)
        return FK_OK;
    return fk_err_set(err, FK_EINVAL,
                      "job refused: %s %s%s not connected (the job type needs %s: no live "
                      "session, it never joined since the server started, left, or its session "
                      "expired); start %s, or submit with --wait_clients SECONDS to wait for %s",
                      missing == 1 ? "client" : "clients", names, missing > 8 ? ", ..." : "",
                      missing == 1 ? "it" : "them", missing == 1 ? "it" : "them",
                      missing == 1 ? "it" : "them");
}

/* The job's clients against what they advertised, and the ones it needs connected:
 * FK_EINVAL naming each offender. A config that does not parse is left to the engine, which
 * says why. */
FK_CHECKRETURN static int check_clients(fk_service *s, const char *config, fk_err *err)
{
    fk_jobconf conf;
    fk_err ignore = {0};
    int rc = FK_OK;
    if (fk_jobconf_parse(&conf, config, "job config", &ignore) == FK_OK) {
        rc = fk_roster_check(s->roster, &conf, store_knows, s, err);
        if (!rc)
            rc = check_presence(s, &conf, err);
    }
    fk_jobconf_close(&conf);
    if (rc == FK_EINVAL)
        fk_log(FK_LOG_WARN, "job_refused", "reason=\"%.400s\"", err->msg);
    return rc;
}

static void on_submit(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                      size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_SubmitJobRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_SubmitJobRequest_fields, &in, req, len))
        return;
    int64_t job = 0;
    fk_err err = {0};
    int line;
    size_t at;
    if (fk_codec_string_nul(req, len, fedkern_v1_SubmitJobRequest_config_tag, &line, &at)) {
        fk_codec_release(fedkern_v1_SubmitJobRequest_fields, &in);
        fk_err_set(&err, FK_EINVAL,
                   "job config line %d: a NUL byte (byte %zu); a job file is text and would "
                   "end there",
                   line, at + 1);
        reply_err(call, FK_EINVAL, &err);
        return;
    }
    int rc = in.skip_client_check ? FK_OK : check_clients(s, in.config ? in.config : "", &err);
    char *tagged = NULL; /* the config as stored: with its owner, the submitting admin */
    if (!rc)
        rc = fk_owners_tag(in.config ? in.config : "", identity_of(peer), &tagged, &err);
    if (!rc)
        rc = fk_engine_submit(s->e, tagged, fk_service_now(), &job, &err);
    free(tagged);
    fk_codec_release(fedkern_v1_SubmitJobRequest_fields, &in);
    if (rc) {
        reply_err(call, rc, &err);
        return;
    }
    fk_log(FK_LOG_INFO, "job_accepted", "job=%" PRId64 " admin=%s", job, identity_of(peer));
    fedkern_v1_SubmitJobResponse out = fedkern_v1_SubmitJobResponse_init_zero;
    snprintf(out.job_id, sizeof out.job_id, "%" PRId64, job);
    reply_msg(s, call, fedkern_v1_SubmitJobResponse_fields, &out);
    wake_waiters(s);
}

static void add_metric(fedkern_v1_Metric *m, pb_size_t *n, const char *name, double v)
{
    if (*n >= 64 || isnan(v))
        return;
    snprintf(m[*n].name, sizeof m[*n].name, "%s", name);
    m[*n].value = v;
    (*n)++;
}

/* Metrics of the last round that closed with an aggregate, or of round `want` if > 0
 * (absent until that round has closed). */
static void round_metrics(fk_service *s, int64_t job, int want, fedkern_v1_Metric *m, pb_size_t *n,
                          int *shown_round, int *shown_attempt)
{
    fk_store_round *rows;
    int count;
    fk_err err = {0};
    if (fk_store_round_list(s->st, job, &rows, &count, &err))
        return;
    int dropouts = 0, retries = 0;
    const fk_store_round *last = NULL;
    for (int i = 0; i < count; i++) {
        dropouts += rows[i].dropouts;
        retries += rows[i].closed == 2;
        if (rows[i].closed == 1 && (want <= 0 || rows[i].round == want))
            last = &rows[i];
    }
    if (last && shown_round) {
        *shown_round = last->round;
        *shown_attempt = last->attempt;
    }
    if (last) {
        add_metric(m, n, "round", last->round);
        add_metric(m, n, "participants", last->participants);
        add_metric(m, n, "planned", last->n_planned);
        add_metric(m, n, "dropouts", last->dropouts);
        add_metric(m, n, "aggregation_seconds", last->agg_seconds);
        fk_report q = {.loss = last->loss, .accuracy = last->accuracy, .error = last->error,
                       .misclust = last->misclust, .ari = last->ari, .rmse = last->rmse,
                       .model_error = last->model_error};
        for (int i = 0; i < FK_REPORT_N_FIELDS; i++) /* the measured ones (NaN: left out) */
            add_metric(m, n, fk_report_fields[i].name, fk_report_get(&q, fk_report_fields[i].name));
    }
    add_metric(m, n, "dropouts_total", dropouts);
    add_metric(m, n, "retries_total", retries);
    for (int i = 0; i < count; i++)
        fk_store_round_free(&rows[i]);
    free(rows);
}

/* The quality each client measured in one closed round: every phase of its attempt, a later
 * phase's measure winning per field as for the round's mean. */
typedef struct client_q {
    int seen;
    char identity[128];
    fk_report r;
} client_q;

typedef struct cq_ctx {
    client_q *c;
    int n;
} cq_ctx;

FK_CHECKRETURN static int cq_update(void *ctx, const fk_store_update *u, fk_err *err)
{
    (void)err;
    cq_ctx *q = ctx;
    if (u->client < 0 || u->client >= q->n)
        return FK_OK;
    client_q *c = &q->c[u->client];
    if (!c->seen) {
        fk_report_init(&c->r);
        snprintf(c->identity, sizeof c->identity, "%s", u->identity);
        c->seen = 1;
    }
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
        double v = fk_report_get(&u->report, fk_report_fields[i].name);
        if (!isnan(v))
            fk_report_set(&c->r, fk_report_fields[i].name, v);
    }
    if (u->report.n_samples > 0)
        c->r.n_samples = u->report.n_samples;
    return FK_OK;
}

/* out->client_quality of closed round (round, attempt): the clients that measured something,
 * by index, each with its role (the method's client_roles: "unseen", "target"; "" for a
 * training client). Best effort: a store error leaves the list out, the mean stands. */
static void client_quality(fk_service *s, int64_t job, const char *method, int round,
                           int attempt, fedkern_v1_JobStatusResponse *out)
{
    fk_err err = {0};
    fk_store_job sj;
    if (fk_store_job_get(s->st, job, &sj, &err))
        return;
    fk_jobconf conf;
    int n = fk_jobconf_parse(&conf, sj.config, "job config", &err) ? 0 : conf.n_clients;
    client_q *c = n ? calloc((size_t)n, sizeof *c) : NULL;
    const char **roles = n ? calloc((size_t)n, sizeof *roles) : NULL;
    const fk_method *m = fk_method_find(method, &err);
    if (c && roles && m && m->client_roles && m->client_roles(&conf.params, n, roles, &err))
        memset(roles, 0, (size_t)n * sizeof *roles); /* a config the method refuses: no roles */
    cq_ctx q = {.c = c, .n = n};
    int rc = c && roles ? FK_OK : FK_ENOMEM;
    for (int ph = 0; !rc && ph < 16; ph++) /* the engine's MAX_PHASES */
        rc = fk_store_report_each(s->st, job, round, attempt, ph, cq_update, &q, &err);
    /* where the job type names clients apart, the means apart too: train_<field> over the
     * training clients, <role>_<field> over each role's (weighted like the mean: n_samples,
     * 1 where not positive) */
    int any_role = 0;
    for (int k = 0; !rc && k < n; k++)
        any_role |= c[k].seen && roles[k] != NULL;
    for (int pass = 0; any_role && pass < 3; pass++) {
        const char *role = pass == 0 ? NULL : pass == 1 ? "unseen" : "target";
        for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
            double sum = 0, wsum = 0;
            for (int k = 0; k < n; k++) {
                double v = fk_report_get(&c[k].r, fk_report_fields[i].name);
                if (!c[k].seen || isnan(v) ||
                    (role ? !roles[k] || strcmp(roles[k], role) : roles[k] != NULL))
                    continue;
                double w = c[k].r.n_samples > 0 ? c[k].r.n_samples : 1.0;
                sum += w * v;
                wsum += w;
            }
            char name[48];
            snprintf(name, sizeof name, "%s_%s", role ? role : "train", fk_report_fields[i].name);
            if (wsum > 0)
                add_metric(out->metrics, &out->metrics_count, name, sum / wsum);
        }
    }
    for (int k = 0; !rc && k < n; k++) {
        if (!c[k].seen)
            continue;
        fedkern_v1_ClientQuality cq = fedkern_v1_ClientQuality_init_zero;
        for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
            double v = fk_report_get(&c[k].r, fk_report_fields[i].name);
            if (isnan(v) || cq.metrics_count >= 7)
                continue;
            snprintf(cq.metrics[cq.metrics_count].name, sizeof cq.metrics[0].name, "%s",
                     fk_report_fields[i].name);
            cq.metrics[cq.metrics_count++].value = v;
        }
        if (!cq.metrics_count) /* measured nothing (fedrf-tca's sources): not listed */
            continue;
        if (c[k].r.n_samples > 0) { /* the weight in the mean (1 where not positive) */
            snprintf(cq.metrics[cq.metrics_count].name, sizeof cq.metrics[0].name, "n_samples");
            cq.metrics[cq.metrics_count++].value = c[k].r.n_samples;
        }
        if (out->client_quality_count >= 64) {
            out->client_quality_more++;
            continue;
        }
        snprintf(cq.client, sizeof cq.client, "%s", c[k].identity);
        cq.index = (uint32_t)k;
        snprintf(cq.role, sizeof cq.role, "%s", roles[k] ? roles[k] : "");
        out->client_quality[out->client_quality_count++] = cq;
    }
    free(c);
    free(roles);
    fk_jobconf_close(&conf);
    fk_store_job_free(&sj);
}

static void on_status(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                      size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_JobStatusRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_JobStatusRequest_fields, &in, req, len))
        return;
    int64_t job;
    fk_job_status st;
    if (!job_status(s, call, in.job_id, &job, &st) || !job_access(s, call, peer, job))
        return;
    fedkern_v1_JobStatusResponse out = fedkern_v1_JobStatusResponse_init_zero;
    snprintf(out.job_id, sizeof out.job_id, "%" PRId64, job);
    out.state = job_state_pb(st.state);
    out.round = (uint32_t)(st.state == FK_JOB_DONE ? st.round : st.round - 1);
    out.rounds_total = (uint32_t)st.rounds;
    out.clients = (uint32_t)st.planned;
    out.job_clients = (uint32_t)(st.n_clients > 0 ? st.n_clients : 0);
    snprintf(out.message, sizeof out.message, "%s", st.failure);
    snprintf(out.method, sizeof out.method, "%.31s", st.method);
    int shown = 0, shown_attempt = 0;
    round_metrics(s, job, in.round > INT32_MAX ? INT32_MAX : (int)in.round, out.metrics,
                  &out.metrics_count, &shown, &shown_attempt);
    if (shown)
        client_quality(s, job, st.method, shown, shown_attempt, &out);
    if (st.state == FK_JOB_RUNNING) {
        add_metric(out.metrics, &out.metrics_count, "current_round", st.round);
        add_metric(out.metrics, &out.metrics_count, "current_attempt", st.attempt);
        add_metric(out.metrics, &out.metrics_count, "current_phase", st.phase);
        add_metric(out.metrics, &out.metrics_count, "current_answered", st.answered);
        add_metric(out.metrics, &out.metrics_count, "current_quorum", st.quorum);
        add_metric(out.metrics, &out.metrics_count, "current_aggregating", st.aggregating);
    }
    reply_msg(s, call, fedkern_v1_JobStatusResponse_fields, &out);
}

/* `job result --selected`: the round whose model the job type's criterion (its select_by
 * field, measured select_lag rounds later) picks among the closed rounds: the earliest best. */
FK_CHECKRETURN static int selected_round(fk_service *s, int64_t job, const char *method,
                                         int *round, char *why, size_t why_cap, fk_err *err)
{
    const fk_method *m = fk_method_find(method, err);
    if (!m)
        return FK_ENOTFOUND;
    if (!m->select_by)
        return fk_err_set(err, FK_EINVAL,
                          "job %" PRId64 " (%s) keeps no selected model apart from the last one "
                          "(fedrf-tca's select_holdout keeps it inside the model: see "
                          "`fedkern model show`)",
                          job, method);
    fk_store_round *rows;
    int count;
    int rc = fk_store_round_list(s->st, job, &rows, &count, err);
    if (rc)
        return rc;
    int best = 0;
    double best_v = NAN;
    for (int i = 0; i < count; i++) {
        fk_report q = {.loss = rows[i].loss, .accuracy = rows[i].accuracy,
                       .error = rows[i].error, .misclust = rows[i].misclust,
                       .ari = rows[i].ari, .rmse = rows[i].rmse,
                       .model_error = rows[i].model_error};
        double v = fk_report_get(&q, m->select_by);
        int r = rows[i].round - m->select_lag; /* the round whose model v scores */
        if (rows[i].closed != 1 || isnan(v) || r < 1)
            continue;
        if (!best || (m->select_max ? v > best_v : v < best_v)) {
            best = r;
            best_v = v;
        }
    }
    for (int i = 0; i < count; i++)
        fk_store_round_free(&rows[i]);
    free(rows);
    if (!best)
        return fk_err_set(err, FK_ENOTFOUND,
                          "job %" PRId64 " has no selected model yet: its %s is measured on a "
                          "round's model %d round%s later; see 'fedkern job status'",
                          job, m->select_by, m->select_lag, m->select_lag == 1 ? "" : "s");
    *round = best;
    snprintf(why, why_cap, "%s %.9g (%s), measured in round %d", m->select_by, best_v,
             m->select_max ? "largest" : "smallest", best + m->select_lag);
    return FK_OK;
}

/* Issue 34: append to the stored model (an encoded Bundle) the tensors that record what the
 * job's clients did to their raw files (common/data/prep_model.h), from what they reported
 * at their last Join; a Bundle's tensors are a repeated field, so the bytes concatenate. A
 * client whose preprocessing is unknown: nothing appended, and the model says so. */
FK_CHECKRETURN static int add_client_prep(fk_service *s, int64_t job, void **blob, size_t *blen,
                                          fk_err *err)
{
    fk_store_job row;
    int rc = fk_store_job_get(s->st, job, &row, err);
    if (rc)
        return rc;
    fk_jobconf conf;
    fk_err ignore = {0};
    fk_bundle b;
    fk_bundle_init(&b);
    const char *unknown = "";
    if (fk_jobconf_parse(&conf, row.config, "job config", &ignore) == FK_OK)
        rc = fk_roster_model_prep(s->roster, &conf, &b, &unknown, err);
    fk_jobconf_close(&conf);
    fk_store_job_free(&row);
    uint8_t *extra = NULL;
    size_t elen = 0;
    if (!rc && b.count)
        rc = fk_codec_bundle_encode(&b, &extra, &elen, err);
    fk_bundle_close(&b);
    if (!rc && elen) {
        void *g = realloc(*blob, *blen + elen);
        if (!g)
            rc = fk_err_set(err, FK_ENOMEM, "out of memory adding the clients' preprocessing");
        else {
            memcpy((uint8_t *)g + *blen, extra, elen);
            *blob = g;
            *blen += elen;
        }
    }
    free(extra);
    if (!rc && *unknown)
        fk_log(FK_LOG_INFO, "model_prep_unknown",
               "job=%" PRId64 " client=%s reason=\"the client did not report its preprocessing "
               "(an older fedkern-client, or not rejoined since the server started)\"",
               job, unknown);
    return rc;
}

static void on_result(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                      size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_JobResultRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_JobResultRequest_fields, &in, req, len))
        return;
    int64_t job;
    fk_job_status st;
    if (!job_status(s, call, in.job_id, &job, &st) || !job_access(s, call, peer, job))
        return;
    fedkern_v1_JobResultResponse out = fedkern_v1_JobResultResponse_init_zero;
    snprintf(out.job_id, sizeof out.job_id, "%" PRId64, job);
    out.state = job_state_pb(st.state);
    round_metrics(s, job, 0, out.metrics, &out.metrics_count, NULL, NULL);
    void *blob = NULL;
    size_t blen = 0;
    fk_codec_tx tx = {0};
    fk_bundle b;
    fk_bundle_init(&b);
    fk_err err = {0};
    int want = -1, got = 0;
    int rc = in.selected ? selected_round(s, job, st.method, &want, out.selected_by,
                                          sizeof out.selected_by, &err)
                         : FK_OK;
    if (!rc)
        rc = fk_store_model_get(s->st, job, want, &blob, &blen, &got, &err);
    if (!rc)
        rc = add_client_prep(s, job, &blob, &blen, &err);
    out.model_round = rc ? 0 : (uint32_t)got;
    if (rc == FK_OK)
        rc = payload_tx(blob, blen, fk_chunk_data_max(s->cfg.max_message, 0), in.chunk_index,
                        &out.chunk, &b, &tx, &err);
    else if (rc == FK_ENOTFOUND && want < 0)
        rc = FK_OK; /* no round closed yet: state and metrics only */
    uint8_t *buf = NULL;
    size_t olen = 0;
    if (!rc)
        rc = fk_codec_encode_job_result_response(&out, &tx, 0, &buf, &olen, &err);
    fk_bundle_close(&b);
    free(blob);
    if (rc && fk_store_damaged(s->st)) { /* the stored model failed its checksum */
        fk_grpc_call_reply(call, FK_GRPC_DATA_LOSS, err.msg, NULL, 0);
        return;
    }
    if (rc) {
        reply_err(call, rc, &err);
        return;
    }
    s->stats.bytes_out += olen;
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, olen, free);
}

/* ListJobs: the newest jobs from the store (id, method, state, rounds completed, times). */
static void on_list(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_ListJobsRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_ListJobsRequest_fields, &in, req, len))
        return;
    int limit = in.limit == 0 ? 100 : in.limit > 1000 ? 1000 : (int)in.limit;
    int64_t *ids = NULL;
    int n = 0;
    fk_err err = {0};
    int rc = fk_store_job_ids(s->st, -1, &ids, &n, &err);
    int take = n < limit ? n : limit;
    fedkern_v1_ListJobsResponse out = fedkern_v1_ListJobsResponse_init_zero;
    out.jobs = rc || !take ? NULL : calloc((size_t)take, sizeof *out.jobs);
    if (!rc && take && !out.jobs)
        rc = fk_err_set(&err, FK_ENOMEM, "out of memory listing jobs");
    /* the caller's own jobs (an operator's: every job), newest first */
    const char *me = identity_of(peer);
    int role = fk_owners_role(s->cfg.admins, s->cfg.n_admins, me);
    for (int i = 0, k = 0; !rc && i < take && k < n; k++) {
        fk_store_job row;
        if ((rc = fk_store_job_get(s->st, ids[n - 1 - k], &row, &err)))
            break;
        char owner[256];
        fk_owners_of(row.config, owner, sizeof owner);
        if (!fk_owners_may(role, owner, me)) {
            fk_store_job_free(&row);
            continue;
        }
        fedkern_v1_JobSummary *j = &out.jobs[i++];
        snprintf(j->job_id, sizeof j->job_id, "%" PRId64, row.id);
        snprintf(j->method, sizeof j->method, "%.31s", row.method);
        j->state = job_state_pb(row.state);
        j->round = (uint32_t)(row.state == FK_JOB_DONE ? row.round : row.round - 1);
        j->started = row.created;
        j->updated = row.updated;
        fk_store_job_free(&row);
        out.jobs_count = (pb_size_t)i;
    }
    free(ids);
    if (rc)
        reply_err(call, rc, &err);
    else
        reply_msg(s, call, fedkern_v1_ListJobsResponse_fields, &out);
    free(out.jobs);
}

static void on_cancel(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                      size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_CancelJobRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_CancelJobRequest_fields, &in, req, len))
        return;
    int64_t job;
    if (!parse_job_id(call, in.job_id, &job) || !job_access(s, call, peer, job))
        return;
    fk_err err = {0};
    int rc;
    if ((rc = fk_engine_cancel(s->e, job, fk_service_now(), &err))) {
        reply_err(call, rc, &err);
        return;
    }
    fk_log(FK_LOG_INFO, "job_cancel", "job=%" PRId64 " admin=%s", job, identity_of(peer));
    fedkern_v1_CancelJobResponse out = fedkern_v1_CancelJobResponse_init_zero;
    out.state = fedkern_v1_JobState_JOB_CANCELLED;
    reply_msg(s, call, fedkern_v1_CancelJobResponse_fields, &out);
}

/* `fedkern job delete`: a job that is not running, with everything stored for it, in one
 * fsync'd transaction (acknowledged only once durable). */
static void on_delete(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                      size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_DeleteJobRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_DeleteJobRequest_fields, &in, req, len))
        return;
    int64_t job;
    fk_job_status st;
    if (!job_status(s, call, in.job_id, &job, &st) || !job_access(s, call, peer, job))
        return;
    fk_err err = {0};
    int rc = FK_OK;
    if (st.state == FK_JOB_RUNNING || fk_engine_has_job(s->e, job))
        rc = fk_err_set(&err, FK_ESTATE,
                        "job %" PRId64 " is %s: cancel it first ('fedkern job cancel %" PRId64
                        "'), then delete it",
                        job, st.state == FK_JOB_RUNNING ? "running" : "still finishing", job);
    if (!rc) {
        batch_flush(s); /* the delete is a transaction of its own */
        rc = fk_store_job_delete(s->st, job, &err);
    }
    if (rc) {
        reply_err(call, rc, &err);
        return;
    }
    fk_log(FK_LOG_INFO, "job_deleted", "job=%" PRId64 " admin=%s state=%s", job,
           identity_of(peer), fk_job_state_name(st.state));
    fedkern_v1_DeleteJobResponse out = fedkern_v1_DeleteJobResponse_init_zero;
    out.state = job_state_pb(st.state);
    reply_msg(s, call, fedkern_v1_DeleteJobResponse_fields, &out);
}

/* A Predict call whose model is decoded and whose predict op runs off the loop. */
typedef struct predict_item {
    fk_offload_item it; /* first: the offload hands this back */
    fk_service *s;
    fk_grpc_call *call; /* NULL once the admin gave up (answered CANCELLED) */
    const fk_method *m;
    int64_t job;
    uint32_t timeout_ms;
    char admin[FK_IDENTITY_CAP];
    void *blob; /* the model as stored; decoded on the worker */
    size_t blob_len;
    fk_bundle model, q, res;
    int rc;
    fk_err err;
    uint8_t *buf; /* the encoded answer */
    size_t len;
} predict_item;

static void predict_item_free(predict_item *x)
{
    free(x->blob);
    free(x->buf);
    fk_bundle_close(&x->model);
    fk_bundle_close(&x->q);
    fk_bundle_close(&x->res);
    free(x);
}

/* On the worker: the model decoded, the method's predict op, the answer encoded. */
static void predict_item_run(fk_offload_item *it)
{
    predict_item *x = (predict_item *)it;
    x->rc = fk_codec_bundle_decode(x->blob, x->blob_len, &x->model, &x->err);
    free(x->blob);
    x->blob = NULL;
    if (!x->rc)
        x->rc = x->m->predict(&x->model, &x->q, &x->res, &x->err);
    if (!x->rc) {
        fedkern_v1_PredictResponse out = fedkern_v1_PredictResponse_init_zero;
        snprintf(out.job_id, sizeof out.job_id, "%" PRId64, x->job);
        fk_codec_tx tx = {.bundle = &x->res};
        x->rc = fk_codec_encode_predict_response(&out, &tx, &x->buf, &x->len, &x->err);
    }
}

static void predict_item_cancelled(fk_grpc_call *call, void *ud)
{
    predict_item *x = ud;
    x->call = NULL;
    fk_grpc_call_reply(call, FK_GRPC_CANCELLED, NULL, NULL, 0);
}

/* Back on the loop: answer, or (FK_ESTATE: the models stay on the clients) ask the clients. */
static void predict_item_done(fk_offload_item *it)
{
    predict_item *x = (predict_item *)it;
    fk_service *s = x->s;
    fk_grpc_call *call = x->call;
    if (!call) {
        s->stats.predict_failed++;
        predict_item_free(x);
        return;
    }
    fk_grpc_call_on_cancel(call, NULL, NULL);
    int rc = x->rc;
    if (rc == FK_ESTATE && s->closing)
        rc = fk_err_set(&x->err, FK_EIO, "the server is shutting down; ask again once it is back");
    if (rc == FK_ESTATE) {
        rc = predict_start(s, call, x->job, x->m, &x->model, &x->q, x->timeout_ms, &x->err);
        if (!rc) {
            fk_log(FK_LOG_INFO, "job_predict", "job=%" PRId64 " admin=%s by=clients", x->job,
                   x->admin);
            predict_item_free(x);
            return;
        }
    }
    count_predict(s, rc, &x->res, 0);
    if (rc) {
        reply_err(call, rc, &x->err);
    } else {
        fk_log(FK_LOG_INFO, "job_predict", "job=%" PRId64 " admin=%s", x->job, x->admin);
        s->stats.bytes_out += x->len;
        fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, x->buf, x->len, free);
        x->buf = NULL;
    }
    predict_item_free(x);
}

/* The query cap of every job type: no tensor of a batch holds more than
 * FK_PREDICT_MAX_QUERIES rows (checked before the model is read). */
FK_CHECKRETURN static int check_query_rows(const fk_bundle *q, fk_err *err)
{
    for (size_t i = 0; i < q->count; i++)
        if (q->items[i].ndim >= 1 && q->items[i].shape[0] > FK_PREDICT_MAX_QUERIES)
            return fk_err_set(err, FK_ELIMIT,
                              "Predict: %llu query rows in tensor '%s', at most %d per call; "
                              "send them in several calls (fedkern job predict splits a file)",
                              (unsigned long long)q->items[i].shape[0], q->items[i].name,
                              (int)FK_PREDICT_MAX_QUERIES);
    return FK_OK;
}

/* Predict: the method's predict op on a finished job's model (kahm with uploaded models),
 * on a worker thread (the loop reads the stored model and answers). Queries and result are
 * inline bundles, so one call is bounded by the message size and FK_PREDICT_MAX_QUERIES. */
static void on_predict(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                       size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    batch_flush(s);
    if (!admin(s, call, peer))
        return;
    predict_item *x = calloc(1, sizeof *x);
    if (!x) {
        s->stats.predict_failed++;
        fk_grpc_call_reply(call, FK_GRPC_RESOURCE_EXHAUSTED, "server out of memory", NULL, 0);
        return;
    }
    fk_bundle_init(&x->model);
    fk_bundle_init(&x->q);
    fk_bundle_init(&x->res);
    fedkern_v1_PredictRequest in;
    fk_err err;
    int rc = fk_codec_decode_predict_request(req, len, &in, &x->q, &err);
    if (!rc && (rc = check_query_rows(&x->q, &err))) /* before anything is looked up */
        fk_codec_release(fedkern_v1_PredictRequest_fields, &in);
    if (rc) {
        s->stats.predict_failed++;
        reply_err(call, rc, &err);
        predict_item_free(x);
        return;
    }
    int64_t job;
    fk_job_status st;
    if (!job_status(s, call, in.job_id, &job, &st) || !job_access(s, call, peer, job)) {
        s->stats.predict_failed++;
        fk_codec_release(fedkern_v1_PredictRequest_fields, &in);
        predict_item_free(x);
        return;
    }
    x->timeout_ms = in.timeout_ms;
    fk_codec_release(fedkern_v1_PredictRequest_fields, &in);
    const fk_method *m = fk_method_find(st.method, &err);
    rc = m ? FK_OK : FK_ENOTFOUND;
    if (!rc && !m->predict)
        rc = fk_err_set(&err, FK_EINVAL, "job %" PRId64 " (%s) serves no predictions", job,
                        st.method);
    if (!rc && st.state != FK_JOB_DONE)
        rc = fk_err_set(&err, FK_ESTATE, "job %" PRId64 " is not done; predict after it finished",
                        job);
    if (!rc) {
        rc = fk_store_model_get(s->st, job, -1, &x->blob, &x->blob_len, NULL, &err);
        if (rc == FK_ENOTFOUND)
            rc = fk_err_set(&err, FK_ENOTFOUND, "job %" PRId64 " has no model", job);
    }
    if (rc) {
        s->stats.predict_failed++;
        reply_err(call, rc, &err);
        predict_item_free(x);
        return;
    }
    x->s = s;
    x->call = call;
    x->m = m;
    x->job = job;
    snprintf(x->admin, sizeof x->admin, "%s", identity_of(peer));
    x->it.run = predict_item_run;
    x->it.done = predict_item_done;
    fk_grpc_call_on_cancel(call, predict_item_cancelled, x);
    fk_offload_submit(&s->off, &x->it);
}

/* --------------------------------------------------------------- tick */

/* ------------------------------------------- -wal checkpoints off the loop */

enum { CKPT_WAL_BYTES = 4 << 20 }; /* a checkpoint once the -wal holds this much: SQLite's own
                                   * default (1000 pages), so a small disk never fills with -wal
                                   * frames a checkpoint would have let SQLite reuse */

static void ckpt_work(uv_work_t *req)
{
    fk_service *s = req->data; /* its connection and ckpt_rc / ckpt_err only */
    s->ckpt_err = (fk_err){0};
    s->ckpt_rc = fk_store_checkpoint_passive(s->ckpt, &s->ckpt_left, &s->ckpt_err);
}

static void ckpt_after(uv_work_t *req, int status)
{
    fk_service *s = req->data;
    (void)status;
    s->ckpt_busy = 0;
    if (s->ckpt_rc)
        fk_log(FK_LOG_WARN, "wal_checkpoint_failed", "error=\"%s\"", s->ckpt_err.msg);
}

static void ckpt_maybe(fk_service *s)
{
    if (!s->ckpt || s->ckpt_busy || s->closing)
        return;
    if (!fk_store_reads_writer(s->ckpt, s->st)) { /* fk_store_recreate: the writer's again */
        fk_store_close(s->ckpt);
        s->ckpt = NULL;
        return;
    }
    if (fk_store_wal_bytes(s->st) < CKPT_WAL_BYTES)
        return;
    s->ckpt_busy = 1;
    s->ckpt_req.data = s;
    FK_UV_MUST(uv_queue_work(s->loop, &s->ckpt_req, ckpt_work, ckpt_after));
}

static void on_tick(uv_timer_t *t)
{
    fk_service *s = t->data;
    double now = fk_service_now();
    /* The engine's writes need the transaction closed, not synced; but a tick that may close a
     * phase (a deadline due, or a session check) counts every committed update first, as
     * before: only then the sync runs on the loop. */
    double idle = SESSION_MISSED * (double)s->cfg.heartbeat_ms / 1000.0;
    if (now >= s->engine_next || now - s->sessions_checked >= 0.25 * idle)
        batch_flush(s);
    else
        batch_flush_mode(s, 1);
    ckpt_maybe(s);
    seen_flush(s);
    double next;
    fk_err err = {0};
    /* A failed tick (the store) is logged; the timer tries again on its next turn. */
    if (fk_engine_tick(s->e, now, &next, &err))
        fk_log(FK_LOG_ERROR, "tick_failed", "error=\"%s\"", err.msg);
    else
        s->engine_next = next;
    expire_sessions(s, now); /* before the waiters: a phase may close without the expired */
    wake_waiters(s);
    /* Prediction requests whose clients all answered or whose deadline passed. */
    uint64_t id;
    while (fk_fanout_due(s->fo, now, &id, &next) == FK_OK)
        predict_finish(s, id);
    /* Forget chunked uploads abandoned for ten minutes, and those of a phase that no longer
     * waits for their sender (closed, or the sender answered or was left out). */
    for (int i = 0; i < s->n_partials;) {
        partial *p = &s->partials[i];
        if (now - p->touched > 600.0 ||
            !fk_engine_task_open(s->e, p->job, p->round, p->attempt, p->phase, p->identity))
            drop_partial(s, p);
        else
            i++;
    }
}

int fk_service_init(fk_service **out, uv_loop_t *loop, fk_grpc_server *srv, fk_engine *e,
                    fk_store *st, const fk_service_config *cfg, fk_err *err)
{
    *out = NULL;
    fk_service *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "out of memory for the service");
    s->loop = loop;
    s->srv = srv;
    s->e = e;
    s->st = st;
    s->cfg = *cfg;
    if (!s->cfg.heartbeat_ms)
        s->cfg.heartbeat_ms = 5000;
    if (!s->cfg.max_message)
        s->cfg.max_message = 4u << 20;
    if (!s->cfg.poll_max_ms)
        s->cfg.poll_max_ms = 30000;
    if (!s->cfg.poll_margin_ms)
        s->cfg.poll_margin_ms = 300;
    if (!s->cfg.tick_ms)
        s->cfg.tick_ms = 200;
    if (!s->cfg.reasm_limit)
        s->cfg.reasm_limit = FK_SERVICE_REASM_DEFAULT;
    if (!s->cfg.partial_client_limit)
        s->cfg.partial_client_limit = FK_SERVICE_PARTIAL_CLIENT_DEFAULT;
    if (!s->cfg.partial_total_limit)
        s->cfg.partial_total_limit = FK_SERVICE_PARTIAL_TOTAL_DEFAULT;
    static const struct {
        const char *path;
        fk_grpc_handler fn;
    } routes[] = {
        {"/grpc.health.v1.Health/Check", on_health},
        {FED "Join", on_join},
        {FED "PullTask", on_pull},
        {FED "PushUpdate", on_push},
        {FED "Heartbeat", on_heartbeat},
        {FED "Leave", on_leave},
        {FED "SubmitJob", on_submit},
        {FED "JobStatus", on_status},
        {FED "JobResult", on_result},
        {FED "CancelJob", on_cancel},
        {FED "DeleteJob", on_delete},
        {FED "Predict", on_predict},
        {FED "ListJobs", on_list},
    };
    int orc = fk_fanout_open(&s->fo, err);
    if (orc) {
        free(s);
        return orc;
    }
    if (fk_roster_new(&s->roster)) {
        fk_fanout_close(s->fo);
        free(s);
        return fk_err_set(err, FK_ENOMEM, "out of memory for the service");
    }
    /* what the clients advertised before a restart, so submits are checked before they rejoin */
    orc = fk_store_roster_load(st, s->roster, err);
    if (orc) {
        fk_fanout_close(s->fo);
        fk_roster_free(s->roster);
        free(s);
        return orc;
    }
    for (size_t i = 0; i < sizeof routes / sizeof *routes; i++) {
        int rc = fk_grpc_server_handle(srv, routes[i].path, routes[i].fn, s, err);
        if (rc) {
            fk_fanout_close(s->fo);
            fk_roster_free(s->roster);
            free(s);
            return rc;
        }
    }
    FK_UV_MUST(uv_check_init(loop, &s->batch_check));
    FK_UV_MUST(uv_idle_init(loop, &s->batch_idle));
    s->batch_check.data = s;
    s->batch_idle.data = s;
    s->handles += 2;
    FK_UV_MUST(uv_timer_init(loop, &s->tick));
    s->handles++;
    s->tick.data = s;
    FK_UV_MUST(uv_timer_start(&s->tick, on_tick, s->cfg.tick_ms, s->cfg.tick_ms));
    fk_engine_set_presence(e, presence_gone, s);
    fk_offload_init(&s->off, loop);
    fk_engine_set_offload(e, offload_engine, s);
    fk_err cerr = {0};
    if (fk_store_open_checkpointer(&s->ckpt, st, &cerr) && cerr.code != FK_ESTATE)
        fk_log(FK_LOG_WARN, "wal_checkpointer_unavailable", "error=\"%s\"", cerr.msg);
    *out = s;
    return FK_OK;
}

static void tick_closed(uv_handle_t *h)
{
    handle_gone(h->data);
}

void fk_service_close(fk_service *s, void (*on_closed)(void *ud), void *ud)
{
    batch_flush(s); /* answer staged updates while the engine can still count them */
    seen_flush(s);
    /* Work in flight keeps the loop running: a phase's close is stored and the jobs go on
     * (their tasks wait for the restart), a Predict is answered if its call is still open. */
    if (fk_offload_pending(&s->off))
        fk_log(FK_LOG_INFO, "server_stopping_waits",
               "works=%d msg=\"aggregations and "
               "predictions in flight finish first\"",
               fk_offload_pending(&s->off));
    s->closing = 1;
    s->on_closed = on_closed;
    s->closed_ud = ud;
    while (s->waiting) {
        waiter *w = s->waiting;
        if (w->call) {
            fk_grpc_call *call = w->call;
            w->call = NULL;
            reply_no_task(s, call, NULL, 1000);
        }
        waiter_drop(s, w);
    }
    /* Predict calls still waiting for clients: unavailable (the admin may ask again). */
    uint64_t id;
    double next;
    while (fk_fanout_due(s->fo, INFINITY, &id, &next) == FK_OK) {
        void *call;
        fk_fanout_drop(s->fo, id, &call);
        if (call) {
            fk_grpc_call_on_cancel(call, NULL, NULL);
            fk_grpc_call_reply(call, FK_GRPC_UNAVAILABLE, "the server is shutting down", NULL, 0);
        }
    }
    uv_close((uv_handle_t *)&s->batch_check, tick_closed);
    uv_close((uv_handle_t *)&s->batch_idle, tick_closed);
    FK_UV_MUST(uv_timer_stop(&s->tick));
    uv_close((uv_handle_t *)&s->tick, tick_closed);
}

void fk_service_stats_get(const fk_service *s, fk_service_stats *out)
{
    *out = s->stats;
    out->works_pending = fk_offload_pending(&s->off);
    out->works_done = s->off.completed;
    out->work_seconds = s->off.run_seconds;
    out->work_wait_seconds = s->off.wait_seconds;
    out->sessions = s->clients.n_sessions;
    out->index_bytes = fk_clients_bytes(&s->clients);
    out->seen_queued = s->clients.n_queue;
}

void fk_service_free(fk_service *s)
{
    if (!s)
        return;
    assert(fk_offload_pending(&s->off) == 0); /* uv_run returns only after the last work */
    fk_engine_set_offload(s->e, NULL, NULL);
    for (int i = 0; i < s->n_partials; i++)
        fk_reasm_close(&s->partials[i].r);
    free(s->partials);
    fk_fanout_close(s->fo);
    fk_roster_free(s->roster);
    free(s->batch);
    assert(s->n_synced == 0 && !s->sync_busy && !s->ckpt_busy);
    if (s->ckpt) {
        fk_store_close(s->ckpt);
        fk_store_autocheckpoint_default(s->st);
    }
    free(s->synced);
    free(s->synced_seq);
    fk_engine_set_presence(s->e, NULL, NULL); /* the engine may outlive the client index */
    fk_clients_close(&s->clients);
    free(s);
}
