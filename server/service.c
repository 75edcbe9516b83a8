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
#include "server/service_int.h"

#define FED "/fedkern.v1.Federation/"

double fk_service_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* "ID.ATTEMPT": a task id on the wire (fk_task_id_parse reads it back). */
static void task_id_format(char *out, size_t cap, int64_t job, int attempt)
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
const char *fk__service_identity_of(const fk_tls_peer *peer)
{
    return peer->id;
}

/* The caller may use the Federation calls: a client certificate, on the
 * allow-list when one is set. */
static int allowed(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer)
{
    const char *id = fk__service_identity_of(peer);
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
int fk__service_admin(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer)
{
    const char *id = fk__service_identity_of(peer);
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
int fk__service_job_access(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer, int64_t job)
{
    const char *id = fk__service_identity_of(peer);
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

void fk__service_reply_err(fk_grpc_call *call, int rc, const fk_err *err)
{
    fk_grpc_call_reply(call, status_of(rc), err->msg, NULL, 0);
}

/* Decode the request into msg: FK_OK, or the decoder's code after answering the call with it
 * (the convention of fk_codec_decode). */
int fk__service_decode_req(fk_grpc_call *call, const pb_msgdesc_t *fields, void *msg,
                           const uint8_t *req, size_t len)
{
    fk_err err = {0};
    int rc = fk_codec_decode(fields, msg, req, len, &err);
    if (rc)
        fk__service_reply_err(call, rc, &err);
    return rc;
}

/* Encode msg and send it (the buffer moves to the server). */
void fk__service_reply_msg(fk_service *s, fk_grpc_call *call, const pb_msgdesc_t *fields,
                           const void *msg)
{
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    int rc = fk_codec_encode(fields, msg, 0, &buf, &len, &err);
    if (rc) {
        fk__service_reply_err(call, rc, &err);
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
    assert(s->handles > 0); /* each close callback ends a handle counted when it was opened */
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
    /* every caller takes w->call before answering it: a drop after a reply (or a reply after
     * the drop) would answer the call twice */
    assert(!w->call);
    *w->pprev = w->next;
    if (w->next)
        w->next->pprev = w->pprev;
    fk_client_rec *r = w->counted ? fk_clients_find(&s->clients, w->identity) : NULL;
    /* records are never removed, and park counted this waiter's poll on its record */
    assert(!w->counted || (r && r->polls > 0));
    if (r && r->polls > 0)
        r->polls--;
    assert(s->stats.waiting_polls > 0); /* park counted it; each waiter is dropped once */
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
    fk__service_reply_msg(s, call, fedkern_v1_PullTaskResponse_fields, &msg);
}

/* What a response carries of an encoded bundle: the bundle inline when it fits
 * room and chunk 0 is asked for, else chunk chunk_index of it (header in *hdr). */
FK_CHECKRETURN int fk__service_payload_tx(const uint8_t *blob, size_t blen, size_t room, uint32_t chunk_index,
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
    task_id_format(msg.job_id, sizeof msg.job_id, t->job, t->attempt);
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
    int rc = fk__service_payload_tx(t->task, t->task_len, room, chunk_index, &msg.chunk, &b, &tx, &err);
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!rc)
        rc = fk_codec_encode_pull_task_response(&msg, &tx, 0, &buf, &len, &err);
    fk_bundle_close(&b);
    if (rc) {
        fk_log(FK_LOG_ERROR, "task_not_sent", "job=%" PRId64 " error=\"%s\"", t->job, err.msg);
        fk__service_reply_err(call, rc, &err);
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
        fk__service_reply_err(call, rc, &err);
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
void fk__service_wake_waiters(fk_service *s)
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
        waiter *next = w->next; /* before the answer: waiter_drop unlinks w */
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
    if (fk__service_decode_req(call, grpc_health_v1_HealthCheckRequest_fields, &in, req, len) != FK_OK)
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
    fk__service_reply_msg(s, call, grpc_health_v1_HealthCheckResponse_fields, &msg);
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
    /* both callers end the session first: a record is gone only without a session, so a
     * session id is set only on a record that is not gone (Join clears gone, client_called) */
    assert(!r->session[0]);
    if (r->gone)
        return;
    r->gone = 1;
    fk__service_batch_flush(s);
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
    if (fk__service_decode_req(call, fedkern_v1_JoinRequest_fields, &in, req, len) != FK_OK)
        return;
    const char *id = fk__service_identity_of(peer);
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
    /* client_called found ss (same identity) and creates no record, so ss is still valid */
    assert(ss->session[0] && !ss->gone);
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
    fk__service_reply_msg(s, call, fedkern_v1_JoinResponse_fields, &out);
}

static void on_pull(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    fedkern_v1_PullTaskRequest in;
    if (fk__service_decode_req(call, fedkern_v1_PullTaskRequest_fields, &in, req, len) != FK_OK)
        return;
    if (!session_ok(s, call, fk__service_identity_of(peer), in.session_id, "PullTask")) {
        fk_codec_release(fedkern_v1_PullTaskRequest_fields, &in);
        return;
    }
    client_called(s, fk__service_identity_of(peer));
    s->stats.pulls++;
    s->stats.bytes_in += len;
    const char *id = fk__service_identity_of(peer);
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

void fk__service_reply_push(fk_service *s, fk_grpc_call *call, int state, const uint32_t *missing,
                            size_t n_missing, const char *message)
{
    fedkern_v1_PushUpdateResponse out = fedkern_v1_PushUpdateResponse_init_zero;
    out.state = state;
    out.missing = (uint32_t *)missing;
    out.missing_count = (pb_size_t)n_missing;
    snprintf(out.message, sizeof out.message, "%s", message ? message : "");
    fk__service_reply_msg(s, call, fedkern_v1_PushUpdateResponse_fields, &out);
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
    fk__service_reply_push(s, call, state, miss, n, NULL);
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
        fk__service_reply_err(q->call, commit_rc, commit_err);
    } else if (q->rc == FK_OK && !q->dup) {
        fk_engine_push_apply(s->e, &q->p, now);
        s->stats.committed++;
        fk__service_reply_push(s, q->call, fedkern_v1_UpdateState_UPDATE_COMMITTED, NULL, 0, NULL);
    } else if (q->rc == FK_OK && q->dup == FK_STORE_IDEM_OTHER) {
        fk_log(FK_LOG_WARN, "update_id_reused", "identity=%s job=%" PRId64 " update_id=%s",
               q->identity, q->p.job, q->idem);
        fk_grpc_call_reply(q->call, FK_GRPC_ABORTED,
                           "update_id was committed before with other bytes; an update_id names "
                           "one payload: send a new update with a fresh update_id",
                           NULL, 0);
    } else if (q->rc == FK_OK) {
        s->stats.duplicates++;
        fk__service_reply_push(s, q->call, fedkern_v1_UpdateState_UPDATE_DUPLICATE, NULL, 0,
                   "this update was committed before");
    } else if (q->rc == FK_ESTATE) {
        s->stats.stale++;
        fk__service_reply_push(s, q->call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0, q->err.msg);
    } else {
        fk_log(FK_LOG_WARN, "update_refused", "identity=%s job=%" PRId64 " error=\"%s\"",
               q->identity, q->p.job, q->err.msg);
        fk__service_reply_err(q->call, q->rc, &q->err);
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
        fk__service_wake_waiters(s);
}

static void sync_start(fk_service *s);
static void ckpt_maybe(fk_service *s);

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
            if (fk_store_checkpoint_skipped(s->st)) /* a large commit: the pool copies it */
                ckpt_maybe(s);
            return;
        }
        rc = fk_store_sync_wal(fk_store_path(s->st), &err);
        if (rc)
            fk_log(FK_LOG_ERROR, "updates_not_synced", "error=\"%s\"", err.msg);
        answer_synced(s, UINT64_MAX, rc, &err); /* earlier batches first: this sync covers them */
    }
    if (fk_store_checkpoint_skipped(s->st)) /* a large commit's -wal: copied on the pool now */
        ckpt_maybe(s);
    double now = fk_service_now();
    s->n_batch = 0; /* an answer below may not stage anything, but keep the queue sound */
    for (int i = 0; i < n; i++)
        answer_staged(s, &s->batch[i], rc, &err, now);
    if (!rc)
        fk__service_wake_waiters(s);
}

/* Every staged and committed update answered before the caller goes on (the engine's own
 * writes, a probe, a failure report, shutdown): the sync, if any, runs here. */
void fk__service_batch_flush(fk_service *s)
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
        fk__service_reply_err(s->batch[i].call, why->code, why);
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
    fk__service_batch_flush(s); /* the engine writes in transactions of its own; staged updates count first */
    fk_engine_work_done(s->e, x->w, fk_service_now());
    free(x);
    if (fk_store_checkpoint_skipped(s->st)) /* a large checkpoint or model: copied on the pool */
        ckpt_maybe(s);
    fk__service_wake_waiters(s); /* the next phase's or round's tasks */
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

/* What a PushUpdate says about its update besides the payload, copied out of the request so
 * that the payload's preparation can go on after the request is released. */
typedef struct push_meta {
    char update_id[128];
    int round, phase;
    fk_report report;
} push_meta;

static void push_meta_of(const fedkern_v1_PushUpdateRequest *in, push_meta *m)
{
    snprintf(m->update_id, sizeof m->update_id, "%s", in->update_id);
    m->round = (int)in->round;
    m->phase = (int)in->phase;
    fk_report_init(&m->report);
    if (in->has_report) {
        m->report.n_samples = (double)in->report.n_samples;
        m->report.loss = in->report.loss;
        m->report.accuracy = in->report.accuracy;
        for (pb_size_t i = 0; i < in->report.metrics_count; i++) /* unknown names: ignored */
            if (strcmp(in->report.metrics[i].name, "loss") &&
                strcmp(in->report.metrics[i].name, "accuracy"))
                fk_report_set(&m->report, in->report.metrics[i].name, in->report.metrics[i].value);
    }
}

/* Hand a complete update (encoded bundle) to the engine; it is answered once the batch it
 * was staged in committed. digest (SHA-256 of blob) and check (the method's check_update)
 * when they were computed off the loop, else NULL. */
static void commit_update(fk_service *s, fk_grpc_call *call, const char *identity,
                          const push_meta *m, int64_t job, int attempt, const uint8_t *blob,
                          size_t len, const fk_bundle *msg, const uint8_t *digest,
                          const fk_engine_check *check)
{
    fk_err err = {0};
    int rc = batch_reserve(s, &err);
    if (rc) {
        fk_log(FK_LOG_WARN, "update_refused", "identity=%s job=%" PRId64 " error=\"%s\"",
               identity, job, err.msg);
        fk__service_reply_err(call, rc, &err);
        return;
    }
    staged *q = &s->batch[s->n_batch];
    memset(q, 0, sizeof *q);
    q->call = call;
    snprintf(q->identity, sizeof q->identity, "%s", identity);
    snprintf(q->idem, sizeof q->idem, "%s", m->update_id);
    q->p = (fk_push){.job = job,
                     .round = m->round,
                     .attempt = attempt,
                     .phase = m->phase,
                     .identity = q->identity,
                     .idem = q->idem,
                     .blob = blob,
                     .len = len,
                     .msg = msg,
                     .report = m->report,
                     .sha256 = digest,
                     .check = check};
    q->rc = fk_engine_push_stage(s->e, &q->p, fk_service_now(), &q->dup, &q->err);
    q->p.blob = NULL; /* stored (or not) now; the caller frees it */
    q->p.len = 0;
    q->p.msg = NULL;
    q->p.sha256 = NULL;
    q->p.check = NULL;
    s->n_batch++;
    if (q->rc == FK_EIO || q->rc == FK_ENOMEM) {
        fk_err why = q->err;
        batch_abort(s, &why);
    } else if (s->n_batch >= BATCH_MAX) {
        batch_flush_mode(s, 1);
    }
}

/* ------------------------------------------------- uploads off the loop (issue 35)
 *
 * A large PushUpdate's decode, the re-encode of its bundle, the SHA-256 of the bytes and the
 * method's check_update run on the offload (in the order they came, one at a time with the
 * engine's works); the loop then does with the results what it did before: the session
 * checks, the stage in the group commit (the idempotence lookup, the engine's checks of the
 * job's state, the INSERT) and the answer once the commit is synced. A request is the call's
 * until it is answered (grpc_server.h), so the worker reads it in place. */

typedef struct upload {
    fk_offload_item it; /* first: the offload hands this back */
    fk_service *s;
    fk_grpc_call *call;
    char identity[FK_IDENTITY_CAP];
    int step; /* STEP_REQUEST or STEP_UPDATE */
    /* STEP_REQUEST: the request, decoded on the worker */
    const uint8_t *req;
    size_t req_len;
    fedkern_v1_PushUpdateRequest in;
    fk_codec_rx rx;
    int decode_rc, decoded;
    /* both: the update's bundle (decoded) and its bytes (encoded), digest and check */
    fk_bundle b;
    int msg_ok; /* b is blob decoded */
    uint8_t *blob;
    size_t len;
    int enc_rc;
    uint8_t digest[32];
    int digest_ok;
    push_meta meta;
    int64_t job;
    int attempt;
    fk_engine_check check;
    int checking; /* check pinned its job */
    fk_err err;
} upload;

enum { STEP_REQUEST, STEP_UPDATE };

static void upload_free(upload *u)
{
    assert(!u->checking); /* a check still pinned would keep its job's phase open for good */
    fk_bundle_close(&u->b);
    if (u->decoded)
        fk_codec_release(fedkern_v1_PushUpdateRequest_fields, &u->in);
    free(u->blob);
    free(u);
}

static int plain_push(const fedkern_v1_PushUpdateRequest *in, const fk_codec_rx *rx)
{
    return !in->predict_id && !(in->has_report && in->report.error[0]) && !in->probe &&
           !rx->has_chunk && rx->has_bundle;
}

static void upload_run(fk_offload_item *it)
{
    upload *u = (upload *)it;
    if (u->step == STEP_REQUEST) {
        u->rx = (fk_codec_rx){.bundle = &u->b};
        u->decode_rc =
            fk_codec_decode_push_update_request(u->req, u->req_len, &u->in, &u->rx, &u->err);
        u->decoded = u->decode_rc == FK_OK;
        if (!u->decoded || !plain_push(&u->in, &u->rx))
            return;
        /* the bytes stored are the bundle's canonical encoding, as on the loop before */
        fk_err eerr = {0};
        u->enc_rc = fk_codec_bundle_encode(&u->b, &u->blob, &u->len, &eerr);
        if (u->enc_rc)
            u->err = eerr;
        u->msg_ok = 1;
    } else if (!u->msg_ok) { /* a chunked update, complete: its bytes, decoded once here */
        fk_err derr = {0};
        u->msg_ok = fk_codec_bundle_decode(u->blob, u->len, &u->b, &derr) == FK_OK;
        if (!u->msg_ok) /* the engine decodes it again on the loop and refuses it */
            fk_bundle_clear(&u->b);
    }
    if (u->blob && !u->enc_rc && !u->digest_ok) {
        fk_err herr = {0};
        u->digest_ok = fk_sha256(u->blob, u->len, u->digest, &herr) == FK_OK;
    }
    if (u->checking && u->msg_ok)
        fk_engine_check_run(&u->check, &u->b, &u->meta.report);
}

static void upload_done(fk_offload_item *it);

static void upload_submit(fk_service *s, upload *u)
{
    /* only update_ready pins, and it sets STEP_UPDATE first: a request decode pins nothing */
    assert(!u->checking || u->step == STEP_UPDATE);
    u->it.run = upload_run;
    u->it.done = upload_done;
    u->s = s;
    s->stats.uploads_offloaded++;
    fk_offload_submit(&s->off, &u->it);
}

/* A complete update: prepared off the loop when large (its job pinned for the check), else
 * staged at once as before. Takes blob (malloc'd); msg is blob decoded, or NULL. */
static void update_ready(fk_service *s, fk_grpc_call *call, const char *identity,
                         const push_meta *m, int64_t job, int attempt, uint8_t *blob, size_t len,
                         upload *from)
{
    if (!from && len < s->cfg.stage_min) {
        commit_update(s, call, identity, m, job, attempt, blob, len, NULL, NULL, NULL);
        free(blob);
        return;
    }
    if (from) /* blob is the bundle's own encoding: the request's bytes are not read again */
        fk_grpc_call_release_request(call);
    upload *u = from ? from : calloc(1, sizeof *u);
    if (!u) { /* no room to hand it off: on the loop, as before */
        commit_update(s, call, identity, m, job, attempt, blob, len, NULL, NULL, NULL);
        free(blob);
        return;
    }
    if (!from) {
        fk_bundle_init(&u->b);
        u->call = call;
        snprintf(u->identity, sizeof u->identity, "%s", identity);
        u->blob = blob;
        u->len = len;
    }
    u->step = STEP_UPDATE;
    u->meta = *m;
    u->job = job;
    u->attempt = attempt;
    /* a fresh upload, or one whose upload_done ended its check: begin/end stay paired */
    assert(!u->checking);
    u->checking =
        fk_engine_check_begin(s->e, job, m->round, attempt, m->phase, identity, &u->check);
    if (from && !u->checking) { /* decoded, encoded and hashed already: nothing left to do */
        commit_update(s, u->call, u->identity, &u->meta, job, attempt, u->blob, u->len, &u->b,
                      u->digest_ok ? u->digest : NULL, NULL);
        upload_free(u);
        return;
    }
    upload_submit(s, u);
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
        fk__service_reply_push(s, call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0,
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
        fk__service_reply_err(call, rc, &err);
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
        fk__service_reply_err(call, rc, &err);
        return;
    }
    push_meta m;
    push_meta_of(in, &m);
    update_ready(s, call, identity, &m, job, attempt, blob, len, NULL);
}

/* A decoded PushUpdate (rc: the decode's verdict); from: the upload that decoded it off the
 * loop (its bundle encoded and hashed there), NULL when decoded here. Consumes from. */
static void push_decoded(fk_service *s, fk_grpc_call *call, const char *id,
                         fedkern_v1_PushUpdateRequest *in, const fk_codec_rx *rx, fk_bundle *b,
                         int rc, fk_err *err, upload *from)
{
    if (rc == FK_OK && !session_ok(s, call, id, in->session_id, "PushUpdate")) {
        if (from)
            upload_free(from);
        return;
    }
    /* before the checks below: even a push refused for its content shows the client alive */
    client_called(s, id);
    int64_t job = 0;
    int attempt = 0;
    if (!rc && fk_task_id_parse(in->job_id, &job, &attempt))
        rc = fk_err_set(err, FK_EINVAL, "PushUpdate: job_id '%s' is not a task id", in->job_id);
    if (!rc && strlen(in->update_id) < 8)
        rc = fk_err_set(err, FK_EINVAL, "PushUpdate: update_id must have at least 8 characters");
    if (rc) {
        fk__service_reply_err(call, rc, err);
    } else if (in->predict_id) {
        fk__service_predict_answer(s, call, id, in, rx->has_bundle ? b : NULL, job);
    } else if (in->has_report && in->report.error[0]) {
        fk_log(FK_LOG_WARN, "client_task_failed",
               "identity=%s job=%s round=%u phase=%u error=\"%s\"", id, in->job_id, in->round,
               in->phase, in->report.error);
        fk_push p = {.job = job,
                     .round = (int)in->round,
                     .attempt = attempt,
                     .phase = (int)in->phase,
                     .identity = id,
                     .idem = in->update_id};
        fk__service_batch_flush(s); /* staged updates count first: the failure may close the phase */
        rc = fk_engine_fail(s->e, &p, in->report.error, fk_service_now(), err);
        if (rc == FK_OK)
            fk__service_wake_waiters(s); /* the phase may have closed: new tasks */
        fk__service_reply_push(
            s, call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0,
            rc == FK_OK ? "failure noted; the client counts as a dropout of this phase" : err->msg);
    } else if (in->probe) {
        fk__service_batch_flush(s); /* a staged update is not known until it committed */
        int known = 0;
        partial *p = find_partial(s, in->update_id, id);
        if (fk_store_update_known(s->st, in->update_id, id, &known, err) == FK_OK && known)
            fk__service_reply_push(s, call, fedkern_v1_UpdateState_UPDATE_DUPLICATE, NULL, 0, NULL);
        else if (p)
            reply_missing(s, call, p, fedkern_v1_UpdateState_UPDATE_PARTIAL);
        else
            fk__service_reply_push(s, call, fedkern_v1_UpdateState_UPDATE_UNKNOWN, NULL, 0, NULL);
    } else if (rx->has_chunk) {
        handle_chunk(s, call, id, in, rx, job, attempt);
    } else if (rx->has_bundle && from) {
        if (from->enc_rc) {
            fk__service_reply_err(call, from->enc_rc, &from->err);
        } else {
            push_meta m;
            push_meta_of(in, &m);
            update_ready(s, call, id, &m, job, attempt, from->blob, from->len, from);
            return; /* from is the update's now */
        }
    } else if (rx->has_bundle) {
        uint8_t *blob;
        size_t blen;
        rc = fk_codec_bundle_encode(b, &blob, &blen, err);
        if (rc) {
            fk__service_reply_err(call, rc, err);
        } else {
            /* b is blob decoded: the engine's checks read it instead of decoding again */
            push_meta m;
            push_meta_of(in, &m);
            commit_update(s, call, id, &m, job, attempt, blob, blen, b, NULL, NULL);
            free(blob);
        }
    } else {
        fk_grpc_call_reply(call, FK_GRPC_INVALID_ARGUMENT, "PushUpdate without a payload", NULL,
                           0);
    }
    if (from)
        upload_free(from);
}

static void upload_done(fk_offload_item *it)
{
    upload *u = (upload *)it;
    fk_service *s = u->s;
    int settle = 0;
    if (u->checking) {
        settle = fk_engine_check_end(s->e, &u->check);
        u->checking = 0;
    }
    if (settle) { /* pushes or departures came while it was pinned: the phase may end now */
        fk__service_batch_flush(s);
        fk_engine_settle(s->e, u->check.job, fk_service_now());
        fk__service_wake_waiters(s);
    }
    if (s->closing) {
        /* the group commit's handles are closed, so nothing can be staged now; the client
         * keeps the update and sends it again once the server is back */
        fk_err err = {0};
        fk_err_set(&err, FK_EIO,
                   "the server is shutting down; send the update again once it is "
                   "back");
        fk__service_reply_err(u->call, FK_EIO, &err);
        upload_free(u);
    } else if (u->step == STEP_REQUEST) {
        push_decoded(s, u->call, u->identity, &u->in, &u->rx, &u->b, u->decode_rc, &u->err, u);
    } else {
        commit_update(s, u->call, u->identity, &u->meta, u->job, u->attempt, u->blob, u->len,
                      u->msg_ok ? &u->b : NULL, u->digest_ok ? u->digest : NULL,
                      u->check.ran ? &u->check : NULL);
        upload_free(u);
    }
}

static void on_push(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                    uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    const char *id = fk__service_identity_of(peer);
    s->stats.pushes++;
    s->stats.bytes_in += len;
    upload *u = len >= s->cfg.stage_min && !s->closing ? calloc(1, sizeof *u) : NULL;
    if (u) { /* decoded, encoded and hashed off the loop: upload_done goes on */
        fk_bundle_init(&u->b);
        u->call = call;
        snprintf(u->identity, sizeof u->identity, "%s", id);
        u->step = STEP_REQUEST;
        u->req = req;
        u->req_len = len;
        /* the worker reads the request in place after on_push returned: the bytes stay until
         * update_ready has the canonical copy (or until the reply) */
        fk_grpc_call_keep_request(call);
        upload_submit(s, u);
        return;
    }
    fedkern_v1_PushUpdateRequest in;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_codec_rx rx = {.bundle = &b};
    fk_err err = {0};
    int rc = fk_codec_decode_push_update_request(req, len, &in, &rx, &err);
    int decoded = rc == FK_OK;
    push_decoded(s, call, id, &in, &rx, &b, rc, &err, NULL);
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
    if (fk__service_decode_req(call, fedkern_v1_HeartbeatRequest_fields, &in, req, len) != FK_OK)
        return;
    const char *id = fk__service_identity_of(peer);
    if (!session_ok(s, call, id, in.session_id, "Heartbeat")) {
        fk_codec_release(fedkern_v1_HeartbeatRequest_fields, &in);
        return;
    }
    fk_client_rec *ss = fk_clients_by_session(&s->clients, in.session_id);
    assert(ss && !strcmp(ss->identity, id)); /* session_ok just found this very record */
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
    fk__service_reply_msg(s, call, fedkern_v1_HeartbeatResponse_fields, &out);
}

static void on_leave(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req, size_t len,
                     uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    if (!allowed(s, call, peer))
        return;
    fedkern_v1_LeaveRequest in;
    if (fk__service_decode_req(call, fedkern_v1_LeaveRequest_fields, &in, req, len) != FK_OK)
        return;
    if (!session_ok(s, call, fk__service_identity_of(peer), in.session_id, "Leave")) {
        fk_codec_release(fedkern_v1_LeaveRequest_fields, &in);
        return;
    }
    fk_log(FK_LOG_INFO, "client_left", "identity=%s reason=\"%s\"", fk__service_identity_of(peer), in.reason);
    s->stats.leaves++;
    fk_codec_release(fedkern_v1_LeaveRequest_fields, &in);
    fk_client_rec *r;
    fk_err err = {0};
    if (fk_clients_get(&s->clients, fk__service_identity_of(peer), &r, &err) == FK_OK) {
        assert(r->session[0]); /* session_ok found it by its session; nothing ended it since */
        note_seen(s, r, 1);
        fk_clients_end_session(&s->clients, r); /* gone: no longer counted as connected */
        client_gone(s, r, fk_service_now());
        fk__service_wake_waiters(s); /* a phase may have closed: new tasks */
    }
    fedkern_v1_LeaveResponse out = fedkern_v1_LeaveResponse_init_zero;
    fk__service_reply_msg(s, call, fedkern_v1_LeaveResponse_fields, &out);
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
        fk__service_batch_flush(s);
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
    fk__service_wake_waiters(s);
    /* Prediction requests whose clients all answered or whose deadline passed. */
    uint64_t id;
    while (fk_fanout_due(s->fo, now, &id, &next) == FK_OK)
        fk__service_predict_finish(s, id);
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
    if (!s->cfg.stage_min)
        s->cfg.stage_min = FK_SERVICE_STAGE_MIN_DEFAULT;
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
        {FED "SubmitJob", fk__service_on_submit},
        {FED "JobStatus", fk__service_on_status},
        {FED "JobResult", fk__service_on_result},
        {FED "CancelJob", fk__service_on_cancel},
        {FED "DeleteJob", fk__service_on_delete},
        {FED "Predict", fk__service_on_predict},
        {FED "ListJobs", fk__service_on_list},
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
    for (size_t i = 0; i <= sizeof routes / sizeof *routes; i++) {
        /* on_push copies what it keeps (decoded, staged) before it returns, or, when a worker
         * decodes it, keeps the request until the worker's copy is made (update_ready): its
         * bytes are freed then, not at the acknowledgement after the commit, so an upload
         * holds the server's upload budget only while it is received and staged. */
        int rc = i < sizeof routes / sizeof *routes
                     ? fk_grpc_server_handle(srv, routes[i].path, routes[i].fn, s, err)
                     : fk_grpc_server_release_on_return(srv, FED "PushUpdate", err);
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
    if (s->ckpt) /* a large commit's checkpoint runs on the pool (ckpt_maybe), not in it */
        fk_store_autocheckpoint_small(st);
    *out = s;
    return FK_OK;
}

static void tick_closed(uv_handle_t *h)
{
    handle_gone(h->data);
}

void fk_service_close(fk_service *s, void (*on_closed)(void *ud), void *ud)
{
    fk__service_batch_flush(s); /* answer staged updates while the engine can still count them */
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
