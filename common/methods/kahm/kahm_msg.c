/* KAHM class lists and models as bundles (spec §8.2) and their checked decoding: the
 * one decoder for updates, the server's checkpoint and model, and the client checkpoint. */
#include "common/methods/kahm/kahm_int.h"
#include "common/methods/update_check.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { META_LEN = 9 }; /* class, part, N, p, n, lambda, tau, model_err, iters */

static void tname(char *out, const char *pre, int a, int s, const char *what)
{
    if (s < 0)
        snprintf(out, FK_TENSOR_NAME_MAX, "%s%s", pre, what);
    else
        snprintf(out, FK_TENSOR_NAME_MAX, "%sm%d.%d.%s", pre, a, s, what);
}

int fk__kahm_encode(const fk_kahm_set *s, int p, const char *pre, int models, fk_bundle *out,
                    fk_err *err)
{
    size_t h = (size_t)s->n;
    char nm[FK_TENSOR_NAME_MAX];
    uint64_t sh[2] = {h, 0};
    double *held, *cnt, *parts;
    tname(nm, pre, 0, -1, "held");
    held = fk_bundle_add(out, nm, 1, sh);
    tname(nm, pre, 0, -1, "counts");
    cnt = fk_bundle_add(out, nm, 1, sh);
    tname(nm, pre, 0, -1, "parts");
    parts = fk_bundle_add(out, nm, 1, sh);
    tname(nm, pre, 0, -1, "dim");
    if ((h && (!held || !cnt || !parts)) || fk_bundle_put_scalar(out, nm, p))
        return fk_err_set(err, FK_ENOMEM, "kahm: out of memory for the class list");
    for (size_t a = 0; a < h; a++) {
        held[a] = s->cls[a].cls;
        cnt[a] = s->cls[a].N;
        parts[a] = s->cls[a].n_parts;
    }
    for (size_t a = 0; models && a < h; a++)
        for (int q = 0; q < s->cls[a].n_parts; q++) {
            const fk_kahm *k = &s->cls[a].parts[q];
            uint64_t N = (uint64_t)k->N, P = (uint64_t)k->p, n = (uint64_t)k->n;
            double meta[META_LEN] = {s->cls[a].cls, q,      k->N,         k->p, k->n,
                                     k->lambda,     k->tau, k->model_err, k->iters};
            struct {
                const char *w;
                uint64_t r, c;
                const double *d;
            } t[] = {{"meta", META_LEN, 0, meta}, {"P", n, P, k->P}, {"L", n, n, k->L},
                     {"Xw", N, n, k->Xw},         {"M", N, P, k->M}, {"b", N, 0, k->b}};
            for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
                uint64_t shp[2] = {t[i].r, t[i].c};
                tname(nm, pre, (int)a, q, t[i].w);
                if (fk_bundle_put(out, nm, t[i].c ? 2 : 1, shp, t[i].d))
                    return fk_err_set(err, FK_ENOMEM, "kahm: out of memory encoding '%s'", nm);
            }
        }
    return FK_OK;
}

static int is_int_in(double v, double lo, double hi)
{
    return v >= lo && v <= hi && v == floor(v);
}

/* A tensor of exactly this shape (c == 0: a vector of r) with finite values, |x| <=
 * FK_UPDATE_MAX_ABS. Messages name the tensor and the position, never a value (they reach
 * the server's log and the job's status). */
FK_CHECKRETURN static int take(const fk_bundle *b, const char *name, uint64_t r, uint64_t c,
                const fk_tensor **out, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t)
        return fk_err_set(err, FK_EINVAL, "kahm message: tensor '%s' is missing", name);
    int ok = c ? (t->ndim == 2 && t->shape[0] == r && t->shape[1] == c)
               : ((t->ndim == 1 && t->shape[0] == r) || (t->ndim == 0 && r == 1 && t->len == 1));
    if (!ok)
        return fk_err_set(err, FK_EINVAL,
                          "kahm message: tensor '%s' has shape %llu x %llu, expected %llu x %llu",
                          name, (unsigned long long)t->shape[0],
                          (unsigned long long)(t->ndim > 1 ? t->shape[1] : 0),
                          (unsigned long long)r, (unsigned long long)c);
    for (size_t i = 0; i < t->len; i++)
        if (!(fabs(t->data[i]) <= FK_UPDATE_MAX_ABS))
            return fk_err_set(err, FK_EINVAL,
                              "kahm message: tensor '%s' holds a value that is not finite or "
                              "beyond |x| <= %g at entry %zu",
                              name, FK_UPDATE_MAX_ABS, i);
    *out = t;
    return FK_OK;
}

