/* check_update of dica and udica: the tensors each phase's task asked for and nothing else
 * (update_check.h: names, shapes, finiteness, FK_UPDATE_MAX_ABS), then what the statistics
 * must satisfy for the client's own count n. The random features have unit norm:
 * phi(x) = R^-1/2 [cos(Omega x); sin(Omega x)], so every |phi_j| <= R^-1/2 and
 * phi_j^2 + phi_(j+R)^2 = 1/R for each frequency j; the outputs psi (one-hot classes or the
 * targets' random features) have |psi| = 1 too. Hence, for sums over n rows:
 *   phase 0: n, d, classes whole; m2_x >= 0 (second moments about the client's own mean);
 *            labels (a job listing no classes) finite and strictly ascending;
 *   phase 1: domain ids whole and distinct, domain sizes >= min_domain_size adding up to n;
 *            |dom_sum| <= the domain's size per row. The second moments are about the
 *            client's own means phibar = sum dom_sum / n and psibar = s_psi / n (centred,
 *            S_c = S - n phibar phibar^T), so: |S_phiphi_c| <= n / R entrywise with
 *            S_jj + S_(j+R)(j+R) = n / R - n (phibar_j^2 + phibar_(j+R)^2) for every
 *            frequency; |C_phipsi_c|, |C_phipsi| <= n R^-1/2, C_phipsi_c = C_phipsi -
 *            (sum phi)(s_psi)^T / n (the uncentred sum travels for this check: a scaled
 *            centred one alone would be plausible); |s_psi|, |S_psipsi_c| <= n with
 *            trace(S_psipsi_c) = n - n |psibar|^2; with classes (one-hot psi) s_psi whole,
 *            adding up to n, and the rows of C_phipsi adding up to the sum of the domain
 *            sums;
 *   phase 2: ridge sums A = sum [z; 1][z; 1]^T (symmetric, |A_ij| <= sqrt(A_ii A_jj),
 *            A_pp = n) and b = sum [z; 1] t^T (classes: the last row counts, adding up to n);
 *   phase 3 and every client without statistics (held out): only n = 0.
 * A refusal names the tensor, the position and the bound, never a value. */
#include <math.h>
#include <stdio.h>

#include "common/methods/dica/dica_int.h"
#include "common/methods/update_check.h"

/* Relative slack of a sum of n rounded products against its exact bound. */
static const double TOL = 1e-9;

static int is_train(const fk__dicaj_server *s, int who)
{
    return !s->c.holdout[who];
}

/* Tensor `name` of r values (c == 0) or r x c, each finite with |x| <= bound (>= 0 with
 * nonneg), as fk__dicaj_put shapes it. */
FK_CHECKRETURN static int take(const fk_bundle *b, const char *name, size_t r, size_t c,
                               double bound, int nonneg, int who, const fk_tensor **out,
                               fk_err *err)
{
    const uint64_t shape[2] = {r, c};
    return fk_update_check_tensor(b, name, c ? 2 : 1, shape, bound, nonneg, 0, who, out, err);
}

/* The one scalar n of every update, a whole number in [lo, hi]. */
FK_CHECKRETURN static int take_n(const fk_bundle *b, double lo, double hi, int who, double *n,
                                 fk_err *err)
{
    const fk_tensor *t;
    int rc = take(b, "n", 1, 0, FK_UPDATE_MAX_ABS, 1, who, &t, err);
    if (!rc)
        rc = fk_update_check_range(t, lo, hi, 1, who, err);
    *n = rc ? 0 : t->data[0];
    return rc;
}

FK_CHECKRETURN static int implausible(int who, const char *name, const char *what, fk_err *err)
{
    return fk_err_set(err, FK_EINVAL,
                      "dica: client %d sent tensor '%s' that no data of its size gives (%s)", who,
                      name, what);
}

/* The length of a vector sum_x (0 when it is none: refused by take as missing or misshaped). */
static size_t sx_len(const fk_bundle *b)
{
    const fk_tensor *t = fk_bundle_get(b, "sum_x");
    return t && t->ndim == 1 && t->len > 0 ? t->len : 1;
}

