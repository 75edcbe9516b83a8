/* Pooled-EM (spec fedgrem.md 2.6) as a federated job: Local-EM's EEE Gaussian mixture
 * (2.1: k-means++ seeding, Lloyd, EM to relative tolerance 1e-5, best of `restarts`) fitted
 * to the union of all clients' data from summed statistics, one step per round:
 *   round 1      every client sends n_k and sum x            -> pooled mean
 *   round 2      sum (x - m)(x - m)^T and a uniform point    -> scatter, first seeds
 *   then         per restart: a seeding step (each client's sum of squared distances to the
 *                chosen seeds and one point drawn by them: client by its sum, point within,
 *                which is D^2 sampling over the union), a Lloyd step (cluster counts and
 *                sums; the farthest point for an empty cluster) or an EM step (E-step with
 *                the server's Cholesky factor; counts, sums and log-likelihood)
 * The restarts run side by side. Seeds and reseeded centres are data points, so this job
 * moves R points per restart to the server: it is the centralised baseline, not a private
 * method. A round that lacks a client's update changes nothing and is repeated (the draws
 * depend on the step count, not the round), so dropouts delay the fit but never alter it. */
#include "common/methods/mixture/pooled_em.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/mixture/fedgrem_int.h"
#include "common/methods/mixture/pooled_int.h"
#include "common/models/mixture/gmm.h"

static const uint64_t PICK_STREAM = 0x7065706b00000000ULL; /* server: which client's point */
enum { LLOYD_CAP = 100, EM_CAP = 10000 };
static const double EM_TOL = 1e-5; /* Local-EM's relative log-likelihood tolerance */

/* ---------------- server ---------------- */

typedef struct psrv {
    /* first (fk__pooled_srv_new, fk__pooled_plan rely on it); op: FK__POOLED_G_SUMS, FK__POOLED_G_SCATTER, FK__POOLED_G_MAIN */
    fk__pooled_head h;
    int regularised;
    /* per job: nk (K), mean (p), xtx (p x p); per restart s: stage, ncent, iters, ll, ll_old
     * (S each), C (S x R x p: seeds, Lloyd centres, then the EM means), w (S x R), sigma and
     * chol (S x p x p) */
    double *nk, *mean, *xtx, *stage, *ncent, *iters, *ll, *ll_old, *C, *w, *sigma, *chol;
    double *nr, *sx, *tot; /* work: R, R x p, K */
} psrv;

enum { N_ARR = 12 };

/* The server's arrays with their lengths for the current K, S, R, p (checkpoint order). */
static void srv_arrays(psrv *s, fk__pooled_arr *out)
{
    size_t K = (size_t)s->h.K, S = (size_t)s->h.S, R = (size_t)s->h.R, P = (size_t)s->h.p;
    fk__pooled_arr a[N_ARR] = {{"nk", &s->nk, K},          {"mean", &s->mean, P},
                    {"xtx", &s->xtx, P * P},    {"stage", &s->stage, S},
                    {"ncent", &s->ncent, S},    {"iters", &s->iters, S},
                    {"ll", &s->ll, S},          {"ll_old", &s->ll_old, S},
                    {"C", &s->C, S * R * P},    {"w", &s->w, S * R},
                    {"sigma", &s->sigma, S * P * P}, {"chol", &s->chol, S * P * P}};
    memcpy(out, a, sizeof a);
}

static void srv_free(psrv *s)
{
    fk__pooled_arr a[N_ARR];
    srv_arrays(s, a);
    fk__pooled_free(a, N_ARR);
    free(s->nr);
    free(s->sx);
    free(s->tot);
    s->nr = s->sx = s->tot = NULL;
}

FK_CHECKRETURN static int srv_alloc(psrv *s, int p, fk_err *err)
{
    srv_free(s);
    s->h.p = p;
    fk__pooled_arr a[N_ARR];
    srv_arrays(s, a);
    s->nr = malloc((size_t)s->h.R * sizeof(double));
    s->sx = malloc((size_t)s->h.R * p * sizeof(double));
    s->tot = malloc((size_t)s->h.K * sizeof(double));
    int ok = s->nr && s->sx && s->tot;
    for (int i = 0; i < N_ARR; i++)
        ok = ok && (*a[i].a = calloc(a[i].len ? a[i].len : 1, sizeof(double))) != NULL;
    if (!ok)
        return fk_err_set(err, FK_ENOMEM,
                          "pooled-em server: out of memory for K=%d R=%d p=%d restarts=%d", s->h.K,
                          s->h.R, p, s->h.S);
    return FK_OK;
}

