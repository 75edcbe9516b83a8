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
#include "common/data/source.h"
#include "common/la/blas_core.h"
#include "common/la/blas_threads.h"
#include "common/methods/jobconf.h"
#include "common/net/hostport.h"
#include "common/net/limits.h"
#include "common/net/metrics_http.h"
#include "common/net/tls.h"
#include "common/sys/daemon.h"
#include "common/sys/notify.h"

static const fk_param_doc opts[] = {
    {"config FILE", "INI file with any of the keys below (flags override it)"},
    {"server HOST:PORT", "the fedkern-server to join; HOST is an IP or a DNS name (127.0.0.1:7443)"},
    {"server_name NAME", "name the server certificate must carry (default: HOST)"},
    {"tls_dir DIR", "certificate directory from 'fedkern certs' (ca.pem, client-NAME.pem/.key)"},
    {"name NAME", "which client-NAME.pem/.key of tls_dir to use (required with tls_dir)"},
    {"tls.ca FILE", "CA bundle the server must chain to (TLS-DIR/ca.pem)"},
    {"tls.cert FILE", "client certificate (TLS-DIR/client-NAME.pem)"},
    {"tls.key FILE", "client private key (TLS-DIR/client-NAME.key)"},
    {"tls.crl FILE", "PEM CRL the server certificate is checked against (none)"},
    {"data.DATASET SOURCE", "local data for jobs on DATASET: a catalog name (see 'fedkern data'),"
                            " a file (CSV, LIBSVM, IDX, MAT, NPY) or built-in synthetic data"
                            " (synthetic/shift:client=I,... or synthetic/gmm:client=I,...;"
                            " see docs/data.md)"},
    {"data.DATASET.KEY VALUE", "loader options of DATASET (all loaded and checked at start; a "
                               "bad one stops the client): label first|last|N|none, header, "
                               "delim C, format F, var NAME, label_var NAME, samples_in_columns, "
                               "labels FILE, cols N, prep l1|l2|zscore,..., affine FILE "
                               "(see 'fedkern data --help')"},
    {"data_dir DIR", "directory of the catalog's data sets (../shared/data)"},
    {"state_dir DIR", "where the jobs' client-side method state is kept across restarts "
                      "($STATE_DIRECTORY under systemd; unset: in memory only)"},
    {"backoff_max_ms MS", "cap of the reconnect delay (15000)"},
    {"log_level LEVEL", "error, warn, info or debug (info)"},
    {"metrics_listen HOST:PORT", "Prometheus text metrics over plain HTTP (off unless set; e.g. "
                                 "127.0.0.1:9465)"},
    {NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-client --server HOST:PORT --tls_dir DIR --name NAME "
                 "--data.DATASET SOURCE [options]\n"
                 "\n"
                 "The fedkern client daemon: joins the server over mutual TLS, long-polls tasks,\n"
                 "runs the method's local step on the local data and pushes the updates.\n"
                 "Reconnects with capped exponential backoff and full jitter; a half-sent update\n"
                 "resumes and is never counted twice. SIGTERM/SIGINT: abandon the step, leave, exit 0.\n"
                 "Every option is also a config-file key (without the dashes; [data] section for "
                 "data.*).\n\noptions:\n");
    fk_param_docs_print(out, opts, NULL, NULL);
    fprintf(out, "\nthis client's own consents and caps for job types, never set by a job ([local] "
                 "section; any other local.* key is refused):\n");
    fk_param_docs_print(out, fk_agent_local_docs, NULL, NULL);
    fprintf(out, "\n");
    fk_param_docs_print(out, fk_net_limits_doc(), "net.", " N");
    fk_param_docs_print(out, fk_daemon_std_docs, NULL, NULL);
}

/* Every declared data set, loaded and checked at start, by job data-set name. */
typedef struct data_cache {
    char names[FK_AGENT_MAX_DATASETS][64];
    fk_dataset sets[FK_AGENT_MAX_DATASETS];
    fk_agent_dataset info[FK_AGENT_MAX_DATASETS]; /* what the client advertises at Join */
    fk_affine affine[FK_AGENT_MAX_DATASETS];      /* each set's data.NAME.affine map */
    size_t affine_reported;                       /* map values put in the Join so far */
    int n;
} data_cache;

