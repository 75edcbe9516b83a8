/* Kernel C-SVC by SMO (see svm.h): the binary solver, one-vs-one / one-vs-rest, the
 * Gaussian kernel and prediction. The solver follows LIBSVM's Solver (Fan, Chen and Lin
 * 2005, WSS 3) step for step, without shrinking or a kernel cache: the caller's kernel
 * matrix is read in place. */
#include "common/models/svm/svm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/blas.h"
#include "common/la/rff.h"

#define SVM_TAU 1e-12 /* LIBSVM: floor of a non-positive curvature */

void fk_svm_opts_default(fk_svm_opts *o)
{
    *o = (fk_svm_opts){.C = 1.0, .tol = 1e-3, .max_iter = 0, .multi = FK_SVM_OVO};
}

void fk_svm_close(fk_svm *s)
{
    free(s->present);
    free(s->pos);
    free(s->neg);
    free(s->rho);
    free(s->iters);
    free(s->sv);
    fk_mat_close(&s->coef);
    fk_mat_close(&s->Xsv);
    *s = (fk_svm){0};
}

/* One binary problem: points idx[0..l) of K with signs yb (+1/-1). */
typedef struct bin {
    const fk_mat *K;
    const size_t *idx;
    const signed char *yb;
    size_t l;
} bin;

/* Row i of Q restricted to the problem: Q_it = y_i y_t K(idx_i, idx_t). */
static void q_row(const bin *b, size_t i, double *q)
{
    const double *kr = b->K->data + b->idx[i] * b->K->ld;
    double yi = b->yb[i];
    for (size_t t = 0; t < b->l; t++)
        q[t] = yi * b->yb[t] * kr[b->idx[t]];
}