FK_CHECKRETURN static int srv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    return fk__pooled_srv_new(out, sizeof(psrv), p, n_clients, seed, err);
}

static void srv_close(void *v)
{
    psrv *s = v;
    if (!s)
        return;
    srv_free(s);
    free(s);
}

static int best_restart(const psrv *s, int *converged);

FK_CHECKRETURN static int srv_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    (void)round;
    (void)phase;
    psrv *s = v;
    int rc = fk__pooled_task_head(&s->h, client, out, err);
    if (rc)
        return rc;
    if (s->h.op >= FK__POOLED_G_SCATTER)
        rc = fk_bundle_put_vec(out, "mean", (size_t)s->h.p, s->mean);
    if (!rc && s->h.op == FK__POOLED_G_MAIN) {
        uint64_t S = (uint64_t)s->h.S, R = (uint64_t)s->h.R, P = (uint64_t)s->h.p;
        const uint64_t cs[3] = {S, R, P}, ws[2] = {S, R}, ps[3] = {S, P, P};
        if ((rc = fk_bundle_put_vec(out, "stage", s->h.S, s->stage)) ||
            (rc = fk_bundle_put_vec(out, "ncent", s->h.S, s->ncent)) ||
            (rc = fk_bundle_put(out, "C", 3, cs, s->C)) ||
            (rc = fk_bundle_put(out, "w", 2, ws, s->w)))
            ;
        else
            rc = fk_bundle_put(out, "chol", 3, ps, s->chol);
        /* the restart the round's model is (srv_model's choice), for the client to score */
        int conv = 0;
        if (!rc)
            rc = fk_bundle_put_scalar(out, "best", best_restart(s, &conv));
    }
    return rc ? fk_err_set(err, FK_ENOMEM, "pooled-em task: out of memory") : FK_OK;
}

/* Client index by a weighted draw: the first k whose running sum of weights passes u. */
static int pick_client(const double *wt, int K, double u)
{
    double acc = 0.0;
    for (int k = 0; k < K; k++) {
        acc += wt[k];
        if (acc > u)
            return k;
    }
    for (int k = K - 1; k > 0; k--) /* rounding left u at the total: the last with weight */
        if (wt[k] > 0)
            return k;
    return 0;
}

/* Every update of one step: all K clients, each once, with the tensors of this stage. */
FK_CHECKRETURN static int check_updates(psrv *s, const fk_update *ups, int n, fk_err *err)
{
    int rc0 = fk__pooled_check_clients(&s->h, ups, n, err);
    if (rc0)
        return rc0;
    for (int i = 0; i < n; i++) {
        char who[48];
        snprintf(who, sizeof who, "client %d", ups[i].client);
        const fk_bundle *u = &ups[i].msg;
        uint64_t S = (uint64_t)s->h.S, R = (uint64_t)s->h.R, P = (uint64_t)s->h.p;
        const uint64_t sv[1] = {S}, sp[2] = {S, P}, sr[2] = {S, R}, srp[3] = {S, R, P},
                       pp[2] = {P, P};
        int rc = FK_OK;
        if (s->h.op == FK__POOLED_G_SUMS) {
            const fk_tensor *sum = fk_bundle_get(u, "sum"), *s0 = fk_bundle_get(&ups[0].msg, "sum");
            if (!sum || sum->ndim != 1 || sum->len < 1 || sum->len > FK_GMM_MAX_P)
                return fk_err_set(err, FK_EFORMAT, "%s sent no feature sum 'sum' (1 <= p <= %d)",
                                  who, FK_GMM_MAX_P);
            if (s0 && s0->len != sum->len)
                return fk_err_set(err, FK_EINVAL,
                                  "p mismatch: client %d has %zu features but client %d has %zu; "
                                  "all clients must share one feature dimension",
                                  ups[i].client, sum->len, ups[0].client, s0->len);
            const uint64_t ls[1] = {(uint64_t)sum->len};
            double nn;
            if ((rc = fk__fedgrem_take(u, "sum", 1, ls, 0, who, NULL, err)) ||
                (rc = fk__fedgrem_take_scalar(u, "n", 1, FK_GMM_MAX_ABS, who, &nn, err)))
                return rc;
        } else if (s->h.op == FK__POOLED_G_SCATTER) {
            if ((rc = fk__fedgrem_take(u, "xtx", 2, pp, 0, who, NULL, err)) ||
                (rc = fk__fedgrem_take(u, "cand", 2, sp, 0, who, NULL, err)))
                return rc;
        } else if ((rc = fk__fedgrem_take(u, "tot", 1, sv, 1, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "cand", 2, sp, 0, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "nr", 2, sr, 1, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "sx", 3, srp, 0, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "far", 2, sp, 0, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "fard", 1, sv, 1, who, NULL, err)) ||
                   (rc = fk__fedgrem_take(u, "ll", 1, sv, 0, who, NULL, err))) {
            return rc;
        }
    }
    return FK_OK;
}

