/* Server side of the sfl job (spec §6.5, Alg. 4): count the rows (phase 0, fixes
 * n_ref = sum N_i for the slack weight), collect the critical rows with their duals (phase 1),
 * solve (PF) on the union warm-started from those duals, hold the global model. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/sfl/sfl_int.h"
#include "common/methods/update_check.h"

/* ST_CENTRES (candidate atoms only) sits between counting and collecting; the numbers are
 * those of the checkpoints */
enum { ST_COUNT = 0, ST_COLLECT = 1, ST_DONE = 2, ST_CENTRES = 3 };
/* ovo: per problem, over the clients' uploads (their "pd", spec §6.4) */
enum {
    PS_CLIENTS = 0, /* clients that solved it */
    PS_STATUS,      /* worst status among them (-1: none solved) */
    PS_ITERS,       /* most iterations */
    PS_VIOL,        /* largest violation */
    PS_CRIT,        /* critical rows, summed (before the caps) */
    PS_NC,          /* not-converged rows, summed */
    PS_N
};

typedef struct ssrv {
    fk__sfl_cfg c;
    int K, stage, p;
    uint64_t seed;
    double n_ref;
    double *n_decl; /* K: rows declared in phase 0 (-1: none, or excluded) */
    double *n_up;   /* K: rows uploaded (-1: no upload) */
    double *capped; /* K */
    size_t U;
    double *X, *y, *lam, *owner; /* the union of the uploads, U rows */
    fk_sfl_model m; /* ovo: the pair problems' kernels one after the other, mK[q] each */
    int P;          /* ovo: number of pair problems (0: binary) */
    double *nq_ref; /* ovo P: rows of each pair over the clients */
    double *ucls;   /* ovo U: class id of each union row */
    size_t S;       /* ovo: entries of the per-problem lists */
    double *pq, *pi, *pl; /* ovo S: problem, union row, dual */
    double *mK;     /* ovo P */
    double *pdiag;  /* ovo P x PS_N: the clients' per-problem diagnostics, summarised */
    double status, iters, viol, support, primal;
} ssrv;

int fk__sfl_srv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    ssrv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
    int rc = fk__sfl_cfg_parse(&s->c, p, err);
    fk_params_str(p, "sim_n", NULL); /* the simulator's key, not the server's */
    if (rc) {
        free(s);
        return rc;
    }
    s->K = n_clients;
    s->seed = seed;
    s->P = s->c.ovo ? fk__sfl_ovo_pairs(s->c.n_cls) : 0;
    if (s->P && (!(s->nq_ref = calloc((size_t)s->P, sizeof(double))) ||
                 !(s->mK = calloc((size_t)s->P, sizeof(double))) ||
                 !(s->pdiag = calloc((size_t)s->P * PS_N, sizeof(double))))) {
        fk__sfl_srv_close(s);
        return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
    }
    for (int q = 0; q < s->P; q++)
        s->pdiag[(size_t)q * PS_N + PS_STATUS] = -1;
    s->n_decl = malloc((size_t)n_clients * sizeof(double));
    s->n_up = malloc((size_t)n_clients * sizeof(double));
    s->capped = calloc((size_t)n_clients, sizeof(double));
    if (!s->n_decl || !s->n_up || !s->capped) {
        fk__sfl_srv_close(s);
        return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
    }
    for (int k = 0; k < n_clients; k++)
        s->n_decl[k] = s->n_up[k] = -1;
    *out = s;
    return FK_OK;
}

void fk__sfl_srv_close(void *v)
{
    ssrv *s = v;
    if (!s)
        return;
    fk__sfl_cfg_close(&s->c);
    free(s->n_decl);
    free(s->n_up);
    free(s->capped);
    free(s->X);
    free(s->y);
    free(s->lam);
    free(s->owner);
    free(s->nq_ref);
    free(s->ucls);
    free(s->pq);
    free(s->pi);
    free(s->pl);
    free(s->mK);
    free(s->pdiag);
    fk_sfl_model_close(&s->m);
    free(s);
}

int fk__sfl_srv_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)rng;
    (void)err;
    fk_plan_every_client(((ssrv *)v)->K, chosen, n_chosen);
    return FK_OK;
}

/* The resolved settings as the tasks and the checkpoint carry them: the preprocessing map
 * (p values each), 'wr' = (width_min, width_max, grid_h), 'akind', and with atoms the grid box
 * or the candidates 'z' / 'zc'. */
static int put_cfg(const ssrv *s, int atoms, fk_bundle *out)
{
    size_t p = (size_t)s->p;
    const fk__sfl_cfg *c = &s->c;
    double *sh = fk_bundle_add(out, "x_shift", 1, (uint64_t[1]){p});
    double *sc = sh ? fk_bundle_add(out, "x_scale", 1, (uint64_t[1]){p}) : NULL;
    if (!sh || !sc)
        return FK_ENOMEM;
    for (size_t k = 0; k < p; k++) { /* the job's map, one value broadcast, or none */
        size_t i = c->n_pre > 1 ? k : 0;
        sh[k] = c->n_pre ? c->shift[i] : 0;
        sc[k] = c->n_pre ? c->scale[i] : 1;
    }
    double wr[3] = {c->wmin, c->wmax, c->h};
    int rc = fk_bundle_put_vec(out, "wr", 3, wr);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "akind", c->atoms);
    if (!rc && atoms && c->grid) {
        double lo[FK_SFL_GRID_MAX_P], hi[FK_SFL_GRID_MAX_P];
        for (size_t k = 0; k < p && k < FK_SFL_GRID_MAX_P; k++) {
            lo[k] = c->box_lo[c->box_p > 1 ? k : 0];
            hi[k] = c->box_hi[c->box_p > 1 ? k : 0];
        }
        rc = fk_bundle_put_vec(out, "box_lo", p, lo);
        if (!rc)
            rc = fk_bundle_put_vec(out, "box_hi", p, hi);
    }
    if (!rc && atoms && c->atoms == FK__SFL_AT_CAND && c->M) {
        rc = fk_bundle_put(out, "z", 2, (uint64_t[2]){c->M, p}, c->cand);
        if (!rc)
            rc = fk_bundle_put_vec(out, "zc", c->M, c->cand_cls);
        if (!rc)
            rc = fk_bundle_put_scalar(out, "zm", c->cand_mass);
    }
    return rc;
}

int fk__sfl_srv_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    ssrv *s = v;
    (void)round;
    if (client < 0 || client >= s->K)
        return fk_err_set(err, FK_EINVAL, "sfl task for unknown client %d (job has %d)", client,
                          s->K);
    (void)phase; /* the stage says what comes next: count, centres (candidates), upload */
    int op = s->stage == ST_COUNT     ? FK__SFL_OP_COUNT
             : s->stage == ST_CENTRES ? FK__SFL_OP_CENTRES
                                      : FK__SFL_OP_UPLOAD;
    int rc = fk_bundle_put_scalar(out, "op", op);
    if (!rc && op == FK__SFL_OP_UPLOAD)
        rc = fk_bundle_put_scalar(out, "n_ref", s->n_ref);
    if (!rc && op == FK__SFL_OP_UPLOAD && s->P)
        rc = fk_bundle_put_vec(out, "n_ref_q", (size_t)s->P, s->nq_ref);
    if (!rc && op != FK__SFL_OP_COUNT) /* the settings resolved from the federated statistics */
        rc = put_cfg(s, op == FK__SFL_OP_UPLOAD, out);
    return rc ? fk_err_set(err, FK_ENOMEM, "sfl task: out of memory") : FK_OK;
}

/* A scalar of an update: present, one value, finite, in [lo, hi]. */
FK_CHECKRETURN static int scalar(const fk_update *u, const char *name, double lo, double hi, double *out,
                  fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(&u->msg, name);
    if (!t || t->len != 1 || !(t->data[0] >= lo && t->data[0] <= hi))
        return fk_err_set(err, FK_EINVAL, "client %d sent no scalar '%s' in [%g, %g]", u->client,
                          name, lo, hi);
    *out = t->data[0];
    return FK_OK;
}

/* A tensor of an update: present, len values, each finite and an integer in [lo, hi] when
 * integral, else finite in [lo, hi] (lo excluded when open). */
static const fk_tensor *vec(const fk_update *u, const char *name, size_t len, double lo,
                            double hi, int integral, int open, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(&u->msg, name);
    if (!t || t->len != len) {
        fk_err_set(err, FK_EINVAL, "client %d: tensor '%s' missing or not %zu values", u->client,
                   name, len);
        return NULL;
    }
    for (size_t j = 0; j < len; j++) {
        double x = t->data[j];
        if (!isfinite(x) || x < lo || x > hi || (open && x == lo) ||
            (integral && x != floor(x))) {
            /* position and bound only: the value may be a raw feature (never logged) */
            fk_err_set(err, FK_EINVAL, "client %d: tensor '%s' entry %zu is outside its bound "
                                       "(%s in %s%g, %g])",
                       u->client, name, j, integral ? "an integer" : "finite",
                       open ? "(" : "[", lo, hi);
            return NULL;
        }
    }
    return t;
}

/* ovo upload: D distinct rows (x D x p, cls D), per-problem counts pc (P), lists ri (row
 * index, ascending within a problem, of a class of the pair) and rl (dual > 0); every row
 * uploaded is critical for some problem. */
