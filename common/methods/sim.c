#include "common/methods/sim.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include "common/methods/update_check.h"

enum { MAX_PHASES = 16 };
static const uint64_t PLAN_STREAM = 0x706c616e00000000ULL;
static const uint64_t DROP_STREAM = 0x64726f7000000000ULL;

void fk_sim_plan_rng(fk_rng *rng, uint64_t seed, int round)
{
    fk_rng_init(rng, seed, PLAN_STREAM + (uint64_t)round);
}

void fk_sim_drop_rng(fk_rng *rng, uint64_t seed)
{
    fk_rng_init(rng, seed, DROP_STREAM);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The round's quality as the server's engine keeps it: each field's mean over the latest phase
 * of the round that measured it (phase 0 starts the round afresh). */
static void summarise(fk_sim_round *r, int phase, const fk_update *ups, int n)
{
    r->participants = n;
    double *f[FK_REPORT_N_FIELDS] = {&r->loss, &r->accuracy, &r->error,      &r->misclust,
                                     &r->ari,  &r->rmse,     &r->model_error}; /* in order */
    for (int i = 0; i < FK_REPORT_N_FIELDS; i++) {
        double v = fk_report_mean(ups, n, fk_report_fields[i].offset);
        if (phase == 0 || !isnan(v))
            *f[i] = v;
    }
}

typedef struct sim {
    const fk_method *m;
    void *srv;
    void **cli;
    int n;
    fk_update *ups;
    int *chosen;
    fk_bundle task;
} sim;

static void sim_close(sim *s)
{
    if (s->cli)
        for (int i = 0; i < s->n; i++)
            if (s->cli[i])
                s->m->client_close(s->cli[i]);
    if (s->srv)
        s->m->server_close(s->srv);
    if (s->ups)
        for (int i = 0; i < s->n; i++)
            fk_bundle_close(&s->ups[i].msg);
    free(s->cli);
    free(s->ups);
    free(s->chosen);
    fk_bundle_close(&s->task);
}

FK_CHECKRETURN static int sim_open(sim *s, const fk_method *m, const fk_params *p, const fk_dataset *clients,
                    int n, uint64_t seed, fk_err *err)
{
    *s = (sim){.m = m, .n = n};
    fk_bundle_init(&s->task);
    s->cli = calloc((size_t)n, sizeof *s->cli);
    s->ups = calloc((size_t)n, sizeof *s->ups);
    s->chosen = calloc((size_t)n, sizeof *s->chosen);
    if (!s->cli || !s->ups || !s->chosen)
        return fk_err_set(err, FK_ENOMEM, "out of memory for %d simulated clients", n);
    for (int i = 0; i < n; i++)
        fk_bundle_init(&s->ups[i].msg);
    int rc = m->server_init(&s->srv, p, n, seed, err);
    if (rc)
        return rc;
    for (int i = 0; i < n; i++) {
        rc = m->client_init(&s->cli[i], p, &clients[i], i, n, seed, err);
        if (rc)
            return fk_err_prefix(err, rc, "client %d (%s): ", i, clients[i].name);
    }
    return FK_OK;
}

int fk_sim_close_phase(const fk_method *m, void *srv, int round, int phase, fk_update *ups,
                       const unsigned char *arrived, int n, double drop, fk_rng *drop_rng,
                       fk_sim_round *r, int *done, fk_err *err)
{
    int got = 0;
    for (int k = 0; k < n; k++) {
        fk_update *u = &ups[k];
        if (arrived && !arrived[k])
            continue;
        if (drop > 0 && fk_rng_uniform(drop_rng) < drop)
            continue;
        /* A refused update is a dropout, as in the daemon: it never reaches aggregate. A
         * check that ran out of memory refused nothing: the daemon answers it as its own
         * failure (engine.c, fk_engine_push_stage), and so does the simulation. */
        fk_err cerr = {0};
        int rc = fk_update_check_report(&u->report, u->client, &cerr);
        if (!rc && m->check_update)
            rc = m->check_update(srv, round, phase, u, &cerr);
        if (rc == FK_ENOMEM) {
            *err = cerr;
            return fk_err_prefix(err, rc, "client %d, round %d: checking its update: ", u->client,
                                 round);
        }
        if (rc) {
            r->refused++;
            continue;
        }
        r->bytes += 8 * fk_bundle_values(&u->msg);
        if (got != k) { /* keep the taken updates first, in client order */
            fk_update t = ups[got];
            ups[got] = *u;
            *u = t;
        }
        got++;
    }
    summarise(r, phase, ups, got);
    return fk_method_aggregate(m, srv, round, phase, ups, got, done, err);
}

/* One phase: tasks out, local steps (every update in ups[k], client order), then the phase's
 * close: lost updates dropped, refused ones counted, aggregate. */
FK_CHECKRETURN static int run_phase(sim *s, int round, int phase, int n_chosen, double drop, fk_rng *drop_rng,
                     fk_sim_round *r, int *done, fk_err *err)
{
    for (int k = 0; k < n_chosen; k++) {
        int c = s->chosen[k];
        fk_bundle_clear(&s->task);
        int rc = s->m->task(s->srv, round, phase, c, &s->task, err);
        if (rc)
            return rc;
        r->bytes += 8 * fk_bundle_values(&s->task);
        fk_update *u = &s->ups[k];
        fk_bundle_clear(&u->msg);
        fk_report_init(&u->report);
        u->client = c;
        rc = s->m->local_step(s->cli[c], &s->task, &u->msg, &u->report, err);
        if (rc)
            return fk_err_prefix(err, rc, "client %d, round %d: ", c, round);
    }
    return fk_sim_close_phase(s->m, s->srv, round, phase, s->ups, NULL, n_chosen, drop, drop_rng,
                              r, done, err);
}

/* Every client scores the final model on its own data. */
FK_CHECKRETURN static int evaluate_all(sim *s, const fk_bundle *model, fk_report *out, fk_err *err)
{
    if (!s->m->evaluate)
        return fk_err_set(err, FK_ESTATE, "method %s has no evaluate op", s->m->name);
    for (int c = 0; c < s->n; c++) {
        fk_report_init(&out[c]);
        int rc = s->m->evaluate(s->cli[c], model, &out[c], err);
        if (rc)
            return fk_err_prefix(err, rc, "client %d, final evaluation: ", c);
    }
    return FK_OK;
}

static int compare_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static fk_sim_driver sim_driver;

void fk_sim_set_driver(fk_sim_driver d)
{
    sim_driver = d;
}

static fk_sim_holds_fn sim_holds;

void fk_sim_set_holds(fk_sim_holds_fn h)
{
    sim_holds = h;
}

int fk_sim_holds(int client)
{
    return !sim_holds || sim_holds(client);
}

int fk_sim_want(int n, unsigned char **want, fk_err *err)
{
    *want = NULL;
    if (!sim_holds) /* one process: every client's data is made here */
        return FK_OK;
    unsigned char *w = malloc(n > 0 ? (size_t)n : 1);
    if (!w)
        return fk_err_set(err, FK_ENOMEM,
                          "out of memory for the list of this process's %d clients", n);
    for (int i = 0; i < n; i++)
        w[i] = (unsigned char)sim_holds(i);
    *want = w;
    return FK_OK;
}

void fk_sim_sort_plan(int *chosen, int n_chosen)
{
    qsort(chosen, (size_t)n_chosen, sizeof *chosen, compare_int);
}

int fk_sim_run(const fk_method *m, const fk_params *p, const fk_dataset *clients, int n_clients,
               const fk_sim_opts *o, fk_bundle *model, fk_sim_round *last, fk_err *err)
{
    if (n_clients <= 0)
        return fk_err_set(err, FK_EINVAL, "a simulation needs at least one client");
    if (o->rounds <= 0)
        return fk_err_set(err, FK_EINVAL, "rounds must be positive (got %d)", o->rounds);
    if (!(o->drop >= 0.0 && o->drop < 1.0))
        return fk_err_set(err, FK_EINVAL, "drop probability must be in [0, 1) (got %g)", o->drop);
    if (sim_driver) /* another transport (cli/sim_mpi.c): the same ops over processes */
        return sim_driver(m, p, clients, n_clients, o, model, last, err);
    sim s;
    int rc = sim_open(&s, m, p, clients, n_clients, o->seed, err);
    fk_rng drop_rng;
    fk_sim_drop_rng(&drop_rng, o->seed);
    for (int round = 1; rc == FK_OK && round <= o->rounds; round++) {
        fk_sim_round r = {.round = round};
        double t0 = now_seconds();
        fk_rng plan_rng;
        fk_sim_plan_rng(&plan_rng, o->seed, round);
        int n_chosen = 0;
        rc = m->plan(s.srv, round, &plan_rng, s.chosen, &n_chosen, err);
        if (rc)
            break;
        fk_sim_sort_plan(s.chosen, n_chosen);
        r.planned = n_chosen;
        int done = 0;
        for (int phase = 0; rc == FK_OK && !done; phase++) {
            if (phase == MAX_PHASES) {
                rc = fk_err_set(err, FK_ESTATE, "method %s did not finish round %d in %d phases",
                                m->name, round, MAX_PHASES);
                break;
            }
            rc = run_phase(&s, round, phase, n_chosen, o->drop, &drop_rng, &r, &done, err);
        }
        r.seconds = now_seconds() - t0;
        if (rc == FK_OK && o->progress)
            o->progress(&r, o->ctx);
        if (last)
            *last = r;
        if (rc == FK_OK && m->finished && m->finished(s.srv))
            break;
    }
    if (rc == FK_OK && model) {
        fk_bundle_init(model);
        rc = m->model(s.srv, model, err);
        if (rc == FK_OK && o->final_reports)
            rc = evaluate_all(&s, model, o->final_reports, err);
        if (rc != FK_OK) /* the caller closes the model only on success */
            fk_bundle_close(model);
    }
    sim_close(&s);
    return rc;
}
