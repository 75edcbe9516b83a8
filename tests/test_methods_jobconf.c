#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/methods/jobconf.h"

static void full_config_parses(void **state)
{
    (void)state;
    fk_jobconf c;
    fk_err err;
    const char *text = "method = fedgrem\n"
                       "dataset = fashion-mnist\n"
                       "name = grem-demo\n"
                       "rounds = 25\nseed = 7\nquorum = 0.75\ndeadline = 2.5\nretries = 2\n"
                       "clients = alice, bob,carol.example.org , dave@lab\n"
                       "lambda = 0.3\n";
    assert_int_equal(fk_jobconf_parse(&c, text, "job.conf", &err), FK_OK);
    assert_string_equal(c.method, "fedgrem");
    assert_string_equal(c.dataset, "fashion-mnist");
    assert_string_equal(c.name, "grem-demo");
    assert_int_equal(c.rounds, 25);
    assert_true(c.seed == 7);
    assert_true(c.quorum == 0.75 && c.deadline == 2.5);
    assert_int_equal(c.retries, 2);
    assert_int_equal(c.n_clients, 4);
    assert_string_equal(c.clients[2], "carol.example.org");
    assert_int_equal(fk_jobconf_client_index(&c, "dave@lab"), 3);
    assert_int_equal(fk_jobconf_client_index(&c, "eve"), -1);
    /* Hyperparameters stay for the method. */
    assert_string_equal(fk_params_get(&c.params, "lambda"), "0.3");
    assert_int_equal(fk_jobconf_quorum(&c, 4), 3);
    assert_int_equal(fk_jobconf_quorum(&c, 1), 1);
    fk_jobconf_close(&c);
}

static void client_ranges(void **state)
{
    (void)state;
    fk_jobconf c;
    fk_err err;
    assert_int_equal(fk_jobconf_parse(&c, "method = m\ndataset = d\nclients = a, l[0-999], z\n",
                                      "j", &err),
                     FK_OK);
    assert_int_equal(c.n_clients, 1002);
    assert_string_equal(c.clients[1], "l0");
    assert_string_equal(c.clients[1000], "l999");
    assert_int_equal(fk_jobconf_client_index(&c, "z"), 1001);
    fk_jobconf_close(&c);
    assert_int_equal(fk_jobconf_parse(&c, "method = m\ndataset = d\nclients = l[0-3], l2\n", "j",
                                      &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "listed twice"));
    fk_jobconf_close(&c);
}

static void defaults(void **state)
{
    (void)state;
    fk_jobconf c;
    fk_err err;
    assert_int_equal(fk_jobconf_parse(&c, "method = m\ndataset = d\nclients = a\n", "j", &err),
                     FK_OK);
    assert_int_equal(c.rounds, 10);
    assert_true(c.seed == 1);
    assert_true(c.quorum == 0.5 && c.deadline == 60.0);
    assert_int_equal(c.retries, 3);
    assert_string_equal(c.name, "m");
    assert_int_equal(fk_jobconf_quorum(&c, 5), 3);
    fk_jobconf_close(&c);
}

static int twice_r(const fk_params *p)
{
    long R;
    fk_err err;
    return fk_params_int(p, "R", 4, 1, 100, &R, &err) ? 1 : 2 * (int)R;
}

/* Without `rounds` the method's max_rounds op sets the budget; a given `rounds` wins. */
static void method_sets_default_rounds(void **state)
{
    (void)state;
    const fk_method plain = {.name = "m"}, self_ending = {.name = "m", .max_rounds = twice_r};
    fk_jobconf c;
    fk_err err;
    const char *text = "method = m\ndataset = d\nclients = a\nR = 7\n";
    assert_int_equal(fk_jobconf_parse(&c, text, "j", &err), FK_OK);
    fk_jobconf_set_method(&c, &plain);
    assert_int_equal(c.rounds, FK_DEFAULT_ROUNDS);
    fk_jobconf_set_method(&c, &self_ending);
    assert_int_equal(c.rounds, 14);
    fk_jobconf_close(&c);
    text = "method = m\ndataset = d\nclients = a\nrounds = 3\n";
    assert_int_equal(fk_jobconf_parse(&c, text, "j", &err), FK_OK);
    fk_jobconf_set_method(&c, &self_ending);
    assert_int_equal(c.rounds, 3);
    fk_jobconf_close(&c);
}

