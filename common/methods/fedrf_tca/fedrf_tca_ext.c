/* FedRF-TCA's `dense` feature extractor (spec §2.8): one layer p -> p_h with
 * ReLU and row L2 normalisation, h = r / (|r| + eps), r = ReLU(x E + b).
 * Each client owns one, trains it locally and never sends it. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "common/methods/fedrf_tca/fedrf_tca_int.h"

void fk__fedrf_ext_forward(const fk__fedrf_client *c, const fk_mat *X, fk_mat *pre, fk_mat *H,
                           double *norms)
{
    size_t n = X->rows, p = X->cols, ph = (size_t)c->c.ext_dim;
    const double *E = c->ext, *bias = c->ext + p * ph;
    for (size_t i = 0; i < n; i++)
        memcpy(fk_mat_row(pre, i), bias, ph * sizeof(double));
    if (n)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)ph, (int)p, 1.0,
                    X->data, (int)X->ld, E, (int)ph, 1.0, pre->data, (int)pre->ld);
    for (size_t i = 0; i < n; i++) {
        double *a = fk_mat_row(pre, i), *h = fk_mat_row(H, i), r2 = 0;
        for (size_t j = 0; j < ph; j++) {
            h[j] = a[j] > 0 ? a[j] : 0.0;
            r2 += h[j] * h[j];
        }
        double r = sqrt(r2), s = 1.0 / (r + c->c.eps);
        norms[i] = r;
        for (size_t j = 0; j < ph; j++)
            h[j] *= s;
    }
}

int fk__fedrf_features(const fk__fedrf_client *c, const fk_mat *X, fk_mat *Phi, double *norms,
                       fk_err *err)
{
    if (!c->c.dense)
        return fk_rff_map(&c->rff, X, Phi, err);
    fk_mat pre = {0}, H = {0};
    int rc = FK_OK;
    if (fk_mat_init(&pre, X->rows, (size_t)c->c.ext_dim) ||
        fk_mat_init(&H, X->rows, (size_t)c->c.ext_dim))
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    if (!rc) {
        fk__fedrf_ext_forward(c, X, &pre, &H, norms);
        rc = fk_rff_map(&c->rff, &H, Phi, err);
    }
    fk_mat_close(&pre);
    fk_mat_close(&H);
    return rc;
}

void fk__fedrf_ext_backward(const fk__fedrf_client *c, const fk_mat *X, const fk_mat *pre,
                            const fk_mat *H, const double *norms, fk_mat *dH, double *gE)
{
    size_t n = X->rows, p = X->cols, ph = (size_t)c->c.ext_dim;
    /* through h = r / (|r| + eps): g_r = g_h/(|r|+eps) - r (r.g_h) / (|r| (|r|+eps)^2), with
     * r = h (|r| + eps); then the ReLU mask. dH is overwritten with dL/d(pre). */
    for (size_t i = 0; i < n; i++) {
        double r = norms[i], e = r + c->c.eps, *g = fk_mat_row(dH, i);
        const double *h = fk_mat_row(H, i), *a = fk_mat_row(pre, i);
        double hg = cblas_ddot((int)ph, h, 1, g, 1) * e; /* r.g_h */
        double coef = r > 0 ? hg / (r * e * e) : 0.0;
        for (size_t j = 0; j < ph; j++)
            g[j] = a[j] > 0 ? g[j] / e - coef * h[j] * e : 0.0;
    }
    double *gb = gE + p * ph;
    memset(gb, 0, ph * sizeof *gb);
    if (n)
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)p, (int)ph, (int)n, 1.0, X->data,
                    (int)X->ld, dH->data, (int)dH->ld, 0.0, gE, (int)ph);
    else
        memset(gE, 0, p * ph * sizeof *gE);
    for (size_t i = 0; i < n; i++)
        cblas_daxpy((int)ph, 1.0, fk_mat_row(dH, i), 1, gb, 1);
}
