/* What fedkern-server and fedkern-client share around their own work: the command
 * line (--help, --version, --config FILE with flags over it) and the SIGTERM/SIGINT
 * pair that starts an orderly stop. */
#ifndef FK_SYS_DAEMON_H
#define FK_SYS_DAEMON_H

#include <stdio.h>
#include <uv.h>

#include "common/base/options.h"
#include "common/base/params.h"

/* --help and --version: the last lines of every daemon's option list. */
extern const fk_param_doc fk_daemon_std_docs[];

/* The whole main() of a daemon around run(): --help/-h or --version anywhere in argv
 * answer at once (usage(stdout), "PROG VERSION"); otherwise SIGPIPE and SIGXFSZ are
 * ignored (a write past the file-size limit fails with EFBIG like a full disk), the
 * flags are parsed and checked against known (fk_options_check: an unknown one is exit 2
 * before anything else is looked at), --config FILE is read and checked likewise, the
 * flags override its keys, and run() gets the result. Returns the exit code: run()'s, 1
 * for an unreadable config file, 2 for an unknown flag or key or a positional argument. */
int fk_daemon_main(int argc, char **argv, const char *prog, void (*usage)(FILE *out),
                   const fk_option_table *known, int (*run)(fk_params *p));

/* SIGTERM and SIGINT on one loop, both calling cb with the handle's data = data. */
typedef struct fk_stop_signals {
    uv_signal_t term, intr;
    int term_live, intr_live; /* handle initialised (stop and close touch only those) */
} fk_stop_signals;

/* FK_ENET when a handle could not be set up; stop and close stay safe to call, and the
 * daemon may go on (SIGTERM then ends it at once, which its crash-safe state allows). */
FK_CHECKRETURN int fk_stop_signals_start(fk_stop_signals *s, uv_loop_t *loop, uv_signal_cb cb,
                                         void *data, fk_err *err);
/* Ignore further signals (the stop is under way). */
void fk_stop_signals_stop(fk_stop_signals *s);
/* Release both handles (after fk_stop_signals_start). */
void fk_stop_signals_close(fk_stop_signals *s);

#endif
