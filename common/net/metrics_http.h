/* Prometheus text metrics on a separate plain-HTTP listener (meant for
 * 127.0.0.1 or a monitoring network): GET /metrics answers the exposition
 * format (text/plain; version=0.0.4), GET /healthz a small JSON object (200 when
 * the owner serves, 503 when it is stopping; answered on the owner's loop, so an
 * answer at all says the loop turns), anything else 404. One request per
 * connection, requests capped at 8 KiB, idle connections closed after 5 s.
 * Both daemons serve their metrics this way (fedkern-server: server/metrics.h;
 * fedkern-client: client/main.c, off unless metrics-listen is set). */
#ifndef FK_METRICS_HTTP_H
#define FK_METRICS_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "common/base/err.h"

/* Append the metrics text to *buf (malloc'd, *len bytes); return FK_OK. */
typedef int (*fk_metrics_render)(void *ud, char **buf, size_t *len);

typedef struct fk_metrics fk_metrics;

/* Listen on "HOST:PORT" (port 0 picks one, see fk_metrics_port). */
FK_CHECKRETURN int fk_metrics_start(fk_metrics **out, uv_loop_t *loop, const char *hostport,
                                    fk_metrics_render render, void *ud, fk_err *err);
int fk_metrics_port(const fk_metrics *m);

/* /healthz: write a JSON object (NUL-terminated, at most cap bytes) into json and return 1
 * when serving, 0 when not (stopping: 503). Without one, /healthz answers 200
 * {"status":"serving"}. */
typedef int (*fk_metrics_health)(void *ud, char *json, size_t cap);
void fk_metrics_set_health(fk_metrics *m, fk_metrics_health health, void *ud);
/* Stop listening, close open connections; on_closed runs after, then m is freed. */
void fk_metrics_close(fk_metrics *m, void (*on_closed)(void *ud), void *ud);

/* This process's resident set in bytes (0 when unknown) and its user + system CPU time in
 * seconds (NaN when unknown): the process_* rows both daemons export. */
void fk_metrics_process(double *rss_bytes, double *cpu_seconds);

/* printf onto a growing buffer (helper for render functions). */
int fk_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
