/* fedkern-server: configuration, the libuv loop, signals. */
#include "server/daemon.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/base/log.h"
#include "common/base/params.h"
#include "common/net/codec.h"
#include "common/net/grpc_server.h"
#include "common/net/limits.h"
#include "common/net/tls.h"
#include "server/engine.h"
#include "server/service.h"
#include "server/store.h"

typedef struct opt_doc {
    const char *key, *help;
} opt_doc;

static const opt_doc options[] = {
    {"config FILE", "INI file with any of the keys below (default /etc/fedkern/server.conf if it exists)"},
    {"listen HOST:PORT", "address of the gRPC listener (default 0.0.0.0:7443; port 0 picks one)"},
    {"port_file FILE", "write the port actually listened on to FILE (for scripts and tests)"},
    {"tls.dir DIR", "certificate directory of 'fedkern certs' (ca.pem, server-NAME.pem/.key)"},
    {"tls.name NAME", "server certificate name in tls.dir (default: server)"},
    {"tls.ca FILE", "CA bundle (overrides tls.dir)"},
    {"tls.cert FILE", "server certificate (overrides tls.dir)"},
    {"tls.key FILE", "server private key (overrides tls.dir)"},
    {"tls.crl FILE", "certificate revocation list to check clients against"},
    {"state FILE", "SQLite state database (default /var/lib/fedkern/state.db)"},
    {"state_max_mb N", "refuse updates once the state database reaches N MiB (0 = disk size)"},
    {"allow ID,ID,...", "client certificate identities allowed to join (empty: any the CA signed)"},
    {"admins ID,ID,...", "certificate identities allowed to submit, inspect and cancel jobs"},
    {"heartbeat_ms N", "heartbeat interval told to clients (default 5000)"},
    {"log_level L", "error, warn, info or debug (default info)"},
    {NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: fedkern-server [--config FILE] [--key value ...]\n\n"
                 "The fedkern aggregation server: jobs, rounds, quorum and deadlines, crash-safe\n"
                 "state in SQLite, gRPC over mutual TLS. Every config key is also a flag.\n\n");
    for (int i = 0; options[i].key; i++)
        fprintf(out, "  --%-22s %s\n", options[i].key, options[i].help);
    for (const fk_net_limit_doc *d = fk_net_limits_doc(); d && d->key; d++)
        fprintf(out, "  --net.%-18s %s\n", d->key, d->help);
    fprintf(out, "\nSIGTERM/SIGINT drain and exit; SIGHUP reloads the certificates.\n");
}

typedef struct server {
    uv_loop_t loop;
    fk_params p;
    fk_store *st;
    fk_engine *e;
    fk_grpc_server *srv;
    fk_service *svc;
    uv_signal_t sigterm, sigint, sighup;
    fk_service_config cfg;
    int stopping;
} server;

