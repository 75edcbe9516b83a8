#include "common/data/catalog.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/data/load.h"
#include "common/data/prep.h"

#define FASHION_DIR "/usr/share/datasets/fashion-mnist"

typedef enum prep { PREP_NONE, PREP_L1_ZSCORE, PREP_L2, PREP_DIV255, PREP_PARKINSONS } prep;

typedef struct entry {
    const char *name;
    const char *file;     /* relative to data_dir, or absolute */
    fk_label_pos label;
    prep prep;
    int class_lo, class_hi; /* documented raw label range; ignored for regression */
    int target_col;         /* PREP_PARKINSONS: column of the target in the file */
    int header;             /* the file starts with a header line */
} entry;

static const entry entries[] = {
    {"office-surf/amazon", "office-caltech10-surf/amazon_SURF_L10.csv.gz", FK_LABEL_FIRST, PREP_L1_ZSCORE, 1, 10, 0, 0},
    {"office-surf/caltech", "office-caltech10-surf/Caltech10_SURF_L10.csv.gz", FK_LABEL_FIRST, PREP_L1_ZSCORE, 1, 10, 0, 0},
    {"office-surf/webcam", "office-caltech10-surf/webcam_SURF_L10.csv.gz", FK_LABEL_FIRST, PREP_L1_ZSCORE, 1, 10, 0, 0},
    {"office-surf/dslr", "office-caltech10-surf/dslr_SURF_L10.csv.gz", FK_LABEL_FIRST, PREP_L1_ZSCORE, 1, 10, 0, 0},
    {"office-decaf6/webcam", "office-caltech10-decaf6/webcam.csv.gz", FK_LABEL_FIRST, PREP_L1_ZSCORE, 1, 10, 0, 0},
    {"office-decaf6/dslr", "office-caltech10-decaf6/dslr.csv.gz", FK_LABEL_FIRST, PREP_L1_ZSCORE, 1, 10, 0, 0},
    {"mnist-usps/mnist", "mnist-usps/MNIST.csv.gz", FK_LABEL_FIRST, PREP_L2, 1, 10, 0, 0},
    {"mnist-usps/usps", "mnist-usps/USPS.csv.gz", FK_LABEL_FIRST, PREP_L2, 1, 10, 0, 0},
    {"coil20/1", "coil20/COIL1.csv.gz", FK_LABEL_FIRST, PREP_L2, 1, 20, 0, 0},
    {"coil20/2", "coil20/COIL2.csv.gz", FK_LABEL_FIRST, PREP_L2, 1, 20, 0, 0},
    {"pendigits/train", "uci-pendigits/pendigits.tra", FK_LABEL_LAST, PREP_NONE, 0, 9, 0, 0},
    {"pendigits/test", "uci-pendigits/pendigits.tes", FK_LABEL_LAST, PREP_NONE, 0, 9, 0, 0},
    {"fashion-mnist/train", FASHION_DIR "/train-images-idx3-ubyte.gz", FK_LABEL_DEFAULT, PREP_DIV255, 0, 9, 0, 0},
    {"fashion-mnist/test", FASHION_DIR "/t10k-images-idx3-ubyte.gz", FK_LABEL_DEFAULT, PREP_DIV255, 0, 9, 0, 0},
    {"parkinsons/motor", "uci-parkinsons-telemonitoring/parkinsons_updrs.data", FK_LABEL_NONE, PREP_PARKINSONS, 0, 0, 4, 1},
    {"parkinsons/total", "uci-parkinsons-telemonitoring/parkinsons_updrs.data", FK_LABEL_NONE, PREP_PARKINSONS, 0, 0, 5, 1},
    {"gvhd/pos", "gvhd-flow-cytometry/GvHD_pos.csv", FK_LABEL_NONE, PREP_NONE, 0, 0, 0, 1},
    {"gvhd/control", "gvhd-flow-cytometry/GvHD_control.csv", FK_LABEL_NONE, PREP_NONE, 0, 0, 0, 1},
};

#define N_ENTRIES (sizeof entries / sizeof entries[0])

const char *const *fk_catalog_names(void)
{
    static const char *names[N_ENTRIES + 1];
    /* filled on every call with the same constants, so concurrent callers agree */
    for (size_t i = 0; i < N_ENTRIES; i++)
        names[i] = entries[i].name;
    names[N_ENTRIES] = NULL;
    return names;
}

