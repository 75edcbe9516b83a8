/* fedkern model export (model_export.c): a model file's tensors as .npz or JSON. */
#ifndef FK_CLI_MODEL_EXPORT_H
#define FK_CLI_MODEL_EXPORT_H

#include "common/base/bundle.h"
#include "common/base/err.h"
#include "common/net/modelfile.h"

/* Write every tensor of m as one array named like it (format "npz": a NumPy .npz of float64
 * .npy members, plus 0-d string arrays method, job and software; "json": {"method", "round",
 * "job", "software", "arrays": {NAME: {"shape", "data"}}}, non-finite values as null). */
FK_CHECKRETURN int fk_model_export(const fk_bundle *m, const fk_model_info *in, const char *format,
                                   const char *out, fk_err *err);

#endif
