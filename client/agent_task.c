/* A training task: fetched by PullTask (whole or in chunks), run by the method's local_step on
 * the thread pool, saved with the method state in the job's state file, then pushed by
 * PushUpdate (whole or in chunks, resumed after a reconnect by a probe), or reported as a
 * failure the server counts as a dropout. */
#include "client/agent_int.h"

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/base/log.h"
#include "common/net/codec.h"

void fk__agent_work_reset(fk__agent_work *w)
{
    assert(!w->running); /* the thread pool still writes the step's results into *w */
    fk_reasm_close(&w->reasm);
    fk_bundle_close(&w->task);
    fk_bundle_close(&w->update);
    free(w->blob);
    memset(w, 0, sizeof *w);
    fk_bundle_init(&w->task);
    fk_bundle_init(&w->update);
}

/* Cancel the running step. UV_EBUSY (it runs already) is the usual answer: step_done then
 * sees `cancelled` and drops the result. */
void fk__agent_cancel_step(fk_agent *a)
{
    a->w.cancelled = 1;
    int rc = uv_cancel((uv_req_t *)&a->w.req);
    if (rc && rc != UV_EBUSY)
        fk_log(FK_LOG_ERROR, "libuv_failed", "call=uv_cancel error=\"%s\"", uv_strerror(rc));
}

void fk__agent_new_update_id(char *out, size_t cap)
{
    unsigned char r[16];
    if (RAND_bytes(r, sizeof r) != 1) { /* fall back on time and pid: still unique enough */
        uint64_t t = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
        memcpy(r, &t, sizeof t);
        memcpy(r + 8, &t, sizeof t);
    }
    size_t off = 0;
    for (size_t i = 0; i < sizeof r && off + 3 <= cap; i++)
        off += (size_t)snprintf(out + off, cap - off, "%02x", r[i]);
}

static fk_agent *agent_of(fk__agent_work *w)
{
    return (fk_agent *)((char *)w - offsetof(fk_agent, w));
}

/* On the thread pool, after the step: the method state and the update, in one
 * atomic file, before the update is sent. A file that cannot be written is
 * removed, so that a restart never continues from an older step. */
static void save_state(const char *dir, fk__agent_work *w)
{
    fk__agent_job *j = w->ctx;
    fk_cstate cs;
    fk_cstate_init(&cs);
    cs.job = w->job;
    cs.client = (uint32_t)j->client;
    cs.round = w->round;
    cs.phase = w->phase;
    snprintf(cs.task_id, sizeof cs.task_id, "%s", w->task_id);
    snprintf(cs.update_id, sizeof cs.update_id, "%s", w->update_id);
    memcpy(cs.digest, j->digest, 32);
    double rep[5] = {w->report.n_samples, w->report.loss, w->report.accuracy, w->report.error,
                     w->seconds};
    memcpy(cs.report, rep, sizeof rep);
    cs.update = w->blob; /* borrowed, like the job's name and config just below */
    cs.update_len = w->blob_len;
    cs.method = (char *)j->m->name; /* a restart rebuilds the job from these (reload_held) */
    cs.config = j->config;
    fk_err_clear(&w->save_err);
    w->save_rc = j->m->client_save(j->cli, &cs.state, &w->save_err);
    if (!w->save_rc)
        w->save_rc = fk_cstate_write(dir, &cs, &w->save_err);
    if (w->save_rc)
        fk__agent_remove_state(dir, w->job);
    cs.update = NULL;
    cs.update_len = 0;
    cs.method = cs.config = NULL;
    fk_cstate_close(&cs);
}

static void step_run(uv_work_t *req)
{
    fk__agent_work *w = req->data;
    double t0 = fk__agent_mono();
    fk_report_init(&w->report);
    fk_err_clear(&w->step_err);
    w->step_rc = w->ctx->m->local_step(w->ctx->cli, &w->task, &w->update, &w->report, &w->step_err);
    w->seconds = fk__agent_mono() - t0;
    if (!w->step_rc)
        w->step_rc = fk_codec_bundle_encode(&w->update, &w->blob, &w->blob_len, &w->step_err);
    if (w->step_rc)
        return;
    /* the id is made before the save, so the state file and the push carry the same one: an
     * update resent after a restart is then a duplicate to the server, not a second update */
    fk__agent_new_update_id(w->update_id, sizeof w->update_id);
    const char *dir = agent_of(w)->cfg.state_dir; /* set before the loop runs: read-only */
    if (dir)
        save_state(dir, w);
}