/* ovo per-problem diagnostics "pd" (P x FK__SFL_PD, spec §6.4) of a client with n rows: the
 * status a solver gives or -1 (skipped: nothing else, nothing listed), iterations within the
 * job's two phases of T_client, violation >= 0, finite dual and primal values, at least as many
 * critical rows as listed (the cap only drops) and at most n, the not-converged counts summing
 * to the upload's 'not_converged'. */
FK_CHECKRETURN static int check_pd(const ssrv *s, const fk_update *u, const fk_tensor *pc, double n, fk_err *err)
{
    const fk_tensor *pd = fk_bundle_get(&u->msg, "pd");
    if (!pd || pd->ndim != 2 || pd->shape[0] != (uint64_t)s->P || pd->shape[1] != FK__SFL_PD)
        return fk_err_set(err, FK_EINVAL, "client %d: tensor 'pd' (per-problem diagnostics) "
                                          "missing or not of shape %d x %d",
                          u->client, s->P, FK__SFL_PD);
    double nc_sum = 0, nc = -1;
    for (int q = 0; q < s->P; q++) {
        const double *d = pd->data + (size_t)q * FK__SFL_PD;
        double st = d[FK__SFL_PD_STATUS], it = d[FK__SFL_PD_ITERS], C = d[FK__SFL_PD_CRIT];
        int ok = st == -1 || st == FK_SFL_CONVERGED || st == FK_SFL_INFEASIBLE ||
                 st == FK_SFL_MAXITER;
        for (int k = 0; k < FK__SFL_PD; k++)
            ok &= isfinite(d[k]) && fabs(d[k]) <= 1e300;
        if (ok && st == -1) /* skipped: no values, no rows listed */
            for (int k = 1; k < FK__SFL_PD; k++)
                ok &= d[k] == 0 && pc->data[q] == 0;
        if (ok && st != -1)
            ok = it >= 1 && it <= 2.0 * (double)s->c.T_client && it == floor(it) &&
                 d[FK__SFL_PD_VIOL] >= 0 && C == floor(C) && C >= pc->data[q] && C <= n &&
                 d[FK__SFL_PD_NC] >= 0 && d[FK__SFL_PD_NC] <= n &&
                 d[FK__SFL_PD_NC] == floor(d[FK__SFL_PD_NC]);
        if (!ok) {
            int a, b;
            fk__sfl_ovo_pair(s->c.n_cls, q, &a, &b);
            return fk_err_set(err, FK_EINVAL,
                              "client %d: tensor 'pd' row %d (classes %d vs %d) is not allowed "
                              "(status -1 with zeros, or 0/1/2 with 1 to 2 T_client = %ld "
                              "iterations, violation >= 0, finite values with |v| <= 1e300, "
                              "%g <= critical <= n = %g, not-converged in [0, n])",
                              u->client, q, a, b, 2 * s->c.T_client, pc->data[q], n);
        }
        nc_sum += d[FK__SFL_PD_NC];
    }
    fk_err e2;
    if (scalar(u, "not_converged", 0, n * s->P, &nc, &e2) || nc != nc_sum)
        return fk_err_set(err, FK_EINVAL, "client %d: scalar 'not_converged' is not the sum "
                                          "%g of tensor 'pd''s not-converged counts",
                          u->client, nc_sum);
    return FK_OK;
}

/* Atoms a client with n rows solves over (fk__sfl_atoms): the grid of the job's box, or its
 * n rows as candidate centres; each times the Q widths. */
static double atom_count(const ssrv *s, double n)
{
    if (s->c.atoms == FK__SFL_AT_CAND)
        return (double)s->c.M * s->c.Q;
    if (!s->c.grid)
        return n * s->c.Q;
    double J = s->c.Q;
    for (int k = 0; k < s->p && k < FK_SFL_GRID_MAX_P; k++) {
        double lo = s->c.box_lo[s->c.box_p > 1 ? k : 0], hi = s->c.box_hi[s->c.box_p > 1 ? k : 0];
        J *= floor((hi - lo) / s->c.h + 1e-9) + 1;
    }
    return J;
}

/* Binary upload's solver diagnostics "diag" (FK__SFL_DG values, spec §6.4) of a client with n
 * rows uploading C: absent when n = 0 (nothing solved); else a status a solver gives, 1 to two
 * phases of T_client iterations, violation >= 0, finite dual and primal values, an integer
 * support within the client's atoms; with them the scalars 'not_converged' (rows with a large
 * dual off the margin, disjoint from the critical rows: C + it <= n) and 'capped' (0 or 1). */
FK_CHECKRETURN static int check_diag(const ssrv *s, const fk_update *u, double n, double C, fk_err *err)
{
    const fk_tensor *dg = fk_bundle_get(&u->msg, "diag");
    if (n == 0)
        return dg ? fk_err_set(err, FK_EINVAL, "client %d: tensor 'diag' (solver diagnostics) "
                                               "sent with no rows of the task (n = 0)",
                               u->client)
                  : FK_OK;
    if (!dg || dg->ndim != 1 || dg->shape[0] != FK__SFL_DG)
        return fk_err_set(err, FK_EINVAL, "client %d: tensor 'diag' (solver diagnostics) missing "
                                          "or not of shape %d",
                          u->client, FK__SFL_DG);
    const double *d = dg->data;
    double st = d[FK__SFL_DG_STATUS], it = d[FK__SFL_DG_ITERS], sup = d[FK__SFL_DG_SUPPORT],
           J = atom_count(s, n);
    int ok = st == FK_SFL_CONVERGED || st == FK_SFL_INFEASIBLE || st == FK_SFL_MAXITER;
    for (int k = 0; k < FK__SFL_DG; k++)
        ok &= isfinite(d[k]) && fabs(d[k]) <= 1e300;
    ok = ok && it >= 1 && it <= 2.0 * (double)s->c.T_client && it == floor(it) &&
         d[FK__SFL_DG_VIOL] >= 0 && sup >= 0 && sup <= J && sup == floor(sup);
    if (!ok)
        return fk_err_set(err, FK_EINVAL,
                          "client %d: tensor 'diag' is not allowed (status 0/1/2, 1 to 2 "
                          "T_client = %ld iterations, violation >= 0, finite values with |v| <= "
                          "1e300, support an integer in [0, %g atoms])",
                          u->client, 2 * s->c.T_client, J);
    fk_err e2;
    double nc = -1, cp = -1;
    if (scalar(u, "not_converged", 0, n - C, &nc, &e2) || nc != floor(nc))
        return fk_err_set(err, FK_EINVAL, "client %d: scalar 'not_converged' (with tensor 'diag') "
                                          "missing or not a row count in [0, n - rows = %g]",
                          u->client, n - C);
    if (scalar(u, "capped", 0, 1, &cp, &e2) || (cp != 0 && cp != 1))
        return fk_err_set(err, FK_EINVAL, "client %d: scalar 'capped' (with tensor 'diag') "
                                          "missing or not 0 or 1", u->client);
    return FK_OK;
}

FK_CHECKRETURN static int check_ovo(const ssrv *s, const fk_update *u, size_t D, double n, fk_err *err)
{
    const fk_tensor *pc = vec(u, "pc", (size_t)s->P, 0, 1e9, 1, 0, err);
    if (!pc)
        return FK_EINVAL;

    double S = 0;
    for (int q = 0; q < s->P; q++)
        S += pc->data[q];
    if (D == 0)
        return S == 0 ? check_pd(s, u, pc, n, err)
                      : fk_err_set(err, FK_EINVAL, "client %d: per-problem rows without "
                                                   "uploaded rows", u->client);
    const fk_tensor *x = fk_bundle_get(&u->msg, "x"), *cl, *ri, *rl;
    int rc;
    if (!x || x->ndim != 2 || x->shape[0] != D || x->shape[1] != (uint64_t)s->p)
        return fk_err_set(err, FK_EINVAL, "client %d: tensor 'x' missing or not of shape %zu x %d",
                          u->client, D, s->p);
    if (!vec(u, "x", D * (size_t)s->p, -FK__SFL_MAX_ABS, FK__SFL_MAX_ABS, 0, 0, err) ||
        !(cl = vec(u, "cls", D, 0, s->c.n_cls - 1, 1, 0, err)) ||
        !(ri = vec(u, "ri", (size_t)S, 0, (double)D - 1, 1, 0, err)) ||
        !(rl = vec(u, "rl", (size_t)S, 0, FK__SFL_MAX_ABS, 0, 1, err)))
        return FK_EINVAL;
    char *used = calloc(D, 1);
    if (!used)
        return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
    size_t at = 0;
    rc = FK_OK;
    for (int q = 0; !rc && q < s->P; q++) {
        int a, b;
        fk__sfl_ovo_pair(s->c.n_cls, q, &a, &b);
        for (size_t j = 0; !rc && j < (size_t)pc->data[q]; j++, at++) {
            size_t r = (size_t)ri->data[at];
            double k = cl->data[r];
            if ((k != a && k != b) || (j > 0 && !(ri->data[at] > ri->data[at - 1])))
                rc = fk_err_set(err, FK_EINVAL,
                                "client %d: problem %d (classes %d vs %d) lists row %zu of class "
                                "%g or out of ascending order",
                                u->client, q, a, b, r, k);
            used[r] = 1;
        }
    }
    for (size_t r = 0; !rc && r < D; r++)
        if (!used[r])
            rc = fk_err_set(err, FK_EINVAL, "client %d: uploaded row %zu is critical for no "
                                            "problem", u->client, r);
    free(used);
    return rc ? rc : check_pd(s, u, pc, n, err);
}