static const fk_dataset *data_for(void *ud, const char *dataset, fk_err *err)
{
    data_cache *c = ud;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->names[i], dataset))
            return &c->sets[i];
    char held[400] = "";
    for (int i = 0; i < c->n; i++)
        snprintf(held + strlen(held), sizeof held - strlen(held), "%s%s", i ? ", " : "",
                 c->names[i]);
    fk_err_set(err, FK_ENOTFOUND,
               "holds no data set '%s' (it holds: %s); add 'data.%s = SOURCE' to its config",
               dataset, c->n ? held : "none", dataset);
    return NULL;
}

static void data_cache_close(data_cache *c)
{
    for (int i = 0; i < c->n; i++) {
        fk_dataset_close(&c->sets[i]);
        fk_affine_close(&c->affine[i]);
    }
    c->n = 0;
}

/* "data.NAME.OPT" where "data.NAME" is declared too: NAME's loader option OPT (set *opt), or
 * 0 for a data set key. Data-set names may contain dots, so only a declared NAME counts. */
static int option_key(const fk_params *p, const char *key, const char **opt, char *name,
                      size_t cap)
{
    const char *dot = strrchr(key + 5, '.');
    if (!dot || (size_t)(dot - key) >= cap)
        return 0;
    memcpy(name, key, (size_t)(dot - key));
    name[dot - key] = '\0';
    if (!fk_params_get(p, name))
        return 0;
    *opt = dot + 1;
    return 1;
}

/* Every data.NAME.OPT key names a loader option: an unknown one is a usage error, checked
 * before anything is loaded, with the nearest option. Returns 2 (printed) or 0. */
static int check_data_keys(const fk_params *p)
{
    int rc = 0;
    for (int i = 0; i < p->count; i++) {
        const char *key = p->items[i].key, *opt;
        char name[256];
        if (strncmp(key, "data.", 5) || !option_key(p, key, &opt, name, sizeof name) ||
            fk_source_is_option(opt))
            continue;
        fk_param_near n;
        fk_param_near_init(&n);
        fk_param_docs_near(fk_source_docs, NULL, opt, &n);
        fprintf(stderr, "fedkern-client: unknown loader option '%s' of data set '%s' (key '%s')",
                opt, name + 5, key);
        if (*n.best)
            fprintf(stderr, "; did you mean '%s.%s'?", name, n.best);
        fprintf(stderr, " (see fedkern data --help)\n");
        rc = 2;
    }
    return rc;
}

/* Most affine-map values one Join carries (8 bytes each, twice): a client with more reports
 * the larger sets' preprocessing as unknown rather than exceed the server's message size. */
enum { AFFINE_REPORT_MAX = 65535 }; /* also nanopb's 16-bit array count */

/* What set c->n's loader did to its raw file, for the Join (the model records it): its
 * steps, then its affine map, read again from data.NAME.affine (the loader checked it). */
FK_CHECKRETURN static int report_prep(data_cache *c, const char *ds, const char *src, const fk_source *so,
                       fk_err *err)
{
    fk_agent_dataset *o = &c->info[c->n];
    c->affine[c->n] = (fk_affine){0};
    o->n_prep = fk_source_steps(src, so, o->prep, 8);
    o->prep_listed = 1;
    if (!so->affine)
        return FK_OK;
    fk_affine *a = &c->affine[c->n];
    int rc = fk_affine_load(a, so->affine, err);
    if (rc)
        return fk_err_prefix(err, rc, "data set '%s': ", ds);
    if (a->d > AFFINE_REPORT_MAX - c->affine_reported) {
        fk_log(FK_LOG_WARN, "prep_not_reported",
               "dataset=%s affine_columns=%zu reason=\"the map is too large for the Join; "
               "models will say the preprocessing is unknown\"",
               ds, a->d);
        o->prep_listed = 0;
        return FK_OK;
    }
    c->affine_reported += a->d;
    o->affine_d = a->d;
    o->affine_shift = a->shift;
    o->affine_scale = a->scale;
    return FK_OK;
}

/* Load every data.NAME source with its data.NAME.* options (checked by check_data_keys);
 * the first failure is one error naming the data set, the source and what to change. */