FK_CHECKRETURN static int check_moments(const fk__dicaj_server *s, const fk_bundle *b, int who,
                                        fk_err *err)
{
    /* the last name: sum_y for regression, else labels (optional: the client's raw labels
     * when the job lists no classes, issue 32) */
    static const char *const cls[] = {"n", "d", "classes", "sum_x", "m2_x", "labels"};
    static const char *const reg[] = {"n", "d", "classes", "sum_x", "m2_x", "sum_y"};
    const fk_tensor *d, *sx;
    double n;
    int rc;
    if ((rc = fk_update_check_names(b, s->c.regression ? reg : cls, 6, who, err)) ||
        (rc = take_n(b, 0, 9e15, who, &n, err)) ||
        (rc = take(b, "d", 1, 0, FK_UPDATE_MAX_ABS, 1, who, &d, err)) ||
        (rc = fk_update_check_range(d, 1, 1e8, 1, who, err)))
        return rc;
    const fk_tensor *c;
    if ((rc = take(b, "classes", 1, 0, FK_UPDATE_MAX_ABS, 1, who, &c, err)) ||
        (rc = fk_update_check_range(c, 0, FK_DICA_MAX_CLASSES, 1, who, err)) ||
        (rc = take(b, "sum_x", sx_len(b), 0, FK_UPDATE_MAX_ABS, 0, who, &sx, err)) ||
        (rc = take(b, "m2_x", sx->len, 0, FK_UPDATE_MAX_ABS, 1, who, NULL, err)) ||
        (s->c.regression && (rc = take(b, "sum_y", 1, 0, FK_UPDATE_MAX_ABS, 0, who, NULL, err))))
        return rc;
    if (d->data[0] != (double)sx->len) /* the length, not d: d is the client's to quote */
        return implausible(who, "d", "the length of 'sum_x'", err);
    const fk_tensor *lab = fk_bundle_get(b, "labels");
    if (lab && (lab->ndim != 1 || lab->len > FK_DICA_MAX_CLASSES))
        return fk_err_set(err, FK_EINVAL,
                          "dica: client %d: 'labels' is not a list of at most %d "
                          "values",
                          who, FK_DICA_MAX_CLASSES);
    for (size_t i = 0; lab && i < lab->len; i++)
        if (!isfinite(lab->data[i]) || fabs(lab->data[i]) > FK_UPDATE_MAX_ABS ||
            (i && !(lab->data[i] > lab->data[i - 1])))
            return fk_err_set(err, FK_EINVAL,
                              "dica: client %d: 'labels'[%zu] is not finite, "
                              "within %g and ascending",
                              who, i, FK_UPDATE_MAX_ABS);
    (void)n; /* m2_x about the client's own mean bounds nothing of sum_x */
    return FK_OK;
}

/* Packed upper triangle (column by column): the index of (j, j). */
static size_t diag_at(size_t j)
{
    return j * (j + 1) / 2 + j;
}

FK_CHECKRETURN static int check_domains(const fk__dicaj_server *s, const fk_bundle *b, double n,
                                        size_t D, int who, size_t *nq, fk_err *err)
{
    const fk_tensor *ids = fk_bundle_get(b, "dom_id"), *dn, *ds;
    if (!ids || ids->ndim != 1 || ids->len == 0 || ids->len > (size_t)n)
        return fk_err_set(err, FK_EINVAL,
                          "dica: client %d sent no tensor 'dom_id' of 1 to n domain ids", who);
    size_t Nq = ids->len;
    double max_id = s->c.domains ? (double)s->c.domains - 1 : 2147483647.0;
    int rc;
    if ((rc = fk_update_check_range(ids, 0, max_id, 1, who, err)) ||
        (rc = take(b, "dom_n", Nq, 0, n, 1, who, &dn, err)) ||
        (rc = fk_update_check_range(dn, s->c.min_domain > 1 ? s->c.min_domain : 1, n, 1, who,
                                    err)) ||
        (rc = take(b, "dom_sum", Nq, D, n, 0, who, &ds, err)))
        return rc;
    double total = 0;
    for (size_t i = 0; i < Nq; i++) {
        for (size_t j = 0; j < i; j++)
            if (ids->data[j] == ids->data[i])
                return fk_err_set(err, FK_EINVAL,
                                  "dica: client %d sent tensor 'dom_id' with entry %zu repeating "
                                  "entry %zu (one sum per domain)",
                                  who, i, j);
        total += dn->data[i];
    }
    if (total != n)
        return implausible(who, "dom_n", "the domain sizes add up to n", err);
    for (size_t i = 0; i < Nq; i++) {
        double q = 0;
        for (size_t j = 0; j < D; j++)
            q += ds->data[i * D + j] * ds->data[i * D + j];
        if (!(sqrt(q) <= dn->data[i] * (1 + TOL)))
            return fk_err_set(err, FK_EINVAL,
                              "dica: client %d sent tensor 'dom_sum' whose row %zu is longer than "
                              "its domain's size (a sum of unit-norm features)",
                              who, i);
    }
    *nq = Nq;
    return FK_OK;
}

