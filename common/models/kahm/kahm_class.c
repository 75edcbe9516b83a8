/* Class models (Remark 12), the class models of one party, the classifiers (63)/(64)
 * and the assumption diagnostics (§7.4). */
#include "common/models/kahm/kahm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int fk_kahm_n_parts(size_t N, const fk_kahm_opts *o)
{
    double r = (double)N / (double)(o->nb > 0 ? o->nb : 1);
    long S = o->partition_ceil ? (long)ceil(r) : (long)floor(r + 0.5);
    return S < 1 ? 1 : (int)S;
}

void fk_kahm_class_close(fk_kahm_class *c)
{
    if (!c)
        return;
    for (int s = 0; s < c->n_parts; s++)
        fk_kahm_close(&c->parts[s]);
    free(c->parts);
    memset(c, 0, sizeof *c);
}

/* Cluster count: S from the rule, lowered until every cluster holds min_cluster rows. */
FK_CHECKRETURN static int partition(const double *Y, size_t N, size_t p, size_t ldy, const fk_kahm_opts *o,
                     int *assign, int *S_out, fk_err *err)
{
    int S = fk_kahm_n_parts(N, o);
    while (S > 1) {
        int rc = fk__kahm_kmeans(Y, N, p, ldy, S, o->km_restarts, o->km_maxit, o->seed, assign,
                                 err);
        if (rc)
            return rc;
        int ok = 1;
        for (int s = 0; s < S && ok; s++) {
            size_t cnt = 0;
            for (size_t i = 0; i < N; i++)
                cnt += assign[i] == s;
            ok = cnt >= (size_t)(o->min_cluster > 2 ? o->min_cluster : 2);
        }
        if (ok)
            break;
        S--;
    }
    if (S == 1)
        memset(assign, 0, N * sizeof(int));
    *S_out = S;
    return FK_OK;
}

int fk_kahm_class_fit(fk_kahm_class *c, int cls, const double *Y, size_t N, size_t p, size_t ldy,
                      const fk_kahm_opts *o, fk_err *err)
{
    memset(c, 0, sizeof *c);
    c->cls = cls;
    c->N = (int)N;
    if (N < 2)
        return fk_err_set(err, FK_EINVAL,
                          "class %d has %zu sample(s); a KAHM needs at least 2 (drop the class "
                          "from this client's data)",
                          cls, N);
    int *assign = malloc(N * sizeof(int));
    if (!assign)
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    int S = 1;
    int rc = partition(Y, N, p, ldy, o, assign, &S, err);
    c->parts = rc ? NULL : calloc((size_t)S, sizeof *c->parts);
    if (!rc && !c->parts)
        rc = fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    double *buf = NULL;
    if (!rc && S > 1 && !(buf = malloc(N * p * sizeof(double))))
        rc = fk_err_set(err, FK_ENOMEM, "KAHM: out of memory for a cluster copy");
    for (int s = 0; !rc && s < S; s++) {
        if (S == 1) {
            rc = fk_kahm_fit(&c->parts[0], Y, N, p, ldy, o, err);
        } else {
            size_t m = 0;
            for (size_t i = 0; i < N; i++)
                if (assign[i] == s)
                    memcpy(buf + (m++) * p, Y + i * ldy, p * sizeof(double));
            rc = fk_kahm_fit(&c->parts[s], buf, m, p, p, o, err);
        }
        if (rc)
            fk_err_prefix(err, rc, "class %d, part %d of %d: ", cls, s + 1, S);
        else
            c->n_parts = s + 1;
    }
    free(buf);
    free(assign);
    if (rc)
        fk_kahm_class_close(c);
    return rc;
}

/* Class distance (67): the minimum over the parts. */
FK_CHECKRETURN static int class_dist(const fk_kahm_class *c, const double *T, size_t nt, size_t ldt,
                                     double *gamma, fk_err *err)
{
    for (size_t i = 0; i < nt; i++)
        gamma[i] = INFINITY;
    double *g = nt ? malloc(nt * sizeof(double)) : NULL;
    if (nt && !g)
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    for (int s = 0; s < c->n_parts; s++) {
        int rc = fk_kahm_dist(&c->parts[s], T, nt, ldt, g, NULL, err);
        if (rc) {
            free(g);
            return rc;
        }
        for (size_t i = 0; i < nt; i++)
            gamma[i] = g[i] < gamma[i] ? g[i] : gamma[i];
    }
    free(g);
    return FK_OK;
}

void fk_kahm_set_close(fk_kahm_set *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        fk_kahm_class_close(&s->cls[i]);
    free(s->cls);
    memset(s, 0, sizeof *s);
}

