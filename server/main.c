/* fedkern-server: the aggregation daemon. gRPC over mutual TLS 1.3 on one libuv loop;
 * jobs run in the round engine (server/engine.c) over the SQLite state (server/store.c),
 * served by the Federation service (server/service.c). */
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/base/params.h"
#include "common/base/uvcheck.h"
#include "common/la/blas_core.h"
#include "common/la/blas_threads.h"
#include "common/net/certs.h"
#include "common/net/codec.h"
#include "common/net/grpc_server.h"
#include "common/net/limits.h"
#include "common/sys/daemon.h"
#include "common/sys/memtrim.h"
#include "common/net/memacct.h"
#include <malloc.h>
#include "common/sys/notify.h"
#include "server/engine.h"
#include "server/metrics.h"
#include "server/owners.h"
#include "server/service.h"
#include "server/store.h"

static const fk_param_doc opts[] = {
    {"config FILE", "INI file with any of the keys below (flags override it)"},
    {"listen HOST:PORT", "address to listen on, IPv4 or [IPv6] (127.0.0.1:7443)"},
    {"tls_dir DIR", "certificate directory from 'fedkern certs' (ca.pem, server-NAME.pem/.key)"},
    {"tls.server_name NAME", "which server-NAME.pem/.key of tls_dir to use (the only one there)"},
    {"tls.ca FILE", "CA bundle clients must chain to (TLS-DIR/ca.pem)"},
    {"tls.cert FILE", "server certificate chain (TLS-DIR/server-NAME.pem)"},
    {"tls.key FILE", "server private key (TLS-DIR/server-NAME.key)"},
    {"tls.crl FILE", "PEM CRL of revoked client certificates (none); SIGHUP reloads all TLS files"},
    {"heartbeat_ms MS", "heartbeat interval told to clients (10000)"},
    {"state FILE", "SQLite state database: jobs, rounds, updates, models (/var/lib/fedkern/state.db)"},
    {"init", "start a new, empty federation in a --state file that exists but holds none (an "
             "empty file, or an SQLite database without fedkern's tables); without it such a "
             "file is refused. An absent file is always a new federation"},
    {"state_max_mb N", "refuse new updates once the state database reaches N MiB (0: the disk)"},
    {"aggregate_memory_mb N",
     "memory for a phase's updates of a job type that aggregates them all at once (no "
     "streaming): a job whose clients x the largest update exceed it is refused at submit "
     "(0: no budget)"},
    {"keep_checkpoints N", "checkpoints kept per job, the newest (2; at least 1 while a job "
                           "runs: a restart resumes from the last one; 0 = every one)"},
    {"retain_updates", "keep every update (default: a round's updates go when the next "
                       "round's checkpoint is stored, all of them when the job ends; the "
                       "clients' reports stay)"},
    {"audit", "keep everything: every update, checkpoint and round's model (as before "
              "retention; the file grows with every round)"},
    {"check_state MODE", "start-up check of the state file: auto (after a clean stop nothing "
                         "is read, after a crash the rows written since; a changed file gets "
                         "the full check) or full (PRAGMA quick_check over the whole file)"},
    {"partial_client_mb N", "most MiB the partial (chunked, not yet complete) uploads of one "
                            "client may hold (1024); chunks are taken only for the task the "
                            "client owes in an open phase"},
    {"partial_total_mb N", "most MiB the partial uploads of all clients may hold (2048); a "
                           "chunk past either cap is refused RESOURCE_EXHAUSTED and resent later"},
    {"allow ID,ID,...", "client identities allowed to take part (empty: any client the CA signed)"},
    {"admins ID[:ROLE],...", "admin identities allowed to submit jobs (empty: any admin cert); "
                             "a job belongs to the admin who submitted it: only its owner and "
                             "the admins listed as ID:operator may read, predict on or cancel "
                             "it (ID and ID:owner: their own jobs)"},
    {"metrics_listen HOST:PORT", "Prometheus text metrics over plain HTTP (127.0.0.1:9464; off = none)"},
    {"drain_ms MS", "at SIGTERM, how long open calls may finish (5000)"},
    {"net.io_threads N", "threads that own the client connections (TLS, HTTP/2), each with its own "
                         "event loop; the jobs, the state and the handlers stay on the one main "
                         "loop. 1: that loop does everything (1, at most 64)"},
    {"net.upload_memory_mb N",
     "MiB of large request messages (uploads) the server receives and holds at once, over all "
     "connections (64; 0 = no bound): a client whose upload does not fit waits, its HTTP/2 "
     "window shut, until earlier uploads are stored; one upload larger than this goes alone"},
    {"memtrim_ms MS", "how often freed heap is checked and, after a load spike, given back to the "
                      "system (5000; 0 = never)"},
    {"log_level LEVEL", "error, warn, info or debug (info)"},
    {NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-server --listen HOST:PORT --tls_dir DIR [--config FILE] [options]\n"
                 "\n"
                 "The fedkern aggregation server: serves the fedkern.v1.Federation gRPC service and\n"
                 "grpc.health.v1.Health over mutual TLS 1.3. SIGTERM/SIGINT: GOAWAY, drain, exit 0.\n"
                 "Every option is also a config-file key (without the dashes; [net] section for net.*).\n"
                 "\n"
                 "options:\n");
    fk_param_docs_print(out, opts, NULL, NULL);
    fk_param_docs_print(out, fk_net_limits_doc(), "net.", " N");
    fk_param_docs_print(out, fk_daemon_std_docs, NULL, NULL);
}

