/* fedkern job submit|status|result|cancel: the admin RPCs of a fedkern-server. */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "cli/cli.h"
#include "cli/job.h"
#include "common/base/options.h"
#include "cli/plot.h"
#include "common/base/params.h"
#include "common/net/limits.h"
#include "common/base/uvcheck.h"
#include "common/data/load.h"
#include "common/data/source.h"
#include "common/methods/jobkeys.h"
#include "common/methods/method.h"
#include "common/methods/predict.h"
#include "common/net/chunk.h"
#include "common/net/codec.h"
#include "common/net/grpc_client.h"
#include "common/net/hostport.h"
#include "common/net/modelfile.h"
#include "fedkern.pb.h"
#include "health.pb.h"

#define FED "/fedkern.v1.Federation/"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern job submit JOB.conf       [connection options] [--skip_client_check]\n"
            "                                         [--wait_clients SECONDS]\n"
            "       fedkern job list                  [connection options] [--limit N] [--json]\n"
            "       fedkern job status ID             [connection options] [--round N] [--json]\n"
            "                                         [--follow [--interval SECONDS]]\n"
            "       fedkern job result ID --out FILE  [connection options] [--wait SECONDS] [--current]\n"
            "                                         [--selected] [--json]\n"
            "       fedkern job cancel ID             [connection options]\n"
            "       fedkern job delete ID             [connection options]\n"
            "       fedkern job plot ID --out FILE.svg [connection options] [--json]\n"
            "       fedkern job predict ID --data FILE [--out FILE] [--no_labels] [--json]\n"
            "                                         [--client N] [--timeout SECONDS]\n"
            "                                         [loader options]\n"
            "       fedkern job keys [METHOD]         (no server: the keys a job file may set)\n"
            "       fedkern job health                [connection options] [--json]\n"
            "                                         (also `fedkern health`)\n"
            "\n"
            "Talks to a fedkern-server with an admin certificate.\n"
            "\n"
            "connection options:\n"
            "  --server HOST:PORT   the server (127.0.0.1:7443)\n"
            "  --server_name NAME   name the server certificate must carry (default: HOST)\n"
            "  --tls_dir DIR        certificate directory from 'fedkern certs'\n"
            "  --name NAME          the admin certificate admin-NAME.pem/.key in DIR\n"
            "  --timeout_ms MS      per call (10000)\n"
            "\n"
            "submit is refused when the job names clients that never joined the server, clients\n"
            "that joined without its data set, or data sets whose column counts differ between\n"
            "clients (each named); --skip_client_check submits without that check.\n"
            "A job whose type needs a client connected (a test-only or hold-out role: dica and\n"
            "udica's unseen domain, fedrf-tca's target) is refused while it has no live session.\n"
            "--wait_clients SECONDS first waits up to SECONDS for every client the job names to\n"
            "have joined, and for those it needs to be connected (the submit is retried while\n"
            "the refusal names one), so a script needs no polling loop.\n"
            "predict takes the loader options of `fedkern data info` (--label last, --header,\n"
            "--delim C, --prep zscore, --affine FILE, ...; see fedkern data --help).\n"
            "An unknown option is a usage error (exit 2) before anything else is done.\n"
            "list: the newest jobs (--limit N, 20; at most 1000): id, method, state, rounds done,\n"
            "when submitted and last changed (UTC).\n"
            "status --round N shows the metrics of closed round N instead of the last round's.\n"
            "status --follow prints one line per closed round (polling every --interval SECONDS,\n"
            "1) until the job ends, then exits 0 if it is done, 1 if it failed or was cancelled;\n"
            "a status call that times out (a busy server) is tried again for up to 600 s.\n"
            "The metrics of a round: participants, planned, dropouts, aggregation_seconds and the\n"
            "quality the clients measured (sample-weighted means): loss, accuracy, misclust (the\n"
            "mis-clustering rate after label alignment), ari (adjusted Rand index), rmse, error.\n"
            "delete removes a job that is not running (cancel it first) with everything the\n"
            "server stored for it: rounds, updates, checkpoints, models; its owner or an operator\n"
            "only. The answer comes once the delete is durable. The file keeps its size (later\n"
            "writes reuse the space); `fedkern state compact` gives it back, server stopped.\n"
            "plot draws every closed round's quality and participation as SVG (--json: the rows).\n"
            "health asks the server's grpc.health.v1 Check and prints SERVING and the call's\n"
            "milliseconds: exit 0 when it serves, 1 when it does not (stopping) or cannot be\n"
            "reached within --timeout_ms.\n"
            "result writes the model of a done job; a job still running after --wait SECONDS\n"
            "exits 1 and writes nothing, unless --current asks for its latest model; a status\n"
            "call that times out or finds the server unavailable is tried again within the wait.\n"
            "A cancelled or failed job keeps the model of its last completed round: --current\n"
            "writes it. result --selected writes the model the job type's own criterion picks\n"
            "among the closed rounds instead of the last one (the mixtures: the smallest loss, the\n"
            "mean negative log-likelihood the clients measured on the model, no labels needed);\n"
            "the round and the criterion are printed. fedrf-tca's select_holdout keeps its\n"
            "selected model inside the model file (W_sel, sel_round): see `fedkern model show`.\n"
            "A job file is INI: method, dataset, clients (certificate names, in client order),\n"
            "rounds, seed, quorum (fraction of a round's clients needed at the deadline), deadline\n"
            "(seconds), retries, max_refusals, name, and the method's own keys (`fedkern job keys\n"
            "METHOD`); the server refuses any other key, naming the nearest known one. The model\n"
            "file is an encoded fedkern.v1.Bundle.\n"
            "predict: labels and distances of the rows of FILE (CSV, LIBSVM, ...; a CSV's first\n"
            "column is its label unless --no_labels) from a finished job, one 'label distance'\n"
            "line per row (or --out FILE as CSV): the raw label, the cluster (mixtures) or the\n"
            "predicted value (regressions). Every job type but kahm in its default mode predicts\n"
            "from the model at the server (--client N: whose model, for mixtures that fit one\n"
            "per client); kahm with models on the clients (default): the server asks the clients\n"
            "that hold them and waits up to --timeout SECONDS (5) for their answers; classes of\n"
            "clients that did not answer score +inf and are named on stderr. A file larger than\n"
            "one message goes in several calls of whole rows, each within --net.max_message\n"
            "BYTES (this side's limit, 4 MiB; calls the server refuses as too large are halved);\n"
            "the answers are put back in row order. A labelled file is also scored as the job\n"
            "scores its rounds (as 'fedkern model eval'): accuracy, misclust and ari, or rmse.\n");
}

typedef struct fk_job_conn {
    uv_loop_t loop;
    fk_grpc_client *cl;
    int up_failed;
    char why[256];
    /* the call in progress */
    int done, status;
    char msg[512];
    uint8_t *resp;
    size_t resp_len;
    uint64_t timeout_ms;
    uint64_t max_message; /* net.max_message of this side: job predict sends rows within it */
    size_t predict_calls; /* Predict calls the last fk_job_predict made */
    const char *quiet; /* a refusal whose message holds this is left to the caller (unprinted) */
    const char *quiet2; /* ... or this */
    int quiet_busy;    /* DEADLINE_EXCEEDED and UNAVAILABLE are left to the caller (a retry) */
} fk_job_conn;
typedef fk_job_conn conn;

static void on_state(fk_grpc_client *cl, int up, const char *why, void *ud)
{
    (void)cl;
    conn *c = ud;
    if (!up) {
        c->up_failed = 1;
        snprintf(c->why, sizeof c->why, "%s", why);
    }
}

static void on_done(void *ud, int status, const char *msg, const uint8_t *resp, size_t len)
{
    conn *c = ud;
    c->done = 1;
    c->status = status;
    snprintf(c->msg, sizeof c->msg, "%s", msg ? msg : "");
    free(c->resp);
    c->resp = NULL;
    c->resp_len = 0;
    if (status == FK_GRPC_OK) {
        c->resp = malloc(len ? len : 1);
        if (c->resp) {
            if (len)
                memcpy(c->resp, resp, len);
            c->resp_len = len;
        } else {
            c->status = FK_GRPC_RESOURCE_EXHAUSTED;
        }
    }
}

static int call_encoded(conn *c, const char *cmd, const char *method, uint8_t *buf, size_t len);

/* One unary call, run to completion. 0 = OK, else 1 with the message printed. */
/* The refusal is one the caller handles itself (c->quiet, c->quiet2). */
static int quiet_refusal(const conn *c)
{
    return (c->quiet && strstr(c->msg, c->quiet)) || (c->quiet2 && strstr(c->msg, c->quiet2));
}

static int rpc(conn *c, const char *cmd, const char *method, const pb_msgdesc_t *fields,
               const void *req)
{
    uint8_t *buf;
    size_t len;
    fk_err err = {0};
    if (fk_codec_encode(fields, req, 0, &buf, &len, &err))
        return fk_cli_fail(cmd, "%s", err.msg);
    return call_encoded(c, cmd, method, buf, len);
}