/* SMO on the binary problem: alpha (l) and rho out, steps taken in *iters. */
FK_CHECKRETURN static int smo(const bin *b, const fk_svm_opts *o, double *alpha, double *rho, size_t *iters,
               fk_err *err)
{
    size_t l = b->l;
    const signed char *y = b->yb;
    double C = o->C;
    double *G = malloc(l * sizeof *G), *QD = malloc(l * sizeof *QD);
    double *Qi = malloc(l * sizeof *Qi), *Qj = malloc(l * sizeof *Qj);
    if (!G || !QD || !Qi || !Qj) {
        free(G);
        free(QD);
        free(Qi);
        free(Qj);
        return fk_err_set(err, FK_ENOMEM, "out of memory for a %zu-point problem", l);
    }
    for (size_t t = 0; t < l; t++) {
        alpha[t] = 0;
        G[t] = -1.0; /* gradient of 1/2 a^T Q a - 1^T a at a = 0 */
        QD[t] = b->K->data[b->idx[t] * b->K->ld + b->idx[t]];
    }
    size_t maxit = o->max_iter;
    if (maxit == 0)
        maxit = 100 * l > 10000000 ? 100 * l : 10000000;
    size_t it = 0;
    int rc = FK_OK;
    for (;;) {
        /* Working set (WSS 3): i maximises -y_t G_t over I_up, j minimises the second-order
         * decrease over I_low among the violating pairs. */
        double Gmax = -INFINITY, Gmax2 = -INFINITY, obj_min = INFINITY;
        long ii = -1, jj = -1;
        for (size_t t = 0; t < l; t++) {
            if (y[t] > 0) {
                if (alpha[t] < C && -G[t] >= Gmax) {
                    Gmax = -G[t];
                    ii = (long)t;
                }
            } else if (alpha[t] > 0 && G[t] >= Gmax) {
                Gmax = G[t];
                ii = (long)t;
            }
        }
        if (ii >= 0)
            q_row(b, (size_t)ii, Qi);
        for (size_t t = 0; t < l && ii >= 0; t++) {
            double gd, quad;
            if (y[t] > 0) {
                if (!(alpha[t] > 0))
                    continue;
                gd = Gmax + G[t];
                if (G[t] >= Gmax2)
                    Gmax2 = G[t];
                quad = QD[ii] + QD[t] - 2.0 * y[ii] * Qi[t];
            } else {
                if (!(alpha[t] < C))
                    continue;
                gd = Gmax - G[t];
                if (-G[t] >= Gmax2)
                    Gmax2 = -G[t];
                quad = QD[ii] + QD[t] + 2.0 * y[ii] * Qi[t];
            }
            if (gd > 0) {
                double od = -(gd * gd) / (quad > 0 ? quad : SVM_TAU);
                if (od <= obj_min) {
                    jj = (long)t;
                    obj_min = od;
                }
            }
        }
        if (ii < 0 || jj < 0 || Gmax + Gmax2 < o->tol)
            break;
        if (it >= maxit) {
            rc = fk_err_set(err, FK_ENUMERIC,
                            "SMO did not reach the tolerance %g in %zu steps (KKT gap %g); "
                            "raise max_iter or tol, or check the kernel",
                            o->tol, maxit, Gmax + Gmax2);
            break;
        }
        it++;
        size_t i = (size_t)ii, j = (size_t)jj;
        q_row(b, j, Qj);
        double ai = alpha[i], aj = alpha[j];
        /* Two-variable update keeping y^T a and the box (LIBSVM's clipping). */
        if (y[i] != y[j]) {
            double quad = QD[i] + QD[j] + 2.0 * Qi[j];
            double delta = (-G[i] - G[j]) / (quad > 0 ? quad : SVM_TAU), diff = ai - aj;
            alpha[i] += delta;
            alpha[j] += delta;
            if (diff > 0) {
                if (alpha[j] < 0) {
                    alpha[j] = 0;
                    alpha[i] = diff;
                }
            } else if (alpha[i] < 0) {
                alpha[i] = 0;
                alpha[j] = -diff;
            }
            if (diff > 0) { /* C_i - C_j = 0 */
                if (alpha[i] > C) {
                    alpha[i] = C;
                    alpha[j] = C - diff;
                }
            } else if (alpha[j] > C) {
                alpha[j] = C;
                alpha[i] = C + diff;
            }
        } else {
            double quad = QD[i] + QD[j] - 2.0 * Qi[j];
            double delta = (G[i] - G[j]) / (quad > 0 ? quad : SVM_TAU), sum = ai + aj;
            alpha[i] -= delta;
            alpha[j] += delta;
            if (sum > C) {
                if (alpha[i] > C) {
                    alpha[i] = C;
                    alpha[j] = sum - C;
                }
            } else if (alpha[j] < 0) {
                alpha[j] = 0;
                alpha[i] = sum;
            }
            if (sum > C) {
                if (alpha[j] > C) {
                    alpha[j] = C;
                    alpha[i] = sum - C;
                }
            } else if (alpha[i] < 0) {
                alpha[i] = 0;
                alpha[j] = sum;
            }
        }
        double di = alpha[i] - ai, dj = alpha[j] - aj;
        for (size_t t = 0; t < l; t++)
            G[t] += Qi[t] * di + Qj[t] * dj;
    }
    /* rho: mean of y G over the free vectors, else the middle of the feasible interval. */
    double ub = INFINITY, lb = -INFINITY, sum_free = 0;
    size_t nfree = 0;
    for (size_t t = 0; t < l; t++) {
        double yg = y[t] * G[t];
        if (alpha[t] >= C) {
            if (y[t] < 0)
                ub = fmin(ub, yg);
            else
                lb = fmax(lb, yg);
        } else if (alpha[t] <= 0) {
            if (y[t] > 0)
                ub = fmin(ub, yg);
            else
                lb = fmax(lb, yg);
        } else {
            nfree++;
            sum_free += yg;
        }
    }
    *rho = nfree > 0 ? sum_free / (double)nfree : (ub + lb) / 2;
    *iters = it;
    free(G);
    free(QD);
    free(Qi);
    free(Qj);
    return rc;
}

