#include "server/metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/net/grpc.h"

/* ---- the server's metrics: names, types and help texts live here ---- */

static int metric(char **b, size_t *len, size_t *cap, const char *name, const char *type,
                  const char *help, double v)
{
    return fk_metrics_printf(b, len, cap, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help,
                             name, type, name, v);
}

/* ---- per-round observations ---- */

static const double round_bounds[] = {0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900};
static const double agg_bounds[] = {1e-4, 1e-3, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 60};
enum { N_ROUND_B = sizeof round_bounds / sizeof *round_bounds,
       N_AGG_B = sizeof agg_bounds / sizeof *agg_bounds };

typedef struct hist {
    uint64_t count, le[N_ROUND_B > N_AGG_B ? N_ROUND_B : N_AGG_B]; /* cumulative at render */
    double sum;
} hist;

typedef struct per_method {
    char name[64];
    hist round, agg;
} per_method;

/* One client's quality in its job's latest round (the gauges labelled client). */
typedef struct per_client {
    char client[128]; /* identity, escaped for a label value */
    char role[16];    /* "" for a training client */
    double q[FK_REPORT_N_FIELDS];
} per_client;
enum { CLIENTS_PER_JOB = 64 }; /* the first by index that measured something, like job status */

typedef struct per_job {
    int64_t job; /* 0: unused */
    char method[64];
    int round, participants;
    double q[FK_REPORT_N_FIELDS];
    per_client cl[CLIENTS_PER_JOB];
    int n_cl;
    /* where the job type names clients apart (roles): the means apart, as job status has
     * them (train_<field>, unseen_<field>, target_<field>); NaN: none measured it */
    int has_roles;
    double rq[3][FK_REPORT_N_FIELDS];
} per_job;

static const char *const role_names[3] = {"train", "unseen", "target"};

/* A Prometheus label value: backslash, quote and newline escaped; cut to fit. */
static void label_value(char *dst, size_t cap, const char *s)
{
    size_t o = 0;
    for (; s && *s && o + 3 < cap; s++) {
        if (*s == '\\' || *s == '"' || *s == '\n') {
            dst[o++] = '\\';
            dst[o++] = *s == '\n' ? 'n' : *s;
        } else {
            dst[o++] = *s;
        }
    }
    dst[o] = '\0';
}

struct fk_metrics_rounds {
    per_method *methods;
    int n_methods;
    per_job jobs[FK_METRICS_JOBS]; /* ring of the most recent jobs */
    int next_job;
};

int fk_metrics_rounds_new(fk_metrics_rounds **out, fk_err *err)
{
    *out = calloc(1, sizeof **out);
    return *out ? FK_OK : fk_err_set(err, FK_ENOMEM, "out of memory for the round metrics");
}

void fk_metrics_rounds_free(fk_metrics_rounds *r)
{
    if (!r)
        return;
    free(r->methods);
    free(r);
}

static void hist_add(hist *h, const double *bounds, int nb, double v)
{
    h->count++;
    h->sum += v;
    for (int i = 0; i < nb; i++)
        if (v <= bounds[i]) {
            h->le[i]++; /* per bucket here; cumulated when rendered */
            break;
        }
}