static int call_path(conn *c, const char *cmd, const char *path, uint8_t *buf, size_t len);

/* The call with an encoded request (freed here). */
static int call_encoded(conn *c, const char *cmd, const char *method, uint8_t *buf, size_t len)
{
    char path[96];
    snprintf(path, sizeof path, FED "%s", method);
    return call_path(c, cmd, path, buf, len);
}

/* A call to the full path (any service) with an encoded request (freed here). */
static int call_path(conn *c, const char *cmd, const char *path, uint8_t *buf, size_t len)
{
    const char *method = strrchr(path, '/') + 1;
    c->done = 0;
    if (fk_grpc_client_call(c->cl, path, buf, len, c->timeout_ms, on_done, c)) {
        free(buf);
        return fk_cli_fail(cmd, "cannot start the %s call", method);
    }
    while (!c->done && uv_run(&c->loop, UV_RUN_ONCE))
        ;
    free(buf);
    if (!c->done)
        return fk_cli_fail(cmd, "connection closed before the %s answer", method);
    if (c->status != FK_GRPC_OK && quiet_refusal(c))
        return 1;
    if (c->quiet_busy &&
        (c->status == FK_GRPC_DEADLINE_EXCEEDED || c->status == FK_GRPC_UNAVAILABLE))
        return 1;
    if (c->status != FK_GRPC_OK)
        return fk_cli_fail(cmd, "%s: %s%s%s", fk_grpc_status_name(c->status), c->msg,
                           c->up_failed ? "; " : "", c->up_failed ? c->why : "");
    return 0;
}

static int open_conn(conn *c, const fk_params *p, const char *cmd)
{
    memset(c, 0, sizeof *c);
    char host[256];
    int port;
    const char *server = fk_params_str(p, "server", "127.0.0.1:7443");
    if (fk_hostport_split(server, host, sizeof host, &port) || port == 0) {
        fk_cli_fail(cmd, "--server must be HOST:PORT (got '%s')", server);
        return 2;
    }
    const char *dir = fk_params_get(p, "tls_dir");
    const char *name = fk_params_get(p, "name");
    if (!dir || !name) {
        fk_cli_fail(cmd, "--tls_dir DIR and --name NAME (an admin certificate) are required");
        return 2;
    }
    long timeout;
    fk_err err = {0};
    if (fk_params_int(p, "timeout_ms", 10000, 1, 86400000, &timeout, &err)) {
        fk_cli_fail(cmd, "%s", err.msg);
        return 2;
    }
    c->timeout_ms = (uint64_t)timeout;
    char ca[4096], cert[4096], key[4096];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir);
    snprintf(cert, sizeof cert, "%s/admin-%s.pem", dir, name);
    snprintf(key, sizeof key, "%s/admin-%s.key", dir, name);
    fk_tls_files f = {ca, cert, key, NULL, 0};
    fk_tls_ctx *tls;
    if (fk_tls_ctx_new(&tls, 0, &f, &err))
        return fk_cli_fail(cmd, "%s", err.msg);
    int uvrc = uv_loop_init(&c->loop);
    if (uvrc) {
        fk_tls_ctx_unref(tls);
        return fk_cli_fail(cmd, "uv_loop_init: %s", uv_strerror(uvrc));
    }
    fk_grpc_client_config gc = {.tls = tls};
    fk_net_limits_default(&gc.limits);
    if (fk_net_limits_from_params(&gc.limits, p, "net", &err)) {
        fk_tls_ctx_unref(tls);
        fk_cli_fail(cmd, "%s", err.msg);
        return 2;
    }
    c->max_message = gc.limits.max_message;
    int rc = fk_grpc_client_connect(&c->cl, &c->loop, &gc, host, port,
                                    fk_params_str(p, "server_name", host), on_state, c, &err);
    fk_tls_ctx_unref(tls);
    if (rc) {
        FK_UV_MUST(uv_loop_close(&c->loop));
        return fk_cli_fail(cmd, "%s", err.msg);
    }
    return 0;
}

static void close_conn(conn *c)
{
    if (c->cl)
        fk_grpc_client_close(c->cl, NULL, NULL);
    FK_UV_MUST(uv_run(&c->loop, UV_RUN_DEFAULT));
    FK_UV_MUST(uv_loop_close(&c->loop));
    free(c->resp);
}

int fk_job_open(fk_job_conn **out, const fk_params *p, const char *cmd)
{
    *out = malloc(sizeof **out);
    if (!*out)
        return fk_cli_fail(cmd, "out of memory");
    int rc = open_conn(*out, p, cmd);
    if (rc) {
        free(*out);
        *out = NULL;
    }
    return rc;
}

void fk_job_close(fk_job_conn *c)
{
    if (c) {
        close_conn(c);
        free(c);
    }
}

