#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "common/base/options.h"
#include "common/base/params.h"

static void ini_sections_and_comments(void **state)
{
    (void)state;
    fk_params p;
    fk_err err;
    fk_params_init(&p);
    assert_int_equal(fk_params_parse_ini(&p, "# c\nrounds = 5 ; five\n[tls]\ndir = /x y\n", "t", &err),
                     FK_OK);
    long r;
    assert_int_equal(fk_params_int(&p, "rounds", 0, 1, 100, &r, &err), FK_OK);
    assert_int_equal(r, 5);
    assert_string_equal(fk_params_get(&p, "tls.dir"), "/x y");
    assert_null(fk_params_unused(&p));
    fk_params_close(&p);
}

/* A UTF-8 byte order mark at the start of a config or job file is skipped: the first key keeps
 * its name (it used to become "\xEF\xBB\xBFmethod", an unknown key). */
static void ini_bom_skipped(void **state)
{
    (void)state;
    fk_params p;
    fk_err err;
    fk_params_init(&p);
    assert_int_equal(fk_params_parse_ini(&p, "\xEF\xBB\xBF" "method = dica\nrounds = 1\n", "job",
                                         &err),
                     FK_OK);
    assert_non_null(fk_params_get(&p, "method"));
    assert_string_equal(fk_params_get(&p, "method"), "dica");
    assert_int_equal(p.count, 2);
    fk_params_close(&p);
    fk_params_init(&p);
    assert_int_equal(fk_params_parse_ini(&p, "\xEF\xBB\xBF" "[local]\nallow_raw_upload = 1\n", "c",
                                         &err),
                     FK_OK);
    assert_non_null(fk_params_get(&p, "local.allow_raw_upload"));
    assert_string_equal(fk_params_get(&p, "local.allow_raw_upload"), "1");
    fk_params_close(&p);
}

static void ini_errors_name_the_line(void **state)
{
    (void)state;
    fk_params p;
    fk_err err;
    fk_params_init(&p);
    assert_int_equal(fk_params_parse_ini(&p, "a = 1\nnonsense\n", "job.conf", &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "job.conf:2"));
    assert_int_equal(fk_params_parse_ini(&p, "[open\n", "x", &err), FK_EFORMAT);
    fk_params_close(&p);
}

static void typed_getters_validate(void **state)
{
    (void)state;
    fk_params p;
    fk_err err;
    fk_params_init(&p);
    assert_int_equal(fk_params_set(&p, "sigma", "-1"), FK_OK);
    assert_int_equal(fk_params_set(&p, "n", "12x"), FK_OK);
    assert_int_equal(fk_params_set(&p, "on", "yes"), FK_OK);
    double s;
    long n;
    int b;
    assert_int_equal(fk_params_double(&p, "sigma", 1, 1e-12, 1e12, &s, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "sigma"));
    assert_int_equal(fk_params_int(&p, "n", 0, 0, 10, &n, &err), FK_EINVAL);
    assert_int_equal(fk_params_bool(&p, "on", 0, &b, &err), FK_OK);
    assert_int_equal(b, 1);
    assert_int_equal(fk_params_double(&p, "absent", 2.5, 0, 10, &s, &err), FK_OK);
    assert_true(s == 2.5);
    fk_params_close(&p);
}

/* fk_params_set_all sets every pair in order (a later pair replaces an earlier key) and
 * stops at the NULL key. */
static void set_all_pairs(void **state)
{
    (void)state;
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set_all(&p, (const char *const[]){"a", "1", "b", "2", "a", "3",
                                                                 NULL, "ignored"}),
                     FK_OK);
    assert_int_equal(p.count, 2);
    assert_string_equal(fk_params_get(&p, "a"), "3");
    assert_string_equal(fk_params_get(&p, "b"), "2");
    assert_int_equal(fk_params_set_all(&p, (const char *const[]){NULL}), FK_OK);
    assert_int_equal(p.count, 2);
    fk_params_close(&p);
}

static void args_consume_options(void **state)
{
    (void)state;
    char a0[] = "fedrf-tca", a1[] = "--rounds", a2[] = "7", a3[] = "--json", a4[] = "--sigma=2",
         a5[] = "extra";
    char *argv[] = {a0, a1, a2, a3, a4, a5};
    int argc = 6;
    fk_params p;
    fk_err err;
    fk_params_init(&p);
    assert_int_equal(fk_params_parse_args(&p, &argc, argv, &err), FK_OK);
    assert_int_equal(argc, 2);
    assert_string_equal(argv[0], "fedrf-tca");
    assert_string_equal(argv[1], "extra");
    assert_string_equal(fk_params_get(&p, "rounds"), "7");
    assert_string_equal(fk_params_get(&p, "json"), "1");
    assert_string_equal(fk_params_get(&p, "sigma"), "2");
    fk_params_close(&p);
}