FK_CHECKRETURN static int check_stats(const fk__dicaj_server *s, const fk_bundle *b, int who,
                                      fk_err *err)
{
    static const char *const names[] = {"n",          "dom_id",     "dom_n",
                                        "dom_sum",    "S_phiphi_c", "s_psi",
                                        "C_phipsi_c", "S_psipsi_c", "C_phipsi"};
    size_t D = 2 * (size_t)s->c.R, R = (size_t)s->c.R, Dy = fk__dicaj_dy(&s->c, s->C), Nq = 0;
    double n;
    int rc;
    const fk_tensor *S, *sp, *Syy;
    if ((rc = fk_update_check_names(b, names, Dy ? 9 : 5, who, err)) ||
        (rc = take_n(b, 2, 9e15, who, &n, err)) ||
        (rc = check_domains(s, b, n, D, who, &Nq, err)) ||
        (rc =
             take(b, "S_phiphi_c", D * (D + 1) / 2, 0, n / (double)R * (1 + TOL), 0, who, &S, err)))
        return rc;
    /* cos^2 + sin^2 = 1: each frequency's two diagonal entries of the uncentred moment add
     * up to n / R; centred, n (phibar_j^2 + phibar_(j+R)^2) less, phibar = sum dom_sum / n */
    const fk_tensor *ds = fk_bundle_get(b, "dom_sum");
    for (size_t j = 0; j < R; j++) {
        double a = 0, c = 0;
        for (size_t q = 0; q < Nq; q++) {
            a += ds->data[q * D + j];
            c += ds->data[q * D + j + R];
        }
        double want = n / (double)R - (a * a + c * c) / n;
        if (!(fabs(S->data[diag_at(j)] + S->data[diag_at(j + R)] - want) <= 1e-6 * n / (double)R))
            return fk_err_set(err, FK_EINVAL,
                              "dica: client %d sent tensor 'S_phiphi_c' whose diagonal entries "
                              "%zu and %zu do not add up to n / R less the mean's share "
                              "(unit-norm features)",
                              who, j, j + R);
    }
    if (!Dy)
        return FK_OK;
    if ((rc = take(b, "s_psi", Dy, 0, n * (1 + TOL), 0, who, &sp, err)) ||
        (rc = take(b, "C_phipsi_c", D, Dy, n / sqrt((double)R) * (1 + TOL), 0, who, NULL, err)) ||
        (rc = take(b, "C_phipsi", D, Dy, n / sqrt((double)R) * (1 + TOL), 0, who, NULL, err)) ||
        (rc = take(b, "S_psipsi_c", Dy * (Dy + 1) / 2, 0, n * (1 + TOL), 0, who, &Syy, err)))
        return rc;
    double tr = 0, cnt = 0, m2 = 0;
    for (size_t j = 0; j < Dy; j++) {
        tr += Syy->data[diag_at(j)];
        cnt += sp->data[j];
        m2 += sp->data[j] * sp->data[j];
    }
    if (!(fabs(tr - (n - m2 / n)) <= 1e-6 * n))
        return implausible(who, "S_psipsi_c", "trace n - |s_psi|^2 / n: unit-norm outputs", err);
    /* the centred cross moment is the uncentred one less (sum phi)(sum psi)^T / n */
    const fk_tensor *Cc = fk_bundle_get(b, "C_phipsi_c"), *Cu = fk_bundle_get(b, "C_phipsi");
    for (size_t j = 0; j < D; j++) {
        double e = 0;
        for (size_t q = 0; q < Nq; q++)
            e += ds->data[q * D + j];
        for (size_t c = 0; c < Dy; c++)
            if (!(fabs(Cu->data[j * Dy + c] - e * sp->data[c] / n - Cc->data[j * Dy + c]) <=
                  1e-6 * n / sqrt((double)R)))
                return fk_err_set(err, FK_EINVAL,
                                  "dica: client %d sent tensors 'C_phipsi_c' and 'C_phipsi' that "
                                  "disagree at (%zu, %zu) (centred = uncentred less the means' "
                                  "product)",
                                  who, j, c);
    }
    if (s->c.regression)
        return FK_OK;
    if ((rc = fk_update_check_range(sp, 0, n, 1, who, err)) || cnt != n)
        return rc ? rc : implausible(who, "s_psi", "class counts adding up to n", err);
    /* one-hot rows add up to 1: sum_c C_phipsi[:, c] = sum_i phi(x_i) = sum_q dom_sum[q] */
    for (size_t j = 0; j < D; j++) {
        double a = 0, e = 0;
        for (size_t c = 0; c < Dy; c++)
            a += Cu->data[j * Dy + c];
        for (size_t q = 0; q < Nq; q++)
            e += ds->data[q * D + j];
        if (!(fabs(a - e) <= 1e-6 * n / sqrt((double)R)))
            return fk_err_set(err, FK_EINVAL,
                              "dica: client %d sent tensors 'C_phipsi' and 'dom_sum' that "
                              "disagree at feature %zu (with one-hot classes, the rows of "
                              "C_phipsi add up to the sum of the domain sums)",
                              who, j);
    }
    return FK_OK;
}