/* "a, b,c" -> malloc'd array of strings. */
static int split_list(const char *text, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    if (!text || !*text)
        return FK_OK;
    char *copy = strdup(text);
    if (!copy)
        return FK_ENOMEM;
    for (char *tok = strtok(copy, ", \t"); tok; tok = strtok(NULL, ", \t")) {
        char **g = realloc(*out, (size_t)(*n + 1) * sizeof *g);
        if (!g || !(g[*n] = strdup(tok))) {
            free(copy);
            if (g)
                *out = g;
            return FK_ENOMEM;
        }
        *out = g;
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

static int load_tls(const fk_params *p, fk_tls_ctx **tls, fk_err *err)
{
    const char *dir = fk_params_get(p, "tls.dir");
    const char *name = fk_params_str(p, "tls.name", "server");
    char ca[1024], cert[1024], key[1024];
    snprintf(ca, sizeof ca, "%s/ca.pem", dir ? dir : ".");
    snprintf(cert, sizeof cert, "%s/server-%s.pem", dir ? dir : ".", name);
    snprintf(key, sizeof key, "%s/server-%s.key", dir ? dir : ".", name);
    fk_tls_files f = {
        .ca = fk_params_str(p, "tls.ca", ca),
        .cert = fk_params_str(p, "tls.cert", cert),
        .key = fk_params_str(p, "tls.key", key),
        .crl = fk_params_get(p, "tls.crl"),
    };
    if (!dir && !(fk_params_get(p, "tls.ca") && fk_params_get(p, "tls.cert") &&
                  fk_params_get(p, "tls.key")))
        return fk_err_set(err, FK_EINVAL,
                          "no certificates: give --tls.dir DIR (see 'fedkern certs init') or "
                          "--tls.ca, --tls.cert and --tls.key");
    return fk_tls_ctx_new(tls, 1, &f, err);
}

static const fk_blob_codec codec = {fk_codec_bundle_encode, fk_codec_bundle_decode};

static void server_closed(void *ud)
{
    server *s = ud;
    uv_close((uv_handle_t *)&s->sigterm, NULL);
    uv_close((uv_handle_t *)&s->sigint, NULL);
    uv_close((uv_handle_t *)&s->sighup, NULL);
}

static void service_closed(void *ud)
{
    server *s = ud;
    fk_grpc_server_close(s->srv, server_closed, s);
}

static void on_stop(uv_signal_t *sig, int signum)
{
    server *s = sig->data;
    if (s->stopping)
        return;
    s->stopping = 1;
    fk_log(FK_LOG_INFO, "server_stopping", "signal=%d", signum);
    fk_service_close(s->svc, service_closed, s);
}

static void on_hup(uv_signal_t *sig, int signum)
{
    (void)signum;
    server *s = sig->data;
    fk_tls_ctx *tls;
    fk_err err;
    if (load_tls(&s->p, &tls, &err)) {
        fk_log(FK_LOG_ERROR, "tls_reload_failed", "error=\"%s\" keeping=old_certificates", err.msg);
        return;
    }
    fk_grpc_server_set_tls(s->srv, tls);
    fk_tls_ctx_unref(tls);
    fk_log(FK_LOG_INFO, "tls_reloaded", "%s", "");
}

static int read_config(server *s, int argc, char **argv, fk_err *err)
{
    fk_params flags;
    fk_params_init(&flags);
    int rc = fk_params_parse_args(&flags, &argc, argv, err);
    if (!rc && argc > 0)
        rc = fk_err_set(err, FK_EINVAL, "unexpected argument '%s'; see --help", argv[0]);
    const char *conf = rc ? NULL : fk_params_get(&flags, "config");
    if (!rc && conf)
        rc = fk_params_load_ini(&s->p, conf, err);
    else if (!rc) {
        FILE *f = fopen("/etc/fedkern/server.conf", "r");
        if (f) {
            fclose(f);
            rc = fk_params_load_ini(&s->p, "/etc/fedkern/server.conf", err);
        }
    }
    for (int i = 0; !rc && i < flags.count; i++)
        if (strcmp(flags.items[i].key, "config"))
            rc = fk_params_set(&s->p, flags.items[i].key, flags.items[i].value);
    fk_params_close(&flags);
    return rc;
}

static int setup(server *s, fk_err *err)
{
    static const char *levels[] = {"error", "warn", "info", "debug"};
    const char *lvl = fk_params_str(&s->p, "log_level", "info");
    int level = -1;
    for (int i = 0; i < 4; i++)
        if (!strcmp(lvl, levels[i]))
            level = i;
    if (level < 0)
        return fk_err_set(err, FK_EINVAL, "log_level '%s': use error, warn, info or debug", lvl);
    fk_log_set_level(level);
    long hb, max_mb;
    fk_net_limits limits;
    fk_net_limits_default(&limits);
    int rc = fk_params_int(&s->p, "heartbeat_ms", 5000, 100, 3600000, &hb, err);
    if (!rc)
        rc = fk_params_int(&s->p, "state_max_mb", 0, 0, 1L << 30, &max_mb, err);
    if (!rc)
        rc = fk_net_limits_from_params(&limits, &s->p, "net", err);
    if (!rc)
        rc = split_list(fk_params_get(&s->p, "allow"), &s->cfg.allow, &s->cfg.n_allow);
    if (!rc)
        rc = split_list(fk_params_get(&s->p, "admins"), &s->cfg.admins, &s->cfg.n_admins);
    if (rc)
        return rc == FK_ENOMEM ? fk_err_set(err, rc, "out of memory") : rc;
    s->cfg.heartbeat_ms = (uint32_t)hb;
    s->cfg.max_message = (uint32_t)(limits.max_message > UINT32_MAX ? UINT32_MAX
                                                                     : limits.max_message);
    const char *path = fk_params_str(&s->p, "state", "/var/lib/fedkern/state.db");
    if ((rc = fk_store_open(&s->st, path, err)))
        return rc;
    if (max_mb && (rc = fk_store_set_limit(s->st, (uint64_t)max_mb << 20, err)))
        return rc;
    fk_engine_opts eo = {.store = s->st, .codec = codec};
    if ((rc = fk_engine_open(&s->e, &eo, fk_service_now(), err)))
        return rc;
    fk_tls_ctx *tls;
    if ((rc = load_tls(&s->p, &tls, err)))
        return rc;
    fk_grpc_server_config gc = {.limits = limits, .tls = tls};
    rc = fk_grpc_server_init(&s->srv, &s->loop, &gc, err);
    fk_tls_ctx_unref(tls);
    if (rc)
        return rc;
    if ((rc = fk_service_init(&s->svc, &s->loop, s->srv, s->e, s->st, &s->cfg, err)))
        return rc;
    const char *listen = fk_params_str(&s->p, "listen", "0.0.0.0:7443");
    if ((rc = fk_grpc_server_listen(s->srv, listen, err)))
        return rc;
    const char *port_file = fk_params_get(&s->p, "port_file");
    if (port_file) {
        FILE *f = fopen(port_file, "w");
        if (!f || fprintf(f, "%d\n", fk_grpc_server_port(s->srv)) < 0 || fclose(f))
            return fk_err_set(err, FK_EIO, "%s: cannot write the port: %s", port_file,
                              strerror(errno));
    }
    const char *unused = fk_params_unused(&s->p);
    if (unused)
        return fk_err_set(err, FK_EINVAL, "unknown option '%s'; see --help", unused);
    fk_log(FK_LOG_INFO, "server_listening", "listen=%s port=%d state=%s jobs_running=%d", listen,
           fk_grpc_server_port(s->srv), path, fk_engine_running(s->e));
    return FK_OK;
}

int fk_server_main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("fedkern-server %s\n", FK_VERSION);
            return 0;
        }
    }
    signal(SIGPIPE, SIG_IGN);
    server s;
    memset(&s, 0, sizeof s);
    fk_params_init(&s.p);
    uv_loop_init(&s.loop);
    fk_err err;
    fk_err_clear(&err);
    int rc = read_config(&s, argc - 1, argv + 1, &err);
    int usage_error = rc != FK_OK;
    if (!rc)
        rc = setup(&s, &err);
    if (!rc) {
        uv_signal_init(&s.loop, &s.sigterm);
        uv_signal_init(&s.loop, &s.sigint);
        uv_signal_init(&s.loop, &s.sighup);
        s.sigterm.data = s.sigint.data = s.sighup.data = &s;
        uv_signal_start(&s.sigterm, on_stop, SIGTERM);
        uv_signal_start(&s.sigint, on_stop, SIGINT);
        uv_signal_start(&s.sighup, on_hup, SIGHUP);
        uv_run(&s.loop, UV_RUN_DEFAULT);
        fk_log(FK_LOG_INFO, "server_stopped", "%s", "");
    } else {
        fprintf(stderr, "fedkern-server: %s\n", err.msg);
        if (s.svc)
            fk_service_close(s.svc, NULL, NULL);
        if (s.srv)
            fk_grpc_server_close(s.srv, NULL, NULL);
        uv_run(&s.loop, UV_RUN_DEFAULT);
    }
    fk_service_free(s.svc);
    fk_engine_close(s.e);
    fk_store_close(s.st);
    free_list(s.cfg.allow, s.cfg.n_allow);
    free_list(s.cfg.admins, s.cfg.n_admins);
    fk_params_close(&s.p);
    uv_loop_close(&s.loop);
    return rc == FK_OK ? 0 : usage_error ? 2 : 1;
}
