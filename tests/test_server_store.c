#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "server/store.h"

typedef struct fixture {
    char dir[64];
    char path[128];
    fk_store *st;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/fk-store-XXXXXX");
    if (!f || !mkdtemp(f->dir))
        return -1;
    snprintf(f->path, sizeof f->path, "%s/state.db", f->dir);
    fk_err err;
    if (fk_store_open(&f->st, f->path, &err) != FK_OK)
        return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    fk_store_close(f->st);
    char p[160];
    const char *suffix[] = {"", "-wal", "-shm", ".run"};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s%s", f->path, suffix[i]);
        unlink(p);
    }
    rmdir(f->dir);
    free(f);
    return 0;
}

/* A job with round 1 attempt 0 and phase 0 open, planned clients 0..2. */
static int64_t make_job(fk_store *st)
{
    fk_err err;
    int64_t id = 0;
    assert_int_equal(fk_store_job_insert(st, "mean", "method = mean\n", 100.0, &id, &err), FK_OK);
    int planned[] = {0, 1, 2};
    assert_int_equal(fk_store_round_open(st, id, 1, 0, planned, 3, 2, 100.0, &err), FK_OK);
    assert_int_equal(fk_store_phase_open(st, id, 1, 0, 0, 160.0, &err), FK_OK);
    return id;
}

static fk_store_update update(int64_t job, int client, const char *idem, const void *blob,
                              size_t len)
{
    fk_store_update u = {.job = job, .round = 1, .attempt = 0, .phase = 0, .client = client,
                         .identity = "c", .idem = idem, .blob = blob, .len = len,
                         .received = 101.0};
    fk_report_init(&u.report);
    u.report.n_samples = 10 + client;
    return u;
}

static void schema_is_versioned_and_reopens(void **state)
{
    fixture *f = *state;
    fk_err err;
    int v = 0;
    assert_int_equal(fk_store_schema_version(f->st, &v, &err), FK_OK);
    assert_int_equal(v, FK_STORE_SCHEMA_VERSION);
    int64_t id = make_job(f->st);
    fk_store_close(f->st);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    fk_store_job j;
    assert_int_equal(fk_store_job_get(f->st, id, &j, &err), FK_OK);
    assert_string_equal(j.method, "mean");
    assert_string_equal(j.config, "method = mean\n");
    fk_store_job_free(&j);

    /* A database from a newer server is refused, not downgraded. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "UPDATE schema_version SET version = 99", 0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(db);
    fk_store *other = NULL;
    assert_int_equal(fk_store_open(&other, f->path, &err), FK_EFORMAT);
    assert_null(other);
    assert_non_null(strstr(err.msg, "newer"));
}

/* A database written by a server of schema version 1 (no quality columns, no roster) opens,
 * migrates to the current version keeping its rounds, and the new metrics read as not measured until written. */
static void version_1_database_migrates(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st); /* with round 1 open */
    fk_store_round r = {.job = id, .round = 1, .attempt = 0, .closed = 1, .participants = 2,
                        .loss = 0.5, .accuracy = 0.75, .error = NAN, .misclust = 0.1,
                        .ari = 0.8, .rmse = NAN};
    assert_int_equal(fk_store_round_close(f->st, &r, &err), FK_OK);
    fk_store_close(f->st);
    f->st = NULL;
    sqlite3 *db; /* back to what version 1 wrote: no quality columns */
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    const char *down = "DROP INDEX updates_run; DROP INDEX checkpoints_run; DROP INDEX models_run;"
                       "DROP TABLE meta; DROP TABLE update_reports;"
                       "ALTER TABLE updates DROP COLUMN run;"
                       "ALTER TABLE updates DROP COLUMN pruned; ALTER TABLE checkpoints DROP COLUMN run;"
                       "ALTER TABLE models DROP COLUMN run;"
                       "ALTER TABLE rounds DROP COLUMN misclust; ALTER TABLE rounds DROP COLUMN ari;"
                       "ALTER TABLE rounds DROP COLUMN rmse; ALTER TABLE updates DROP COLUMN misclust;"
                       "ALTER TABLE updates DROP COLUMN ari; ALTER TABLE updates DROP COLUMN rmse;"
                       "ALTER TABLE rounds DROP COLUMN model_error;"
                       "ALTER TABLE updates DROP COLUMN model_error;"
                       "DROP TABLE client_datasets; DROP TABLE client_holdings;"
                       "ALTER TABLE updates DROP COLUMN sha256;"
                       "ALTER TABLE checkpoints DROP COLUMN sha256;"
                       "ALTER TABLE models DROP COLUMN sha256;"
                       "UPDATE schema_version SET version = 1;";
    assert_int_equal(sqlite3_exec(db, down, 0, 0, 0), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    int v = 0;
    assert_int_equal(fk_store_schema_version(f->st, &v, &err), FK_OK);
    assert_int_equal(v, FK_STORE_SCHEMA_VERSION);
    fk_store_round got;
    assert_int_equal(fk_store_round_get(f->st, id, 1, 0, &got, &err), FK_OK);
    assert_true(got.loss == 0.5 && got.accuracy == 0.75);
    assert_true(isnan(got.misclust) && isnan(got.ari) && isnan(got.rmse) &&
                isnan(got.model_error));
    fk_store_round_free(&got);
    fk_roster *ro; /* an empty roster, which joins fill */
    assert_int_equal(fk_roster_new(&ro), FK_OK);
    assert_int_equal(fk_store_roster_load(f->st, ro, &err), FK_OK);
    assert_false(fk_roster_seen(ro, "c0"));
    assert_int_equal(fk_store_roster_put(f->st, "c0", 0, NULL, 0, &err), FK_OK);
    fk_roster_free(ro);
    /* and the migrated database stores the new columns */
    assert_int_equal(fk_store_round_close(f->st, &r, &err), FK_OK);
    assert_int_equal(fk_store_round_get(f->st, id, 1, 0, &got, &err), FK_OK);
    assert_true(got.misclust == 0.1 && got.ari == 0.8 && isnan(got.rmse) && isnan(got.error));
    fk_store_round_free(&got);
}

static int roster_check(const fk_roster *r, const char *text, fk_err *err)
{
    fk_jobconf c;
    fk_err perr;
    assert_int_equal(fk_jobconf_parse(&c, text, "job", &perr), FK_OK);
    int rc = fk_roster_check(r, &c, NULL, NULL, err);
    fk_jobconf_close(&c);
    return rc;
}

/* The roster of advertised data sets survives a reopen (a server restart), replaces a
 * client's list at its next Join, keeps "unknown" (joined without a list) apart from "holds
 * nothing". */
static void roster_persists(void **state)
{
    fixture *f = *state;
    fk_err err;
    fk_roster_set a[2] = {{.name = "pendigits", .rows = 700, .cols = 16, .classes = 10},
                          {.name = "office", .rows = 123, .cols = 800, .classes = 10}};
    fk_roster_set b = {.name = "pendigits", .rows = 650, .cols = 12, .classes = 10};
    assert_int_equal(fk_store_roster_put(f->st, "c0", 1, a, 2, &err), FK_OK);
    assert_int_equal(fk_store_roster_put(f->st, "c1", 1, &b, 1, &err), FK_OK);
    assert_int_equal(fk_store_roster_put(f->st, "c2", 1, NULL, 0, &err), FK_OK); /* holds none */
    assert_int_equal(fk_store_roster_put(f->st, "c3", 1, a, 1, &err), FK_OK);
    assert_int_equal(fk_store_roster_put(f->st, "c3", 0, NULL, 0, &err), FK_OK); /* old client */
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK); /* inside a batch too */
    assert_int_equal(fk_store_roster_put(f->st, "c4", 1, &a[1], 1, &err), FK_OK);
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    fk_store_close(f->st);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);

    fk_roster *r;
    assert_int_equal(fk_roster_new(&r), FK_OK);
    assert_int_equal(fk_store_roster_load(f->st, r, &err), FK_OK);
    for (int k = 0; k < 5; k++) {
        char id[4] = {'c', (char)('0' + k), 0};
        assert_true(fk_roster_seen(r, id));
    }
    assert_false(fk_roster_seen(r, "c5"));
    /* as stored, so a rejoin with the same list is not written again */
    assert_true(fk_roster_same(r, "c0", 1, a, 2) && fk_roster_same(r, "c1", 1, &b, 1));
    assert_true(fk_roster_same(r, "c2", 1, NULL, 0) && fk_roster_same(r, "c3", 0, NULL, 0));
    assert_false(fk_roster_same(r, "c0", 1, a, 1) || fk_roster_same(r, "c1", 1, a, 1));
    assert_false(fk_roster_same(r, "c2", 0, NULL, 0) || fk_roster_same(r, "c5", 0, NULL, 0));
    /* c0 and c1 hold pendigits but with 16 against 12 columns; c2 holds nothing; c3 is
     * unknown (not checked); c5 never joined */
    assert_int_equal(roster_check(r, "method = m\ndataset = pendigits\nclients = c0, c1, c2, c3, c5\n",
                                  &err),
                     FK_EINVAL);
    print_message("after reopen: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "c2"));
    assert_non_null(strstr(err.msg, "c5"));
    assert_non_null(strstr(err.msg, "16"));
    assert_null(strstr(err.msg, "c3"));
    /* office: c0 and c4 agree */
    assert_int_equal(roster_check(r, "method = m\ndataset = office\nclients = c0, c4\n", &err),
                     FK_OK);
    fk_roster_free(r);

    /* the next Join replaces the list */
    assert_int_equal(fk_store_roster_put(f->st, "c0", 1, &a[1], 1, &err), FK_OK);
    assert_int_equal(fk_roster_new(&r), FK_OK);
    assert_int_equal(fk_store_roster_load(f->st, r, &err), FK_OK);
    assert_int_equal(roster_check(r, "method = m\ndataset = pendigits\nclients = c0\n", &err),
                     FK_EINVAL);
    assert_int_equal(roster_check(r, "method = m\ndataset = office\nclients = c0\n", &err),
                     FK_OK);
    fk_roster_free(r);
}