void fk_metrics_rounds_observe(void *ud, const fk_round_event *ev)
{
    fk_metrics_rounds *r = ud;
    per_method *m = NULL;
    for (int i = 0; i < r->n_methods && !m; i++)
        if (!strcmp(r->methods[i].name, ev->method))
            m = &r->methods[i];
    if (!m) { /* one entry per job type: bounded by the registry */
        per_method *g = realloc(r->methods, (size_t)(r->n_methods + 1) * sizeof *g);
        if (g) {
            r->methods = g;
            m = &g[r->n_methods++];
            memset(m, 0, sizeof *m);
            size_t k = strnlen(ev->method, sizeof m->name - 1); /* memset left the NUL */
            memcpy(m->name, ev->method, k);
        }
    }
    if (m) {
        hist_add(&m->round, round_bounds, N_ROUND_B, ev->round_seconds);
        hist_add(&m->agg, agg_bounds, N_AGG_B, ev->agg_seconds);
    }
    per_job *j = NULL;
    for (int i = 0; i < FK_METRICS_JOBS && !j; i++)
        if (r->jobs[i].job == ev->job)
            j = &r->jobs[i];
    if (!j) { /* the oldest job's gauges give way */
        j = &r->jobs[r->next_job];
        r->next_job = (r->next_job + 1) % FK_METRICS_JOBS;
    }
    j->job = ev->job;
    snprintf(j->method, sizeof j->method, "%s", ev->method);
    j->round = ev->round;
    j->participants = ev->participants;
    memcpy(j->q, ev->q, sizeof j->q);
    j->n_cl = 0;
    for (int k = 0; k < ev->n_clients && j->n_cl < CLIENTS_PER_JOB; k++) {
        per_client *c = &j->cl[j->n_cl];
        int any = 0;
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
            c->q[f] = *(const double *)((const char *)&ev->clients[k] + fk_report_fields[f].offset);
            any |= !isnan(c->q[f]);
        }
        if (!any) /* measured nothing this round */
            continue;
        label_value(c->client, sizeof c->client, ev->identities ? ev->identities[k] : "");
        snprintf(c->role, sizeof c->role, "%s", ev->roles && ev->roles[k] ? ev->roles[k] : "");
        j->n_cl++;
    }
    /* the means apart, over every client (not only the listed ones), weighted as the mean:
     * n_samples, 1 where not positive */
    j->has_roles = 0;
    for (int k = 0; ev->roles && k < ev->n_clients; k++)
        j->has_roles |= ev->roles[k] != NULL;
    for (int r = 0; r < 3; r++)
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
            double sum = 0, wsum = 0;
            for (int k = 0; j->has_roles && k < ev->n_clients; k++) {
                const char *role = ev->roles[k];
                if (r == 0 ? role != NULL : !role || strcmp(role, role_names[r]))
                    continue;
                const fk_report *c = &ev->clients[k];
                double v = *(const double *)((const char *)c + fk_report_fields[f].offset);
                if (isnan(v))
                    continue;
                double w = c->n_samples > 0 ? c->n_samples : 1.0;
                sum += w * v;
                wsum += w;
            }
            j->rq[r][f] = wsum > 0 ? sum / wsum : NAN;
        }
}

static int render_hist(char **b, size_t *len, size_t *cap, const char *name, const char *method,
                       const hist *h, const double *bounds, int nb)
{
    int rc = 0;
    uint64_t cum = 0;
    for (int i = 0; i < nb; i++) {
        cum += h->le[i];
        rc |= fk_metrics_printf(b, len, cap, "%s_bucket{method=\"%s\",le=\"%g\"} %llu\n", name,
                                method, bounds[i], (unsigned long long)cum);
    }
    rc |= fk_metrics_printf(b, len, cap,
                            "%s_bucket{method=\"%s\",le=\"+Inf\"} %llu\n%s_sum{method=\"%s\"} "
                            "%.17g\n%s_count{method=\"%s\"} %llu\n",
                            name, method, (unsigned long long)h->count, name, method, h->sum, name,
                            method, (unsigned long long)h->count);
    return rc;
}

