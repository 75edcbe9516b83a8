/* fedkern-client: the client daemon. Config + certificate + local data by
 * data-set name; the agent (client/agent.c) does the federation work. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <uv.h>

#include "client/agent.h"
#include "client/metrics.h"
#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/data/catalog.h"
#include "common/data/load.h"
#include "common/data/synth_spec.h"
#include "common/net/hostport.h"
#include "common/net/limits.h"
#include "common/net/metrics_http.h"
#include "common/net/tls.h"
#include "common/sys/daemon.h"
#include "common/sys/notify.h"

static const fk_param_doc opts[] = {
    {"config FILE", "INI file with any of the keys below (flags override it)"},
    {"server HOST:PORT", "the fedkern-server to join; HOST is an IP or a DNS name (127.0.0.1:7443)"},
    {"server-name NAME", "name the server certificate must carry (default: HOST)"},
    {"tls-dir DIR", "certificate directory from 'fedkern certs' (ca.pem, client-NAME.pem/.key)"},
    {"name NAME", "which client-NAME.pem/.key of tls-dir to use (required with tls-dir)"},
    {"tls.ca FILE", "CA bundle the server must chain to (TLS-DIR/ca.pem)"},
    {"tls.cert FILE", "client certificate (TLS-DIR/client-NAME.pem)"},
    {"tls.key FILE", "client private key (TLS-DIR/client-NAME.key)"},
    {"tls.crl FILE", "PEM CRL the server certificate is checked against (none)"},
    {"data.DATASET SOURCE", "local data for jobs on DATASET: a catalog name (see 'fedkern data'),"
                            " a file (CSV, LIBSVM, IDX, MAT, NPY) or built-in synthetic data"
                            " (synthetic/shift:client=I,... or synthetic/gmm:client=I,...;"
                            " see docs/data.md)"},
    {"data-dir DIR", "directory of the catalog's data sets (../shared/data)"},
    {"state-dir DIR", "where the jobs' client-side method state is kept across restarts "
                      "($STATE_DIRECTORY under systemd; unset: in memory only)"},
    {"local.KEY VALUE", "this client's own settings for job types, never set by a job "
                        "([local] section): local.allow_raw_upload true consents to sfl jobs "
                        "uploading raw rows, local.max_upload_fraction F caps that upload, "
                        "local.allow_model_upload true consents to kahm jobs uploading models "
                        "that contain the training samples (all false / unset)"},
    {"backoff-max-ms MS", "cap of the reconnect delay (15000)"},
    {"log-level LEVEL", "error, warn, info or debug (info)"},
    {"metrics-listen HOST:PORT", "Prometheus text metrics over plain HTTP (off unless set; e.g. "
                                 "127.0.0.1:9465)"},
    {NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-client --server HOST:PORT --tls-dir DIR --name NAME "
                 "--data.DATASET SOURCE [options]\n"
                 "\n"
                 "The fedkern client daemon: joins the server over mutual TLS, long-polls tasks,\n"
                 "runs the method's local step on the local data and pushes the updates.\n"
                 "Reconnects with capped exponential backoff and full jitter; a half-sent update\n"
                 "resumes and is never counted twice. SIGTERM/SIGINT: abandon the step, leave, exit 0.\n"
                 "Every option is also a config-file key (without the dashes; [data] section for "
                 "data.*).\n\noptions:\n");
    fk_param_docs_print(out, opts, NULL, NULL);
    fk_param_docs_print(out, fk_net_limits_doc(), "net.", " N");
    fk_param_docs_print(out, fk_daemon_std_docs, NULL, NULL);
}

/* Data sets loaded on first use, by job data-set name. */
typedef struct data_cache {
    const fk_params *p;
    char names[16][64];
    fk_dataset sets[16];
    int n;
} data_cache;

static int is_catalog_name(const char *s)
{
    for (const char *const *n = fk_catalog_names(); *n; n++)
        if (!strcmp(*n, s))
            return 1;
    return 0;
}

static const fk_dataset *data_for(void *ud, const char *dataset, fk_err *err)
{
    data_cache *c = ud;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->names[i], dataset))
            return &c->sets[i];
    char key[96];
    snprintf(key, sizeof key, "data.%s", dataset);
    const char *src = fk_params_get(c->p, key);
    if (!src) {
        fk_err_set(err, FK_ENOTFOUND,
                   "this client holds no data set '%s'; add 'data.%s = SOURCE' to its config",
                   dataset, dataset);
        return NULL;
    }
    if (c->n == 16) {
        fk_err_set(err, FK_ELIMIT, "more than 16 data sets in use");
        return NULL;
    }
    fk_dataset *ds = &c->sets[c->n];
    int rc = is_catalog_name(src)
                 ? fk_catalog_load(ds, fk_params_str(c->p, "data-dir", "../shared/data"), src, err)
             : fk_synth_spec_is(src) ? fk_synth_spec_load(ds, src, err)
                                     : fk_load(ds, src, NULL, err);
    if (rc)
        return NULL;
    snprintf(c->names[c->n], sizeof c->names[c->n], "%s", dataset);
    fk_log(FK_LOG_INFO, "data_loaded", "dataset=%s source=%s samples=%zu dims=%zu", dataset, src,
           ds->X.rows, ds->X.cols);
    return &c->sets[c->n++];
}