static void jobs_track_state_and_position(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t a = make_job(f->st), b = make_job(f->st);
    assert_true(b > a);
    assert_int_equal(fk_store_job_set_position(f->st, a, 3, 1, 2, 120.0, &err), FK_OK);
    assert_int_equal(fk_store_job_set_state(f->st, b, FK_JOB_FAILED, "quorum missed", 130.0, &err),
                     FK_OK);
    fk_store_job j;
    assert_int_equal(fk_store_job_get(f->st, a, &j, &err), FK_OK);
    assert_int_equal(j.round, 3);
    assert_int_equal(j.attempt, 1);
    assert_int_equal(j.phase, 2);
    assert_int_equal(j.state, FK_JOB_RUNNING);
    fk_store_job_free(&j);
    assert_int_equal(fk_store_job_get(f->st, b, &j, &err), FK_OK);
    assert_int_equal(j.state, FK_JOB_FAILED);
    assert_string_equal(j.failure, "quorum missed");
    fk_store_job_free(&j);

    int64_t *ids;
    int n;
    assert_int_equal(fk_store_job_ids(f->st, FK_JOB_RUNNING, &ids, &n, &err), FK_OK);
    assert_int_equal(n, 1);
    assert_true(ids[0] == a);
    free(ids);
    assert_int_equal(fk_store_job_ids(f->st, -1, &ids, &n, &err), FK_OK);
    assert_int_equal(n, 2);
    free(ids);
    assert_int_equal(fk_store_job_get(f->st, 999, &j, &err), FK_ENOTFOUND);
    assert_string_equal(fk_job_state_name(FK_JOB_CANCELLED), "cancelled");
}

static void rounds_and_phases_round_trip(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    fk_store_round r;
    assert_int_equal(fk_store_round_get(f->st, id, 1, 0, &r, &err), FK_OK);
    assert_int_equal(r.n_planned, 3);
    assert_int_equal(r.planned[2], 2);
    assert_int_equal(r.quorum, 2);
    assert_int_equal(r.closed, 0);
    assert_true(isnan(r.loss));
    r.closed = 1;
    r.participants = 2;
    r.dropouts = 1;
    snprintf(r.dropped, sizeof r.dropped, "1");
    r.agg_seconds = 0.25;
    r.accuracy = 0.75;
    assert_int_equal(fk_store_round_close(f->st, &r, &err), FK_OK);
    fk_store_round_free(&r);

    int planned[] = {4};
    assert_int_equal(fk_store_round_open(f->st, id, 2, 0, planned, 1, 1, 200.0, &err), FK_OK);
    /* Opening the same attempt twice is a conflict. */
    assert_int_equal(fk_store_round_open(f->st, id, 2, 0, planned, 1, 1, 200.0, &err), FK_ESTATE);

    fk_store_round *rows;
    int n;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 2);
    assert_int_equal(rows[0].dropouts, 1);
    assert_string_equal(rows[0].dropped, "1");
    assert_true(rows[0].accuracy == 0.75);
    assert_true(isnan(rows[0].loss));
    assert_int_equal(rows[1].n_planned, 1);
    assert_int_equal(rows[1].planned[0], 4);
    for (int i = 0; i < n; i++)
        fk_store_round_free(&rows[i]);
    free(rows);

    double deadline;
    int closed;
    assert_int_equal(fk_store_phase_get(f->st, id, 1, 0, 0, &deadline, &closed, &err), FK_OK);
    assert_true(deadline == 160.0);
    assert_int_equal(closed, 0);
    assert_int_equal(fk_store_phase_close(f->st, id, 1, 0, 0, 2, &err), FK_OK);
    assert_int_equal(fk_store_phase_get(f->st, id, 1, 0, 0, &deadline, &closed, &err), FK_OK);
    assert_int_equal(closed, 1);
    assert_int_equal(fk_store_phase_get(f->st, id, 1, 0, 5, &deadline, &closed, &err),
                     FK_ENOTFOUND);
    assert_int_equal(fk_store_round_get(f->st, id, 7, 0, &r, &err), FK_ENOTFOUND);
}