static char *read_file(const char *path, fk_err *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fk_err_set(err, FK_EIO, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += r;
        if (cap - len < 2) {
            char *g = cap < (1u << 24) ? realloc(buf, cap * 2) : NULL;
            if (!g) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = g;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fk_err_set(err, FK_ELIMIT, "%s: job file too large", path);
        return NULL;
    }
    buf[len] = '\0';
    /* a NUL would end the text early and the server would never see the rest */
    const char *nul = memchr(buf, '\0', len);
    if (nul) {
        int line = 1;
        for (const char *c = buf; c < nul; c++)
            line += *c == '\n';
        fk_err_set(err, FK_EFORMAT,
                   "%s line %d: a NUL byte (byte %zu); a job file is text (saved as UTF-16 or "
                   "binary?)",
                   path, line, (size_t)(nul - buf) + 1);
        free(buf);
        return NULL;
    }
    return buf;
}

const char *fk_jobcli_state_name(int s)
{
    switch (s) {
    case fedkern_v1_JobState_JOB_QUEUED:
        return "queued";
    case fedkern_v1_JobState_JOB_RUNNING:
        return "running";
    case fedkern_v1_JobState_JOB_DONE:
        return "done";
    case fedkern_v1_JobState_JOB_FAILED:
        return "failed";
    case fedkern_v1_JobState_JOB_CANCELLED:
        return "cancelled";
    default:
        return "unknown";
    }
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

static int submit_text(fk_job_conn *c, const char *text, int skip_check, char *id, size_t cap)
{
    fedkern_v1_SubmitJobRequest in = fedkern_v1_SubmitJobRequest_init_zero;
    in.config = (char *)text;
    in.skip_client_check = skip_check != 0;
    int rc = rpc(c, "job submit", "SubmitJob", fedkern_v1_SubmitJobRequest_fields, &in);
    if (rc)
        return rc;
    fedkern_v1_SubmitJobResponse out;
    fk_err err = {0};
    if (fk_codec_decode(fedkern_v1_SubmitJobResponse_fields, &out, c->resp, c->resp_len, &err))
        return fk_cli_fail("job submit", "%s", err.msg);
    snprintf(id, cap, "%s", out.job_id);
    return 0;
}

int fk_job_submit_text(fk_job_conn *c, const char *text, char *id, size_t cap)
{
    return submit_text(c, text, 0, id, cap);
}

/* --wait_clients SECONDS: a job naming clients that have not joined yet, or whose test-only /
 * hold-out clients are not connected now, is submitted again (every 0.2 s) until they are, or
 * until the wait is over; the server stores nothing for a refused job, so a retry is safe.
 * Any other refusal ends the wait at once. */
static int do_submit(conn *c, char *text, int skip_check, long wait_clients_s)
{
    char id[64];
    uint64_t end = uv_hrtime() + (uint64_t)wait_clients_s * 1000000000ull;
    int rc;
    for (;;) {
        int waiting = wait_clients_s > 0 && uv_hrtime() < end;
        c->quiet = waiting ? "never joined" : NULL;
        c->quiet2 = waiting ? "not connected" : NULL;
        rc = submit_text(c, text, skip_check, id, sizeof id);
        if (!rc || !c->quiet || !c->done || c->status == FK_GRPC_OK || !quiet_refusal(c))
            break;
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
    c->quiet = c->quiet2 = NULL;
    free(text);
    if (!rc)
        printf("%s\n", id);
    return rc;
}

int fk_job_status_get(fk_job_conn *c, const char *id, uint32_t round,
                      fedkern_v1_JobStatusResponse *out)
{
    fedkern_v1_JobStatusRequest in = fedkern_v1_JobStatusRequest_init_zero;
    snprintf(in.job_id, sizeof in.job_id, "%s", id);
    in.round = round;
    int rc = rpc(c, "job status", "JobStatus", fedkern_v1_JobStatusRequest_fields, &in);
    fk_err err = {0};
    if (!rc && fk_codec_decode(fedkern_v1_JobStatusResponse_fields, out, c->resp, c->resp_len, &err))
        rc = fk_cli_fail("job status", "%s", err.msg);
    return rc;
}

/* JobStatus for --wait and --follow: a call that timed out or found the server unavailable
 * (busy, restarting) is tried again while time(NULL) < until, each retry said on stderr;
 * any other failure, or one at `until`, ends it (printed). */
static int status_until(conn *c, const char *cmd, const char *id, uint32_t round,
                        fedkern_v1_JobStatusResponse *out, time_t until)
{
    for (int tries = 1;; tries++) {
        c->quiet_busy = 1;
        int rc = fk_job_status_get(c, id, round, out);
        c->quiet_busy = 0;
        int busy = rc && c->done &&
                   (c->status == FK_GRPC_DEADLINE_EXCEEDED || c->status == FK_GRPC_UNAVAILABLE);
        if (!busy)
            return rc;
        if (time(NULL) >= until)
            return fk_cli_fail(cmd, "%s: %s (%d tries)", fk_grpc_status_name(c->status), c->msg,
                               tries);
        fprintf(stderr, "fedkern %s: the status call of job %s got %s; trying again\n", cmd, id,
                fk_grpc_status_name(c->status));
        usleep(500000);
    }
}

double fk_job_metric(const fedkern_v1_Metric *m, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(m[i].name, name))
            return m[i].value;
    return NAN;
}

static void print_metrics(const fedkern_v1_Metric *m, int n, int json)
{
    for (int i = 0; i < n; i++) {
        if (json)
            printf(",\"%s\":%.17g", m[i].name, m[i].value);
        else
            printf("  %-22s %.9g\n", m[i].name, m[i].value);
    }
}

/* The quality each client measured in the round shown: the training clients, then those the
 * job type reports apart (role "unseen", "target"), under their own names. */
static void print_clients(const fedkern_v1_JobStatusResponse *o, int json)
{
    if (json)
        printf(",\"clients_quality\":[");
    int first = 1;
    for (int apart = 0; apart < 2; apart++) {
        for (pb_size_t i = 0; i < o->client_quality_count; i++) {
            const fedkern_v1_ClientQuality *q = &o->client_quality[i];
            if ((q->role[0] != '\0') != apart)
                continue;
            if (json) {
                printf("%s{\"client\":", first ? "" : ",");
                print_json_string(q->client);
                printf(",\"index\":%u,\"role\":\"%s\"", q->index, q->role[0] ? q->role : "train");
                print_metrics(q->metrics, q->metrics_count, 1);
                printf("}");
            } else {
                if (first)
                    printf("  per client (the mean above is over every client that measured it):\n");
                printf("  %-6s %-16s", q->role[0] ? q->role : "train", q->client);
                for (pb_size_t k = 0; k < q->metrics_count; k++)
                    printf(" %s %.6g", q->metrics[k].name, q->metrics[k].value);
                printf("\n");
            }
            first = 0;
        }
    }
    if (json)
        printf("],\"clients_quality_more\":%u", o->client_quality_more);
    else if (o->client_quality_more)
        printf("  (%u more clients measured quality; not listed)\n", o->client_quality_more);
}

static int do_status(conn *c, const char *id, uint32_t round, int json)
{
    fedkern_v1_JobStatusResponse out;
    int rc = fk_job_status_get(c, id, round, &out);
    if (rc)
        return rc;
    if (json) {
        printf("{\"job\":\"%s\",\"state\":\"%s\",\"method\":\"%s\",\"rounds_done\":%u,"
               "\"rounds\":%u,\"job_clients\":%u,\"clients\":%u,\"message\":",
               out.job_id, fk_jobcli_state_name(out.state), out.method, out.round, out.rounds_total,
               out.job_clients, out.clients);
        print_json_string(out.message);
        print_metrics(out.metrics, out.metrics_count, 1);
        print_clients(&out, 1);
        printf("}\n");
    } else {
        printf("job %s: %s, method %s, %u of %u rounds done, %u clients\n", out.job_id,
               fk_jobcli_state_name(out.state), out.method, out.round, out.rounds_total,
               out.job_clients);
        if (out.message[0])
            printf("  reason: %s\n", out.message);
        print_metrics(out.metrics, out.metrics_count, 0);
        print_clients(&out, 0);
    }
    return out.state == fedkern_v1_JobState_JOB_FAILED ? 1 : 0;
}

/* The model's Bundle bytes, then its info (common/net/modelfile.h), so `fedkern model` can
 * tell what the file holds. */
FK_CHECKRETURN static int write_all(const char *path, const uint8_t *buf, size_t len,
                                    const fk_model_info *info, fk_err *err)
{
    uint8_t *tail = NULL;
    size_t tail_len = 0;
    if (fk_modelfile_info_encode(info, &tail, &tail_len, err))
        return FK_ENOMEM;
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        free(tail);
        return fk_err_set(err, FK_EIO, "%s: %s", tmp, strerror(errno));
    }
    int bad = len && fwrite(buf, 1, len, f) != len;
    bad |= tail_len && fwrite(tail, 1, tail_len, f) != tail_len;
    free(tail);
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path))
        return fk_err_set(err, FK_EIO, "%s: cannot write the model: %s", path, strerror(errno));
    return FK_OK;
}

/* JobResult chunk by chunk until the whole model is here; the last answer into out. */
static int fetch_model(conn *c, const char *id, int selected, uint8_t **model_out,
                       size_t *len_out, fedkern_v1_JobResultResponse *out_msg)
{
    fk_reasm reasm;
    fk_reasm_init(&reasm, (size_t)1 << 32);
    uint8_t *model = NULL;
    size_t model_len = 0;
    fedkern_v1_JobResultResponse out = fedkern_v1_JobResultResponse_init_zero;
    fk_err err = {0};
    int rc = 0;
    for (uint32_t chunk = 0; !rc && !model; chunk++) {
        fedkern_v1_JobResultRequest in = fedkern_v1_JobResultRequest_init_zero;
        snprintf(in.job_id, sizeof in.job_id, "%s", id);
        in.chunk_index = chunk;
        in.selected = selected != 0;
        if ((rc = rpc(c, "job result", "JobResult", fedkern_v1_JobResultRequest_fields, &in)))
            break;
        fk_bundle b;
        fk_bundle_init(&b);
        fk_codec_rx rx = {.bundle = &b};
        if (fk_codec_decode_job_result_response(c->resp, c->resp_len, &out, &rx, &err)) {
            rc = fk_cli_fail("job result", "%s", err.msg);
        } else if (rx.has_bundle) {
            if (fk_codec_bundle_encode(&b, &model, &model_len, &err))
                rc = fk_cli_fail("job result", "%s", err.msg);
        } else if (rx.has_chunk) {
            int complete = 0;
            if (fk_reasm_add(&reasm, &out.chunk, rx.chunk_data, rx.chunk_len, &complete, &err) ||
                (complete && fk_reasm_take(&reasm, &model, &model_len, &err)))
                rc = fk_cli_fail("job result", "%s", err.msg);
        } else {
            rc = fk_cli_fail("job result", "job %s has no model yet (%s); try --wait SECONDS", id,
                             fk_jobcli_state_name(out.state));
        }
        fk_bundle_close(&b);
        if (!rc)
            fk_codec_release(fedkern_v1_JobResultResponse_fields, &out);
    }
    fk_reasm_close(&reasm);
    if (rc) {
        free(model);
        model = NULL;
        model_len = 0;
    }
    *model_out = model;
    *len_out = model_len;
    *out_msg = out;
    return rc;
}

int fk_job_model_get(fk_job_conn *c, const char *id, uint8_t **model, size_t *len)
{
    fedkern_v1_JobResultResponse out;
    return fetch_model(c, id, 0, model, len, &out);
}

/* The model of a done job into out_path. A job still running after --wait is an error and
 * nothing is written (a script must not take a partial model for the result), unless
 * `current` asks for its latest model explicitly. */
