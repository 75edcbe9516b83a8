/* Model files: what `fedkern job result` writes and `fedkern model` reads. An encoded
 * fedkern.v1.Bundle followed by an encoded fedkern.v1.ModelInfo (method, round, job id), whose
 * field numbers a Bundle reader skips: a model file is still a Bundle for older readers, and a
 * bare Bundle (a file from before 0.4) reads with an empty info. */
#ifndef FK_MODELFILE_H
#define FK_MODELFILE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/bundle.h"
#include "common/base/err.h"

typedef struct fk_model_info {
    char method[32];   /* "" when the file does not say */
    int round;         /* 0 when the file does not say */
    char job_id[64];
    char software[64];
} fk_model_info;

/* The encoded info to append after a model's Bundle bytes (malloc'd *buf). */
FK_CHECKRETURN int fk_modelfile_info_encode(const fk_model_info *info, uint8_t **buf,
                                            size_t *len, fk_err *err);
/* Decode a model file: the tensors into model (empty, fk_bundle_init; closed by the caller
 * also on failure) and the info (zeroed when absent). FK_EFORMAT with the reason for bytes
 * that are not a model file. */
FK_CHECKRETURN int fk_modelfile_decode(const uint8_t *buf, size_t len, fk_bundle *model,
                                       fk_model_info *info, fk_err *err);
/* Write model and info as a model file at path (through path.tmp, renamed when complete). */
FK_CHECKRETURN int fk_modelfile_write(const char *path, const fk_bundle *model,
                                      const fk_model_info *info, fk_err *err);
/* Read and decode the file at path (FK_EIO naming the path when it cannot be read). */
FK_CHECKRETURN int fk_modelfile_read(const char *path, fk_bundle *model, fk_model_info *info,
                                     fk_err *err);

#endif