typedef struct seen {
    int clients[8];
    double weights[8];
    char first[8];
    int n;
} seen;

static int collect(void *ctx, const fk_store_update *u, fk_err *err)
{
    (void)err;
    seen *s = ctx;
    s->clients[s->n] = u->client;
    s->weights[s->n] = u->report.n_samples;
    s->first[s->n] = u->len ? ((const char *)u->blob)[0] : 0;
    s->n++;
    return FK_OK;
}

static void updates_are_idempotent(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    int dup = -1;
    fk_store_update u2 = update(id, 2, "job1-r1-p0-c2", "B", 1);
    fk_store_update u0 = update(id, 0, "job1-r1-p0-c0", "A", 1);
    assert_int_equal(fk_store_update_put(f->st, &u2, &dup, &err), FK_OK);
    assert_int_equal(dup, 0);
    assert_int_equal(fk_store_update_put(f->st, &u0, &dup, &err), FK_OK);
    /* The resend is acknowledged but not stored again. */
    assert_int_equal(fk_store_update_put(f->st, &u2, &dup, &err), FK_OK);
    assert_int_equal(dup, 1);
    int n;
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 2);
    /* Another update for an answered slot conflicts. */
    fk_store_update again = update(id, 2, "other-id", "C", 1);
    assert_int_equal(fk_store_update_put(f->st, &again, &dup, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "already sent"));
    /* Another sender cannot claim an id that is already taken. */
    fk_store_update thief = update(id, 1, "job1-r1-p0-c2", "X", 1);
    thief.identity = "mallory";
    assert_int_equal(fk_store_update_put(f->st, &thief, &dup, &err), FK_ESTATE);
    assert_int_equal(dup, 0);
    int known = -1;
    assert_int_equal(fk_store_update_known(f->st, "job1-r1-p0-c2", "mallory", &known, &err), FK_OK);
    assert_int_equal(known, 0);
    assert_int_equal(fk_store_update_known(f->st, "job1-r1-p0-c2", "c", &known, &err), FK_OK);
    assert_int_equal(known, 1);
    /* An update for a phase that was never opened is refused by the schema. */
    fk_store_update stray = update(id, 1, "stray", "D", 1);
    stray.phase = 3;
    assert_int_equal(fk_store_update_put(f->st, &stray, &dup, &err), FK_ESTATE);

    seen s = {0};
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, collect, &s, &err), FK_OK);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.clients[0], 0);
    assert_int_equal(s.clients[1], 2);
    assert_true(s.weights[0] == 10.0 && s.weights[1] == 12.0);
    assert_int_equal(s.first[0], 'A');
    assert_int_equal(s.first[1], 'B');
}

/* Callback that reads the same phase again while the outer read is running:
 * the cached statement is busy, so the store must use a private copy. */
typedef struct nested {
    fk_store *st;
    int64_t job;
    int outer, inner;
} nested;

static int count_inner(void *ctx, const fk_store_update *u, fk_err *err)
{
    (void)u;
    (void)err;
    ((nested *)ctx)->inner++;
    return FK_OK;
}

static int read_again(void *ctx, const fk_store_update *u, fk_err *err)
{
    nested *n = ctx;
    n->outer++;
    assert_int_equal(u->len, 1);
    return fk_store_update_each(n->st, n->job, 1, 0, 0, count_inner, n, err);
}

/* Statements are prepared once and reused: repeated, nested and failing
 * calls give the same answers as fresh statements would. */
static void cached_statements_are_reused_safely(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    int dup;
    for (int round = 0; round < 3; round++) { /* the same INSERT many times, new bindings */
        for (int c = 0; c < 3; c++) {
            char idem[32];
            snprintf(idem, sizeof idem, "i-%d-%d", round, c);
            fk_store_update u = update(id, c, idem, round ? "Z" : "A", 1);
            int rc = fk_store_update_put(f->st, &u, &dup, &err);
            /* round 0 stores, later rounds conflict with the stored slot */
            assert_int_equal(rc, round ? FK_ESTATE : FK_OK);
        }
    }
    int n = -1;
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 3);
    nested ns = {.st = f->st, .job = id};
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, read_again, &ns, &err), FK_OK);
    assert_int_equal(ns.outer, 3);
    assert_int_equal(ns.inner, 9);
    /* A lookup that found nothing leaves no stale row behind for the next call. */
    double when;
    assert_int_equal(fk_store_client_last_seen(f->st, "nobody", &when, &err), FK_ENOTFOUND);
    assert_int_equal(fk_store_client_seen(f->st, "c0", 7.0, &err), FK_OK);
    assert_int_equal(fk_store_client_last_seen(f->st, "c0", &when, &err), FK_OK);
    assert_true(when == 7.0);
    /* A cached read keeps no old snapshot: it sees what another connection committed since. */
    fk_store *other;
    assert_int_equal(fk_store_open(&other, f->path, &err), FK_OK);
    assert_int_equal(fk_store_client_seen(other, "c1", 8.0, &err), FK_OK);
    fk_store_close(other);
    assert_int_equal(fk_store_client_last_seen(f->st, "c1", &when, &err), FK_OK);
    assert_true(when == 8.0);
}

/* The test hook: a commit that fails rolls the whole transaction back. */
static void failed_commit_stores_nothing(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    int dup;
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    fk_store_update u0 = update(id, 0, "batch-c0", "A", 1);
    fk_store_update u1 = update(id, 1, "batch-c1", "B", 1);
    assert_int_equal(fk_store_update_put(f->st, &u0, &dup, &err), FK_OK);
    assert_int_equal(fk_store_update_put(f->st, &u1, &dup, &err), FK_OK);
    assert_int_equal(fk_store_update_put(f->st, &u1, &dup, &err), FK_OK);
    assert_int_equal(dup, 1); /* a resend inside the open transaction */
    fk_store_test_fail_commits(f->st, 0, 1);
    assert_int_equal(fk_store_commit(f->st, &err), FK_EIO);
    int n = -1;
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 0);
    /* The next transaction commits normally. */
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    assert_int_equal(fk_store_update_put(f->st, &u0, &dup, &err), FK_OK);
    assert_int_equal(dup, 0);
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 1);
}