static int do_result(conn *c, const char *id, const char *out_path, long wait_s, int current,
                     int selected, int json)
{
    time_t until = time(NULL) + wait_s;
    fedkern_v1_JobStatusResponse st;
    for (;;) {
        int rc = status_until(c, "job result", id, 0, &st, until);
        if (rc)
            return rc;
        if (st.state != fedkern_v1_JobState_JOB_RUNNING || time(NULL) >= until)
            break;
        usleep(200000);
    }
    /* A cancelled or failed job keeps the model of its last completed round: --current
     * asks for it (without, the state is the answer: a script must not take it for a result). */
    int ended = st.state == fedkern_v1_JobState_JOB_FAILED ||
                st.state == fedkern_v1_JobState_JOB_CANCELLED;
    if (ended && (!current || st.round == 0))
        return fk_cli_fail("job result", "job %s is %s%s%s%s", id, fk_jobcli_state_name(st.state),
                           st.message[0] ? ": " : "", st.message,
                           st.round == 0 ? " (no round completed: no model)"
                                         : "; --current writes the model of its last completed "
                                           "round");
    if (st.state != fedkern_v1_JobState_JOB_DONE && !current)
        return fk_cli_fail("job result",
                           "job %s is %s (round %u of %u); nothing written: wait longer "
                           "(--wait SECONDS) or ask for its current model with --current",
                           id, fk_jobcli_state_name(st.state), st.round, st.rounds_total);
    uint8_t *model = NULL;
    size_t model_len = 0;
    fedkern_v1_JobResultResponse out;
    fk_err err = {0};
    int rc = fetch_model(c, id, selected, &model, &model_len, &out);
    if (!rc && out.state != fedkern_v1_JobState_JOB_DONE && !current) /* changed meanwhile */
        rc = fk_cli_fail("job result", "job %s is %s; nothing written", id,
                         fk_jobcli_state_name(out.state));
    fk_model_info info = {.round = out.model_round ? (int)out.model_round : (int)st.round};
    snprintf(info.method, sizeof info.method, "%s", st.method);
    snprintf(info.job_id, sizeof info.job_id, "%s", id);
    snprintf(info.software, sizeof info.software, "fedkern %s", FK_VERSION);
    if (!rc && out_path && write_all(out_path, model, model_len, &info, &err))
        rc = fk_cli_fail("job result", "%s", err.msg);
    if (!rc) {
        if (json) {
            printf("{\"job\":\"%s\",\"state\":\"%s\",\"bytes\":%zu,\"out\":", id,
                   fk_jobcli_state_name(out.state), model_len);
            print_json_string(out_path ? out_path : "");
            printf(",\"model_round\":%d,\"selected_by\":", info.round);
            print_json_string(out.selected_by);
            print_metrics(out.metrics, out.metrics_count, 1);
            printf("}\n");
        } else {
            printf("job %s: %s, model %zu bytes%s%s\n", id, fk_jobcli_state_name(out.state), model_len,
                   out_path ? " written to " : "", out_path ? out_path : "");
            if (out.selected_by[0])
                printf("selected model of round %d: %s\n", info.round, out.selected_by);
            print_metrics(out.metrics, out.metrics_count, 0);
        }
    }
    free(model);
    return rc;
}


/* One Predict call for the queries bundle. 0 = answered (result filled), 1 = failed (printed),
 * 2 = refused as too large (RESOURCE_EXHAUSTED: the gRPC limit of either side, or the server's
 * bound on a task to the clients), not printed: the caller sends fewer rows. */
static int predict_once(conn *c, const char *id, const fk_bundle *queries, long timeout_s,
                        fk_bundle *result)
{
    const char *cmd = "job predict";
    fk_err err = {0};
    fedkern_v1_PredictRequest in = fedkern_v1_PredictRequest_init_zero;
    snprintf(in.job_id, sizeof in.job_id, "%s", id);
    /* The server waits up to the timeout for the clients (mode B); the call waits longer. */
    in.timeout_ms = (uint32_t)(timeout_s * 1000);
    if (c->timeout_ms < (uint64_t)timeout_s * 1000 + 5000)
        c->timeout_ms = (uint64_t)timeout_s * 1000 + 5000;
    fk_codec_tx tx = {.bundle = queries};
    uint8_t *buf = NULL;
    size_t len = 0;
    if (fk_codec_encode_predict_request(&in, &tx, &buf, &len, &err))
        return fk_cli_fail(cmd, "%s", err.msg);
    c->done = 0;
    (void)fk_grpc_client_call(c->cl, FED "Predict", buf, len, c->timeout_ms, on_done, c);
    while (!c->done && uv_run(&c->loop, UV_RUN_ONCE))
        ;
    free(buf);
    if (!c->done)
        return fk_cli_fail(cmd, "connection closed before the Predict answer");
    if (c->status == FK_GRPC_RESOURCE_EXHAUSTED)
        return 2;
    if (c->status != FK_GRPC_OK)
        return fk_cli_fail(cmd, "%s: %s%s%s", fk_grpc_status_name(c->status), c->msg,
                           c->up_failed ? "; " : "", c->up_failed ? c->why : "");
    fedkern_v1_PredictResponse out;
    if (fk_codec_decode_predict_response(c->resp, c->resp_len, &out, result, &err))
        return fk_cli_fail(cmd, "%s", err.msg);
    return 0;
}

/* Fold the answer r of rows [r0, r0 + n) into the whole answer acc (nt rows): the per-query
 * "labels" and "distances" go to their rows; "unscored_classes" and "missing_clients" are the
 * union over the batches, "scored_classes" the classes every batch scored. Other tensors are
 * those of the first batch. */
FK_CHECKRETURN static int predict_fold(fk_bundle *acc, const fk_bundle *r, size_t r0, size_t n,
                                       size_t nt, int first, fk_err *err)
{
    /* one value or one row per query (predict.h: "component", "posterior", "scores") */
    static const char *const per_query[] = {"labels", "distances", "component", "posterior",
                                            "scores"};
    enum { NPQ = sizeof per_query / sizeof *per_query };
    for (int k = 0; k < NPQ; k++) {
        const fk_tensor *t = fk_bundle_get(r, per_query[k]);
        if (k >= 2 && !t)
            continue;
        if (!t || t->shape[0] != n || (t->ndim != 1 && t->ndim != 2))
            return fk_err_set(err, FK_EFORMAT, "the server's answer has no '%s' for the %zu "
                              "queries of rows %zu..", per_query[k], n, r0);
        uint64_t w = t->ndim == 2 ? t->shape[1] : 1;
        const fk_tensor *a = fk_bundle_get(acc, per_query[k]);
        if (!first && (!a || a->ndim != t->ndim || (t->ndim == 2 && a->shape[1] != w)))
            return fk_err_set(err, FK_EFORMAT, "the server's answers disagree in the shape of "
                              "'%s'", per_query[k]);
        double *d = first ? fk_bundle_add(acc, per_query[k], t->ndim, (uint64_t[]){nt, w})
                          : (double *)a->data;
        if (!d && nt)
            return fk_err_set(err, FK_ENOMEM, "out of memory");
        if (n)
            memcpy(d + r0 * w, t->data, n * w * sizeof(double));
    }
    for (size_t i = 0; i < r->count; i++) {
        const fk_tensor *t = &r->items[i];
        int pq = 0;
        for (int k = 0; k < NPQ; k++)
            pq |= !strcmp(t->name, per_query[k]);
        if (pq)
            continue;
        const fk_tensor *a = fk_bundle_get(acc, t->name);
        int set = !strcmp(t->name, "unscored_classes") || !strcmp(t->name, "missing_clients");
        if (!a) {
            if (fk_bundle_put(acc, t->name, t->ndim, t->shape, t->data))
                return fk_err_set(err, FK_ENOMEM, "out of memory");
        } else if (set) { /* union of two sorted id lists */
            size_t na = a->len, m = 0;
            double *u = malloc((na + t->len + 1) * sizeof(double));
            if (!u)
                return fk_err_set(err, FK_ENOMEM, "out of memory");
            size_t x = 0, y = 0;
            while (x < na || y < t->len) {
                double v = y >= t->len || (x < na && a->data[x] <= t->data[y]) ? a->data[x]
                                                                                : t->data[y];
                if (x < na && a->data[x] == v)
                    x++;
                if (y < t->len && t->data[y] == v)
                    y++;
                u[m++] = v;
            }
            int rc = fk_bundle_put_vec(acc, t->name, m, u); /* replaces it */
            free(u);
            if (rc)
                return fk_err_set(err, FK_ENOMEM, "out of memory");
        } else if (!strcmp(t->name, "scored_classes") && a->len == t->len) {
            for (size_t j = 0; j < t->len; j++)
                ((fk_tensor *)a)->data[j] = fmin(a->data[j], t->data[j]);
        }
    }
    return FK_OK;
}