/* Round 1: pooled size and mean. */
FK_CHECKRETURN static int agg_sums(psrv *s, const fk_update *ups, fk_err *err)
{
    int p = (int)fk_bundle_get(&ups[0].msg, "sum")->len;
    int rc = srv_alloc(s, p, err);
    if (rc)
        return rc;
    s->h.N = 0.0;
    for (int k = 0; k < s->h.K; k++) {
        s->nk[k] = fk_bundle_get(&ups[k].msg, "n")->data[0];
        s->h.N += s->nk[k];
        cblas_daxpy(p, 1.0, fk_bundle_get(&ups[k].msg, "sum")->data, 1, s->mean, 1);
    }
    cblas_dscal(p, 1.0 / s->h.N, s->mean, 1);
    s->h.op = FK__POOLED_G_SCATTER;
    return FK_OK;
}

/* Round 2: pooled scatter about the mean; each restart's first seed uniform over the union. */
static void agg_scatter(psrv *s, const fk_update *ups, fk_rng *rng)
{
    size_t P = (size_t)s->h.p, Rp = (size_t)s->h.R * P;
    memset(s->xtx, 0, P * P * sizeof(double));
    for (int k = 0; k < s->h.K; k++)
        cblas_daxpy((int)(P * P), 1.0, fk_bundle_get(&ups[k].msg, "xtx")->data, 1, s->xtx, 1);
    for (int r = 0; r < s->h.S; r++) {
        int k = pick_client(s->nk, s->h.K, fk_rng_uniform(rng) * s->h.N);
        memcpy(s->C + (size_t)r * Rp, fk_bundle_get(&ups[k].msg, "cand")->data + (size_t)r * P,
               P * sizeof(double));
        s->ncent[r] = 1;
        s->stage[r] = s->h.R > 1 ? FK__POOLED_S_SEED : FK__POOLED_S_LLOYD;
    }
    s->h.op = FK__POOLED_G_MAIN;
}

/* One more seed for restart r: a client by its sum of squared distances, then its point. */
static void step_seed(psrv *s, int r, const fk_update *ups, fk_rng *rng)
{
    size_t P = (size_t)s->h.p;
    double *tot = s->tot, T = 0.0;
    for (int k = 0; k < s->h.K; k++)
        T += tot[k] = fk_bundle_get(&ups[k].msg, "tot")->data[r];
    int k = T > 0 ? pick_client(tot, s->h.K, fk_rng_uniform(rng) * T)
                  : pick_client(s->nk, s->h.K, fk_rng_uniform(rng) * s->h.N);
    int c = (int)s->ncent[r];
    memcpy(s->C + ((size_t)r * s->h.R + c) * P,
           fk_bundle_get(&ups[k].msg, "cand")->data + (size_t)r * P, P * sizeof(double));
    s->ncent[r] = c + 1;
    if (c + 1 == s->h.R) {
        s->stage[r] = FK__POOLED_S_LLOYD;
        s->iters[r] = 0;
    }
}

