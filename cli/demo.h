/* fedkern demo internals: the daemon fleet (demo_fleet.c) the demo (demo.c) drives. */
#ifndef FK_CLI_DEMO_H
#define FK_CLI_DEMO_H

#include <sys/types.h>

#include "common/base/err.h"

enum { FK_FLEET_MAX = 66 }; /* the server and up to 65 clients */

typedef struct fk_fleet {
    char dir[2048];         /* work directory: logs, state, configs */
    char server_bin[2048];
    char client_bin[2048];
    int port;               /* the server's port, once it is ready */
    int n;
    pid_t pid[FK_FLEET_MAX];   /* 0 once reaped */
    char name[FK_FLEET_MAX][32]; /* "fedkern-server", "fedkern-client c0", ... */
    char log[FK_FLEET_MAX][2100];
} fk_fleet;

/* Find fedkern-server and fedkern-client next to this program (or in ../sbin, the
 * installed layout) and install the SIGINT/SIGTERM/SIGHUP handlers that stop the
 * fleet. FK_ENOTFOUND names the paths tried. */
FK_CHECKRETURN int fk_fleet_init(fk_fleet *f, const char *dir, fk_err *err);

/* Start fedkern-server on 127.0.0.1 port 0 and wait for its ready line; f->port
 * then holds the port it bound. */
FK_CHECKRETURN int fk_fleet_start_server(fk_fleet *f, const char *tls_dir, const char *state,
                                         fk_err *err);

/* Start fedkern-client NAME with a config file. */
FK_CHECKRETURN int fk_fleet_start_client(fk_fleet *f, const char *name, const char *config,
                                         fk_err *err);
/* Wait until every client's log says it joined the server. */
FK_CHECKRETURN int fk_fleet_wait_joined(fk_fleet *f, double seconds, fk_err *err);

/* FK_ESTATE if a daemon exited (the message quotes the end of its log) or the demo
 * was interrupted by a signal (fk_fleet_interrupted() says which). */
FK_CHECKRETURN int fk_fleet_check(fk_fleet *f, fk_err *err);

/* SIGTERM to every daemon, wait up to `seconds`, then SIGKILL the rest and reap
 * them. Safe to call twice and on a zeroed fleet. */
void fk_fleet_stop(fk_fleet *f, double seconds);

/* The signal that interrupted the demo, 0 if none. */
int fk_fleet_interrupted(void);

#endif
