/* The method state of the jobs this client holds: made on a job's first task (or prediction),
 * restored from and removed in the state dir (client/cstate.h), rebuilt after a restart for
 * the jobs whose models answer predictions after they ended, forgotten when the server no
 * longer runs a job. */
#include "client/agent_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/jobconf.h"

void fk__agent_job_free(fk__agent_job *j)
{
    if (!j)
        return;
    if (j->cli)
        j->m->client_close(j->cli);
    fk_cstate_close(&j->saved);
    fk_params_close(&j->params);
    free(j->config);
    free(j);
}

/* A state file that cannot be removed is stale; say so (a later load refuses it anyway). */
void fk__agent_remove_state(const char *dir, int64_t job)
{
    fk_err err = {0};
    if (fk_cstate_remove(dir, job, &err))
        fk_log(FK_LOG_WARN, "client_state_not_removed", "job=%" PRId64 " error=\"%s\"", job,
               err.msg);
}

/* The job's state file, if this client has one: the method state of its last
 * step (and that step's update, for a resend). 1 if the method state may be
 * half-loaded and must be built again; a file that is unusable is removed. */
static int restore(fk_agent *a, fk__agent_job *j)
{
    fk_cstate cs;
    fk_cstate_init(&cs);
    fk_err e = {0};
    int rc = fk_cstate_read(a->cfg.state_dir, j->job, &cs, &e), touched = 0;
    if (rc == FK_ENOTFOUND) {
        fk_cstate_close(&cs);
        return 0;
    }
    if (!rc && (memcmp(cs.digest, j->digest, 32) != 0 || cs.client != (uint32_t)j->client))
        rc = fk_err_set(&e, FK_ESTATE,
                        "the file belongs to another job %" PRId64
                        " (other method, configuration or client index)",
                        j->job);
    if (!rc) {
        touched = 1;
        rc = j->m->client_load(j->cli, &cs.state, &e);
    }
    if (rc) {
        fk_log(FK_LOG_WARN, "client_state_discarded", "job=%" PRId64 " error=\"%s\"", j->job,
               e.msg);
        fk__agent_remove_state(a->cfg.state_dir, j->job);
        fk_cstate_close(&cs);
        return touched;
    }
    fk_log(FK_LOG_INFO, "client_state_restored",
           "job=%" PRId64 " round=%" PRIu32 " phase=%" PRIu32 " task=%s pending_update=%d", j->job,
           cs.round, cs.phase, cs.task_id, cs.update_id[0] != '\0');
    fk_cstate_close(&j->saved);
    j->saved = cs;
    j->has_saved = cs.update_id[0] != '\0';
    return 0;
}

const fk_param_doc fk_agent_local_docs[] = {
    {"local.allow_raw_upload BOOL", "true consents to sfl jobs (raw_sample_upload = acknowledged) "
                                    "uploading raw rows of this client's data (false)"},
    {"local.max_upload_fraction F", "caps that upload at this fraction of the client's rows, "
                                    "(0, 1] (1)"},
    {"local.allow_model_upload BOOL", "true consents to kahm jobs (upload_models = 1) uploading "
                                      "models that contain the training samples (false)"},
    {NULL, NULL},
};

FK_CHECKRETURN int fk_agent_local_params(fk_params *job_params, const fk_params *local, int64_t job,
                                         fk_err *err)
{
    /* local.* keys speak for this client (consent, caps): only its own config sets them */
    for (int i = 0; i < job_params->count; i++)
        if (!strncmp(job_params->items[i].key, "local.", 6))
            return fk_err_set(err, FK_EINVAL,
                              "job %" PRId64 " sets '%s'; local.* keys belong to the client's "
                              "own config, not to a job (refused)",
                              job, job_params->items[i].key);
    for (int i = 0; local && i < local->count; i++)
        if (!strncmp(local->items[i].key, "local.", 6) &&
            fk_params_set(job_params, local->items[i].key, local->items[i].value))
            return fk_err_set(err, FK_ENOMEM, "out of memory");
    return FK_OK;
}

