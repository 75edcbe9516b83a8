#include "server/service_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/method.h"
#include "common/net/codec.h"
#include "fedkern.pb.h"
#include "server/clients.h"
#include "server/fanout.h"
#include "server/offload.h"
#include "server/owners.h"
#include "server/roster.h"

/* -------------------------------------------------------------- admin */

static int job_state_pb(int state)
{
    switch (state) {
    case FK_JOB_RUNNING: return fedkern_v1_JobState_JOB_RUNNING;
    case FK_JOB_DONE: return fedkern_v1_JobState_JOB_DONE;
    case FK_JOB_FAILED: return fedkern_v1_JobState_JOB_FAILED;
    default: return fedkern_v1_JobState_JOB_CANCELLED;
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
    fk__service_batch_flush(s);
    return fk__service_admin(s, call, peer) &&
           fk__service_decode_req(call, fields, msg, req, len) == FK_OK;
}

/* The job named by job_id and its engine status; 0 = answered with the error. */
int fk__service_job_status(fk_service *s, fk_grpc_call *call, const char *job_id, int64_t *job,
                           fk_job_status *st)
{
    if (!parse_job_id(call, job_id, job))
        return 0;
    fk_err err = {0};
    int rc = fk_engine_status(s->e, *job, st, &err);
    if (rc)
        fk__service_reply_err(call, rc, &err);
    return rc == FK_OK;
}

/* The prologue of the admin calls on one job (status, result, delete): admin_req, then the job
 * named by job_id (the request's field, filled by the decode), its engine status and the
 * caller's right to it; 0 = answered. */
static int admin_job_req(fk_service *s, fk_grpc_call *call, const fk_tls_peer *peer,
                         const pb_msgdesc_t *fields, void *msg, const char *job_id,
                         const uint8_t *req, size_t len, int64_t *job, fk_job_status *st)
{
    return admin_req(s, call, peer, fields, msg, req, len) &&
           fk__service_job_status(s, call, job_id, job, st) &&
           fk__service_job_access(s, call, peer, *job);
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

void fk__service_on_submit(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
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
        fk__service_reply_err(call, FK_EINVAL, &err);
        return;
    }
    int rc = in.skip_client_check ? FK_OK : check_clients(s, in.config ? in.config : "", &err);
    char *tagged = NULL; /* the config as stored: with its owner, the submitting admin */
    if (!rc)
        rc =
            fk_owners_tag(in.config ? in.config : "", fk__service_identity_of(peer), &tagged, &err);
    if (!rc)
        rc = fk_engine_submit(s->e, tagged, fk_service_now(), &job, &err);
    free(tagged);
    fk_codec_release(fedkern_v1_SubmitJobRequest_fields, &in);
    if (rc) {
        fk__service_reply_err(call, rc, &err);
        return;
    }
    fk_log(FK_LOG_INFO, "job_accepted", "job=%" PRId64 " admin=%s", job,
           fk__service_identity_of(peer));
    fedkern_v1_SubmitJobResponse out = fedkern_v1_SubmitJobResponse_init_zero;
    snprintf(out.job_id, sizeof out.job_id, "%" PRId64, job);
    fk__service_reply_msg(s, call, fedkern_v1_SubmitJobResponse_fields, &out);
    fk__service_wake_waiters(s);
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
        fk_report q = {.loss = last->loss,
                       .accuracy = last->accuracy,
                       .error = last->error,
                       .misclust = last->misclust,
                       .ari = last->ari,
                       .rmse = last->rmse,
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
static void client_quality(fk_service *s, int64_t job, const char *method, int round, int attempt,
                           fedkern_v1_JobStatusResponse *out)
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

void fk__service_on_status(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_JobStatusRequest in = fedkern_v1_JobStatusRequest_init_zero;
    int64_t job;
    fk_job_status st;
    if (!admin_job_req(s, call, peer, fedkern_v1_JobStatusRequest_fields, &in, in.job_id, req, len,
                       &job, &st))
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
    fk__service_reply_msg(s, call, fedkern_v1_JobStatusResponse_fields, &out);
}

/* `job result --selected`: the round whose model the job type's criterion (its select_by
 * field, measured select_lag rounds later) picks among the closed rounds: the earliest best. */
FK_CHECKRETURN static int selected_round(fk_service *s, int64_t job, const char *method, int *round,
                                         char *why, size_t why_cap, fk_err *err)
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
    /* the rule is the store's, which retention also follows (it keeps that round) */
    int best;
    double best_v;
    int rc = fk_store_selected_round(s->st, job, m, &best, &best_v, err);
    if (rc)
        return rc;
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
    const char *unknown_in_conf = "";
    char unknown[128] = ""; /* a copy: the name points into conf, closed below */
    if (fk_jobconf_parse(&conf, row.config, "job config", &ignore) == FK_OK)
        rc = fk_roster_model_prep(s->roster, &conf, &b, &unknown_in_conf, err);
    snprintf(unknown, sizeof unknown, "%s", unknown_in_conf ? unknown_in_conf : "");
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

void fk__service_on_result(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_JobResultRequest in = fedkern_v1_JobResultRequest_init_zero;
    int64_t job;
    fk_job_status st;
    if (!admin_job_req(s, call, peer, fedkern_v1_JobResultRequest_fields, &in, in.job_id, req, len,
                       &job, &st))
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
        rc = fk__service_payload_tx(blob, blen, fk_chunk_data_max(s->cfg.max_message, 0),
                                    in.chunk_index, &out.chunk, &b, &tx, &err);
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
        fk__service_reply_err(call, rc, &err);
        return;
    }
    s->stats.bytes_out += olen;
    fk_grpc_call_reply_owned(call, FK_GRPC_OK, NULL, buf, olen, free);
}

/* ListJobs: the newest jobs from the store (id, method, state, rounds completed, times). */
void fk__service_on_list(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                         size_t len, uint64_t deadline, void *ud)
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
    const char *me = fk__service_identity_of(peer);
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
        fk__service_reply_err(call, rc, &err);
    else
        fk__service_reply_msg(s, call, fedkern_v1_ListJobsResponse_fields, &out);
    free(out.jobs);
}

void fk__service_on_cancel(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_CancelJobRequest in;
    if (!admin_req(s, call, peer, fedkern_v1_CancelJobRequest_fields, &in, req, len))
        return;
    int64_t job;
    if (!parse_job_id(call, in.job_id, &job) || !fk__service_job_access(s, call, peer, job))
        return;
    fk_err err = {0};
    int rc;
    if ((rc = fk_engine_cancel(s->e, job, fk_service_now(), &err))) {
        fk__service_reply_err(call, rc, &err);
        return;
    }
    fk_log(FK_LOG_INFO, "job_cancel", "job=%" PRId64 " admin=%s", job,
           fk__service_identity_of(peer));
    fedkern_v1_CancelJobResponse out = fedkern_v1_CancelJobResponse_init_zero;
    out.state = fedkern_v1_JobState_JOB_CANCELLED;
    fk__service_reply_msg(s, call, fedkern_v1_CancelJobResponse_fields, &out);
}

/* `fedkern job delete`: a job that is not running, with everything stored for it, in one
 * fsync'd transaction (acknowledged only once durable). */
void fk__service_on_delete(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                           size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fedkern_v1_DeleteJobRequest in = fedkern_v1_DeleteJobRequest_init_zero;
    int64_t job;
    fk_job_status st;
    if (!admin_job_req(s, call, peer, fedkern_v1_DeleteJobRequest_fields, &in, in.job_id, req, len,
                       &job, &st))
        return;
    fk_err err = {0};
    int rc = FK_OK;
    if (st.state == FK_JOB_RUNNING || fk_engine_has_job(s->e, job))
        rc = fk_err_set(&err, FK_ESTATE,
                        "job %" PRId64 " is %s: cancel it first ('fedkern job cancel %" PRId64
                        "'), then delete it",
                        job, st.state == FK_JOB_RUNNING ? "running" : "still finishing", job);
    if (!rc) {
        fk__service_batch_flush(s); /* the delete is a transaction of its own */
        rc = fk_store_job_delete(s->st, job, &err);
    }
    if (rc) {
        fk__service_reply_err(call, rc, &err);
        return;
    }
    fk_log(FK_LOG_INFO, "job_deleted", "job=%" PRId64 " admin=%s state=%s", job,
           fk__service_identity_of(peer), fk_job_state_name(st.state));
    fedkern_v1_DeleteJobResponse out = fedkern_v1_DeleteJobResponse_init_zero;
    out.state = job_state_pb(st.state);
    fk__service_reply_msg(s, call, fedkern_v1_DeleteJobResponse_fields, &out);
}
