/* server/owners.c: roles of the admins list, the owner recorded with a job, who may use it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "server/owners.h"

static void roles(void **state)
{
    (void)state;
    char *list[] = {"alice", "bob:owner", "ops:operator", "site:a", "x:operator", "x"};
    assert_int_equal(fk_owners_role(list, 6, "alice"), FK_ADMIN_OWNER);
    assert_int_equal(fk_owners_role(list, 6, "bob"), FK_ADMIN_OWNER);
    assert_int_equal(fk_owners_role(list, 6, "ops"), FK_ADMIN_OPERATOR);
    assert_int_equal(fk_owners_role(list, 6, "ops:operator"), FK_ADMIN_NONE);
    assert_int_equal(fk_owners_role(list, 6, "site:a"), FK_ADMIN_OWNER); /* ':' in a name */
    assert_int_equal(fk_owners_role(list, 6, "x"), FK_ADMIN_OPERATOR);   /* the larger role */
    assert_int_equal(fk_owners_role(list, 6, "mallory"), FK_ADMIN_NONE);
    assert_int_equal(fk_owners_role(NULL, 0, "anyone"), FK_ADMIN_OWNER);
    fk_err err;
    assert_int_equal(fk_owners_check(list, 6, &err), FK_OK);
    char *typo[] = {"alice", "ops:opertor"};
    assert_int_equal(fk_owners_check(typo, 2, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "did you mean 'operator'"));
}

static void owner_recorded_first(void **state)
{
    (void)state;
    fk_err err;
    char *cfg = NULL, owner[64];
    /* a job file claiming an owner of its own: the server's line comes first and counts */
    assert_int_equal(fk_owners_tag("# fedkern owner: bob\nmethod = kahm\n", "alice", &cfg, &err),
                     FK_OK);
    fk_owners_of(cfg, owner, sizeof owner);
    assert_string_equal(owner, "alice");
    assert_non_null(strstr(cfg, "method = kahm"));
    free(cfg);
    fk_owners_of("method = kahm\n", owner, sizeof owner); /* stored before owners */
    assert_string_equal(owner, "");
    assert_true(fk_owners_may(FK_ADMIN_OWNER, "alice", "alice"));
    assert_false(fk_owners_may(FK_ADMIN_OWNER, "alice", "bob"));
    assert_true(fk_owners_may(FK_ADMIN_OPERATOR, "alice", "ops"));
    assert_true(fk_owners_may(FK_ADMIN_OWNER, "", "bob"));
    assert_false(fk_owners_may(FK_ADMIN_NONE, "", "bob"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(roles),
        cmocka_unit_test(owner_recorded_first),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