FK_CHECKRETURN static int check_fit_args(const fk_mat *K, const int *y, int n_class, const fk_svm_opts *o,
                          fk_err *err)
{
    size_t n = K->rows;
    if (!(o->C > 0) || !isfinite(o->C))
        return fk_err_set(err, FK_EINVAL, "svm: C must be > 0 and finite (got %g)", o->C);
    if (!(o->tol > 0) || !isfinite(o->tol))
        return fk_err_set(err, FK_EINVAL, "svm: tol must be > 0 (got %g)", o->tol);
    if (o->multi != FK_SVM_OVO && o->multi != FK_SVM_OVR)
        return fk_err_set(err, FK_EINVAL, "svm: unknown multiclass scheme %d", (int)o->multi);
    if (K->cols != n || !K->data)
        return fk_err_set(err, FK_EINVAL, "svm: the kernel matrix must be square (got %zu x %zu)",
                          K->rows, K->cols);
    if (n < 2)
        return fk_err_set(err, FK_EINVAL, "svm: need at least 2 training points (got %zu)", n);
    if (n_class < 2)
        return fk_err_set(err, FK_EINVAL, "svm: need at least 2 classes (got %d)", n_class);
    for (size_t i = 0; i < n; i++)
        if (y[i] < 0 || y[i] >= n_class)
            return fk_err_set(err, FK_EINVAL, "svm: label %d of point %zu is outside [0, %d)",
                              y[i], i, n_class);
    /* A non-finite or asymmetric kernel breaks SMO's invariants silently: refuse it. */
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double a = K->data[i * K->ld + j], b = K->data[j * K->ld + i];
            if (!isfinite(a) || !isfinite(b))
                return fk_err_set(err, FK_EINVAL, "svm: kernel entry (%zu, %zu) is not finite", i,
                                  j);
            if (fabs(a - b) > 1e-10 * (fabs(a) + fabs(b)) + 1e-300)
                return fk_err_set(err, FK_EINVAL,
                                  "svm: the kernel is not symmetric at (%zu, %zu): %g vs %g", i, j,
                                  a, b);
        }
    return FK_OK;
}

