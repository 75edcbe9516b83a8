/* A data source as a client daemon or `fedkern data` declares it: what to load (a catalog
 * name, a built-in synthetic spec or a file), the loader options and the preprocessing.
 *
 * The options are key/value parameters under a prefix: "" for the flags of `fedkern data`
 * (--label last), "data.NAME." for a client's data set NAME (data.NAME.label = last, or
 * the flag --data.NAME.label last). Keys (fk_source_docs): format, label, header, delim,
 * var, label_var, samples_in_columns, labels, cols, prep, affine. */
#ifndef FK_SOURCE_H
#define FK_SOURCE_H

#include "common/base/params.h"
#include "common/data/dataset.h"
#include "common/data/load.h"

enum { FK_SOURCE_MAX_PREP = 4 };

typedef enum fk_prep_step {
    FK_PREP_STEP_L1 = 1, /* rows divided by their sum */
    FK_PREP_STEP_L2,     /* rows divided by their Euclidean norm */
    FK_PREP_STEP_ZSCORE, /* columns centred and scaled to unit (population) std */
    FK_PREP_STEP_DIV255, /* values / 255 (a catalog set's pixels; not an option) */
} fk_prep_step;

typedef struct fk_source {
    fk_load_opts load;                 /* strings borrowed from the parameters */
    int loader_set;                    /* some loader option was given (not for catalog sets) */
    fk_prep_step prep[FK_SOURCE_MAX_PREP]; /* applied in order */
    int n_prep;
    const char *affine;                /* saved map applied after prep (NULL: none) */
    const char *data_dir;              /* catalog names: the shared data folder */
} fk_source;

/* A per-column affine map X[:,j] = (X[:,j] - shift[j]) * scale[j] (a saved z-score). */
typedef struct fk_affine {
    size_t d;
    double *shift, *scale;
} fk_affine;

/* The option keys and their help (NULL-terminated), for --help texts and docs. */
extern const fk_param_doc fk_source_docs[];
/* 1 if key (without prefix) is one of the option keys. */
int fk_source_is_option(const char *key);

/* Read the options under prefix from p (each marked used). FK_EINVAL naming the key
 * ("PREFIXKEY") and the accepted values. s->data_dir is left NULL. */
FK_CHECKRETURN int fk_source_parse(fk_source *s, const fk_params *p, const char *prefix,
                                   fk_err *err);

/* Load src with the options (s may be NULL: defaults): a catalog name (its own loader
 * settings; loader options are refused, prep is applied on top), a synthetic/ spec or a
 * file; then the prep steps, the affine map, and a check that every value is finite.
 * zmap (may be NULL): receives the map of the last zscore step (d = 0 if none). */
FK_CHECKRETURN int fk_source_load(fk_dataset *ds, const char *src, const fk_source *s,
                                  fk_affine *zmap, fk_err *err);

/* The name fk_source_load gives src's data set, without loading it: *ds gets the name and no
 * rows. A synthetic spec is parsed, a catalog name known, a file's path a regular file (not
 * read); the loader options are checked as fk_source_load checks them. For a process that
 * does not hold this client of a federation (`fedkern sim` under mpirun). */
FK_CHECKRETURN int fk_source_name_only(fk_dataset *ds, const char *src, const fk_source *s,
                                       fk_err *err);

/* The steps fk_source_load applies to src's raw rows, in order (a catalog set's own, then
 * s->prep; s may be NULL): their count (at most cap; more are cut). The affine map, if any,
 * comes after them (s->affine). */
int fk_source_steps(const char *src, const fk_source *s, int *codes, int cap);

/* Read / write an affine map file: CSV, two rows of d values (shift, then scale), written
 * with 17 significant digits so a reload is exact. */
FK_CHECKRETURN int fk_affine_load(fk_affine *a, const char *path, fk_err *err);
FK_CHECKRETURN int fk_affine_save(const fk_affine *a, const char *path, fk_err *err);
void fk_affine_close(fk_affine *a);

#endif