typedef struct server_state {
    uv_loop_t *loop;
    fk_grpc_server *srv;
    fk_store *st;
    fk_engine *e;
    fk_service *svc;
    fk_service_config cfg;
    fk_metrics *metrics;
    fk_params *p;
    fk_stop_signals stop;
    uv_signal_t sighup;
    int sighup_live; /* sighup initialised */
    fk_notify notify;
    fk_memtrim trim;
    int trimming;
    uv_timer_t acct; /* FEDKERN_MEMACCT=1: logs memory_accounting every second */
    int accounting;
    int stopping;
    int exit_code;       /* 1 after a stop the server could not avoid (state file replaced) */
    int init;            /* --init */
    uv_timer_t watch;    /* checks every second that --state still names the open file */
    fk_metrics_rounds *rounds; /* per-job and per-method series from the round closes */
    uint64_t started_ns;       /* uv_hrtime at start, for /healthz */
} server_state;

static int fail(const char *msg)
{
    fprintf(stderr, "fedkern-server: %s\n", msg);
    return 1;
}

/* The one server-*.pem in dir, as NAME; error if none or several. */
FK_CHECKRETURN static int find_server_name(const char *dir, char *name, size_t cap, fk_err *err)
{
    DIR *d = opendir(dir);
    if (!d)
        return fk_err_set(err, FK_EIO, "cannot open --tls_dir %s; create it with 'fedkern certs init'", dir);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 11 && !strncmp(e->d_name, "server-", 7) && !strcmp(e->d_name + l - 4, ".pem")) {
            if (found++ == 0)
                snprintf(name, cap, "%.*s", (int)(l - 11), e->d_name + 7);
        }
    }
    closedir(d);
    if (found == 1)
        return FK_OK;
    return fk_err_set(err, FK_EINVAL,
                      found ? "%s holds several server certificates; pick one with --tls.server_name NAME"
                            : "%s holds no server-NAME.pem; run 'fedkern certs issue --dir DIR --server NAME'",
                      dir);
}

FK_CHECKRETURN static int build_tls(const fk_params *p, fk_tls_ctx **out, fk_err *err)
{
    const char *dir = fk_params_get(p, "tls_dir");
    char ca[4096], cert[4096], key[4096], name[128];
    const char *sname = fk_params_get(p, "tls.server_name");
    if (!fk_params_get(p, "tls.cert") || !fk_params_get(p, "tls.key") || !fk_params_get(p, "tls.ca")) {
        if (!dir)
            return fk_err_set(err, FK_EINVAL, "--tls_dir DIR is required (or --tls.ca, --tls.cert and --tls.key)");
        if (!sname) {
            int rc = find_server_name(dir, name, sizeof name, err);
            if (rc != FK_OK)
                return rc;
            sname = name;
        }
    }
    snprintf(ca, sizeof ca, "%s/ca.pem", dir ? dir : ".");
    snprintf(cert, sizeof cert, "%s/server-%s.pem", dir ? dir : ".", sname ? sname : "");
    snprintf(key, sizeof key, "%s/server-%s.key", dir ? dir : ".", sname ? sname : "");
    fk_tls_files f = {fk_params_str(p, "tls.ca", ca), fk_params_str(p, "tls.cert", cert),
                      fk_params_str(p, "tls.key", key), fk_params_str(p, "tls.crl", NULL), 0};
    int rc = fk_tls_ctx_new(out, 1, &f, err);
    if (rc == FK_OK && f.crl && *f.crl)
        fk_certs_crl_warn(f.crl);
    return rc;
}

