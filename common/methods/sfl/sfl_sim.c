/* Built-in synthetic clients for `fedkern sim sfl`: the E3.1 federation (spec §7.2, §11), or
 * Gaussian blobs, one per class, under multiclass = ovo. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sfl/sfl_int.h"

static double e31_label(double a, double b)
{
    double d1 = (a - 3) * (a - 3) + 0.25 * b * b;
    double d2 = (a + 10) * (a + 10) + 0.25 * (b - 6) * (b - 6);
    return d1 <= 9 || d2 <= 30 ? 1.0 : 0.0;
}

FK_CHECKRETURN int fk_sfl_e31_make(int K, int k, size_t n, uint64_t seed, fk_dataset *out, fk_err *err)
{
    if (K < 1 || k < -1 || k >= K || n < 1)
        return fk_err_set(err, FK_EINVAL, "sfl E3.1 data: bad client %d of %d or n = %zu", k, K,
                          n);
    int rc = fk_dataset_init(out, n, 2, 1);
    if (rc)
        return fk_err_set(err, rc, "sfl E3.1 data: out of memory for %zu rows", n);
    int g = 1;
    while (g * g < K)
        g++;
    double cell = 27.0 / g, lo0 = -18, lo1 = -9, w0 = 27, w1 = 27;
    if (k >= 0) { /* the client's cell, enlarged by 2 on each side */
        lo0 = -18 + cell * (k % g) - 2;
        lo1 = -9 + cell * (k / g) - 2;
        w0 = w1 = cell + 4;
    }
    fk_rng r;
    fk_rng_init(&r, seed, 0x65333100ULL + (uint64_t)(k + 1));
    double *lab = malloc(n * sizeof *lab);
    if (!lab) {
        fk_dataset_close(out);
        return fk_err_set(err, FK_ENOMEM, "sfl E3.1 data: out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        double a = lo0 + w0 * fk_rng_uniform(&r), b = lo1 + w1 * fk_rng_uniform(&r);
        lab[i] = e31_label(a, b); /* labels fixed before the noise */
        double sd = sqrt(0.2);
        out->X.data[2 * i] = a + sd * fk_rng_normal(&r);
        out->X.data[2 * i + 1] = b + sd * fk_rng_normal(&r);
    }
    static const double classes[2] = {0, 1};
    rc = fk_dataset_set_labels(out, lab, err);
    if (!rc)
        rc = fk_dataset_use_classes(out, classes, 2, err);
    free(lab);
    if (rc) {
        fk_dataset_close(out);
        return rc;
    }
    char name[32];
    snprintf(name, sizeof name, k >= 0 ? "e31-cell%d" : "e31-test", k);
    fk_dataset_set_name(out, name);
    return FK_OK;
}

FK_CHECKRETURN int fk_sfl_blobs_make(const double *cls, int n_cls, int K, int k, size_t n, uint64_t seed,
                      fk_dataset *out, fk_err *err)
{
    if (n_cls < 2 || n_cls > 32 || K < 1 || k < -1 || k >= K || n < 1)
        return fk_err_set(err, FK_EINVAL, "sfl blobs: bad client %d of %d, %d classes or n = %zu",
                          k, K, n_cls, n);
    int held[32], nh = 0;
    for (int j = 0; j < n_cls; j++) /* client k lacks class k mod n_cls (when K > 1) */
        if (k < 0 || K == 1 || j != k % n_cls)
            held[nh++] = j;
    int rc = fk_dataset_init(out, n, 2, 1);
    if (rc)
        return fk_err_set(err, rc, "sfl blobs: out of memory for %zu rows", n);
    double *lab = malloc(n * sizeof *lab);
    if (!lab) {
        fk_dataset_close(out);
        return fk_err_set(err, FK_ENOMEM, "sfl blobs: out of memory");
    }
    /* centres on a circle with neighbours 4 apart (5.7 sd): a little overlap, as real classes */
    double r = n_cls == 2 ? 2.0 : 2.0 / sin(M_PI / n_cls);
    fk_rng g;
    fk_rng_init(&g, seed, 0x626c6f6200ULL + (uint64_t)(k + 1));
    for (size_t i = 0; i < n; i++) {
        int j = held[i % (size_t)nh];
        double t = 2 * M_PI * j / n_cls;
        out->X.data[2 * i] = r * cos(t) + 0.7 * fk_rng_normal(&g);
        out->X.data[2 * i + 1] = r * sin(t) + 0.7 * fk_rng_normal(&g);
        lab[i] = cls[j];
    }
    rc = fk_dataset_set_labels(out, lab, err);
    if (!rc)
        rc = fk_dataset_use_classes(out, cls, n_cls, err);
    free(lab);
    if (rc) {
        fk_dataset_close(out);
        return rc;
    }
    char name[32];
    snprintf(name, sizeof name, k >= 0 ? "blobs-client%d" : "blobs-test", k);
    fk_dataset_set_name(out, name);
    return FK_OK;
}

/* multiclass = ovo: the job's 'classes' (or 0, 1, 2 when it lists none; the job then says
 * what is missing) as blobs; else the E3.1 cells. */
int fk__sfl_sim_data(const fk_params *p, int n_clients, uint64_t seed, fk_dataset *clients,
                     const unsigned char *want, fk_err *err)
{
    long n = 50;
    int rc = fk_params_int(p, "sim_n", 50, 1, 1000000, &n, err);
    if (rc || strcmp(fk_params_str(p, "multiclass", "none"), "ovo")) {
        for (int k = 0; !rc && k < n_clients; k++) {
            if (want && !want[k]) { /* each client its own stream */
                char name[32];
                snprintf(name, sizeof name, "e31-cell%d", k);
                fk_dataset_set_name(&clients[k], name);
                continue;
            }
            rc = fk_sfl_e31_make(n_clients, k, (size_t)n, seed, &clients[k], err);
        }
        return rc;
    }
    double cls[32] = {0, 1, 2};
    int n_cls = 3;
    const char *s = fk_params_get(p, "classes");
    if (s) {
        n_cls = 0;
        for (const char *q = s; *q;) {
            char *end;
            double v = strtod(q, &end);
            while (*end == ' ')
                end++;
            if (end == q || !isfinite(v) || (*end != ',' && *end) || n_cls == 32 ||
                (n_cls && !(v > cls[n_cls - 1])))
                return fk_err_set(err, FK_EINVAL, "classes: '%s' is not an ascending list of 2 to "
                                                  "32 labels", s);
            cls[n_cls++] = v;
            q = end + (*end == ',');
        }
    }
    for (int k = 0; !rc && k < n_clients; k++) {
        if (want && !want[k]) { /* each client its own stream */
            char name[32];
            snprintf(name, sizeof name, "blobs-client%d", k);
            fk_dataset_set_name(&clients[k], name);
            continue;
        }
        rc = fk_sfl_blobs_make(cls, n_cls, n_clients, k, (size_t)n, seed, &clients[k], err);
    }
    return rc;
}
