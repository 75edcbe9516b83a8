/* Job keys: every job type documents every key it reads, and a job with an unknown key is
 * refused naming it and the nearest known key (common/methods/jobkeys.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/suggest.h"
#include "common/methods/jobconf.h"
#include "common/methods/jobkeys.h"
#include "common/methods/sim.h"

static void edit_distance(void **state)
{
    (void)state;
    assert_int_equal(fk_edit_distance("rounds", 6, "rounds", 6), 0);
    assert_int_equal(fk_edit_distance("rounsd", 6, "rounds", 6), 1); /* a swap */
    assert_int_equal(fk_edit_distance("dyas", 4, "days", 4), 1);
    assert_int_equal(fk_edit_distance("abc", 3, "ca", 2), 3);
    assert_int_equal(fk_edit_distance("round", 5, "rounds", 6), 1);
    assert_int_equal(fk_edit_distance("", 0, "abc", 3), 3);
    assert_int_equal(fk_edit_distance("kitten", 6, "sitting", 7), 3);
    /* '-' and '_' are one character in option names */
    assert_int_equal(fk_edit_distance("log-level", 9, "log_level", 9), 0);
    assert_int_equal(fk_suggest_max_distance(3), 1);
    assert_int_equal(fk_suggest_max_distance(12), 3);
}

/* The keys one job type's ops looked up, in order of first lookup. */
typedef struct trace {
    char keys[128][64];
    int n;
} trace;

static void record(void *ud, const char *key)
{
    trace *t = ud;
    for (int i = 0; i < t->n; i++)
        if (!strcmp(t->keys[i], key))
            return;
    if (t->n < 128)
        snprintf(t->keys[t->n++], sizeof t->keys[0], "%s", key);
}

/* Small labelled clients with a regression target too, for job types without sim_data. */
static void plain_clients(fk_dataset *ds, int n)
{
    for (int c = 0; c < n; c++) {
        assert_int_equal(fk_dataset_init(&ds[c], 60, 3, 0), FK_OK);
        double raw[60];
        for (size_t i = 0; i < 60; i++) {
            for (size_t j = 0; j < 3; j++)
                ds[c].X.data[i * ds[c].X.ld + j] =
                    (double)((i * 7 + j * 13 + (size_t)c) % 17) / 17.0 + (double)(i % 2) * 3.0;
            raw[i] = (double)(i % 2);
        }
        fk_err err;
        if (c < n - 1) /* the last client unlabelled: a target domain */
            assert_int_equal(fk_dataset_set_labels(&ds[c], raw, &err), FK_OK);
    }
}

/* Every key a job type's init ops (and, with built-in data, a one-round simulation) look up
 * is generic or in its keys table: the table is complete, so the unknown-key refusal can
 * never refuse a key the method reads. */