/* The task cannot be done here: tell the server (it counts us as a dropout of
 * the phase and stops offering the task), then pause before the next poll. */
static void report_failure(fk_agent *a, const char *why)
{
    fk__agent_work *w = &a->w;
    fk_bundle_close(&w->update);
    fk_bundle_init(&w->update);
    free(w->blob);
    w->blob = NULL;
    w->blob_len = 0;
    w->chunked = 0;
    w->failure = 1;
    /* capped at the field (255 characters), as snprintf would */
    snprintf(w->error, sizeof w->error, "%.255s", why && *why ? why : "unknown error");
    fk_report_init(&w->report);
    fk__agent_new_update_id(w->update_id, sizeof w->update_id);
    w->ready = 1;
    a->fail_n++;
    fk__agent_next(a);
}

/* The update (w->blob) is ready: chunk it if needed and send it. */
static void update_ready(fk_agent *a)
{
    fk__agent_work *w = &a->w;
    fk_err err = {0};
    size_t room = fk_chunk_data_max(a->max_message, 0);
    w->chunked = w->blob_len > room;
    if (w->chunked && fk_chunker_init(&w->chunker, w->blob, w->blob_len, room, &err)) {
        fk_log(FK_LOG_ERROR, "update_not_chunked", "error=\"%s\"", err.msg);
        report_failure(a, err.msg);
        return;
    }
    w->ready = 1;
    fk_log(FK_LOG_INFO, "step_done", "job=%s round=%u phase=%u seconds=%.3f bytes=%zu%s",
           w->task_id, w->round, w->phase, w->seconds, w->blob_len,
           w->from_disk ? " restored=1" : "");
    fk__agent_next(a);
}

static void step_done(uv_work_t *req, int status)
{
    fk__agent_work *w = req->data;
    fk_agent *a = agent_of(w);
    assert(w->running);
    w->running = 0;
    a->handles--;
    if (a->stopping) {
        fk__agent_work_reset(w);
        fk__agent_maybe_finish_stop(a);
        return;
    }
    if (status || w->cancelled) {
        fk_log(FK_LOG_INFO, "step_dropped", "job=%s round=%u reason=%s", w->task_id, w->round,
               w->cancelled ? "cancelled" : "error");
        fk__agent_work_reset(w);
        fk__agent_next(a);
        return;
    }
    if (w->step_rc) {
        fk_log(FK_LOG_ERROR, "step_failed", "job=%s round=%u phase=%u error=\"%s\"", w->task_id,
               w->round, w->phase, w->step_err.msg);
        report_failure(a, w->step_err.msg);
        return;
    }
    if (w->save_rc)
        fk_log(FK_LOG_WARN, "client_state_not_saved",
               "job=%s round=%u error=\"%s\" effect=\"a restart of this client loses the job's "
               "method state\"",
               w->task_id, w->round, w->save_err.msg);
    a->fail_n = 0;
    a->stats.steps++;
    a->stats.last_job = w->job;
    snprintf(a->stats.last_method, sizeof a->stats.last_method, "%s", w->ctx->m->name);
    a->stats.last_round = w->round;
    a->stats.last_seconds = w->seconds;
    a->stats.step_seconds_total += w->seconds;
    a->stats.last_report = w->report;
    update_ready(a);
}