int fk__sfl_check_update(void *v, int round, int phase, const fk_update *u, fk_err *err)
{
    const ssrv *s = v;
    (void)round;
    (void)phase; /* the server's stage says which message is due */
    if (u->client < 0 || u->client >= s->K)
        return fk_err_set(err, FK_EINVAL, "update from unknown client %d (job has %d)", u->client,
                          s->K);
    /* every tensor a phase's upload may hold (binary and ovo): anything else is refused */
    static const char *const decl[] = {"n", "p", "np", "mu", "m2"};
    static const char *const ctrs[] = {"n", "m", "z", "zc"};
    static const char *const rows[] = {"n", "rows", "capped", "not_converged", "diag", "x", "y",
                                       "lambda", "cls", "ri", "rl", "pc", "pd"};
    int rc = s->stage == ST_COUNT     ? fk_update_check_names(&u->msg, decl, 5, u->client, err)
             : s->stage == ST_CENTRES ? fk_update_check_names(&u->msg, ctrs, 4, u->client, err)
                                      : fk_update_check_names(&u->msg, rows, 13, u->client, err);
    if (rc)
        return rc;
    double n = 0, p = 0, C = 0;
    rc = scalar(u, "n", 0, 1e9, &n, err);
    if (!rc && n != floor(n))
        rc = fk_err_set(err, FK_EINVAL, "client %d: 'n' is not a row count", u->client);
    if (!rc && s->stage == ST_COUNT && s->P) { /* ovo: rows per pair, each at most n */
        const fk_tensor *np = fk_bundle_get(&u->msg, "np");
        if (!np || np->len != (size_t)s->P)
            return fk_err_set(err, FK_EINVAL, "client %d: no 'np' (%d per-pair row counts)",
                              u->client, s->P);
        for (size_t q = 0; q < np->len; q++)
            if (!(np->data[q] >= 0 && np->data[q] <= n) || np->data[q] != floor(np->data[q]))
                return fk_err_set(err, FK_EINVAL, "client %d: 'np' value %zu = %g is not a row "
                                                  "count in [0, n]", u->client, q, np->data[q]);
    }
    if (!rc && s->stage == ST_COUNT) { /* p, and the per-feature mean and squared deviations */
        if ((rc = scalar(u, "p", 1, 1e6, &p, err)))
            return rc;
        if (!vec(u, "mu", (size_t)p, -FK_UPDATE_MAX_ABS, FK_UPDATE_MAX_ABS, 0, 0, err) ||
            !vec(u, "m2", (size_t)p, 0, FK_UPDATE_MAX_ABS, 0, 0, err))
            return FK_EINVAL;
        return FK_OK;
    }
    if (!rc && s->stage == ST_CENTRES) { /* m centres (M x p) with their groups */
        double m = 0;
        double G = s->c.ovo ? s->c.n_cls : s->c.mode == FK_SFL_CLASSIFY ? 2 : 1;
        if (n != s->n_decl[u->client] || s->n_decl[u->client] < 0)
            return fk_err_set(err, FK_EINVAL, "client %d: centres without its phase-0 row count",
                              u->client);
        if ((rc = scalar(u, "m", 0, fmin(n, G * (double)s->c.cpc), &m, err)) || m == 0)
            return rc;
        const fk_tensor *z = fk_bundle_get(&u->msg, "z");
        if (!z || z->ndim != 2 || z->shape[0] != (uint64_t)m || z->shape[1] != (uint64_t)s->p)
            return fk_err_set(err, FK_EINVAL, "client %d: tensor 'z' missing or not of shape "
                                              "%g x %d", u->client, m, s->p);
        if (!vec(u, "z", (size_t)m * (size_t)s->p, -FK__SFL_MAX_ABS, FK__SFL_MAX_ABS, 0, 0, err))
            return FK_EINVAL;
        const fk_tensor *zc = vec(u, "zc", (size_t)m, s->c.ovo ? 0 : -1, s->c.ovo ? G - 1 : 1,
                                  1, 0, err);
        if (!zc)
            return FK_EINVAL;
        for (size_t j = 0; j < zc->len; j++)
            if (!s->c.ovo && (s->c.mode == FK_SFL_CLASSIFY ? zc->data[j] == 0 : zc->data[j] != 0))
                return fk_err_set(err, FK_EINVAL, "client %d: tensor 'zc' entry %zu is not a "
                                                  "group of the task", u->client, j);
        return FK_OK;
    }
    if (rc)
        return rc;
    if (s->stage != ST_COLLECT || s->n_decl[u->client] < 0)
        return fk_err_set(err, FK_EINVAL,
                          "client %d: upload without a valid row count from phase 0 (or a "
                          "feature dimension other than the job's p = %d)",
                          u->client, s->p);
    if (n != s->n_decl[u->client])
        return fk_err_set(err, FK_EINVAL, "client %d: 'n' differs from the row count it "
                                          "declared in phase 0", u->client);
    if ((rc = scalar(u, "rows", 0, n, &C, err)))
        return rc;
    double cap = ceil(s->c.max_frac * n - 1e-9);
    if (C > cap)
        return fk_err_set(err, FK_EINVAL,
                          "client %d uploaded more of its rows than the job's "
                          "max_upload_fraction = %g allows",
                          u->client, s->c.max_frac);
    if (s->P)
        return check_ovo(s, u, (size_t)C, n, err);
    if ((rc = check_diag(s, u, n, C, err)) || C == 0)
        return rc;
    static const char *const names[3] = {"x", "y", "lambda"};
    for (int i = 0; i < 3; i++) {
        const fk_tensor *t = fk_bundle_get(&u->msg, names[i]);
        int want_nd = i == 0 ? 2 : 1;
        if (!t || t->ndim != want_nd || t->shape[0] != (uint64_t)C ||
            (i == 0 && t->shape[1] != (uint64_t)s->p))
            return fk_err_set(err, FK_EINVAL,
                              "client %d: tensor '%s' missing or not of shape rows%s (p = %d)",
                              u->client, names[i], i == 0 ? " x p" : "", s->p);
        for (size_t j = 0; j < t->len; j++) {
            double x = t->data[j];
            int bad = !isfinite(x) || fabs(x) > FK__SFL_MAX_ABS;
            if (i == 1 && s->c.mode == FK_SFL_CLASSIFY)
                bad |= x != 1.0 && x != -1.0;
            if (i == 2)
                bad |= s->c.mode == FK_SFL_CLASSIFY ? !(x > 0) : x == 0.0;
            /* the tensor, the position and the bound; never the value (x holds raw
             * features, y raw targets in regression) */
            if (bad)
                return fk_err_set(err, FK_EINVAL,
                                  "client %d: tensor '%s' entry %zu (row %zu, column %zu) is "
                                  "outside its bound (finite with |v| <= %g; labels +1/-1; duals "
                                  "> 0 (classify) or != 0 (regress))",
                                  u->client, names[i], j, i == 0 ? j / (size_t)s->p : j,
                                  i == 0 ? j % (size_t)s->p : 0, FK__SFL_MAX_ABS);
        }
    }
    return FK_OK;
}

/* Entries of the whole kernel matrix a gamma > 0 solve (FISTA) needs at most: fk_sfl_solve
 * refuses beyond it (common/models/sfl/sfl.c, the default row budget). */
#define FISTA_MAX_ENTRIES 4e9

/* A server problem with gamma > 0 (gamma_server or gamma_rel_server) solves by FISTA over its
 * whole N x J kernel matrix, refused beyond FISTA_MAX_ENTRIES entries. Check the bound as soon
 * as the server knows it, before any client uploads a raw row (issue 36): N <= the sum of the
 * clients' caps ceil(max_upload_fraction * N_i) over the phase-0 counts (ovo: also <= the
 * pair's rows); J = the grid's atoms, the candidates' (known after the centres phase) or, for
 * sample atoms, N x the widths. Variant A (regress) is not capped: its solver allocates the
 * whole matrix whatever gamma (fk_sfl_solve_a). Called at the end of phase 0 and of the
 * centres phase, before the stage moves on. */