/* One KAHM "PREmA.S.*": meta consistent with the class list, every array of its shape,
 * finite, L lower triangular with a positive diagonal, lambda > 0. */
FK_CHECKRETURN static int decode_part(const fk_bundle *b, const char *pre, int a, int q, int cls, int p,
                       fk_kahm *k, int *N_out, fk_err *err)
{
    char nm[FK_TENSOR_NAME_MAX];
    const fk_tensor *meta = NULL;
    tname(nm, pre, a, q, "meta");
    int rc = take(b, nm, META_LEN, 0, &meta, err);
    if (rc)
        return rc;
    const double *m = meta->data;
    if (m[0] != cls || m[1] != q || !is_int_in(m[2], 1, FK_KAHM_MAX_COUNT) || m[3] != p ||
        !is_int_in(m[4], 1, p) || !(m[5] > 0) || !(m[6] >= 0) || !is_int_in(m[8], 0, 1e6))
        return fk_err_set(err, FK_EINVAL,
                          "kahm message: '%s' (class, part, N, p, n, lambda, tau, error, "
                          "iterations) disagrees with the class list (class %d, part %d, p %d) "
                          "or is out of range (N in [1, %d], n in [1, p], lambda > 0, tau >= 0, "
                          "iterations in [0, 1e6])",
                          nm, cls, q, p, FK_KAHM_MAX_COUNT);
    uint64_t N = (uint64_t)m[2], n = (uint64_t)m[4], P = (uint64_t)p;
    const fk_tensor *tP, *tL, *tX, *tM, *tb;
    struct {
        const char *w;
        uint64_t r, c;
        const fk_tensor **t;
    } t[] = {{"P", n, P, &tP}, {"L", n, n, &tL}, {"Xw", N, n, &tX}, {"M", N, P, &tM},
             {"b", N, 0, &tb}};
    for (size_t i = 0; i < sizeof t / sizeof *t && !rc; i++) {
        tname(nm, pre, a, q, t[i].w);
        rc = take(b, nm, t[i].r, t[i].c, t[i].t, err);
    }
    if (rc)
        return rc;
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t j = 0; j < n; j++) {
            double v = tL->data[i * n + j];
            if ((j > i && v != 0) || (j == i && !(v > 0))) {
                tname(nm, pre, a, q, "L");
                return fk_err_set(err, FK_EINVAL,
                                  "kahm message: '%s' is not a Cholesky factor at entry (%llu, "
                                  "%llu) (lower triangular, diagonal > 0)",
                                  nm, (unsigned long long)i, (unsigned long long)j);
            }
        }
    *N_out = (int)N;
    if (!k)
        return FK_OK;
    rc = fk_kahm_alloc(k, (int)N, p, (int)n, err);
    if (rc)
        return rc;
    memcpy(k->P, tP->data, tP->len * sizeof(double));
    memcpy(k->L, tL->data, tL->len * sizeof(double));
    memcpy(k->Xw, tX->data, tX->len * sizeof(double));
    memcpy(k->M, tM->data, tM->len * sizeof(double));
    memcpy(k->b, tb->data, tb->len * sizeof(double));
    k->lambda = m[5];
    k->tau = m[6];
    k->model_err = m[7];
    k->iters = (int)m[8];
    return FK_OK;
}

