/* The client daemon's Prometheus metrics (every name, type and help text is here), served by
 * the listener of common/net/metrics_http.h when metrics-listen is set: the agent's counters,
 * its latest step (job, job type, round, wall time, what it reported), and the process's
 * resident memory and CPU time. */
#ifndef FK_CLIENT_METRICS_H
#define FK_CLIENT_METRICS_H

#include <stddef.h>

#include "client/agent.h"

FK_CHECKRETURN int fk_client_metrics_render(const fk_agent_stats *as, char **buf, size_t *len);

#endif
