/* A prediction task (TASK_PREDICT) of a finished job: one at a time, while the agent is
 * otherwise idle; the job's kept method state answers the queries on the thread pool, and the
 * answer (or why there is none) goes back in one PushUpdate, never stored nor resent. */
#include "client/agent_int.h"

#include <assert.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/net/codec.h"

static fk_agent *agent_of_p(fk__agent_pwork *p)
{
    return (fk_agent *)((char *)p - offsetof(fk_agent, p));
}

void fk__agent_pwork_reset(fk__agent_pwork *p)
{
    assert(!p->running); /* the thread pool still writes the answer into *p */
    fk_bundle_close(&p->q);
    fk_bundle_close(&p->ans);
    memset(p, 0, sizeof *p);
    fk_bundle_init(&p->q);
    fk_bundle_init(&p->ans);
}

static void predict_run(uv_work_t *req)
{
    fk__agent_pwork *p = req->data;
    double t0 = fk__agent_mono();
    fk_err_clear(&p->err);
    p->rc = p->ctx->m->client_predict(p->ctx->cli, &p->q, &p->ans, &p->err);
    p->seconds = fk__agent_mono() - t0;
}

static void predict_done(uv_work_t *req, int status)
{
    fk__agent_pwork *p = req->data;
    fk_agent *a = agent_of_p(p);
    assert(p->running);
    p->running = 0;
    a->handles--;
    if (a->stopping) {
        fk__agent_pwork_reset(p);
        fk__agent_maybe_finish_stop(a);
        return;
    }
    if (status && !p->rc)
        p->rc = fk_err_set(&p->err, FK_ESTATE, "the prediction did not run");
    if (p->rc)
        fk_log(FK_LOG_WARN, "predict_failed", "job=%" PRId64 " request=%" PRIu64 " error=\"%s\"",
               p->job, p->id, p->err.msg);
    else
        fk_log(FK_LOG_INFO, "predict_done", "job=%" PRId64 " request=%" PRIu64 " seconds=%.3f",
               p->job, p->id, p->seconds);
    p->ready = 1;
    fk__agent_next(a);
}

/* A TASK_PREDICT: the job's method state (kept after the job ended, or rebuilt from the
 * state file) answers the queries on the thread pool; a job it cannot serve gets an error. */
void fk__agent_start_predict(fk_agent *a, const fedkern_v1_PullTaskResponse *out, fk_bundle *q)
{
    fk__agent_pwork *p = &a->p;
    fk__agent_pwork_reset(p);
    p->job = strtoll(out->job_id, NULL, 10);
    p->id = out->predict_id;
    fk_bundle_close(&p->q);
    p->q = *q;
    fk_bundle_init(q);
    fk_err err = {0};
    fk__agent_job *j = fk__agent_job_context(a, p->job, out->method, out->params, &err);
    if (!j) {
        p->rc = err.code ? err.code : FK_ESTATE;
        p->err = err;
    } else if (!j->m->client_predict) {
        p->rc = fk_err_set(&p->err, FK_EINVAL, "job type %s answers no predictions", j->m->name);
    }
    if (p->rc) {
        fk_log(FK_LOG_WARN, "predict_failed", "job=%" PRId64 " request=%" PRIu64 " error=\"%s\"",
               p->job, p->id, p->err.msg);
        p->ready = 1;
        return;
    }
    p->ctx = j;
    p->running = 1;
    p->req.data = p;
    a->handles++;
    if (uv_queue_work(a->loop, &p->req, predict_run, predict_done)) {
        a->handles--;
        p->running = 0;
        p->rc = fk_err_set(&p->err, FK_ESTATE, "the prediction could not be queued");
        p->ready = 1;
    }
}

static void predict_push_done(void *ud, int status, const char *msg, const uint8_t *resp,
                              size_t len)
{
    fk_agent *a = fk__agent_completion(ud, status, msg);
    if (!a)
        return;
    fedkern_v1_PushUpdateResponse out;
    fk_err err = {0};
    if (status == FK_GRPC_OK &&
        fk_codec_decode(fedkern_v1_PushUpdateResponse_fields, &out, resp, len, &err) == FK_OK) {
        fk_log(FK_LOG_DEBUG, "predict_answered", "job=%" PRId64 " request=%" PRIu64 " state=%d",
               a->p.job, a->p.id, (int)out.state);
        fk_codec_release(fedkern_v1_PushUpdateResponse_fields, &out);
    } else {
        fk_log(FK_LOG_WARN, "predict_answer_refused",
               "job=%" PRId64 " request=%" PRIu64 " status=%s message=\"%s\"", a->p.job, a->p.id,
               fk_grpc_status_name(status), msg);
    }
    fk__agent_pwork_reset(&a->p); /* an answer is never resent: the request has a short deadline */
    if (status == FK_GRPC_FAILED_PRECONDITION)
        a->joined = 0; /* our session is gone: Join before the next call */
    fk__agent_next(a);
}

/* Send the answer (or why there is none) of the prediction task; never chunked. */
void fk__agent_send_predict_answer(fk_agent *a)
{
    fk__agent_pwork *p = &a->p;
    fedkern_v1_PushUpdateRequest in = fedkern_v1_PushUpdateRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    snprintf(in.job_id, sizeof in.job_id, "%" PRId64, p->job);
    fk__agent_new_update_id(in.update_id, sizeof in.update_id);
    in.predict_id = p->id;
    fk_codec_tx tx = {0};
    fk_err err = {0};
    size_t size = 0;
    if (!p->rc && fk_codec_bundle_size(&p->ans, FK_DTYPE_F64, &size, &err))
        p->rc = err.code, p->err = err;
    if (!p->rc && size + 1024 > a->max_message)
        p->rc = fk_err_set(&p->err, FK_ELIMIT,
                           "the answer (%zu bytes) does not fit one message "
                           "(%u bytes); ask with fewer queries",
                           size, a->max_message);
    if (p->rc) {
        in.has_report = true;
        snprintf(in.report.error, sizeof in.report.error, "%s", p->err.msg);
    } else {
        tx.bundle = &p->ans;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    p->ready = 0;
    if (fk_codec_encode_push_update_request(&in, &tx, 0, &buf, &len, &err) ||
        fk__agent_call(a, FK__AGENT_CALL_PUSH, "PushUpdate", buf, len, a->cfg.call_ms,
                       predict_push_done, &err)) {
        fk_log(FK_LOG_ERROR, "predict_answer_not_sent", "error=\"%s\"", err.msg);
        fk__agent_pwork_reset(p);
        fk__agent_pause_polling(a);
    }
}