/* Parkinsons file columns: subject#, age, sex, test_time, motor, total, 16 voice measures. */
FK_CHECKRETURN static int parkinsons_split(fk_dataset *ds, int target_col, fk_err *err)
{
    const size_t in_cols = 22, keep[] = {1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21};
    const size_t nk = sizeof keep / sizeof keep[0], n = ds->X.rows;
    if (ds->X.cols != in_cols)
        return fk_err_set(err, FK_EFORMAT, "%s: %zu columns, expected %zu (subject#, age, ..., PPE)",
                          ds->name, ds->X.cols, in_cols);
    fk_dataset out;
    double *t = malloc(n * sizeof *t);
    if (!t || fk_dataset_init(&out, n, nk, 0)) {
        free(t);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", ds->name);
    }
    out.group = malloc(n * sizeof *out.group);
    if (!out.group) {
        free(t);
        fk_dataset_close(&out);
        return fk_err_set(err, FK_ENOMEM, "%s: out of memory", ds->name);
    }
    for (size_t i = 0; i < n; i++) {
        const double *r = fk_mat_row(&ds->X, i);
        for (size_t j = 0; j < nk; j++)
            fk_mat_set(&out.X, i, j, r[keep[j]]);
        t[i] = r[target_col];
        out.group[i] = (int)r[0];
    }
    memcpy(out.name, ds->name, sizeof out.name);
    int rc = fk_dataset_set_target(&out, t, err);
    free(t);
    fk_dataset_close(ds);
    *ds = out;
    return rc;
}

FK_CHECKRETURN static int apply_prep(fk_dataset *ds, const entry *e, fk_err *err)
{
    switch (e->prep) {
    case PREP_L1_ZSCORE:
        if (fk_prep_l1_rows(&ds->X) || fk_prep_zscore_cols(&ds->X))
            return fk_err_set(err, FK_ENOMEM, "%s: out of memory in L1 / z-score", e->name);
        return FK_OK;
    case PREP_L2: fk_prep_l2_rows(&ds->X); return FK_OK;
    case PREP_DIV255:
        for (size_t i = 0; i < ds->X.rows; i++)
            cblas_dscal((int)ds->X.cols, 1.0 / 255.0, fk_mat_row(&ds->X, i), 1);
        return FK_OK;
    case PREP_PARKINSONS: return parkinsons_split(ds, e->target_col, err);
    default: return FK_OK;
    }
}

int fk_catalog_steps(const char *name, int *codes, int cap)
{
    for (size_t i = 0; i < N_ENTRIES; i++) {
        if (strcmp(entries[i].name, name))
            continue;
        int n = 0;
        switch (entries[i].prep) {
        case PREP_L1_ZSCORE:
            if (cap >= 2)
                codes[n++] = 1, codes[n++] = 3;
            break;
        case PREP_L2:
            if (cap >= 1)
                codes[n++] = 2;
            break;
        case PREP_DIV255:
            if (cap >= 1)
                codes[n++] = 4;
            break;
        default: break;
        }
        return n;
    }
    return -1;
}

/* Re-index labels against the documented class list so every domain agrees. */
FK_CHECKRETURN static int fix_classes(fk_dataset *ds, const entry *e, fk_err *err)
{
    int k = e->class_hi - e->class_lo + 1;
    double classes[64];
    for (int i = 0; i < k; i++)
        classes[i] = e->class_lo + i;
    int rc = fk_dataset_use_classes(ds, classes, k, err);
    return rc ? fk_err_prefix(err, rc, "%s: ", e->name) : FK_OK;
}

int fk_catalog_load(fk_dataset *ds, const char *data_dir, const char *name, fk_err *err)
{
    memset(ds, 0, sizeof *ds);
    const entry *e = NULL;
    for (size_t i = 0; i < N_ENTRIES && !e; i++)
        if (!strcmp(entries[i].name, name))
            e = &entries[i];
    if (!e) {
        char list[400] = "";
        for (size_t i = 0; i < N_ENTRIES; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "",
                     entries[i].name);
        return fk_err_set(err, FK_ENOTFOUND, "unknown data set '%s'; known: %s", name, list);
    }
    char path[4096];
    if (e->file[0] == '/')
        snprintf(path, sizeof path, "%s", e->file);
    else
        snprintf(path, sizeof path, "%s/%s", data_dir ? data_dir : ".", e->file);
    struct stat st;
    if (stat(path, &st) != 0)
        return fk_err_set(err, FK_EIO, "data set '%s': %s not found; %s", name, path,
                          e->file[0] == '/' ? "install the Debian package dataset-fashion-mnist"
                                            : "pass --data_dir pointing at the shared data folder");
    fk_load_opts o = {.format = FK_FORMAT_AUTO, .label = e->label, .header = e->header};
    if (e->prep == PREP_PARKINSONS)
        o.format = FK_FORMAT_CSV;
    int rc = fk_load(ds, path, &o, err);
    if (!rc && e->label != FK_LABEL_NONE)
        rc = fix_classes(ds, e, err);
    if (!rc)
        rc = apply_prep(ds, e, err);
    if (!rc)
        fk_dataset_set_name(ds, name);
    else
        fk_dataset_close(ds);
    return rc;
}
