#include <stdlib.h>
#include <string.h>

#include "cli/sim_fedrf_tca.h"
#include "common/data/synth_shift.h"

static int load_synthetic(const fk_params *a, fk_dataset **ds, int *n_clients, fk_err *err)
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

int fk_fedrf_cli_load(const fk_params *a, int synthetic, fk_dataset **ds, int *n_clients,
                      fk_err *err)
{
    *ds = NULL;
    *n_clients = 0;
    if (synthetic)
        return load_synthetic(a, ds, n_clients, err);
    return fk_err_set(err, FK_EINVAL, "--data-dir needs the data catalog");
}
