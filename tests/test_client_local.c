/* client/agent.c: the client's own local.* keys reach a job's parameters, a job cannot set
 * them, and without them the sfl job type refuses to run on this client. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <string.h>

#include "client/agent.h"
#include "common/methods/method.h"
#include "common/methods/sfl/sfl.h"

static void local_keys_reach_the_job(void **state)
{
    (void)state;
    fk_params job, local;
    fk_params_init(&job);
    fk_params_init(&local);
    fk_err err = {0};
    assert_int_equal(fk_params_parse_ini(&job, "method = sfl\nraw_sample_upload = acknowledged\n",
                                         "job", &err),
                     FK_OK);
    assert_int_equal(fk_params_parse_ini(&local, "server = x:1\n[local]\nallow_raw_upload = true\n"
                                                 "max_upload_fraction = 0.25\n",
                                         "client", &err),
                     FK_OK);
    assert_int_equal(fk_agent_local_params(&job, &local, 7, &err), FK_OK);
    assert_string_equal(fk_params_get(&job, "local.allow_raw_upload"), "true");
    assert_string_equal(fk_params_get(&job, "local.max_upload_fraction"), "0.25");
    assert_null(fk_params_get(&job, "server")); /* only local.* keys cross */
    fk_params_close(&job);
    fk_params_close(&local);
}

static void job_cannot_consent_for_the_client(void **state)
{
    (void)state;
    fk_params job;
    fk_params_init(&job);
    fk_err err = {0};
    assert_int_equal(fk_params_parse_ini(&job, "raw_sample_upload = acknowledged\n[local]\n"
                                               "allow_raw_upload = true\n",
                                         "job", &err),
                     FK_OK);
    assert_int_equal(fk_agent_local_params(&job, NULL, 9, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "local.allow_raw_upload"));
    fk_params_close(&job);
}

static void no_consent_no_sfl(void **state)
{
    (void)state;
    fk_params job;
    fk_params_init(&job);
    fk_err err = {0};
    assert_int_equal(fk_params_set(&job, "raw_sample_upload", "acknowledged"), FK_OK);
    assert_int_equal(fk_agent_local_params(&job, NULL, 1, &err), FK_OK);
    fk_dataset ds;
    assert_int_equal(fk_sfl_e31_make(1, 0, 10, 1, &ds, &err), FK_OK);
    void *cli = NULL;
    assert_int_equal(fk_method_sfl.client_init(&cli, &job, &ds, 0, 1, 1, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "allow_raw_upload = true"));
    fk_dataset_close(&ds);
    fk_params_close(&job);
}

/* The client knows exactly the local.* keys the job types read: one missing from its table
 * would make a consent impossible to give, one too many would accept a key nothing reads. */
static void local_keys_are_the_methods(void **state)
{
    (void)state;
    int n_client = 0;
    for (const fk_param_doc *d = fk_agent_local_docs; d->key; d++, n_client++)
        assert_int_equal(strncmp(d->key, "local.", 6), 0);
    int found[16] = {0};
    assert_true(n_client <= 16);
    for (int m = 0; fk_methods[m]; m++)
        for (const fk_param_doc *d = fk_methods[m]->keys; d && d->key; d++) {
            if (strncmp(d->key, "local.", 6))
                continue;
            size_t len = strcspn(d->key, " ");
            int at = -1;
            for (int k = 0; k < n_client && at < 0; k++)
                if (strcspn(fk_agent_local_docs[k].key, " ") == len &&
                    !strncmp(fk_agent_local_docs[k].key, d->key, len))
                    at = k;
            if (at < 0)
                fail_msg("job type %s reads %.*s, which the client does not accept",
                         fk_methods[m]->name, (int)len, d->key);
            found[at] = 1;
        }
    for (int k = 0; k < n_client; k++)
        if (!found[k])
            fail_msg("the client accepts %s, which no job type reads", fk_agent_local_docs[k].key);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(local_keys_reach_the_job),
        cmocka_unit_test(job_cannot_consent_for_the_client),
        cmocka_unit_test(no_consent_no_sfl),
        cmocka_unit_test(local_keys_are_the_methods),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