static void keys_tables_are_complete(void **state)
{
    (void)state;
    for (int i = 0; fk_methods[i]; i++) {
        const fk_method *m = fk_methods[i];
        if (!m->keys)
            fail_msg("job type %s has no keys table", m->name);
        trace t = {.n = 0};
        fk_params p;
        fk_params_init(&p);
        if (!m->sim_data) /* fedrf-tca needs it; the built-in data set their own */
            assert_int_equal(fk_params_set(&p, "classes", "2"), FK_OK);
        if (!strcmp(m->name, "sfl")) /* its opt-ins, so the simulation runs */
            assert_int_equal(fk_params_set_all(&p, (const char *const[]){
                                                       "raw_sample_upload", "acknowledged",
                                                       "local.allow_raw_upload", "1", "sim_n", "30",
                                                       NULL}),
                             FK_OK);
        p.trace = record;
        p.trace_ud = &t;
        enum { K = 4 };
        fk_dataset ds[K];
        memset(ds, 0, sizeof ds);
        fk_err err;
        fk_err_clear(&err);
        if (m->sim_data) {
            assert_int_equal(m->sim_data(&p, K, 1, ds, NULL, &err), FK_OK);
            fk_sim_opts o = {.rounds = 1, .seed = 1};
            fk_bundle model;
            fk_bundle_init(&model);
            int rc = fk_sim_run(m, &p, ds, K, &o, &model, NULL, &err);
            if (rc)
                fail_msg("%s: %s", m->name, err.msg);
            fk_bundle_close(&model);
            /* some clients only (an MPI rank's share): those bit for bit, the others their
             * name and no rows */
            fk_dataset some[K];
            memset(some, 0, sizeof some);
            const unsigned char want[K] = {0, 1, 1, 0};
            assert_int_equal(m->sim_data(&p, K, 1, some, want, &err), FK_OK);
            for (int c = 0; c < K; c++) {
                assert_string_equal(some[c].name, ds[c].name);
                if (!want[c]) {
                    assert_null(some[c].X.data);
                } else {
                    assert_int_equal(some[c].X.rows, ds[c].X.rows);
                    assert_int_equal(some[c].X.cols, ds[c].X.cols);
                    for (size_t r = 0; r < ds[c].X.rows; r++)
                        assert_memory_equal(fk_mat_row(&some[c].X, r), fk_mat_row(&ds[c].X, r),
                                            ds[c].X.cols * sizeof(double));
                    assert_int_equal(some[c].y != NULL, ds[c].y != NULL);
                    if (ds[c].y)
                        assert_memory_equal(some[c].y, ds[c].y, ds[c].X.rows * sizeof *ds[c].y);
                    assert_int_equal(some[c].y_raw != NULL, ds[c].y_raw != NULL);
                    if (ds[c].y_raw)
                        assert_memory_equal(some[c].y_raw, ds[c].y_raw,
                                            ds[c].X.rows * sizeof *ds[c].y_raw);
                }
                fk_dataset_close(&some[c]);
            }
        } else {
            plain_clients(ds, K);
            void *srv = NULL;
            if (m->server_init(&srv, &p, K, 1, &err) == FK_OK)
                m->server_close(srv);
            for (int c = 0; c < K; c++) {
                void *cli = NULL;
                if (m->client_init(&cli, &p, &ds[c], c, K, 1, &err) == FK_OK)
                    m->client_close(cli);
            }
        }
        for (int k = 0; k < t.n; k++)
            if (!fk_param_docs_has(fk_jobkeys_generic, NULL, t.keys[k], NULL) &&
                !fk_param_docs_has(m->keys, NULL, t.keys[k], NULL) &&
                strncmp(t.keys[k], "server.", 7)) /* the server's own, set by the engine */
                fail_msg("job type %s reads key '%s' that its keys table does not list", m->name,
                         t.keys[k]);
        assert_true(t.n > 0);
        for (int c = 0; c < K; c++)
            fk_dataset_close(&ds[c]);
        fk_params_close(&p);
    }
}

static int check_text(const fk_method *m, const char *text, int flags, fk_err *err)
{
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_parse_ini(&p, text, "t", err), FK_OK);
    int rc = fk_jobkeys_check(&p, m, NULL, flags, err);
    fk_params_close(&p);
    return rc;
}

/* For every job type: its own first key and the generic keys pass; the first key with two
 * letters swapped, or a misspelt generic key, is refused with the right suggestion. */
static void unknown_keys_refused_with_suggestion(void **state)
{
    (void)state;
    for (int i = 0; fk_methods[i]; i++) {
        const fk_method *m = fk_methods[i];
        char key[64], typo[80], text[512];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(m->keys[0].key, " "), m->keys[0].key);
        fk_err err;
        snprintf(text, sizeof text, "method = %s\ndataset = d\nclients = a\nrounds = 1\nseed = 1\n"
                 "quorum = 1\ndeadline = 5\nretries = 0\nmax_refusals = 1\nname = x\n%s = 1\n",
                 m->name, key);
        assert_int_equal(check_text(m, text, 0, &err), FK_OK);
        snprintf(typo, sizeof typo, "%sx", key); /* one letter too many */
        snprintf(text, sizeof text, "method = %s\n%s = 1\n", m->name, typo);
        assert_int_equal(check_text(m, text, 0, &err), FK_EINVAL);
        char want[200];
        snprintf(want, sizeof want, "'%s' (did you mean '%s'?)", typo, key);
        if (!strstr(err.msg, want))
            fail_msg("%s: '%s' not in: %s", m->name, want, err.msg);
        assert_non_null(strstr(err.msg, m->name));
        assert_int_equal(check_text(m, "rounsd = 3\nqourum = 1\n", 0, &err), FK_EINVAL);
        assert_non_null(strstr(err.msg, "unknown job keys 'rounsd' (did you mean 'rounds'?), "
                                        "'qourum' (did you mean 'quorum'?)"));
    }
}