FK_CHECKRETURN static int check_fista_size(const ssrv *s, fk_err *err)
{
    if (!(s->c.gamma_server > 0 || s->c.grel_server > 0) ||
        (s->c.mode == FK_SFL_REGRESS && s->c.solver == FK_SFL_SOLVER_VA) ||
        (s->c.atoms == FK__SFL_AT_CAND && s->c.M == 0)) /* candidates: after their phase */
        return FK_OK;
    double Nb = 0;
    for (int k = 0; k < s->K; k++)
        if (s->n_decl[k] > 0)
            Nb += ceil(s->c.max_frac * s->n_decl[k] - 1e-9);
    double worst = 0, wN = 0, wJ = 0;
    for (int q = s->P ? 0 : -1; q < (s->P ? s->P : 0); q++) {
        double N = q >= 0 ? fmin(Nb, s->nq_ref[q]) : Nb, J;
        if (s->c.atoms == FK__SFL_AT_CAND) {
            double m = 0;
            int a = 0, b = 0;
            if (q >= 0)
                fk__sfl_ovo_pair(s->c.n_cls, q, &a, &b);
            for (size_t j = 0; j < s->c.M; j++)
                m += q < 0 || s->c.cand_cls[j] == a || s->c.cand_cls[j] == b;
            J = m * s->c.Q;
        } else {
            J = atom_count(s, N);
        }
        if (N * J > worst) {
            worst = N * J;
            wN = N;
            wJ = J;
        }
    }
    if (worst <= FISTA_MAX_ENTRIES)
        return FK_OK;
    return fk_err_set(err, FK_ELIMIT,
                      "sfl: the server's gamma > 0 problem may need a %.0f x %.0f kernel matrix "
                      "(%.3g entries, %.0f MB; up to %.0f uploaded rows from the declared counts "
                      "and max_upload_fraction = %g, %s atoms), beyond the solver's %.0g entries; "
                      "refused before any row is uploaded: set gamma_server = 0 (and "
                      "gamma_rel_server = 0), a lower max_upload_fraction, or fewer atoms "
                      "(n_widths, candidates_per_class, grid_h)",
                      wN, wJ, worst, worst * 8.0 / 1048576.0, wN, s->c.max_frac,
                      s->c.atoms == FK__SFL_AT_GRID   ? "grid"
                      : s->c.atoms == FK__SFL_AT_CAND ? "candidate"
                                                      : "sample",
                      FISTA_MAX_ENTRIES);
}

/* Phase 0: the declared row counts fix p and n_ref = sum N_i (slack weight 1/n_ref); the
 * per-feature means and squared deviations, combined in client order (Chan's rule: stable,
 * and the same sum in the daemons and the simulation), give the data's scale, from which
 * fk__sfl_resolve sets the defaults or refuses the job before any row leaves a client. */
FK_CHECKRETURN static int aggregate_count(ssrv *s, const fk_update *ups, int n, fk_err *err)
{
    s->n_ref = 0;
    double *mean = NULL, *m2 = NULL, cnt = 0;
    for (int k = 0; k < s->K; k++) {
        const fk_update *u = NULL;
        for (int i = 0; i < n && !u; i++)
            u = ups[i].client == k ? &ups[i] : NULL;
        double rows = 0, p = 0;
        fk_err e2;
        if (!u || fk__sfl_check_update(s, 1, 0, u, &e2) || scalar(u, "p", 1, 1e6, &p, &e2))
            continue; /* absent, or a malformed count: a dropout */
        if (!s->p)
            s->p = (int)p;
        if ((int)p != s->p) {
            fk_log(FK_LOG_WARN, "sfl_client_excluded",
                   "client=%d p=%d job_p=%d msg=\"feature dimension differs; its upload will be "
                   "refused\"",
                   k, (int)p, s->p);
            continue;
        }
        if (scalar(u, "n", 0, 1e9, &rows, &e2))
            continue;
        if (!mean && (!(mean = calloc((size_t)s->p, sizeof *mean)) ||
                      !(m2 = calloc((size_t)s->p, sizeof *m2)))) {
            free(mean);
            return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
        }
        const double *mu = fk_bundle_get(&u->msg, "mu")->data,
                     *q2 = fk_bundle_get(&u->msg, "m2")->data;
        for (int j = 0; rows > 0 && j < s->p; j++) {
            double d = mu[j] - mean[j], t = cnt + rows;
            mean[j] += d * rows / t;
            m2[j] += q2[j] + d * d * cnt * rows / t;
        }
        cnt += rows;
        s->n_decl[k] = rows;
        s->n_ref += rows;
        const fk_tensor *np = s->P ? fk_bundle_get(&u->msg, "np") : NULL;
        for (int q = 0; np && q < s->P; q++)
            s->nq_ref[q] += np->data[q];
    }
    int rc = FK_OK;
    if (!(s->n_ref > 0))
        rc = fk_err_set(err, FK_ESTATE,
                        "sfl: no client declared any rows of the task (check pos_label / "
                        "neg_label / classes against the clients' labels)");
    for (int j = 0; !rc && j < s->p; j++)
        m2[j] /= s->n_ref; /* the variance */
    if (!rc)
        rc = fk__sfl_resolve(&s->c, s->p, s->n_ref, mean, m2, err);
    free(mean);
    free(m2);
    if (rc)
        return rc;
    fk_log(FK_LOG_INFO, "sfl_scale",
           "rows=%.0f p=%d atoms=%s width_min=%.4g width_max=%.4g grid_h=%.4g standardised=%d",
           s->n_ref, s->p,
           s->c.atoms == FK__SFL_AT_GRID   ? "grid"
           : s->c.atoms == FK__SFL_AT_CAND ? "candidates"
                                           : "samples",
           s->c.wmin, s->c.wmax, s->c.h, s->c.pre_auto);
    if ((rc = check_fista_size(s, err)))
        return rc;
    s->stage = s->c.atoms == FK__SFL_AT_CAND ? ST_CENTRES : ST_COLLECT;
    return FK_OK;
}

/* Phase 1 of candidate atoms: every client's k-means centres, in client order, are the
 * job's candidates (the same atom set for every party, so one client equals the
 * centralised fit and the server solves the centralised problem on the union). */
FK_CHECKRETURN static int aggregate_centres(ssrv *s, const fk_update *ups, int n, fk_err *err)
{
    size_t p = (size_t)s->p, M = 0;
    for (int k = 0; k < s->K; k++) {
        const fk_update *u = NULL;
        for (int i = 0; i < n && !u; i++)
            u = ups[i].client == k ? &ups[i] : NULL;
        fk_err e2;
        if (!u || fk__sfl_check_update(s, 1, 1, u, &e2))
            continue;
        const fk_tensor *z = fk_bundle_get(&u->msg, "z"), *zc = fk_bundle_get(&u->msg, "zc");
        if (!z)
            continue; /* no rows, no centres */
        double *nz = realloc(s->c.cand, (M + zc->len) * p * sizeof *nz);
        if (nz)
            s->c.cand = nz;
        double *nc = nz ? realloc(s->c.cand_cls, (M + zc->len) * sizeof *nc) : NULL;
        if (nc)
            s->c.cand_cls = nc;
        if (!nz || !nc)
            return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
        memcpy(s->c.cand + M * p, z->data, z->len * sizeof *nz);
        memcpy(s->c.cand_cls + M, zc->data, zc->len * sizeof *nc);
        M += zc->len;
    }
    s->c.M = M;
    s->c.cand_mass = M ? s->n_ref / (double)M : 1;
    if (!M)
        return fk_err_set(err, FK_ESTATE, "sfl: no client sent candidate centres; the job has no "
                                          "atoms");
    fk_log(FK_LOG_INFO, "sfl_candidates", "centres=%zu", M);
    int rc = check_fista_size(s, err);
    if (!rc)
        s->stage = ST_COLLECT;
    return rc;
}

/* *a grown to n doubles: kept on success, as it was on failure. Callers grow every array
 * (bitwise &, no short cut) and fail once, so each array stays owned by s either way. */
static int grow(double **a, size_t n)
{
    double *t = realloc(*a, n * sizeof *t);
    if (t)
        *a = t;
    return t != NULL;
}

/* ovo: the rows join the union with their class ids, the lists with union row indices. */
FK_CHECKRETURN static int append_ovo(ssrv *s, const fk_update *u, size_t D, fk_err *err)
{
    const fk_tensor *ri = fk_bundle_get(&u->msg, "ri"), *rl = fk_bundle_get(&u->msg, "rl"),
                    *pc = fk_bundle_get(&u->msg, "pc"), *cl = fk_bundle_get(&u->msg, "cls");
    size_t U = s->U + D, S = s->S + ri->len, p = (size_t)s->p;
    if (!(grow(&s->ucls, U) & grow(&s->pq, S) & grow(&s->pi, S) & grow(&s->pl, S)))
        return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory for %zu rows", U);
    memcpy(s->X + s->U * p, fk_bundle_get(&u->msg, "x")->data, D * p * sizeof *s->X);
    for (size_t j = 0; j < D; j++) {
        s->ucls[s->U + j] = cl->data[j];
        s->y[s->U + j] = 0; /* set per problem */
        s->lam[s->U + j] = 0;
        s->owner[s->U + j] = u->client;
    }
    size_t at = 0;
    for (int q = 0; q < s->P; q++)
        for (size_t j = 0; j < (size_t)pc->data[q]; j++, at++) {
            s->pq[s->S + at] = q;
            s->pi[s->S + at] = (double)s->U + ri->data[at];
            s->pl[s->S + at] = rl->data[at];
        }
    s->U = U;
    s->S = S;
    /* the client's per-problem diagnostics (checked) into the per-problem summary */
    const fk_tensor *pd = fk_bundle_get(&u->msg, "pd");
    int solved = 0, conv = 0;
    double nc = 0;
    for (int q = 0; q < s->P; q++) {
        const double *d = pd->data + (size_t)q * FK__SFL_PD;
        double *g = s->pdiag + (size_t)q * PS_N;
        if (d[FK__SFL_PD_STATUS] < 0)
            continue;
        solved++;
        conv += d[FK__SFL_PD_STATUS] == FK_SFL_CONVERGED;
        nc += d[FK__SFL_PD_NC];
        g[PS_CLIENTS] += 1;
        g[PS_STATUS] = fmax(g[PS_STATUS], d[FK__SFL_PD_STATUS]);
        g[PS_ITERS] = fmax(g[PS_ITERS], d[FK__SFL_PD_ITERS]);
        g[PS_VIOL] = fmax(g[PS_VIOL], d[FK__SFL_PD_VIOL]);
        g[PS_CRIT] += d[FK__SFL_PD_CRIT];
        g[PS_NC] += d[FK__SFL_PD_NC];
        if (d[FK__SFL_PD_STATUS] != FK_SFL_CONVERGED) {
            int a, b;
            fk__sfl_ovo_pair(s->c.n_cls, q, &a, &b);
            fk_log(FK_LOG_WARN, "sfl_client_pair_unconverged",
                   "client=%d pair=%d,%d status=%s iterations=%g violation=%.3g not_converged=%g",
                   u->client, a, b, fk_sfl_status_name((int)d[FK__SFL_PD_STATUS]),
                   d[FK__SFL_PD_ITERS], d[FK__SFL_PD_VIOL], d[FK__SFL_PD_NC]);
        }
    }
    fk_log(FK_LOG_INFO, "sfl_upload_received",
           "client=%d rows=%zu problems=%d entries=%zu solved=%d converged=%d not_converged=%g",
           u->client, D, s->P, ri->len, solved, conv, nc);
    return FK_OK;
}

