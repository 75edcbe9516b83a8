#include "common/models/fedrf_tca/classifier.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int fk_mlp_layout(fk_mlp *net, size_t in, const size_t *hidden, int n_hidden, size_t classes,
                  fk_err *err)
{
    *net = (fk_mlp){0};
    if (n_hidden < 0 || n_hidden > FK_MLP_MAX_HIDDEN)
        return fk_err_set(err, FK_EINVAL, "classifier: 0..%d hidden layers supported (got %d)",
                          FK_MLP_MAX_HIDDEN, n_hidden);
    if (in == 0 || classes < 2)
        return fk_err_set(err, FK_EINVAL, "classifier: need input size >= 1 and >= 2 classes "
                          "(got %zu, %zu)", in, classes);
    net->n_layers = n_hidden + 1;
    net->sizes[0] = in;
    for (int l = 0; l < n_hidden; l++) {
        if (hidden[l] == 0)
            return fk_err_set(err, FK_EINVAL, "classifier: hidden layer %d has size 0", l);
        net->sizes[l + 1] = hidden[l];
    }
    net->sizes[net->n_layers] = classes;
    for (int l = 0; l < net->n_layers; l++)
        net->n_params += net->sizes[l] * net->sizes[l + 1] + net->sizes[l + 1];
    return FK_OK;
}

void fk_mlp_init_params(const fk_mlp *net, double *theta, fk_rng *rng)
{
    double *p = theta;
    for (int l = 0; l < net->n_layers; l++) {
        size_t a = net->sizes[l], b = net->sizes[l + 1];
        double r = 1.0 / sqrt((double)a);
        for (size_t i = 0; i < a * b + b; i++)
            p[i] = r * (2.0 * fk_rng_uniform(rng) - 1.0);
        p += a * b + b;
    }
}

int fk_labels_check(const int *y, size_t n, int n_classes, const char *what, fk_err *err)
{
    if (!y)
        return fk_err_set(err, FK_EINVAL, "%s has no labels; every source domain must be labelled",
                          what);
    int first = -1, two = 0;
    for (size_t i = 0; i < n; i++) {
        if (y[i] < 0 || y[i] >= n_classes)
            return fk_err_set(err, FK_EINVAL, "%s: label %d of sample %zu is outside 0..%d", what,
                              y[i], i, n_classes - 1);
        if (first < 0)
            first = y[i];
        else if (y[i] != first)
            two = 1;
    }
    if (!two)
        return fk_err_set(err, FK_EINVAL,
                          "%s has only one class among its %zu samples; a classifier needs at "
                          "least two", what, n);
    return FK_OK;
}

/* Activations of every layer for a batch: act[0] = X, act[l] (b x sizes[l]). */
typedef struct fwd {
    fk_mat act[FK_MLP_MAX_HIDDEN + 2];
    int n;
} fwd;

static void fwd_close(fwd *f)
{
    for (int l = 1; l <= f->n; l++)
        fk_mat_close(&f->act[l]);
}

/* Fails (before allocating anything) when X does not have the input width. */
FK_CHECKRETURN static int forward(const fk_mlp *net, const double *theta, const fk_mat *X, fwd *f, fk_err *err)
{
    if (X->cols != net->sizes[0])
        return fk_err_set(err, FK_EINVAL, "classifier: input has %zu columns, network expects %zu",
                          X->cols, net->sizes[0]);
    size_t b = X->rows;
    memset(f, 0, sizeof *f);
    f->n = net->n_layers;
    f->act[0] = *X;
    const double *p = theta;
    for (int l = 0; l < net->n_layers; l++) {
        size_t in = net->sizes[l], out = net->sizes[l + 1];
        fk_mat *A = &f->act[l], *B = &f->act[l + 1];
        if (fk_mat_init(B, b, out)) {
            fwd_close(f);
            return fk_err_set(err, FK_ENOMEM, "classifier: out of memory");
        }
        const double *bias = p + in * out;
        for (size_t i = 0; i < b; i++)
            memcpy(fk_mat_row(B, i), bias, out * sizeof(double));
        if (b)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, (int)out, (int)in, 1.0,
                        A->data, (int)A->ld, p, (int)out, 1.0, B->data, (int)B->ld);
        if (l + 1 < net->n_layers)
            for (size_t i = 0; i < b * out; i++)
                B->data[i] = B->data[i] > 0 ? B->data[i] : 0.0;
        p += in * out + out;
    }
    return FK_OK;
}

/* Softmax in place on a row; returns log-sum-exp. */
static double softmax_row(double *o, size_t C)
{
    double mx = o[0];
    for (size_t c = 1; c < C; c++)
        mx = o[c] > mx ? o[c] : mx;
    double s = 0;
    for (size_t c = 0; c < C; c++) {
        o[c] = exp(o[c] - mx);
        s += o[c];
    }
    for (size_t c = 0; c < C; c++)
        o[c] /= s;
    return mx + log(s);
}

