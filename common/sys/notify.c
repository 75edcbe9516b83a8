#include "common/sys/notify.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "common/base/log.h"
#include "common/base/uvcheck.h"

/* One warning per run: a missing socket would otherwise log at every ping. */
static void notify_send(fk_notify *n, const char *msg)
{
    int rc = n->active ? sd_notify(0, msg) : 0;
    if (rc < 0 && !n->warned) {
        char first[41]; /* the message's first line, for the log */
        snprintf(first, sizeof first, "%.*s", (int)strcspn(msg, "\n"), msg);
        n->warned = 1;
        fk_log(FK_LOG_WARN, "notify_failed", "socket=%s error=\"%s\" message=\"%s\"",
               getenv("NOTIFY_SOCKET"), strerror(-rc), first);
    }
}

static void send_status(fk_notify *n, const char *prefix, const char *text)
{
    char msg[320];
    snprintf(n->last_status, sizeof n->last_status, "%s", text ? text : "");
    snprintf(msg, sizeof msg, "%sSTATUS=%s", prefix, n->last_status);
    notify_send(n, msg);
}

static void on_watchdog(uv_timer_t *t)
{
    notify_send(t->data, "WATCHDOG=1");
}

static void on_status(uv_timer_t *t)
{
    fk_notify *n = t->data;
    char buf[256] = "";
    n->status_fn(n->status_ud, buf, sizeof buf);
    if (strcmp(buf, n->last_status))
        send_status(n, "", buf);
}

/* Test-only: block the loop so the watchdog pings stop (see notify.h). */
static void on_stall(uv_signal_t *s, int signum)
{
    (void)signum;
    fk_notify *n = s->data;
    fk_log(FK_LOG_WARN, "test_stall", "ms=%llu", (unsigned long long)n->stall_ms);
    struct timespec ts = {(time_t)(n->stall_ms / 1000), (long)(n->stall_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static void unref_start(fk_notify *n, uv_timer_t *t, uv_loop_t *loop, uv_timer_cb cb, uint64_t ms)
{
    FK_UV_MUST(uv_timer_init(loop, t));
    t->data = n;
    FK_UV_MUST(uv_timer_start(t, cb, ms, ms));
    uv_unref((uv_handle_t *)t);
    n->handles++;
}

void fk_notify_init(fk_notify *n, uv_loop_t *loop, fk_notify_status_fn fn, void *ud)
{
    memset(n, 0, sizeof *n);
    const char *sock = getenv("NOTIFY_SOCKET");
    n->active = sock && *sock;
    n->status_fn = fn;
    n->status_ud = ud;
    uint64_t usec = 0;
    if (n->active && sd_watchdog_enabled(0, &usec) > 0 && usec > 0)
        n->watchdog_usec = usec;
    if (n->watchdog_usec) {
        uint64_t half = n->watchdog_usec / 2000;
        unref_start(n, &n->watchdog, loop, on_watchdog, half ? half : 1);
        fk_log(FK_LOG_INFO, "watchdog_enabled", "usec=%llu ping_ms=%llu",
               (unsigned long long)n->watchdog_usec, (unsigned long long)(half ? half : 1));
    }
    if (n->active && fn)
        unref_start(n, &n->status, loop, on_status, 1000);
    const char *stall = getenv("FEDKERN_TEST_STALL_MS");
    if (stall && *stall) {
        n->stall_ms = strtoull(stall, NULL, 10);
        int rc = uv_signal_init(loop, &n->stall);
        if (rc == 0) { /* initialised: counted and closed even if it cannot start */
            n->stall.data = n;
            rc = uv_signal_start(&n->stall, on_stall, SIGUSR2);
            uv_unref((uv_handle_t *)&n->stall);
            n->handles++;
        }
        if (rc)
            fk_log(FK_LOG_ERROR, "test_stall_unavailable", "error=\"%s\"", uv_strerror(rc));
    }
}

void fk_notify_ready(fk_notify *n, const char *status)
{
    send_status(n, "READY=1\n", status);
    if (n->watchdog_usec)
        notify_send(n, "WATCHDOG=1"); /* first ping right away: startup may have taken a while */
}

void fk_notify_stopping(fk_notify *n, const char *why)
{
    send_status(n, "STOPPING=1\n", why);
}

void fk_notify_reloading(fk_notify *n, int done)
{
    if (done) {
        notify_send(n, "READY=1");
        return;
    }
    /* MONOTONIC_USEC lets systemd >= 253 match the reload to this message. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char msg[96];
    snprintf(msg, sizeof msg, "RELOADING=1\nMONOTONIC_USEC=%llu",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    notify_send(n, msg);
}

static void closed(uv_handle_t *h)
{
    (void)h;
}

void fk_notify_close(fk_notify *n)
{
    /* data is set only on handles that were initialised */
    if (n->watchdog.data)
        uv_close((uv_handle_t *)&n->watchdog, closed);
    if (n->status.data)
        uv_close((uv_handle_t *)&n->status, closed);
    if (n->stall.data)
        uv_close((uv_handle_t *)&n->stall, closed);
    n->watchdog.data = n->status.data = n->stall.data = NULL;
    n->handles = 0;
}