FK_CHECKRETURN static int append_rows(ssrv *s, const fk_update *u, fk_err *err)
{
    double C = 0, n = 0, cap = 0;
    /* checked by check_update already; a failure here means the caller skipped it */
    int rc = scalar(u, "rows", 0, 1e9, &C, err);
    if (rc || (rc = scalar(u, "n", 0, 1e9, &n, err)))
        return rc;
    const fk_tensor *cp = fk_bundle_get(&u->msg, "capped");
    cap = cp && cp->len == 1 && cp->data[0] == 1.0;
    int k = u->client;
    s->n_up[k] = C;
    s->capped[k] = cap;
    if (C == 0)
        return FK_OK;
    size_t U = s->U + (size_t)C, p = (size_t)s->p;
    if (!(grow(&s->X, U * p) & grow(&s->y, U) & grow(&s->lam, U) & grow(&s->owner, U)))
        return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory for %zu rows", U);
    if (s->P)
        return append_ovo(s, u, (size_t)C, err);
    memcpy(s->X + s->U * p, fk_bundle_get(&u->msg, "x")->data, (size_t)C * p * sizeof *s->X);
    memcpy(s->y + s->U, fk_bundle_get(&u->msg, "y")->data, (size_t)C * sizeof *s->y);
    const double *lu = fk_bundle_get(&u->msg, "lambda")->data;
    for (size_t j = 0; j < (size_t)C; j++) { /* Alg. 4 start: concat, rescaled or zero */
        s->lam[s->U + j] = lu[j];
        s->owner[s->U + j] = k;
    }
    s->U = U;
    /* the accepted upload's size; its declared row count stays in the client's own log */
    fk_log(FK_LOG_INFO, "sfl_upload_received", "client=%d rows=%g capped=%d", k, C, (int)cap);
    return FK_OK;
}

/* ovo: solve each pair problem on the critical rows uploaded for it (warm start from their
 * duals, rescaled by the pair's union over the client's pair rows), concatenate the models. */
FK_CHECKRETURN static int solve_ovo(ssrv *s, fk_err *err)
{
    if (s->U == 0)
        return fk_err_set(err, FK_ESTATE, "sfl: no client uploaded any critical rows; the job "
                                          "has no data to solve on");
    size_t p = (size_t)s->p;
    double *Xq = malloc(s->U * p * sizeof *Xq), *yq = malloc(s->U * sizeof *yq),
           *l0 = malloc(s->U * sizeof *l0);
    fk_sfl_model all = {0, s->p, NULL, NULL, NULL};
    int rc = !Xq || !yq || !l0 ? fk_err_set(err, FK_ENOMEM, "sfl server: out of memory") : FK_OK;
    s->status = FK_SFL_CONVERGED;
    s->iters = s->support = s->viol = s->primal = 0;
    for (int q = 0; !rc && q < s->P; q++) {
        int a, b;
        fk__sfl_ovo_pair(s->c.n_cls, q, &a, &b);
        size_t m = 0;
        for (size_t j = 0; j < s->S; j++)
            if (s->pq[j] == q) {
                size_t r = (size_t)s->pi[j];
                memcpy(Xq + m * p, s->X + r * p, p * sizeof *Xq);
                yq[m] = s->ucls[r] == a ? 1.0 : -1.0;
                l0[m++] = s->pl[j];
            }
        s->mK[q] = 0;
        if (!m) {
            fk_log(FK_LOG_WARN, "sfl_pair_empty", "classes=%d,%d msg=\"no critical rows of this "
                                                  "pair; its classifier is empty (votes %d)\"",
                   a, b, a);
            continue;
        }
        if (s->c.server_init == FK__SFL_INIT_RESCALED && s->nq_ref[q] > 0)
            for (size_t j = 0; j < m; j++) /* Lemma 3's N_F / N_i, N_i ~ n_ref / clients */
                l0[j] *= (double)m * s->K / s->nq_ref[q];
        fk_sfl_atoms at = {0};
        if ((rc = fk__sfl_atoms_q(&s->c, Xq, m, s->p, q, &at, err)))
            break;
        fk_sfl_opts o;
        fk__sfl_opts(&s->c, 1, s->nq_ref[q] >= (double)m ? s->nq_ref[q] : (double)m,
                     s->seed + 0xbf58476d1ce4e5b9ULL * (uint64_t)q, &o);
        fk_sfl_fit f = {0};
        rc = fk__sfl_solve(Xq, yq, m, s->p, &at, &o,
                           s->c.server_init == FK__SFL_INIT_ZERO ? NULL : l0, &f, err);
        fk_sfl_model mq = {0};
        if (!rc)
            rc = s->c.peaks ? fk_sfl_model_peaks(&at, f.alpha, Xq, yq, m, 1, 0, 0, &mq, err)
                            : fk_sfl_model_support(&at, f.alpha, &mq, err);
        fk_sfl_atoms_close(&at);
        if (rc) /* the fit's arrays when the model could not be had (zeroed when the solve failed) */
            fk_sfl_fit_close(&f);
        if (!rc) {
            if (f.status > s->status)
                s->status = f.status;
            s->iters += (double)f.iters;
            s->support += (double)f.support;
            s->viol = fmax(s->viol, f.viol);
            s->primal += f.primal;
            fk_sfl_fit_close(&f);
            size_t K2 = all.K + mq.K;
            double *ns = realloc(all.s, (K2 ? K2 : 1) * p * sizeof *ns);
            if (ns)
                all.s = ns;
            double *nw = realloc(all.w, (K2 ? K2 : 1) * sizeof *nw);
            if (nw)
                all.w = nw;
            double *nc = realloc(all.c, (K2 ? K2 : 1) * sizeof *nc);
            if (nc)
                all.c = nc;
            if (!ns || !nw || !nc)
                rc = fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
            else if (mq.K) {
                memcpy(all.s + all.K * p, mq.s, mq.K * p * sizeof *ns);
                memcpy(all.w + all.K, mq.w, mq.K * sizeof *nw);
                memcpy(all.c + all.K, mq.c, mq.K * sizeof *nc);
            }
            if (!rc) {
                all.K = K2;
                s->mK[q] = (double)mq.K;
            }
            const double *g = s->pdiag + (size_t)q * PS_N;
            fk_log(FK_LOG_INFO, "sfl_server_solved",
                   "pair=%d,%d rows=%zu status=%s iterations=%ld kernels=%zu clients=%g "
                   "client_status=%s client_violation=%.3g client_critical=%g "
                   "client_not_converged=%g",
                   a, b, m, fk_sfl_status_name(f.status), f.iters, mq.K, g[PS_CLIENTS],
                   g[PS_STATUS] < 0 ? "none" : fk_sfl_status_name((int)g[PS_STATUS]), g[PS_VIOL],
                   g[PS_CRIT], g[PS_NC]);
        }
        fk_sfl_model_close(&mq);
    }
    free(Xq);
    free(yq);
    free(l0);
    if (!rc && !all.s) { /* every pair empty: an allocated empty model */
        all.s = malloc(p * sizeof *all.s);
        all.w = malloc(sizeof *all.w);
        all.c = malloc(sizeof *all.c);
        if (!all.s || !all.w || !all.c)
            rc = fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
    }
    if (rc) {
        fk_sfl_model_close(&all);
        return rc;
    }
    fk_sfl_model_close(&s->m);
    s->m = all;
    s->stage = ST_DONE;
    return FK_OK;
}

