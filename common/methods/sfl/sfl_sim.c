/* Built-in synthetic clients for `fedkern sim sfl`: the E3.1 federation (spec §7.2, §11). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/la/rng.h"
#include "common/methods/sfl/sfl.h"
#include "common/methods/sfl/sfl_int.h"

static double e31_label(double a, double b)
{
    double d1 = (a - 3) * (a - 3) + 0.25 * b * b;
    double d2 = (a + 10) * (a + 10) + 0.25 * (b - 6) * (b - 6);
    return d1 <= 9 || d2 <= 30 ? 1.0 : 0.0;
}

int fk_sfl_e31_make(int K, int k, size_t n, uint64_t seed, fk_dataset *out, fk_err *err)
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

int fk__sfl_sim_data(const fk_params *p, int n_clients, uint64_t seed, fk_dataset *clients,
                     fk_err *err)
{
    long n = 50;
    int rc = fk_params_int(p, "sim_n", 50, 1, 1000000, &n, err);
    for (int k = 0; !rc && k < n_clients; k++)
        rc = fk_sfl_e31_make(n_clients, k, (size_t)n, seed, &clients[k], err);
    return rc;
}