typedef struct client_state {
    fk_agent *agent;
    fk_stop_signals stop;
    fk_notify notify;
    fk_metrics *metrics; /* NULL unless metrics-listen is set */
    int stopping;
} client_state;

static int render_metrics(void *ud, char **b, size_t *len)
{
    client_state *st = ud;
    fk_agent_stats as;
    fk_agent_stats_get(st->agent, &as);
    return fk_client_metrics_render(&as, b, len);
}

static void agent_stopped(void *ud)
{
    client_state *st = ud;
    fk_stop_signals_close(&st->stop);
    fk_notify_close(&st->notify);
    if (st->metrics)
        fk_metrics_close(st->metrics, NULL, NULL);
    st->metrics = NULL;
    fk_log(FK_LOG_INFO, "client_stopped", "reason=signal");
}

static void on_stop(uv_signal_t *sig, int signum)
{
    client_state *st = sig->data;
    if (st->stopping)
        return;
    st->stopping = 1;
    fk_log(FK_LOG_INFO, "client_stopping", "signal=%d", signum);
    fk_notify_stopping(&st->notify, "leaving");
    fk_stop_signals_stop(&st->stop);
    fk_agent_stop(st->agent, agent_stopped, st);
}

/* STATUS= line for systemd: connection and task counters. */
static void notify_status(void *ud, char *buf, size_t cap)
{
    client_state *st = ud;
    fk_agent_stats as;
    fk_agent_stats_get(st->agent, &as);
    snprintf(buf, cap, "joins: %llu, tasks: %llu, updates committed: %llu, reconnects: %llu",
             (unsigned long long)as.joins, (unsigned long long)as.tasks,
             (unsigned long long)as.committed, (unsigned long long)as.reconnects);
}

static int fail(const char *msg)
{
    fprintf(stderr, "fedkern-client: %s\n", msg);
    return 1;
}

static int build_tls(const fk_params *p, fk_tls_ctx **out, fk_err *err)
{
    const char *dir = fk_params_get(p, "tls-dir");
    const char *name = fk_params_get(p, "name");
    char ca[4096], cert[4096], key[4096];
    if (!fk_params_get(p, "tls.cert") || !fk_params_get(p, "tls.key") || !fk_params_get(p, "tls.ca")) {
        if (!dir || !name)
            return fk_err_set(err, FK_EINVAL,
                              "--tls-dir DIR and --name NAME are required (or --tls.ca, --tls.cert "
                              "and --tls.key)");
    }
    snprintf(ca, sizeof ca, "%s/ca.pem", dir ? dir : ".");
    snprintf(cert, sizeof cert, "%s/client-%s.pem", dir ? dir : ".", name ? name : "");
    snprintf(key, sizeof key, "%s/client-%s.key", dir ? dir : ".", name ? name : "");
    fk_tls_files f = {fk_params_str(p, "tls.ca", ca), fk_params_str(p, "tls.cert", cert),
                      fk_params_str(p, "tls.key", key), fk_params_str(p, "tls.crl", NULL), 0};
    return fk_tls_ctx_new(out, 0, &f, err);
}

/* --state-dir, else systemd's STATE_DIRECTORY (the first of a ':' list); "" = none. */
static int state_dir(const fk_params *p, char *out, size_t cap, fk_err *err)
{
    const char *d = fk_params_get(p, "state-dir");
    const char *env = getenv("STATE_DIRECTORY");
    size_t n = d ? strlen(d) : env ? strcspn(env, ":") : 0;
    if (n >= cap)
        return fk_err_set(err, FK_EINVAL, "--state-dir: path too long");
    memcpy(out, d ? d : env ? env : "", n);
    out[n] = '\0';
    if (n && mkdir(out, 0700) && errno != EEXIST)
        return fk_err_set(err, FK_EIO, "--state-dir %s: cannot create it: %s", out, strerror(errno));
    struct stat st;
    if (n && (stat(out, &st) || !S_ISDIR(st.st_mode)))
        return fk_err_set(err, FK_EINVAL, "--state-dir %s is not a directory", out);
    return FK_OK;
}