int fk_job_predict(fk_job_conn *c, const char *id, const fk_bundle *queries, long timeout_s,
                   fk_bundle *result)
{
    const char *cmd = "job predict";
    const fk_tensor *X = fk_bundle_get(queries, "X");
    if (!X || X->ndim != 2)
        return fk_cli_fail(cmd, "the queries need a matrix 'X'");
    size_t nt = (size_t)X->shape[0], p = (size_t)X->shape[1];
    /* Rows per call: the queries of one call, 8 bytes a value, within net.max_message less a
     * margin for the envelope (the job config goes along to the clients in mode B); the
     * answer's columns (a distance per class held) are assumed no wider than max(p, 16). */
    size_t room = c->max_message > (128u << 10) ? c->max_message - (64u << 10)
                                                : c->max_message / 2;
    size_t rows = room / (8 * (p > 16 ? p : 16));
    rows = rows < 1 ? 1 : rows > 65536 ? 65536 : rows;
    c->predict_calls = 1;
    if (nt <= rows) { /* one call, the answer as the server sent it */
        int rc = predict_once(c, id, queries, timeout_s, result);
        if (rc != 2)
            return rc;
        rows = nt / 2 ? nt / 2 : 1;
    }
    fk_err err = {0};
    size_t calls = 0, r0 = 0;
    while (r0 < nt) {
        size_t n = nt - r0 < rows ? nt - r0 : rows;
        fk_bundle q, r;
        fk_bundle_init(&q);
        fk_bundle_init(&r);
        /* each batch carries its rows' targets and the whole batch's other query tensors */
        const fk_tensor *Y = fk_bundle_get(queries, "y"), *K = fk_bundle_get(queries, "client");
        int rc = fk_bundle_put(&q, "X", 2, (uint64_t[]){n, p}, X->data + r0 * p) ||
                         (Y && Y->len == nt && fk_bundle_put_vec(&q, "y", n, Y->data + r0)) ||
                         (K && fk_bundle_put(&q, "client", K->ndim, K->shape, K->data))
                     ? fk_cli_fail(cmd, "out of memory")
                     : predict_once(c, id, &q, timeout_s, &r);
        if (rc == 2 && n > 1) { /* the server's limit is lower than ours: halve and retry */
            rows = n / 2;
            fprintf(stderr, "job %s: %zu queries per call are too many for the server; now %zu\n",
                    id, n, rows);
        } else if (rc == 2) {
            rc = fk_cli_fail(cmd, "%s: %s (even one query per call)",
                             fk_grpc_status_name(c->status), c->msg);
        } else if (!rc && predict_fold(result, &r, r0, n, nt, r0 == 0, &err)) {
            rc = fk_cli_fail(cmd, "%s", err.msg);
        } else if (!rc) {
            r0 += n;
            calls++;
        }
        fk_bundle_close(&q);
        fk_bundle_close(&r);
        if (rc == 1)
            return 1;
    }
    fprintf(stderr, "job %s: %zu queries sent in %zu calls of at most %zu rows\n", id, nt, calls,
            rows);
    c->predict_calls = calls;
    return 0;
}

/* What could not be scored (models on silent clients, or no client holding a class). */
static void print_unscored(const char *id, const fk_bundle *res)
{
    const fk_tensor *un = fk_bundle_get(res, "unscored_classes");
    const fk_tensor *mi = fk_bundle_get(res, "missing_clients");
    if (un && un->len) {
        fprintf(stderr, "job %s: %zu class(es) could not be scored (+inf):", id, un->len);
        for (size_t i = 0; i < un->len; i++)
            fprintf(stderr, " %.17g", un->data[i]);
        fprintf(stderr, "\n");
    }
    if (mi && mi->len) {
        /* missing: no answer before the deadline, or one the method's check refused */
        fprintf(stderr, "job %s: %zu client(s) holding models gave no usable answer:", id,
                mi->len);
        for (size_t i = 0; i < mi->len; i++)
            fprintf(stderr, " %.17g", mi->data[i]);
        fprintf(stderr, " (client index in the job; none before the deadline, or one the server "
                        "refused: event=predict_answer_refused in its log)\n");
    }
}

/* fedkern job predict ID --data FILE: the queries' labels and distances, from the job's model
 * at the server (kahm with uploaded models) or from the clients that hold the models (kahm mode
 * B, waiting up to timeout_s for them). A labelled file (CSV: label in the first column) also
 * gets its accuracy; --no_labels reads every column as a feature. The loader options of
 * `fedkern data` (so: --label, --header, --delim, --prep, --affine, ...) apply to the file. */
static int do_predict(conn *c, const char *id, const char *data, const fk_source *so,
                      const char *out_path, int json, long timeout_s, long client, int model_prep)
{
    const char *cmd = "job predict";
    fk_err err = {0};
    fk_dataset ds = {0};
    /* the job's model records what its clients did to their raw files (issue 34): fetched
     * for that (the whole model: an old server's answer holds it or not) */
    fk_bundle model;
    fk_bundle_init(&model);
    uint8_t *mb = NULL;
    size_t mlen = 0;
    int have = 0, batch_centred = 0;
    if (model_prep && !so->n_prep && !so->affine) {
        fedkern_v1_JobResultResponse mo;
        have = fetch_model(c, id, 0, &mb, &mlen, &mo) == 0 && mb &&
               fk_codec_bundle_decode(mb, mlen, &model, &err) == FK_OK;
        free(mb);
        if (!have)
            fprintf(stderr, "fedkern %s: warning: the job's model could not be read (%s), so "
                            "neither could the clients' preprocessing it records\n",
                    cmd, err.msg[0] ? err.msg : "none");
    }
    int lrc = have || (!so->n_prep && !so->affine && model_prep)
                  ? fk_cli_load_query(cmd, data, so, have ? &model : NULL, client, model_prep,
                                      &ds, &err)
                  : fk_source_load(&ds, data, so, NULL, &err);
    const fk_tensor *bc = have ? fk_bundle_get(&model, "batch_center") : NULL;
    batch_centred = bc && bc->len == 1 && bc->data[0] == 1;
    fk_bundle_close(&model);
    if (lrc)
        return fk_cli_fail(cmd, "%s", err.msg);
    fk_bundle q, res;
    fk_bundle_init(&q);
    fk_bundle_init(&res);
    uint64_t sh[2] = {ds.X.rows, ds.X.cols};
    double *x = fk_bundle_add(&q, "X", 2, sh);
    int rc = x || !ds.X.rows ? 0 : fk_cli_fail(cmd, "out of memory");
    for (size_t i = 0; !rc && i < ds.X.rows; i++)
        memcpy(x + i * ds.X.cols, fk_mat_row(&ds.X, i), ds.X.cols * sizeof(double));
    /* the targets (a mixture of regressions places each row by them) and whose model */
    if (!rc && ds.y_raw && fk_bundle_put_vec(&q, "y", ds.X.rows, ds.y_raw))
        rc = fk_cli_fail(cmd, "out of memory");
    if (!rc && client >= 0 && fk_bundle_put_scalar(&q, "client", (double)client))
        rc = fk_cli_fail(cmd, "out of memory");
    if (!rc)
        rc = fk_job_predict(c, id, &q, timeout_s, &res);
    if (!rc && batch_centred && c->predict_calls > 1) /* dica/udica center_test = batch */
        fprintf(stderr,
                "fedkern %s: warning: this model centres each query batch on its own mean "
                "(center_test = batch, as each client centred its own rows) and the %zu rows went "
                "in %zu calls, each centred on its own rows: the answers are not the whole "
                "file's; 'fedkern job result %s --out F' then 'fedkern model predict F --data "
                "%s' centres the whole file at once\n",
                cmd, ds.X.rows, c->predict_calls, id, data);
    const fk_tensor *lab = rc ? NULL : fk_bundle_get(&res, "labels");
    const fk_tensor *dist = rc ? NULL : fk_bundle_get(&res, "distances");
    if (!rc && (!lab || !dist || lab->len != ds.X.rows || dist->len != ds.X.rows))
        rc = fk_cli_fail(cmd, "the server's answer has no labels/distances for the %zu queries",
                         ds.X.rows);
    FILE *f = NULL;
    if (!rc && out_path && !(f = fopen(out_path, "w")))
        rc = fk_cli_fail(cmd, "cannot write %s: %s", out_path, strerror(errno));
    size_t n = rc ? 0 : ds.X.rows;
    for (size_t i = 0; i < n; i++) {
        if (f)
            fprintf(f, "%.17g,%.17g\n", lab->data[i], dist->data[i]);
        else if (!json)
            printf("%.17g %.17g\n", lab->data[i], dist->data[i]);
    }
    if (f && fclose(f))
        rc = fk_cli_fail(cmd, "cannot write %s", out_path);
    if (!rc) {
        fk_report r; /* scored as model eval scores: accuracy, misclust and ari, or rmse */
        fk_report_init(&r);
        if ((ds.y || ds.y_raw) && n && fk_predict_score(&res, &ds, &r, &err))
            fk_report_init(&r); /* e.g. a regression against a file of class labels */
        const fk_tensor *un = fk_bundle_get(&res, "unscored_classes"),
                        *mi = fk_bundle_get(&res, "missing_clients");
        print_unscored(id, &res);
        if (json) {
            printf("{\"job\":\"%s\",\"queries\":%zu,\"accuracy\":%.9g", id, n, r.accuracy);
            static const char *const more[] = {"misclust", "ari", "rmse"};
            for (int k = 0; k < 3; k++)
                if (!isnan(fk_report_get(&r, more[k])))
                    printf(",\"%s\":%.9g", more[k], fk_report_get(&r, more[k]));
            printf(",\"unscored_classes\":%zu,\"missing_clients\":%zu}\n",
                   un ? un->len : (size_t)0, mi ? mi->len : (size_t)0);
        } else if (!isnan(r.rmse)) {
            fprintf(stderr, "job %s: %zu queries, rmse %.6g against the file's targets\n", id, n,
                    r.rmse);
        } else if (fk_bundle_get(&res, "clustering")) {
            fprintf(stderr, "job %s: %zu queries, accuracy %.4f (1 - misclust after the best "
                    "matching of clusters to classes), ari %.4f against the file's labels\n",
                    id, n, r.accuracy, r.ari);
        } else if (!isnan(r.accuracy)) {
            fprintf(stderr, "job %s: %zu queries, accuracy %.4f against the file's labels\n", id, n,
                    r.accuracy);
        }
    }
    fk_bundle_close(&q);
    fk_bundle_close(&res);
    fk_dataset_close(&ds);
    return rc;
}