static void start_step(fk_agent *a)
{
    fk__agent_work *w = &a->w;
    w->ctx = NULL;
    for (int i = 0; i < a->n_jobs; i++)
        if (a->jobs[i]->job == w->job)
            w->ctx = a->jobs[i];
    if (!w->ctx) {
        fk__agent_work_reset(w);
        return;
    }
    fk__agent_job *j = w->ctx;
    if (j->has_saved) { /* the first task after a restart: is it the one we answered? */
        fk_cstate *sv = &j->saved;
        j->has_saved = 0;
        if (!strcmp(sv->task_id, w->task_id) && sv->round == w->round && sv->phase == w->phase) {
            w->blob = sv->update;
            w->blob_len = sv->update_len;
            sv->update = NULL;
            sv->update_len = 0;
            snprintf(w->update_id, sizeof w->update_id, "%s", sv->update_id);
            /* the state file keeps these four; the quality metrics are not kept (not measured) */
            fk_report_init(&w->report);
            w->report.n_samples = sv->report[0];
            w->report.loss = sv->report[1];
            w->report.accuracy = sv->report[2];
            w->report.error = sv->report[3];
            w->seconds = sv->report[4];
            w->from_disk = 1;
            fk_cstate_close(sv);
            /* an inline push sends the bundle, a chunked one the bytes: keep both */
            fk_err err = {0};
            fk_bundle_close(&w->update);
            fk_bundle_init(&w->update);
            if (fk_codec_bundle_decode(w->blob, w->blob_len, &w->update, &err)) {
                fk_log(FK_LOG_ERROR, "update_not_restored", "job=%s error=\"%s\"", w->task_id,
                       err.msg);
                report_failure(a, err.msg);
                return;
            }
            fk_log(FK_LOG_INFO, "update_restored", "job=%s round=%u phase=%u update=%s", w->task_id,
                   w->round, w->phase, w->update_id);
            a->fail_n = 0;
            update_ready(a);
            return;
        }
        /* only the first task after a restart can be the one answered before it: another
         * task means the saved update is stale, so it is dropped and the step runs anew */
        fk_cstate_close(sv);
    }
    assert(!w->running); /* one step at a time: pulls wait while a step runs (fk__agent_next) */
    w->running = 1;
    w->req.data = w;
    a->handles++;
    if (uv_queue_work(a->loop, &w->req, step_run, step_done)) {
        a->handles--;
        w->running = 0;
        fk__agent_work_reset(w);
    }
}

/* The answer to a PullTask: nothing to do, a whole task, or one chunk of a large task. */
static void pull_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = fk__agent_completion(ud, status, msg);
    if (!a)
        return;
    fk__agent_work *w = &a->w;
    /* A long poll that timed out is the normal idle case: poll again. */
    if (status == FK_GRPC_DEADLINE_EXCEEDED) {
        fk__agent_next(a);
        return;
    }
    if (status == FK_GRPC_FAILED_PRECONDITION) {
        /* A half-received task is dropped: after the Join the next pull starts it over. */
        if (w->active && !w->running && !w->ready)
            fk__agent_work_reset(w);
        fk__agent_session_lost(a, "PullTask");
        return;
    }
    if (status != FK_GRPC_OK) {
        fk_log(FK_LOG_WARN, "pull_failed", "status=%s message=\"%s\"", fk_grpc_status_name(status),
               msg);
        fk__agent_request_disconnect(a, "PullTask failed");
        return;
    }
    /* An answer we cannot decode means a broken peer or stream: start over on a new connection. */
    fedkern_v1_PullTaskResponse out;
    fk_bundle b;
    fk_bundle_init(&b);
    fk_codec_rx rx = {.bundle = &b};
    fk_err err = {0};
    if (fk_codec_decode_pull_task_response(resp, len, &out, &rx, &err)) {
        fk_log(FK_LOG_ERROR, "bad_task", "error=\"%s\"", err.msg);
        fk_bundle_close(&b);
        fk__agent_work_reset(w);
        fk__agent_request_disconnect(a, "undecodable task");
        return;
    }
    int rc = FK_OK;
    if (out.kind == fedkern_v1_TaskKind_TASK_PREDICT && !w->active) {
        fk__agent_start_predict(a, &out, &b); /* takes b */
        fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
        fk_bundle_close(&b);
        fk__agent_next(a);
        return;
    }
    if (out.kind != fedkern_v1_TaskKind_TASK_RUN) {
        if (w->active)
            fk__agent_work_reset(w); /* a chunked task that ended meanwhile */
    } else {
        int64_t job = strtoll(out.job_id, NULL, 10);
        /* A new task: remember its coordinates and make sure the job's method state exists. */
        if (!w->active) {
            a->stats.tasks++;
            w->active = 1;
            snprintf(w->task_id, sizeof w->task_id, "%s", out.job_id);
            w->job = job;
            w->round = out.round;
            w->phase = out.phase;
            fk_reasm_init(&w->reasm, (size_t)a->cfg.limits.max_conn_memory);
            if (!fk__agent_job_context(a, job, out.method, out.params, &err)) {
                fk_log(FK_LOG_ERROR, "task_refused", "job=%s error=\"%s\"", out.job_id, err.msg);
                rc = FK_EINVAL;
            }
        }
        /* The payload: a chunk goes to the reassembler (complete once all arrived), a whole
         * bundle becomes the task directly. */
        int complete = 0;
        if (!rc && rx.has_chunk) {
            rc = fk_reasm_add(&w->reasm, &out.chunk, rx.chunk_data, rx.chunk_len, &complete, &err);
            if (!rc && complete) {
                uint8_t *payload;
                size_t plen;
                rc = fk_reasm_take(&w->reasm, &payload, &plen, &err);
                if (!rc) {
                    rc = fk_codec_bundle_decode(payload, plen, &w->task, &err);
                    free(payload);
                }
            }
        } else if (!rc) {
            fk_bundle_close(&w->task);
            w->task = b;
            fk_bundle_init(&b);
            complete = 1;
        }
        /* Then: report a task we cannot take, run a complete one, or ask for the next chunk. */
        if (rc) {
            fk_log(FK_LOG_ERROR, "task_failed", "job=%s error=\"%s\"", w->task_id, err.msg);
            fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
            fk_bundle_close(&b);
            report_failure(a, err.msg);
            return;
        } else if (complete) {
            start_step(a);
        } else {
            uint32_t miss;
            fk_reasm_missing(&w->reasm, &miss, 1);
            fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
            fk_bundle_close(&b);
            fk__agent_send_pull(a, w->task_id, w->round, w->phase, miss);
            return;
        }
    }
    /* No task: the server's list of running jobs lets us drop state of ended ones, and its
     * retry_after_ms paces the next poll. */
    if (out.kind == fedkern_v1_TaskKind_TASK_NONE && out.running_jobs_listed)
        fk__agent_forget_ended_jobs(a, &out);
    fk_codec_release(fedkern_v1_PullTaskResponse_fields, &out);
    fk_bundle_close(&b);
    if (out.kind == fedkern_v1_TaskKind_TASK_NONE && out.retry_after_ms) {
        fk__agent_retry_in(a, out.retry_after_ms);
        return;
    }
    fk__agent_next(a);
}