fk__agent_job *fk__agent_job_context(fk_agent *a, int64_t job, const char *method,
                                     const char *config, fk_err *err)
{
    for (int i = 0; i < a->n_jobs; i++)
        if (a->jobs[i]->job == job)
            return a->jobs[i];
    if (a->n_jobs == FK__AGENT_MAX_JOBS) { /* forget the oldest job */
        fk__agent_job_free(a->jobs[0]);
        memmove(&a->jobs[0], &a->jobs[1], (FK__AGENT_MAX_JOBS - 1) * sizeof a->jobs[0]);
        a->n_jobs--;
    }
    fk__agent_job *j = calloc(1, sizeof *j);
    if (!j) {
        fk_err_set(err, FK_ENOMEM, "out of memory");
        return NULL;
    }
    fk_params_init(&j->params);
    j->job = job;
    j->config = strdup(config ? config : "");
    const fk_method *m = (a->cfg.find ? a->cfg.find : fk_method_find)(method, err);
    int rc = !j->config ? fk_err_set(err, FK_ENOMEM, "out of memory")
             : !m       ? FK_ENOTFOUND
                        : fk_params_parse_ini(&j->params, j->config, "job parameters", err);
    if (!rc)
        rc = fk_agent_local_params(&j->params, a->cfg.local, job, err);
    /* Our index is our place in the job's client list, read as the server reads it. */
    int index = -1, n = 0;
    if (!rc) {
        fk_jobconf conf;
        rc = fk_jobconf_parse(&conf, j->config, "job parameters", err);
        if (!rc) {
            index = fk_jobconf_client_index(&conf, a->client_id);
            n = conf.n_clients;
        }
        fk_jobconf_close(&conf);
    }
    if (!rc && index < 0)
        rc = fk_err_set(err, FK_ENOTFOUND, "job %" PRId64 " does not list this client ('%s')", job,
                        a->client_id);
    const char *dsname = rc ? NULL : fk_params_get(&j->params, "dataset");
    const fk_dataset *ds = NULL;
    if (!rc && !(ds = a->cfg.data(a->cfg.data_ud, dsname ? dsname : "", err)))
        rc = err->code ? err->code : FK_ENOTFOUND;
    uint64_t seed = 1;
    if (!rc)
        rc = fk_params_u64(&j->params, "seed", 1, &seed, err);
    if (!rc) {
        j->m = m;
        if ((rc = m->client_init(&j->cli, &j->params, ds, index, n, seed, err)))
            j->cli = NULL;
    }
    if (!rc)
        rc = fk_cstate_digest(m->name, j->config, j->digest, err);
    if (rc) {
        fk__agent_job_free(j);
        return NULL;
    }
    j->client = index;
    j->n_clients = n;
    if (a->cfg.state_dir && restore(a, j)) { /* a failed load may leave it half-written */
        j->m->client_close(j->cli);
        j->cli = NULL;
        if ((rc = m->client_init(&j->cli, &j->params, ds, index, n, seed, err))) {
            j->cli = NULL;
            fk__agent_job_free(j);
            return NULL;
        }
    }
    a->jobs[a->n_jobs++] = j;
    return j;
}

