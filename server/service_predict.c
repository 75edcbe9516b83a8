#include "server/service_int.h"

#include <inttypes.h>
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
#include "server/roster.h"

/* Predict timeouts when the clients answer (PredictRequest.timeout_ms). */
enum { PREDICT_DEFAULT_MS = 5000, PREDICT_MAX_MS = 600000 };

/* ------------------------------------------------- predictions by the clients */

/* The prediction counters (fk_service_stats) for one Predict call's outcome. */
static void count_predict(fk_service *s, int rc, const fk_bundle *res, int by_clients)
{
    if (rc) {
        s->stats.predict_failed++;
        return;
    }
    const fk_tensor *lab = fk_bundle_get(res, "labels"),
                    *mi = fk_bundle_get(res, "missing_clients"),
                    *un = fk_bundle_get(res, "unscored_classes");
    *(by_clients ? &s->stats.predict_clients : &s->stats.predict_server) += 1;
    s->stats.predict_queries += lab ? lab->len : 0;
    s->stats.predict_missing_clients += mi ? mi->len : 0;
    s->stats.predict_unscored_classes += un ? un->len : 0;
}

/* Answer the Predict call of request id with the combine of the answers taken. */
void fk__service_predict_finish(fk_service *s, uint64_t id)
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
        fk__service_reply_err(call, rc, &err);
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
void fk__service_predict_answer(fk_service *s, fk_grpc_call *call, const char *identity,
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
    int rc = fk_fanout_answer(s->fo, in->predict_id, identity,
                              failed ? NULL
                              : ans  ? ans
                                     : &empty,
                              &complete, &err);
    if (rc == FK_ESTATE)
        fk__service_reply_push(s, call, fedkern_v1_UpdateState_UPDATE_STALE, NULL, 0, err.msg);
    else if (rc) {
        fk_log(FK_LOG_WARN, "predict_answer_refused", "identity=%s job=%" PRId64 " error=\"%s\"",
               identity, job, err.msg);
        fk__service_reply_err(call, rc, &err);
    } else {
        fk__service_reply_push(s, call, fedkern_v1_UpdateState_UPDATE_COMMITTED, NULL, 0, NULL);
    }
    if (complete)
        fk__service_predict_finish(s, in->predict_id);
}

/* Mode B of kahm and the like: ask the clients that hold the job's models (the request
 * copies model and q); the call is answered later, by predict_finish. */
FK_CHECKRETURN static int predict_start(fk_service *s, fk_grpc_call *call, int64_t job,
                                        const fk_method *m, const fk_bundle *model,
                                        const fk_bundle *q, uint32_t timeout_ms, fk_err *err)
{
    if (!m->check_answer || !m->combine_answers)
        return fk_err_set(err, FK_EINVAL,
                          "job %" PRId64 " (%s): the models stay on the clients "
                          "and this job type cannot ask them",
                          job, m->name);
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
        rc = fk_err_set(err, FK_ELIMIT,
                        "Predict: the query batch (%zu bytes) and the job "
                        "config do not fit one task message to the clients (max_message %u "
                        "bytes); send fewer queries per call",
                        qsize, s->cfg.max_message);
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
        fk_fanout_spec sp = {.job = job,
                             .m = m,
                             .config = sj.config,
                             .model = model,
                             .queries = q,
                             .identities = (const char *const *)conf.clients,
                             .ask = ask,
                             .n_clients = conf.n_clients,
                             .deadline = fk_service_now() + 1e-3 * ms,
                             .ud = call};
        rc = fk_fanout_start(s->fo, &sp, &id, err);
    }
    free(ask);
    if (parsed)
        fk_jobconf_close(&conf);
    fk_store_job_free(&sj);
    if (rc)
        return rc;
    fk_log(FK_LOG_INFO, "predict_asked", "job=%" PRId64 " request=%" PRIu64 " clients=%d", job, id,
           n_ask);
    fk_grpc_call_on_cancel(call, predict_cancelled, s);
    fk__service_wake_waiters(s);
    double next;
    uint64_t due;
    if (fk_fanout_due(s->fo, fk_service_now(), &due, &next) == FK_OK && due == id)
        fk__service_predict_finish(s, id); /* nobody holds models: answer at once */
    return FK_OK;
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
        fk__service_reply_err(call, rc, &x->err);
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
void fk__service_on_predict(fk_grpc_call *call, const fk_tls_peer *peer, const uint8_t *req,
                            size_t len, uint64_t deadline, void *ud)
{
    (void)deadline;
    fk_service *s = ud;
    fk__service_batch_flush(s);
    if (!fk__service_admin(s, call, peer))
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
        fk__service_reply_err(call, rc, &err);
        predict_item_free(x);
        return;
    }
    int64_t job;
    fk_job_status st;
    if (!fk__service_job_status(s, call, in.job_id, &job, &st) ||
        !fk__service_job_access(s, call, peer, job)) {
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
        fk__service_reply_err(call, rc, &err);
        predict_item_free(x);
        return;
    }
    x->s = s;
    x->call = call;
    x->m = m;
    x->job = job;
    snprintf(x->admin, sizeof x->admin, "%s", fk__service_identity_of(peer));
    x->it.run = predict_item_run;
    x->it.done = predict_item_done;
    fk_grpc_call_on_cancel(call, predict_item_cancelled, x);
    fk_offload_submit(&s->off, &x->it);
}