/* Each bad config gives one error naming the file and the key. */
static void errors_name_key(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"dataset = d\nclients = a\n", "method"},
        {"method = m\nclients = a\n", "dataset"},
        {"method = m\ndataset = d\n", "clients"},
        {"method = m\ndataset = d\nclients = a, a\n", "listed twice"},
        {"method = m\ndataset = d\nclients = a,,b\n", "empty"},
        {"method = m\ndataset = d\nclients = a b\n", "'a b'"},
        {"method = m y\ndataset = d\nclients = a\n", "method"},
        {"method = m\ndataset = d\nclients = a\nrounds = 0\n", "rounds"},
        {"method = m\ndataset = d\nclients = a\nrounds = ten\n", "rounds"},
        {"method = m\ndataset = d\nclients = a\nquorum = 0\n", "quorum"},
        {"method = m\ndataset = d\nclients = a\nquorum = 1.5\n", "quorum"},
        {"method = m\ndataset = d\nclients = a\ndeadline = -1\n", "deadline"},
        {"method = m\ndataset = d\nclients = a\nretries = -2\n", "retries"},
        {"method = m\ndataset = d\nclients = a\nseed = -3\n", "seed"},
        {"method = m\ndataset = d\nclients = a\nbroken line\n", "x.conf:4"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        fk_jobconf c;
        fk_err err;
        fk_err_clear(&err);
        int rc = fk_jobconf_parse(&c, cases[i].text, "x.conf", &err);
        fk_jobconf_close(&c);
        if (rc == FK_OK || !strstr(err.msg, cases[i].want) || !strstr(err.msg, "x.conf"))
            fail_msg("case %zu: rc %d, message '%s' lacks '%s'", i, rc, err.msg, cases[i].want);
    }
}

/* Ranges expand up to FK_JOBCONF_MAX_CLIENTS in all and no further; lookups stay exact. */
static void client_limit(void **state)
{
    (void)state;
    fk_jobconf c;
    fk_err err;
    char text[128];
    snprintf(text, sizeof text, "method = m\ndataset = d\nclients = s[1-%d]\n",
             FK_JOBCONF_MAX_CLIENTS);
    assert_int_equal(fk_jobconf_parse(&c, text, "j", &err), FK_OK);
    assert_int_equal(c.n_clients, FK_JOBCONF_MAX_CLIENTS);
    char last[32];
    snprintf(last, sizeof last, "s%d", FK_JOBCONF_MAX_CLIENTS);
    assert_int_equal(fk_jobconf_client_index(&c, last), FK_JOBCONF_MAX_CLIENTS - 1);
    assert_int_equal(fk_jobconf_client_index(&c, "s1"), 0);
    assert_int_equal(fk_jobconf_client_index(&c, "s777"), 776);
    assert_int_equal(fk_jobconf_client_index(&c, "s0"), -1);
    fk_jobconf_close(&c);
    snprintf(text, sizeof text, "method = m\ndataset = d\nclients = a, s[1-%d]\n",
             FK_JOBCONF_MAX_CLIENTS);
    assert_int_equal(fk_jobconf_parse(&c, text, "j", &err), FK_ELIMIT);
    snprintf(text, sizeof text, "at most %d clients", FK_JOBCONF_MAX_CLIENTS);
    assert_non_null(strstr(err.msg, text));
    fk_jobconf_close(&c);
    /* one client past the limit, listed after the ranges */
    snprintf(text, sizeof text, "method = m\ndataset = d\nclients = s[1-%d], z\n",
             FK_JOBCONF_MAX_CLIENTS);
    assert_int_equal(fk_jobconf_parse(&c, text, "j", &err), FK_ELIMIT);
    assert_non_null(strstr(err.msg, "more than"));
    fk_jobconf_close(&c);
    /* a bound too long to be a number is no range */
    assert_int_equal(fk_jobconf_parse(&c, "method = m\ndataset = d\nclients = a[0-99999999999]\n",
                                      "j", &err),
                     FK_EINVAL);
    fk_jobconf_close(&c);
    assert_int_equal(fk_jobconf_parse(&c, "method = m\ndataset = d\nclients = a[9-2]\n", "j", &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "backwards"));
    fk_jobconf_close(&c);
}

/* The fuzzer's slow input: text after a range's ']' makes it no range (it was
 * expanded, 21000 identities checked pairwise for duplicates). */
static void range_with_tail_is_one_identity(void **state)
{
    (void)state;
    fk_jobconf c;
    fk_err err;
    assert_int_equal(fk_jobconf_parse(&c,
                                      "method =m\ndataset = d\nclients = i,ae[6-20999]9]\xcf  c[-2]\n",
                                      "j", &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "not a certificate identity"));
    assert_int_equal(c.n_clients, 1);
    fk_jobconf_close(&c);
    /* duplicates across ranges are still found, naming both entries */
    assert_int_equal(fk_jobconf_parse(&c, "method = m\ndataset = d\nclients = a[0-500], b, a[500-501]\n",
                                      "j", &err),
                     FK_EINVAL);
    assert_non_null(strstr(err.msg, "'a500' is listed twice (entries 501 and 503)"));
    fk_jobconf_close(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_config_parses),
        cmocka_unit_test(defaults),
        cmocka_unit_test(client_ranges),
        cmocka_unit_test(method_sets_default_rounds),
        cmocka_unit_test(errors_name_key),
        cmocka_unit_test(client_limit),
        cmocka_unit_test(range_with_tail_is_one_identity),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
