/* Client side of the sfl job (spec §6.3, Alg. 3): declare the task's row count, solve the
 * local problem (Pi), upload the critical rows with their duals once, score the model.
 *
 * Raw rows leave this machine, so the client refuses the job unless BOTH the job says
 * raw_sample_upload = acknowledged AND this client's own configuration says
 * local.allow_raw_upload = true; local.max_upload_fraction caps what it sends. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/log.h"
#include "common/methods/sfl/sfl_int.h"
#include "common/methods/update_check.h"

typedef struct scli {
    fk__sfl_cfg c;
    int k, K, p;
    uint64_t seed;
    double *X, *y; /* the task's rows, with the job's explicit preprocessing */
    double *Xp;    /* the rows the solver sees: X, or X standardised by the federated map */
    size_t n;
    double frac;   /* effective upload cap: min(job, local) */
    int uploaded;
} scli;

void fk__sfl_cli_close(void *v)
{
    scli *c = v;
    if (!c)
        return;
    fk__sfl_cfg_close(&c->c);
    free(c->X);
    free(c->Xp);
    free(c->y);
    free(c);
}

int fk__sfl_cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                     int n_clients, uint64_t seed, fk_err *err)
{
    int allow = 0;
    double local_frac = 1;
    int rc = fk_params_bool(p, "local.allow_raw_upload", 0, &allow, err);
    if (!rc)
        rc = fk_params_double(p, "local.max_upload_fraction", 1, 1e-12, 1, &local_frac, err);
    if (rc)
        return rc;
    scli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    fk_params_str(p, "sim_n", NULL);
    if ((rc = fk__sfl_cfg_parse(&c->c, p, err))) {
        free(c);
        return rc;
    }
    if (!allow) {
        fk__sfl_cli_close(c);
        return fk_err_set(err, FK_EINVAL,
                          "client %d refuses the sfl job: it would upload raw training rows (its "
                          "critical samples) to the server, and this client's own configuration "
                          "does not allow that; set 'allow_raw_upload = true' in the [local] "
                          "section of the client config to consent",
                          client);
    }
    c->k = client;
    c->K = n_clients;
    c->seed = seed;
    c->p = (int)data->X.cols;
    c->frac = fmin(local_frac, c->c.max_frac);
    if ((rc = fk__sfl_task_rows(&c->c, data, &c->X, &c->y, &c->n, err))) {
        fk__sfl_cli_close(c);
        return rc;
    }
    *out = c;
    return FK_OK;
}

typedef struct ranked {
    double lam;
    int row;
} ranked;

static int by_lam_desc(const void *a, const void *b)
{
    const ranked *u = a, *v = b;
    return u->lam < v->lam ? 1 : u->lam > v->lam ? -1 : (u->row > v->row) - (u->row < v->row);
}

static int by_row(const void *a, const void *b)
{
    const ranked *u = a, *v = b;
    return (u->row > v->row) - (u->row < v->row);
}

