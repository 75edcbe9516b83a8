#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/data/mat_cache.h"
#include "data_fixtures.h"

static void fill(fk_mat *Y)
{
    assert_int_equal(fk_mat_init(Y, 7, 3), FK_OK);
    for (size_t i = 0; i < 21; i++)
        Y->data[i] = 0.5 * (double)i - 3.0;
}

static void round_trip_and_missing(void **state)
{
    (void)state;
    fixture_dir f;
    assert_int_equal(fixture_open(&f), 0);
    fk_mat Y, Z;
    fill(&Y);
    fk_err err;
    char path[600];
    snprintf(path, sizeof path, "%s/sub/dir/emb.f64", f.dir); /* parent dirs are created */
    assert_int_equal(fk_mat_cache_read(path, "k1", 7, 3, &Z, &err), FK_ENOTFOUND);
    assert_int_equal(fk_mat_cache_write(path, "k1", &Y, &err), FK_OK);
    assert_int_equal(fk_mat_cache_read(path, "k1", 7, 3, &Z, &err), FK_OK);
    assert_memory_equal(Y.data, Z.data, 21 * sizeof(double));
    fk_mat_close(&Z);
    char tmp[700]; /* no temporary left behind */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    struct stat st;
    assert_int_not_equal(stat(tmp, &st), 0);
    /* other key or shape: a clear error naming the file */
    assert_int_equal(fk_mat_cache_read(path, "k2", 7, 3, &Z, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "emb.f64"));
    assert_non_null(strstr(err.msg, "delete it"));
    assert_int_equal(fk_mat_cache_read(path, "k1", 3, 7, &Z, &err), FK_EFORMAT);
    /* truncated and corrupted files */
    assert_int_equal(truncate(path, 100), 0);
    assert_int_equal(fk_mat_cache_read(path, "k1", 7, 3, &Z, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "wrong size"));
    assert_int_equal(fk_mat_cache_write(path, "k1", &Y, &err), FK_OK);
    FILE *fp = fopen(path, "r+b");
    assert_non_null(fp);
    fputc('X', fp); /* magic */
    fclose(fp);
    assert_int_equal(fk_mat_cache_read(path, "k1", 7, 3, &Z, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "magic"));
    assert_int_equal(fk_mat_cache_write(path, "k1", &Y, &err), FK_OK); /* overwrite: valid again */
    assert_int_equal(fk_mat_cache_read(path, "k1", 7, 3, &Z, &err), FK_OK);
    fk_mat_close(&Z);
    fk_mat_close(&Y);
    remove(path);
    snprintf(path, sizeof path, "%s/sub/dir", f.dir);
    rmdir(path);
    snprintf(path, sizeof path, "%s/sub", f.dir);
    rmdir(path);
    rmdir(f.dir);
}

static void cache_dir_choice(void **state)
{
    (void)state;
    char d[256];
    fk_err err;
    assert_int_equal(fk_mat_cache_dir("/x/y", d, sizeof d, &err), FK_OK);
    assert_string_equal(d, "/x/y");
    setenv("XDG_CACHE_HOME", "/xdg", 1);
    assert_int_equal(fk_mat_cache_dir(NULL, d, sizeof d, &err), FK_OK);
    assert_string_equal(d, "/xdg/fedkern");
    unsetenv("XDG_CACHE_HOME");
    setenv("HOME", "/home/u", 1);
    assert_int_equal(fk_mat_cache_dir("", d, sizeof d, &err), FK_OK);
    assert_string_equal(d, "/home/u/.cache/fedkern");
    unsetenv("HOME");
    assert_int_equal(fk_mat_cache_dir(NULL, d, sizeof d, &err), FK_ENOTFOUND);
}

static void unwritable_dir_errors(void **state)
{
    (void)state;
    fk_mat Y;
    fill(&Y);
    fk_err err;
    assert_int_equal(fk_mat_cache_write("/proc/fk-no/emb.f64", "k", &Y, &err), FK_EIO);
    assert_non_null(strstr(err.msg, "cannot"));
    fk_mat_close(&Y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trip_and_missing),
        cmocka_unit_test(cache_dir_choice),
        cmocka_unit_test(unwritable_dir_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
