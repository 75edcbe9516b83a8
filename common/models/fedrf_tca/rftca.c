#include "common/models/fedrf_tca/rftca.h"

#include <cblas.h>
#include <stdlib.h>

#include "common/la/rff.h"

int fk_rftca_fit(const fk_mat *Xs, const fk_mat *Xt, const fk_rftca_opts *o, fk_mat *Zs,
                 fk_mat *Zt, fk_mat *W, double *theta, fk_err *err)
{
    *Zs = *Zt = (fk_mat){0};
    if (W)
        *W = (fk_mat){0};
    int rc = fk_tca_check_domains(Xs, Xt, o->m, err);
    if (rc)
        return rc;
    if (o->N == 0)
        return fk_err_set(err, FK_EINVAL, "RF-TCA: N (number of random frequencies) must be >= 1");
    if (o->m > 2 * o->N)
        return fk_err_set(err, FK_EINVAL,
                          "RF-TCA: m=%zu exceeds the random-feature dimension 2N=%zu; raise N or "
                          "lower m", o->m, 2 * o->N);
    fk_rff rff;
    if ((rc = fk_rff_init_kind(&rff, o->seed, Xs->cols, o->N, o->sigma, o->features, err)))
        return rc;
    fk_mat X, S, Wl = {0}, Z = {0};
    double *th = malloc(o->m * sizeof *th);
    rc = th ? fk_tca_stack(Xs, Xt, &X, err) : fk_err_set(err, FK_ENOMEM, "RF-TCA: out of memory");
    if (rc)
        goto out_rff;
    rc = fk_rff_map(&rff, &X, &S, err);
    fk_mat_close(&X);
    if (rc)
        goto out_rff;
    rc = fk_tca_solve(&S, Xs->rows, o->gamma, o->m, o->norm, &Wl, th, err);
    if (!rc)
        rc = fk_tca_project(&S, &Wl, &Z, err);
    fk_mat_close(&S);
    if (!rc) {
        fk_mat a = fk_mat_rows(&Z, 0, Xs->rows), b = fk_mat_rows(&Z, Xs->rows, Xt->rows);
        if (fk_mat_copy(Zs, &a) || fk_mat_copy(Zt, &b)) {
            fk_mat_close(Zs);
            rc = fk_err_set(err, FK_ENOMEM, "RF-TCA: out of memory");
        }
    }
    fk_mat_close(&Z);
    if (!rc && theta)
        for (size_t j = 0; j < o->m; j++)
            theta[j] = th[j];
    if (!rc && W)
        *W = Wl;
    else
        fk_mat_close(&Wl);
out_rff:
    free(th);
    fk_rff_close(&rff);
    return rc;
}

void fk_rftca_project_norm(const fk_mat *Phi, const double *W, size_t m, double eps, fk_mat *U,
                           fk_mat *F, double *norms)
{
    size_t b = Phi->rows, D = Phi->cols;
    if (b)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, (int)m, (int)D, 1.0,
                    Phi->data, (int)Phi->ld, W, (int)m, 0.0, U->data, (int)U->ld);
    for (size_t i = 0; i < b; i++) {
        double r = cblas_dnrm2((int)m, fk_mat_row(U, i), 1);
        norms[i] = r;
        for (size_t j = 0; j < m; j++)
            F->data[i * F->ld + j] = U->data[i * U->ld + j] / (r + eps);
    }
}