/* Solve (Pi) on the local rows and put the critical rows (capped) into the upload. */
FK_CHECKRETURN static int upload(scli *c, double n_ref, fk_bundle *up, fk_report *rep, fk_err *err)
{
    size_t n = c->n, P = (size_t)c->p;
    int rc = fk_bundle_put_scalar(up, "n", (double)n);
    if (rc)
        return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    rep->n_samples = (double)n;
    if (n == 0) { /* no rows of the task: an empty upload */
        fk_log(FK_LOG_INFO, "sfl_upload", "client=%d rows=0 of=0 bytes=0 capped=0", c->k);
        return fk_bundle_put_scalar(up, "rows", 0) ? fk_err_set(err, FK_ENOMEM, "no memory")
                                                   : FK_OK;
    }
    fk_sfl_atoms a = {0};
    if ((rc = fk__sfl_atoms(&c->c, c->Xp, n, c->p, &a, err)))
        return rc;
    fk_sfl_opts o;
    fk__sfl_opts(&c->c, 0, n_ref, c->seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(c->k + 1), &o);
    fk_sfl_fit f;
    rc = fk_sfl_solve(c->Xp, c->y, n, c->p, &a, &o, NULL, &f, err);
    fk_sfl_atoms_close(&a);
    if (rc)
        return rc;
    int *idx = malloc(n * sizeof *idx);
    ranked *rk = malloc(n * sizeof *rk);
    size_t C = 0, not_conv = 0;
    if (!idx || !rk) {
        free(idx);
        free(rk);
        fk_sfl_fit_close(&f);
        return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    }
    fk_sfl_critical(&f, c->y, &o, idx, &C, &not_conv);
    for (size_t i = 0; i < C; i++)
        rk[i] = (ranked){fabs(f.lambda[idx[i]]), idx[i]};
    /* the client's cap binds: keep the rows with the largest duals, mark the upload capped */
    size_t cap = (size_t)ceil(c->frac * (double)n - 1e-9), capped = C > cap;
    if (capped) {
        qsort(rk, C, sizeof *rk, by_lam_desc);
        C = cap;
        qsort(rk, C, sizeof *rk, by_row);
    }
    uint64_t sh[2] = {(uint64_t)C, P};
    double *x = C ? fk_bundle_add(up, "x", 2, sh) : NULL;
    double *yy = C ? fk_bundle_add(up, "y", 1, sh) : NULL;
    double *ll = C ? fk_bundle_add(up, "lambda", 1, sh) : NULL;
    rc = C && (!x || !yy || !ll);
    for (size_t i = 0; !rc && i < C; i++) {
        memcpy(x + i * P, c->Xp + (size_t)rk[i].row * P, P * sizeof *x);
        yy[i] = c->y[rk[i].row];
        ll[i] = f.lambda[rk[i].row];
    }
    if (!rc)
        rc = fk_bundle_put_scalar(up, "rows", (double)C);
    if (!rc)
        rc = fk_bundle_put_scalar(up, "capped", (double)capped);
    double diag[FK__SFL_DG] = {f.status, (double)f.iters, f.viol, f.dual, f.primal,
                               (double)f.support};
    if (!rc)
        rc = fk_bundle_put_vec(up, "diag", FK__SFL_DG, diag);
    if (!rc)
        rc = fk_bundle_put_scalar(up, "not_converged", (double)not_conv);
    /* the round's metric, of the local model on the local rows: accuracy and its error rate
     * (classify) or the RMSE (regress), so every round line carries what users judge by */
    size_t right = 0;
    double se = 0.0; /* the local fit's squared error at its own rows (regression) */
    for (size_t i = 0; i < n; i++) {
        right += c->c.mode == FK_SFL_CLASSIFY ? (f.f[i] >= 0 ? 1.0 : -1.0) == c->y[i] : 0;
        se += c->c.mode == FK_SFL_CLASSIFY ? 0.0 : (f.f[i] - c->y[i]) * (f.f[i] - c->y[i]);
    }
    rep->loss = f.primal;
    if (c->c.mode == FK_SFL_CLASSIFY) {
        rep->accuracy = (double)right / (double)n;
        rep->error = 1 - rep->accuracy;
    } else if (n > 0) {
        rep->rmse = sqrt(se / (double)n);
        rep->error = rep->rmse;
    }
    /* what leaves the machine, in the client's own log (counts only, never values) */
    fk_log(FK_LOG_INFO, "sfl_upload",
           "client=%d rows=%zu of=%zu bytes=%zu capped=%d status=%s msg=\"raw feature rows, "
           "labels and dual values of the critical samples are sent to the server\"",
           c->k, C, n, C * (P + 2) * sizeof(double), (int)capped, fk_sfl_status_name(f.status));
    if (f.status == FK_SFL_INFEASIBLE)
        fk_log(FK_LOG_WARN, "sfl_infeasible",
               "client=%d msg=\"hard margins cannot be met on the local rows; use resilient = "
               "quadratic\"",
               c->k);
    free(idx);
    free(rk);
    fk_sfl_fit_close(&f);
    c->uploaded = 1;
    return rc ? fk_err_set(err, FK_ENOMEM, "sfl client: out of memory") : FK_OK;
}

/* One-vs-one (spec A14): solve every pair problem on this client's rows of the pair, upload
 * the distinct critical rows once (x, class id) with per-problem lists of (row, dual). The
 * cap counts distinct rows; when it binds, the rows with the largest dual (over the problems)
 * are kept. Round metric: the pairwise accuracy (rows right over all local pair problems). */