/* The clients `job plot` follows (the first PLOT_CLIENTS by index that measured something): a
 * column each, its quality per plotted round (n rows x FK_REPORT_N_FIELDS, NaN: not
 * measured). */
enum { PLOT_CLIENTS = 16 };
typedef struct plot_client {
    char name[128], role[16];
    uint32_t index;
    double *q;
} plot_client;

/* Round row `row`'s client_quality into the columns (new clients take a free one). */
static void plot_clients_add(plot_client *pc, int *n_pc, int n_rows, int row,
                             const fedkern_v1_JobStatusResponse *r)
{
    for (pb_size_t i = 0; i < r->client_quality_count; i++) {
        const fedkern_v1_ClientQuality *q = &r->client_quality[i];
        int k = 0;
        while (k < *n_pc && pc[k].index != q->index)
            k++;
        if (k == *n_pc) {
            if (k == PLOT_CLIENTS)
                continue;
            pc[k].q = malloc((size_t)n_rows * FK_REPORT_N_FIELDS * sizeof(double));
            if (!pc[k].q)
                continue;
            for (size_t v = 0; v < (size_t)n_rows * FK_REPORT_N_FIELDS; v++)
                pc[k].q[v] = NAN;
            snprintf(pc[k].name, sizeof pc[k].name, "%s", q->client);
            snprintf(pc[k].role, sizeof pc[k].role, "%s", q->role);
            pc[k].index = q->index;
            (*n_pc)++;
        }
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++)
            pc[k].q[(size_t)row * FK_REPORT_N_FIELDS + f] =
                fk_job_metric(q->metrics, q->metrics_count, fk_report_fields[f].name);
    }
}

/* Every closed round's metrics (one JobStatus call per round), then the plot: the mean's
 * panels and one of each client's quality (the first field of accuracy, misclust, ari, rmse,
 * loss that a client measured), a client reported apart labelled with its role. */
static int do_plot(conn *c, const char *id, const char *out_path, int json)
{
    fedkern_v1_JobStatusResponse st, r;
    int rc = fk_job_status_get(c, id, 0, &st);
    if (rc)
        return rc;
    int n = (int)st.round;
    fk_plot_round *rows = calloc((size_t)(n > 0 ? n : 1), sizeof *rows);
    /* the means apart where the job type names clients apart (train_, unseen_, target_) */
    static const char *const role_names[3] = {"train", "unseen", "target"};
    double *rq = malloc((size_t)(n > 0 ? n : 1) * 3 * FK_REPORT_N_FIELDS * sizeof *rq);
    if (!rows || !rq) {
        free(rows);
        free(rq);
        return fk_cli_fail("job plot", "out of memory");
    }
    plot_client pc[PLOT_CLIENTS];
    memset(pc, 0, sizeof pc);
    int n_pc = 0;
    int got = 0;
    for (int i = 1; !rc && i <= n; i++) {
        rc = fk_job_status_get(c, id, (uint32_t)i, &r);
        if (rc || isnan(fk_job_metric(r.metrics, r.metrics_count, "round")))
            continue; /* a round that never closed with an aggregate has no row */
        fk_plot_round *w = &rows[got++];
        w->round = i;
        w->participants = (int)fk_job_metric(r.metrics, r.metrics_count, "participants");
        w->planned = (int)fk_job_metric(r.metrics, r.metrics_count, "planned");
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++)
            w->q[f] = fk_job_metric(r.metrics, r.metrics_count, fk_report_fields[f].name);
        for (int ro = 0; ro < 3; ro++)
            for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
                char name[64];
                snprintf(name, sizeof name, "%s_%s", role_names[ro], fk_report_fields[f].name);
                rq[((size_t)(got - 1) * 3 + (size_t)ro) * FK_REPORT_N_FIELDS + (size_t)f] =
                    fk_job_metric(r.metrics, r.metrics_count, name);
            }
        plot_clients_add(pc, &n_pc, n, got - 1, &r);
    }
    /* the clients' panel: one field for all, the first of these any client measured */
    static const char *const order[] = {"accuracy", "misclust", "ari", "rmse", "loss"};
    int field = -1;
    for (int o = 0; field < 0 && o < 5; o++) {
        int f = 0;
        while (strcmp(fk_report_fields[f].name, order[o]))
            f++;
        for (int k = 0; field < 0 && k < n_pc; k++)
            for (int i = 0; field < 0 && i < got; i++)
                if (!isnan(pc[k].q[(size_t)i * FK_REPORT_N_FIELDS + f]))
                    field = f;
    }
    double *xs = malloc((size_t)(got ? got : 1) * (PLOT_CLIENTS + 4) * sizeof *xs);
    char labels[PLOT_CLIENTS + 3][160], ylabel[64];
    fk_plot_series cs[PLOT_CLIENTS + 3];
    fk_plot_panel cpanel = {.ylabel = ylabel, .series = cs, .ymin = NAN, .ymax = NAN};
    for (int k = 0; xs && field >= 0 && k < n_pc; k++) {
        double *y = xs + (size_t)got * (k + 1);
        for (int i = 0; i < got; i++) {
            xs[i] = rows[i].round;
            y[i] = pc[k].q[(size_t)i * FK_REPORT_N_FIELDS + field];
        }
        snprintf(labels[k], sizeof labels[k], "%.127s%s%.15s%s", pc[k].name, pc[k].role[0] ? " (" : "",
                 pc[k].role, pc[k].role[0] ? ")" : "");
        cs[cpanel.n_series++] = (fk_plot_series){.label = labels[k], .x = xs, .y = y, .n = got};
    }
    /* and the means apart of that field, as lines of their own */
    for (int ro = 0; xs && field >= 0 && ro < 3; ro++) {
        double *y = xs + (size_t)got * (PLOT_CLIENTS + 1 + ro);
        int any = 0;
        for (int i = 0; i < got; i++) {
            xs[i] = rows[i].round;
            y[i] = rq[((size_t)i * 3 + (size_t)ro) * FK_REPORT_N_FIELDS + (size_t)field];
            any |= !isnan(y[i]);
        }
        if (!any)
            continue;
        snprintf(labels[PLOT_CLIENTS + ro], sizeof labels[0], "%s mean", role_names[ro]);
        cs[cpanel.n_series++] =
            (fk_plot_series){.label = labels[PLOT_CLIENTS + ro], .x = xs, .y = y, .n = got};
    }
    snprintf(ylabel, sizeof ylabel, "%s per client", field >= 0 ? fk_report_fields[field].name : "");
    char title[160];
    snprintf(title, sizeof title, "fedkern job %s: %s, %d of %u rounds", id, st.method, got,
             st.rounds_total);
    fk_err err = {0};
    if (!rc && fk_plot_rounds_with(out_path, title, rows, got, &cpanel, &err))
        rc = fk_cli_fail("job plot", "%s", err.msg);
    for (int i = 0; !rc && json && i < got; i++) {
        printf("{\"job\":\"%s\",\"round\":%d,\"participants\":%d,\"planned\":%d", id,
               rows[i].round, rows[i].participants, rows[i].planned);
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++)
            if (!isnan(rows[i].q[f]))
                printf(",\"%s\":%.9g", fk_report_fields[f].name, rows[i].q[f]);
        for (int ro = 0; ro < 3; ro++)
            for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
                double v = rq[((size_t)i * 3 + (size_t)ro) * FK_REPORT_N_FIELDS + (size_t)f];
                if (!isnan(v))
                    printf(",\"%s_%s\":%.9g", role_names[ro], fk_report_fields[f].name, v);
            }
        printf(",\"clients_quality\":[");
        for (int k = 0, first = 1; k < n_pc; k++) {
            const double *q = pc[k].q + (size_t)i * FK_REPORT_N_FIELDS;
            int any = 0;
            for (int f = 0; f < FK_REPORT_N_FIELDS; f++)
                any |= !isnan(q[f]);
            if (!any)
                continue;
            printf("%s{\"client\":", first ? "" : ",");
            print_json_string(pc[k].name);
            printf(",\"index\":%u,\"role\":\"%s\"", pc[k].index, pc[k].role[0] ? pc[k].role : "train");
            for (int f = 0; f < FK_REPORT_N_FIELDS; f++)
                if (!isnan(q[f]))
                    printf(",\"%s\":%.9g", fk_report_fields[f].name, q[f]);
            printf("}");
            first = 0;
        }
        printf("]}\n");
    }
    if (!rc && !json)
        printf("job %s: %d rounds plotted to %s\n", id, got, out_path);
    for (int k = 0; k < n_pc; k++)
        free(pc[k].q);
    free(xs);
    free(rows);
    free(rq);
    return rc;
}