static void blobs_per_round(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    assert_int_equal(fk_store_checkpoint_put(f->st, id, 0, "zero", 4, &err), FK_OK);
    assert_int_equal(fk_store_checkpoint_put(f->st, id, 1, "one!", 4, &err), FK_OK);
    assert_int_equal(fk_store_model_put(f->st, id, 1, "m1", 2, &err), FK_OK);
    assert_int_equal(fk_store_model_put(f->st, id, 2, "m22", 3, &err), FK_OK);
    void *b;
    size_t len;
    int round;
    assert_int_equal(fk_store_checkpoint_get(f->st, id, 0, &b, &len, &err), FK_OK);
    assert_int_equal(len, 4);
    assert_memory_equal(b, "zero", 4);
    free(b);
    assert_int_equal(fk_store_model_get(f->st, id, -1, &b, &len, &round, &err), FK_OK);
    assert_int_equal(round, 2);
    assert_memory_equal(b, "m22", 3);
    free(b);
    assert_int_equal(fk_store_model_get(f->st, id, 1, &b, &len, &round, &err), FK_OK);
    assert_int_equal(len, 2);
    free(b);
    assert_int_equal(fk_store_checkpoint_get(f->st, id, 5, &b, &len, &err), FK_ENOTFOUND);
    assert_null(b);
}

/* Flip one byte of the only occurrence of `marker` in the database file (closed, so the WAL
 * was checkpointed into it): what a bad disk sector or a stray edit does to a stored blob. */
static void flip_in_file(const char *path, const char *marker)
{
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    assert_true(n > 0);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    rewind(fp);
    assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
    size_t m = strlen(marker);
    long at = -1;
    for (long i = 0; i + (long)m <= n; i++)
        if (!memcmp(buf + i, marker, m)) {
            assert_int_equal(at, -1); /* one occurrence */
            at = i;
        }
    assert_true(at >= 0);
    assert_int_equal(fseek(fp, at + (long)m / 2, SEEK_SET), 0);
    assert_int_equal(fputc(buf[at + (long)m / 2] ^ 0x20, fp), buf[at + (long)m / 2] ^ 0x20);
    fclose(fp);
    free(buf);
}

static int count_updates(void *ctx, const fk_store_update *u, fk_err *err)
{
    (void)u;
    (void)err;
    (*(int *)ctx)++;
    return FK_OK;
}

/* Issue 33 row 1: one flipped byte inside a stored update, checkpoint or model passes
 * SQLite's quick_check (the pages are sound) but not the SHA-256 stored beside the blob: every
 * read is an FK_EFORMAT naming the job and the restore steps, never other bytes. */
static void flipped_bytes_are_refused(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    const char *up = "UPDATE-PAYLOAD-0123456789", *ck = "CHECKPOINT-0123456789",
               *mo = "MODEL-BYTES-0123456789";
    fk_store_update u = update(id, 1, "job1-r1-p0-c1", up, strlen(up));
    int dup;
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(fk_store_checkpoint_put(f->st, id, 1, ck, strlen(ck), &err), FK_OK);
    assert_int_equal(fk_store_model_put(f->st, id, 1, mo, strlen(mo), &err), FK_OK);
    int n = 0;
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, count_updates, &n, &err), FK_OK);
    assert_int_equal(n, 1);
    fk_store_close(f->st);
    f->st = NULL;
    flip_in_file(f->path, up);
    flip_in_file(f->path, ck);
    flip_in_file(f->path, mo);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK); /* quick_check passes */
    assert_false(fk_store_damaged(f->st));
    n = 0;
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, count_updates, &n, &err),
                     FK_EFORMAT);
    assert_int_equal(n, 0);
    print_message("update: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "job 1 round 1 attempt 0 phase 0: the update of client 1"));
    assert_non_null(strstr(err.msg, "SHA-256"));
    assert_non_null(strstr(err.msg, "restore the latest backup"));
    assert_true(fk_store_damaged(f->st));
    void *b = (void *)1;
    size_t len;
    int round;
    assert_int_equal(fk_store_checkpoint_get(f->st, id, 1, &b, &len, &err), FK_EFORMAT);
    assert_null(b);
    assert_non_null(strstr(err.msg, "job 1: the checkpoint of round 1"));
    assert_int_equal(fk_store_model_get(f->st, id, -1, &b, &len, &round, &err), FK_EFORMAT);
    assert_null(b);
    print_message("model: %s\n", err.msg);
    assert_non_null(strstr(err.msg, "job 1: the model of round 1"));
    assert_non_null(strstr(err.msg, "restore the latest backup"));
    /* rows written after the damage read back */
    assert_int_equal(fk_store_model_put(f->st, id, 2, "m2", 2, &err), FK_OK);
    assert_int_equal(fk_store_model_get(f->st, id, -1, &b, &len, &round, &err), FK_OK);
    assert_int_equal(round, 2);
    free(b);
}

/* A state file of schema version 3 (blobs without sums) migrates: its rows are hashed as they
 * are, read back unchanged, and a byte flipped after the migration is caught. */
static void version_3_blobs_get_sums(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    const char *up = "OLD-UPDATE-0123456789", *mo = "OLD-MODEL-0123456789";
    fk_store_update u = update(id, 0, "job1-r1-p0-c0", up, strlen(up));
    int dup;
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(fk_store_model_put(f->st, id, 1, mo, strlen(mo), &err), FK_OK);
    fk_store_close(f->st);
    f->st = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP INDEX updates_run; DROP INDEX checkpoints_run; DROP INDEX models_run;"
                                  "DROP TABLE meta; DROP TABLE update_reports;"
                       "ALTER TABLE updates DROP COLUMN run;"
                                  "ALTER TABLE updates DROP COLUMN pruned; ALTER TABLE checkpoints DROP COLUMN run;"
                                  "ALTER TABLE models DROP COLUMN run;"
                                  "ALTER TABLE updates DROP COLUMN sha256;"
                                  "ALTER TABLE checkpoints DROP COLUMN sha256;"
                                  "ALTER TABLE models DROP COLUMN sha256;"
                                  "ALTER TABLE updates DROP COLUMN model_error;"
                                  "ALTER TABLE rounds DROP COLUMN model_error;"
                                  "UPDATE schema_version SET version = 3;",
                                  0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    int v = 0;
    assert_int_equal(fk_store_schema_version(f->st, &v, &err), FK_OK);
    assert_int_equal(v, FK_STORE_SCHEMA_VERSION);
    int n = 0;
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, count_updates, &n, &err), FK_OK);
    assert_int_equal(n, 1);
    void *b;
    size_t len;
    assert_int_equal(fk_store_model_get(f->st, id, 1, &b, &len, NULL, &err), FK_OK);
    assert_memory_equal(b, mo, strlen(mo));
    free(b);
    fk_store_close(f->st);
    f->st = NULL;
    flip_in_file(f->path, mo);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    assert_int_equal(fk_store_model_get(f->st, id, 1, &b, &len, NULL, &err), FK_EFORMAT);
}

/* Issue 33 row 9: the same update_id with other bytes is told apart from a resend. */