FK_CHECKRETURN static int upload_ovo(scli *c, const double *nref, fk_bundle *up, fk_report *rep, fk_err *err)
{
    int Kc = c->c.n_cls, P = fk__sfl_ovo_pairs(Kc);
    size_t n = c->n, p = (size_t)c->p, S = 0, D = 0, right = 0, tot = 0, not_conv = 0;
    double *score = calloc(n ? n : 1, sizeof *score), *pc = calloc((size_t)P, sizeof *pc);
    double *Xq = malloc((n ? n : 1) * p * sizeof *Xq), *yq = malloc((n ? n : 1) * sizeof *yq);
    int *sub = malloc((n ? n : 1) * sizeof *sub), *idx = malloc((n ? n : 1) * sizeof *idx);
    size_t cap_l = (n ? n : 1) * (size_t)P;
    int *lr = malloc(cap_l * sizeof *lr); /* per-problem lists: row, dual */
    double *ll = malloc(cap_l * sizeof *ll);
    ranked *rk = malloc((n ? n : 1) * sizeof *rk);
    /* per-problem diagnostics (spec §6.4), FK__SFL_PD values a problem; skipped: status -1 */
    double *pd = calloc((size_t)P * FK__SFL_PD, sizeof *pd);
    int rc = !score || !pc || !Xq || !yq || !sub || !idx || !lr || !ll || !rk || !pd
                 ? fk_err_set(err, FK_ENOMEM, "sfl client: out of memory")
                 : FK_OK;
    double worst = FK_SFL_CONVERGED, primal = 0;
    for (int q = 0; !rc && q < P; q++)
        pd[(size_t)q * FK__SFL_PD + FK__SFL_PD_STATUS] = -1;
    for (int q = 0; !rc && q < P; q++) {
        int a, b;
        fk__sfl_ovo_pair(Kc, q, &a, &b);
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (c->y[i] == a || c->y[i] == b) {
                memcpy(Xq + m * p, c->Xp + i * p, p * sizeof *Xq);
                yq[m] = c->y[i] == a ? 1.0 : -1.0;
                sub[m++] = (int)i;
            }
        if (!m)
            continue; /* this client holds neither class of the pair */
        fk_sfl_atoms at = {0};
        if ((rc = fk__sfl_atoms_q(&c->c, Xq, m, c->p, q, &at, err)))
            break;
        fk_sfl_opts o;
        fk__sfl_opts(&c->c, 0, nref[q] >= (double)m ? nref[q] : (double)m,
                     c->seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(c->k + 1) +
                         0xbf58476d1ce4e5b9ULL * (uint64_t)q,
                     &o);
        fk_sfl_fit f;
        rc = fk_sfl_solve(Xq, yq, m, c->p, &at, &o, NULL, &f, err);
        fk_sfl_atoms_close(&at);
        if (rc)
            break;
        size_t C = 0, nc = 0;
        fk_sfl_critical(&f, yq, &o, idx, &C, &nc);
        not_conv += nc;
        if (f.status > worst)
            worst = f.status;
        primal += f.primal;
        double *d = pd + (size_t)q * FK__SFL_PD;
        d[FK__SFL_PD_STATUS] = f.status;
        d[FK__SFL_PD_ITERS] = (double)f.iters;
        d[FK__SFL_PD_VIOL] = f.viol;
        d[FK__SFL_PD_DUAL] = f.dual;
        d[FK__SFL_PD_PRIMAL] = f.primal;
        d[FK__SFL_PD_CRIT] = (double)C;
        d[FK__SFL_PD_NC] = (double)nc;
        fk_log(f.status == FK_SFL_CONVERGED ? FK_LOG_DEBUG : FK_LOG_WARN, "sfl_pair_solved",
               "client=%d pair=%d,%d rows=%zu status=%s iterations=%ld violation=%.3g "
               "critical=%zu not_converged=%zu",
               c->k, a, b, m, fk_sfl_status_name(f.status), f.iters, f.viol, C, nc);
        for (size_t i = 0; i < m; i++)
            right += (f.f[i] >= 0 ? 1.0 : -1.0) == yq[i];
        tot += m;
        for (size_t j = 0; j < C; j++) { /* idx is ascending: the lists come sorted by row */
            int r = sub[idx[j]];
            lr[S] = r;
            ll[S++] = f.lambda[idx[j]];
            score[r] = fmax(score[r], fabs(f.lambda[idx[j]]));
        }
        pc[q] = (double)C;
        fk_sfl_fit_close(&f);
    }
    /* distinct rows; the cap keeps those with the largest dual */
    for (size_t i = 0; !rc && i < n; i++)
        if (score[i] > 0)
            rk[D++] = (ranked){score[i], (int)i};
    size_t cap = (size_t)ceil(c->frac * (double)n - 1e-9), capped = D > cap;
    if (!rc && capped) {
        qsort(rk, D, sizeof *rk, by_lam_desc);
        for (size_t j = cap; j < D; j++)
            score[rk[j].row] = 0; /* dropped */
        D = cap;
        qsort(rk, D, sizeof *rk, by_row);
    }
    int *pos = sub; /* row -> position among the uploaded rows */
    for (size_t j = 0; !rc && j < D; j++)
        pos[rk[j].row] = (int)j;
    uint64_t sh[2] = {(uint64_t)D, p};
    double *x = !rc && D ? fk_bundle_add(up, "x", 2, sh) : NULL;
    double *cl = !rc && D ? fk_bundle_add(up, "cls", 1, sh) : NULL;
    if (!rc && D && (!x || !cl))
        rc = fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    for (size_t j = 0; !rc && j < D; j++) {
        memcpy(x + j * p, c->Xp + (size_t)rk[j].row * p, p * sizeof *x);
        cl[j] = c->y[rk[j].row];
    }
    size_t S2 = 0, at = 0; /* drop the capped rows from the problems' lists */
    for (int q = 0; !rc && q < P; q++) {
        size_t keep = 0;
        for (size_t j = 0; j < (size_t)pc[q]; j++, at++)
            if (score[lr[at]] > 0) {
                lr[S2] = pos[lr[at]];
                ll[S2++] = ll[at];
                keep++;
            }
        pc[q] = (double)keep;
    }
    uint64_t ss = S2;
    double *ri = !rc && S2 ? fk_bundle_add(up, "ri", 1, &ss) : NULL;
    double *rl = !rc && S2 ? fk_bundle_add(up, "rl", 1, &ss) : NULL;
    if (!rc && S2 && (!ri || !rl))
        rc = fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    for (size_t j = 0; !rc && j < S2; j++) {
        ri[j] = lr[j];
        rl[j] = ll[j];
    }
    uint64_t psh[2] = {(uint64_t)P, FK__SFL_PD};
    if (!rc && (fk_bundle_put_vec(up, "pc", (size_t)P, pc) ||
                fk_bundle_put(up, "pd", 2, psh, pd) ||
                fk_bundle_put_scalar(up, "rows", (double)D) ||
                fk_bundle_put_scalar(up, "capped", (double)capped) ||
                fk_bundle_put_scalar(up, "not_converged", (double)not_conv)))
        rc = fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    if (!rc && tot) {
        rep->accuracy = (double)right / (double)tot;
        rep->error = 1 - rep->accuracy;
        rep->loss = primal; /* the local objective: the pair problems' primal values, summed */
    }
    if (!rc)
        fk_log(FK_LOG_INFO, "sfl_upload",
               "client=%d rows=%zu of=%zu problems=%d bytes=%zu capped=%d status=%s "
               "msg=\"raw feature rows, class ids and per-problem dual values of the critical "
               "samples are sent to the server\"",
               c->k, D, n, P, D * (p + 1) * sizeof(double) + S2 * 2 * sizeof(double),
               (int)capped, fk_sfl_status_name((int)worst));
    free(score);
    free(pc);
    free(Xq);
    free(yq);
    free(sub);
    free(idx);
    free(lr);
    free(ll);
    free(rk);
    free(pd);
    if (!rc)
        c->uploaded = 1;
    return rc;
}