static int do_cancel(conn *c, const char *id)
{
    fedkern_v1_CancelJobRequest in = fedkern_v1_CancelJobRequest_init_zero;
    snprintf(in.job_id, sizeof in.job_id, "%s", id);
    int rc = rpc(c, "job cancel", "CancelJob", fedkern_v1_CancelJobRequest_fields, &in);
    if (!rc)
        printf("job %s cancelled\n", id);
    return rc;
}

static int do_delete(conn *c, const char *id)
{
    fedkern_v1_DeleteJobRequest in = fedkern_v1_DeleteJobRequest_init_zero;
    snprintf(in.job_id, sizeof in.job_id, "%s", id);
    int rc = rpc(c, "job delete", "DeleteJob", fedkern_v1_DeleteJobRequest_fields, &in);
    if (!rc)
        printf("job %s deleted\n", id);
    return rc;
}

/* One closed round of `status --follow`: its metrics from the server, every one but the
 * job totals and the in-progress counters. */
static void print_round(const char *id, const fedkern_v1_JobStatusResponse *rs, uint32_t round,
                        int json)
{
    if (json)
        printf("{\"job\":\"%s\",\"round\":%u,\"rounds\":%u", id, round, rs->rounds_total);
    else
        printf("job %s round %u/%u:", id, round, rs->rounds_total);
    for (pb_size_t i = 0; i < rs->metrics_count; i++) {
        const char *n = rs->metrics[i].name;
        if (!strcmp(n, "round") || !strncmp(n, "current_", 8) || strstr(n, "_total"))
            continue;
        if (json)
            printf(",\"%s\":%.17g", n, rs->metrics[i].value);
        else
            printf(" %s %.6g", n, rs->metrics[i].value);
    }
    printf(json ? "}\n" : "\n");
    fflush(stdout);
}

/* status --follow: a line per round as rounds close, until the job ends. 0 = done. A status
 * call that times out is tried again for up to FOLLOW_RETRY_S seconds. */
enum { FOLLOW_RETRY_S = 600 };
static int do_follow(conn *c, const char *id, int json, long interval_ms)
{
    fedkern_v1_JobStatusResponse st;
    uint32_t shown = 0;
    for (;;) {
        /* no deadline of its own: a busy server's timeouts are retried for FOLLOW_RETRY_S */
        time_t until = time(NULL) + FOLLOW_RETRY_S;
        int rc = status_until(c, "job status", id, 0, &st, until);
        for (uint32_t r = shown + 1; !rc && r <= st.round; r++) {
            fedkern_v1_JobStatusResponse rs;
            if (!(rc = status_until(c, "job status", id, r, &rs, until)))
                print_round(id, &rs, r, json);
            shown = r;
        }
        if (rc)
            return rc;
        if (st.state != fedkern_v1_JobState_JOB_RUNNING &&
            st.state != fedkern_v1_JobState_JOB_QUEUED)
            break;
        usleep((useconds_t)interval_ms * 1000);
    }
    if (json) {
        printf("{\"job\":\"%s\",\"state\":\"%s\",\"rounds_done\":%u,\"message\":", id,
               fk_jobcli_state_name(st.state), st.round);
        print_json_string(st.message);
        printf("}\n");
    } else {
        printf("job %s: %s after %u of %u rounds%s%s\n", id, fk_jobcli_state_name(st.state),
               st.round, st.rounds_total, st.message[0] ? ": " : "", st.message);
    }
    return st.state == fedkern_v1_JobState_JOB_DONE ? 0 : 1;
}

/* health: the server's grpc.health.v1 Check; 0 when it answers SERVING. */
static int do_health(conn *c, int json)
{
    grpc_health_v1_HealthCheckRequest in = grpc_health_v1_HealthCheckRequest_init_zero;
    uint8_t *buf;
    size_t len;
    fk_err err;
    if (fk_codec_encode(grpc_health_v1_HealthCheckRequest_fields, &in, 0, &buf, &len, &err))
        return fk_cli_fail("health", "%s", err.msg);
    double t0 = uv_hrtime() * 1e-9;
    int rc = call_path(c, "health", "/grpc.health.v1.Health/Check", buf, len);
    double ms = 1e3 * (uv_hrtime() * 1e-9 - t0);
    grpc_health_v1_HealthCheckResponse out = grpc_health_v1_HealthCheckResponse_init_zero;
    if (!rc &&
        fk_codec_decode(grpc_health_v1_HealthCheckResponse_fields, &out, c->resp, c->resp_len, &err))
        rc = fk_cli_fail("health", "%s", err.msg);
    if (rc)
        return rc;
    int serving = out.status == grpc_health_v1_HealthCheckResponse_ServingStatus_SERVING;
    const char *what = serving ? "SERVING"
                       : out.status == grpc_health_v1_HealthCheckResponse_ServingStatus_NOT_SERVING
                           ? "NOT_SERVING"
                           : "UNKNOWN";
    if (json)
        printf("{\"status\":\"%s\",\"ms\":%.3f}\n", what, ms);
    else
        printf("%s (%.1f ms)\n", what, ms);
    return serving ? 0 : 1;
}

