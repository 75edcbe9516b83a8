#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <math.h>
#include <matio.h>
#include <stdint.h>
#include <string.h>

#include "common/data/load.h"
#include "tests/data_fixtures.h"

/* Load must fail with code, and the single-line message must contain both needles. */
static void expect_error(const char *path, const fk_load_opts *o, int code, const char *needle1,
                         const char *needle2)
{
    fk_dataset ds;
    fk_err err = {0};
    int rc = fk_load(&ds, path, o, &err);
    if (rc != code || !strstr(err.msg, needle1) || (needle2 && !strstr(err.msg, needle2)))
        print_error("rc=%d msg='%s' (wanted %d, '%s', '%s')\n", rc, err.msg, code, needle1,
                    needle2 ? needle2 : "");
    assert_int_equal(rc, code);
    assert_non_null(strstr(err.msg, needle1));
    if (needle2)
        assert_non_null(strstr(err.msg, needle2));
    assert_null(strchr(err.msg, '\n'));
}

static void csv_label_first(void **state)
{
    fixture_dir *f = *state;
    const char *p = fixture_text(f, "a.csv", "3,0.5,2\n1, 1 ,-3e-1\n3,4,5\n", 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_int_equal(ds.X.rows, 3);
    assert_int_equal(ds.X.cols, 2);
    assert_int_equal(ds.n_classes, 2);
    assert_true(ds.classes[0] == 1 && ds.classes[1] == 3);
    assert_int_equal(ds.y[0], 1);
    assert_int_equal(ds.y[1], 0);
    assert_true(ds.y_raw[2] == 3);
    assert_true(fk_mat_get(&ds.X, 1, 1) == -0.3);
    assert_string_equal(ds.name, "a.csv");
    fk_dataset_close(&ds);
}

/* A UTF-8 byte order mark before the first cell (spreadsheet exports) is skipped, with and
 * without a header; one in a later line is still a bad cell. */
static void csv_bom(void **state)
{
    fixture_dir *f = *state;
    const char *p = fixture_text(f, "bom.csv", "\xEF\xBB\xBF" "3,0.5,2\n1,1,-3\n", 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_int_equal(ds.X.rows, 2);
    assert_true(ds.y_raw[0] == 3);
    fk_dataset_close(&ds);
    p = fixture_text(f, "bomh.csv", "\xEF\xBB\xBF" "y,a,b\n3,0.5,2\n1,1,-3\n", 0);
    fk_load_opts o = {.header = 1};
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_int_equal(ds.X.rows, 2);
    fk_dataset_close(&ds);
    p = fixture_text(f, "bom2.csv", "3,0.5,2\n\xEF\xBB\xBF" "1,1,-3\n", 0);
    expect_error(p, NULL, FK_EFORMAT, "bom2.csv:2", NULL);
}

static void csv_label_last_header_crlf_gzip(void **state)
{
    fixture_dir *f = *state;
    const char *text = "f1;f2;class\r\n\r\n 1;2;0\r\n3;4;9\r\n\n";
    fk_load_opts o = {.label = FK_LABEL_LAST, .header = 1, .delim = ';'};
    for (int gz = 0; gz < 2; gz++) {
        const char *p = fixture_text(f, gz ? "b.csv.gz" : "b.csv", text, gz);
        fk_dataset ds;
        fk_err err = {0};
        assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
        assert_int_equal(ds.X.rows, 2);
        assert_int_equal(ds.X.cols, 2);
        assert_true(fk_mat_get(&ds.X, 1, 0) == 3 && fk_mat_get(&ds.X, 1, 1) == 4);
        assert_true(ds.y_raw[0] == 0 && ds.y_raw[1] == 9);
        assert_int_equal(ds.y[1], 1);
        fk_dataset_close(&ds);
    }
}

static void csv_unlabelled_and_long_rows(void **state)
{
    fixture_dir *f = *state;
    /* rows longer than the reader's 64 KiB chunk must come through whole */
    size_t d = 20000, cap = d * 4 + 16;
    char *text = malloc(2 * cap);
    size_t at = 0;
    for (int r = 0; r < 2; r++) {
        for (size_t j = 0; j < d; j++)
            at += (size_t)snprintf(text + at, 2 * cap - at, "%s%d", j ? "," : "", (int)((j + r) % 7));
        text[at++] = '\n';
    }
    text[at] = '\0';
    const char *p = fixture_text(f, "wide.csv.gz", text, 1);
    free(text);
    fk_load_opts o = {.label = FK_LABEL_NONE};
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_int_equal(ds.X.rows, 2);
    assert_int_equal(ds.X.cols, d);
    assert_null(ds.y);
    assert_int_equal(ds.n_classes, 0);
    assert_true(fk_mat_get(&ds.X, 1, d - 1) == (double)((d - 1 + 1) % 7));
    fk_dataset_close(&ds);
}

static void csv_bad_input(void **state)
{
    fixture_dir *f = *state;
    expect_error(fixture_text(f, "ragged.csv", "1,2,3\n1,2,3\n1,2\n", 0), NULL, FK_EFORMAT, "ragged.csv:3",
                 "ragged");
    expect_error(fixture_text(f, "word.csv", "1,2,3\n1,x2,3\n", 0), NULL, FK_EFORMAT, "word.csv:2",
                 "non-numeric");
    expect_error(fixture_text(f, "emptycell.csv", "1,,3\n", 0), NULL, FK_EFORMAT, "emptycell.csv:1",
                 "empty cell");
    expect_error(fixture_text(f, "nan.csv", "1,2,3\n1,nan,3\n", 0), NULL, FK_EFORMAT, "nan.csv:2", "NaN");
    expect_error(fixture_text(f, "inf.csv", "1,2,-Inf\n", 0), NULL, FK_EFORMAT, "inf.csv:1", "Inf");
    expect_error(fixture_text(f, "huge.csv", "1,2,1e999\n", 0), NULL, FK_EFORMAT, "huge.csv:1", "Inf");
    expect_error(fixture_text(f, "nul.csv", "1,2\n1,\0002\n", 0), NULL, FK_EFORMAT, "nul.csv", NULL);
    expect_error(fixture_text(f, "empty.csv", "", 0), NULL, FK_EFORMAT, "empty.csv", "no data rows");
    expect_error(fixture_text(f, "blank.csv.gz", "\n \n", 1), NULL, FK_EFORMAT, "blank.csv.gz",
                 "no data rows");
    fk_load_opts hdr = {.header = 1};
    expect_error(fixture_text(f, "hdr.csv", "a,b\n", 0), &hdr, FK_EFORMAT, "hdr.csv", "only a header");
    expect_error(fixture_text(f, "onecol.csv", "1\n2\n", 0), NULL, FK_EFORMAT, "onecol.csv:1", "--label none");
    expect_error(fixture_path(f, "missing.csv"), NULL, FK_EIO, "missing.csv", "cannot open");
    expect_error(fixture_text(f, "what.xyz", "1,2\n", 0), NULL, FK_EINVAL, "what.xyz", "--format");
}

static void csv_truncated_gzip(void **state)
{
    fixture_dir *f = *state;
    char text[4096];
    size_t at = 0;
    for (int i = 0; i < 300; i++)
        at += (size_t)snprintf(text + at, sizeof text - at, "%d,%d\n", i % 3, i * 7919 % 1000);
    const char *p = fixture_write(f, "t.csv.gz", text, at, 1);
    FILE *in = fopen(p, "rb");
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    assert_true(n > 40);
    fixture_write(f, "cut.csv.gz", buf, n / 2, 0);
    expect_error(fixture_path(f, "cut.csv.gz"), NULL, FK_EFORMAT, "cut.csv.gz", "truncated");
    buf[n / 2] ^= 0x55; /* corrupt deflate data in a full-length file */
    buf[n / 2 + 1] ^= 0xaa;
    fixture_write(f, "bad.csv.gz", buf, n, 0);
    fk_dataset ds;
    fk_err err = {0};
    int rc = fk_load(&ds, fixture_path(f, "bad.csv.gz"), NULL, &err);
    if (rc == FK_OK)
        fk_dataset_close(&ds); /* a flip can, rarely, still decode; then the CRC is not checked */
    else
        assert_non_null(strstr(err.msg, "bad.csv.gz"));
}

/* IDX: big-endian header then data. */
static size_t idx_bytes(unsigned char *b, int type, int ndim, const uint32_t *dims, const unsigned char *data,
                        size_t n)
{
    size_t at = 0;
    b[at++] = 0;
    b[at++] = 0;
    b[at++] = (unsigned char)type;
    b[at++] = (unsigned char)ndim;
    for (int i = 0; i < ndim; i++) {
        b[at++] = (unsigned char)(dims[i] >> 24);
        b[at++] = (unsigned char)(dims[i] >> 16);
        b[at++] = (unsigned char)(dims[i] >> 8);
        b[at++] = (unsigned char)dims[i];
    }
    memcpy(b + at, data, n);
    return at + n;
}

static void idx_images_and_labels(void **state)
{
    fixture_dir *f = *state;
    unsigned char img[64], lab[64], px[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}, ly[3] = {7, 2, 7};
    uint32_t di[3] = {3, 2, 2}, dl[1] = {3};
    size_t ni = idx_bytes(img, 0x08, 3, di, px, 12), nl = idx_bytes(lab, 0x08, 1, dl, ly, 3);
    for (int gz = 0; gz < 2; gz++) {
        fixture_write(f, gz ? "s-labels-idx1-ubyte.gz" : "s-labels-idx1-ubyte", lab, nl, gz);
        const char *p = fixture_write(f, gz ? "s-images-idx3-ubyte.gz" : "s-images-idx3-ubyte", img, ni, gz);
        fk_dataset ds;
        fk_err err = {0};
        assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
        assert_int_equal(ds.X.rows, 3);
        assert_int_equal(ds.X.cols, 4);
        assert_true(fk_mat_get(&ds.X, 2, 3) == 255);
        assert_int_equal(ds.n_classes, 2);
        assert_int_equal(ds.y[0], 1);
        assert_int_equal(ds.y[1], 0);
        fk_dataset_close(&ds);
    }
    /* signed 16-bit and float32 element types */
    unsigned char s16[4] = {0xff, 0xfe, 0x01, 0x00}, f32[4] = {0x3f, 0xc0, 0x00, 0x00}, buf[64];
    uint32_t d2[2] = {1, 2}, d1[2] = {1, 1};
    const char *p = fixture_write(f, "s16.idx", buf, idx_bytes(buf, 0x0B, 2, d2, s16, 4), 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_true(fk_mat_get(&ds.X, 0, 0) == -2 && fk_mat_get(&ds.X, 0, 1) == 256);
    fk_dataset_close(&ds);
    p = fixture_write(f, "f32.idx", buf, idx_bytes(buf, 0x0D, 2, d1, f32, 4), 0);
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_true(fk_mat_get(&ds.X, 0, 0) == 1.5);
    fk_dataset_close(&ds);
}

static void idx_bad_input(void **state)
{
    fixture_dir *f = *state;
    unsigned char b[64], px[12] = {0};
    uint32_t di[3] = {3, 2, 2}, dl[1] = {4};
    size_t n = idx_bytes(b, 0x08, 3, di, px, 12);
    fixture_write(f, "cut-images-idx3-ubyte", b, n - 5, 0);
    expect_error(fixture_path(f, "cut-images-idx3-ubyte"), NULL, FK_EFORMAT, "cut-images-idx3-ubyte",
                 "byte 16: truncated");
    fixture_write(f, "cuth.idx", b, 9, 0);
    expect_error(fixture_path(f, "cuth.idx"), NULL, FK_EFORMAT, "cuth.idx", "truncated");
    fixture_write(f, "cut.idx.gz", b, n - 1, 1);
    expect_error(fixture_path(f, "cut.idx.gz"), NULL, FK_EFORMAT, "cut.idx.gz", "truncated");
    b[2] = 0x07;
    fixture_write(f, "magic.idx", b, n, 0);
    expect_error(fixture_path(f, "magic.idx"), NULL, FK_EFORMAT, "magic.idx", "wrong magic");
    b[2] = 0x08;
    fixture_write(f, "extra.idx", b, n + 1, 0);
    expect_error(fixture_path(f, "extra.idx"), NULL, FK_EFORMAT, "extra.idx", "trailing");
    /* labels file with the wrong count */
    unsigned char l[64], ly[4] = {1, 2, 3, 4};
    fixture_write(f, "m-labels-idx1-ubyte", l, idx_bytes(l, 0x08, 1, dl, ly, 4), 0);
    const char *p = fixture_write(f, "m-images-idx3-ubyte", b, n, 0);
    expect_error(p, NULL, FK_EINVAL, "m-labels-idx1-ubyte", "labels for the 3 samples");
    fk_load_opts none = {.label = FK_LABEL_NONE};
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, &none, &err), FK_OK);
    assert_null(ds.y);
    fk_dataset_close(&ds);
    /* a header promising far more than a small gzip file can expand to: refused before allocating */
    uint32_t lie[2] = {1000000, 1000};
    fixture_write(f, "lie.idx.gz", b, idx_bytes(b, 0x08, 2, lie, px, 12), 1);
    expect_error(fixture_path(f, "lie.idx.gz"), NULL, FK_EFORMAT, "lie.idx.gz", "promises");
    /* a 2^31 x 2^31 header must be refused before any allocation */
    uint32_t big[2] = {0x80000000u, 0x80000000u};
    fixture_write(f, "big.idx", b, idx_bytes(b, 0x08, 2, big, px, 0), 0);
    expect_error(fixture_path(f, "big.idx"), NULL, FK_ELIMIT, "big.idx", "limit");
}

static void write_mat(const char *path, const char *fname, enum matio_classes fc, enum matio_types ft,
                      void *fdata, size_t r, size_t c, const char *lname, double *labels, size_t nl)
{
    mat_t *m = Mat_CreateVer(path, NULL, MAT_FT_MAT5);
    assert_non_null(m);
    size_t dims[2] = {r, c};
    matvar_t *v = Mat_VarCreate(fname, fc, ft, 2, dims, fdata, 0);
    assert_int_equal(Mat_VarWrite(m, v, MAT_COMPRESSION_ZLIB), 0);
    Mat_VarFree(v);
    if (lname) {
        size_t ld[2] = {nl, 1};
        v = Mat_VarCreate(lname, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, ld, labels, 0);
        assert_int_equal(Mat_VarWrite(m, v, MAT_COMPRESSION_NONE), 0);
        Mat_VarFree(v);
    }
    Mat_Close(m);
}

static void mat_variables(void **state)
{
    fixture_dir *f = *state;
    /* 3 samples x 2 features, uint8, stored column-major */
    uint8_t u8[6] = {1, 2, 3, 10, 20, 30};
    double lab[3] = {2, 1, 2};
    const char *p = fixture_path(f, "u8.mat");
    write_mat(p, "fts", MAT_C_UINT8, MAT_T_UINT8, u8, 3, 2, "labels", lab, 3);
    fk_load_opts o = {.var = "fts", .label_var = "labels"};
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_int_equal(ds.X.rows, 3);
    assert_int_equal(ds.X.cols, 2);
    assert_true(fk_mat_get(&ds.X, 2, 0) == 3 && fk_mat_get(&ds.X, 2, 1) == 30);
    assert_int_equal(ds.n_classes, 2);
    assert_int_equal(ds.y[0], 1);
    fk_dataset_close(&ds);
    /* defaults: largest numeric variable and the conventional label name */
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_int_equal(ds.n_classes, 2);
    fk_dataset_close(&ds);
    /* JDA layout: single-precision X_src is d x n, Y_src picked by name */
    float x[6] = {1, 2, 3, 4, 5, 6};
    p = fixture_path(f, "jda.mat");
    write_mat(p, "X_src", MAT_C_SINGLE, MAT_T_SINGLE, x, 2, 3, "Y_src", lab, 3);
    fk_load_opts jda = {.var = "X_src", .samples_in_columns = 1};
    assert_int_equal(fk_load(&ds, p, &jda, &err), FK_OK);
    assert_int_equal(ds.X.rows, 3);
    assert_int_equal(ds.X.cols, 2);
    assert_true(fk_mat_get(&ds.X, 1, 0) == 3 && fk_mat_get(&ds.X, 1, 1) == 4);
    assert_int_equal(ds.n_classes, 2);
    fk_dataset_close(&ds);
    fk_load_opts rows = {.var = "X_src", .label_var = "Y_src"};
    expect_error(p, &rows, FK_EINVAL, "jda.mat", "--samples_in_columns");
}

static void mat_bad_input(void **state)
{
    fixture_dir *f = *state;
    uint8_t u8[6] = {1, 2, 3, 10, 20, 30};
    const char *p = fixture_path(f, "x.mat");
    write_mat(p, "fts", MAT_C_UINT8, MAT_T_UINT8, u8, 3, 2, NULL, NULL, 0);
    fk_load_opts o = {.var = "feas"};
    expect_error(p, &o, FK_ENOTFOUND, "x.mat", "no variable 'feas' (variables: fts)");
    fk_load_opts l = {.var = "fts", .label_var = "gnd"};
    expect_error(p, &l, FK_ENOTFOUND, "x.mat", "no label variable 'gnd'");
    double bad[2] = {1, NAN};
    p = fixture_path(f, "nan.mat");
    write_mat(p, "X", MAT_C_DOUBLE, MAT_T_DOUBLE, bad, 1, 2, NULL, NULL, 0);
    expect_error(p, NULL, FK_EFORMAT, "nan.mat", "NaN or Inf");
    expect_error(fixture_text(f, "text.mat", "this is not a mat file at all", 0), NULL, FK_EFORMAT, "text.mat",
                 "too short");
    char hdr[200];
    memset(hdr, ' ', sizeof hdr);
    expect_error(fixture_write(f, "magic.mat", hdr, sizeof hdr, 0), NULL, FK_EFORMAT, "magic.mat",
                 "wrong magic");
    /* a real file cut short */
    double big[400];
    for (int i = 0; i < 400; i++)
        big[i] = i;
    p = fixture_path(f, "full.mat");
    write_mat(p, "X", MAT_C_DOUBLE, MAT_T_DOUBLE, big, 20, 20, NULL, NULL, 0);
    FILE *in = fopen(p, "rb");
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, in);
    fclose(in);
    fixture_write(f, "cut.mat", buf, n - 100, 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_not_equal(fk_load(&ds, fixture_path(f, "cut.mat"), NULL, &err), FK_OK);
    assert_non_null(strstr(err.msg, "cut.mat"));
}

/* Cells and structs beside the features pass the structural check; sparse is refused. */
static void mat_cells_structs_sparse(void **state)
{
    fixture_dir *f = *state;
    const char *p = fixture_path(f, "mixed.mat");
    mat_t *m = Mat_CreateVer(p, NULL, MAT_FT_MAT5);
    assert_non_null(m);
    size_t d2[2] = {2, 1}, d11[2] = {1, 1}, d3[2] = {3, 2};
    double a = 1, b = 2, x[6] = {1, 2, 3, 4, 5, 6};
    matvar_t *cells[2] = {Mat_VarCreate(NULL, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, d11, &a, 0),
                          Mat_VarCreate(NULL, MAT_C_CHAR, MAT_T_UINT8, 2, d11, "z", 0)};
    matvar_t *cell = Mat_VarCreate("names", MAT_C_CELL, MAT_T_CELL, 2, d2, cells, 0);
    const char *fields[2] = {"alpha", "beta"};
    matvar_t *st = Mat_VarCreateStruct("cfg", 2, d11, fields, 2);
    Mat_VarSetStructFieldByName(st, "alpha", 0, Mat_VarCreate(NULL, MAT_C_DOUBLE, MAT_T_DOUBLE, 2, d11, &b, 0));
    matvar_t *fts = Mat_VarCreate("fts", MAT_C_DOUBLE, MAT_T_DOUBLE, 2, d3, x, 0);
    assert_int_equal(Mat_VarWrite(m, cell, MAT_COMPRESSION_ZLIB), 0);
    assert_int_equal(Mat_VarWrite(m, st, MAT_COMPRESSION_NONE), 0);
    assert_int_equal(Mat_VarWrite(m, fts, MAT_COMPRESSION_NONE), 0);
    Mat_VarFree(cell);
    Mat_VarFree(st);
    Mat_VarFree(fts);
    Mat_Close(m);
    fk_load_opts o = {.var = "fts"};
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_int_equal(ds.X.rows, 3);
    fk_dataset_close(&ds);
    o.var = "names";
    expect_error(p, &o, FK_EFORMAT, "mixed.mat", "not a real numeric array");

    p = fixture_path(f, "sparse.mat");
    m = Mat_CreateVer(p, NULL, MAT_FT_MAT5);
    mat_uint32_t ir[1] = {0}, jc[3] = {0, 1, 1};
    double v[1] = {5};
    mat_sparse_t sp = {.nzmax = 1, .ir = ir, .nir = 1, .jc = jc, .njc = 3, .ndata = 1, .data = v};
    matvar_t *s = Mat_VarCreate("S", MAT_C_SPARSE, MAT_T_DOUBLE, 2, d2, &sp, MAT_F_DONT_COPY_DATA);
    assert_int_equal(Mat_VarWrite(m, s, MAT_COMPRESSION_NONE), 0);
    s->data = NULL;
    Mat_VarFree(s);
    Mat_Close(m);
    expect_error(p, NULL, FK_EFORMAT, "sparse.mat", "sparse variables are not supported");
}

/* NPY v1 file: header dict padded so data starts at a multiple of 64. */
static size_t npy_bytes(unsigned char *b, int major, const char *dict, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = (pre + dl + 1 + 63) / 64 * 64 - pre;
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    b[8] = (unsigned char)hlen;
    b[9] = (unsigned char)(hlen >> 8);
    if (major != 1)
        b[10] = b[11] = 0;
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, dl);
    b[pre + hlen - 1] = '\n';
    memcpy(b + pre + hlen, data, n);
    return pre + hlen + n;
}