/* Flip one byte in the middle of the first occurrence of the m bytes at marker. */
static void flip_in_file_n(const char *path, const char *marker, size_t m)
{
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    assert_int_equal(fseek(fp, 0, SEEK_END), 0);
    long n = ftell(fp);
    char *buf = malloc((size_t)n);
    assert_non_null(buf);
    rewind(fp);
    assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
    long at = -1;
    for (long i = 0; at < 0 && i + (long)m <= n; i++)
        if (!memcmp(buf + i, marker, m))
            at = i;
    assert_true(at >= 0);
    assert_int_equal(fseek(fp, at + (long)m / 2, SEEK_SET), 0);
    assert_int_equal(fputc(buf[at + (long)m / 2] ^ 0x20, fp), buf[at + (long)m / 2] ^ 0x20);
    fclose(fp);
    free(buf);
}

/* ------------------------------------------------------- retention (issue 35) */

/* One round of job `id` as the engine writes it: round and phase open, n updates of `len`
 * bytes, then the close with checkpoint and model and the retention, in one transaction. */
static void engine_round(fk_store *st, int64_t id, int round, int n, size_t len, double loss,
                         int last, const fk_method *m)
{
    fk_err err;
    int planned[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    char *blob = malloc(len);
    assert_non_null(blob);
    memset(blob, 'a' + round % 26, len);
    assert_int_equal(fk_store_begin(st, &err), FK_OK);
    assert_int_equal(fk_store_round_open(st, id, round, 0, planned, n, n, 100.0, &err), FK_OK);
    assert_int_equal(fk_store_phase_open(st, id, round, 0, 0, 160.0, &err), FK_OK);
    for (int c = 0; c < n; c++) {
        char idem[48];
        snprintf(idem, sizeof idem, "j%lld-r%d-c%d", (long long)id, round, c);
        fk_store_update u = update(id, c, idem, blob, len);
        u.round = round;
        u.report.loss = loss + c;
        int dup;
        assert_int_equal(fk_store_update_put(st, &u, &dup, &err), FK_OK);
    }
    assert_int_equal(fk_store_commit(st, &err), FK_OK);
    fk_store_round r = {.job = id, .round = round, .closed = 1, .participants = n,
                        .loss = loss, .accuracy = NAN, .error = NAN, .misclust = NAN,
                        .ari = NAN, .rmse = NAN, .model_error = NAN};
    assert_int_equal(fk_store_begin_relaxed(st, &err), FK_OK);
    assert_int_equal(fk_store_phase_close(st, id, round, 0, 0, n, &err), FK_OK);
    assert_int_equal(fk_store_round_close(st, &r, &err), FK_OK);
    assert_int_equal(fk_store_checkpoint_put(st, id, round, blob, len, &err), FK_OK);
    assert_int_equal(fk_store_model_put(st, id, round, blob, len / 2, &err), FK_OK);
    assert_int_equal(fk_store_retain(st, id, round, last, m, &err), FK_OK);
    if (last)
        assert_int_equal(fk_store_job_set_state(st, id, FK_JOB_DONE, NULL, 200.0, &err), FK_OK);
    assert_int_equal(fk_store_commit(st, &err), FK_OK);
    free(blob);
}

typedef struct seen_updates {
    int n, pruned;
    double loss0;
} seen_updates;

static int count_update(void *ctx, const fk_store_update *u, fk_err *err)
{
    (void)err;
    seen_updates *s = ctx;
    if (s->n++ == 0)
        s->loss0 = u->report.loss;
    s->pruned += u->pruned;
    if (u->pruned) {
        assert_null(u->blob);
        assert_int_equal(u->len, 0);
    }
    return FK_OK;
}

static int has_checkpoint(fk_store *st, int64_t id, int round)
{
    void *b = NULL;
    size_t len;
    fk_err err;
    int rc = fk_store_checkpoint_get(st, id, round, &b, &len, &err);
    free(b);
    return rc == FK_OK;
}

static int has_model(fk_store *st, int64_t id, int round)
{
    void *b = NULL;
    size_t len;
    int got;
    fk_err err;
    int rc = fk_store_model_get(st, id, round, &b, &len, &got, &err);
    free(b);
    return rc == FK_OK;
}

/* The default retention: update bytes go with their round's close (the last closed round
 * keeps its rows and reports without bytes, the earlier ones no rows), the 2 newest
 * checkpoints and the latest model stay; --audit keeps everything. */
static void retention_prunes_closed_rounds(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = 0;
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &id, &err), FK_OK);
    assert_int_equal(fk_store_checkpoint_put(f->st, id, 0, "init", 4, &err), FK_OK);
    for (int r = 1; r <= 5; r++) {
        engine_round(f->st, id, r, 3, 3000, 1.0 / r, 0, NULL);
        /* the open round's resume needs the checkpoint of the round before: always there */
        assert_true(has_checkpoint(f->st, id, r));
        assert_true(r < 2 || has_checkpoint(f->st, id, r - 1));
    }
    for (int r = 0; r <= 3; r++)
        assert_false(has_checkpoint(f->st, id, r));
    assert_true(has_model(f->st, id, 5));
    assert_false(has_model(f->st, id, 4));
    seen_updates s = {0};
    assert_int_equal(fk_store_update_each(f->st, id, 5, 0, 0, count_update, &s, &err), FK_OK);
    assert_int_equal(s.n, 3); /* the last closed round of a running job: whole */
    assert_int_equal(s.pruned, 0);
    s = (seen_updates){0};
    assert_int_equal(fk_store_update_each(f->st, id, 4, 0, 0, count_update, &s, &err), FK_OK);
    assert_int_equal(s.n, 0);
    fk_store_usage u;
    assert_int_equal(fk_store_usage_get(f->st, &u, &err), FK_OK);
    assert_int_equal(u.update_bytes, 3 * 3000);
    assert_int_equal(u.checkpoints, 2);
    assert_int_equal(u.models, 1);
    /* the job ends (cancelled: the engine's retain_ended): its updates go, the clients'
     * reports of every round stay */
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    assert_int_equal(fk_store_retain(f->st, id, 5, 1, NULL, &err), FK_OK);
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    s = (seen_updates){0};
    assert_int_equal(fk_store_update_each(f->st, id, 5, 0, 0, count_update, &s, &err), FK_OK);
    assert_int_equal(s.n, 0);
    for (int r = 1; r <= 5; r++) {
        s = (seen_updates){0};
        assert_int_equal(fk_store_report_each(f->st, id, r, 0, 0, count_update, &s, &err),
                         FK_OK);
        assert_int_equal(s.n, 3);
        assert_int_equal(s.pruned, 3);
        assert_true(s.loss0 == 1.0 / r);
    }
    assert_int_equal(fk_store_usage_get(f->st, &u, &err), FK_OK);
    assert_int_equal(u.update_bytes, 0);
    /* round metrics stay for every round */
    fk_store_round *rows;
    int n;
    assert_int_equal(fk_store_round_list(f->st, id, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 5);
    for (int i = 0; i < n; i++)
        fk_store_round_free(&rows[i]);
    free(rows);

    /* audit: nothing goes */
    fk_store_retention audit = {.keep_checkpoints = 0, .keep_updates = 1, .keep_models = 1};
    fk_store_set_retention(f->st, &audit);
    int64_t id2 = 0;
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &id2, &err),
                     FK_OK);
    for (int r = 1; r <= 4; r++)
        engine_round(f->st, id2, r, 2, 1000, 1.0, r == 4, NULL);
    for (int r = 1; r <= 4; r++) {
        assert_true(has_checkpoint(f->st, id2, r));
        assert_true(has_model(f->st, id2, r));
        s = (seen_updates){0};
        assert_int_equal(fk_store_update_each(f->st, id2, r, 0, 0, count_update, &s, &err),
                         FK_OK);
        assert_int_equal(s.n, 2);
        assert_int_equal(s.pruned, 0);
    }
}

