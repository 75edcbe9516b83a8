/* check_update of fedgmm-mor: the tensors its aggregate takes, per update before it is
 * committed. Round 1's initialisation: M (R x p), W (R, >= 0), mu (R1 x p), Sig (R1 x p x p),
 * n (>= 1); every step after it: loc (R x p), pi (R1 R, >= 0), mu, Sig. Values finite and
 * bounded by FK_GMM_MAX_ABS; p is the server's once the initialisation is done. */
#include <stdio.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/update_check.h"
#include "common/models/mixture/gmm.h"

int fk__fedgmm_mor_check(void *v, int round, int phase, const fk_update *up, fk_err *err)
{
    (void)round;
    (void)phase;
    fk__fedgmm_mor_shape_t g;
    fk__fedgmm_mor_shape(v, &g);
    const fk_bundle *b = &up->msg;
    int k = up->client, rc;
    if (k < 0 || k >= g.K)
        return fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)", k, g.K);
    static const char *const init_names[] = {"M", "W", "mu", "Sig", "n"};
    static const char *const step_names[] = {"loc", "pi", "mu", "Sig"};
    if ((rc = fk_update_check_names(b, g.init_done ? step_names : init_names,
                                    g.init_done ? 4 : 5, k, err)))
        return rc;
    const char *coef = g.init_done ? "loc" : "M";
    const fk_tensor *m = fk_bundle_get(b, coef);
    uint64_t P = g.init_done ? (uint64_t)g.p : m && m->ndim == 2 ? m->shape[1] : 0;
    if (P < 1 || P > FK_GMM_MAX_P)
        return fk_err_set(err, FK_EINVAL,
                          "client %d sent no %d x p coefficients '%s' (1 <= p <= %d)", k, g.R,
                          coef, FK_GMM_MAX_P);
    uint64_t R = (uint64_t)g.R, S = (uint64_t)g.R1;
    const uint64_t rp[2] = {R, P}, r1[1] = {R}, sp[2] = {S, P}, spp[3] = {S, P, P},
                   q[1] = {S * R};
    const double B = FK_GMM_MAX_ABS;
    if ((rc = fk_update_check_tensor(b, coef, 2, rp, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "mu", 2, sp, B, 0, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "Sig", 3, spp, B, 0, 0, k, NULL, err)))
        return rc;
    if (g.init_done)
        return fk_update_check_tensor(b, "pi", 1, q, B, 1, 0, k, NULL, err);
    const fk_tensor *n;
    if ((rc = fk_update_check_tensor(b, "W", 1, r1, B, 1, 0, k, NULL, err)) ||
        (rc = fk_update_check_tensor(b, "n", 0, NULL, B, 1, 0, k, &n, err)))
        return rc;
    return fk_update_check_range(n, 1.0, B, 0, k, err);
}
