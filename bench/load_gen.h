/* One load-generator process of `fedkern bench load`: its own libuv loop drives a slice of
 * the mutual-TLS client connections (Join, paced Heartbeats, the reconnect storm) and answers
 * the coordinator's commands on a socket with a report each, so several generator processes
 * can offer a load one process cannot. */
#ifndef FK_BENCH_LOAD_GEN_H
#define FK_BENCH_LOAD_GEN_H

#include <stddef.h>
#include <stdint.h>

#include "bench/load_hist.h"
#include "common/base/err.h"

typedef struct fk_loadgen_cfg {
    const char *dir; /* the PKI: ca.pem and a certificate per client, load<i> */
    int port;        /* the server on 127.0.0.1 */
    int lo, hi;      /* this generator's connections: indices [lo, hi) */
    int batch;       /* handshakes (and storm reconnects) in flight at once here */
    int id;          /* generator number: seeds its backoff jitter */
} fk_loadgen_cfg;

/* Commands, in the order the coordinator sends them (STORM is optional). */
enum { FK_LG_CONNECT = 1, FK_LG_HEARTBEAT, FK_LG_STORM, FK_LG_CLOSE, FK_LG_ARMED };

typedef struct fk_loadgen_cmd {
    int kind;
    double seconds; /* CONNECT: time limit; HEARTBEAT: phase length; STORM: time limit */
    double rate;    /* HEARTBEAT: calls/s this generator offers */
} fk_loadgen_cmd;

/* The answer to each command (STORM: first one of kind FK_LG_ARMED once the connections
 * will reconnect when the server goes away, then the result followed by n_times doubles:
 * each rejoined client's CLOCK_MONOTONIC time of its first Join after the restart). */
typedef struct fk_loadgen_report {
    int kind;
    int n;                       /* connections in this generator */
    int joined;                  /* CONNECT */
    int failed_conns;            /* failed or lost outside the storm so far (every answer) */
    int closed;                  /* CLOSE */
    double t_phase;              /* the phase's own duration here, s */
    double cpu_s;                /* this process's user + system CPU over the phase, s */
    long calls_ok, calls_failed; /* HEARTBEAT: answered inside the timed phase, failed */
    long calls_due, calls_sent, calls_skipped; /* offered by the pacing, sent, none free */
    long keep_failed;            /* untimed heartbeats failed so far (outside the storm) */
    int rejoined, storm_joins, storm_failures, n_times; /* STORM */
    int storm_refused;           /* STORM: reconnects that failed before TLS was up */
    int attempts_max;            /* STORM: most reconnect attempts one client needed */
    fk_lhist hist;               /* HEARTBEAT latencies of calls_ok */
} fk_loadgen_report;

/* Run one generator until CLOSE was answered or the socket ends. 0 on a clean end. */
FK_CHECKRETURN int fk_loadgen_run(const fk_loadgen_cfg *cfg, int fd, fk_err *err);

/* Whole-buffer socket I/O for the command protocol: FK_OK or FK_EIO (the peer ended). */
FK_CHECKRETURN int fk__loadgen_write(int fd, const void *p, size_t n);
FK_CHECKRETURN int fk__loadgen_read(int fd, void *p, size_t n);

#endif