static int run(fk_params *p)
{
    fk_err err = {0};
    fk_agent_config ac = {0};
    fk_net_limits_default(&ac.limits);
    long backoff;
    if (fk_net_limits_from_params(&ac.limits, p, "net", &err) != FK_OK ||
        fk_params_int(p, "backoff-max-ms", 15000, 100, 3600000, &backoff, &err) != FK_OK)
        return fail(err.msg);
    int level = fk_log_level_from_name(fk_params_str(p, "log-level", "info"));
    if (level < 0)
        return fail("--log-level must be error, warn, info or debug");
    fk_log_set_level(level);
    fk_log_set_timestamps(!fk_log_stderr_is_journal()); /* journald stamps lines itself */
    const char *metrics_listen = fk_params_get(p, "metrics-listen");
    char host[256], sdir[4096];
    int port;
    if (state_dir(p, sdir, sizeof sdir, &err) != FK_OK)
        return fail(err.msg);
    const char *server = fk_params_str(p, "server", "127.0.0.1:7443");
    if (fk_hostport_split(server, host, sizeof host, &port) || port == 0)
        return fail("--server must be HOST:PORT");
    fk_tls_ctx *tls;
    if (build_tls(p, &tls, &err) != FK_OK)
        return fail(err.msg);
    fk_params_get(p, "config");
    fk_params_get(p, "data-dir");
    const char *server_name = fk_params_str(p, "server-name", host);
    for (int i = 0; i < p->count; i++) /* data.* and local.* keys are read by the jobs */
        if (!strncmp(p->items[i].key, "data.", 5) || !strncmp(p->items[i].key, "local.", 6))
            p->items[i].used = 1;
    const char *unused = fk_params_unused(p);
    if (unused) {
        fk_tls_ctx_unref(tls);
        fprintf(stderr, "fedkern-client: unknown option or key '%s'; see --help\n", unused);
        return 2;
    }
    data_cache cache = {.p = p};
    ac.host = host;
    ac.port = port;
    ac.server_name = server_name;
    ac.tls = tls;
    ac.data = data_for;
    ac.data_ud = &cache;
    ac.backoff_max_ms = (uint64_t)backoff;
    ac.state_dir = *sdir ? sdir : NULL;
    ac.local = p;
    /* Say once, at start, what this client's consents let leave the machine. */
    int raw = 0, models = 0;
    if (fk_params_bool(p, "local.allow_raw_upload", 0, &raw, &err) ||
        fk_params_bool(p, "local.allow_model_upload", 0, &models, &err))
        return fail(err.msg);
    if (raw)
        fk_log(FK_LOG_WARN, "raw_upload_allowed",
               "msg=\"jobs that ask for it (sfl raw_sample_upload = acknowledged) will send raw "
               "rows of this client's data (its critical samples) to the server\"");
    if (models)
        fk_log(FK_LOG_WARN, "model_upload_allowed",
               "msg=\"jobs that ask for it (kahm upload_models = 1) will send models from which the "
               "server can reconstruct this client's training samples\"");
    uv_loop_t loop;
    int rc = fk_uv_err(uv_loop_init(&loop), "event loop", &err);
    if (rc) {
        fk_tls_ctx_unref(tls);
        return fail(err.msg);
    }
    client_state st = {0};
    rc = fk_agent_start(&st.agent, &loop, &ac, &err);
    fk_tls_ctx_unref(tls);
    if (rc == FK_OK) {
        fk_err serr;
        if (fk_stop_signals_start(&st.stop, &loop, on_stop, &st, &serr))
            fk_log(FK_LOG_ERROR, "stop_signals_unavailable", "error=\"%s\"", serr.msg);
        fk_log(FK_LOG_INFO, "client_started", "server=%s state_dir=%s", server,
               *sdir ? sdir : "none");
        if (metrics_listen && strcmp(metrics_listen, "off")) {
            if (fk_metrics_start(&st.metrics, &loop, metrics_listen, render_metrics, &st, &serr))
                fk_log(FK_LOG_ERROR, "metrics_unavailable", "error=\"%s\"", serr.msg);
            else
                fk_log(FK_LOG_INFO, "metrics_listening", "listen=%s port=%d", metrics_listen,
                       fk_metrics_port(st.metrics));
        }
        if (!*sdir)
            fk_log(FK_LOG_WARN, "client_state_not_persisted",
                   "msg=\"no --state-dir: a restarted client cannot continue jobs whose method keeps "
                   "client state (e.g. fedgrem)\"");
        fk_notify_init(&st.notify, &loop, notify_status, &st);
        fk_notify_ready(&st.notify, "started, joining the server");
        FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    }
    FK_UV_MUST(uv_loop_close(&loop));
    for (int i = 0; i < cache.n; i++)
        fk_dataset_close(&cache.sets[i]);
    return rc == FK_OK ? 0 : fail(err.msg);
}

int main(int argc, char **argv)
{
    return fk_daemon_main(argc, argv, "fedkern-client", usage, run);
}