void fk__agent_send_pull(fk_agent *a, const char *task_id, uint32_t round, uint32_t phase,
                         uint32_t chunk)
{
    fedkern_v1_PullTaskRequest in = fedkern_v1_PullTaskRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    if (task_id) {
        snprintf(in.job_id, sizeof in.job_id, "%s", task_id);
        in.round = round;
        in.phase = phase;
        in.chunk_index = chunk;
    }
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    if (fk_codec_encode(fedkern_v1_PullTaskRequest_fields, &in, 0, &buf, &len, &err) ||
        fk__agent_call(a, FK__AGENT_CALL_PULL, "PullTask", buf, len,
                       task_id ? a->cfg.call_ms : a->cfg.poll_ms, pull_done, &err)) {
        /* A half-received task is dropped: the next pull (after the pause) starts it over. */
        if (task_id)
            fk__agent_work_reset(&a->w);
        fk__agent_not_sent(a, "PullTask", &err);
    }
}

void fk__agent_send_push(fk_agent *a);

static void push_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    fk_agent *a = fk__agent_completion(ud, status, msg);
    if (!a)
        return;
    fk__agent_work *w = &a->w;
    if (status != FK_GRPC_OK) {
        /* UNAVAILABLE from the server (e.g. its disk is full): keep the update, retry later. */
        fk_log(FK_LOG_WARN, "push_refused", "job=%s status=%s message=\"%s\"", w->task_id,
               fk_grpc_status_name(status), msg);
        if (status == FK_GRPC_FAILED_PRECONDITION) { /* our session is gone (server restart) */
            fk__agent_session_lost(
                a, "PushUpdate"); /* the update stays ready: resent after the Join */
        } else if (status == FK_GRPC_INVALID_ARGUMENT) {
            int failure = w->failure;
            fk__agent_work_reset(w);
            if (failure)
                fk__agent_pause_polling(a);
            else
                fk__agent_next(a);
        } else {
            fk__agent_request_disconnect(a, "PushUpdate refused");
        }
        return;
    }
    fedkern_v1_PushUpdateResponse out;
    fk_err err = {0};
    if (fk_codec_decode(fedkern_v1_PushUpdateResponse_fields, &out, resp, len, &err)) {
        fk__agent_request_disconnect(a, "undecodable PushUpdate answer");
        return;
    }
    int done = 0;
    switch (out.state) {
    case fedkern_v1_UpdateState_UPDATE_COMMITTED:
        a->stats.committed++;
        done = 1;
        break;
    case fedkern_v1_UpdateState_UPDATE_DUPLICATE:
        a->stats.duplicates++;
        done = 1;
        break;
    case fedkern_v1_UpdateState_UPDATE_STALE:
        a->stats.stale++;
        fk_log(FK_LOG_INFO, "update_stale", "job=%s round=%u message=\"%s\"", w->task_id, w->round,
               out.message);
        done = 1;
        break;
    case fedkern_v1_UpdateState_UPDATE_PARTIAL:
        w->next_chunk = out.missing_count ? out.missing[0] : w->next_chunk;
        break;
    case fedkern_v1_UpdateState_UPDATE_UNKNOWN: w->next_chunk = 0; break;
    default: break;
    }
    fk_codec_release(fedkern_v1_PushUpdateResponse_fields, &out);
    if (done && w->failure) {
        fk_log(FK_LOG_INFO, "failure_reported", "job=%s round=%u phase=%u", w->task_id, w->round,
               w->phase);
        fk__agent_work_reset(w);
        fk__agent_pause_polling(a);
        return;
    }
    if (done) {
        fk_log(FK_LOG_DEBUG, "update_done", "job=%s round=%u phase=%u", w->task_id, w->round,
               w->phase);
        fk__agent_work_reset(w);
    }
    fk__agent_next(a);
}

