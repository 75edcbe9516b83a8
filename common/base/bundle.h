/* Bundles of named float64 tensors: the one shape every method message and
 * checkpoint takes.
 * Methods speak bundles; the wire layer turns bundles into protobuf and back,
 * so methods never see bytes and the network never sees models. */
#ifndef FK_BUNDLE_H
#define FK_BUNDLE_H

#include <stddef.h>
#include <stdint.h>

#include "common/base/err.h"

#define FK_TENSOR_NAME_MAX 48
#define FK_TENSOR_MAX_DIMS 4

typedef struct fk_tensor {
    char name[FK_TENSOR_NAME_MAX];
    int ndim;
    uint64_t shape[FK_TENSOR_MAX_DIMS];
    size_t len;    /* product of shape */
    double *data;  /* owned by the bundle */
} fk_tensor;

typedef struct fk_bundle {
    fk_tensor *items;
    size_t count;
    size_t cap;
} fk_bundle;

void fk_bundle_init(fk_bundle *b);
void fk_bundle_close(fk_bundle *b);
/* Drop all tensors, keep the allocation for reuse. */
void fk_bundle_clear(fk_bundle *b);
/* Add a tensor (replacing one of the same name) and return its zeroed storage,
 * or NULL on bad shape / out of memory. */
double *fk_bundle_add(fk_bundle *b, const char *name, int ndim, const uint64_t *shape);
/* Add a copy of src[0..len) with the given shape. */
FK_CHECKRETURN int fk_bundle_put(fk_bundle *b, const char *name, int ndim, const uint64_t *shape,
                                 const double *src);
/* Convenience for scalars and vectors. */
FK_CHECKRETURN int fk_bundle_put_scalar(fk_bundle *b, const char *name, double v);
FK_CHECKRETURN int fk_bundle_put_vec(fk_bundle *b, const char *name, size_t n, const double *src);
const fk_tensor *fk_bundle_get(const fk_bundle *b, const char *name);
/* Look up a tensor and check its shape (ndim and every dim; 0 in want = any). */
const fk_tensor *fk_bundle_expect(const fk_bundle *b, const char *name, int ndim,
                                  const uint64_t *want, fk_err *err);
FK_CHECKRETURN int fk_bundle_copy(fk_bundle *dst, const fk_bundle *src);
/* Number of float values carried (what Table II of the RF-TCA paper counts). */
size_t fk_bundle_values(const fk_bundle *b);

#endif
