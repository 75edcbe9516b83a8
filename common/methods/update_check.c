#include "common/methods/update_check.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

int fk_update_check_report(const fk_report *r, int client, fk_err *err)
{
    /* the messages name the field and its bounds, never the value (issue 33: nothing a
     * client sent is quoted into a log or a status) */
    if (!(isfinite(r->n_samples) && r->n_samples >= 0))
        return fk_err_set(err, FK_EINVAL,
                          "client %d reported an n_samples that is not finite and >= 0 (it "
                          "weighs the client in every mean)",
                          client);
    const struct {
        const char *name;
        double v;
    } f[] = {{"loss", r->loss}, {"accuracy", r->accuracy}, {"error", r->error},
           {"misclust", r->misclust}, {"ari", r->ari}, {"rmse", r->rmse}};
    /* a huge finite loss is information (a diverged model), not an attack: only +-Inf */
    for (size_t i = 0; i < sizeof f / sizeof *f; i++)
        if (isinf(f[i].v))
            return fk_err_set(err, FK_EINVAL,
                              "client %d reported an infinite %s (must be finite, or NaN for not "
                              "measured)",
                              client, f[i].name);
    if (!isnan(r->accuracy) && !(r->accuracy >= 0.0 && r->accuracy <= 1.0))
        return fk_err_set(err, FK_EINVAL, "client %d reported an accuracy outside [0, 1]", client);
    if (!isnan(r->misclust) && !(r->misclust >= 0.0 && r->misclust <= 1.0))
        return fk_err_set(err, FK_EINVAL, "client %d reported a misclust outside [0, 1]", client);
    if (!isnan(r->ari) && !(r->ari >= -1.0 && r->ari <= 1.0))
        return fk_err_set(err, FK_EINVAL, "client %d reported an ari outside [-1, 1]", client);
    if (!isnan(r->rmse) && !(r->rmse >= 0.0))
        return fk_err_set(err, FK_EINVAL, "client %d reported a negative rmse", client);
    return FK_OK;
}

int fk_update_check_measured(const fk_report *r, size_t field, const char *what, int client,
                             fk_err *err)
{
    double v = *(const double *)((const char *)r + field);
    if (isnan(v))
        return fk_err_set(err, FK_EINVAL,
                          "client %d reported %s = NaN, but this step always measures it (its "
                          "local computation diverged or the report is corrupt)",
                          client, what);
    return FK_OK;
}

int fk_update_check_names(const fk_bundle *b, const char *const *names, int n, int client,
                          fk_err *err)
{
    for (size_t i = 0; i < b->count; i++) {
        int known = 0;
        for (int k = 0; k < n && !known; k++)
            known = !strcmp(b->items[i].name, names[k]);
        if (known)
            continue;
        char list[160] = "";
        for (int k = 0; k < n; k++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", k ? ", " : "",
                     names[k]);
        return fk_err_set(err, FK_EINVAL,
                          "client %d sent an unexpected tensor '%.47s' (this step takes: %s)",
                          client, b->items[i].name, n ? list : "no tensors");
    }
    return FK_OK;
}

int fk_update_check_tensor(const fk_bundle *b, const char *name, int ndim, const uint64_t *shape,
                           double bound, int nonneg, int optional, int client,
                           const fk_tensor **out, fk_err *err)
{
    if (out)
        *out = NULL;
    const fk_tensor *t = fk_bundle_get(b, name);
    char want[96] = "";
    for (int d = 0; d < ndim; d++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%llu", d ? " x " : "",
                 (unsigned long long)shape[d]);
    if (!t && optional)
        return FK_OK;
    if (!t)
        return fk_err_set(err, FK_EINVAL, "client %d sent no tensor '%s' (%s)", client, name,
                          ndim ? want : "a scalar");
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = t->shape[d] == shape[d];
    if (!ok) {
        char got[96] = "";
        for (int d = 0; d < t->ndim; d++)
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s%llu", d ? " x " : "",
                     (unsigned long long)t->shape[d]);
        return fk_err_set(err, FK_EINVAL, "client %d sent tensor '%s' of shape %s (this job needs %s)",
                          client, name, t->ndim ? got : "scalar", ndim ? want : "a scalar");
    }
    int rc = fk_update_check_range(t, nonneg ? 0.0 : -bound, bound, 0, client, err);
    if (rc == FK_OK && out)
        *out = t;
    return rc;
}

/* "entry 7" or, for a matrix, "entry 7 (row 1, column 3)": where, never what. */
static void position(const fk_tensor *t, size_t i, char *buf, size_t cap)
{
    if (t->ndim == 2 && t->shape[1] > 0)
        snprintf(buf, cap, "entry %zu (row %llu, column %llu)", i,
                 (unsigned long long)(i / t->shape[1]), (unsigned long long)(i % t->shape[1]));
    else
        snprintf(buf, cap, "entry %zu", i);
}

int fk_update_check_range(const fk_tensor *t, double lo, double hi, int whole, int client,
                          fk_err *err)
{
    for (size_t i = 0; i < t->len; i++) {
        double v = t->data[i];
        if (v >= lo && v <= hi && (!whole || v == floor(v)))
            continue;
        char at[96];
        position(t, i, at, sizeof at);
        if (!isfinite(v))
            return fk_err_set(err, FK_EINVAL, "client %d sent tensor '%s' with a NaN or Inf at %s",
                              client, t->name, at);
        if (whole && v >= lo && v <= hi)
            return fk_err_set(err, FK_EINVAL,
                              "client %d sent tensor '%s' with a fraction at %s (must be a whole "
                              "number in [%g, %g])",
                              client, t->name, at, lo, hi);
        return fk_err_set(err, FK_EINVAL,
                          "client %d sent tensor '%s' with %s %s the bound (must be %s in [%g, "
                          "%g])",
                          client, t->name, at, v < lo ? "below" : "above",
                          whole ? "a whole number" : "finite and", lo, hi);
    }
    return FK_OK;
}