int fk_svm_fit_kernel(fk_svm *s, const fk_mat *K, const int *y, int n_class, const fk_svm_opts *o,
                      fk_err *err)
{
    *s = (fk_svm){0};
    int rc = check_fit_args(K, y, n_class, o, err);
    if (rc)
        return rc;
    size_t n = K->rows;
    size_t *cnt = calloc((size_t)n_class, sizeof *cnt);
    if (!cnt)
        return fk_err_set(err, FK_ENOMEM, "svm: out of memory");
    for (size_t i = 0; i < n; i++)
        cnt[y[i]]++;
    int np = 0;
    for (int c = 0; c < n_class; c++)
        np += cnt[c] > 0;
    if (np < 2) {
        free(cnt);
        return fk_err_set(err, FK_EINVAL,
                          "svm: the training labels hold %d class; need samples of at least 2",
                          np);
    }
    s->n_class = n_class;
    s->n_present = np;
    s->multi = o->multi;
    s->n_train = n;
    s->n_models = o->multi == FK_SVM_OVO ? (size_t)np * (size_t)(np - 1) / 2 : (size_t)np;
    size_t nm = s->n_models;
    s->present = malloc((size_t)np * sizeof *s->present);
    s->pos = malloc(nm * sizeof *s->pos);
    s->neg = malloc(nm * sizeof *s->neg);
    s->rho = calloc(nm, sizeof *s->rho);
    s->iters = calloc(nm, sizeof *s->iters);
    size_t *idx = malloc(n * sizeof *idx);
    signed char *yb = malloc(n);
    double *alpha = malloc(n * sizeof *alpha);
    double *A = calloc(n * nm, sizeof *A); /* y_t alpha_t per training point and model */
    if (!s->present || !s->pos || !s->neg || !s->rho || !s->iters || !idx || !yb || !alpha ||
        !A) {
        rc = fk_err_set(err, FK_ENOMEM, "svm: out of memory (n = %zu, %zu models)", n, nm);
        goto out;
    }
    for (int c = 0, k = 0; c < n_class; c++)
        if (cnt[c])
            s->present[k++] = c;
    /* The binary problems: OvO pairs (a < b) with the points of a first, then those of b,
     * each in input order (LIBSVM's grouping); OvR class c against all, in input order. */
    size_t mi = 0;
    for (int a = 0; a < np && !rc; a++)
        for (int bcl = o->multi == FK_SVM_OVO ? a + 1 : -1; bcl < np && !rc; bcl++) {
            if (o->multi == FK_SVM_OVR && bcl >= 0)
                break;
            int ca = s->present[a], cb = bcl >= 0 ? s->present[bcl] : -1;
            size_t l = 0;
            if (cb >= 0) {
                for (size_t i = 0; i < n; i++)
                    if (y[i] == ca) {
                        idx[l] = i;
                        yb[l++] = 1;
                    }
                for (size_t i = 0; i < n; i++)
                    if (y[i] == cb) {
                        idx[l] = i;
                        yb[l++] = -1;
                    }
            } else {
                for (size_t i = 0; i < n; i++) {
                    idx[l] = i;
                    yb[l++] = y[i] == ca ? 1 : -1;
                }
            }
            bin b = {.K = K, .idx = idx, .yb = yb, .l = l};
            rc = smo(&b, o, alpha, &s->rho[mi], &s->iters[mi], err);
            if (rc) {
                if (cb >= 0)
                    fk_err_prefix(err, rc, "svm: class %d vs %d: ", ca, cb);
                else
                    fk_err_prefix(err, rc, "svm: class %d vs the rest: ", ca);
                break;
            }
            for (size_t t = 0; t < l; t++)
                A[idx[t] * nm + mi] = yb[t] * alpha[t];
            s->pos[mi] = ca;
            s->neg[mi] = cb;
            mi++;
        }
    if (rc)
        goto out;
    /* Keep the support vectors (union over the models) and their coefficients. */
    for (size_t i = 0; i < n; i++) {
        int used = 0;
        for (size_t k = 0; k < nm; k++)
            used |= A[i * nm + k] != 0;
        s->n_sv += used;
    }
    s->sv = malloc((s->n_sv ? s->n_sv : 1) * sizeof *s->sv);
    if (!s->sv || fk_mat_init(&s->coef, s->n_sv ? s->n_sv : 1, nm)) {
        rc = fk_err_set(err, FK_ENOMEM, "svm: out of memory for %zu support vectors", s->n_sv);
        goto out;
    }
    s->coef.rows = s->n_sv;
    for (size_t i = 0, r = 0; i < n; i++) {
        int used = 0;
        for (size_t k = 0; k < nm; k++)
            used |= A[i * nm + k] != 0;
        if (!used)
            continue;
        s->sv[r] = i;
        memcpy(fk_mat_row(&s->coef, r), A + i * nm, nm * sizeof *A);
        r++;
    }
out:
    free(cnt);
    free(idx);
    free(yb);
    free(alpha);
    free(A);
    if (rc)
        fk_svm_close(s);
    return rc;
}

int fk_svm_rbf_gram(const fk_mat *A, const fk_mat *B, double sigma, fk_mat *K, fk_err *err)
{
    *K = (fk_mat){0};
    if (!(sigma > 0) || !isfinite(sigma))
        return fk_err_set(err, FK_EINVAL, "svm: sigma must be > 0 and finite (got %g)", sigma);
    if (A->cols != B->cols)
        return fk_err_set(err, FK_EINVAL, "svm: inputs have %zu and %zu columns", A->cols,
                          B->cols);
    if (fk_mat_init(K, A->rows, B->rows))
        return fk_err_set(err, FK_ENOMEM, "svm: out of memory for a %zu x %zu kernel", A->rows,
                          B->rows);
    if (A->rows == 0 || B->rows == 0)
        return FK_OK;
    int rc = fk_gemm(FK_NOTRANS, FK_TRANS, 1.0, A, B, 0.0, K, err);
    if (!rc)
        rc = fk_gauss_from_cross(A, B, sigma, K, "svm", err);
    if (rc)
        fk_mat_close(K);
    return rc;
}