/* Summed counts and sums of restart r over the clients, into nr (R) and sx (R x p). */
static void sum_stats(const psrv *s, int r, const fk_update *ups, double *nr, double *sx)
{
    size_t Rp = (size_t)s->h.R * s->h.p;
    memset(nr, 0, (size_t)s->h.R * sizeof *nr);
    memset(sx, 0, Rp * sizeof *sx);
    for (int k = 0; k < s->h.K; k++) {
        const double *nk = fk_bundle_get(&ups[k].msg, "nr")->data + (size_t)r * s->h.R;
        cblas_daxpy(s->h.R, 1.0, nk, 1, nr, 1);
        cblas_daxpy((int)Rp, 1.0, fk_bundle_get(&ups[k].msg, "sx")->data + (size_t)r * Rp, 1, sx,
                    1);
    }
}

/* EM parameters of restart r from its summed statistics; a failed M-step or factor ends it. */
static void mstep(psrv *s, int r, const double *nr, const double *sx)
{
    size_t P = (size_t)s->h.p;
    double *mu = s->C + (size_t)r * s->h.R * P, *sg = s->sigma + (size_t)r * P * P;
    double *w = s->w + (size_t)r * s->h.R;
    if (fk_gmm_eee_mstep(nr, sx, s->xtx, s->h.N, s->h.p, s->h.R, w, mu, sg) ||
        fk_gmm_eee_chol(sg, s->h.p, s->chol + (size_t)r * P * P, &s->regularised))
        s->stage[r] = FK__POOLED_S_FAILED;
}

/* The e-th (0-based) farthest of the clients' farthest points, for the e-th empty cluster. */
static const double *far_point(const psrv *s, int r, const fk_update *ups, int e)
{
    int used[s->h.K], best = 0;
    memset(used, 0, sizeof used);
    for (int j = 0; j <= e; j++) {
        best = -1;
        for (int k = 0; k < s->h.K; k++) {
            double d = fk_bundle_get(&ups[k].msg, "fard")->data[r];
            if (!used[k] && (best < 0 || d > fk_bundle_get(&ups[best].msg, "fard")->data[r]))
                best = k;
        }
        if (best < 0) /* more empty clusters than clients: reuse the farthest */
            return far_point(s, r, ups, 0);
        used[best] = 1;
    }
    return fk_bundle_get(&ups[best].msg, "far")->data + (size_t)r * s->h.p;
}

/* One Lloyd step of restart r; when the centres stop moving (or at the cap) the hard
 * partition's statistics give the first M-step. */
static void step_lloyd(psrv *s, int r, const fk_update *ups)
{
    int R = s->h.R, p = s->h.p, empty = 0;
    size_t Rp = (size_t)R * p;
    double *nr = s->nr, *sx = s->sx, *C = s->C + (size_t)r * Rp;
    sum_stats(s, r, ups, nr, sx);
    int moved = 0;
    for (int c = 0; c < R; c++) {
        double *cc = C + (size_t)c * p;
        if (!(nr[c] > 0)) { /* empty cluster: reseed at the point farthest from its centre */
            const double *f = far_point(s, r, ups, empty++);
            moved |= memcmp(cc, f, (size_t)p * sizeof(double)) != 0;
            memcpy(cc, f, (size_t)p * sizeof(double));
            continue;
        }
        for (int j = 0; j < p; j++) {
            double v = sx[(size_t)c * p + j] / nr[c];
            moved |= v != cc[j];
            cc[j] = v;
        }
    }
    s->iters[r] += 1;
    if ((moved || empty) && s->iters[r] < LLOYD_CAP)
        return;
    s->stage[r] = FK__POOLED_S_EM;
    s->iters[r] = 0;
    s->ll_old[r] = -FK_GMM_MAX_ABS; /* no previous E-step */
    mstep(s, r, nr, sx);
}

/* One EM step of restart r: the clients' E-step gave the log-likelihood of the parameters
 * they were sent; stop at the spec's relative tolerance, else M-step. */
static void step_em(psrv *s, int r, const fk_update *ups)
{
    double ll = 0.0;
    int bad = 0;
    for (int k = 0; k < s->h.K; k++) {
        double v = fk_bundle_get(&ups[k].msg, "ll")->data[r];
        bad |= v <= -FK_GMM_MAX_ABS;
        ll += v;
    }
    if (!fk__pooled_em_advance(s->stage, s->iters, s->ll, s->ll_old, r, ll, bad, EM_TOL, EM_CAP))
        return;
    sum_stats(s, r, ups, s->nr, s->sx);
    mstep(s, r, s->nr, s->sx);
}