/* Nothing close: the key alone, no guess. */
static void far_keys_get_no_suggestion(void **state)
{
    (void)state;
    fk_err err;
    const fk_method *m = fk_method_find("fedgrem", &err);
    assert_non_null(m);
    assert_int_equal(check_text(m, "zzzzzzzz = 1\n", 0, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "unknown job key 'zzzzzzzz' for job type fedgrem"));
    assert_null(strstr(err.msg, "did you mean"));
}

/* sampling, aggregator and trim were documented for every job but read by none: they are
 * unknown keys now, like any other. */
static void removed_generic_keys_are_unknown(void **state)
{
    (void)state;
    fk_err err;
    for (int i = 0; fk_methods[i]; i++) {
        assert_int_equal(check_text(fk_methods[i], "sampling = 0.5\n", 0, &err), FK_EINVAL);
        assert_non_null(strstr(err.msg, "'sampling'"));
        assert_int_equal(check_text(fk_methods[i], "aggregator = median\n", 0, &err), FK_EINVAL);
        assert_int_equal(check_text(fk_methods[i], "trim = 0.2\n", 0, &err), FK_EINVAL);
    }
}

/* A job never speaks for the clients (local.*); fedkern sim, which plays them, may give the
 * local keys the method documents, and no others. */
static void local_keys(void **state)
{
    (void)state;
    fk_err err;
    const fk_method *kahm = fk_method_find("kahm", &err);
    assert_non_null(kahm);
    assert_int_equal(check_text(kahm, "local.allow_model_upload = 1\n", 0, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "[local] section"));
    assert_int_equal(check_text(kahm, "local.allow_model_upload = 1\n", FK_JOBKEYS_LOCAL, &err),
                     FK_OK);
    assert_int_equal(check_text(kahm, "local.allow_raw_upload = 1\n", FK_JOBKEYS_LOCAL, &err),
                     FK_EINVAL);
}

/* The old '-' spellings are the same keys. */
static void dash_spelling_is_the_same_key(void **state)
{
    (void)state;
    fk_err err;
    const fk_method *m = fk_method_find("fedrf-tca", &err);
    assert_non_null(m);
    assert_int_equal(check_text(m, "drop-setting = II\nmax-refusals = 2\n", 0, &err), FK_OK);
}

/* A job type that runs in one round refuses rounds > 1 (it reported "1 of 5" before); the
 * others take it. */
static void one_round_types_refuse_more_rounds(void **state)
{
    (void)state;
    int one = 0;
    for (int i = 0; fk_methods[i]; i++) {
        const fk_method *m = fk_methods[i];
        fk_params p;
        fk_params_init(&p);
        int single = m->max_rounds && m->max_rounds(&p) == 1;
        fk_params_close(&p);
        fk_err err;
        int rc = check_text(m, "rounds = 5\n", 0, &err);
        if (single) {
            one++;
            assert_int_equal(rc, FK_EINVAL);
            assert_non_null(strstr(err.msg, "runs in one round"));
            assert_non_null(strstr(err.msg, "rounds = 5"));
            assert_int_equal(check_text(m, "rounds = 1\n", 0, &err), FK_OK);
        } else if (rc) {
            fail_msg("%s refuses rounds = 5: %s", m->name, err.msg);
        }
    }
    assert_int_equal(one, 4); /* kahm, dica, udica, sfl */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(edit_distance),
        cmocka_unit_test(keys_tables_are_complete),
        cmocka_unit_test(unknown_keys_refused_with_suggestion),
        cmocka_unit_test(far_keys_get_no_suggestion),
        cmocka_unit_test(removed_generic_keys_are_unknown),
        cmocka_unit_test(local_keys),
        cmocka_unit_test(dash_spelling_is_the_same_key),
        cmocka_unit_test(one_round_types_refuse_more_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