FK_CHECKRETURN static int load_all(data_cache *c, const fk_params *p, fk_err *err)
{
    const char *dir = fk_params_str(p, "data_dir", "../shared/data");
    for (int i = 0; i < p->count; i++) {
        const char *key = p->items[i].key, *opt;
        char name[256];
        if (strncmp(key, "data.", 5) || option_key(p, key, &opt, name, sizeof name))
            continue;
        const char *ds = key + 5, *src = p->items[i].value;
        if (!fk_identity_valid(ds) || strlen(ds) >= sizeof c->names[0])
            return fk_err_set(err, FK_EINVAL,
                              "%s: a data-set name is 1..63 letters, digits and ._@:- (as a "
                              "job's 'dataset' key)",
                              key);
        if (c->n == FK_AGENT_MAX_DATASETS)
            return fk_err_set(err, FK_ELIMIT, "more than %d data sets declared (data.*)",
                              FK_AGENT_MAX_DATASETS);
        char prefix[300];
        snprintf(prefix, sizeof prefix, "%s.", key);
        fk_source so;
        int rc = fk_source_parse(&so, p, prefix, err);
        so.data_dir = dir;
        if (!rc)
            rc = fk_source_load(&c->sets[c->n], src, &so, NULL, err);
        if (rc)
            return fk_err_prefix(err, rc, "data set '%s' (%s = %s): ", ds, key, src);
        fk_dataset *d = &c->sets[c->n];
        snprintf(c->names[c->n], sizeof c->names[c->n], "%s", ds);
        c->info[c->n] = (fk_agent_dataset){
            .name = c->names[c->n],
            .rows = d->X.rows,
            .cols = d->X.cols,
            .classes = d->n_classes > 0 ? (uint32_t)d->n_classes : 0,
        };
        if ((rc = report_prep(c, ds, src, &so, err))) {
            fk_dataset_close(d);
            return rc;
        }
        fk_log(FK_LOG_INFO, "data_loaded", "dataset=%s source=%s samples=%zu dims=%zu classes=%d",
               ds, src, d->X.rows, d->X.cols, d->n_classes);
        c->n++;
    }
    return FK_OK;
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

FK_CHECKRETURN static int build_tls(const fk_params *p, fk_tls_ctx **out, fk_err *err)
{
    const char *dir = fk_params_get(p, "tls_dir");
    const char *name = fk_params_get(p, "name");
    char ca[4096], cert[4096], key[4096];
    if (!fk_params_get(p, "tls.cert") || !fk_params_get(p, "tls.key") || !fk_params_get(p, "tls.ca")) {
        if (!dir || !name)
            return fk_err_set(err, FK_EINVAL,
                              "--tls_dir DIR and --name NAME are required (or --tls.ca, --tls.cert "
                              "and --tls.key)");
    }
    snprintf(ca, sizeof ca, "%s/ca.pem", dir ? dir : ".");
    snprintf(cert, sizeof cert, "%s/client-%s.pem", dir ? dir : ".", name ? name : "");
    snprintf(key, sizeof key, "%s/client-%s.key", dir ? dir : ".", name ? name : "");
    fk_tls_files f = {fk_params_str(p, "tls.ca", ca), fk_params_str(p, "tls.cert", cert),
                      fk_params_str(p, "tls.key", key), fk_params_str(p, "tls.crl", NULL), 0};
    return fk_tls_ctx_new(out, 0, &f, err);
}

/* --state_dir, else systemd's STATE_DIRECTORY (the first of a ':' list); "" = none. */
FK_CHECKRETURN static int state_dir(const fk_params *p, char *out, size_t cap, fk_err *err)
{
    const char *d = fk_params_get(p, "state_dir");
    const char *env = getenv("STATE_DIRECTORY");
    size_t n = d ? strlen(d) : env ? strcspn(env, ":") : 0;
    if (n >= cap)
        return fk_err_set(err, FK_EINVAL, "--state_dir: path too long");
    memcpy(out, d ? d : env ? env : "", n);
    out[n] = '\0';
    if (n && mkdir(out, 0700) && errno != EEXIST)
        return fk_err_set(err, FK_EIO, "--state_dir %s: cannot create it: %s", out, strerror(errno));
    struct stat st;
    if (n && (stat(out, &st) || !S_ISDIR(st.st_mode)))
        return fk_err_set(err, FK_EINVAL, "--state_dir %s is not a directory", out);
    return FK_OK;
}

static int run(fk_params *p)
{
    fk_err err = {0};
    fk_agent_config ac = {0};
    fk_net_limits_default(&ac.limits);
    long backoff;
    if (fk_net_limits_from_params(&ac.limits, p, "net", &err) != FK_OK ||
        fk_params_int(p, "backoff_max_ms", 15000, 100, 3600000, &backoff, &err) != FK_OK)
        return fail(err.msg);
    int level = fk_log_level_from_name(fk_params_str(p, "log_level", "info"));
    if (level < 0)
        return fail("--log_level must be error, warn, info or debug");
    fk_log_set_level(level);
    fk_log_set_timestamps(!fk_log_stderr_is_journal()); /* journald stamps lines itself */
    int blas_threads;
    if (fk_blas_threads_setup(&blas_threads, &err) != FK_OK)
        return fail(err.msg);
    const char *metrics_listen = fk_params_get(p, "metrics_listen");
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
    fk_params_get(p, "data_dir");
    const char *server_name = fk_params_str(p, "server_name", host);
    for (int i = 0; i < p->count; i++) /* data.* and local.* keys are read by the jobs */
        if (!strncmp(p->items[i].key, "data.", 5) || !strncmp(p->items[i].key, "local.", 6))
            p->items[i].used = 1;
    const char *unused = fk_params_unused(p);
    if (unused) {
        fk_tls_ctx_unref(tls);
        fprintf(stderr, "fedkern-client: unknown option or key '%s'; see --help\n", unused);
        return 2;
    }
    if (check_data_keys(p)) {
        fk_tls_ctx_unref(tls);
        return 2;
    }
    /* Every data set is loaded before joining: a bad one stops the client here, not a job later. */
    data_cache cache = {0};
    if (load_all(&cache, p, &err)) {
        data_cache_close(&cache);
        fk_tls_ctx_unref(tls);
        fprintf(stderr, "fedkern-client: %s; fix the [data] section of the config (or the --data.* "
                        "flags) and start again\n", err.msg);
        return 1;
    }
    ac.host = host;
    ac.port = port;
    ac.server_name = server_name;
    ac.tls = tls;
    ac.data = data_for;
    ac.data_ud = &cache;
    ac.datasets = cache.info;
    ac.n_datasets = cache.n;
    ac.datasets_listed = 1;
    ac.backoff_max_ms = (uint64_t)backoff;
    ac.state_dir = *sdir ? sdir : NULL;
    ac.local = p;
    /* Say once, at start, what this client's consents let leave the machine. */
    int raw = 0, models = 0;
    if (fk_params_bool(p, "local.allow_raw_upload", 0, &raw, &err) ||
        fk_params_bool(p, "local.allow_model_upload", 0, &models, &err)) {
        data_cache_close(&cache);
        fk_tls_ctx_unref(tls);
        return fail(err.msg);
    }
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
        data_cache_close(&cache);
        fk_tls_ctx_unref(tls);
        return fail(err.msg);
    }
    client_state st = {0};
    rc = fk_agent_start(&st.agent, &loop, &ac, &err);
    fk_tls_ctx_unref(tls);
    if (rc == FK_OK) {
        fk_err serr = {0};
        if (fk_stop_signals_start(&st.stop, &loop, on_stop, &st, &serr))
            fk_log(FK_LOG_ERROR, "stop_signals_unavailable", "error=\"%s\"", serr.msg);
        /* the BLAS thread count and core type decide a model's last bits: say which ones, and
         * who chose the core */
        char core[256];
        fk_blas_core_describe("blas_", core, sizeof core);
        fk_log(FK_LOG_INFO, "client_started", "server=%s state_dir=%s blas_threads=%d %s", server,
               *sdir ? sdir : "none", blas_threads, core);
        if (metrics_listen && strcmp(metrics_listen, "off")) {
            if (fk_metrics_start(&st.metrics, &loop, metrics_listen, render_metrics, &st, &serr))
                fk_log(FK_LOG_ERROR, "metrics_unavailable", "error=\"%s\"", serr.msg);
            else
                fk_log(FK_LOG_INFO, "metrics_listening", "listen=%s port=%d", metrics_listen,
                       fk_metrics_port(st.metrics));
        }
        if (!*sdir)
            fk_log(FK_LOG_WARN, "client_state_not_persisted",
                   "msg=\"no --state_dir: a restarted client cannot continue jobs whose method keeps "
                   "client state (e.g. fedgrem)\"");
        fk_notify_init(&st.notify, &loop, notify_status, &st);
        fk_notify_ready(&st.notify, "started, joining the server");
        FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    }
    FK_UV_MUST(uv_loop_close(&loop));
    data_cache_close(&cache);
    return rc == FK_OK ? 0 : fail(err.msg);
}

int main(int argc, char **argv)
{
    /* first: may re-execute this program with kernels that match the CPU */
    fk_blas_core_select(argv);
    const fk_option_table known[] = {
        {opts, NULL},           {fk_agent_local_docs, NULL}, {fk_net_limits_doc(), "net."},
        {fk_daemon_std_docs, NULL}, {NULL, NULL}};
    return fk_daemon_main(argc, argv, "fedkern-client", usage, known, run);
}
