/* FedRF-TCA checkpoints: server and client state to and from bundles. */
#include <string.h>

#include "common/methods/fedrf_tca/fedrf_tca_int.h"

int fk__fedrf_server_save(void *p, fk_bundle *out, fk_err *err)
{
    fk__fedrf_server *s = p;
    double meta[8] = {(double)s->n, (double)s->D, (double)s->c.m, (double)s->PC,
                      (double)s->d_seen, s->have_Wmodel, s->have_Cmodel, s->c.voting};
    int rc = fk__fedrf_put_vec(out, "meta", 8, meta, err);
    if (!rc)
        rc = fk__fedrf_put_mat(out, "Wmodel", s->D, (size_t)s->c.m, s->Wmodel, err);
    if (!rc)
        rc = fk__fedrf_put_vec(out, "Cmodel", s->PC, s->Cmodel, err);
    if (!rc)
        rc = fk__fedrf_put_mat(out, "votes", (size_t)s->n, s->PC, s->votes, err);
    if (!rc && s->c.avg_last > 0) {
        double cnt[2] = {s->nWsum, s->nCsum};
        if ((rc = fk__fedrf_put_mat(out, "Wsum", s->D, (size_t)s->c.m, s->Wsum, err)) ||
            (rc = fk__fedrf_put_vec(out, "Csum", s->PC, s->Csum, err)))
            return rc;
        rc = fk__fedrf_put_vec(out, "avg_n", 2, cnt, err);
    }
    /* the warm start is computed in round 1 phase 0 and sent in phase 1: a server restarted
     * between them needs it */
    if (!rc && s->c.warm_start && !(rc = fk__fedrf_put_scalar(out, "have_W0", s->have_W0, err)) &&
        s->have_W0)
        rc = fk__fedrf_put_mat(out, "W0", s->D, (size_t)s->c.m, s->W0, err);
    if (!rc && s->c.select_holdout > 0) { /* the selected model so far */
        double sm[4] = {s->have_sel, s->sel_acc, s->sel_round, s->sel_avg_acc};
        if ((rc = fk__fedrf_put_vec(out, "sel_meta", 4, sm, err)) ||
            (rc = fk__fedrf_put_mat(out, "Wsel", s->D, (size_t)s->c.m, s->Wsel, err)))
            return rc;
        rc = fk__fedrf_put_vec(out, "Csel", s->PC, s->Csel, err);
        if (!rc && s->c.voting) { /* the selected candidate's classifiers to vote */
            double *hv = fk_bundle_add(out, "has_vsel", 1, (uint64_t[1]){(uint64_t)s->n});
            if (!hv)
                return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
            for (int i = 0; i < s->n; i++)
                hv[i] = s->has_vsel[i];
            rc = fk__fedrf_put_mat(out, "Vsel", (size_t)s->n, s->PC, s->Vsel, err);
        }
    }
    if (!rc) {
        double *hv = fk_bundle_add(out, "has_vote", 1, (uint64_t[1]){(uint64_t)s->n});
        if (!hv)
            return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
        for (int i = 0; i < s->n; i++)
            hv[i] = s->has_vote[i];
    }
    return rc;
}

