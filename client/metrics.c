#include "client/metrics.h"

#include <math.h>
#include <stdio.h>
#include <uv.h>

#include "common/net/metrics_http.h"

static int metric(char **b, size_t *len, size_t *cap, const char *name, const char *type,
                  const char *help, double v)
{
    return fk_metrics_printf(b, len, cap, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help,
                             name, type, name, v);
}

int fk_client_metrics_render(const fk_agent_stats *as, char **b, size_t *len)
{
    double rss, cpu;
    fk_metrics_process(&rss, &cpu);
    const struct {
        const char *name, *type, *help;
        double v;
    } rows[] = {
        {"fedkern_client_joined", "gauge", "1 while the client holds a session with the server.",
         as->joined},
        {"fedkern_client_connects_total", "counter", "Connections made to the server.",
         (double)as->connects},
        {"fedkern_client_reconnects_total", "counter", "Connections made again after a loss.",
         (double)as->reconnects},
        {"fedkern_client_joins_total", "counter", "Join calls answered.", (double)as->joins},
        {"fedkern_client_heartbeats_total", "counter", "Heartbeats sent.",
         (double)as->heartbeats},
        {"fedkern_client_tasks_total", "counter", "Tasks received.", (double)as->tasks},
        {"fedkern_client_steps_total", "counter", "Local steps completed.", (double)as->steps},
        {"fedkern_client_step_seconds_total", "counter", "Wall time spent in local steps.",
         as->step_seconds_total},
        {"fedkern_client_tasks_cancelled_total", "counter",
         "Steps abandoned because the server voided their task.", (double)as->cancelled},
        {"fedkern_client_pushes_total", "counter", "PushUpdate calls made.", (double)as->pushes},
        {"fedkern_client_updates_committed_total", "counter",
         "Updates the server committed.", (double)as->committed},
        {"fedkern_client_updates_duplicate_total", "counter",
         "Resent updates the server had already counted.", (double)as->duplicates},
        {"fedkern_client_updates_stale_total", "counter",
         "Updates for a phase that was already over.", (double)as->stale},
        {"fedkern_client_chunks_sent_total", "counter", "Chunks of large updates sent.",
         (double)as->chunks_sent},
        {"process_resident_memory_bytes", "gauge", "Resident set size.",
         rss},
        {"process_cpu_seconds_total", "counter", "User + system CPU time.", cpu},
    };
    size_t cap = 0;
    *len = 0;
    int rc = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rc |= metric(b, len, &cap, rows[i].name, rows[i].type, rows[i].help, rows[i].v);
    if (as->last_job) { /* the latest step, labelled by its job and job type */
        rc |= fk_metrics_printf(b, len, &cap,
                                "# HELP fedkern_client_step_round Round of the latest local step.\n"
                                "# TYPE fedkern_client_step_round gauge\n"
                                "fedkern_client_step_round{job=\"%lld\",method=\"%s\"} %u\n"
                                "# HELP fedkern_client_step_seconds Wall time of the latest local "
                                "step.\n# TYPE fedkern_client_step_seconds gauge\n"
                                "fedkern_client_step_seconds{job=\"%lld\",method=\"%s\"} %.17g\n",
                                (long long)as->last_job, as->last_method, as->last_round,
                                (long long)as->last_job, as->last_method, as->last_seconds);
        for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
            double v = fk_report_get(&as->last_report, fk_report_fields[i].name);
            if (isnan(v))
                continue;
            rc |= fk_metrics_printf(b, len, &cap,
                                    "# HELP fedkern_client_%s The latest step's report: %s.\n"
                                    "# TYPE fedkern_client_%s gauge\n"
                                    "fedkern_client_%s{job=\"%lld\",method=\"%s\"} %.17g\n",
                                    fk_report_fields[i].name, fk_report_fields[i].help,
                                    fk_report_fields[i].name, fk_report_fields[i].name,
                                    (long long)as->last_job, as->last_method, v);
        }
    }
    return rc ? FK_ENOMEM : FK_OK;
}
