/* check_update of the FedGrEM tables (GMM and mixture-of-regressions, every variant): the
 * tensors fedgrem_server.c's aggregate takes, checked per update before it is committed, so one
 * client's meaningless update is a dropout instead of a failed job. Phase by state:
 *   before the initialisation: M (R x p, 1 <= p <= FK_GMM_MAX_P), W (R, mixture weights in
 *   [0, 1]), n (sample count >= 1), sigma (p x p, Local-EM only, optional); loss measured;
 *   after it: theta (R x p) and w (R, in [0, 1]), or for pooled-grem nr (R, >= 0) and
 *   sx (R x p); loss measured except by the GMM Local-EM (its fit is final).
 * Values are bounded by FK_GMM_MAX_ABS like everything the aggregate squares. */
#include <stddef.h>
#include <stdio.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/update_check.h"
#include "common/models/mixture/gmm.h"

/* Mixture weights a little above 1 from rounding are real; more is not a weight. */
static const double WEIGHT_MAX = 1.0 + 1e-6;

FK_CHECKRETURN static int check_weights(const fk_tensor *w, int client, fk_err *err)
{
    return fk_update_check_range(w, 0.0, WEIGHT_MAX, 0, client, err);
}

FK_CHECKRETURN static int check_init(const fk__fedgrem_shape *g, const fk_update *up, fk_err *err)
{
    static const char *const names[] = {"M", "W", "n", "sigma"};
    const fk_bundle *b = &up->msg;
    int k = up->client;
    int rc = fk_update_check_names(b, names, 4, k, err);
    const fk_tensor *m = fk_bundle_get(b, "M"), *w = NULL, *n = NULL;
    if (!rc && (!m || m->ndim != 2 || m->shape[0] != (uint64_t)g->R || m->shape[1] < 1 ||
                m->shape[1] > FK_GMM_MAX_P))
        rc = fk_err_set(err, FK_EINVAL,
                        "client %d sent no %d x p centre matrix 'M' (1 <= p <= %d)%s", k, g->R,
                        FK_GMM_MAX_P, m ? " (wrong shape)" : "");
    if (rc)
        return rc;
    uint64_t P = m->shape[1];
    const uint64_t ms[2] = {(uint64_t)g->R, P}, ws[1] = {(uint64_t)g->R}, ss[2] = {P, P};
    if ((rc = fk_update_check_tensor(b, "M", 2, ms, FK_GMM_MAX_ABS, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "W", 1, ws, FK_GMM_MAX_ABS, 1, 0, k, &w, err)) ||
        (rc = check_weights(w, k, err)) ||
        (rc = fk_update_check_tensor(b, "n", 0, NULL, FK_GMM_MAX_ABS, 1, 0, k, &n, err)) ||
        (rc = fk_update_check_tensor(b, "sigma", 2, ss, FK_GMM_MAX_ABS, 0, 1, k, NULL, err)))
        return rc;
    if ((rc = fk_update_check_range(n, 1.0, FK_GMM_MAX_ABS, 0, k, err)))
        return rc;
    return fk_update_check_measured(&up->report, offsetof(fk_report, loss), "loss", k, err);
}

FK_CHECKRETURN static int check_step(const fk__fedgrem_shape *g, const fk_update *up, fk_err *err)
{
    const fk_bundle *b = &up->msg;
    int k = up->client, rc;
    const uint64_t rp[2] = {(uint64_t)g->R, (uint64_t)g->p}, r1[1] = {(uint64_t)g->R};
    if (g->variant == FK__FEDGREM_V_POOLED_GREM) {
        static const char *const names[] = {"nr", "sx"};
        if ((rc = fk_update_check_names(b, names, 2, k, err)) ||
            (rc = fk_update_check_tensor(b, "nr", 1, r1, FK_GMM_MAX_ABS, 1, 0, k, NULL, err)) ||
            (rc = fk_update_check_tensor(b, "sx", 2, rp, FK_GMM_MAX_ABS, 0, 0, k, NULL, err)))
            return rc;
    } else {
        static const char *const names[] = {"theta", "w"};
        const fk_tensor *w;
        if ((rc = fk_update_check_names(b, names, 2, k, err)) ||
            (rc = fk_update_check_tensor(b, "theta", 2, rp, FK_GMM_MAX_ABS, 0, 0, k, NULL, err)) ||
            (rc = fk_update_check_tensor(b, "w", 1, r1, FK_GMM_MAX_ABS, 1, 0, k, &w, err)) ||
            (rc = check_weights(w, k, err)))
            return rc;
    }
    if (g->variant == FK__FEDGREM_V_LOCAL_EM && g->model == FK__FEDGREM_GMM)
        return FK_OK; /* the final EEE fit is sent again without a new loss */
    return fk_update_check_measured(&up->report, offsetof(fk_report, loss), "loss", k, err);
}

int fk__fedgrem_srv_check(void *v, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)round;
    (void)phase;
    fk__fedgrem_shape g;
    fk__fedgrem_srv_shape(v, &g);
    if (up->client < 0 || up->client >= g.K)
        return fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)",
                          up->client, g.K);
    return g.init_done ? check_step(&g, up, err) : check_init(&g, up, err);
}
