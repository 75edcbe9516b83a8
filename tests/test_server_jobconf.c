#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "server/jobconf.h"

static void full_config_parses(void **state)
{
    (void)state;
    fk_jobconf c;
    fk_err err;
    const char *text = "method = fedgrem\n"
                       "dataset = fashion-mnist\n"
                       "name = grem-demo\n"
                       "rounds = 25\nseed = 7\nquorum = 0.75\ndeadline = 2.5\nretries = 2\n"
                       "aggregator = trimmed-mean\ntrim = 0.2\nsampling = 0.5\n"
                       "clients = alice, bob,carol.example.org , dave@lab\n"
                       "lambda = 0.3\n";
    assert_int_equal(fk_jobconf_parse(&c, text, "job.conf", &err), FK_OK);
    assert_string_equal(c.method, "fedgrem");
    assert_string_equal(c.dataset, "fashion-mnist");
    assert_string_equal(c.name, "grem-demo");
    assert_int_equal(c.rounds, 25);
    assert_true(c.seed == 7);
    assert_true(c.quorum == 0.75 && c.deadline == 2.5 && c.sampling == 0.5);
    assert_int_equal(c.retries, 2);
    assert_int_equal(c.agg.kind, FK_AGG_TRIMMED);
    assert_true(c.agg.trim == 0.2);
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
    assert_int_equal(c.agg.kind, FK_AGG_FEDAVG);
    assert_true(isnan(c.sampling));
    assert_string_equal(c.name, "m");
    assert_int_equal(fk_jobconf_quorum(&c, 5), 3);
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
        {"method = m\ndataset = d\nclients = a\naggregator = mode\n", "mode"},
        {"method = m\ndataset = d\nclients = a\naggregator = trimmed-mean\ntrim = 0.6\n", "trim"},
        {"method = m\ndataset = d\nclients = a\nsampling = 2\n", "sampling"},
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(full_config_parses),
        cmocka_unit_test(defaults),
        cmocka_unit_test(client_ranges),
        cmocka_unit_test(errors_name_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