/* `job result --selected` still finds its model: retention keeps the round the job type's
 * criterion picks, and while the job runs the select_lag newest (not scored yet). */
static void retention_keeps_the_selected_model(void **state)
{
    fixture *f = *state;
    fk_err err;
    static const fk_method sel = {.name = "sel", .select_by = "loss", .select_lag = 1};
    int64_t id = 0;
    assert_int_equal(fk_store_job_insert(f->st, "sel", "method = sel\n", 1.0, &id, &err), FK_OK);
    /* round r's loss scores the model of round r - 1: the best (0.1) is measured in round 3,
     * so round 2's model is the selected one */
    const double loss[] = {0, 0.9, 0.5, 0.1, 0.7, 0.8, 0.6};
    for (int r = 1; r <= 6; r++) {
        engine_round(f->st, id, r, 2, 500, loss[r], r == 6, &sel);
        int want = 0;
        double v;
        assert_int_equal(fk_store_selected_round(f->st, id, &sel, &want, &v, &err), FK_OK);
        if (want)
            assert_true(has_model(f->st, id, want));
        assert_true(has_model(f->st, id, r));
        if (r < 6) /* running: the newest may still be picked */
            assert_true(r < 2 || has_model(f->st, id, r - 1));
    }
    int want = 0;
    assert_int_equal(fk_store_selected_round(f->st, id, &sel, &want, NULL, &err), FK_OK);
    assert_int_equal(want, 2);
    fk_store_usage u;
    assert_int_equal(fk_store_usage_get(f->st, &u, &err), FK_OK);
    assert_int_equal(u.models, 2); /* the selected and the last */
}

/* `fedkern job delete`: a running job is refused, a finished one goes with every row stored
 * for it, durably (a new connection no longer sees it). */
static void delete_removes_a_finished_job(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t keep = 0, gone = 0;
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &keep, &err),
                     FK_OK);
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &gone, &err),
                     FK_OK);
    fk_store_retention audit = {.keep_updates = 1, .keep_models = 1};
    fk_store_set_retention(f->st, &audit);
    for (int r = 1; r <= 3; r++) {
        engine_round(f->st, keep, r, 2, 800, 1.0, r == 3, NULL);
        engine_round(f->st, gone, r, 2, 800, 1.0, 0, NULL);
    }
    assert_int_equal(fk_store_job_delete(f->st, gone, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "cancel it first"));
    assert_int_equal(fk_store_job_set_state(f->st, gone, FK_JOB_CANCELLED, "by test", 2.0, &err),
                     FK_OK);
    assert_int_equal(fk_store_job_delete(f->st, gone, &err), FK_OK);
    assert_int_equal(fk_store_job_delete(f->st, gone, &err), FK_ENOTFOUND);
    fk_store *other;
    assert_int_equal(fk_store_open(&other, f->path, &err), FK_OK);
    fk_store_job j;
    assert_int_equal(fk_store_job_get(other, gone, &j, &err), FK_ENOTFOUND);
    int n = -1;
    assert_int_equal(fk_store_update_count(other, gone, &n, &err), FK_OK);
    assert_int_equal(n, 0);
    assert_false(has_checkpoint(other, gone, 3));
    assert_false(has_model(other, gone, 3));
    fk_store_round *rows;
    assert_int_equal(fk_store_round_list(other, gone, &rows, &n, &err), FK_OK);
    assert_int_equal(n, 0);
    free(rows);
    /* the other job is untouched */
    assert_int_equal(fk_store_update_count(other, keep, &n, &err), FK_OK);
    assert_int_equal(n, 6);
    assert_true(has_model(other, keep, 1));
    fk_store_close(other);
}

static long long size_of(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return -1;
    fseek(fp, 0, SEEK_END);
    long long n = ftell(fp);
    fclose(fp);
    return n;
}

/* `fedkern state compact`: refused while a store has the file open; then the space of a
 * deleted job goes back to the file system and what stays reads back. */
static void compact_shrinks_the_file(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t a = 0, b = 0;
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &a, &err), FK_OK);
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &b, &err), FK_OK);
    for (int r = 1; r <= 4; r++) {
        engine_round(f->st, a, r, 3, 40000, 1.0, r == 4, NULL);
        engine_round(f->st, b, r, 3, 40000, 1.0, r == 4, NULL);
    }
    uint64_t before, after;
    assert_int_equal(fk_store_compact(f->path, &before, &after, &err), FK_ESTATE);
    assert_non_null(strstr(err.msg, "stop the server"));
    assert_int_equal(fk_store_job_delete(f->st, b, &err), FK_OK);
    fk_store_close(f->st);
    f->st = NULL;
    long long on_disk = size_of(f->path);
    assert_int_equal(fk_store_compact(f->path, &before, &after, &err), FK_OK);
    assert_int_equal((long long)before, on_disk);
    assert_true(after < before);
    assert_true((long long)after == size_of(f->path));
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_OK);
    fk_store_startup su;
    fk_store_startup_get(f->st, &su);
    assert_string_equal(su.mode, "clean"); /* compact stops cleanly too */
    assert_true(has_model(f->st, a, 4));
    assert_true(has_checkpoint(f->st, a, 4));
}

static void startup_mode(fixture *f, const char *want)
{
    fk_err err;
    if (fk_store_open(&f->st, f->path, &err))
        fail_msg("open: %s", err.msg);
    fk_store_startup su;
    fk_store_startup_get(f->st, &su);
    if (strcmp(su.mode, want))
        fail_msg("start-up check %s (%s), want %s", su.mode, su.reason, want);
}

/* As if the server had died after SQLite folded its -wal into the file: the run record says
 * "running" (what a start writes) for the same file. */
static void as_crashed(fixture *f)
{
    char p[200], text[512];
    snprintf(p, sizeof p, "%s.run", f->path);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    size_t n = fread(text, 1, sizeof text - 1, fp);
    fclose(fp);
    text[n] = '\0';
    char *at = strstr(text, "state clean");
    assert_non_null(at);
    char out[600];
    snprintf(out, sizeof out, "%.*sstate running%s", (int)(at - text), text,
             at + strlen("state clean"));
    fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(out, fp);
    fclose(fp);
}