/* Unix seconds as UTC "YYYY-MM-DDTHH:MM:SSZ". */
static void utc(double t, char *out, size_t cap)
{
    time_t s = (time_t)t;
    struct tm tm;
    if (!gmtime_r(&s, &tm) || !strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(out, cap, "-");
}

static int do_list(conn *c, long limit, int json)
{
    fedkern_v1_ListJobsRequest in = fedkern_v1_ListJobsRequest_init_zero;
    in.limit = (uint32_t)limit;
    int rc = rpc(c, "job list", "ListJobs", fedkern_v1_ListJobsRequest_fields, &in);
    fedkern_v1_ListJobsResponse out = fedkern_v1_ListJobsResponse_init_zero;
    fk_err err = {0};
    if (!rc && fk_codec_decode(fedkern_v1_ListJobsResponse_fields, &out, c->resp, c->resp_len, &err))
        rc = fk_cli_fail("job list", "%s", err.msg);
    if (rc)
        return rc;
    if (!json)
        printf("%-6s %-16s %-9s %6s  %-20s  %-20s\n", "ID", "METHOD", "STATE", "ROUND", "STARTED",
               "UPDATED");
    for (pb_size_t i = 0; i < out.jobs_count; i++) {
        const fedkern_v1_JobSummary *j = &out.jobs[i];
        if (json) {
            printf("{\"job\":\"%s\",\"method\":\"%s\",\"state\":\"%s\",\"round\":%u,"
                   "\"started\":%.3f,\"updated\":%.3f}\n",
                   j->job_id, j->method, fk_jobcli_state_name(j->state), j->round, j->started,
                   j->updated);
        } else {
            char a[32], b[32];
            utc(j->started, a, sizeof a);
            utc(j->updated, b, sizeof b);
            printf("%-6s %-16s %-9s %6u  %-20s  %-20s\n", j->job_id, j->method,
                   fk_jobcli_state_name(j->state), j->round, a, b);
        }
    }
    fk_codec_release(fedkern_v1_ListJobsResponse_fields, &out);
    return 0;
}

static void print_keys(const fk_param_doc *d)
{
    for (; d->key; d++)
        printf("  %-32s %s\n", d->key, d->help);
}

/* job keys [METHOD]: what a job file may set, with no server. */
static int do_keys(const char *method)
{
    fk_err err = {0};
    const fk_method *m = method ? fk_method_find(method, &err) : NULL;
    if (method && !m) {
        fk_cli_fail("job keys", "%s", err.msg);
        return 2;
    }
    printf("keys of every job (read by the server's round engine):\n");
    print_keys(fk_jobkeys_generic);
    if (m) {
        printf("\nkeys of job type %s:\n", m->name);
        print_keys(m->keys);
    } else {
        printf("\njob types (fedkern job keys METHOD lists a type's own keys):\n");
        for (int i = 0; fk_methods[i]; i++)
            printf("  %-16s %s\n", fk_methods[i]->name, fk_methods[i]->summary);
    }
    return 0;
}

/* The subcommands: positional arguments and their own options (plus the connection's). */
static const fk_param_doc conn_opts[] = {
    {"server HOST:PORT", ""}, {"server_name NAME", ""}, {"tls_dir DIR", ""},
    {"name NAME", ""},        {"timeout_ms MS", ""},    {"help", ""},
    {NULL, NULL},
};
static const fk_param_doc no_opts[] = {{"help", ""}, {NULL, NULL}};
static const fk_param_doc submit_opts[] = {
    {"skip_client_check", ""}, {"wait_clients SECONDS", ""}, {NULL, NULL}};
static const fk_param_doc plot_opts[] = {{"out FILE", ""}, {"json", ""}, {NULL, NULL}};
static const fk_param_doc list_opts[] = {{"limit N", ""}, {"json", ""}, {NULL, NULL}};
static const fk_param_doc json_opts[] = {{"json", ""}, {NULL, NULL}};
static const fk_param_doc status_opts[] = {
    {"round N", ""}, {"json", ""}, {"follow", ""}, {"interval SECONDS", ""}, {NULL, NULL}};
static const fk_param_doc result_opts[] = {
    {"out FILE", ""}, {"wait SECONDS", ""}, {"current", ""},
    {"selected", ""}, {"json", ""},         {NULL, NULL}};
static const fk_param_doc predict_opts[] = {{"data FILE", ""}, {"out FILE", ""},
                                            {"no_labels", ""}, {"json", ""}, {"client N", ""},
                                            {"timeout SECONDS", ""}, {"model_prep 0|1", ""},
                                            {NULL, NULL}};

typedef struct job_sub {
    const char *name;
    int min_args, max_args;
    const fk_param_doc *opts;
    int conn; /* talks to the server */
} job_sub;

static const job_sub subs[] = {
    {"submit", 1, 1, submit_opts, 1},     {"list", 0, 0, list_opts, 1},
    {"status", 1, 1, status_opts, 1}, {"result", 1, 1, result_opts, 1},
    {"cancel", 1, 1, no_opts, 1},     {"predict", 1, 1, predict_opts, 1},
    {"delete", 1, 1, no_opts, 1},
    {"plot", 1, 1, plot_opts, 1},     {"keys", 0, 1, no_opts, 0},       {"health", 0, 0, json_opts, 1},
    {NULL, 0, 0, NULL, 0},
};

int fk_cmd_health(int argc, char **argv)
{
    char **v = malloc((size_t)(argc + 2) * sizeof *v);
    if (!v)
        return fk_cli_fail("health", "out of memory");
    static char name[] = "health";
    v[0] = name;
    for (int i = 0; i < argc; i++)
        v[i + 1] = argv[i];
    v[argc + 1] = NULL;
    int rc = fk_cmd_job(argc + 1, v);
    free(v);
    return rc;
}

int fk_cmd_job(int argc, char **argv)
{
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? 2 : 0;
    }
    const char *sub = argv[0];
    const job_sub *js = NULL;
    for (int i = 0; subs[i].name; i++)
        if (!strcmp(sub, subs[i].name))
            js = &subs[i];
    if (!js) {
        fk_cli_fail("job", "unknown subcommand '%s'; see --help", sub);
        return 2;
    }
    fk_params p;
    fk_params_init(&p);
    fk_err err = {0};
    int n = argc - 1;
    char **rest = argv + 1;
    int rc = 0;
    static char skip_flag[] = "--skip_client_check=1"; /* a bare flag before JOB.conf */
    static char header_flag[] = "--header=1", sic_flag[] = "--samples_in_columns=1";
    for (int i = 0; i < n; i++)
        if (!strcmp(rest[i], "--skip_client_check") || !strcmp(rest[i], "--skip-client-check"))
            rest[i] = skip_flag;
        else if (!strcmp(rest[i], "--header"))
            rest[i] = header_flag;
        else if (!strcmp(rest[i], "--samples_in_columns"))
            rest[i] = sic_flag;
    if (fk_params_parse_args(&p, &n, rest, &err)) {
        rc = fk_cli_fail("job", "%s", err.msg);
        goto out;
    }
    if (fk_params_get(&p, "help")) {
        usage(stdout);
        goto out;
    }
    /* An unknown option is a usage error before anything else is looked at. */
    char prog[32];
    snprintf(prog, sizeof prog, "fedkern job %s", sub);
    const fk_option_table known[] = {{js->opts, NULL},
                                     {js->conn ? conn_opts : no_opts, NULL},
                                     {js->conn ? fk_net_limits_doc() : no_opts, "net."},
                                     {js->opts == predict_opts ? fk_source_docs : no_opts, NULL},
                                     {NULL, NULL}};
    if ((rc = fk_options_check(&p, known, prog, NULL, 0, stderr)))
        goto out;
    if (n < js->min_args || n > js->max_args) {
        fk_cli_fail("job", js->max_args == 0   ? "%s takes no argument; see --help"
                           : js->min_args == 0 ? "%s takes at most one argument; see --help"
                                               : "%s takes exactly one argument; see --help",
                    sub);
        rc = 2;
        goto out;
    }
    if (!js->conn) {
        rc = do_keys(n ? rest[0] : NULL);
        goto out;
    }
    long wait_s, round, predict_s, limit, interval_s, wait_clients_s, client;
    int json, current, selected, no_labels, follow, skip_check, model_prep;
    if (fk_params_bool(&p, "no_labels", 0, &no_labels, &err) ||
        fk_params_bool(&p, "model_prep", 1, &model_prep, &err) ||
        fk_params_bool(&p, "skip_client_check", 0, &skip_check, &err) ||
        fk_params_int(&p, "wait", 0, 0, 86400 * 30, &wait_s, &err) ||
        fk_params_int(&p, "wait_clients", 0, 0, 86400, &wait_clients_s, &err) ||
        fk_params_int(&p, "timeout", 5, 1, 600, &predict_s, &err) ||
        fk_params_int(&p, "client", -1, 0, 1000000, &client, &err) ||
        fk_params_int(&p, "round", 0, 0, 0x7fffffff, &round, &err) ||
        fk_params_int(&p, "limit", 20, 1, 1000, &limit, &err) ||
        fk_params_int(&p, "interval", 1, 1, 3600, &interval_s, &err) ||
        fk_params_bool(&p, "json", 0, &json, &err) ||
        fk_params_bool(&p, "follow", 0, &follow, &err) ||
        fk_params_bool(&p, "current", 0, &current, &err) ||
        fk_params_bool(&p, "selected", 0, &selected, &err)) {
        fk_cli_fail("job", "%s", err.msg);
        rc = 2;
        goto out;
    }
    const char *out_path = fk_params_get(&p, "out");
    const char *data_path = fk_params_get(&p, "data");
    if (!strcmp(sub, "predict") && !data_path) {
        fk_cli_fail("job", "predict needs --data FILE");
        rc = 2;
        goto out;
    }
    fk_source so; /* job predict: the loader options of fedkern data */
    memset(&so, 0, sizeof so);
    if (!strcmp(sub, "predict") && fk_source_parse(&so, &p, "", &err)) {
        fk_cli_fail("job", "predict: %s", err.msg);
        rc = 2;
        goto out;
    }
    if (no_labels && fk_params_get(&p, "label")) {
        fk_cli_fail("job", "predict: --no_labels and --label do not go together");
        rc = 2;
        goto out;
    }
    if (no_labels)
        so.load.label = FK_LABEL_NONE;
    if (!strcmp(sub, "plot") && !out_path) {
        fk_cli_fail("job", "plot needs --out FILE.svg");
        rc = 2;
        goto out;
    }
    if (!strcmp(sub, "result") && !out_path) {
        fk_cli_fail("job", "result needs --out FILE");
        rc = 2;
        goto out;
    }
    if (follow && round) {
        fk_cli_fail("job", "status: --follow and --round N do not go together");
        rc = 2;
        goto out;
    }
    char *text = NULL; /* a job file is read (and refused) before any connection */
    if (!strcmp(sub, "submit") && !(text = read_file(rest[0], &err))) {
        rc = fk_cli_fail("job", "%s", err.msg);
        goto out;
    }
    conn c;
    if ((rc = open_conn(&c, &p, sub))) {
        free(text);
        goto out;
    }
    if (!strcmp(sub, "submit")) {
        rc = do_submit(&c, text, skip_check, wait_clients_s);
        text = NULL;
    } else if (!strcmp(sub, "list")) {
        rc = do_list(&c, limit, json);
    } else if (!strcmp(sub, "health")) {
        rc = do_health(&c, json);
    } else if (!strcmp(sub, "status")) {
        rc = follow ? do_follow(&c, rest[0], json, interval_s * 1000)
                    : do_status(&c, rest[0], (uint32_t)round, json);
    } else if (!strcmp(sub, "result")) {
        rc = do_result(&c, rest[0], out_path, wait_s, current, selected, json);
    } else if (!strcmp(sub, "plot")) {
        rc = do_plot(&c, rest[0], out_path, json);
    } else if (!strcmp(sub, "predict")) {
        rc = do_predict(&c, rest[0], data_path, &so, out_path, json, predict_s, client, model_prep);
    } else if (!strcmp(sub, "delete")) {
        rc = do_delete(&c, rest[0]);
    } else {
        rc = do_cancel(&c, rest[0]);
    }
    free(text);
    close_conn(&c);
out:
    fk_params_close(&p);
    return rc;
}
