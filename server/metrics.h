/* The server's Prometheus metrics (names, types, help texts), served by the listener of
 * common/net/metrics_http.h. */
#ifndef FK_METRICS_H
#define FK_METRICS_H

#include <stddef.h>
#include <uv.h>

#include "common/base/err.h"
#include "common/net/metrics_http.h"
#include "common/net/grpc_server.h"
#include "common/sys/memtrim.h"
#include "server/engine.h"
#include "server/service.h"

/* What the engine's round closes tell the metrics: round duration and aggregation time as
 * histograms by method, and per job (the FK_METRICS_JOBS most recent ones) its latest round
 * and quality (fk_report_fields) as gauges labelled job and method. */
typedef struct fk_metrics_rounds fk_metrics_rounds;
enum { FK_METRICS_JOBS = 64 };
FK_CHECKRETURN int fk_metrics_rounds_new(fk_metrics_rounds **out, fk_err *err);
void fk_metrics_rounds_free(fk_metrics_rounds *r);
/* The engine's on_round hook (ud: the fk_metrics_rounds). */
void fk_metrics_rounds_observe(void *ud, const fk_round_event *ev);

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
