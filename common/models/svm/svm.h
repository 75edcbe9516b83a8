/* Kernel support vector machine (C-SVC), the centralised baseline the DICA and KAHM
 * tables print next to their methods ("RBF-SVM (C = 10, centralised)", spec dica.md §11.5,
 * kahm.md §9).
 *
 * The binary problem is the C-SVC dual
 *     min_a  1/2 a^T Q a - 1^T a,  0 <= a_i <= C,  y^T a = 0,  Q_ij = y_i y_j K_ij,
 * solved by SMO with the second-order working-set selection of Fan, Chen and Lin (JMLR
 * 2005), the algorithm of LIBSVM (and so of scikit-learn's SVC, which the specs' prototype
 * values come from), without shrinking: same stopping rule (maximal KKT violation < tol),
 * same bias rule (mean over free vectors, else the midpoint of the feasible interval).
 * Multiclass is one-vs-one with voting (LIBSVM/SVC; ties go to the smaller class index) or
 * one-vs-rest (largest decision value).
 *
 * Two ways to fit: on a precomputed n x n kernel matrix (any PSD kernel; predict then takes
 * kernel rows against the n training points), or on inputs X with a Gaussian kernel
 * k(x, x') = exp(-|x - x'|^2 / (2 sigma^2)), i.e. gamma = 1/(2 sigma^2) (the model keeps the
 * support vectors and predicts from inputs). Everything is deterministic: no randomness,
 * a fixed visiting order. Matrices are fk_mat (row-major, samples in rows). */
#ifndef FK_MODELS_SVM_H
#define FK_MODELS_SVM_H

#include <stddef.h>

#include "common/base/err.h"
#include "common/la/mat.h"

typedef enum fk_svm_multi { FK_SVM_OVO = 0, FK_SVM_OVR = 1 } fk_svm_multi;

typedef struct fk_svm_opts {
    double C;          /* box constraint, > 0 (LIBSVM default 1) */
    double tol;        /* stop when the maximal KKT violation is below tol (LIBSVM eps 1e-3) */
    size_t max_iter;   /* SMO steps per binary problem; 0 = LIBSVM's max(10^7, 100 n) */
    fk_svm_multi multi;
} fk_svm_opts;

/* C 1, tol 1e-3, max_iter 0, one-vs-one. */
void fk_svm_opts_default(fk_svm_opts *o);

typedef struct fk_svm {
    int n_class;        /* labels are in [0, n_class) */
    int n_present;      /* classes with training samples (only those are ever predicted) */
    int *present;       /* n_present class labels, increasing */
    fk_svm_multi multi;
    size_t n_train;     /* training points the fit saw */
    size_t n_models;    /* binary problems: n_present (n_present-1)/2 (OvO) or n_present (OvR) */
    int *pos, *neg;     /* per model: the +1 class and (OvO) the -1 class, -1 for "the rest" */
    double *rho;        /* per model: decision f(x) = sum_s coef_s k(x_s, x) - rho */
    size_t *iters;      /* per model: SMO steps taken */
    size_t n_sv;        /* support vectors (union over the models) */
    size_t *sv;         /* n_sv indices into the training points, increasing */
    fk_mat coef;        /* n_sv x n_models, y_s alpha_s (0 where s is not an SV of a model) */
    double sigma;       /* > 0: fitted by fk_svm_fit_rbf, predicts from inputs */
    fk_mat Xsv;         /* n_sv x d support vectors (rbf fits only) */
} fk_svm;

/* Fit on the precomputed kernel K (n x n, symmetric, finite) with labels y[0..n) in
 * [0, n_class); at least two classes must have samples. */
FK_CHECKRETURN int fk_svm_fit_kernel(fk_svm *s, const fk_mat *K, const int *y, int n_class,
                                     const fk_svm_opts *o, fk_err *err);
/* Fit on inputs X (n x d) with the Gaussian kernel of width sigma > 0. Builds the n x n
 * kernel (8 n^2 bytes) for the duration of the fit. */
FK_CHECKRETURN int fk_svm_fit_rbf(fk_svm *s, const fk_mat *X, const int *y, int n_class,
                                  double sigma, const fk_svm_opts *o, fk_err *err);
void fk_svm_close(fk_svm *s);

/* Decision values dec (nt x n_models, initialised here) for test rows given by their
 * kernel values against the n_train training points (Kt, nt x n_train). */
FK_CHECKRETURN int fk_svm_decision_kernel(const fk_svm *s, const fk_mat *Kt, fk_mat *dec,
                                          fk_err *err);
/* Same from inputs Xt (nt x d) for an rbf fit. */
FK_CHECKRETURN int fk_svm_decision(const fk_svm *s, const fk_mat *Xt, fk_mat *dec, fk_err *err);
/* Labels yhat[0..nt) from decision values (OvO votes or OvR argmax). */
FK_CHECKRETURN int fk_svm_vote(const fk_svm *s, const fk_mat *dec, int *yhat, fk_err *err);
FK_CHECKRETURN int fk_svm_predict(const fk_svm *s, const fk_mat *Xt, int *yhat, fk_err *err);

/* Gaussian Gram matrix K (initialised here, na x nb) of the rows of A and B, through one
 * dgemm for the cross products: exp(-(|a|^2 + |b|^2 - 2 a.b) / (2 sigma^2)). */
FK_CHECKRETURN int fk_svm_rbf_gram(const fk_mat *A, const fk_mat *B, double sigma, fk_mat *K,
                                   fk_err *err);

#endif