/* The start-up check: nothing read after a clean stop, the rows written since after a crash
 * (and a damaged one among them refuses the start), the full check for a changed file. */
static void startup_check_follows_what_was_written(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = 0;
    assert_int_equal(fk_store_job_insert(f->st, "mean", "method = mean\n", 1.0, &id, &err), FK_OK);
    fk_store_retention audit = {.keep_updates = 1, .keep_models = 1};
    fk_store_set_retention(f->st, &audit);
    for (int r = 1; r <= 3; r++)
        engine_round(f->st, id, r, 2, 600, 1.0, 0, NULL);
    fk_store_close(f->st);
    startup_mode(f, "clean");
    fk_store_set_retention(f->st, &audit);
    /* this run writes one round (2 updates, a checkpoint, a model), then "crashes" */
    engine_round(f->st, id, 4, 2, 600, 1.0, 0, NULL);
    fk_store_close(f->st);
    as_crashed(f);
    startup_mode(f, "crash");
    fk_store_startup su;
    fk_store_startup_get(f->st, &su);
    assert_int_equal(su.rows, 4); /* only what run 2 wrote */
    fk_store_close(f->st);
    startup_mode(f, "clean");
    fk_store_close(f->st);
    /* a real crash: a process that opened the file and wrote dies without closing it */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fk_store *st;
        if (fk_store_open(&st, f->path, &err))
            _exit(2);
        fk_store_set_retention(st, &audit);
        engine_round(st, id, 5, 2, 600, 1.0, 0, NULL);
        _exit(0);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    startup_mode(f, "crash");
    fk_store_startup_get(f->st, &su);
    assert_int_equal(su.rows, 4);
    fk_store_close(f->st);
    /* no record beside the file (a copy, a restore): the full check */
    char rec[200];
    snprintf(rec, sizeof rec, "%s.run", f->path);
    assert_int_equal(unlink(rec), 0);
    startup_mode(f, "full");
    fk_store_close(f->st);
    startup_mode(f, "clean");
    fk_store_close(f->st);
    /* a file changed after its clean stop: the full check */
    struct timespec ts[2] = {{0, UTIME_OMIT}, {12345, 0}};
    assert_int_equal(utimensat(AT_FDCWD, f->path, ts, 0), 0);
    startup_mode(f, "full");
    fk_store_set_retention(f->st, &audit);
    /* a crash after writing a blob that is then damaged on disk: refused at start */
    engine_round(f->st, id, 6, 2, 600, 1.0, 0, NULL);
    fk_store_close(f->st);
    f->st = NULL;
    as_crashed(f);
    char marker[600];
    memset(marker, 'a' + 6 % 26, sizeof marker); /* round 6's bytes, see engine_round */
    flip_in_file_n(f->path, marker, sizeof marker);
    assert_int_equal(fk_store_open(&f->st, f->path, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "round 6"));
    assert_non_null(strstr(err.msg, "docs/operations.md"));
    f->st = NULL;
}

/* A state file of schema version 5 migrates: its start is a full check (no verified start
 * recorded), its rows read back, the next starts follow the clean-stop record. */
static void version_5_migrates(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    const char *up = "V5-UPDATE-0123456789";
    fk_store_update u = update(id, 0, "job1-r1-p0-c0", up, strlen(up));
    int dup;
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(fk_store_model_put(f->st, id, 1, "m1", 2, &err), FK_OK);
    fk_store_close(f->st);
    f->st = NULL;
    sqlite3 *db;
    assert_int_equal(sqlite3_open(f->path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "DROP INDEX updates_run; DROP INDEX checkpoints_run;"
                                  "DROP INDEX models_run; DROP TABLE meta;"
                                  "DROP TABLE update_reports;"
                                  "ALTER TABLE updates DROP COLUMN run;"
                                  "ALTER TABLE updates DROP COLUMN pruned;"
                                  "ALTER TABLE checkpoints DROP COLUMN run;"
                                  "ALTER TABLE models DROP COLUMN run;"
                                  "UPDATE schema_version SET version = 5;",
                                  0, 0, 0),
                     SQLITE_OK);
    sqlite3_close(db);
    startup_mode(f, "full");
    int v = 0;
    assert_int_equal(fk_store_schema_version(f->st, &v, &err), FK_OK);
    assert_int_equal(v, 6);
    seen_updates s = {0};
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, count_update, &s, &err), FK_OK);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.pruned, 0);
    assert_true(has_model(f->st, id, 1));
    /* the migrated rows are pruned like new ones */
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    assert_int_equal(fk_store_retain(f->st, id, 1, 1, NULL, &err), FK_OK);
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    s = (seen_updates){0};
    assert_int_equal(fk_store_update_each(f->st, id, 1, 0, 0, count_update, &s, &err), FK_OK);
    assert_int_equal(s.n, 0);
    s = (seen_updates){0}; /* the report, copied by the migration */
    assert_int_equal(fk_store_report_each(f->st, id, 1, 0, 0, count_update, &s, &err), FK_OK);
    assert_int_equal(s.n, 1);
    fk_store_close(f->st);
    startup_mode(f, "clean");
}

static void reused_update_id_is_told_apart(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    fk_store_update u = update(id, 0, "job1-r1-p0-c0", "AAAA", 4);
    int dup = -1, st = -1;
    uint8_t d[32];
    assert_int_equal(fk_store_update_match(f->st, u.idem, "c", "AAAA", 4, &st, d, &err), FK_OK);
    assert_int_equal(st, FK_STORE_IDEM_NEW);
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(dup, FK_STORE_IDEM_NEW);
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(dup, FK_STORE_IDEM_SAME);
    u.blob = "AAAB";
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(dup, FK_STORE_IDEM_OTHER);
    assert_int_equal(fk_store_update_match(f->st, u.idem, "c", "AAAA", 4, &st, d, &err), FK_OK);
    assert_int_equal(st, FK_STORE_IDEM_SAME);
    assert_int_equal(fk_store_update_match(f->st, u.idem, "c", "AAA", 3, &st, d, &err), FK_OK);
    assert_int_equal(st, FK_STORE_IDEM_OTHER);
    int n = 0;
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 1);
}

static void clients_registry(void **state)
{
    fixture *f = *state;
    fk_err err;
    double t;
    assert_int_equal(fk_store_client_last_seen(f->st, "alice", &t, &err), FK_ENOTFOUND);
    assert_int_equal(fk_store_client_seen(f->st, "alice", 10.0, &err), FK_OK);
    assert_int_equal(fk_store_client_seen(f->st, "alice", 25.0, &err), FK_OK);
    assert_int_equal(fk_store_client_last_seen(f->st, "alice", &t, &err), FK_OK);
    assert_true(t == 25.0);
}