/* The server's resolution of the data-dependent settings (fk__sfl_resolve on the federated
 * statistics), carried by the CENTRES and UPLOAD tasks: the preprocessing map, the widths,
 * the atom kind with its box or candidates. Checked, copied into the client's configuration,
 * and the solver's rows Xp built; a mapped value beyond FK__SFL_MAX_ABS is refused here,
 * naming row, column and the key to set, before anything is sent. */
FK_CHECKRETURN static int take_cfg(scli *c, const fk_bundle *task, int need_atoms, fk_err *err)
{
    size_t p = (size_t)c->p;
    const fk_tensor *sh = fk_bundle_get(task, "x_shift"), *sc = fk_bundle_get(task, "x_scale"),
                    *wr = fk_bundle_get(task, "wr"), *ak = fk_bundle_get(task, "akind");
    int ok = sh && sc && sh->len == p && sc->len == p && wr && wr->len == 3 && ak &&
             ak->len == 1;
    for (size_t k = 0; ok && k < p; k++)
        ok = isfinite(sh->data[k]) && sc->data[k] > 0 && isfinite(sc->data[k]);
    ok = ok && wr->data[0] > 0 && wr->data[1] >= wr->data[0] && wr->data[2] > 0 &&
         isfinite(wr->data[1]) && isfinite(wr->data[2]);
    ok = ok && (ak->data[0] == FK__SFL_AT_SAMPLES || ak->data[0] == FK__SFL_AT_GRID ||
                ak->data[0] == FK__SFL_AT_CAND);
    fk__sfl_cfg *g = &c->c;
    /* a job that sets every data-dependent key needs nothing from the server */
    int fixed = !g->pre_auto && !g->w_auto &&
                (g->atoms == FK__SFL_AT_SAMPLES ||
                 (g->atoms == FK__SFL_AT_GRID && !g->box_auto && !g->h_auto));
    if (!wr && !ak && !sh && !sc && fixed)
        ok = 1;
    else if (!ok)
        return fk_err_set(err, FK_EFORMAT, "sfl task: no valid 'x_shift', 'x_scale' (%zu values), "
                                           "'wr' (width_min, width_max, grid_h) or 'akind'", p);
    if (fixed && !wr)
        goto rows;
    if (g->pre_auto) {
        free(g->shift);
        free(g->scale);
        g->shift = malloc(p * sizeof *g->shift);
        g->scale = malloc(p * sizeof *g->scale);
        if (!g->shift || !g->scale)
            return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
        memcpy(g->shift, sh->data, p * sizeof *g->shift);
        memcpy(g->scale, sc->data, p * sizeof *g->scale);
        g->n_pre = (int)p;
    }
    g->wmin = wr->data[0];
    g->wmax = wr->data[1];
    g->h = wr->data[2];
    g->atoms = (int)ak->data[0];
    g->grid = g->atoms == FK__SFL_AT_GRID;
    if (need_atoms && g->grid) {
        const fk_tensor *lo = fk_bundle_get(task, "box_lo"), *hi = fk_bundle_get(task, "box_hi");
        if (!lo || !hi || lo->len != p || hi->len != p || p > FK_SFL_GRID_MAX_P)
            return fk_err_set(err, FK_EFORMAT, "sfl task: grid atoms without 'box_lo'/'box_hi' "
                                               "of %zu values", p);
        for (size_t k = 0; k < p; k++)
            if (!isfinite(lo->data[k]) || !(hi->data[k] >= lo->data[k]) ||
                !isfinite(hi->data[k]))
                return fk_err_set(err, FK_EFORMAT, "sfl task: grid box side %zu is not finite "
                                                   "and ordered", k);
        free(g->box_lo);
        free(g->box_hi);
        g->box_lo = malloc(p * sizeof *g->box_lo);
        g->box_hi = malloc(p * sizeof *g->box_hi);
        if (!g->box_lo || !g->box_hi)
            return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
        memcpy(g->box_lo, lo->data, p * sizeof *g->box_lo);
        memcpy(g->box_hi, hi->data, p * sizeof *g->box_hi);
        g->box_p = (int)p;
    }
    if (need_atoms && g->atoms == FK__SFL_AT_CAND) {
        const fk_tensor *z = fk_bundle_get(task, "z"), *zc = fk_bundle_get(task, "zc"),
                        *zm = fk_bundle_get(task, "zm");
        if (!z || !zc || z->ndim != 2 || z->shape[1] != p || zc->len != z->shape[0] ||
            !zc->len || !zm || zm->len != 1 || !(zm->data[0] > 0 && zm->data[0] <= 1e12))
            return fk_err_set(err, FK_EFORMAT, "sfl task: candidate atoms without 'z' (M x %zu), "
                                               "'zc' (M) and 'zm' (their mass)", p);
        g->cand_mass = zm->data[0];
        for (size_t j = 0; j < z->len; j++)
            if (!isfinite(z->data[j]))
                return fk_err_set(err, FK_EFORMAT, "sfl task: candidate entry %zu not finite", j);
        free(g->cand);
        free(g->cand_cls);
        g->M = zc->len;
        g->cand = malloc(z->len * sizeof *g->cand);
        g->cand_cls = malloc(g->M * sizeof *g->cand_cls);
        if (!g->cand || !g->cand_cls)
            return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
        memcpy(g->cand, z->data, z->len * sizeof *g->cand);
        memcpy(g->cand_cls, zc->data, g->M * sizeof *g->cand_cls);
    }
rows:
    free(c->Xp);
    if (!(c->Xp = malloc((c->n ? c->n : 1) * p * sizeof *c->Xp)))
        return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    for (size_t i = 0; i < c->n; i++)
        for (size_t k = 0; k < p; k++) {
            double x = c->X[i * p + k];
            if (g->pre_auto)
                x = (x - g->shift[k]) / g->scale[k];
            /* row and column, never the value: it is a raw feature */
            if (!(fabs(x) <= FK__SFL_MAX_ABS))
                return fk_err_set(err, FK_EINVAL,
                                  "sfl: row %zu column %zu of the task's rows is beyond |x| <= "
                                  "%g after the job's preprocessing; set x_scale (or x_shift) "
                                  "so the features fit, or fix the row",
                                  i, k, FK__SFL_MAX_ABS);
            c->Xp[i * p + k] = x;
        }
    return FK_OK;
}