int fk_kahm_set_fit(fk_kahm_set *s, const double *X, size_t N, size_t p, size_t ldx,
                    const int *y, int C, const fk_kahm_opts *o, fk_err *err)
{
    return fk_kahm_set_fit_partial(s, X, N, p, ldx, y, C, o, NULL, NULL, err);
}

int fk_kahm_set_fit_partial(fk_kahm_set *s, const double *X, size_t N, size_t p, size_t ldx,
                            const int *y, int C, const fk_kahm_opts *o, fk_kahm_skip_fn skip,
                            void *ud, fk_err *err)
{
    memset(s, 0, sizeof *s);
    if (C < 1)
        return fk_err_set(err, FK_EINVAL, "KAHM: the number of classes must be >= 1 (got %d)", C);
    size_t *cnt = calloc((size_t)C, sizeof *cnt);
    if (!cnt)
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    for (size_t i = 0; i < N; i++) {
        if (y[i] < 0 || y[i] >= C) {
            free(cnt);
            return fk_err_set(err, FK_EINVAL,
                              "sample %zu has class id %d, outside the job's classes [0, %d)", i,
                              y[i], C);
        }
        cnt[y[i]]++;
    }
    int held = 0;
    for (int c = 0; c < C; c++)
        held += cnt[c] > 0;
    s->n_classes = C;
    s->cls = calloc(held ? (size_t)held : 1, sizeof *s->cls);
    double *buf = s->cls ? malloc((N ? N : 1) * p * sizeof(double)) : NULL;
    int rc = buf ? FK_OK : fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    /* Class by class in ascending id: gather the rows, fit. */
    for (int c = 0; !rc && c < C; c++) {
        if (!cnt[c])
            continue;
        size_t m = 0;
        for (size_t i = 0; i < N; i++)
            if (y[i] == c)
                memcpy(buf + (m++) * p, X + i * ldx, p * sizeof(double));
        fk_err why = {0};
        rc = fk_kahm_class_fit(&s->cls[s->n], c, buf, m, p, p, o, skip ? &why : err);
        if (!rc) {
            s->n++;
        } else if (skip && (rc == FK_EINVAL || rc == FK_ENUMERIC)) {
            /* this class's data cannot be modelled (one sample, rows all equal): leave it out,
             * the other classes are still served */
            fk_kahm_class_close(&s->cls[s->n]);
            skip(ud, c, m, &why);
            rc = FK_OK;
        } else if (skip) {
            rc = fk_err_set(err, rc, "%s", why.msg);
        }
    }
    free(buf);
    free(cnt);
    if (rc)
        fk_kahm_set_close(s);
    return rc;
}

int fk_kahm_set_dist(const fk_kahm_set *s, const double *T, size_t nt, size_t ldt, double *D,
                     int acc, fk_err *err)
{
    size_t C = (size_t)s->n_classes;
    if (!acc)
        for (size_t i = 0; i < nt * C; i++)
            D[i] = INFINITY;
    double *g = nt ? malloc(nt * sizeof(double)) : NULL;
    if (nt && !g)
        return fk_err_set(err, FK_ENOMEM, "KAHM: out of memory");
    for (int k = 0; k < s->n; k++) {
        int rc = class_dist(&s->cls[k], T, nt, ldt, g, err);
        if (rc) {
            free(g);
            return rc;
        }
        size_t c = (size_t)s->cls[k].cls;
        for (size_t i = 0; i < nt; i++)
            if (g[i] < D[i * C + c])
                D[i * C + c] = g[i];
    }
    free(g);
    return FK_OK;
}

void fk_kahm_argmin(const double *D, size_t nt, int C, int *label, double *dmin)
{
    for (size_t i = 0; i < nt; i++) {
        int best = -1;
        double bd = INFINITY;
        for (int c = 0; c < C; c++)
            if (D[i * (size_t)C + (size_t)c] < bd) {
                bd = D[i * (size_t)C + (size_t)c];
                best = c;
            }
        label[i] = best;
        if (dmin)
            dmin[i] = bd;
    }
}

void fk_kahm_diag(const double *D, const int *y, size_t nt, int C, int p, double *E1, double *E2,
                  double *E2_noscale)
{
    double e1 = 0.0, e2 = 0.0, e2n = 0.0;
    size_t n2 = 0;
    for (size_t i = 0; i < nt; i++)
        for (int c = 0; c < C; c++) {
            double g = D[i * (size_t)C + (size_t)c];
            if (c == y[i]) {
                double v = fabs(1.0 - exp(-g / p));
                e1 = v > e1 ? v : e1;
            } else if (isfinite(g) || g > 0) {
                e2 += exp(-g / p);
                e2n += exp(-g);
                n2++;
            }
        }
    *E1 = e1;
    *E2 = n2 ? e2 / (double)n2 : NAN;
    *E2_noscale = n2 ? e2n / (double)n2 : NAN;
}
