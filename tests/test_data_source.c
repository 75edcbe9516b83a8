/* Data sources (loader options and preprocessing from parameters, as a client's config or
 * `fedkern data` give them) and the client split of `fedkern data split`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/data/prep.h"
#include "common/data/source.h"
#include "common/data/split.h"
#include "common/la/rng.h"

static char dir[64];

static const char *write_file(const char *name, const char *text)
{
    static char path[8][128];
    static int next;
    char *p = path[next++ % 8];
    snprintf(p, 128, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static int parse(fk_source *s, const char *ini, const char *prefix, fk_params *p, fk_err *err)
{
    fk_params_init(p);
    assert_int_equal(fk_params_parse_ini(p, ini, "test", err), FK_OK);
    return fk_source_parse(s, p, prefix, err);
}

static void label_column_header_delim_from_a_client_config(void **state)
{
    (void)state;
    const char *f = write_file("semi.csv", "a;label;b\n0.5;7;2\n1.5;8;4\n2.5;7;6\n");
    fk_params p;
    fk_source s;
    fk_err err;
    assert_int_equal(parse(&s, "[data]\nx = f\nx.label = 2\nx.header = true\nx.delim = semicolon\n",
                           "data.x.", &p, &err),
                     FK_OK);
    assert_int_equal(s.load.label, FK_LABEL_INDEX);
    assert_int_equal(s.load.label_col, 2);
    fk_dataset ds;
    assert_int_equal(fk_source_load(&ds, f, &s, NULL, &err), FK_OK);
    assert_int_equal(ds.X.rows, 3);
    assert_int_equal(ds.X.cols, 2);
    assert_int_equal(ds.n_classes, 2);
    assert_true(ds.classes[0] == 7 && ds.classes[1] == 8);
    assert_true(fk_mat_get(&ds.X, 2, 0) == 2.5 && fk_mat_get(&ds.X, 2, 1) == 6);
    fk_dataset_close(&ds);
    assert_non_null(fk_params_get(&p, "data.x")); /* the source: the client reads it */
    assert_null(fk_params_unused(&p));            /* every option key was read */
    fk_params_close(&p);
    /* a column that does not exist is one error naming it */
    assert_int_equal(parse(&s, "label = 9\ndelim = semicolon\nheader = 1\n", "", &p, &err), FK_OK);
    assert_int_not_equal(fk_source_load(&ds, f, &s, NULL, &err), FK_OK);
    assert_non_null(strstr(err.msg, "label column 9 does not exist"));
    fk_params_close(&p);
}

