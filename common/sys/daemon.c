#include "common/sys/daemon.h"
#include "common/base/uvcheck.h"

#include <signal.h>
#include <string.h>

const fk_param_doc fk_daemon_std_docs[] = {
    {"help", "this text"},
    {"version", "print the version"},
    {NULL, NULL},
};

static int fail(const char *prog, const char *msg)
{
    fprintf(stderr, "%s: %s\n", prog, msg);
    return 1;
}

int fk_daemon_main(int argc, char **argv, const char *prog, void (*usage)(FILE *out),
                   const fk_option_table *known, int (*run)(fk_params *p))
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("%s %s\n", prog, FK_VERSION);
            return 0;
        }
    }
    signal(SIGPIPE, SIG_IGN); /* a peer vanishing mid-write is an error code, not a kill */
    /* A file-size limit (ulimit -f, LimitFSIZE=) reached by a write: EFBIG, handled and
     * logged like a full disk, not a kill without a log line (issue 33) */
    signal(SIGXFSZ, SIG_IGN);
    fk_params args, p;
    fk_err err = {0};
    fk_params_init(&args);
    fk_params_init(&p);
    int n = argc - 1, rc = 0;
    if (fk_params_parse_args(&args, &n, argv + 1, &err) != FK_OK) {
        rc = fail(prog, err.msg);
    } else if (n > 0) {
        fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", prog, argv[1]);
        rc = 2;
    } else if ((rc = fk_options_check(&args, known, prog, NULL, 1, stderr)) == 0) {
        const char *cfg = fk_params_get(&args, "config");
        if (cfg && fk_params_load_ini(&p, cfg, &err) != FK_OK)
            rc = fail(prog, err.msg);
        if (cfg && rc == 0)
            rc = fk_options_check(&p, known, prog, cfg, 1, stderr);
        for (int i = 0; rc == 0 && i < args.count; i++) /* flags override the file */
            if (fk_params_set(&p, args.items[i].key, args.items[i].value))
                rc = fail(prog, "out of memory for the options");
        if (rc == 0)
            rc = run(&p);
    }
    fk_params_close(&args);
    fk_params_close(&p);
    return rc;
}

int fk_stop_signals_start(fk_stop_signals *s, uv_loop_t *loop, uv_signal_cb cb, void *data,
                          fk_err *err)
{
    int rc = uv_signal_init(loop, &s->term);
    s->term_live = rc == 0;
    if (!rc) {
        s->term.data = data;
        rc = uv_signal_start(&s->term, cb, SIGTERM);
    }
    if (rc)
        return fk_uv_err(rc, "SIGTERM handler", err);
    rc = uv_signal_init(loop, &s->intr);
    s->intr_live = rc == 0;
    if (!rc) {
        s->intr.data = data;
        rc = uv_signal_start(&s->intr, cb, SIGINT);
    }
    return fk_uv_err(rc, "SIGINT handler", err);
}

void fk_stop_signals_stop(fk_stop_signals *s)
{
    if (s->term_live)
        FK_UV_MUST(uv_signal_stop(&s->term));
    if (s->intr_live)
        FK_UV_MUST(uv_signal_stop(&s->intr));
}

void fk_stop_signals_close(fk_stop_signals *s)
{
    if (s->term_live)
        uv_close((uv_handle_t *)&s->term, NULL);
    if (s->intr_live)
        uv_close((uv_handle_t *)&s->intr, NULL);
    s->term_live = s->intr_live = 0;
}