/* A full disk refuses the update with FK_EIO and stores nothing; after space
 * comes back the same update goes in. */
static void full_disk_refuses_updates(void **state)
{
    fixture *f = *state;
    fk_err err;
    int64_t id = make_job(f->st);
    size_t big = 1 << 20;
    char *blob = malloc(big);
    memset(blob, 'x', big);
    assert_int_equal(fk_store_set_limit(f->st, 256 * 1024, &err), FK_OK);
    fk_store_update u = update(id, 1, "big-1", blob, big);
    int dup = 0;
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "full"));
    int n = -1;
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 0);
    /* A failed transaction leaves nothing half-written either. */
    assert_int_equal(fk_store_begin(f->st, &err), FK_OK);
    assert_int_equal(fk_store_model_put(f->st, id, 1, blob, big, &err), FK_EIO);
    fk_store_rollback(f->st);
    void *b;
    size_t len;
    assert_int_equal(fk_store_model_get(f->st, id, -1, &b, &len, NULL, &err), FK_ENOTFOUND);
    assert_int_equal(fk_store_set_limit(f->st, 0, &err), FK_OK);
    assert_int_equal(fk_store_update_put(f->st, &u, &dup, &err), FK_OK);
    assert_int_equal(dup, 0);
    assert_int_equal(fk_store_update_count(f->st, id, &n, &err), FK_OK);
    assert_int_equal(n, 1);
    free(blob);
}

static void unusable_paths_give_clear_errors(void **state)
{
    fixture *f = *state;
    fk_err err;
    fk_store *st = NULL;
    assert_int_equal(fk_store_open(&st, "/nonexistent-dir/x/state.db", &err), FK_EIO);
    assert_null(st);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x/state.db"));
    char junk[160];
    snprintf(junk, sizeof junk, "%s/junk.db", f->dir);
    FILE *fp = fopen(junk, "wb");
    assert_non_null(fp);
    for (int i = 0; i < 64; i++)
        fputs("this is not a database file at all ", fp);
    fclose(fp);
    /* damaged: refused at once with the restore steps, never waited for like a full disk */
    assert_int_equal(fk_store_open(&st, junk, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "damaged"));
    unlink(junk);
}

/* Issue 35: the worker's read-only connection sees what the writer committed (not what an open
 * transaction holds) and refuses writes; a relaxed commit is made durable by the -wal sync
 * (fk_store_sync_deferred: only when the store runs synchronous=FULL on a file); the
 * checkpointer copies the -wal into the file while the writer keeps its connection. */
static void reader_sync_and_checkpointer(void **state)
{
    fixture *f = *state;
    fk_err err = {0};
    int64_t id = make_job(f->st);
    fk_store *rd = NULL, *ck = NULL;
    assert_int_equal(fk_store_open_reader(&rd, f->st, &err), FK_OK);
    assert_int_equal(fk_store_reads_writer(rd, f->st), 1);
    assert_int_equal(fk_store_sync_deferred(f->st), 1);
    assert_int_equal(fk_store_begin_relaxed(f->st, &err), FK_OK);
    int dup = 0;
    fk_store_update u1 = update(id, 1, "job1-r1-p0-c1", "Q", 1);
    assert_int_equal(fk_store_update_put(f->st, &u1, &dup, &err), FK_OK);
    seen sn = {0};
    assert_int_equal(fk_store_update_each(rd, id, 1, 0, 0, collect, &sn, &err), FK_OK);
    assert_int_equal(sn.n, 0); /* not committed yet */
    assert_int_equal(fk_store_commit(f->st, &err), FK_OK);
    assert_int_equal(fk_store_sync_wal(fk_store_path(f->st), &err), FK_OK);
    assert_int_equal(fk_store_update_each(rd, id, 1, 0, 0, collect, &sn, &err), FK_OK);
    assert_int_equal(sn.n, 1);
    assert_int_equal(sn.clients[0], 1);
    assert_int_equal(sn.first[0], 'Q');
    int64_t other = 0;
    assert_int_not_equal(fk_store_job_insert(rd, "mean", "method = mean\n", 1.0, &other, &err),
                         FK_OK); /* query_only */
    assert_int_equal(fk_store_open_checkpointer(&ck, f->st, &err), FK_OK);
    assert_true(fk_store_wal_bytes(f->st) > 0);
    fk_store_close(rd); /* its snapshot would hold the checkpoint back */
    int left = -1;
    assert_int_equal(fk_store_checkpoint_passive(ck, &left, &err), FK_OK);
    assert_int_equal(left, 0);
    fk_store_close(ck);
    fk_store_autocheckpoint_default(f->st);
    assert_int_equal(fk_store_set_full_sync(f->st, 0, &err), FK_OK);
    assert_int_equal(fk_store_sync_deferred(f->st), 0); /* NORMAL: nothing to sync */
    fk_store *mem = NULL;
    assert_int_equal(fk_store_open(&mem, ":memory:", &err), FK_OK);
    assert_int_equal(fk_store_sync_deferred(mem), 0);
    assert_int_equal(fk_store_open_reader(&rd, mem, &err), FK_ESTATE);
    assert_int_equal(fk_store_open_checkpointer(&ck, mem, &err), FK_ESTATE);
    fk_store_close(mem);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(schema_is_versioned_and_reopens, setup, teardown),
        cmocka_unit_test_setup_teardown(reader_sync_and_checkpointer, setup, teardown),
        cmocka_unit_test_setup_teardown(version_1_database_migrates, setup, teardown),
        cmocka_unit_test_setup_teardown(jobs_track_state_and_position, setup, teardown),
        cmocka_unit_test_setup_teardown(rounds_and_phases_round_trip, setup, teardown),
        cmocka_unit_test_setup_teardown(updates_are_idempotent, setup, teardown),
        cmocka_unit_test_setup_teardown(cached_statements_are_reused_safely, setup, teardown),
        cmocka_unit_test_setup_teardown(failed_commit_stores_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(blobs_per_round, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_bytes_are_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(version_3_blobs_get_sums, setup, teardown),
        cmocka_unit_test_setup_teardown(retention_prunes_closed_rounds, setup, teardown),
        cmocka_unit_test_setup_teardown(retention_keeps_the_selected_model, setup, teardown),
        cmocka_unit_test_setup_teardown(delete_removes_a_finished_job, setup, teardown),
        cmocka_unit_test_setup_teardown(compact_shrinks_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(startup_check_follows_what_was_written, setup, teardown),
        cmocka_unit_test_setup_teardown(version_5_migrates, setup, teardown),
        cmocka_unit_test_setup_teardown(reused_update_id_is_told_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(clients_registry, setup, teardown),
        cmocka_unit_test_setup_teardown(roster_persists, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_refuses_updates, setup, teardown),
        cmocka_unit_test_setup_teardown(unusable_paths_give_clear_errors, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