int fk__fedrf_server_load(void *p, const fk_bundle *in, fk_err *err)
{
    fk__fedrf_server *s = p;
    const fk_tensor *meta = fk__fedrf_want_len(in, "meta", 8, err), *W, *C, *V, *H;
    if (!meta)
        return FK_EFORMAT;
    if (meta->data[0] != s->n || meta->data[1] != (double)s->D || meta->data[2] != s->c.m ||
        meta->data[3] != (double)s->PC || meta->data[7] != s->c.voting)
        return fk_err_set(err, FK_EINVAL,
                          "fedrf-tca: checkpoint is for another job shape (clients, N, m, classifier "
                          "or voting differ)");
    if (!(W = fk__fedrf_want_len(in, "Wmodel", s->WM, err)) ||
        !(C = fk__fedrf_want_len(in, "Cmodel", s->PC, err)) ||
        !(V = fk__fedrf_want_len(in, "votes", (size_t)s->n * s->PC, err)) ||
        !(H = fk__fedrf_want_len(in, "has_vote", (size_t)s->n, err)))
        return FK_EFORMAT;
    if (s->c.avg_last > 0) {
        const fk_tensor *ws = fk__fedrf_want_len(in, "Wsum", s->WM, err),
                        *cs = fk__fedrf_want_len(in, "Csum", s->PC, err),
                        *an = fk__fedrf_want_len(in, "avg_n", 2, err);
        if (!ws || !cs || !an)
            return FK_EFORMAT;
        if (!(an->data[0] >= 0 && an->data[1] >= 0))
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: checkpoint has a bad avg_n");
        memcpy(s->Wsum, ws->data, s->WM * sizeof(double));
        memcpy(s->Csum, cs->data, s->PC * sizeof(double));
        s->nWsum = an->data[0];
        s->nCsum = an->data[1];
    }
    if (s->c.warm_start) { /* absent in older checkpoints: no warm start */
        s->have_W0 = fk__fedrf_scalar(in, "have_W0", 0) != 0;
        if (s->have_W0) {
            const fk_tensor *w0 = fk__fedrf_want_len(in, "W0", s->WM, err);
            if (!w0)
                return FK_EFORMAT;
            memcpy(s->W0, w0->data, s->WM * sizeof(double));
        }
    }
    if (s->c.select_holdout > 0) {
        /* sel_meta: have, accuracy, round, and (since the tail average became a candidate)
         * the average's accuracy; older checkpoints have 3 values */
        const fk_tensor *sm = fk_bundle_get(in, "sel_meta"),
                        *ws = fk__fedrf_want_len(in, "Wsel", s->WM, err),
                        *cs = fk__fedrf_want_len(in, "Csel", s->PC, err);
        if (!ws || !cs)
            return FK_EFORMAT;
        if (!sm || (sm->len != 3 && sm->len != 4) || !(sm->data[1] >= -1 && sm->data[1] <= 1) ||
            (sm->len == 4 && !(sm->data[3] >= -1 && sm->data[3] <= 1)))
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: checkpoint has a bad sel_meta");
        s->have_sel = sm->data[0] != 0;
        s->sel_acc = sm->data[1];
        s->sel_round = sm->data[2];
        s->sel_avg_acc = sm->len == 4 ? sm->data[3] : -1;
        memcpy(s->Wsel, ws->data, s->WM * sizeof(double));
        memcpy(s->Csel, cs->data, s->PC * sizeof(double));
        if (s->c.voting) {
            const fk_tensor *vs = fk__fedrf_want_len(in, "Vsel", (size_t)s->n * s->PC, err),
                            *hv = fk__fedrf_want_len(in, "has_vsel", (size_t)s->n, err);
            if (!vs || !hv)
                return FK_EFORMAT;
            memcpy(s->Vsel, vs->data, (size_t)s->n * s->PC * sizeof(double));
            for (int i = 0; i < s->n; i++)
                s->has_vsel[i] = hv->data[i] != 0;
        }
    }
    s->d_seen = (long)meta->data[4];
    s->have_Wmodel = meta->data[5] != 0;
    s->have_Cmodel = meta->data[6] != 0;
    memcpy(s->Wmodel, W->data, s->WM * sizeof(double));
    memcpy(s->Cmodel, C->data, s->PC * sizeof(double));
    memcpy(s->votes, V->data, (size_t)s->n * s->PC * sizeof(double));
    for (int i = 0; i < s->n; i++)
        s->has_vote[i] = H->data[i] != 0;
    return FK_OK;
}

/* RNG state as 32-bit halves, so doubles carry it exactly. */
static void rng_pack(const fk_rng *r, double *out)
{
    for (int i = 0; i < 4; i++) {
        out[2 * i] = (double)(r->s[i] >> 32);
        out[2 * i + 1] = (double)(r->s[i] & 0xffffffffULL);
    }
    out[8] = r->spare;
    out[9] = r->has_spare;
}

static void rng_unpack(fk_rng *r, const double *in)
{
    for (int i = 0; i < 4; i++)
        r->s[i] = ((uint64_t)in[2 * i] << 32) | (uint64_t)in[2 * i + 1];
    r->spare = in[8];
    r->has_spare = in[9] != 0;
}

int fk__fedrf_client_save(void *p, fk_bundle *out, fk_err *err)
{
    fk__fedrf_client *c = p;
    double rs[10], meta[5] = {(double)c->D, (double)c->c.m, (double)c->PC, c->evals, c->loss};
    rng_pack(&c->rng, rs);
    int rc = fk__fedrf_put_vec(out, "meta", 5, meta, err);
    if (!rc)
        rc = fk__fedrf_put_vec(out, "par", c->WM + c->PC, c->par, err);
    if (!rc)
        rc = fk__fedrf_put_vec(out, "rng", 10, rs, err);
    if (!rc)
        rc = fk__fedrf_put_scalar(out, "batched", c->batched, err);
    double t[2] = {c->optW.t, c->optC.t};
    if (!rc)
        rc = fk__fedrf_put_vec(out, "opt_t", 2, t, err);
    /* Adam moments per optimizer: the target's W may step with another one (target_opt). */
    if (!rc && c->optW.kind == FK_OPT_ADAM &&
        !(rc = fk__fedrf_put_vec(out, "optW_m", c->WM, c->optW.m, err)))
        rc = fk__fedrf_put_vec(out, "optW_v", c->WM, c->optW.v, err);
    if (!rc && c->optC.kind == FK_OPT_ADAM &&
        !(rc = fk__fedrf_put_vec(out, "optC_m", c->PC, c->optC.m, err)))
        rc = fk__fedrf_put_vec(out, "optC_v", c->PC, c->optC.v, err);
    if (!rc && c->c.dense) { /* the extractor, its optimizer's step count and moments */
        if ((rc = fk__fedrf_put_vec(out, "ext", c->PE, c->ext, err)) ||
            (rc = fk__fedrf_put_scalar(out, "optE_t", c->optE.t, err)))
            return rc;
        if (c->optE.kind == FK_OPT_ADAM &&
            !(rc = fk__fedrf_put_vec(out, "optE_m", c->PE, c->optE.m, err)))
            rc = fk__fedrf_put_vec(out, "optE_v", c->PE, c->optE.v, err);
    }
    if (!rc) {
        /* the sampling pool order matters for the next draws */
        double *pp = fk_bundle_add(out, "perm", 1, (uint64_t[1]){c->X.rows});
        if (!pp)
            return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
        for (size_t i = 0; i < c->X.rows; i++)
            pp[i] = c->perm[i];
    }
    return rc;
}