static void npy_arrays(void **state)
{
    fixture_dir *f = *state;
    unsigned char b[512];
    double x[6] = {1, 2, 3, 4, 5, 6};
    const char *p = fixture_write(
        f, "c.npy", b, npy_bytes(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", x, 48), 0);
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_int_equal(ds.X.rows, 2);
    assert_int_equal(ds.X.cols, 3);
    assert_true(fk_mat_get(&ds.X, 1, 0) == 4);
    assert_null(ds.y);
    fk_dataset_close(&ds);
    /* Fortran order int32, version 2 header, gzip */
    int32_t xi[6] = {1, 4, 2, 5, 3, -6};
    p = fixture_write(
        f, "f.npy.gz", b, npy_bytes(b, 2, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }", xi, 24), 1);
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_true(fk_mat_get(&ds.X, 0, 1) == 2 && fk_mat_get(&ds.X, 1, 2) == -6);
    fk_dataset_close(&ds);
    /* uint8 vector, int64 labels, float32 samples in columns */
    uint8_t u[2] = {9, 200};
    int64_t y[2] = {5, -1};
    float xf[4] = {1, 2, 3, 4};
    fixture_write(f, "y.npy", b, npy_bytes(b, 1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", y, 16), 0);
    p = fixture_write(f, "u.npy", b, npy_bytes(b, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", u, 2), 0);
    fk_load_opts o = {0};
    char ypath[600];
    snprintf(ypath, sizeof ypath, "%s/y.npy", f->dir);
    o.label_path = ypath;
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_int_equal(ds.X.cols, 1);
    assert_true(fk_mat_get(&ds.X, 1, 0) == 200);
    assert_true(ds.y_raw[1] == -1 && ds.y[1] == 0 && ds.y[0] == 1);
    fk_dataset_close(&ds);
    p = fixture_write(f, "t.npy", b, npy_bytes(b, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", xf, 16), 0);
    o.samples_in_columns = 1;
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_true(fk_mat_get(&ds.X, 0, 1) == 3 && fk_mat_get(&ds.X, 1, 0) == 2);
    fk_dataset_close(&ds);
}

static void npy_bad_input(void **state)
{
    fixture_dir *f = *state;
    unsigned char b[512];
    double x[6] = {1, 2, 3, 4, 5, NAN};
    const char *good = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }";
    size_t n = npy_bytes(b, 1, good, x, 48);
    expect_error(fixture_write(f, "nan.npy", b, n, 0), NULL, FK_EFORMAT, "nan.npy", "NaN");
    expect_error(fixture_write(f, "cut.npy", b, n - 9, 0), NULL, FK_EFORMAT, "cut.npy", "byte 128: truncated");
    expect_error(fixture_write(f, "cut.npy.gz", b, n - 9, 1), NULL, FK_EFORMAT, "cut.npy.gz", "truncated");
    expect_error(fixture_write(f, "short.npy", b, 5, 0), NULL, FK_EFORMAT, "short.npy", "truncated");
    n = npy_bytes(b, 1, "{'descr': '<c16', 'fortran_order': False, 'shape': (2, 3), }", x, 48);
    expect_error(fixture_write(f, "cplx.npy", b, n, 0), NULL, FK_EFORMAT, "cplx.npy", "unsupported dtype");
    n = npy_bytes(b, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, x), }", x, 48);
    expect_error(fixture_write(f, "shape.npy", b, n, 0), NULL, FK_EFORMAT, "shape.npy", "'shape'");
    n = npy_bytes(b, 1, good, x, 48);
    b[1] = 'X';
    expect_error(fixture_write(f, "magic.npy", b, n, 0), NULL, FK_EFORMAT, "magic.npy", "wrong magic");
    expect_error(fixture_write(f, "empty.npy", b, 0, 0), NULL, FK_EFORMAT, "empty.npy", "truncated");
}

static void libsvm_sparse_to_dense(void **state)
{
    fixture_dir *f = *state;
    char p[600];
    snprintf(p, sizeof p, "%s", fixture_text(f, "a.libsvm", "+1 1:0.5 3:2\n-1 2:1 # comment\n\n+1  4:1.5\n", 0));
    fk_dataset ds;
    fk_err err = {0};
    assert_int_equal(fk_load(&ds, p, NULL, &err), FK_OK);
    assert_int_equal(ds.X.rows, 3);
    assert_int_equal(ds.X.cols, 4);
    assert_true(fk_mat_get(&ds.X, 0, 2) == 2 && fk_mat_get(&ds.X, 0, 1) == 0);
    assert_true(fk_mat_get(&ds.X, 2, 3) == 1.5);
    assert_int_equal(ds.y[1], 0);
    assert_int_equal(ds.y[0], 1);
    fk_dataset_close(&ds);
    fk_load_opts o = {.cols = 6};
    assert_int_equal(fk_load(&ds, p, &o, &err), FK_OK);
    assert_int_equal(ds.X.cols, 6);
    fk_dataset_close(&ds);
    expect_error(fixture_text(f, "order.svm", "1 3:1 2:1\n", 0), NULL, FK_EFORMAT, "order.svm:1", "increase");
    expect_error(fixture_text(f, "zero.svm", "1 0:1\n", 0), NULL, FK_EFORMAT, "zero.svm:1", "1-based");
    expect_error(fixture_text(f, "tok.svm", "1 1:1\n1 2=1\n", 0), NULL, FK_EFORMAT, "tok.svm:2", "index:value");
    expect_error(fixture_text(f, "val.svm", "1 1:abc\n", 0), NULL, FK_EFORMAT, "val.svm:1", "non-numeric");
    expect_error(fixture_text(f, "lab.svm", "x 1:1\n", 0), NULL, FK_EFORMAT, "lab.svm:1", "label");
    fk_load_opts small = {.cols = 3};
    expect_error(p, &small, FK_EFORMAT, "a.libsvm:4", "at most 3");
    expect_error(fixture_text(f, "empty.svm", "# nothing\n", 0), NULL, FK_EFORMAT, "empty.svm", "no data rows");
}

static void formats_by_name(void **state)
{
    (void)state;
    assert_int_equal(fk_format_from_path("x/amazon_SURF_L10.csv.gz"), FK_FORMAT_CSV);
    assert_int_equal(fk_format_from_path("a.CSV"), FK_FORMAT_CSV);
    assert_int_equal(fk_format_from_path("train-images-idx3-ubyte.gz"), FK_FORMAT_IDX);
    assert_int_equal(fk_format_from_path("d.svm"), FK_FORMAT_LIBSVM);
    assert_int_equal(fk_format_from_path("d.mat"), FK_FORMAT_MAT);
    assert_int_equal(fk_format_from_path("d.npy"), FK_FORMAT_NPY);
    assert_int_equal(fk_format_from_path("d.bin"), FK_FORMAT_AUTO);
    assert_int_equal(fk_format_parse("libsvm"), FK_FORMAT_LIBSVM);
    assert_int_equal(fk_format_parse("nope"), FK_FORMAT_AUTO);
    assert_string_equal(fk_format_name(FK_FORMAT_NPY), "npy");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(csv_label_first, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(csv_bom, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(csv_label_last_header_crlf_gzip, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(csv_unlabelled_and_long_rows, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(csv_bad_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(csv_truncated_gzip, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(idx_images_and_labels, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(idx_bad_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(mat_variables, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(mat_bad_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(mat_cells_structs_sparse, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(npy_arrays, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(npy_bad_input, fixture_setup, fixture_teardown),
        cmocka_unit_test_setup_teardown(libsvm_sparse_to_dense, fixture_setup, fixture_teardown),
        cmocka_unit_test(formats_by_name),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