/* '-' and '_' are one character in lookups and replacements; the key keeps its spelling. */
static void dash_and_underscore_are_one_key(void **state)
{
    (void)state;
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set(&p, "log-level", "debug"), FK_OK);
    assert_string_equal(fk_params_str(&p, "log_level", "info"), "debug");
    assert_null(fk_params_unused(&p));
    assert_int_equal(fk_params_set(&p, "log_level", "warn"), FK_OK); /* replaces it */
    assert_int_equal(p.count, 1);
    assert_string_equal(fk_params_get(&p, "log-level"), "warn");
    assert_null(fk_params_get(&p, "loglevel"));
    char now[64];
    assert_int_equal(fk_params_old_spelling("tls.server-name", now, sizeof now), 1);
    assert_string_equal(now, "tls.server_name");
    assert_int_equal(fk_params_old_spelling("tls_dir", now, sizeof now), 0);
    fk_params_close(&p);
}

static const fk_param_doc docs[] = {
    {"listen HOST:PORT", "x"},
    {"log_level LEVEL", "x"},
    {"data.DATASET SOURCE", "x"},
    {"json", "x"},
    {NULL, NULL},
};

/* Known keys: a doc entry's first word, any spelling; a placeholder segment covers every key
 * under it (and says the rest is a name); the nearest key only when it is close. */
static void doc_tables_know_keys(void **state)
{
    (void)state;
    int under = 0;
    assert_true(fk_param_docs_has(docs, NULL, "listen", &under) && !under);
    assert_true(fk_param_docs_has(docs, NULL, "log-level", NULL));
    assert_true(fk_param_docs_has(docs, NULL, "json", NULL));
    assert_false(fk_param_docs_has(docs, NULL, "jso", NULL));
    assert_true(fk_param_docs_has(docs, NULL, "data.pen-digits", &under) && under);
    assert_false(fk_param_docs_has(docs, NULL, "data.", NULL));
    assert_false(fk_param_docs_has(docs, NULL, "data", NULL));
    assert_true(fk_param_docs_has(docs, "net.", "net.json", NULL));
    assert_false(fk_param_docs_has(docs, "net.", "json", NULL));
    fk_param_near n;
    fk_param_near_init(&n);
    fk_param_docs_near(docs, NULL, "log_levle", &n);
    assert_string_equal(n.best, "log_level");
    fk_param_near_init(&n);
    fk_param_docs_near(docs, NULL, "verbose", &n);
    assert_string_equal(n.best, "");
}

/* fk_options_check: 2 and one line naming the key and the nearest one for an unknown key;
 * an old spelling passes with a warning, only when asked for, never under a placeholder. */
static void options_check_lines(void **state)
{
    (void)state;
    const fk_option_table known[] = {{docs, NULL}, {NULL, NULL}};
    fk_params p;
    fk_params_init(&p);
    assert_int_equal(fk_params_set_all(&p, (const char *const[]){"log-level", "info",
                                                                   "data.my-set", "a.csv", NULL}),
                     FK_OK);
    char buf[1024] = "";
    FILE *f = fmemopen(buf, sizeof buf, "w");
    assert_non_null(f);
    assert_int_equal(fk_options_check(&p, known, "prog", NULL, 1, f), 0);
    fclose(f);
    assert_string_equal(buf, "prog: warning: '--log-level' is the old spelling of '--log_level' "
                             "(accepted until fedkern 0.2)\n");
    buf[0] = 0;
    f = fmemopen(buf, sizeof buf, "w");
    assert_int_equal(fk_options_check(&p, known, "prog", NULL, 0, f), 0);
    fclose(f);
    assert_string_equal(buf, "");
    assert_int_equal(fk_params_set(&p, "lisen", "x"), FK_OK);
    buf[0] = 0;
    f = fmemopen(buf, sizeof buf, "w");
    assert_int_equal(fk_options_check(&p, known, "prog", "a.conf", 0, f), 2);
    fclose(f);
    assert_string_equal(buf, "prog: a.conf: unknown key 'lisen'; did you mean 'listen'? (see "
                             "prog --help)\n");
    fk_params_close(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ini_sections_and_comments),
        cmocka_unit_test(ini_bom_skipped),
        cmocka_unit_test(ini_errors_name_the_line),
        cmocka_unit_test(typed_getters_validate),
        cmocka_unit_test(set_all_pairs),
        cmocka_unit_test(args_consume_options),
        cmocka_unit_test(dash_and_underscore_are_one_key),
        cmocka_unit_test(doc_tables_know_keys),
        cmocka_unit_test(options_check_lines),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