/* Phase 1 of candidate atoms: k-means centres (spec §3.7) of this client's rows per class
 * group (binary: +1 / -1; ovo: class id; regress: one group), min(candidates_per_class, rows
 * of the group) each, seeded per client and group; 'z' (M x p) and their groups 'zc'. */
FK_CHECKRETURN static int centres(scli *c, fk_bundle *up, fk_err *err)
{
    size_t n = c->n, p = (size_t)c->p;
    int G = c->c.ovo ? c->c.n_cls : c->c.mode == FK_SFL_CLASSIFY ? 2 : 1;
    double *Xg = malloc((n ? n : 1) * p * sizeof *Xg);
    double *Z = malloc(((n ? n : 1) * p) * sizeof *Z), *zc = malloc((n ? n : 1) * sizeof *zc);
    size_t M = 0;
    int rc = !Xg || !Z || !zc ? fk_err_set(err, FK_ENOMEM, "sfl client: out of memory") : FK_OK;
    for (int g = 0; !rc && g < G; g++) {
        double lab = c->c.ovo ? g : c->c.mode == FK_SFL_CLASSIFY ? (g ? -1.0 : 1.0) : 0;
        size_t m = 0;
        for (size_t i = 0; i < n; i++)
            if (G == 1 || c->y[i] == lab)
                memcpy(Xg + m++ * p, c->Xp + i * p, p * sizeof *Xg);
        if (!m)
            continue; /* this client lacks the class */
        size_t k = m < (size_t)c->c.cpc ? m : (size_t)c->c.cpc;
        rc = fk_sfl_kmeans(Xg, m, c->p, k,
                           c->seed + 0x9e3779b97f4a7c15ULL * (uint64_t)(c->k + 1) +
                               0xbf58476d1ce4e5b9ULL * (uint64_t)(g + 1),
                           Z + M * p, NULL, err);
        for (size_t j = 0; !rc && j < k; j++)
            zc[M + j] = lab;
        M += k;
    }
    uint64_t sh[2] = {(uint64_t)M, p};
    if (!rc && M && (fk_bundle_put(up, "z", 2, sh, Z) || fk_bundle_put_vec(up, "zc", M, zc)))
        rc = fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    if (!rc && fk_bundle_put_scalar(up, "m", (double)M))
        rc = fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
    if (!rc)
        fk_log(FK_LOG_INFO, "sfl_centres", "client=%d centres=%zu of=%zu msg=\"k-means centres "
                                           "of the rows (candidate kernel centres) are sent to "
                                           "the server\"", c->k, M, n);
    free(Xg);
    free(Z);
    free(zc);
    return rc;
}

