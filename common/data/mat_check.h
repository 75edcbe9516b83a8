/* Structural check of a MATLAB v5 file before libmatio reads it. libmatio trusts the
 * sizes in the file (allocating what a header claims) and zero-fills data it cannot
 * decompress, so a hostile or damaged file must be caught here, with one message. */
#ifndef FK_MAT_CHECK_H
#define FK_MAT_CHECK_H

#include <stddef.h>

#include "common/base/err.h"

/* FK_OK if every top-level variable is well formed: tags inside the file, compressed
 * streams complete, dimensions consistent with the stored data, cells and structs
 * recursively so. Sparse, function and opaque variables are refused. Inflated variables
 * larger than max_bytes give FK_ELIMIT. */
FK_CHECKRETURN int fk_mat_check_file(const char *path, size_t max_bytes, fk_err *err);

#endif