static int srv_finished(void *v)
{
    psrv *s = v;
    if (s->h.op != FK__POOLED_G_MAIN)
        return 0;
    for (int r = 0; r < s->h.S; r++)
        if (s->stage[r] != FK__POOLED_S_DONE && s->stage[r] != FK__POOLED_S_FAILED)
            return 0;
    return 1;
}

FK_CHECKRETURN static int srv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                         int *round_done, fk_err *err)
{
    (void)phase;
    psrv *s = v;
    *round_done = 1;
    if (srv_finished(s))
        return FK_OK;
    int rc = check_updates(s, ups, n, err);
    if (rc)
        return fk_err_prefix(err, rc, "round %d: ", round);
    if ((rc = fk__pooled_incomplete(&s->h, n, round, "pooled-em", err)))
        return rc < 0 ? rc : FK_OK; /* sums need every client: the same step next round */
    fk_rng rng;
    fk_rng_init(&rng, s->h.seed, PICK_STREAM + (uint64_t)s->h.tick);
    if (s->h.op == FK__POOLED_G_SUMS) {
        rc = agg_sums(s, ups, err);
    } else if (s->h.op == FK__POOLED_G_SCATTER) {
        agg_scatter(s, ups, &rng);
    } else {
        for (int r = 0; r < s->h.S; r++) {
            int st = (int)s->stage[r];
            if (st == FK__POOLED_S_SEED)
                step_seed(s, r, ups, &rng);
            else if (st == FK__POOLED_S_LLOYD)
                step_lloyd(s, r, ups);
            else if (st == FK__POOLED_S_EM)
                step_em(s, r, ups);
        }
        int failed = 0;
        for (int r = 0; r < s->h.S; r++)
            failed += s->stage[r] == FK__POOLED_S_FAILED;
        if (failed == s->h.S)
            rc = fk_err_set(err, FK_ENUMERIC,
                            "pooled-em: all %d restarts failed (a component emptied or the "
                            "covariance is degenerate) with N=%g, p=%d, R=%d; try fewer components",
                            s->h.S, s->h.N, s->h.p, s->h.R);
    }
    if (!rc)
        s->h.tick++;
    return rc;
}

/* The restart to report: the best finished one, else the best still in EM; -1 if none. */
static int best_restart(const psrv *s, int *converged)
{
    int best = -1;
    for (int want = FK__POOLED_S_DONE; best < 0 && want >= FK__POOLED_S_EM; want--)
        for (int r = 0; r < s->h.S; r++)
            if (s->stage[r] == want && (best < 0 || s->ll[r] > s->ll[best]))
                best = r;
    *converged = srv_finished((void *)s);
    return best;
}

FK_CHECKRETURN static int srv_model(void *v, fk_bundle *out, fk_err *err)
{
    psrv *s = v;
    int conv = 0, b = s->h.op == FK__POOLED_G_MAIN ? best_restart(s, &conv) : -1;
    int rc = fk_bundle_put_scalar(out, "ready", b >= 0);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "converged", conv);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "repeats", s->h.repeats);
    if (rc || b < 0)
        return rc ? fk_err_set(err, FK_ENOMEM, "model: out of memory") : FK_OK;
    size_t K = (size_t)s->h.K, R = (size_t)s->h.R, P = (size_t)s->h.p;
    const uint64_t th[3] = {K, R, P}, ww[2] = {K, R}, sg[3] = {K, P, P};
    double *t = fk_bundle_add(out, "theta", 3, th), *w = fk_bundle_add(out, "w", 2, ww);
    double *g = fk_bundle_add(out, "sigma", 3, sg);
    if (!t || !w || !g)
        return fk_err_set(err, FK_ENOMEM, "model: out of memory");
    const double *mu = s->C + (size_t)b * R * P;
    for (size_t k = 0; k < K; k++) { /* one pooled model for every client, uncentred */
        for (size_t i = 0; i < R * P; i++)
            t[k * R * P + i] = mu[i] + s->mean[i % P];
        memcpy(w + k * R, s->w + (size_t)b * R, R * sizeof(double));
        memcpy(g + k * P * P, s->sigma + (size_t)b * P * P, P * P * sizeof(double));
    }
    if ((rc = fk_bundle_put_scalar(out, "loglik", s->ll[b])) ||
        (rc = fk_bundle_put_scalar(out, "em_iterations", s->iters[b])) ||
        (rc = fk_bundle_put_scalar(out, "regularised", s->regularised)))
        return fk_err_set(err, FK_ENOMEM, "model: out of memory");
    return FK_OK;
}