static int all_finite_mat(const fk_mat *X)
{
    for (size_t i = 0; i < X->rows; i++)
        for (size_t j = 0; j < X->cols; j++)
            if (!isfinite(X->data[i * X->ld + j]))
                return 0;
    return 1;
}

int fk_svm_fit_rbf(fk_svm *s, const fk_mat *X, const int *y, int n_class, double sigma,
                   const fk_svm_opts *o, fk_err *err)
{
    *s = (fk_svm){0};
    if (!all_finite_mat(X))
        return fk_err_set(err, FK_EINVAL, "svm: the training inputs hold a NaN or Inf");
    fk_mat K;
    int rc = fk_svm_rbf_gram(X, X, sigma, &K, err);
    if (rc)
        return rc;
    rc = fk_svm_fit_kernel(s, &K, y, n_class, o, err);
    fk_mat_close(&K);
    if (rc)
        return rc;
    s->sigma = sigma;
    if (fk_mat_init(&s->Xsv, s->n_sv ? s->n_sv : 1, X->cols)) {
        fk_svm_close(s);
        return fk_err_set(err, FK_ENOMEM, "svm: out of memory for the support vectors");
    }
    s->Xsv.rows = s->n_sv;
    for (size_t r = 0; r < s->n_sv; r++)
        memcpy(fk_mat_row(&s->Xsv, r), fk_mat_row(X, s->sv[r]), X->cols * sizeof(double));
    return FK_OK;
}

/* dec (nt x n_models) = Ksv coef - 1 rho^T, Ksv the kernel against the support vectors. */
FK_CHECKRETURN static int decide(const fk_svm *s, const fk_mat *Ksv, fk_mat *dec, fk_err *err)
{
    int rc = s->n_sv ? fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, Ksv, &s->coef, 0.0, dec, err) : FK_OK;
    for (size_t i = 0; !rc && i < dec->rows; i++)
        for (size_t k = 0; k < s->n_models; k++)
            dec->data[i * dec->ld + k] -= s->rho[k];
    return rc;
}

int fk_svm_decision_kernel(const fk_svm *s, const fk_mat *Kt, fk_mat *dec, fk_err *err)
{
    *dec = (fk_mat){0};
    if (!s->n_models)
        return fk_err_set(err, FK_ESTATE, "svm: the model is not fitted");
    if (Kt->cols != s->n_train)
        return fk_err_set(err, FK_EINVAL,
                          "svm: test kernel rows have %zu columns, the fit had %zu training points",
                          Kt->cols, s->n_train);
    if (!all_finite_mat(Kt))
        return fk_err_set(err, FK_EINVAL, "svm: the test kernel holds a NaN or Inf");
    fk_mat Ksv = {0};
    size_t nt = Kt->rows;
    if (fk_mat_init(dec, nt ? nt : 1, s->n_models) || fk_mat_init(&Ksv, nt ? nt : 1, s->n_sv ? s->n_sv : 1)) {
        fk_mat_close(dec);
        return fk_err_set(err, FK_ENOMEM, "svm: out of memory for %zu test rows", nt);
    }
    dec->rows = Ksv.rows = nt;
    Ksv.cols = s->n_sv;
    for (size_t i = 0; i < nt; i++)
        for (size_t r = 0; r < s->n_sv; r++)
            Ksv.data[i * Ksv.ld + r] = Kt->data[i * Kt->ld + s->sv[r]];
    int rc = nt ? decide(s, &Ksv, dec, err) : FK_OK;
    fk_mat_close(&Ksv);
    if (rc)
        fk_mat_close(dec);
    return rc;
}