int fk__kahm_decode(const fk_bundle *b, const char *pre, int C, int dim, int models,
                    fk_kahm_set *s, int *p_out, fk_err *err)
{
    char nm[FK_TENSOR_NAME_MAX];
    const fk_tensor *td = NULL, *th = NULL, *tc = NULL, *tp = NULL;
    tname(nm, pre, 0, -1, "dim");
    int rc = take(b, nm, 1, 0, &td, err);
    if (!rc && !is_int_in(td->data[0], 1, FK_KAHM_MAX_DIM))
        rc = fk_err_set(err, FK_EINVAL, "kahm message: tensor '%s' is not an integer in [1, %d]",
                        nm, FK_KAHM_MAX_DIM);
    if (!rc && dim > 0 && td->data[0] != dim)
        rc = fk_err_set(err, FK_EINVAL,
                        "kahm message: data dimension '%s' differs from the job's dim = %d", nm,
                        dim);
    const fk_tensor *h0 = fk_bundle_get(b, (tname(nm, pre, 0, -1, "held"), nm));
    uint64_t h = h0 && h0->ndim == 1 ? h0->shape[0] : 0;
    if (!rc && (!h0 || h > (uint64_t)C))
        rc = fk_err_set(err, FK_EINVAL, "kahm message: class list '%s' missing or longer than the "
                        "job's %d classes", nm, C);
    if (!rc)
        rc = take(b, nm, h, 0, &th, err);
    if (!rc)
        rc = take(b, (tname(nm, pre, 0, -1, "counts"), nm), h, 0, &tc, err);
    if (!rc)
        rc = take(b, (tname(nm, pre, 0, -1, "parts"), nm), h, 0, &tp, err);
    for (uint64_t a = 0; !rc && a < h; a++) {
        double c = th->data[a];
        if (!is_int_in(c, 0, C - 1))
            rc = fk_err_set(err, FK_EINVAL,
                            "kahm message: tensor '%s' has a class id outside the job's classes "
                            "[0, %d) at entry %llu",
                            th->name, C, (unsigned long long)a);
        else if (a > 0 && !(c > th->data[a - 1]))
            rc = fk_err_set(err, FK_EINVAL,
                            "kahm message: tensor '%s' has class ids that are not strictly "
                            "ascending at entry %llu",
                            th->name, (unsigned long long)a);
        else if (!is_int_in(tc->data[a], 2, FK_KAHM_MAX_COUNT))
            rc = fk_err_set(err, FK_EINVAL,
                            "kahm message: tensor '%s' entry %llu is not a sample count in [2, "
                            "%d]",
                            tc->name, (unsigned long long)a, FK_KAHM_MAX_COUNT);
        else if (!is_int_in(tp->data[a], 1, FK_KAHM_MAX_PARTS) || tp->data[a] > tc->data[a] / 2)
            rc = fk_err_set(err, FK_EINVAL,
                            "kahm message: tensor '%s' entry %llu is not a part count in [1, "
                            "min(%d, its samples / 2)]",
                            tp->name, (unsigned long long)a, FK_KAHM_MAX_PARTS);
    }
    if (rc)
        return rc;
    int p = (int)td->data[0];
    if (s) {
        memset(s, 0, sizeof *s);
        s->n_classes = C;
        s->cls = calloc(h ? h : 1, sizeof *s->cls);
        if (!s->cls)
            return fk_err_set(err, FK_ENOMEM, "kahm: out of memory");
    }
    for (uint64_t a = 0; !rc && a < h; a++) {
        int np = (int)tp->data[a], tot = 0;
        fk_kahm_class *c = s ? &s->cls[a] : NULL;
        if (c) {
            c->cls = (int)th->data[a];
            c->N = (int)tc->data[a];
            if (models && !(c->parts = calloc((size_t)np, sizeof *c->parts)))
                rc = fk_err_set(err, FK_ENOMEM, "kahm: out of memory");
            s->n++;
        }
        for (int q = 0; !rc && models && q < np; q++) {
            int N = 0;
            rc = decode_part(b, pre, (int)a, q, (int)th->data[a], p,
                             c ? &c->parts[q] : NULL, &N, err);
            if (!rc && c)
                c->n_parts = q + 1;
            tot += N;
        }
        if (!rc && models && tot != (int)tc->data[a])
            rc = fk_err_set(err, FK_EINVAL,
                            "kahm message: the parts of class entry %llu do not hold the number "
                            "of samples tensor '%s' says",
                            (unsigned long long)a, tc->name);
    }
    if (!rc && !models) { /* a class list alone must not carry models */
        snprintf(nm, sizeof nm, "%sm0.0.meta", pre);
        if (fk_bundle_get(b, nm))
            rc = fk_err_set(err, FK_EINVAL,
                            "kahm message carries models ('%s') where only the class list is "
                            "expected (the job keeps models on the clients: upload_models = 0)",
                            nm);
    }
    if (rc && s)
        fk_kahm_set_close(s);
    if (!rc && p_out)
        *p_out = p;
    return rc;
}