/* Append the rounds' histograms and gauges to a render buffer (see fk_metrics_printf). */
FK_CHECKRETURN static int rounds_render(const fk_metrics_rounds *r, char **b, size_t *len,
                                        size_t *cap)
{
    int rc = 0;
    rc |= fk_metrics_printf(b, len, cap,
                            "# HELP fedkern_round_duration_seconds Rounds from their opening to "
                            "their close, by job type.\n"
                            "# TYPE fedkern_round_duration_seconds histogram\n");
    for (int i = 0; i < r->n_methods; i++)
        rc |= render_hist(b, len, cap, "fedkern_round_duration_seconds", r->methods[i].name,
                          &r->methods[i].round, round_bounds, N_ROUND_B);
    rc |= fk_metrics_printf(b, len, cap,
                            "# HELP fedkern_round_aggregation_seconds Time in the method's "
                            "aggregate step of a round's last phase, by job type.\n"
                            "# TYPE fedkern_round_aggregation_seconds histogram\n");
    for (int i = 0; i < r->n_methods; i++)
        rc |= render_hist(b, len, cap, "fedkern_round_aggregation_seconds",
                          r->methods[i].name, &r->methods[i].agg, agg_bounds, N_AGG_B);
    rc |= fk_metrics_printf(b, len, cap,
                            "# HELP fedkern_job_round Latest closed round of the job.\n"
                            "# TYPE fedkern_job_round gauge\n");
    for (int i = 0; i < FK_METRICS_JOBS; i++)
        if (r->jobs[i].job)
            rc |= fk_metrics_printf(b, len, cap,
                                    "fedkern_job_round{job=\"%lld\",method=\"%s\"} %d\n",
                                    (long long)r->jobs[i].job, r->jobs[i].method, r->jobs[i].round);
    rc |= fk_metrics_printf(b, len, cap,
                            "# HELP fedkern_job_participants Updates aggregated in the job's "
                            "latest closed round.\n# TYPE fedkern_job_participants gauge\n");
    for (int i = 0; i < FK_METRICS_JOBS; i++)
        if (r->jobs[i].job)
            rc |= fk_metrics_printf(b, len, cap,
                                    "fedkern_job_participants{job=\"%lld\",method=\"%s\"} %d\n",
                                    (long long)r->jobs[i].job, r->jobs[i].method,
                                    r->jobs[i].participants);
    for (int f = 0; f < FK_REPORT_N_FIELDS; f++) { /* one gauge per quality measure */
        rc |= fk_metrics_printf(b, len, cap,
                                "# HELP fedkern_job_%s The job's latest round: %s (weighted mean "
                                "over the clients that measured it).\n"
                                "# TYPE fedkern_job_%s gauge\n",
                                fk_report_fields[f].name, fk_report_fields[f].help,
                                fk_report_fields[f].name);
        for (int i = 0; i < FK_METRICS_JOBS; i++)
            if (r->jobs[i].job && !isnan(r->jobs[i].q[f]))
                rc |= fk_metrics_printf(b, len, cap,
                                        "fedkern_job_%s{job=\"%lld\",method=\"%s\"} %.17g\n",
                                        fk_report_fields[f].name, (long long)r->jobs[i].job,
                                        r->jobs[i].method, r->jobs[i].q[f]);
    }
    for (int ro = 0; ro < 3; ro++) /* the means apart, where the job type names clients apart */
        for (int f = 0; f < FK_REPORT_N_FIELDS; f++) {
            int any = 0;
            for (int i = 0; i < FK_METRICS_JOBS; i++)
                any |= r->jobs[i].job && r->jobs[i].has_roles && !isnan(r->jobs[i].rq[ro][f]);
            if (!any)
                continue;
            rc |= fk_metrics_printf(b, len, cap,
                                    "# HELP fedkern_job_%s_%s The job's latest round: %s, "
                                    "weighted mean over its %s clients only (job types that "
                                    "report clients apart: dica/udica unseen, fedrf-tca target).\n"
                                    "# TYPE fedkern_job_%s_%s gauge\n",
                                    role_names[ro], fk_report_fields[f].name,
                                    fk_report_fields[f].help,
                                    ro == 0 ? "training" : role_names[ro], role_names[ro],
                                    fk_report_fields[f].name);
            for (int i = 0; i < FK_METRICS_JOBS; i++)
                if (r->jobs[i].job && r->jobs[i].has_roles && !isnan(r->jobs[i].rq[ro][f]))
                    rc |= fk_metrics_printf(b, len, cap,
                                            "fedkern_job_%s_%s{job=\"%lld\",method=\"%s\"} "
                                            "%.17g\n",
                                            role_names[ro], fk_report_fields[f].name,
                                            (long long)r->jobs[i].job, r->jobs[i].method,
                                            r->jobs[i].rq[ro][f]);
        }
    for (int f = 0; f < FK_REPORT_N_FIELDS; f++) { /* and each client's, under its name */
        rc |= fk_metrics_printf(b, len, cap,
                                "# HELP fedkern_job_client_%s The job's latest round: %s, as "
                                "one client measured it (role: train, or the job type's name "
                                "for a client reported apart: unseen, target).\n"
                                "# TYPE fedkern_job_client_%s gauge\n",
                                fk_report_fields[f].name, fk_report_fields[f].help,
                                fk_report_fields[f].name);
        for (int i = 0; i < FK_METRICS_JOBS; i++) {
            const per_job *j = &r->jobs[i];
            for (int k = 0; j->job && k < j->n_cl; k++)
                if (!isnan(j->cl[k].q[f]))
                    rc |= fk_metrics_printf(
                        b, len, cap,
                        "fedkern_job_client_%s{job=\"%lld\",method=\"%s\",client=\"%s\","
                        "role=\"%s\"} %.17g\n",
                        fk_report_fields[f].name, (long long)j->job, j->method, j->cl[k].client,
                        j->cl[k].role[0] ? j->cl[k].role : "train", j->cl[k].q[f]);
        }
    }
    return rc ? FK_ENOMEM : FK_OK;
}

