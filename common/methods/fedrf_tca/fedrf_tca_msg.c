/* FedRF-TCA message helpers: typed puts and size-checked gets on bundles. */
#include "common/methods/fedrf_tca/fedrf_tca_int.h"

double fk__fedrf_scalar(const fk_bundle *b, const char *name, double dflt)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    return t && t->len == 1 ? t->data[0] : dflt;
}

int fk__fedrf_put_mat(fk_bundle *b, const char *name, size_t r, size_t c, const double *src,
                     fk_err *err)
{
    uint64_t shape[2] = {r, c};
    if (fk_bundle_put(b, name, 2, shape, src))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory adding '%s'", name);
    return FK_OK;
}

int fk__fedrf_put_vec(fk_bundle *b, const char *name, size_t n, const double *src, fk_err *err)
{
    if (fk_bundle_put_vec(b, name, n, src))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory adding '%s'", name);
    return FK_OK;
}

int fk__fedrf_put_scalar(fk_bundle *b, const char *name, double v, fk_err *err)
{
    if (fk_bundle_put_scalar(b, name, v))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory adding '%s'", name);
    return FK_OK;
}

/* A tensor of exactly len values, or an FK_EFORMAT error naming it. */
const fk_tensor *fk__fedrf_want_len(const fk_bundle *b, const char *name, size_t len, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t || t->len != len) {
        fk_err_set(err, FK_EFORMAT, "fedrf-tca: tensor '%s' %s (want %zu values, got %zu)", name,
                   t ? "has the wrong size" : "is missing", len, t ? t->len : (size_t)0);
        return NULL;
    }
    return t;
}
