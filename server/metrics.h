/* Prometheus text metrics on a separate plain-HTTP listener (meant for
 * 127.0.0.1 or a monitoring network): GET /metrics answers the exposition
 * format (text/plain; version=0.0.4), anything else 404. One request per
 * connection, requests capped at 8 KiB, idle connections closed after 5 s. */
#ifndef FK_METRICS_H
#define FK_METRICS_H

#include <stddef.h>
#include <uv.h>

#include "common/base/err.h"
#include "common/net/grpc_server.h"
#include "common/sys/memtrim.h"
#include "server/engine.h"
#include "server/service.h"

/* Append the metrics text to *buf (malloc'd, *len bytes); return FK_OK. */
typedef int (*fk_metrics_render)(void *ud, char **buf, size_t *len);

typedef struct fk_metrics fk_metrics;

/* Listen on "HOST:PORT" (port 0 picks one, see fk_metrics_port). */
FK_CHECKRETURN int fk_metrics_start(fk_metrics **out, uv_loop_t *loop, const char *hostport,
                                    fk_metrics_render render, void *ud, fk_err *err);
int fk_metrics_port(const fk_metrics *m);
/* Stop listening, close open connections; on_closed runs after, then m is freed. */
void fk_metrics_close(fk_metrics *m, void (*on_closed)(void *ud), void *ud);

/* printf onto a growing buffer (helper for render functions). */
int fk_metrics_printf(char **buf, size_t *len, size_t *cap, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* What the engine's round closes tell the metrics: round duration and aggregation time as
 * histograms by method, and per job (the FK_METRICS_JOBS most recent ones) its latest round
 * and quality (fk_report_fields) as gauges labelled job and method. */
typedef struct fk_metrics_rounds fk_metrics_rounds;
enum { FK_METRICS_JOBS = 64 };
FK_CHECKRETURN int fk_metrics_rounds_new(fk_metrics_rounds **out, fk_err *err);
void fk_metrics_rounds_free(fk_metrics_rounds *r);
/* The engine's on_round hook (ud: the fk_metrics_rounds). */
void fk_metrics_rounds_observe(void *ud, const fk_round_event *ev);
/* Append the rounds' histograms and gauges to a render buffer (see fk_metrics_printf). */
FK_CHECKRETURN int fk_metrics_rounds_render(const fk_metrics_rounds *r, char **buf, size_t *len,
                                            size_t *cap);

/* The server's metrics (every name, type and help text is here): jobs and rounds from the
 * engine (rounds, may be NULL: its per-job and per-method series), sessions and updates from
 * the service, calls (by method and status code) and connections from the gRPC server,
 * resident memory and CPU time of the process, and the memory trims (trim may be NULL). A
 * render function for fk_metrics_start. */
FK_CHECKRETURN int fk_metrics_render_server(fk_service *svc, fk_engine *e, fk_grpc_server *srv,
                                            const fk_memtrim *trim,
                                            const fk_metrics_rounds *rounds, char **buf,
                                            size_t *len);

#endif
