/* Loading data sets from files: CSV (plain or gzip), LIBSVM, IDX (MNIST-style, plain or
 * gzip), MATLAB v5 .mat (libmatio) and NPY. Every parser streams its input (never the
 * whole file as text) and reports bad input as one message "PATH:LINE: problem" or
 * "PATH: byte OFFSET: problem" in fk_err. Labels follow dataset.h (raw values kept,
 * 0-based class indices in y). */
#ifndef FK_LOAD_H
#define FK_LOAD_H

#include <stddef.h>

#include "common/data/dataset.h"

typedef enum fk_format {
    FK_FORMAT_AUTO = 0, /* from the file name: .csv .csv.gz .txt .data .tra .tes -> CSV, .libsvm .svm
                           -> LIBSVM, .idx -ubyte (.gz) -> IDX, .mat -> MAT, .npy -> NPY */
    FK_FORMAT_CSV,
    FK_FORMAT_LIBSVM,
    FK_FORMAT_IDX,
    FK_FORMAT_MAT,
    FK_FORMAT_NPY,
} fk_format;

typedef enum fk_label_pos {
    FK_LABEL_DEFAULT = 0, /* CSV: first column; MAT: a label variable if one is found; IDX: the
                             matching labels-idx1 file if it exists; NPY: none */
    FK_LABEL_FIRST,
    FK_LABEL_LAST,
    FK_LABEL_NONE,
    FK_LABEL_INDEX, /* CSV: column label_col (1-based) */
} fk_label_pos;

/* Zero-initialise ({0}) for the defaults. */
typedef struct fk_load_opts {
    fk_format format;
    fk_label_pos label;     /* CSV: where the label column is; NONE disables labels everywhere */
    size_t label_col;       /* CSV with FK_LABEL_INDEX: the label's column, 1-based */
    int header;             /* CSV: 1 skips the first line */
    char delim;             /* CSV: cell separator, 0 = ',' */
    const char *var;        /* MAT: feature variable; NULL = the numeric variable with most elements */
    const char *label_var;  /* MAT: label variable; NULL = first of labels, label, Y, y, gnd with n values */
    int samples_in_columns; /* MAT, NPY: the file stores d x n (JDA-format X_src / X_tar) */
    const char *label_path; /* IDX, NPY: separate label file (IDX idx1 or NPY vector) */
    size_t cols;            /* LIBSVM: number of features (0 = the largest index seen) */
    size_t max_values;      /* refuse inputs above this many feature values; 0 = 1<<31 */
} fk_load_opts;

/* Load path into ds (initialised here; fk_dataset_close frees it). opts may be NULL.
 * The data set's name is the file's base name. */
FK_CHECKRETURN int fk_load(fk_dataset *ds, const char *path, const fk_load_opts *opts, fk_err *err);

/* The format fk_load would pick for path (FK_FORMAT_AUTO if none). */
fk_format fk_format_from_path(const char *path);
/* "csv", "libsvm", "idx", "mat", "npy"; and the reverse (FK_FORMAT_AUTO if unknown). */
const char *fk_format_name(fk_format f);
fk_format fk_format_parse(const char *name);

#endif