int fk__fedrf_client_load(void *p, const fk_bundle *in, fk_err *err)
{
    fk__fedrf_client *c = p;
    const fk_tensor *meta = fk__fedrf_want_len(in, "meta", 5, err), *par, *rs, *t, *perm;
    if (!meta)
        return FK_EFORMAT;
    if (meta->data[0] != (double)c->D || meta->data[1] != c->c.m || meta->data[2] != (double)c->PC)
        return fk_err_set(err, FK_EINVAL, "fedrf-tca: client checkpoint is for another shape "
                          "(N, m or classifier differ)");
    if (!(par = fk__fedrf_want_len(in, "par", c->WM + c->PC, err)) ||
        !(rs = fk__fedrf_want_len(in, "rng", 10, err)) ||
        !(t = fk__fedrf_want_len(in, "opt_t", 2, err)) ||
        !(perm = fk__fedrf_want_len(in, "perm", c->X.rows, err)))
        return FK_EFORMAT;
    for (size_t i = 0; i < c->X.rows; i++) {
        double v = perm->data[i];
        /* the mini-batch pool never reaches the held-out rows */
        if (!(v >= 0 && v < (double)c->X.rows) || (i < c->n_train && v >= (double)c->n_train))
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: client checkpoint has a bad sample index");
        c->perm[i] = (int)v;
    }
    if (c->optW.kind == FK_OPT_ADAM) {
        const fk_tensor *a = fk__fedrf_want_len(in, "optW_m", c->WM, err),
                        *b = fk__fedrf_want_len(in, "optW_v", c->WM, err);
        if (!a || !b)
            return FK_EFORMAT;
        memcpy(c->optW.m, a->data, c->WM * sizeof(double));
        memcpy(c->optW.v, b->data, c->WM * sizeof(double));
    }
    if (c->optC.kind == FK_OPT_ADAM) {
        const fk_tensor *e = fk__fedrf_want_len(in, "optC_m", c->PC, err),
                        *f = fk__fedrf_want_len(in, "optC_v", c->PC, err);
        if (!e || !f)
            return FK_EFORMAT;
        memcpy(c->optC.m, e->data, c->PC * sizeof(double));
        memcpy(c->optC.v, f->data, c->PC * sizeof(double));
    }
    if (c->c.dense) {
        const fk_tensor *e = fk__fedrf_want_len(in, "ext", c->PE, err),
                        *et = fk__fedrf_want_len(in, "optE_t", 1, err);
        if (!e || !et)
            return FK_EFORMAT;
        if (c->optE.kind == FK_OPT_ADAM) {
            const fk_tensor *a = fk__fedrf_want_len(in, "optE_m", c->PE, err),
                            *b = fk__fedrf_want_len(in, "optE_v", c->PE, err);
            if (!a || !b)
                return FK_EFORMAT;
            memcpy(c->optE.m, a->data, c->PE * sizeof(double));
            memcpy(c->optE.v, b->data, c->PE * sizeof(double));
        }
        memcpy(c->ext, e->data, c->PE * sizeof(double));
        c->optE.t = et->data[0];
    }
    memcpy(c->par, par->data, (c->WM + c->PC) * sizeof(double));
    rng_unpack(&c->rng, rs->data);
    c->optW.t = t->data[0];
    c->optC.t = t->data[1];
    c->evals = meta->data[3];
    c->loss = meta->data[4];
    /* the current mini-batch is perm[0..b): rebuilt, not stored (absent in older checkpoints) */
    c->batched = 0;
    if (fk__fedrf_scalar(in, "batched", 0) != 0)
        return fk__fedrf_client_load_batch(c, err);
    return FK_OK;
}
