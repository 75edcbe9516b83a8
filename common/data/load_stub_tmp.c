/* TEMPORARY: replaced by the real loaders in the next commits. */
#include "common/data/load_int.h"
int fk_load_libsvm(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{ (void)ds; (void)o; return fk_err_set(err, FK_EINVAL, "%s: LIBSVM loader not built yet", path); }
int fk_load_npy(fk_dataset *ds, const char *path, const fk_load_opts *o, fk_err *err)
{ (void)ds; (void)o; return fk_err_set(err, FK_EINVAL, "%s: NPY loader not built yet", path); }