/* Solve (PF) on the union and build the model (Alg. 4 steps 4-8). */
FK_CHECKRETURN static int solve_union(ssrv *s, fk_err *err)
{
    if (s->U == 0)
        return fk_err_set(err, FK_ESTATE,
                          "sfl: no client uploaded any critical rows (all dropped out or hold no "
                          "rows of the task); the job has no data to solve on");
    size_t U = s->U;
    double *lam0 = NULL;
    if (s->c.server_init != FK__SFL_INIT_ZERO) {
        if (!(lam0 = malloc(U * sizeof *lam0)))
            return fk_err_set(err, FK_ENOMEM, "sfl server: out of memory");
        for (size_t j = 0; j < U; j++) { /* rescaled: Lemma 3's N_F / N_i */
            double ni = s->n_decl[(int)s->owner[j]];
            lam0[j] = s->lam[j] * (s->c.server_init == FK__SFL_INIT_RESCALED && ni > 0
                                       ? (double)U / ni
                                       : 1.0);
        }
    }
    fk_sfl_atoms a = {0};
    int rc = fk__sfl_atoms(&s->c, s->X, U, s->p, &a, err);
    fk_sfl_opts o;
    fk__sfl_opts(&s->c, 1, s->n_ref, s->seed, &o);
    fk_sfl_fit f;
    if (!rc)
        rc = fk__sfl_solve(s->X, s->y, U, s->p, &a, &o, lam0, &f, err);
    free(lam0);
    if (rc) {
        fk_sfl_atoms_close(&a);
        return rc;
    }
    fk_sfl_model_close(&s->m);
    rc = s->c.peaks ? fk_sfl_model_peaks(&a, f.alpha, s->X, s->y, U, 1, 0, 0, &s->m, err)
                    : fk_sfl_model_support(&a, f.alpha, &s->m, err);
    s->status = f.status;
    s->iters = (double)f.iters;
    s->viol = f.viol;
    s->support = (double)f.support;
    s->primal = f.primal;
    if (f.status == FK_SFL_INFEASIBLE)
        fk_log(FK_LOG_WARN, "sfl_infeasible",
               "rows=%zu msg=\"the union's hard margins cannot be met; use resilient = "
               "quadratic\"",
               U);
    fk_log(FK_LOG_INFO, "sfl_server_solved", "rows=%zu status=%s iterations=%ld support=%zu "
                                             "kernels=%zu",
           U, fk_sfl_status_name(f.status), f.iters, f.support, s->m.K);
    fk_sfl_fit_close(&f);
    fk_sfl_atoms_close(&a);
    if (!rc)
        s->stage = ST_DONE;
    return rc;
}

int fk__sfl_srv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                         int *round_done, fk_err *err)
{
    ssrv *s = v;
    (void)round;
    *round_done = 0;
    if (s->stage == ST_DONE) { /* one shot: a repeated round changes nothing */
        *round_done = 1;
        return FK_OK;
    }
    (void)phase;
    if (s->stage == ST_COUNT)
        return aggregate_count(s, ups, n, err);
    if (s->stage == ST_CENTRES)
        return aggregate_centres(s, ups, n, err);
    for (int i = 0; i < n; i++) {
        if (s->n_up[ups[i].client] >= 0)
            continue; /* a second upload of one client */
        fk_err e2 = {0};
        int rc = fk__sfl_check_update(s, round, phase, &ups[i], &e2);
        if (rc == FK_ENOMEM) { /* the check could not run: not the client's fault */
            *err = e2;
            return rc;
        }
        if (rc)
            continue; /* an unchecked bad one */
        rc = append_rows(s, &ups[i], err);
        if (rc)
            return rc;
    }
    *round_done = 1;
    return s->P ? solve_ovo(s, err) : solve_union(s, err);
}

static int put_model(const fk_sfl_model *m, int p, fk_bundle *out)
{
    uint64_t sh[2] = {(uint64_t)m->K, (uint64_t)p};
    int rc = fk_bundle_put_scalar(out, "K", (double)m->K);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "p", p);
    if (!rc && m->K) {
        rc = fk_bundle_put(out, "s", 2, sh, m->s);
        if (!rc)
            rc = fk_bundle_put_vec(out, "w", m->K, m->w);
        if (!rc)
            rc = fk_bundle_put_vec(out, "c", m->K, m->c);
    }
    return rc;
}

int fk__sfl_srv_model(void *v, fk_bundle *out, fk_err *err)
{
    ssrv *s = v;
    if (s->stage != ST_DONE)
        return fk_err_set(err, FK_ESTATE, "sfl: no model yet (the server has not solved)");
    double capped = 0;
    for (int k = 0; k < s->K; k++)
        capped += s->capped[k];
    int rc = put_model(&s->m, s->p, out);
    if (!rc) { /* the model's centres are in these units: prediction needs the map */
        fk_bundle tmp;
        fk_bundle_init(&tmp);
        rc = put_cfg(s, 0, &tmp);
        for (size_t i = 0; !rc && i < tmp.count; i++)
            if (!strcmp(tmp.items[i].name, "x_shift") || !strcmp(tmp.items[i].name, "x_scale"))
                rc = fk_bundle_put(out, tmp.items[i].name, 1, tmp.items[i].shape,
                                   tmp.items[i].data);
        fk_bundle_close(&tmp);
    }
    if (!rc && s->P) {
        rc = fk_bundle_put_vec(out, "mK", (size_t)s->P, s->mK);
        if (!rc)
            rc = fk_bundle_put_vec(out, "classes", (size_t)s->c.n_cls, s->c.cls);
        /* the clients' per-problem diagnostics (spec §6.4), one value per pair each */
        static const char *const pdn[PS_N] = {"pair_clients",        "pair_client_status",
                                              "pair_client_iters",   "pair_client_viol",
                                              "pair_critical",       "pair_not_converged"};
        double *v = rc ? NULL : malloc((size_t)s->P * sizeof *v);
        rc = rc || !v;
        for (int k = 0; !rc && k < PS_N; k++) {
            for (int q = 0; q < s->P; q++)
                v[q] = s->pdiag[(size_t)q * PS_N + (size_t)k];
            rc = fk_bundle_put_vec(out, pdn[k], (size_t)s->P, v);
        }
        free(v);
    }
    if (!rc)
        rc = fk_bundle_put_scalar(out, "mode", s->c.mode);
    /* what prediction needs besides the kernels and the map (x_shift, x_scale: above): for a
     * binary job the raw labels of the two sides */
    if (!rc && !s->P && s->c.mode == FK_SFL_CLASSIFY) {
        rc = fk_bundle_put_scalar(out, "pos_label", s->c.pos_label);
        if (!rc)
            rc = s->c.neg_rest ? fk_bundle_put_scalar(out, "neg_rest", 1)
                               : fk_bundle_put_scalar(out, "neg_label", s->c.neg_label);
    }
    if (!rc)
        rc = fk_bundle_put_scalar(out, "rows_union", (double)s->U);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "n_ref", s->n_ref);
    if (!rc) /* > 0: "capped - not the method's solution" (spec §6.8) */
        rc = fk_bundle_put_scalar(out, "capped_clients", capped);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "status", s->status);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "iterations", s->iters);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "support", s->support);
    return rc ? fk_err_set(err, FK_ENOMEM, "sfl model: out of memory") : FK_OK;
}

int fk__sfl_srv_save(void *v, fk_bundle *out, fk_err *err)
{
    ssrv *s = v;
    uint64_t sh[2] = {(uint64_t)s->U, (uint64_t)(s->p ? s->p : 1)};
    int rc = fk_bundle_put_scalar(out, "stage", s->stage);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "p", s->p);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "n_ref", s->n_ref);
    if (!rc)
        rc = fk_bundle_put_vec(out, "n_decl", (size_t)s->K, s->n_decl);
    if (!rc)
        rc = fk_bundle_put_vec(out, "n_up", (size_t)s->K, s->n_up);
    if (!rc)
        rc = fk_bundle_put_vec(out, "capped", (size_t)s->K, s->capped);
    if (!rc && s->U) {
        rc = fk_bundle_put(out, "ux", 2, sh, s->X);
        if (!rc)
            rc = fk_bundle_put_vec(out, "uy", s->U, s->y);
        if (!rc)
            rc = fk_bundle_put_vec(out, "ulam", s->U, s->lam);
        if (!rc)
            rc = fk_bundle_put_vec(out, "uowner", s->U, s->owner);
    }
    double diag[5] = {s->status, s->iters, s->viol, s->support, s->primal};
    if (!rc)
        rc = fk_bundle_put_vec(out, "diag", 5, diag);
    if (!rc && s->stage != ST_COUNT) /* the settings resolved after phase 0 */
        rc = put_cfg(s, 1, out);
    if (!rc && s->P) { /* ovo: the pairs' row totals, class ids, lists and kernel counts */
        rc = fk_bundle_put_vec(out, "nq_ref", (size_t)s->P, s->nq_ref);
        if (!rc)
            rc = fk_bundle_put_vec(out, "mK", (size_t)s->P, s->mK);
        if (!rc)
            rc = fk_bundle_put_vec(out, "pdiag", (size_t)s->P * PS_N, s->pdiag);
        if (!rc)
            rc = fk_bundle_put_scalar(out, "S", (double)s->S);
        if (!rc && s->U)
            rc = fk_bundle_put_vec(out, "ucls", s->U, s->ucls);
        if (!rc && s->S)
            rc = fk_bundle_put_vec(out, "pq", s->S, s->pq);
        if (!rc && s->S)
            rc = fk_bundle_put_vec(out, "pi", s->S, s->pi);
        if (!rc && s->S)
            rc = fk_bundle_put_vec(out, "pl", s->S, s->pl);
    }
    if (!rc && s->stage == ST_DONE) {
        fk_bundle m;
        fk_bundle_init(&m);
        rc = put_model(&s->m, s->p, &m);
        for (size_t i = 0; !rc && i < m.count; i++) {
            char name[FK_TENSOR_NAME_MAX + 8];
            snprintf(name, sizeof name, "model_%.8s", m.items[i].name);
            rc = fk_bundle_put(out, name, m.items[i].ndim, m.items[i].shape, m.items[i].data);
        }
        fk_bundle_close(&m);
    }
    return rc ? fk_err_set(err, FK_ENOMEM, "sfl save: out of memory") : FK_OK;
}