static int cmp_job(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* 1 when the agent holds the method state of job. */
static int held(const fk_agent *a, int64_t job)
{
    int have = 0;
    for (int k = 0; k < a->n_jobs; k++)
        have |= a->jobs[k]->job == job;
    return have;
}

/* The jobs with a state file (*ids malloc'd); 0, logged, when the state dir cannot be listed
 * (nothing is reloaded or removed then: the next list tries again). */
static int list_states(const fk_agent *a, int64_t **ids, int *n)
{
    fk_err err = {0};
    if (fk_cstate_list(a->cfg.state_dir, ids, n, &err)) {
        fk_log(FK_LOG_WARN, "client_state_unlisted", "error=\"%s\"", err.msg);
        return 0;
    }
    return 1;
}

/* After a restart (the first Join, once the client knows its identity): rebuild from the
 * state dir every job whose models answer predictions after it ended (kahm mode B), so
 * they are kept (forget_ended_jobs) and answer as before the restart. Oldest job first:
 * past FK__AGENT_MAX_JOBS the newest ones stay, as without a restart. A file without the job's
 * method and config (version 1) is left to the task that names its job. */
void fk__agent_reload_held(fk_agent *a)
{
    int64_t *ids;
    int n;
    fk_err err = {0};
    if (!list_states(a, &ids, &n))
        return;
    if (n > 1)
        qsort(ids, (size_t)n, sizeof *ids, cmp_job);
    for (int i = 0; i < n; i++) {
        int have = held(a, ids[i]);
        fk_cstate cs;
        fk_cstate_init(&cs);
        if (have || fk_cstate_read(a->cfg.state_dir, ids[i], &cs, &err) || !cs.method) {
            fk_cstate_close(&cs);
            continue; /* an unreadable file is discarded when its job's task comes */
        }
        fk_err ferr = {0};
        const fk_method *m = (a->cfg.find ? a->cfg.find : fk_method_find)(cs.method, &ferr);
        int serves = m && m->client_predict;
        char *method = cs.method, *config = cs.config;
        cs.method = cs.config = NULL;
        fk_cstate_close(&cs); /* job_context reads the file again: one copy at a time */
        if (serves) {
            fk__agent_job *j = fk__agent_job_context(a, ids[i], method, config, &err);
            if (j)
                fk_log(FK_LOG_INFO, "held_models_reloaded", "job=%" PRId64 " method=%s", ids[i],
                       method);
            else
                fk_log(FK_LOG_WARN, "held_models_not_reloaded", "job=%" PRId64 " error=\"%s\"",
                       ids[i], err.msg);
        }
        free(method);
        free(config);
    }
    free(ids);
}

static int listed(const fedkern_v1_PullTaskResponse *out, int64_t job)
{
    for (pb_size_t i = 0; i < out->running_jobs_count; i++)
        if (strtoll(out->running_jobs[i], NULL, 10) == job)
            return 1;
    return 0;
}

/* The server listed the running jobs that include us: the method state of every
 * other job (in memory and its file) is no longer needed. */
void fk__agent_forget_ended_jobs(fk_agent *a, const fedkern_v1_PullTaskResponse *out)
{
    int k = 0;
    for (int i = 0; i < a->n_jobs; i++) {
        fk__agent_job *j = a->jobs[i];
        /* A job whose models serve predictions after it ended (kahm mode B) is kept, in
         * memory and on disk, until FK__AGENT_MAX_JOBS newer jobs push it out (job_context). */
        if (listed(out, j->job) || (a->w.active && a->w.job == j->job) ||
            (j->m && j->m->client_predict) || (a->p.running && a->p.ctx == j)) {
            a->jobs[k++] = j;
            continue;
        }
        fk_log(FK_LOG_INFO, "job_forgotten",
               "job=%" PRId64 " reason=\"the server no longer runs it\"", j->job);
        fk__agent_job_free(j);
    }
    a->n_jobs = k;
    if (!a->cfg.state_dir)
        return;
    int64_t *ids;
    int n;
    fk_err err = {0};
    if (!list_states(a, &ids, &n))
        return;
    for (int i = 0; i < n; i++) {
        int kept = held(a, ids[i]);
        if (listed(out, ids[i]) || (a->w.active && a->w.job == ids[i]) || kept)
            continue;
        if (fk_cstate_remove(a->cfg.state_dir, ids[i], &err))
            fk_log(FK_LOG_WARN, "client_state_not_removed", "job=%" PRId64 " error=\"%s\"", ids[i],
                   err.msg);
        else
            fk_log(FK_LOG_INFO, "client_state_removed", "job=%" PRId64 " reason=\"job ended\"",
                   ids[i]);
    }
    free(ids);
}