int fk_svm_decision(const fk_svm *s, const fk_mat *Xt, fk_mat *dec, fk_err *err)
{
    *dec = (fk_mat){0};
    if (!(s->sigma > 0))
        return fk_err_set(err, FK_ESTATE,
                          "svm: predicting from inputs needs a model fitted by fk_svm_fit_rbf");
    if (Xt->cols != s->Xsv.cols)
        return fk_err_set(err, FK_EINVAL, "svm: test inputs have %zu columns, training had %zu",
                          Xt->cols, s->Xsv.cols);
    if (!all_finite_mat(Xt))
        return fk_err_set(err, FK_EINVAL, "svm: the test inputs hold a NaN or Inf");
    size_t nt = Xt->rows;
    if (fk_mat_init(dec, nt ? nt : 1, s->n_models))
        return fk_err_set(err, FK_ENOMEM, "svm: out of memory for %zu test rows", nt);
    dec->rows = nt;
    int rc = FK_OK;
    /* Blocks of test rows bound the kernel block to 1024 x n_sv. */
    for (size_t r0 = 0; r0 < nt && !rc; r0 += 1024) {
        size_t nb = nt - r0 < 1024 ? nt - r0 : 1024;
        fk_mat Xb = fk_mat_rows(Xt, r0, nb), Db = fk_mat_rows(dec, r0, nb), Kb;
        if (s->n_sv == 0) {
            for (size_t i = 0; i < nb; i++)
                for (size_t k = 0; k < s->n_models; k++)
                    Db.data[i * Db.ld + k] = -s->rho[k];
            continue;
        }
        rc = fk_svm_rbf_gram(&Xb, &s->Xsv, s->sigma, &Kb, err);
        if (!rc)
            rc = decide(s, &Kb, &Db, err);
        fk_mat_close(&Kb);
    }
    if (rc)
        fk_mat_close(dec);
    return rc;
}

int fk_svm_vote(const fk_svm *s, const fk_mat *dec, int *yhat, fk_err *err)
{
    if (dec->cols != s->n_models)
        return fk_err_set(err, FK_EINVAL, "svm: %zu decision columns for %zu models", dec->cols,
                          s->n_models);
    int *votes = calloc((size_t)s->n_class, sizeof *votes);
    if (!votes)
        return fk_err_set(err, FK_ENOMEM, "svm: out of memory");
    for (size_t i = 0; i < dec->rows; i++) {
        const double *d = fk_mat_row(dec, i);
        if (s->multi == FK_SVM_OVR) { /* largest decision value, ties to the first model */
            size_t best = 0;
            for (size_t k = 1; k < s->n_models; k++)
                if (d[k] > d[best])
                    best = k;
            yhat[i] = s->pos[best];
            continue;
        }
        /* OvO: f > 0 votes for the first class of the pair; most votes wins, ties go to
         * the smaller class (LIBSVM). */
        memset(votes, 0, (size_t)s->n_class * sizeof *votes);
        for (size_t k = 0; k < s->n_models; k++)
            votes[d[k] > 0 ? s->pos[k] : s->neg[k]]++;
        int best = s->present[0];
        for (int c = 1; c < s->n_present; c++)
            if (votes[s->present[c]] > votes[best])
                best = s->present[c];
        yhat[i] = best;
    }
    free(votes);
    return FK_OK;
}

int fk_svm_predict(const fk_svm *s, const fk_mat *Xt, int *yhat, fk_err *err)
{
    fk_mat dec;
    int rc = fk_svm_decision(s, Xt, &dec, err);
    if (rc)
        return rc;
    rc = fk_svm_vote(s, &dec, yhat, err);
    fk_mat_close(&dec);
    return rc;
}