/* "a, b,c" -> malloc'd strings. */
static int split_list(const char *text, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    char *copy = text ? strdup(text) : NULL;
    if (text && !copy)
        return FK_ENOMEM;
    for (char *tok = copy ? strtok(copy, ", \t") : NULL; tok; tok = strtok(NULL, ", \t")) {
        char **g = realloc(*out, (size_t)(*n + 1) * sizeof *g);
        if (!g) {
            free(copy);
            return FK_ENOMEM;
        }
        *out = g;
        if (!(g[*n] = strdup(tok))) {
            free(copy);
            return FK_ENOMEM;
        }
        (*n)++;
    }
    free(copy);
    return FK_OK;
}

static void free_list(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void all_closed(void *ud)
{
    server_state *st = ud;
    fk_stop_signals_close(&st->stop);
    if (st->sighup_live)
        uv_close((uv_handle_t *)&st->sighup, NULL);
    fk_notify_close(&st->notify);
    fk_log(FK_LOG_INFO, "server_stopped", "reason=signal");
}

static void service_closed(void *ud)
{
    server_state *st = ud;
    if (st->metrics)
        fk_metrics_close(st->metrics, NULL, NULL);
    st->metrics = NULL;
    fk_grpc_server_close(st->srv, all_closed, st);
}

/* One Prometheus sample with its HELP and TYPE lines. */
static int render_metrics(void *ud, char **b, size_t *len)
{
    server_state *st = ud;
    return fk_metrics_render_server(st->svc, st->e, st->srv, st->trimming ? &st->trim : NULL,
                                    st->rounds, b, len);
}

/* /healthz on the metrics listener: serving (200) until a stop signal, then 503 while the
 * server drains. Answered on the loop, like every RPC. */
static int health_json(void *ud, char *json, size_t cap)
{
    server_state *st = ud;
    fk_service_stats ss;
    fk_service_stats_get(st->svc, &ss);
    snprintf(json, cap,
             "{\"status\":\"%s\",\"uptime_seconds\":%.1f,\"sessions\":%d,\"waiting_polls\":%d,"
             "\"software\":\"fedkern-server %s\"}",
             st->stopping ? "stopping" : "serving",
             1e-9 * (double)(uv_hrtime() - st->started_ns), ss.sessions, ss.waiting_polls,
             FK_VERSION);
    return !st->stopping;
}

static void begin_stop(server_state *st, int signum)
{
    if (st->stopping)
        return;
    st->stopping = 1;
    fk_log(FK_LOG_INFO, "server_stopping", "signal=%d action=\"GOAWAY and drain\"", signum);
    fk_notify_stopping(&st->notify, "draining");
    fk_stop_signals_stop(&st->stop);
    if (st->sighup_live)
        FK_UV_MUST(uv_signal_stop(&st->sighup));
    if (st->trimming)
        fk_memtrim_stop(&st->trim);
    if (st->accounting) {
        FK_UV_MUST(uv_timer_stop(&st->acct));
        uv_close((uv_handle_t *)&st->acct, NULL);
    }
    FK_UV_MUST(uv_timer_stop(&st->watch));
    uv_close((uv_handle_t *)&st->watch, NULL);
    fk_service_close(st->svc, service_closed, st);
}

static void on_stop(uv_signal_t *sig, int signum)
{
    begin_stop(sig->data, signum);
}

/* The state file removed or replaced under the running server (issue 33). Removed: the open
 * connection still holds every byte, so the database is written back to the path and the
 * server goes on, with an error line (nothing is lost, the operator is told). Replaced: the
 * file at the path is not ours to overwrite; our state is saved beside it, writes are refused
 * from now on (nothing more is acknowledged into a file about to be left) and the server
 * stops with exit status 1. */
static void on_watch(uv_timer_t *t)
{
    server_state *st = t->data;
    int file = fk_store_file_state(st->st);
    if (file == FK_STORE_FILE_OK || st->stopping)
        return;
    const char *path = fk_params_str(st->p, "state", "/var/lib/fedkern/state.db");
    fk_err err = {0};
    if (file == FK_STORE_FILE_REMOVED) {
        fk_log(FK_LOG_ERROR, "state_file_removed",
               "state=%s action=\"writing the database back to it from the open connection\"",
               path);
        int rc = fk_store_recreate(st->st, &err);
        if (rc == FK_ESTATE)
            return; /* a transaction is open: next second */
        if (!rc) {
            fk_log(FK_LOG_ERROR, "state_file_recreated",
                   "state=%s msg=\"the state file was removed while the server ran; it was "
                   "written back with every job and update; find out who removed it\"",
                   path);
            return;
        }
        fk_log(FK_LOG_ERROR, "state_file_lost", "state=%s error=\"%s\"", path, err.msg);
    } else {
        char saved[600];
        snprintf(saved, sizeof saved, "%s.saved-%lld", path, (long long)fk_service_now());
        fk_store_refuse_writes(st->st, "the state file was replaced while the server ran; the "
                                       "server is stopping");
        int rc = fk_store_save_copy(st->st, saved, &err);
        fk_log(FK_LOG_ERROR, "state_file_replaced",
               "state=%s saved=%s error=\"%s\" action=\"stopping with exit status 1: %s is "
               "another file now; this server's own state is in %s; start the server on the "
               "one to keep\"",
               path, rc ? "none" : saved, rc ? err.msg : "", path, rc ? "(not saved)" : saved);
    }
    st->exit_code = 1;
    begin_stop(st, SIGTERM);
}

/* Where the heap goes (FEDKERN_MEMACCT=1): what fedkern bench load breaks down per client. */
static void on_acct(uv_timer_t *t)
{
    server_state *st = t->data;
    fk_service_stats ss;
    fk_service_stats_get(st->svc, &ss);
    struct mallinfo2 mi = mallinfo2();
    fk_log(FK_LOG_INFO, "memory_accounting",
           "sessions=%d openssl=%zu nghttp2=%zu nghttp2_mapped=%zu libuv=%zu conn_structs=%zu call_structs=%zu "
           "client_index=%zu heap_in_use=%zu heap_free=%zu",
           ss.sessions, fk_memacct_live(FK_MEM_OPENSSL), fk_memacct_live(FK_MEM_NGHTTP2),
           fk_memacct_live(FK_MEM_NGHTTP2_MAPPED),
           fk_memacct_live(FK_MEM_LIBUV), fk_memacct_live(FK_MEM_CONN),
           fk_memacct_live(FK_MEM_CALL), ss.index_bytes, mi.uordblks, mi.fordblks);
}

static void on_reload(uv_signal_t *sig, int signum)
{
    (void)signum;
    server_state *st = sig->data;
    fk_tls_ctx *tls;
    fk_err err = {0};
    fk_notify_reloading(&st->notify, 0);
    if (build_tls(st->p, &tls, &err) != FK_OK) {
        fk_log(FK_LOG_ERROR, "tls_reload_failed", "reason=\"%s\" action=\"kept the old certificates\"",
               err.msg);
        fk_notify_reloading(&st->notify, 1);
        return;
    }
    fk_grpc_server_set_tls(st->srv, tls);
    fk_tls_ctx_unref(tls);
    fk_log(FK_LOG_INFO, "tls_reloaded", "scope=\"new connections\"");
    fk_notify_reloading(&st->notify, 1);
}

/* STATUS= line for systemd: the oldest running job's round and phase, then totals. */
static void notify_status(void *ud, char *buf, size_t cap)
{
    server_state *st = ud;
    fk_engine_stats es;
    fk_engine_stats_get(st->e, &es);
    int64_t *ids = NULL;
    int n = 0, o = 0;
    fk_job_status js;
    if (fk_store_job_ids(st->st, FK_JOB_RUNNING, &ids, &n, NULL) == FK_OK && n > 0 &&
        fk_engine_status(st->e, ids[0], &js, NULL) == FK_OK)
        o = snprintf(buf, cap, "job %lld (%s) round %d/%d phase %d: %d/%d answered; ",
                     (long long)js.job, js.method, js.round, js.rounds, js.phase, js.answered,
                     js.planned);
    free(ids);
    if (o < 0 || (size_t)o >= cap)
        o = 0;
    int w = snprintf(buf + o, cap - (size_t)o,
                     "jobs running: %d, rounds closed: %llu, dropouts: %llu",
                     fk_engine_running(st->e), (unsigned long long)es.rounds_closed,
                     (unsigned long long)es.dropouts);
    if (es.jobs_stalled && w > 0 && (size_t)(o + w) < cap)
        snprintf(buf + o + w, cap - (size_t)(o + w),
                 "; %d stalled: state not stored, free space in the state directory",
                 es.jobs_stalled);
}

static const fk_blob_codec codec = {fk_codec_bundle_encode, fk_codec_bundle_decode};

/* Store, engine (resumes running jobs) and the service's access lists. */
FK_CHECKRETURN static int open_state(server_state *st, const fk_params *p, fk_err *err)
{
    long max_mb, client_mb, total_mb, agg_mb = 0;
    int rc = fk_params_int(p, "state_max_mb", 0, 0, 1L << 30, &max_mb, err);
    if (!rc)
        rc = fk_params_int(p, "aggregate_memory_mb", 0, 0, 1L << 30, &agg_mb, err);
    if (!rc)
        rc = fk_params_int(p, "partial_client_mb", 1024, 1, 1L << 20, &client_mb, err);
    if (!rc)
        rc = fk_params_int(p, "partial_total_mb", 2048, 1, 1L << 20, &total_mb, err);
    st->cfg.partial_client_limit = rc ? 0 : (size_t)client_mb << 20;
    st->cfg.partial_total_limit = rc ? 0 : (size_t)total_mb << 20;
    if (!rc && (split_list(fk_params_get(p, "allow"), &st->cfg.allow, &st->cfg.n_allow) ||
                split_list(fk_params_get(p, "admins"), &st->cfg.admins, &st->cfg.n_admins)))
        rc = fk_err_set(err, FK_ENOMEM, "out of memory reading allow/admins");
    if (!rc)
        rc = fk_owners_check(st->cfg.admins, st->cfg.n_admins, err);
    const char *path = fk_params_str(p, "state", "/var/lib/fedkern/state.db");
    long keep_ckpt = 2;
    int retain_updates = 0, audit = 0;
    const char *check = fk_params_str(p, "check_state", "auto");
    if (!rc)
        rc = fk_params_int(p, "keep_checkpoints", 2, 0, 1000000, &keep_ckpt, err);
    if (!rc)
        rc = fk_params_bool(p, "retain_updates", 0, &retain_updates, err);
    if (!rc)
        rc = fk_params_bool(p, "audit", 0, &audit, err);
    if (!rc && strcmp(check, "auto") && strcmp(check, "full"))
        rc = fk_err_set(err, FK_EINVAL, "--check_state must be auto or full, not '%s'", check);
    fk_store_open_opts oo = {.init = st->init, .check_full = !strcmp(check, "full")};
    if (!rc)
        rc = fk_store_open_ex(&st->st, path, &oo, err);
    if (!rc) {
        fk_store_retention keep = {.keep_checkpoints = audit ? 0 : (int)keep_ckpt,
                                   .keep_updates = audit || retain_updates,
                                   .keep_models = audit};
        fk_store_set_retention(st->st, &keep);
        fk_log(FK_LOG_INFO, "state_retention",
               "keep_checkpoints=%d%s keep_updates=%d keep_models=%d", keep.keep_checkpoints,
               keep.keep_checkpoints ? "" : "(all)", keep.keep_updates, keep.keep_models);
    }
    if (!rc && max_mb)
        rc = fk_store_set_limit(st->st, (uint64_t)max_mb << 20, err);
    if (!rc)
        rc = fk_metrics_rounds_new(&st->rounds, err);
    /* Jobs learn the largest update this server accepts (dica refuses an R beyond it). */
    fk_engine_opts eo = {.store = st->st,
                         .codec = codec,
                         .on_round = fk_metrics_rounds_observe,
                         .on_round_ud = st->rounds,
                         .max_update = st->cfg.reasm_limit ? st->cfg.reasm_limit
                                                           : FK_SERVICE_REASM_DEFAULT,
                         .aggregate_memory = rc ? 0 : (uint64_t)agg_mb << 20};
    if (!rc)
        rc = fk_engine_open(&st->e, &eo, fk_service_now(), err);
    return rc;
}

static void close_state(server_state *st)
{
    fk_service_free(st->svc);
    fk_engine_close(st->e);
    fk_metrics_rounds_free(st->rounds);
    fk_store_close(st->st);
    free_list(st->cfg.allow, st->cfg.n_allow);
    free_list(st->cfg.admins, st->cfg.n_admins);
}

static int run(fk_params *p)
{
    fk_err err = {0};
    fk_grpc_server_config cfg = {0};
    fk_net_limits_default(&cfg.limits);
    long hb, drain, trim_ms, io_threads, upload_mb;
    if (fk_net_limits_from_params(&cfg.limits, p, "net", &err) != FK_OK ||
        fk_params_int(p, "net.io_threads", 1, 1, 64, &io_threads, &err) != FK_OK ||
        fk_params_int(p, "net.upload_memory_mb", 64, 0, 1L << 20, &upload_mb, &err) != FK_OK ||
        fk_params_int(p, "heartbeat_ms", 10000, 100, 3600000, &hb, &err) != FK_OK ||
        fk_params_int(p, "drain_ms", 5000, 0, 3600000, &drain, &err) != FK_OK ||
        fk_params_int(p, "memtrim_ms", 5000, 0, 3600000, &trim_ms, &err) != FK_OK)
        return fail(err.msg);
    int level = fk_log_level_from_name(fk_params_str(p, "log_level", "info"));
    if (level < 0)
        return fail("--log_level must be error, warn, info or debug");
    fk_log_set_level(level);
    fk_log_set_timestamps(!fk_log_stderr_is_journal()); /* journald stamps lines itself */
    int blas_threads;
    if (fk_blas_threads_setup(&blas_threads, &err) != FK_OK)
        return fail(err.msg);
    const char *listen = fk_params_str(p, "listen", "127.0.0.1:7443");
    server_state st = {.p = p, .started_ns = uv_hrtime()};
    if (build_tls(p, &cfg.tls, &err) != FK_OK)
        return fail(err.msg);
    fk_params_get(p, "config");
    fk_params_get(p, "state");
    if (fk_params_bool(p, "init", 0, &st.init, &err) != FK_OK) {
        fk_tls_ctx_unref(cfg.tls);
        return fail(err.msg);
    }
    fk_params_get(p, "state_max_mb");
    fk_params_get(p, "aggregate_memory_mb");
    fk_params_get(p, "keep_checkpoints");
    fk_params_get(p, "retain_updates");
    fk_params_get(p, "audit");
    fk_params_get(p, "check_state");
    fk_params_get(p, "partial_client_mb");
    fk_params_get(p, "partial_total_mb");
    fk_params_get(p, "allow");
    fk_params_get(p, "admins");
    const char *metrics_listen = fk_params_str(p, "metrics_listen", "127.0.0.1:9464");
    const char *unused = fk_params_unused(p);
    if (unused) {
        fk_tls_ctx_unref(cfg.tls);
        fprintf(stderr, "fedkern-server: unknown option or key '%s'; see --help\n", unused);
        return 2;
    }
    if (open_state(&st, p, &err) != FK_OK) {
        fk_tls_ctx_unref(cfg.tls);
        close_state(&st);
        return fail(err.msg);
    }
    cfg.drain_ms = (uint64_t)drain;
    cfg.io_threads = (int)io_threads;
    cfg.upload_budget = (uint64_t)upload_mb << 20;
    uv_loop_t loop;
    int rc = fk_uv_err(uv_loop_init(&loop), "event loop", &err);
    if (rc) {
        fk_tls_ctx_unref(cfg.tls);
        close_state(&st);
        return fail(err.msg);
    }
    st.loop = &loop;
    rc = fk_grpc_server_init(&st.srv, &loop, &cfg, &err);
    fk_tls_ctx_unref(cfg.tls);
    if (rc != FK_OK) {
        close_state(&st);
        return fail(err.msg);
    }
    st.cfg.heartbeat_ms = (uint32_t)hb;
    st.cfg.max_message =
        cfg.limits.max_message > UINT32_MAX ? UINT32_MAX : (uint32_t)cfg.limits.max_message;
    if (fk_service_init(&st.svc, &loop, st.srv, st.e, st.st, &st.cfg, &err) != FK_OK ||
        fk_grpc_server_listen(st.srv, listen, &err) != FK_OK) {
        if (st.svc)
            fk_service_close(st.svc, NULL, NULL);
        fk_grpc_server_close(st.srv, NULL, NULL);
        FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
        FK_UV_MUST(uv_loop_close(&loop));
        close_state(&st);
        return fail(err.msg);
    }
    /* Metrics are optional: a taken port costs the metrics, not the server. */
    if (strcmp(metrics_listen, "off") &&
        fk_metrics_start(&st.metrics, &loop, metrics_listen, render_metrics, &st, &err) != FK_OK)
        fk_log(FK_LOG_WARN, "metrics_disabled", "reason=\"%s\"", err.msg);
    else if (st.metrics) {
        fk_metrics_set_health(st.metrics, health_json, &st);
        fk_log(FK_LOG_INFO, "metrics_listening", "listen=%s port=%d", metrics_listen,
               fk_metrics_port(st.metrics));
    }
    /* Without the handlers the server still serves: SIGTERM then ends it at once (the state
     * is crash-safe) and SIGHUP cannot reload. */
    if (fk_stop_signals_start(&st.stop, &loop, on_stop, &st, &err))
        fk_log(FK_LOG_ERROR, "stop_signals_unavailable", "error=\"%s\"", err.msg);
    int hup = uv_signal_init(&loop, &st.sighup);
    st.sighup_live = hup == 0;
    st.sighup.data = &st;
    if (!hup)
        hup = uv_signal_start(&st.sighup, on_reload, SIGHUP);
    if (hup)
        fk_log(FK_LOG_ERROR, "reload_unavailable", "error=\"SIGHUP handler: %s\"",
               uv_strerror(hup));
    /* the BLAS thread count and core type decide a model's last bits: say which ones, and
     * who chose the core */
    char core[256];
    fk_blas_core_describe("blas_", core, sizeof core);
    fk_log(FK_LOG_INFO, "server_ready",
           "listen=%s port=%d state=%s jobs_running=%d blas_threads=%d %s", listen,
           fk_grpc_server_port(st.srv), fk_params_str(p, "state", "/var/lib/fedkern/state.db"),
           fk_engine_running(st.e), blas_threads, core);
    /* 8 MiB free in the heap for two checks in a row: a spike is over, give it back */
    if (trim_ms > 0 && fk_memtrim_start(&st.trim, &loop, (unsigned)trim_ms, (size_t)8 << 20) == 0)
        st.trimming = 1;
    if (fk_memacct_on()) {
        FK_UV_MUST(uv_timer_init(&loop, &st.acct));
        st.acct.data = &st;
        uv_unref((uv_handle_t *)&st.acct);
        FK_UV_MUST(uv_timer_start(&st.acct, on_acct, 1000, 1000));
        st.accounting = 1;
    }
    FK_UV_MUST(uv_timer_init(&loop, &st.watch));
    st.watch.data = &st;
    FK_UV_MUST(uv_timer_start(&st.watch, on_watch, 1000, 1000));
    fk_notify_init(&st.notify, &loop, notify_status, &st);
    char ready[256];
    notify_status(&st, ready, sizeof ready);
    fk_notify_ready(&st.notify, ready);
    FK_UV_MUST(uv_run(&loop, UV_RUN_DEFAULT));
    rc = uv_loop_close(&loop) == 0 ? st.exit_code : 1;
    close_state(&st);
    return rc;
}

int main(int argc, char **argv)
{
    /* first: may re-execute this program with kernels that match the CPU */
    fk_blas_core_select(argv);
    fk_memacct_install(); /* before any OpenSSL or libuv allocation; off unless asked */
    const fk_option_table known[] = {
        {opts, NULL}, {fk_net_limits_doc(), "net."}, {fk_daemon_std_docs, NULL}, {NULL, NULL}};
    return fk_daemon_main(argc, argv, "fedkern-server", usage, known, run);
}