int fk__sfl_cli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    scli *c = v;
    const fk_tensor *op = fk_bundle_get(task, "op");
    if (!op || op->len != 1)
        return fk_err_set(err, FK_EFORMAT, "sfl task lacks 'op'");
    if (op->data[0] == FK__SFL_OP_COUNT) {
        rep->n_samples = (double)c->n;
        int rc = fk_bundle_put_scalar(up, "n", (double)c->n);
        if (!rc)
            rc = fk_bundle_put_scalar(up, "p", c->p);
        /* the federated statistics (per-feature mean and sum of squared deviations about it,
         * combined on the server by Chan's rule): the data's scale for the defaults */
        double *mu = rc ? NULL : fk_bundle_add(up, "mu", 1, (uint64_t[1]){(uint64_t)c->p});
        double *m2 = mu ? fk_bundle_add(up, "m2", 1, (uint64_t[1]){(uint64_t)c->p}) : NULL;
        rc = rc || !mu || !m2;
        for (int k = 0; !rc && k < c->p; k++) {
            double s1 = 0, s2 = 0;
            for (size_t i = 0; i < c->n; i++)
                s1 += c->X[i * (size_t)c->p + (size_t)k];
            mu[k] = c->n ? s1 / (double)c->n : 0;
            for (size_t i = 0; i < c->n; i++) {
                double d = c->X[i * (size_t)c->p + (size_t)k] - mu[k];
                s2 += d * d;
            }
            m2[k] = s2;
            if (!(fabs(mu[k]) <= FK_UPDATE_MAX_ABS && m2[k] <= FK_UPDATE_MAX_ABS))
                return fk_err_set(err, FK_EINVAL,
                                  "sfl: feature %d of the task's rows overflows float64 in its "
                                  "mean or spread; set x_scale so the features fit",
                                  k);
        }
        if (!rc && c->c.ovo) { /* rows per pair problem: the server's n_ref of each */
            int P = fk__sfl_ovo_pairs(c->c.n_cls);
            double *np = fk_bundle_add(up, "np", 1, (uint64_t[1]){(uint64_t)P});
            rc = !np;
            for (int q = 0; !rc && q < P; q++) {
                int a, b;
                fk__sfl_ovo_pair(c->c.n_cls, q, &a, &b);
                np[q] = 0;
                for (size_t i = 0; i < c->n; i++)
                    np[q] += c->y[i] == a || c->y[i] == b;
            }
        }
        return rc ? fk_err_set(err, FK_ENOMEM, "sfl client: out of memory") : FK_OK;
    }
    if (op->data[0] == FK__SFL_OP_CENTRES) {
        rep->n_samples = (double)c->n;
        int rc = take_cfg(c, task, 0, err);
        if (!rc && fk_bundle_put_scalar(up, "n", (double)c->n))
            rc = fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
        return rc ? rc : centres(c, up, err);
    }
    const fk_tensor *nr = fk_bundle_get(task, "n_ref");
    int trc = op->data[0] == FK__SFL_OP_UPLOAD ? take_cfg(c, task, 1, err) : FK_OK;
    if (trc)
        return trc;
    if (op->data[0] != FK__SFL_OP_UPLOAD || !nr || nr->len != 1 ||
        !(nr->data[0] >= (double)c->n && nr->data[0] <= 1e12))
        return fk_err_set(err, FK_EFORMAT,
                          "sfl task: unknown op or no 'n_ref' >= this client's %zu rows", c->n);
    if (c->c.ovo) {
        const fk_tensor *nq = fk_bundle_get(task, "n_ref_q");
        if (!nq || nq->len != (size_t)fk__sfl_ovo_pairs(c->c.n_cls))
            return fk_err_set(err, FK_EFORMAT, "sfl task: no 'n_ref_q' (one per class pair)");
        for (size_t q = 0; q < nq->len; q++)
            if (!(nq->data[q] >= 0 && nq->data[q] <= 1e12))
                return fk_err_set(err, FK_EFORMAT, "sfl task: 'n_ref_q' value %zu is %g", q,
                                  nq->data[q]);
        rep->n_samples = (double)c->n;
        if (fk_bundle_put_scalar(up, "n", (double)c->n))
            return fk_err_set(err, FK_ENOMEM, "sfl client: out of memory");
        return upload_ovo(c, nq->data, up, rep, err);
    }
    return upload(c, nr->data[0], up, rep, err);
}