int fk_mlp_loss_grad(const fk_mlp *net, const double *theta, const fk_mat *X, const int *y,
                     double *loss, double *gtheta, fk_mat *gX, fk_err *err)
{
    size_t b = X->rows, C = net->sizes[net->n_layers];
    fwd f;
    int rc = forward(net, theta, X, &f, err);
    if (rc)
        return rc;
    /* Output gradient (p - onehot) / b into the last activation. */
    fk_mat *O = &f.act[net->n_layers];
    double L = 0;
    for (size_t i = 0; i < b; i++) {
        double *o = fk_mat_row(O, i);
        double logit = o[y[i]];
        L += softmax_row(o, C) - logit;
        o[y[i]] -= 1.0;
        for (size_t c = 0; c < C; c++)
            o[c] /= (double)b;
    }
    *loss = b ? L / (double)b : 0.0;
    if (!gtheta && !gX) {
        fwd_close(&f);
        return FK_OK;
    }
    /* Backward: G holds dL/d(pre-activation) of layer l+1. */
    size_t off[FK_MLP_MAX_HIDDEN + 2];
    off[0] = 0;
    for (int l = 0; l < net->n_layers; l++)
        off[l + 1] = off[l] + net->sizes[l] * net->sizes[l + 1] + net->sizes[l + 1];
    for (int l = net->n_layers - 1; l >= 0; l--) {
        size_t in = net->sizes[l], out = net->sizes[l + 1];
        fk_mat *G = &f.act[l + 1], *A = &f.act[l];
        const double *W = theta + off[l];
        if (gtheta) {
            double *gW = gtheta + off[l], *gb = gW + in * out;
            if (b)
                cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)in, (int)out, (int)b, 1.0,
                            A->data, (int)A->ld, G->data, (int)G->ld, 0.0, gW, (int)out);
            else
                memset(gW, 0, in * out * sizeof *gW);
            memset(gb, 0, out * sizeof *gb);
            for (size_t i = 0; i < b; i++)
                cblas_daxpy((int)out, 1.0, fk_mat_row(G, i), 1, gb, 1);
        }
        if (l == 0 && !gX)
            break;
        fk_mat tmp;
        if (fk_mat_init(&tmp, b, in)) {
            fwd_close(&f);
            return fk_err_set(err, FK_ENOMEM, "classifier: out of memory");
        }
        if (b)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)in, (int)out, 1.0,
                        G->data, (int)G->ld, W, (int)out, 0.0, tmp.data, (int)tmp.ld);
        if (l == 0) {
            for (size_t i = 0; i < b; i++)
                memcpy(fk_mat_row(gX, i), fk_mat_row(&tmp, i), in * sizeof(double));
            fk_mat_close(&tmp);
            break;
        }
        /* ReLU: pass where the activation was positive; overwrite A in place. */
        for (size_t i = 0; i < b * in; i++)
            A->data[i] = A->data[i] > 0 ? tmp.data[i] : 0.0;
        fk_mat_close(&tmp);
    }
    fwd_close(&f);
    return FK_OK;
}

int fk_mlp_predict(const fk_mlp *net, const double *theta, const fk_mat *X, int *pred, fk_err *err)
{
    fwd f;
    int rc = forward(net, theta, X, &f, err);
    if (rc)
        return rc;
    fk_mat *O = &f.act[net->n_layers];
    size_t C = net->sizes[net->n_layers];
    for (size_t i = 0; i < X->rows; i++) {
        const double *o = fk_mat_row(O, i);
        size_t best = 0;
        for (size_t c = 1; c < C; c++)
            if (o[c] > o[best])
                best = c;
        pred[i] = (int)best;
    }
    fwd_close(&f);
    return FK_OK;
}

int fk_mlp_train(const fk_mlp *net, double *theta, const fk_mat *X, const int *y, int n_classes,
                 const fk_train_opts *o, fk_rng *rng, fk_err *err)
{
    int rc = fk_labels_check(y, X->rows, n_classes, "training data", err);
    if (rc)
        return rc;
    size_t n = X->rows, bs = o->batch < n ? o->batch : n;
    fk_opt opt;
    if ((rc = fk_opt_init(&opt, o->opt, net->n_params, o->lr, err)))
        return rc;
    int *idx = malloc(n * sizeof *idx), *yb = malloc(bs * sizeof *yb);
    double *g = malloc(net->n_params * sizeof *g);
    fk_mat Xb = {0};
    if (!idx || !yb || !g || fk_mat_init(&Xb, bs, X->cols)) {
        rc = fk_err_set(err, FK_ENOMEM, "classifier training: out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++)
        idx[i] = (int)i;
    for (int e = 0; e < o->epochs && !rc; e++) {
        fk_rng_shuffle(rng, idx, n);
        for (size_t s = 0; s + bs <= n && !rc; s += bs) {
            for (size_t i = 0; i < bs; i++) {
                memcpy(fk_mat_row(&Xb, i), fk_mat_row(X, (size_t)idx[s + i]),
                       X->cols * sizeof(double));
                yb[i] = y[idx[s + i]];
            }
            double L;
            rc = fk_mlp_loss_grad(net, theta, &Xb, yb, &L, g, NULL, err);
            if (!rc)
                fk_opt_step(&opt, theta, g);
        }
    }
out:
    fk_mat_close(&Xb);
    free(idx);
    free(yb);
    free(g);
    fk_opt_close(&opt);
    return rc;
}