void fk__agent_send_push(fk_agent *a)
{
    fk__agent_work *w = &a->w;
    fedkern_v1_PushUpdateRequest in = fedkern_v1_PushUpdateRequest_init_zero;
    snprintf(in.session_id, sizeof in.session_id, "%s", a->session_id);
    snprintf(in.job_id, sizeof in.job_id, "%s", w->task_id);
    in.round = w->round;
    in.phase = w->phase;
    snprintf(in.update_id, sizeof in.update_id, "%s", w->update_id);
    in.has_report = true;
    in.report.n_samples = w->report.n_samples > 0 ? (uint64_t)w->report.n_samples : 0;
    in.report.loss = w->report.loss; /* NaN = not measured, as in fk_report */
    in.report.accuracy = w->report.accuracy;
    in.report.seconds = w->seconds;
    for (int i = 2; i < FK_REPORT_N_FIELDS; i++) { /* loss and accuracy have fields of their own */
        double v = fk_report_get(&w->report, fk_report_fields[i].name);
        if (isnan(v) ||
            in.report.metrics_count >= sizeof in.report.metrics / sizeof *in.report.metrics)
            continue;
        fedkern_v1_Metric *m = &in.report.metrics[in.report.metrics_count++];
        snprintf(m->name, sizeof m->name, "%s", fk_report_fields[i].name);
        m->value = v;
    }
    fk_codec_tx tx = {0};
    fk_err err = {0};
    int rc = FK_OK;
    if (w->failure) {
        snprintf(in.report.error, sizeof in.report.error, "%s", w->error);
    } else if (w->probe_first) {
        in.probe = true;
        w->probe_first = 0;
    } else if (!w->chunked) {
        tx.bundle = &w->update;
    } else {
        const uint8_t *data = NULL;
        size_t dlen = 0;
        rc = fk_chunker_get(&w->chunker, w->next_chunk, &in.chunk, &data, &dlen, &err);
        tx.chunk_data = data;
        tx.chunk_len = dlen;
        /* never past the last chunk: the answer to it (PARTIAL with what is missing, or the
         * commit) says what to send next, and a lost answer means the last one again */
        if (w->next_chunk + 1 < w->chunker.total)
            w->next_chunk++;
        a->stats.chunks_sent++;
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (!rc)
        rc = fk_codec_encode_push_update_request(&in, &tx, 0, &buf, &len, &err);
    if (rc) {
        fk_log(FK_LOG_ERROR, "push_not_encoded", "error=\"%s\"", err.msg);
        fk__agent_work_reset(w);
        fk__agent_pause_polling(a); /* nothing is in flight: poll again after the pause */
        return;
    }
    a->stats.pushes++;
    if (fk__agent_call(a, FK__AGENT_CALL_PUSH, "PushUpdate", buf, len, a->cfg.call_ms, push_done,
                       &err))
        fk__agent_not_sent(a, "PushUpdate",
                           &err); /* the update stays ready: sent again after the pause */
}
