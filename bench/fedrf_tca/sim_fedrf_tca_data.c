#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/fedrf_tca/sim_fedrf_tca.h"
#include "common/data/catalog.h"
#include "common/data/synth_shift.h"

FK_CHECKRETURN static int load_synthetic(const fk_params *a, fk_dataset **ds, int *n_clients,
                                         fk_err *err)
{
    fk_synth_opts o;
    fk_synth_defaults(&o);
    long k, seed;
    int rc;
    if ((rc = fk_params_int(a, "sources", 3, 1, 64, &k, err)) ||
        (rc = fk_params_int(a, "seed", 1, 0, 0x7fffffffffffffffL, &seed, err)))
        return rc;
    o.n_sources = (int)k;
    o.seed = (uint64_t)seed;
    *ds = calloc((size_t)k + 1, sizeof **ds);
    if (!*ds)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    if ((rc = fk_synth_shift(&o, *ds, err))) {
        free(*ds);
        *ds = NULL;
        return rc;
    }
    *n_clients = (int)k + 1;
    return FK_OK;
}

/* "A" or "amazon" -> "office-surf/amazon". */
FK_CHECKRETURN static int domain_name(const char *w, size_t len, char *out, size_t cap, fk_err *err)
{
    static const char *const full[4] = {"amazon", "caltech", "webcam", "dslr"};
    for (int i = 0; i < 4; i++)
        if ((len == 1 && (w[0] == full[i][0] || w[0] == full[i][0] - 32)) ||
            (len == strlen(full[i]) && !strncmp(w, full[i], len))) {
            snprintf(out, cap, "office-surf/%s", full[i]);
            return FK_OK;
        }
    return fk_err_set(err, FK_EINVAL, "unknown domain '%.*s' (use A, C, W, D or amazon, caltech, "
                      "webcam, dslr)", (int)len, w);
}

FK_CHECKRETURN static int load_surf(const fk_params *a, fk_dataset **ds, int *n_clients,
                                    fk_err *err)
{
    const char *dir = fk_params_str(a, "data_dir", "../shared/data");
    const char *src = fk_params_get(a, "source"), *tgt = fk_params_get(a, "target");
    if (!src || !tgt)
        return fk_err_set(err, FK_EINVAL, "--data_dir needs --source A,C,.. and --target W");
    int k = 1;
    for (const char *q = src; *q; q++)
        k += *q == ',';
    *ds = calloc((size_t)k + 1, sizeof **ds);
    if (!*ds)
        return fk_err_set(err, FK_ENOMEM, "out of memory");
    int rc = FK_OK, loaded = 0;
    const char *w = src;
    for (int i = 0; i <= k && !rc; i++) {
        const char *word = i < k ? w : tgt;
        size_t len = i < k ? strcspn(w, ",") : strlen(tgt);
        char name[64];
        rc = domain_name(word, len, name, sizeof name, err);
        if (!rc)
            rc = fk_catalog_load(&(*ds)[i], dir, name, err);
        if (!rc) {
            loaded++;
            if (i > 0 && (*ds)[i].X.cols != (*ds)[0].X.cols)
                rc = fk_err_set(err, FK_EINVAL, "domain %s has %zu features but %s has %zu", name,
                                (*ds)[i].X.cols, (*ds)[0].name, (*ds)[0].X.cols);
        }
        if (i < k)
            w += len + (w[len] == ',');
    }
    if (rc) {
        for (int i = 0; i < loaded; i++)
            fk_dataset_close(&(*ds)[i]);
        free(*ds);
        *ds = NULL;
        return rc;
    }
    *n_clients = k + 1;
    return FK_OK;
}

int fk_fedrf_sim_load(const fk_params *a, int synthetic, fk_dataset **ds, int *n_clients,
                      fk_err *err)
{
    *ds = NULL;
    *n_clients = 0;
    if (synthetic)
        return load_synthetic(a, ds, n_clients, err);
    return load_surf(a, ds, n_clients, err);
}