int fk__sfl_model_read(const fk_bundle *b, int p, fk_sfl_model *m, fk_err *err)
{
    memset(m, 0, sizeof *m);
    const fk_tensor *K = fk_bundle_get(b, "K"), *pp = fk_bundle_get(b, "p");
    if (!K || K->len != 1 || !(K->data[0] >= 0 && K->data[0] <= 1e8) ||
        K->data[0] != floor(K->data[0]) || !pp || pp->len != 1 || pp->data[0] != p)
        return fk_err_set(err, FK_EFORMAT,
                          "sfl model: no kernel count 'K' or its 'p' is not this client's %d", p);
    size_t k = (size_t)K->data[0];
    const fk_tensor *s = fk_bundle_get(b, "s"), *w = fk_bundle_get(b, "w"),
                    *c = fk_bundle_get(b, "c");
    if (k && (!s || s->len != k * (size_t)p || !w || w->len != k || !c || c->len != k))
        return fk_err_set(err, FK_EFORMAT, "sfl model: 's' (K x p), 'w', 'c' (K) missing or "
                                           "of the wrong size");
    for (size_t i = 0; k && i < s->len; i++)
        if (!isfinite(s->data[i]))
            return fk_err_set(err, FK_EFORMAT, "sfl model: centre value %zu is not finite", i);
    for (size_t i = 0; i < k; i++)
        if (!(w->data[i] > 0 && w->data[i] < 1e300) || !isfinite(c->data[i]))
            return fk_err_set(err, FK_EFORMAT, "sfl model: kernel %zu has width %g, weight %g", i,
                              w->data[i], c->data[i]);
    m->K = k;
    m->p = p;
    m->s = malloc((k ? k : 1) * (size_t)p * sizeof(double));
    m->w = malloc((k ? k : 1) * sizeof(double));
    m->c = malloc((k ? k : 1) * sizeof(double));
    if (!m->s || !m->w || !m->c) {
        fk_sfl_model_close(m);
        return fk_err_set(err, FK_ENOMEM, "sfl model: out of memory");
    }
    if (k) {
        memcpy(m->s, s->data, s->len * sizeof(double));
        memcpy(m->w, w->data, k * sizeof(double));
        memcpy(m->c, c->data, k * sizeof(double));
    }
    return FK_OK;
}