/* A checkpoint tensor of exactly len finite values. */
static const double *ck(const fk_bundle *in, const char *name, size_t len, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(in, name);
    if (!t || t->len != len) {
        fk_err_set(err, FK_EFORMAT, "sfl checkpoint: '%s' missing or not %zu values", name, len);
        return NULL;
    }
    for (size_t i = 0; i < len; i++)
        if (!isfinite(t->data[i]) || fabs(t->data[i]) > 1e15) {
            fk_err_set(err, FK_EFORMAT, "sfl checkpoint: '%s' value %zu is not finite", name, i);
            return NULL;
        }
    return t->data;
}

/* The resolved settings of a checkpoint (put_cfg) into the arrays of *g (owned by the caller,
 * fk__sfl_cfg_close), checked like a task. */
FK_CHECKRETURN static int load_cfg(const ssrv *s, const fk_bundle *in, size_t p, fk__sfl_cfg *g, fk_err *err)
{
    const double *sh = ck(in, "x_shift", p, err), *sc = sh ? ck(in, "x_scale", p, err) : NULL,
                 *wr = sc ? ck(in, "wr", 3, err) : NULL, *ak = wr ? ck(in, "akind", 1, err) : NULL;
    if (!ak)
        return FK_EFORMAT;
    int ok = wr[0] > 0 && wr[1] >= wr[0] && wr[2] > 0 &&
             (ak[0] == FK__SFL_AT_SAMPLES || ak[0] == FK__SFL_AT_GRID || ak[0] == FK__SFL_AT_CAND);
    for (size_t k = 0; ok && k < p; k++)
        ok = sc[k] > 0;
    if (!ok)
        return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad resolved settings");
    g->atoms = (int)ak[0];
    g->grid = g->atoms == FK__SFL_AT_GRID;
    g->wmin = wr[0];
    g->wmax = wr[1];
    g->h = wr[2];
    g->n_pre = (int)p;
    g->shift = malloc(p * sizeof *g->shift);
    g->scale = malloc(p * sizeof *g->scale);
    if (!g->shift || !g->scale) {
        fk__sfl_cfg_close(g);
        return fk_err_set(err, FK_ENOMEM, "sfl load: out of memory");
    }
    memcpy(g->shift, sh, p * sizeof *sh);
    memcpy(g->scale, sc, p * sizeof *sc);
    if (g->grid) {
        const double *lo = ck(in, "box_lo", p, err), *hi = lo ? ck(in, "box_hi", p, err) : NULL;
        if (!hi || p > FK_SFL_GRID_MAX_P || !(g->box_lo = malloc(p * sizeof *lo)) ||
            !(g->box_hi = malloc(p * sizeof *hi))) {
            fk__sfl_cfg_close(g);
            return hi ? fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad grid box") : FK_EFORMAT;
        }
        memcpy(g->box_lo, lo, p * sizeof *lo);
        memcpy(g->box_hi, hi, p * sizeof *hi);
        g->box_p = (int)p;
    }
    const fk_tensor *zc = fk_bundle_get(in, "zc");
    if (g->atoms == FK__SFL_AT_CAND && zc) {
        size_t M = zc->len;
        const double *z = ck(in, "z", M * p, err), *c = z ? ck(in, "zc", M, err) : NULL;
        if (!c || !(g->cand = malloc((M ? M : 1) * p * sizeof *z)) ||
            !(g->cand_cls = malloc((M ? M : 1) * sizeof *c))) {
            fk__sfl_cfg_close(g);
            return c ? fk_err_set(err, FK_ENOMEM, "sfl load: out of memory") : FK_EFORMAT;
        }
        for (size_t j = 0; j < M; j++)
            if (s->c.ovo ? !(c[j] >= 0 && c[j] < s->c.n_cls) : fabs(c[j]) > 1) {
                fk__sfl_cfg_close(g);
                return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: candidate %zu has a bad group",
                                  j);
            }
        const double *zm = ck(in, "zm", 1, err);
        if (!zm || !(zm[0] > 0 && zm[0] <= 1e12)) {
            fk__sfl_cfg_close(g);
            return zm ? fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad candidate mass")
                      : FK_EFORMAT;
        }
        memcpy(g->cand, z, M * p * sizeof *z);
        memcpy(g->cand_cls, c, M * sizeof *c);
        g->M = M;
        g->cand_mass = zm[0];
    } else if (g->atoms == FK__SFL_AT_CAND && ck(in, "stage", 1, err)[0] != ST_CENTRES) {
        fk__sfl_cfg_close(g);
        return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: candidate atoms without 'z' / 'zc'");
    }
    return FK_OK;
}

/* A checkpoint's state beyond the settings, read and checked into fresh storage before the
 * server's state changes (a load is all or nothing). The const arrays are the input bundle's. */
typedef struct loaded {
    const double *st, *nr, *nd, *nu, *cp, *dg; /* stage, n_ref, n_decl, n_up, capped, diag */
    size_t U, P;                               /* rows uploaded, their width */
    const double *ux, *uy, *ul, *uo;
    /* ovo: the per-problem state */
    double *o_nq, *o_mK, *o_cls, *o_pq, *o_pi, *o_pl;
    const double *pdiag_in;
    size_t S;
    fk_sfl_model m; /* the model of a finished job */
    double *X, *y, *l, *o;
    fk__sfl_cfg cfg; /* the resolved settings (after phase 0) */
} loaded;

static void loaded_free(loaded *L)
{
    free(L->X);
    free(L->y);
    free(L->l);
    free(L->o);
    free(L->o_nq);
    free(L->o_mK);
    free(L->o_cls);
    free(L->o_pq);
    free(L->o_pi);
    free(L->o_pl);
    fk_sfl_model_close(&L->m);
}

/* The stage, the row counts per client, the diagnostics and the uploaded rows' owners. */
FK_CHECKRETURN static int load_counts(const ssrv *s, const fk_bundle *in, loaded *L, fk_err *err)
{
    size_t K = (size_t)s->K;
    const double *st = ck(in, "stage", 1, err), *p = st ? ck(in, "p", 1, err) : NULL,
                 *nr = p ? ck(in, "n_ref", 1, err) : NULL,
                 *nd = nr ? ck(in, "n_decl", K, err) : NULL,
                 *nu = nd ? ck(in, "n_up", K, err) : NULL,
                 *cp = nu ? ck(in, "capped", K, err) : NULL,
                 *dg = cp ? ck(in, "diag", 5, err) : NULL;
    if (!dg)
        return FK_EFORMAT;
    if (!(st[0] == ST_COUNT || st[0] == ST_COLLECT || st[0] == ST_DONE || st[0] == ST_CENTRES) ||
        !(p[0] >= 0) ||
        p[0] > 1e6 || p[0] != floor(p[0]))
        return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad stage %g or p %g", st[0], p[0]);
    size_t U = 0, P = (size_t)p[0];
    for (size_t k = 0; k < K; k++) {
        if (nu[k] > 1e9 || nd[k] > 1e9 || nu[k] != floor(nu[k]))
            return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad row counts of client %zu", k);
        U += nu[k] > 0 ? (size_t)nu[k] : 0;
    }
    const double *ux = NULL, *uy = NULL, *ul = NULL, *uo = NULL;
    if (U && (!(ux = ck(in, "ux", U * P, err)) || !(uy = ck(in, "uy", U, err)) ||
              !(ul = ck(in, "ulam", U, err)) || !(uo = ck(in, "uowner", U, err))))
        return FK_EFORMAT;
    for (size_t j = 0; j < U; j++)
        if (!(uo[j] >= 0 && uo[j] < (double)K))
            return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: row %zu has owner %g", j, uo[j]);
    *L = (loaded){.st = st,
                  .nr = nr,
                  .nd = nd,
                  .nu = nu,
                  .cp = cp,
                  .dg = dg,
                  .U = U,
                  .P = P,
                  .ux = ux,
                  .uy = uy,
                  .ul = ul,
                  .uo = uo};
    return FK_OK;
}

/* ovo: the per-problem state (pair counts, diagnostics, the rows' classes and the pair lists),
 * checked and copied. */
