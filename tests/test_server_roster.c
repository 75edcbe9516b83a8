/* The server's roster: what clients advertised at Join, and the check of a submitted job
 * (unknown clients, missing data set, column counts that disagree), each offender named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "server/roster.h"

static int check(const fk_roster *r, const char *text, fk_roster_known_fn known, fk_err *err)
{
    fk_jobconf c;
    fk_err perr;
    assert_int_equal(fk_jobconf_parse(&c, text, "job", &perr), FK_OK);
    int rc = fk_roster_check(r, &c, known, NULL, err);
    fk_jobconf_close(&c);
    return rc;
}

static void join(fk_roster *r, const char *id, int listed, const char *name, uint64_t cols)
{
    fk_roster_set s = {.rows = 100, .cols = cols, .classes = 10};
    snprintf(s.name, sizeof s.name, "%s", name ? name : "");
    assert_int_equal(fk_roster_join(r, id, listed, &s, name ? 1 : 0), FK_OK);
}

static int knows_old(void *ud, const char *id)
{
    (void)ud;
    return !strcmp(id, "old");
}

static void accepts_a_consistent_job(void **state)
{
    (void)state;
    fk_roster *r;
    assert_int_equal(fk_roster_new(&r), FK_OK);
    join(r, "c0", 1, "pendigits", 16);
    join(r, "c1", 1, "pendigits", 16);
    join(r, "legacy", 0, NULL, 0); /* an old client: holdings unknown, nothing checked */
    fk_err err;
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, c1, legacy\n", NULL,
                           &err),
                     FK_OK);
    /* known to the store (joined before a restart) counts as known */
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, old\n", knows_old,
                           &err),
                     FK_OK);
    assert_true(fk_roster_seen(r, "c0") && !fk_roster_seen(r, "old"));
    fk_roster_free(r);
}

static void refuses_unknown_clients_by_name(void **state)
{
    (void)state;
    fk_roster *r;
    assert_int_equal(fk_roster_new(&r), FK_OK);
    join(r, "c0", 1, "pendigits", 16);
    fk_err err;
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, c7\n", knows_old,
                           &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "client c7 has never joined this server"));
    assert_null(strstr(err.msg, "c0"));
    assert_non_null(strstr(err.msg, "--skip_client_check"));
    /* many: the first five and a count */
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, x[1-9]\n", NULL,
                           &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "clients x1, x2, x3, x4, x5, and 4 more have never joined"));
    fk_roster_free(r);
}

static void refuses_a_missing_data_set(void **state)
{
    (void)state;
    fk_roster *r;
    assert_int_equal(fk_roster_new(&r), FK_OK);
    join(r, "c0", 1, "pendigits", 16);
    join(r, "c1", 1, "gmm", 4);
    join(r, "c2", 1, NULL, 0);
    fk_err err;
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, c1\n", NULL, &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "client c1 holds no data set 'pendigits' (it holds: gmm)"));
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, c1, c2\n", NULL,
                           &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "clients c1, c2 hold no data set 'pendigits'"));
    /* a rejoin with the data set clears it; a rejoin without the list forgets the holdings */
    join(r, "c1", 1, "pendigits", 16);
    join(r, "c2", 0, NULL, 0);
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, c1, c2\n", NULL,
                           &err),
                     FK_OK);
    fk_roster_free(r);
}

static void refuses_disagreeing_columns(void **state)
{
    (void)state;
    fk_roster *r;
    assert_int_equal(fk_roster_new(&r), FK_OK);
    join(r, "c0", 1, "pendigits", 16);
    join(r, "c1", 1, "pendigits", 16);
    join(r, "c2", 1, "pendigits", 17);
    join(r, "c3", 1, "other", 3);
    fk_err err;
    assert_int_equal(check(r, "method = m\ndataset = pendigits\nclients = c0, c1, c2, c3, c9\n",
                           NULL, &err),
                     FK_EINVAL);
    /* every kind of offender in one message */
    assert_non_null(strstr(err.msg, "client c9 has never joined"));
    assert_non_null(strstr(err.msg, "client c3 holds no data set 'pendigits' (it holds: other)"));
    assert_non_null(strstr(err.msg, "data set 'pendigits' has 16 columns on 2 clients but 17 on c2"));
    fk_roster_free(r);
}

/* Issue 34: the model records what the job's clients reported of their preprocessing: the
 * roster keeps its own copy of each map (the Join's memory is gone), a rejoin replaces it,
 * clients that differ get a row each, and a client that did not report (an old client) makes
 * the record unknown, naming it. */
static void records_the_clients_preprocessing(void **state)
{
    (void)state;
    fk_roster *r;
    assert_int_equal(fk_roster_new(&r), FK_OK);
    double sh[2] = {1, 2}, sc[2] = {3, 4};
    for (int k = 0; k < 3; k++) {
        fk_roster_set s = {.rows = 10, .cols = 2, .classes = 2};
        snprintf(s.name, sizeof s.name, "d");
        s.prep = (fk_prep_record){.known = 1, .n = 1, .code = {3}, .d = 2, .shift = sh, .scale = sc};
        char id[8];
        snprintf(id, sizeof id, "c%d", k);
        assert_int_equal(fk_roster_join(r, id, 1, &s, 1), FK_OK);
    }
    sh[0] = 99; /* the Join's buffers change: the roster kept its copy */
    fk_jobconf c;
    fk_err err = {0};
    assert_int_equal(fk_jobconf_parse(&c, "method = dica\ndataset = d\nclients = c0, c1, c2\n",
                                      "job", &err),
                     FK_OK);
    fk_bundle m;
    fk_bundle_init(&m);
    const char *unknown;
    assert_int_equal(fk_roster_model_prep(r, &c, &m, &unknown, &err), FK_OK);
    assert_string_equal(unknown, "");
    assert_int_equal(fk_prep_model_rows(&m), 1);
    assert_true(fk_bundle_get(&m, "data_prep_shift")->data[0] == 1);
    fk_bundle_close(&m);
    /* c1 rejoins without a map: a row each */
    fk_roster_set s1 = {.rows = 10, .cols = 2, .classes = 2, .prep = {.known = 1, .n = 1, .code = {3}}};
    snprintf(s1.name, sizeof s1.name, "d");
    assert_int_equal(fk_roster_join(r, "c1", 1, &s1, 1), FK_OK);
    fk_bundle_init(&m);
    assert_int_equal(fk_roster_model_prep(r, &c, &m, &unknown, &err), FK_OK);
    assert_int_equal(fk_prep_model_rows(&m), 3);
    fk_bundle_close(&m);
    /* c2 rejoins as an old client (no report): unknown, named */
    fk_roster_set s2 = {.rows = 10, .cols = 2, .classes = 2};
    snprintf(s2.name, sizeof s2.name, "d");
    assert_int_equal(fk_roster_join(r, "c2", 1, &s2, 1), FK_OK);
    fk_bundle_init(&m);
    assert_int_equal(fk_roster_model_prep(r, &c, &m, &unknown, &err), FK_OK);
    assert_string_equal(unknown, "c2");
    assert_int_equal(m.count, 0);
    fk_bundle_close(&m);
    fk_jobconf_close(&c);
    fk_roster_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_a_consistent_job),
        cmocka_unit_test(refuses_unknown_clients_by_name),
        cmocka_unit_test(refuses_a_missing_data_set),
        cmocka_unit_test(refuses_disagreeing_columns),
        cmocka_unit_test(records_the_clients_preprocessing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