int fk__sfl_cli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    scli *c = v;
    fk_sfl_model m;
    int rc = fk__sfl_model_read(model, c->p, &m, err);
    if (rc)
        return rc;
    rep->n_samples = (double)c->n;
    /* the model's centres live in the job's preprocessed units: map the rows by the model's
     * own x_shift / x_scale (the federated standardisation when the job set none) */
    double *Xm = NULL;
    const double *X = c->X;
    if (c->c.pre_auto) {
        size_t p = (size_t)c->p;
        const fk_tensor *sh = fk_bundle_get(model, "x_shift"),
                        *sc = fk_bundle_get(model, "x_scale");
        int ok = sh && sc && sh->len == p && sc->len == p;
        for (size_t k = 0; ok && k < p; k++)
            ok = isfinite(sh->data[k]) && sc->data[k] > 0 && isfinite(sc->data[k]);
        if (!ok) {
            fk_sfl_model_close(&m);
            return fk_err_set(err, FK_EFORMAT, "sfl model: no 'x_shift' / 'x_scale' of %zu "
                                               "values (its preprocessing map)", p);
        }
        if (!(Xm = malloc((c->n ? c->n : 1) * p * sizeof *Xm))) {
            fk_sfl_model_close(&m);
            return fk_err_set(err, FK_ENOMEM, "sfl evaluate: out of memory");
        }
        for (size_t i = 0; i < c->n; i++)
            for (size_t k = 0; k < p; k++)
                Xm[i * p + k] = (c->X[i * p + k] - sh->data[k]) / sc->data[k];
        X = Xm;
    }
    double *f = malloc((c->n ? c->n : 1) * sizeof *f);
    if (!f) {
        free(Xm);
        fk_sfl_model_close(&m);
        return fk_err_set(err, FK_ENOMEM, "sfl evaluate: out of memory");
    }
    const fk_tensor *mk = fk_bundle_get(model, "mK");
    if (c->c.ovo) { /* majority vote of the pairwise classifiers */
        int P = fk__sfl_ovo_pairs(c->c.n_cls);
        double tot = 0;
        for (size_t q = 0; mk && q < mk->len; q++)
            tot += mk->data[q] >= 0 && mk->data[q] == floor(mk->data[q]) ? mk->data[q] : NAN;
        int *votes = malloc((c->n ? c->n : 1) * (size_t)c->c.n_cls * sizeof *votes),
            *pred = malloc((c->n ? c->n : 1) * sizeof *pred);
        double *mg = malloc((c->n ? c->n : 1) * (size_t)c->c.n_cls * sizeof *mg);
        if (!mk || mk->len != (size_t)P || tot != (double)m.K || !votes || !pred || !mg) {
            free(votes);
            free(pred);
            free(mg);
            free(f);
            free(Xm);
            fk_sfl_model_close(&m);
            return votes && pred && mg ? fk_err_set(err, FK_EFORMAT,
                                              "sfl model: no per-pair kernel counts 'mK' (%d "
                                              "values summing to K)", P)
                                 : fk_err_set(err, FK_ENOMEM, "sfl evaluate: out of memory");
        }
        fk__sfl_ovo_vote(&m, mk->data, c->c.n_cls, X, c->n, f, votes, mg, pred);
        double right = 0;
        for (size_t i = 0; i < c->n; i++)
            right += pred[i] == (int)c->y[i];
        if (c->n) {
            rep->accuracy = right / (double)c->n;
            rep->error = 1 - rep->accuracy;
        }
        free(votes);
        free(pred);
        free(mg);
        free(f);
        free(Xm);
        fk_sfl_model_close(&m);
        return FK_OK;
    }
    fk_sfl_predict(&m, X, c->n, f);
    double right = 0, se = 0, hinge = 0;
    for (size_t i = 0; i < c->n; i++) {
        right += (f[i] >= 0 ? 1.0 : -1.0) == c->y[i]; /* sign(0) := +1 */
        se += (f[i] - c->y[i]) * (f[i] - c->y[i]);
        hinge += fmax(0, 1 - c->y[i] * f[i]);
    }
    if (c->n && c->c.mode == FK_SFL_CLASSIFY) {
        rep->accuracy = right / (double)c->n;
        rep->error = 1 - rep->accuracy;
        rep->loss = hinge / (double)c->n;
    } else if (c->n) {
        rep->error = rep->rmse = sqrt(se / (double)c->n); /* RMSE */
        rep->loss = se / (double)c->n;
    }
    free(f);
    free(Xm);
    fk_sfl_model_close(&m);
    return FK_OK;
}

int fk__sfl_cli_save(void *v, fk_bundle *out, fk_err *err)
{
    return fk_bundle_put_scalar(out, "uploaded", ((scli *)v)->uploaded)
               ? fk_err_set(err, FK_ENOMEM, "sfl client save: out of memory")
               : FK_OK;
}

int fk__sfl_cli_load(void *v, const fk_bundle *in, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(in, "uploaded");
    if (!t || t->len != 1 || (t->data[0] != 0 && t->data[0] != 1))
        return fk_err_set(err, FK_EFORMAT, "sfl client checkpoint: no 'uploaded' flag");
    ((scli *)v)->uploaded = (int)t->data[0];
    return FK_OK;
}
