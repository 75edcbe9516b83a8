/* systemd service notification (sd_notify): READY=1 once listening, STATUS= lines,
 * WATCHDOG=1 pings from the daemon's own libuv loop, STOPPING=1 on shutdown.
 * sd_notify blocks while the receiver's queue is full: PID 1 drains it, tests must too.
 * Everything is a no-op when NOTIFY_SOCKET is unset (not started by systemd).
 *
 * The watchdog ping is a uv timer at half of WATCHDOG_USEC, so a loop that stops
 * turning stops the pings and systemd restarts the daemon (WatchdogSec=).
 *
 * Test-only hook: if the environment holds FEDKERN_TEST_STALL_MS=N, SIGUSR2 blocks
 * the loop for N ms (a stuck loop on demand, for tests/notify.py). Never set it in
 * production; the shipped units do not. */
#ifndef FK_SYS_NOTIFY_H
#define FK_SYS_NOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

/* Writes a one-line status into buf (e.g. "job 3 round 5/20"); called once a second. */
typedef void (*fk_notify_status_fn)(void *ud, char *buf, size_t cap);

typedef struct fk_notify {
    uv_timer_t watchdog;   /* WATCHDOG=1 at half of WATCHDOG_USEC */
    uv_timer_t status;     /* STATUS= when the text changes */
    uv_signal_t stall;     /* test-only SIGUSR2 stall */
    uint64_t watchdog_usec; /* 0: watchdog not requested */
    uint64_t stall_ms;
    fk_notify_status_fn status_fn;
    void *status_ud;
    char last_status[256];
    int active;            /* NOTIFY_SOCKET set */
    int warned;            /* a send failed (logged once) */
    int handles;           /* uv handles open */
} fk_notify;

/* Start the watchdog/status timers on loop (unreferenced: they never keep it alive). */
void fk_notify_init(fk_notify *n, uv_loop_t *loop, fk_notify_status_fn fn, void *ud);
/* READY=1 plus STATUS=status. */
void fk_notify_ready(fk_notify *n, const char *status);
/* STOPPING=1 plus STATUS=why; the watchdog keeps pinging while the daemon drains. */
void fk_notify_stopping(fk_notify *n, const char *why);
/* RELOADING=1 before, READY=1 after a SIGHUP reload (ExecReload=). */
void fk_notify_reloading(fk_notify *n, int done);
/* Stop and close the timers (on the loop; run it once more to finish). */
void fk_notify_close(fk_notify *n);

#endif