/* gRPC calls answered, by method (the path's last part) and status code; zero rows left out. */
static int render_calls(fk_grpc_server *srv, char **b, size_t *len, size_t *cap)
{
    int rc = fk_metrics_printf(b, len, cap,
                               "# HELP fedkern_grpc_calls_answered_total gRPC calls answered, by "
                               "method and status code.\n"
                               "# TYPE fedkern_grpc_calls_answered_total counter\n");
    uint64_t counts[FK_GRPC_N_STATUS];
    const char *path;
    for (int i = 0; (path = fk_grpc_server_method_calls(srv, i, counts)); i++) {
        const char *slash = strrchr(path, '/');
        for (int c = 0; c < FK_GRPC_N_STATUS; c++)
            if (counts[c])
                rc |= fk_metrics_printf(b, len, cap,
                                        "fedkern_grpc_calls_answered_total{method=\"%s\","
                                        "code=\"%s\"} %llu\n",
                                        slash ? slash + 1 : path, fk_grpc_status_name(c),
                                        (unsigned long long)counts[c]);
    }
    return rc;
}

int fk_metrics_render_server(fk_service *svc, fk_engine *e, fk_grpc_server *srv,
                             const fk_memtrim *trim, const fk_metrics_rounds *rounds, char **b,
                             size_t *len)
{
    fk_service_stats sv;
    fk_engine_stats en;
    fk_grpc_server_stats gs;
    fk_service_stats_get(svc, &sv);
    fk_engine_stats_get(e, &en);
    fk_grpc_server_stats_get(srv, &gs);
    double rss, cpu;
    fk_metrics_process(&rss, &cpu);
    const struct {
        const char *name, *type, *help;
        double v;
    } rows[] = {
        {"fedkern_jobs_running", "gauge", "Jobs in progress.", fk_engine_running(e)},
        {"fedkern_jobs_stalled", "gauge",
         "Running jobs that take no updates until the state directory accepts writes again.",
         en.jobs_stalled},
        {"fedkern_rounds_closed_total", "counter",
         "Rounds aggregated since the server started.", (double)en.rounds_closed},
        {"fedkern_round_retries_total", "counter",
         "Round attempts abandoned for a missed quorum.", (double)en.retries},
        {"fedkern_round_participants_total", "counter",
         "Updates aggregated in the last phase of closed rounds.", (double)en.participants},
        {"fedkern_dropouts_total", "counter",
         "Planned clients absent or late at a phase close.", (double)en.dropouts},
        {"fedkern_updates_refused_total", "counter",
         "Updates refused by the report or method checks, or blamed for a failed aggregation.",
         (double)en.updates_refused},
        {"fedkern_clients_excluded_total", "counter",
         "Clients left out of a job after max_refusals refused updates.",
         (double)en.clients_excluded},
        {"fedkern_aggregation_seconds_total", "counter",
         "Time spent in the methods' aggregate step.", en.aggregation_seconds},
        {"fedkern_work_pending", "gauge",
         "Phase closes and predictions waiting for or running on the worker thread.",
         sv.works_pending},
        {"fedkern_work_done_total", "counter", "Works the worker thread finished.",
         (double)sv.works_done},
        {"fedkern_work_seconds_total", "counter",
         "Time the worker thread spent on phase closes and predictions.", sv.work_seconds},
        {"fedkern_work_wait_seconds_total", "counter",
         "Time works waited for the worker thread before they ran.", sv.work_wait_seconds},
        {"fedkern_clients_connected", "gauge", "Clients with a session (joined).", sv.sessions},
        {"fedkern_polls_waiting", "gauge", "PullTask calls waiting for a task.", sv.waiting_polls},
        {"fedkern_tasks_sent_total", "counter", "Tasks handed out.", (double)sv.tasks_sent},
        {"fedkern_updates_committed_total", "counter",
         "Updates committed and acknowledged.", (double)sv.committed},
        {"fedkern_updates_duplicate_total", "counter",
         "Resent updates acknowledged without being counted again.", (double)sv.duplicates},
        {"fedkern_update_transactions_total", "counter",
         "Group commits: transactions that stored the updates of one loop turn.", (double)sv.batches},
        {"fedkern_update_transactions_failed_total", "counter",
         "Group commits rolled back (their updates were refused, not acknowledged).",
         (double)sv.batch_failures},
        {"fedkern_updates_stale_total", "counter",
         "Updates for a phase that was already over.", (double)sv.stale},
        {"fedkern_clients_refused_total", "counter",
         "Calls refused for the certificate or the allow-list.", (double)sv.refused},
        {"fedkern_bytes_received_total", "counter",
         "Request bytes of Federation calls.", (double)sv.bytes_in},
        {"fedkern_bytes_sent_total", "counter",
         "Response bytes of Federation calls.", (double)sv.bytes_out},
        {"fedkern_predict_calls_server_total", "counter",
         "Predict calls answered from a job's model at the server (kahm mode A).",
         (double)sv.predict_server},
        {"fedkern_predict_calls_clients_total", "counter",
         "Predict calls answered from the clients holding the models (kahm mode B).",
         (double)sv.predict_clients},
        {"fedkern_predict_calls_failed_total", "counter",
         "Predict calls refused or failed (bad queries, unknown job, limits).",
         (double)sv.predict_failed},
        {"fedkern_predict_queries_total", "counter", "Queries answered by Predict calls.",
         (double)sv.predict_queries},
        {"fedkern_predict_missing_clients_total", "counter",
         "Holder clients that did not answer a mode-B Predict call in time (summed over calls).",
         (double)sv.predict_missing_clients},
        {"fedkern_predict_unscored_classes_total", "counter",
         "Classes no answering client could score (summed over Predict calls).",
         (double)sv.predict_unscored_classes},
        {"fedkern_grpc_calls_total", "counter", "gRPC calls received.", (double)gs.calls},
        {"fedkern_connections_accepted_total", "counter",
         "TLS connections accepted.", (double)gs.conns_accepted},
        {"fedkern_connections_refused_total", "counter",
         "Connections refused (TLS, limits).", (double)gs.conns_refused},
        {"fedkern_upload_bytes_held", "gauge",
         "Bytes of large request messages (uploads) admitted and held now (net.upload_memory_mb).",
         (double)gs.upload_held},
        {"fedkern_upload_bytes_held_peak", "gauge",
         "Most bytes of large request messages held at once since the start.",
         (double)gs.upload_peak},
        {"fedkern_uploads_waiting", "gauge",
         "Large request messages waiting for the upload budget now (their client waits).",
         (double)gs.upload_waiting},
        {"fedkern_uploads_waited_total", "counter",
         "Large request messages that had to wait for the upload budget.",
         (double)gs.upload_waits},
        {"process_resident_memory_bytes", "gauge",
         "Resident set size.", rss},
        {"process_cpu_seconds_total", "counter", "User + system CPU time.", cpu},
        {"fedkern_memory_trims_total", "counter",
         "Times freed heap was given back to the system after a load spike (memtrim_ms).",
         trim ? (double)trim->trims : 0.0},
        {"fedkern_memory_trimmed_bytes_total", "counter",
         "Resident memory those trims gave back.", trim ? (double)trim->released : 0.0},
    };
    size_t cap = 0;
    *len = 0;
    int rc = 0;
    for (size_t i = 0; i < sizeof rows / sizeof *rows; i++)
        rc |= metric(b, len, &cap, rows[i].name, rows[i].type, rows[i].help, rows[i].v);
    rc |= render_calls(srv, b, len, &cap);
    if (rounds)
        rc |= rounds_render(rounds, b, len, &cap);
    return rc ? FK_ENOMEM : FK_OK;
}