static void bad_options_name_the_key(void **state)
{
    (void)state;
    const struct {
        const char *ini, *needle;
    } cases[] = {
        {"x.label = middle\n", "data.x.label = 'middle'"},
        {"x.label = 0\n", "column number"},
        {"x.prep = l1,whiten\n", "unknown step 'whiten'"},
        {"x.delim = ab\n", "data.x.delim = 'ab'"},
        {"x.format = xls\n", "data.x.format = 'xls'"},
        {"x.header = maybe\n", "data.x.header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char ini[128];
        snprintf(ini, sizeof ini, "[data]\nx = f.csv\n%s", cases[i].ini);
        fk_params p;
        fk_source s;
        fk_err err;
        assert_int_equal(parse(&s, ini, "data.x.", &p, &err), FK_EINVAL);
        if (!strstr(err.msg, cases[i].needle))
            fail_msg("%s: '%s' lacks '%s'", cases[i].ini, err.msg, cases[i].needle);
        fk_params_close(&p);
    }
}

/* A saved z-score map applied to the same data reproduces the z-scored values bit for bit, and
 * through a file (17 digits) too: the train/test use of --save_affine / --affine. */
static void zscore_map_saved_and_applied_exactly(void **state)
{
    (void)state;
    char text[4096] = "";
    fk_rng r;
    fk_rng_init(&r, 3, 1);
    for (int i = 0; i < 40; i++) {
        size_t n = strlen(text);
        snprintf(text + n, sizeof text - n, "%d,%.6f,%.6f,5\n", i % 3, 10 * fk_rng_normal(&r) + 3,
                 fk_rng_uniform(&r));
    }
    const char *f = write_file("z.csv", text), *map = write_file("map.csv", "");
    fk_params p;
    fk_source s;
    fk_err err;
    assert_int_equal(parse(&s, "prep = l1,zscore\n", "", &p, &err), FK_OK);
    assert_int_equal(s.n_prep, 2);
    fk_dataset a, b;
    fk_affine m;
    assert_int_equal(fk_source_load(&a, f, &s, &m, &err), FK_OK);
    assert_int_equal(m.d, 3);
    fk_params_close(&p);
    assert_int_equal(fk_affine_save(&m, map, &err), FK_OK);
    char ini[256];
    snprintf(ini, sizeof ini, "prep = l1\naffine = %s\n", map);
    assert_int_equal(parse(&s, ini, "", &p, &err), FK_OK);
    assert_int_equal(fk_source_load(&b, f, &s, NULL, &err), FK_OK);
    for (size_t i = 0; i < a.X.rows; i++)
        assert_memory_equal(fk_mat_row(&a.X, i), fk_mat_row(&b.X, i), a.X.cols * sizeof(double));
    fk_dataset_close(&a);
    fk_dataset_close(&b);
    fk_affine_close(&m);
    fk_params_close(&p);
    /* a map of other width is refused; a map that overflows the data is caught as non-finite */
    const char *narrow = write_file("narrow.csv", "0,0\n1,1\n");
    const char *huge = write_file("huge.csv", "0,0,0\n1e300,1e300,1e300\n");
    const char *big = write_file("big.csv", "1,1e200,1,1\n");
    snprintf(ini, sizeof ini, "affine = %s\n", narrow);
    assert_int_equal(parse(&s, ini, "", &p, &err), FK_OK);
    assert_int_equal(fk_source_load(&b, f, &s, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "has 2 columns, the data 3"));
    fk_params_close(&p);
    snprintf(ini, sizeof ini, "affine = %s\n", huge);
    assert_int_equal(parse(&s, ini, "", &p, &err), FK_OK);
    assert_int_equal(fk_source_load(&b, big, &s, NULL, &err), FK_EFORMAT);
    assert_non_null(strstr(err.msg, "row 1, column 1 is infinite"));
    fk_params_close(&p);
}

static void catalog_and_synthetic_refuse_loader_options(void **state)
{
    (void)state;
    fk_params p;
    fk_source s;
    fk_err err;
    fk_dataset ds;
    assert_int_equal(parse(&s, "label = last\n", "", &p, &err), FK_OK);
    assert_int_equal(fk_source_load(&ds, "pendigits/train", &s, NULL, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "catalog data set"));
    assert_int_equal(fk_source_load(&ds, "synthetic/gmm:client=0", &s, NULL, &err), FK_EINVAL);
    fk_params_close(&p);
    /* prep on top of a synthetic set is fine */
    assert_int_equal(parse(&s, "prep = l2\n", "", &p, &err), FK_OK);
    assert_int_equal(fk_source_load(&ds, "synthetic/gmm:client=0", &s, NULL, &err), FK_OK);
    for (size_t i = 0; i < ds.X.rows; i++) { /* every row has unit norm after l2 */
        double ss = 0;
        for (size_t j = 0; j < ds.X.cols; j++)
            ss += fk_mat_get(&ds.X, i, j) * fk_mat_get(&ds.X, i, j);
        assert_true(fabs(ss - 1) < 1e-12);
    }
    fk_dataset_close(&ds);
    fk_params_close(&p);
    assert_int_equal(fk_source_load(&ds, "/nonexistent/x.csv", NULL, NULL, &err), FK_EIO);
}

/* ----------------------------------------------------------------------- split */

static void make_labelled(fk_dataset *ds, size_t n, int classes)
{
    double *y = malloc(n * sizeof *y);
    assert_int_equal(fk_dataset_init(ds, n, 2, 0), FK_OK);
    for (size_t i = 0; i < n; i++) {
        y[i] = (double)(i % (size_t)classes);
        fk_mat_set(&ds->X, i, 0, (double)(i % 7)); /* 7 groups for column:1 */
        fk_mat_set(&ds->X, i, 1, (double)i);
    }
    fk_err err;
    assert_int_equal(fk_dataset_set_labels(ds, y, &err), FK_OK);
    free(y);
}

static void split_kinds_are_deterministic_and_well_formed(void **state)
{
    (void)state;
    enum { N = 300, C = 6, K = 3 };
    fk_dataset ds;
    make_labelled(&ds, N, C);
    const char *kinds[] = {"iid", "label-skew", "dirichlet:0.3", "column:1"};
    fk_err err;
    for (size_t t = 0; t < 4; t++) {
        fk_split_spec sp;
        assert_int_equal(fk_split_parse(&sp, kinds[t], &err), FK_OK);
        int a[N], b[N], c[N], rows[K] = {0}, cls[K][C] = {{0}};
        assert_int_equal(fk_split_assign(&ds, &sp, K, 7, a, &err), FK_OK);
        assert_int_equal(fk_split_assign(&ds, &sp, K, 7, b, &err), FK_OK);
        assert_memory_equal(a, b, sizeof a); /* same seed, same split */
        assert_int_equal(fk_split_assign(&ds, &sp, K, 8, c, &err), FK_OK);
        if (sp.kind == FK_SPLIT_IID || sp.kind == FK_SPLIT_DIRICHLET) /* the seed matters */
            assert_memory_not_equal(a, c, sizeof a);
        for (int i = 0; i < N; i++) {
            assert_true(a[i] >= 0 && a[i] < K);
            rows[a[i]]++;
            cls[a[i]][ds.y[i]]++;
        }
        for (int k = 0; k < K; k++)
            assert_true(rows[k] > 0);
        if (sp.kind == FK_SPLIT_IID)
            for (int k = 0; k < K; k++)
                assert_int_equal(rows[k], N / K);
        if (sp.kind == FK_SPLIT_LABEL_SKEW) /* 6 classes over 3 clients: 2 classes each */
            for (int k = 0; k < K; k++) {
                int held = 0;
                for (int j = 0; j < C; j++)
                    held += cls[k][j] > 0;
                assert_int_equal(held, 2);
            }
        if (sp.kind == FK_SPLIT_COLUMN) /* a group never spans two clients */
            for (int i = 0; i < N; i++)
                for (int j = 0; j < N; j += 37)
                    if (fk_mat_get(&ds.X, i, 0) == fk_mat_get(&ds.X, j, 0))
                        assert_int_equal(a[i], a[j]);
    }
    fk_dataset_close(&ds);
}

static void split_refusals(void **state)
{
    (void)state;
    fk_err err;
    fk_split_spec sp;
    const char *bad[] = {"random", "dirichlet:0", "dirichlet:x", "column:0", "column:"};
    for (size_t i = 0; i < 5; i++)
        assert_int_equal(fk_split_parse(&sp, bad[i], &err), FK_EINVAL);
    fk_dataset ds;
    make_labelled(&ds, 20, 2);
    int a[20];
    assert_int_equal(fk_split_parse(&sp, "column:2", &err), FK_OK);
    assert_int_equal(fk_split_assign(&ds, &sp, 3, 1, a, &err), FK_OK); /* 20 distinct values */
    assert_int_equal(fk_split_parse(&sp, "column:3", &err), FK_OK);
    assert_int_equal(fk_split_assign(&ds, &sp, 3, 1, a, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "2 feature columns"));
    assert_int_equal(fk_split_parse(&sp, "column:1", &err), FK_OK);
    assert_int_equal(fk_split_assign(&ds, &sp, 8, 1, a, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "7 distinct values, fewer than the 8 clients"));
    assert_int_equal(fk_split_parse(&sp, "iid", &err), FK_OK);
    assert_int_equal(fk_split_assign(&ds, &sp, 21, 1, a, &err), FK_EINVAL);
    fk_dataset_close(&ds);
    fk_dataset u; /* unlabelled: label-based splits refused */
    assert_int_equal(fk_dataset_init(&u, 10, 1, 0), FK_OK);
    assert_int_equal(fk_split_parse(&sp, "dirichlet:1", &err), FK_OK);
    assert_int_equal(fk_split_assign(&u, &sp, 2, 1, a, &err), FK_EINVAL);
    assert_non_null(strstr(err.msg, "needs class labels"));
    fk_dataset_close(&u);
}

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/fk-source-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(label_column_header_delim_from_a_client_config),
        cmocka_unit_test(bad_options_name_the_key),
        cmocka_unit_test(zscore_map_saved_and_applied_exactly),
        cmocka_unit_test(catalog_and_synthetic_refuse_loader_options),
        cmocka_unit_test(split_kinds_are_deterministic_and_well_formed),
        cmocka_unit_test(split_refusals),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