FK_CHECKRETURN static int load_ovo(const ssrv *s, const fk_bundle *in, loaded *L, fk_err *err)
{
    size_t K = (size_t)s->K, U = L->U;
    const double *st = L->st;
    size_t P = (size_t)s->P;
    const double *nq = ck(in, "nq_ref", P, err), *mk = nq ? ck(in, "mK", P, err) : NULL,
                 *pg = mk ? ck(in, "pdiag", P * PS_N, err) : NULL,
                 *sc = pg ? ck(in, "S", 1, err) : NULL;
    if (!sc)
        return FK_EFORMAT;
    if (!(sc[0] >= 0 && sc[0] <= 1e12) || sc[0] != floor(sc[0]))
        return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad list size %g", sc[0]);
    size_t S = (size_t)sc[0];
    const double *uc = NULL, *pq = NULL, *pi = NULL, *pl = NULL;
    if ((U && !(uc = ck(in, "ucls", U, err))) ||
        (S && (!(pq = ck(in, "pq", S, err)) || !(pi = ck(in, "pi", S, err)) ||
               !(pl = ck(in, "pl", S, err)))))
        return FK_EFORMAT;
    for (size_t q = 0; q < P; q++) {
        const double *g = pg + q * PS_N;
        if (!(g[PS_CLIENTS] >= 0 && g[PS_CLIENTS] <= K) || g[PS_STATUS] < -1 ||
            g[PS_STATUS] > FK_SFL_MAXITER || g[PS_VIOL] < 0 || g[PS_CRIT] < 0 || g[PS_NC] < 0)
            return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad diagnostics of problem %zu", q);
    }
    for (size_t j = 0; j < U; j++)
        if (!(uc[j] >= 0 && uc[j] < s->c.n_cls) || uc[j] != floor(uc[j]))
            return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: row %zu has class %g", j, uc[j]);
    for (size_t j = 0; j < S; j++)
        if (!(pq[j] >= 0 && pq[j] < (double)P) || !(pi[j] >= 0 && pi[j] < (double)U) ||
            pq[j] != floor(pq[j]) || pi[j] != floor(pi[j]))
            return fk_err_set(err, FK_EFORMAT, "sfl checkpoint: list entry %zu is bad", j);
    double tot = 0;
    for (size_t q = 0; q < P; q++)
        tot += mk[q] >= 0 && mk[q] == floor(mk[q]) ? mk[q] : NAN;
    const double *kk = st[0] == ST_DONE ? ck(in, "model_K", 1, err) : NULL;
    if (st[0] == ST_DONE && (!kk || tot != kk[0]))
        return kk ? fk_err_set(err, FK_EFORMAT,
                               "sfl checkpoint: pair kernel counts do not sum to the model's")
                  : FK_EFORMAT;
    L->o_nq = malloc(P * sizeof *L->o_nq);
    L->o_mK = malloc(P * sizeof *L->o_mK);
    L->o_cls = malloc((U ? U : 1) * sizeof *L->o_cls);
    L->o_pq = malloc((S ? S : 1) * sizeof *L->o_pq);
    L->o_pi = malloc((S ? S : 1) * sizeof *L->o_pi);
    L->o_pl = malloc((S ? S : 1) * sizeof *L->o_pl);
    if (!L->o_nq || !L->o_mK || !L->o_cls || !L->o_pq || !L->o_pi || !L->o_pl)
        return fk_err_set(err, FK_ENOMEM, "sfl load: out of memory");
    memcpy(L->o_nq, nq, P * sizeof *L->o_nq);
    memcpy(L->o_mK, mk, P * sizeof *L->o_mK);
    L->pdiag_in = pg;
    if (U)
        memcpy(L->o_cls, uc, U * sizeof *L->o_cls);
    if (S) {
        memcpy(L->o_pq, pq, S * sizeof *L->o_pq);
        memcpy(L->o_pi, pi, S * sizeof *L->o_pi);
        memcpy(L->o_pl, pl, S * sizeof *L->o_pl);
    }
    L->S = S;
    return FK_OK;
}

/* The model of a finished job (stage done). */
FK_CHECKRETURN static int load_model(const fk_bundle *in, loaded *L, fk_err *err)
{
    size_t P = L->P;
    fk_sfl_model *m = &L->m;
    const double *kk = ck(in, "model_K", 1, err);
    if (!kk || !(kk[0] >= 0 && kk[0] <= 1e8) || kk[0] != floor(kk[0]))
        return kk ? fk_err_set(err, FK_EFORMAT, "sfl checkpoint: bad model size") : FK_EFORMAT;
    size_t Km = (size_t)kk[0];
    const double *ms = NULL, *mw = NULL, *mc = NULL;
    if (Km && (!(ms = ck(in, "model_s", Km * P, err)) || !(mw = ck(in, "model_w", Km, err)) ||
               !(mc = ck(in, "model_c", Km, err))))
        return FK_EFORMAT;
    m->K = Km;
    m->p = (int)P;
    m->s = malloc((Km ? Km : 1) * (P ? P : 1) * sizeof(double));
    m->w = malloc((Km ? Km : 1) * sizeof(double));
    m->c = malloc((Km ? Km : 1) * sizeof(double));
    if (!m->s || !m->w || !m->c)
        return fk_err_set(err, FK_ENOMEM, "sfl load: out of memory");
    if (Km) {
        memcpy(m->s, ms, Km * P * sizeof(double));
        memcpy(m->w, mw, Km * sizeof(double));
        memcpy(m->c, mc, Km * sizeof(double));
    }
    return FK_OK;
}

/* The uploaded rows (copies), then the resolved settings after phase 0. */
FK_CHECKRETURN static int load_rows(const ssrv *s, const fk_bundle *in, loaded *L, fk_err *err)
{
    size_t U = L->U, P = L->P;
    L->X = malloc((U ? U : 1) * (P ? P : 1) * sizeof *L->X);
    L->y = malloc((U ? U : 1) * sizeof *L->y);
    L->l = malloc((U ? U : 1) * sizeof *L->l);
    L->o = malloc((U ? U : 1) * sizeof *L->o);
    if (!L->X || !L->y || !L->l || !L->o)
        return fk_err_set(err, FK_ENOMEM, "sfl load: out of memory");
    if (L->st[0] != ST_COUNT && load_cfg(s, in, P, &L->cfg, err))
        return FK_EFORMAT;
    if (U) {
        memcpy(L->X, L->ux, U * P * sizeof *L->X);
        memcpy(L->y, L->uy, U * sizeof *L->y);
        memcpy(L->l, L->ul, U * sizeof *L->l);
        memcpy(L->o, L->uo, U * sizeof *L->o);
    }
    return FK_OK;
}

/* Everything checked: the loaded state replaces the server's (takes L's storage). */
static void load_commit(ssrv *s, loaded *L)
{
    size_t K = (size_t)s->K;
    if (L->st[0] != ST_COUNT) {
        fk__sfl_cfg *g = &s->c;
        free(g->shift);
        free(g->scale);
        free(g->box_lo);
        free(g->box_hi);
        free(g->cand);
        free(g->cand_cls);
        g->shift = L->cfg.shift;
        g->scale = L->cfg.scale;
        g->n_pre = L->cfg.n_pre;
        g->box_lo = L->cfg.box_lo;
        g->box_hi = L->cfg.box_hi;
        g->box_p = L->cfg.box_p;
        g->cand = L->cfg.cand;
        g->cand_cls = L->cfg.cand_cls;
        g->M = L->cfg.M;
        g->cand_mass = L->cfg.cand_mass;
        g->wmin = L->cfg.wmin;
        g->wmax = L->cfg.wmax;
        g->h = L->cfg.h;
        g->atoms = L->cfg.atoms;
        g->grid = L->cfg.grid;
    }
    free(s->X);
    free(s->y);
    free(s->lam);
    free(s->owner);
    fk_sfl_model_close(&s->m);
    s->X = L->X;
    s->y = L->y;
    s->lam = L->l;
    s->owner = L->o;
    s->U = L->U;
    s->m = L->m;
    s->stage = (int)L->st[0];
    s->p = (int)L->P;
    s->n_ref = L->nr[0];
    memcpy(s->n_decl, L->nd, K * sizeof(double));
    memcpy(s->n_up, L->nu, K * sizeof(double));
    memcpy(s->capped, L->cp, K * sizeof(double));
    if (s->P) {
        free(s->nq_ref);
        free(s->mK);
        free(s->ucls);
        free(s->pq);
        free(s->pi);
        free(s->pl);
        s->nq_ref = L->o_nq;
        s->mK = L->o_mK;
        s->ucls = L->o_cls;
        s->pq = L->o_pq;
        s->pi = L->o_pi;
        s->pl = L->o_pl;
        s->S = L->S;
        memcpy(s->pdiag, L->pdiag_in, (size_t)s->P * PS_N * sizeof *s->pdiag);
    }
    s->status = L->dg[0];
    s->iters = L->dg[1];
    s->viol = L->dg[2];
    s->support = L->dg[3];
    s->primal = L->dg[4];
}

/* A checkpoint (fk__sfl_srv_save) back into the server: read and check every part into fresh
 * storage, then replace the state at once, so a bad checkpoint leaves the server as it was. */
int fk__sfl_srv_load(void *v, const fk_bundle *in, fk_err *err)
{
    ssrv *s = v;
    loaded L = {0};
    int rc = load_counts(s, in, &L, err);
    if (!rc && s->P)
        rc = load_ovo(s, in, &L, err);
    if (!rc && L.st[0] == ST_DONE)
        rc = load_model(in, &L, err);
    if (!rc)
        rc = load_rows(s, in, &L, err);
    if (rc) {
        loaded_free(&L);
        return rc;
    }
    load_commit(s, &L);
    return FK_OK;
}

int fk__sfl_srv_finished(void *v)
{
    return ((ssrv *)v)->stage == ST_DONE;
}

int fk__sfl_srv_max_rounds(const fk_params *p)
{
    (void)p;
    return 1;
}