FK_CHECKRETURN static int srv_save(void *v, fk_bundle *out, fk_err *err)
{
    psrv *s = v;
    fk__pooled_arr a[N_ARR];
    srv_arrays(s, a);
    int rc = fk__pooled_save(&s->h, a, N_ARR, out, err);
    if (!rc && fk_bundle_put_scalar(out, "regularised", s->regularised))
        rc = fk_err_set(err, FK_ENOMEM, "save: out of memory");
    return rc;
}

/* A checkpoint's restart stages and seed counts: whole numbers in range. */
FK_CHECKRETURN static int check_counts(const psrv *s, const fk_tensor *stage, const fk_tensor *ncent,
                        fk_err *err)
{
    for (int r = 0; r < s->h.S; r++) {
        double st = stage->data[r], nc = ncent->data[r];
        if (!(st >= FK__POOLED_S_SEED && st <= FK__POOLED_S_FAILED) || st != floor(st) || !(nc >= 0 && nc <= s->h.R) ||
            nc != floor(nc))
            return fk_err_set(err, FK_EFORMAT,
                              "checkpoint restart %d has stage %g and %g seeds (want a stage "
                              "0..%d and 0..%d seeds)",
                              r, st, nc, FK__POOLED_S_FAILED, s->h.R);
    }
    return FK_OK;
}

FK_CHECKRETURN static int srv_load(void *v, const fk_bundle *in, fk_err *err)
{
    psrv *s = v, t = *s;
    int reg;
    int rc = fk__fedgrem_get_count(in, "regularised", 0, 1, &reg, err);
    if (rc)
        return rc;
    const fk_tensor *ts[N_ARR];
    fk__pooled_arr a[N_ARR];
    fk__pooled_head got;
    if ((rc = fk__pooled_load_head(&s->h, in, FK__POOLED_G_MAIN, &got, err)))
        return rc;
    t.h.p = got.p;
    srv_arrays(&t, a); /* lengths for the checkpoint's p */
    if (got.op > FK__POOLED_G_SUMS && ((rc = fk__pooled_take_arrays(in, a, N_ARR, ts, err)) ||
                            (rc = check_counts(s, ts[3], ts[4], err))))
        return rc;
    if (got.op > FK__POOLED_G_SUMS && (rc = srv_alloc(s, got.p, err)))
        return rc;
    srv_arrays(s, a);
    for (int i = 0; got.op > FK__POOLED_G_SUMS && i < N_ARR; i++)
        memcpy(*a[i].a, ts[i]->data, a[i].len * sizeof(double));
    s->h = got;
    s->regularised = reg;
    return FK_OK;
}

/* fk_pooled_em_rounds of the job's R (5). */
static int srv_max_rounds(const fk_params *p)
{
    long R;
    fk_err ignore = {0}; /* a bad R fails server_init with its own message */
    return fk_pooled_em_rounds(fk_params_int(p, "R", 5, 1, 1000, &R, &ignore) ? 1 : (int)R);
}

const fk_method fk_method_pooled_em = {
    .name = "pooled-em",
    .summary = "EEE Gaussian mixture (Local-EM) on the union of all clients via summed statistics",
    .server_init = srv_init,
    .server_close = srv_close,
    .plan = fk__pooled_plan,
    .task = srv_task,
    .aggregate = srv_aggregate,
    .model = srv_model,
    .save = srv_save,
    .load = srv_load,
    .finished = srv_finished,
    .check_update = fk__pooled_em_check,
    .max_rounds = srv_max_rounds,
    .client_init = fk__pooled_em_cli_init,
    .client_close = fk__pooled_em_cli_close,
    .local_step = fk__pooled_em_cli_step,
    .evaluate = fk__pooled_em_cli_evaluate,
    .predict = fk__mixture_predict_gmm,
    .keys = fk__pooled_keys,
    .client_save = fk__pooled_em_cli_save,
    .client_load = fk__pooled_em_cli_load,
};

int fk_pooled_em_rounds(int R)
{
    return 2 + (R > 1 ? R - 1 : 0) + LLOYD_CAP + EM_CAP;
}
