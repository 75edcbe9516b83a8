/* The error contract: a failure comes back as a failure whether or not the caller passed an
 * fk_err, and a prefixed message keeps the failed call's code. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/base/bundle.h"
#include "common/base/err.h"
#include "common/net/modelfile.h"

static void prefix_returns_the_code_it_is_given(void **state)
{
    (void)state;
    /* before: fk_err_prefix(NULL, ...) returned FK_OK, so `return fk_err_prefix(err, ...)`
     * turned a failure into success for every caller that passed no fk_err */
    assert_int_equal(fk_err_prefix(NULL, FK_EIO, "file %s: ", "x.csv"), FK_EIO);
    assert_int_equal(fk_err_prefix(NULL, FK_EFORMAT, "x: "), FK_EFORMAT);
    fk_err err = {0};
    assert_int_equal(fk_err_set(&err, FK_EINVAL, "bad row %d", 3), FK_EINVAL);
    assert_int_equal(fk_err_prefix(&err, FK_EINVAL, "%s: ", "a.csv"), FK_EINVAL);
    assert_string_equal(err.msg, "a.csv: bad row 3");
    assert_int_equal(err.code, FK_EINVAL);
    /* the code given wins over a stale one in err */
    assert_int_equal(fk_err_prefix(&err, FK_EIO, "b: "), FK_EIO);
    assert_int_equal(err.code, FK_EIO);
    assert_string_equal(err.msg, "b: a.csv: bad row 3");
}

static void prefix_truncates_without_overflow(void **state)
{
    (void)state;
    fk_err err = {0};
    char big[600];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    assert_int_equal(fk_err_set(&err, FK_EINVAL, "%s", big), FK_EINVAL);
    assert_int_equal(fk_err_prefix(&err, FK_EINVAL, "%s", big), FK_EINVAL);
    assert_int_equal(strlen(err.msg), sizeof err.msg - 1);
}

/* Converted call sites, driven to fail with a NULL fk_err: each returns an error code. */
static void converted_sites_fail_without_an_err(void **state)
{
    (void)state;
    static const uint8_t junk[] = {0xff, 0xff, 0xff, 0x01, 0x02};
    fk_bundle b;
    fk_model_info info;
    fk_bundle_init(&b);
    assert_int_not_equal(fk_modelfile_decode(junk, sizeof junk, &b, &info, NULL), FK_OK);
    fk_bundle_close(&b);
    char path[] = "/tmp/fk_err_test_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    close(fd);
    fk_bundle_init(&b);
    assert_int_not_equal(fk_modelfile_read(path, &b, &info, NULL), FK_OK);
    fk_bundle_close(&b);
    fk_err err = {0};
    fk_bundle_init(&b);
    int rc = fk_modelfile_read(path, &b, &info, &err);
    assert_int_not_equal(rc, FK_OK);
    assert_int_equal(rc, err.code);
    assert_non_null(strstr(err.msg, path));
    fk_bundle_close(&b);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(prefix_returns_the_code_it_is_given),
        cmocka_unit_test(prefix_truncates_without_overflow),
        cmocka_unit_test(converted_sites_fail_without_an_err),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