FK_CHECKRETURN static int check_ridge(const fk__dicaj_server *s, const fk_bundle *b, int who,
                                      fk_err *err)
{
    static const char *const names[] = {"n", "ridge_A", "ridge_b"};
    size_t p = s->m + 1, k = s->k;
    double n;
    const fk_tensor *A, *rb;
    int rc;
    if ((rc = fk_update_check_names(b, names, 3, who, err)) ||
        (rc = take_n(b, 1, 9e15, who, &n, err)) ||
        (rc = take(b, "ridge_A", p, p, FK_UPDATE_MAX_ABS, 0, who, &A, err)) ||
        (rc = take(b, "ridge_b", p, k, FK_UPDATE_MAX_ABS, 0, who, &rb, err)))
        return rc;
    const double *a = A->data;
    if (a[p * p - 1] != n)
        return implausible(who, "ridge_A", "its last diagonal entry counts the rows, n", err);
    for (size_t i = 0; i < p; i++)
        for (size_t j = 0; j <= i; j++) {
            double aij = a[i * p + j], aji = a[j * p + i];
            if (!(a[i * p + i] >= 0) || aij != aji ||
                !(fabs(aij) <= sqrt(a[i * p + i] * a[j * p + j]) * (1 + TOL) + 1e-300))
                return fk_err_set(err, FK_EINVAL,
                                  "dica: client %d sent tensor 'ridge_A' that is no sum of "
                                  "outer products at entries (%zu, %zu) and (%zu, %zu)",
                                  who, i, j, j, i);
        }
    if (s->c.regression)
        return FK_OK;
    /* one-hot targets: the constant row of b counts each class */
    fk_tensor last = {.ndim = 1, .shape = {k}, .len = k, .data = rb->data + (p - 1) * k};
    snprintf(last.name, sizeof last.name, "ridge_b");
    double cnt = 0;
    for (size_t c = 0; c < k; c++)
        cnt += last.data[c];
    if ((rc = fk_update_check_range(&last, 0, n, 1, who, err)) || cnt != n)
        return rc ? rc : implausible(who, "ridge_b", "its last row counts the classes, n", err);
    return FK_OK;
}

/* What a client without statistics for this phase sends: n = 0 and nothing else. */
FK_CHECKRETURN static int check_empty(const fk_bundle *b, int who, fk_err *err)
{
    static const char *const names[] = {"n"};
    double n;
    int rc = fk_update_check_names(b, names, 1, who, err);
    return rc ? rc : take_n(b, 0, 0, who, &n, err);
}

int fk__dicaj_server_check(void *v, int round, int phase, const fk_update *up, fk_err *err)
{
    const fk__dicaj_server *s = v;
    const fk_bundle *b = &up->msg;
    int who = up->client;
    if (round != 1 || who < 0 || who >= s->n || phase < 0 || phase > 3)
        return fk_err_set(err, FK_EINVAL,
                          "dica: update of client %d for round %d phase %d is unexpected", who,
                          round, phase);
    if (phase == 0)
        return check_moments(s, b, who, err);
    if (phase == 3 || !is_train(s, who))
        return check_empty(b, who, err);
    return phase == 1 ? check_stats(s, b, who, err) : check_ridge(s, b, who, err);
}
