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
#include "common/methods/pooled_em.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/hungarian.h"
#include "common/methods/fedgrem_int.h"
#include "common/methods/gmm.h"

static const uint64_t PICK_STREAM = 0x7065706b00000000ULL; /* server: which client's point */
static const uint64_t CAND_STREAM = 0x7065636400000000ULL; /* client: which of its points */

enum { G_SUMS, G_SCATTER, G_MAIN };                       /* job stage */
enum { S_SEED, S_LLOYD, S_EM, S_DONE, S_FAILED };          /* restart stage */
enum { LLOYD_CAP = 100, EM_CAP = 10000 };
enum { CLIENT_BITS = 24 };                                 /* client index bits in a stream */
#define EM_TOL 1e-5

/* ---------------- server ---------------- */

typedef struct psrv {
    int K, R, S, p, gstage, tick, repeats, regularised;
    uint64_t seed;
    double N;
    /* per job: nk (K), mean (p), xtx (p x p); per restart s: stage, ncent, iters, ll, ll_old
     * (S each), C (S x R x p: seeds, Lloyd centres, then the EM means), w (S x R), sigma and
     * chol (S x p x p) */
    double *nk, *mean, *xtx, *stage, *ncent, *iters, *ll, *ll_old, *C, *w, *sigma, *chol;
    double *nr, *sx, *tot; /* work: R, R x p, K */
} psrv;

typedef struct arr {
    const char *name;
    double **a;
    size_t len;
} arr;

enum { N_ARR = 12 };

/* The server's arrays with their lengths for the current K, S, R, p (checkpoint order). */
static void srv_arrays(psrv *s, arr *out)
{
    size_t K = (size_t)s->K, S = (size_t)s->S, R = (size_t)s->R, P = (size_t)s->p;
    arr a[N_ARR] = {{"nk", &s->nk, K},          {"mean", &s->mean, P},
                    {"xtx", &s->xtx, P * P},    {"stage", &s->stage, S},
                    {"ncent", &s->ncent, S},    {"iters", &s->iters, S},
                    {"ll", &s->ll, S},          {"ll_old", &s->ll_old, S},
                    {"C", &s->C, S * R * P},    {"w", &s->w, S * R},
                    {"sigma", &s->sigma, S * P * P}, {"chol", &s->chol, S * P * P}};
    memcpy(out, a, sizeof a);
}

static void srv_free(psrv *s)
{
    arr a[N_ARR];
    srv_arrays(s, a);
    for (int i = 0; i < N_ARR; i++) {
        free(*a[i].a);
        *a[i].a = NULL;
    }
    free(s->nr);
    free(s->sx);
    free(s->tot);
    s->nr = s->sx = s->tot = NULL;
}

static int srv_alloc(psrv *s, int p, fk_err *err)
{
    srv_free(s);
    s->p = p;
    arr a[N_ARR];
    srv_arrays(s, a);
    s->nr = malloc((size_t)s->R * sizeof(double));
    s->sx = malloc((size_t)s->R * p * sizeof(double));
    s->tot = malloc((size_t)s->K * sizeof(double));
    int ok = s->nr && s->sx && s->tot;
    for (int i = 0; i < N_ARR; i++)
        ok = ok && (*a[i].a = calloc(a[i].len ? a[i].len : 1, sizeof(double))) != NULL;
    if (!ok)
        return fk_err_set(err, FK_ENOMEM,
                          "pooled-em server: out of memory for K=%d R=%d p=%d restarts=%d", s->K,
                          s->R, p, s->S);
    return FK_OK;
}

static int srv_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    fk_fedgrem_cfg c;
    int rc = fk_fedgrem_cfg_parse(&c, p, err);
    if (rc)
        return rc;
    psrv *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "pooled-em server: out of memory");
    *s = (psrv){.K = n_clients, .R = c.R, .S = c.restarts, .seed = seed};
    *out = s;
    return FK_OK;
}

static void srv_close(void *v)
{
    psrv *s = v;
    if (!s)
        return;
    srv_free(s);
    free(s);
}

static int srv_plan(void *v, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)rng;
    (void)err;
    psrv *s = v;
    for (int k = 0; k < s->K; k++)
        chosen[k] = k;
    *n_chosen = s->K;
    return FK_OK;
}

static int srv_task(void *v, int round, int phase, int client, fk_bundle *out, fk_err *err)
{
    (void)round;
    (void)phase;
    psrv *s = v;
    if (client < 0 || client >= s->K)
        return fk_err_set(err, FK_EINVAL, "task for unknown client %d (job has %d)", client, s->K);
    int rc = fk_bundle_put_scalar(out, "op", s->gstage);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "tick", s->tick);
    if (!rc && s->gstage >= G_SCATTER)
        rc = fk_bundle_put_vec(out, "mean", (size_t)s->p, s->mean);
    if (!rc && s->gstage == G_MAIN) {
        uint64_t S = (uint64_t)s->S, R = (uint64_t)s->R, P = (uint64_t)s->p;
        const uint64_t cs[3] = {S, R, P}, ws[2] = {S, R}, ps[3] = {S, P, P};
        if ((rc = fk_bundle_put_vec(out, "stage", s->S, s->stage)) ||
            (rc = fk_bundle_put_vec(out, "ncent", s->S, s->ncent)) ||
            (rc = fk_bundle_put(out, "C", 3, cs, s->C)) ||
            (rc = fk_bundle_put(out, "w", 2, ws, s->w)))
            ;
        else
            rc = fk_bundle_put(out, "chol", 3, ps, s->chol);
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
static int check_updates(psrv *s, const fk_update *ups, int n, fk_err *err)
{
    for (int i = 0; i < n; i++) {
        if (ups[i].client < 0 || ups[i].client >= s->K || (i && ups[i].client <= ups[i - 1].client))
            return fk_err_set(err, FK_EINVAL, "update from unknown or repeated client %d (job has %d)",
                              ups[i].client, s->K);
        char who[48];
        snprintf(who, sizeof who, "client %d", ups[i].client);
        const fk_bundle *u = &ups[i].msg;
        uint64_t S = (uint64_t)s->S, R = (uint64_t)s->R, P = (uint64_t)s->p;
        const uint64_t sv[1] = {S}, sp[2] = {S, P}, sr[2] = {S, R}, srp[3] = {S, R, P},
                       pp[2] = {P, P};
        int rc = FK_OK;
        if (s->gstage == G_SUMS) {
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
            if ((rc = fk_fedgrem_take(u, "sum", 1, ls, 0, who, NULL, err)) ||
                (rc = fk_fedgrem_take_scalar(u, "n", 1, FK_GMM_MAX_ABS, who, &nn, err)))
                return rc;
        } else if (s->gstage == G_SCATTER) {
            if ((rc = fk_fedgrem_take(u, "xtx", 2, pp, 0, who, NULL, err)) ||
                (rc = fk_fedgrem_take(u, "cand", 2, sp, 0, who, NULL, err)))
                return rc;
        } else if ((rc = fk_fedgrem_take(u, "tot", 1, sv, 1, who, NULL, err)) ||
                   (rc = fk_fedgrem_take(u, "cand", 2, sp, 0, who, NULL, err)) ||
                   (rc = fk_fedgrem_take(u, "nr", 2, sr, 1, who, NULL, err)) ||
                   (rc = fk_fedgrem_take(u, "sx", 3, srp, 0, who, NULL, err)) ||
                   (rc = fk_fedgrem_take(u, "far", 2, sp, 0, who, NULL, err)) ||
                   (rc = fk_fedgrem_take(u, "fard", 1, sv, 1, who, NULL, err)) ||
                   (rc = fk_fedgrem_take(u, "ll", 1, sv, 0, who, NULL, err))) {
            return rc;
        }
    }
    return FK_OK;
}

/* Round 1: pooled size and mean. */
static int agg_sums(psrv *s, const fk_update *ups, fk_err *err)
{
    int p = (int)fk_bundle_get(&ups[0].msg, "sum")->len;
    int rc = srv_alloc(s, p, err);
    if (rc)
        return rc;
    s->N = 0.0;
    for (int k = 0; k < s->K; k++) {
        s->nk[k] = fk_bundle_get(&ups[k].msg, "n")->data[0];
        s->N += s->nk[k];
        cblas_daxpy(p, 1.0, fk_bundle_get(&ups[k].msg, "sum")->data, 1, s->mean, 1);
    }
    cblas_dscal(p, 1.0 / s->N, s->mean, 1);
    s->gstage = G_SCATTER;
    return FK_OK;
}

/* Round 2: pooled scatter about the mean; each restart's first seed uniform over the union. */
static void agg_scatter(psrv *s, const fk_update *ups, fk_rng *rng)
{
    size_t P = (size_t)s->p, Rp = (size_t)s->R * P;
    memset(s->xtx, 0, P * P * sizeof(double));
    for (int k = 0; k < s->K; k++)
        cblas_daxpy((int)(P * P), 1.0, fk_bundle_get(&ups[k].msg, "xtx")->data, 1, s->xtx, 1);
    for (int r = 0; r < s->S; r++) {
        int k = pick_client(s->nk, s->K, fk_rng_uniform(rng) * s->N);
        memcpy(s->C + (size_t)r * Rp, fk_bundle_get(&ups[k].msg, "cand")->data + (size_t)r * P,
               P * sizeof(double));
        s->ncent[r] = 1;
        s->stage[r] = s->R > 1 ? S_SEED : S_LLOYD;
    }
    s->gstage = G_MAIN;
}

/* One more seed for restart r: a client by its sum of squared distances, then its point. */
static void step_seed(psrv *s, int r, const fk_update *ups, fk_rng *rng)
{
    size_t P = (size_t)s->p;
    double *tot = s->tot, T = 0.0;
    for (int k = 0; k < s->K; k++)
        T += tot[k] = fk_bundle_get(&ups[k].msg, "tot")->data[r];
    int k = T > 0 ? pick_client(tot, s->K, fk_rng_uniform(rng) * T)
                  : pick_client(s->nk, s->K, fk_rng_uniform(rng) * s->N);
    int c = (int)s->ncent[r];
    memcpy(s->C + ((size_t)r * s->R + c) * P,
           fk_bundle_get(&ups[k].msg, "cand")->data + (size_t)r * P, P * sizeof(double));
    s->ncent[r] = c + 1;
    if (c + 1 == s->R) {
        s->stage[r] = S_LLOYD;
        s->iters[r] = 0;
    }
}

/* Summed counts and sums of restart r over the clients, into nr (R) and sx (R x p). */
static void sum_stats(const psrv *s, int r, const fk_update *ups, double *nr, double *sx)
{
    size_t Rp = (size_t)s->R * s->p;
    memset(nr, 0, (size_t)s->R * sizeof *nr);
    memset(sx, 0, Rp * sizeof *sx);
    for (int k = 0; k < s->K; k++) {
        cblas_daxpy(s->R, 1.0, fk_bundle_get(&ups[k].msg, "nr")->data + (size_t)r * s->R, 1, nr, 1);
        cblas_daxpy((int)Rp, 1.0, fk_bundle_get(&ups[k].msg, "sx")->data + (size_t)r * Rp, 1, sx,
                    1);
    }
}

/* EM parameters of restart r from its summed statistics; a failed M-step or factor ends it. */
static void mstep(psrv *s, int r, const double *nr, const double *sx)
{
    size_t P = (size_t)s->p;
    double *mu = s->C + (size_t)r * s->R * P, *sg = s->sigma + (size_t)r * P * P;
    if (fk_gmm_eee_mstep(nr, sx, s->xtx, s->N, s->p, s->R, s->w + (size_t)r * s->R, mu, sg) ||
        fk_gmm_eee_chol(sg, s->p, s->chol + (size_t)r * P * P, &s->regularised))
        s->stage[r] = S_FAILED;
}

/* The e-th (0-based) farthest of the clients' farthest points, for the e-th empty cluster. */
static const double *far_point(const psrv *s, int r, const fk_update *ups, int e)
{
    int used[s->K], best = 0;
    memset(used, 0, sizeof used);
    for (int j = 0; j <= e; j++) {
        best = -1;
        for (int k = 0; k < s->K; k++) {
            double d = fk_bundle_get(&ups[k].msg, "fard")->data[r];
            if (!used[k] && (best < 0 || d > fk_bundle_get(&ups[best].msg, "fard")->data[r]))
                best = k;
        }
        if (best < 0) /* more empty clusters than clients: reuse the farthest */
            return far_point(s, r, ups, 0);
        used[best] = 1;
    }
    return fk_bundle_get(&ups[best].msg, "far")->data + (size_t)r * s->p;
}

/* One Lloyd step of restart r; when the centres stop moving (or at the cap) the hard
 * partition's statistics give the first M-step. */
static void step_lloyd(psrv *s, int r, const fk_update *ups)
{
    int R = s->R, p = s->p, empty = 0;
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
    s->stage[r] = S_EM;
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
    for (int k = 0; k < s->K; k++) {
        double v = fk_bundle_get(&ups[k].msg, "ll")->data[r];
        bad |= v <= -FK_GMM_MAX_ABS;
        ll += v;
    }
    s->iters[r] += 1;
    if (bad || !isfinite(ll)) {
        s->stage[r] = S_FAILED;
        return;
    }
    s->ll[r] = ll;
    if (fabs(ll - s->ll_old[r]) <= EM_TOL * (1.0 + fabs(ll)) || s->iters[r] >= EM_CAP) {
        s->stage[r] = S_DONE;
        return;
    }
    s->ll_old[r] = ll;
    sum_stats(s, r, ups, s->nr, s->sx);
    mstep(s, r, s->nr, s->sx);
}

static int srv_finished(void *v)
{
    psrv *s = v;
    if (s->gstage != G_MAIN)
        return 0;
    for (int r = 0; r < s->S; r++)
        if (s->stage[r] != S_DONE && s->stage[r] != S_FAILED)
            return 0;
    return 1;
}

static int srv_aggregate(void *v, int round, int phase, const fk_update *ups, int n,
                         int *round_done, fk_err *err)
{
    (void)phase;
    psrv *s = v;
    *round_done = 1;
    if (srv_finished(s))
        return FK_OK;
    int rc = check_updates(s, ups, n, err);
    if (rc)
        return fk_err_prefix(err, "round %d: ", round);
    if (n < s->K) { /* pooled sums need every client: the same step again next round */
        s->repeats++;
        return FK_OK;
    }
    fk_rng rng;
    fk_rng_init(&rng, s->seed, PICK_STREAM + (uint64_t)s->tick);
    if (s->gstage == G_SUMS) {
        rc = agg_sums(s, ups, err);
    } else if (s->gstage == G_SCATTER) {
        agg_scatter(s, ups, &rng);
    } else {
        for (int r = 0; r < s->S; r++) {
            int st = (int)s->stage[r];
            if (st == S_SEED)
                step_seed(s, r, ups, &rng);
            else if (st == S_LLOYD)
                step_lloyd(s, r, ups);
            else if (st == S_EM)
                step_em(s, r, ups);
        }
        int failed = 0;
        for (int r = 0; r < s->S; r++)
            failed += s->stage[r] == S_FAILED;
        if (failed == s->S)
            rc = fk_err_set(err, FK_ENUMERIC,
                            "pooled-em: all %d restarts failed (a component emptied or the "
                            "covariance is degenerate) with N=%g, p=%d, R=%d; try fewer components",
                            s->S, s->N, s->p, s->R);
    }
    if (!rc)
        s->tick++;
    return rc;
}

/* The restart to report: the best finished one, else the best still in EM; -1 if none. */
static int best_restart(const psrv *s, int *converged)
{
    int best = -1;
    for (int want = S_DONE; best < 0 && want >= S_EM; want--)
        for (int r = 0; r < s->S; r++)
            if (s->stage[r] == want && (best < 0 || s->ll[r] > s->ll[best]))
                best = r;
    *converged = srv_finished((void *)s);
    return best;
}

static int srv_model(void *v, fk_bundle *out, fk_err *err)
{
    psrv *s = v;
    int conv = 0, b = s->gstage == G_MAIN ? best_restart(s, &conv) : -1;
    int rc = fk_bundle_put_scalar(out, "ready", b >= 0);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "converged", conv);
    if (!rc)
        rc = fk_bundle_put_scalar(out, "repeats", s->repeats);
    if (rc || b < 0)
        return rc ? fk_err_set(err, FK_ENOMEM, "model: out of memory") : FK_OK;
    size_t K = (size_t)s->K, R = (size_t)s->R, P = (size_t)s->p;
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

static int srv_save(void *v, fk_bundle *out, fk_err *err)
{
    psrv *s = v;
    const char *names[] = {"K", "R", "restarts", "p", "gstage", "tick", "repeats", "regularised"};
    const int vals[] = {s->K, s->R, s->S, s->p, s->gstage, s->tick, s->repeats, s->regularised};
    int rc = fk_bundle_put_scalar(out, "N", s->N);
    for (size_t i = 0; !rc && i < sizeof vals / sizeof *vals; i++)
        rc = fk_bundle_put_scalar(out, names[i], vals[i]);
    arr a[N_ARR];
    srv_arrays(s, a);
    for (int i = 0; !rc && s->gstage > G_SUMS && i < N_ARR; i++)
        rc = fk_bundle_put_vec(out, a[i].name, a[i].len, *a[i].a);
    return rc ? fk_err_set(err, FK_ENOMEM, "save: out of memory") : FK_OK;
}

/* A checkpoint's restart stages and seed counts: whole numbers in range. */
static int check_counts(const psrv *s, const fk_tensor *stage, const fk_tensor *ncent,
                        fk_err *err)
{
    for (int r = 0; r < s->S; r++) {
        double st = stage->data[r], nc = ncent->data[r];
        if (!(st >= S_SEED && st <= S_FAILED) || st != floor(st) || !(nc >= 0 && nc <= s->R) ||
            nc != floor(nc))
            return fk_err_set(err, FK_EFORMAT,
                              "checkpoint restart %d has stage %g and %g seeds (want a stage "
                              "0..%d and 0..%d seeds)",
                              r, st, nc, S_FAILED, s->R);
    }
    return FK_OK;
}

static int srv_load(void *v, const fk_bundle *in, fk_err *err)
{
    psrv *s = v;
    int K, R, S, p, gstage, tick, repeats, reg;
    double N;
    int rc = fk_fedgrem_get_count(in, "K", 0, INT_MAX, &K, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "R", 0, INT_MAX, &R, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "restarts", 0, INT_MAX, &S, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "p", 0, FK_GMM_MAX_P, &p, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "gstage", G_SUMS, G_MAIN, &gstage, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "tick", 0, INT_MAX, &tick, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "repeats", 0, INT_MAX, &repeats, err);
    if (!rc)
        rc = fk_fedgrem_get_count(in, "regularised", 0, 1, &reg, err);
    if (!rc)
        rc = fk_fedgrem_take_scalar(in, "N", 0, FK_GMM_MAX_ABS, "checkpoint", &N, err);
    if (rc)
        return rc;
    if (K != s->K || R != s->R || S != s->S)
        return fk_err_set(err, FK_EINVAL,
                          "checkpoint is for K=%d, R=%d, restarts=%d but this job has K=%d, R=%d, "
                          "restarts=%d",
                          K, R, S, s->K, s->R, s->S);
    if (gstage > G_SUMS && (p < 1 || !(N > 0)))
        return fk_err_set(err, FK_EFORMAT, "checkpoint has p = %d and N = %g", p, N);
    psrv t = *s; /* array lengths for the checkpoint's p */
    t.p = p;
    arr a[N_ARR];
    srv_arrays(&t, a);
    const fk_tensor *ts[N_ARR];
    for (int i = 0; gstage > G_SUMS && i < N_ARR; i++) { /* all checked before any change */
        ts[i] = fk_bundle_get(in, a[i].name);
        if (!ts[i] || ts[i]->len != a[i].len || !fk_fedgrem_all_bounded(ts[i]->data, ts[i]->len))
            return fk_err_set(err, FK_EFORMAT,
                              "checkpoint tensor '%s' is missing, has the wrong size or holds "
                              "non-finite values",
                              a[i].name);
    }
    if (gstage > G_SUMS && (rc = check_counts(s, ts[3], ts[4], err)))
        return rc;
    if (gstage > G_SUMS && (rc = srv_alloc(s, p, err)))
        return rc;
    srv_arrays(s, a);
    for (int i = 0; gstage > G_SUMS && i < N_ARR; i++)
        memcpy(*a[i].a, ts[i]->data, a[i].len * sizeof(double));
    s->p = p;
    s->N = N;
    s->gstage = gstage;
    s->tick = tick;
    s->repeats = repeats;
    s->regularised = reg;
    return FK_OK;
}

/* ---------------- client ---------------- */

/* A client keeps no algorithm state: every task carries what its step needs. The centred
 * data is a cache keyed by the pooled mean it was centred with. */
typedef struct pcli {
    int k, K, R, S, p, centred;
    uint64_t seed;
    size_t n;
    const fk_dataset *d;
    double *mean, *Xc, *xsq, *D, *Z, *mu_t, *dmin;
} pcli;

static void cli_close(void *v)
{
    pcli *c = v;
    if (!c)
        return;
    double *a[] = {c->mean, c->Xc, c->xsq, c->D, c->Z, c->mu_t, c->dmin};
    for (size_t i = 0; i < sizeof a / sizeof *a; i++)
        free(a[i]);
    free(c);
}

static int cli_init(void **out, const fk_params *p, const fk_dataset *data, int client,
                    int n_clients, uint64_t seed, fk_err *err)
{
    fk_fedgrem_cfg cf;
    int rc = fk_fedgrem_cfg_parse(&cf, p, err);
    if (!rc)
        rc = fk_fedgrem_check_data(data, client, cf.R, err);
    if (rc)
        return rc;
    if (n_clients >= 1 << CLIENT_BITS)
        return fk_err_set(err, FK_ELIMIT, "pooled-em takes at most %d clients", 1 << CLIENT_BITS);
    pcli *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    size_t n = data->X.rows, P = data->X.cols, R = (size_t)cf.R;
    *c = (pcli){.k = client, .K = n_clients, .R = cf.R, .S = cf.restarts, .p = (int)P,
                .seed = seed, .n = n, .d = data};
    c->mean = malloc(P * sizeof(double));
    c->Xc = malloc(n * P * sizeof(double));
    c->xsq = malloc(n * sizeof(double));
    c->D = malloc(n * R * sizeof(double));
    c->Z = malloc(n * P * sizeof(double));
    c->mu_t = malloc(R * P * sizeof(double));
    c->dmin = malloc(n * sizeof(double));
    if (!c->mean || !c->Xc || !c->xsq || !c->D || !c->Z || !c->mu_t || !c->dmin) {
        cli_close(c);
        return fk_err_set(err, FK_ENOMEM, "client %d: out of memory (n=%zu)", client, n);
    }
    *out = c;
    return FK_OK;
}

/* The data centred with the task's pooled mean (recomputed only when the mean changes). */
static int centre(pcli *c, const fk_bundle *task, fk_err *err)
{
    const uint64_t ps[1] = {(uint64_t)c->p};
    const fk_tensor *m;
    int rc = fk_fedgrem_take(task, "mean", 1, ps, 0, "the server's task", &m, err);
    if (rc)
        return rc;
    size_t P = (size_t)c->p;
    if (c->centred && !memcmp(c->mean, m->data, P * sizeof(double)))
        return FK_OK;
    memcpy(c->mean, m->data, P * sizeof(double));
    const double *X = c->d->X.data;
    for (size_t i = 0; i < c->n; i++) {
        double *x = c->Xc + i * P;
        for (size_t j = 0; j < P; j++)
            x[j] = X[i * P + j] - c->mean[j];
        c->xsq[i] = cblas_ddot(c->p, x, 1, x, 1);
    }
    c->centred = 1;
    return FK_OK;
}

/* Round 1: sample count and feature sums. */
static int put_sums(pcli *c, fk_bundle *up)
{
    double *sum = fk_bundle_add(up, "sum", 1, (const uint64_t[]){(uint64_t)c->p});
    if (!sum)
        return FK_ENOMEM;
    memset(sum, 0, (size_t)c->p * sizeof *sum);
    for (size_t i = 0; i < c->n; i++)
        cblas_daxpy(c->p, 1.0, c->d->X.data + i * (size_t)c->p, 1, sum, 1);
    return fk_bundle_put_scalar(up, "n", (double)c->n);
}

/* Row i of the centred data drawn with probability wt[i] / sum (uniform when wt is NULL). */
static const double *draw_point(const pcli *c, const double *wt, double tot, fk_rng *rng)
{
    size_t pick = (size_t)fk_rng_below(rng, c->n);
    if (wt && tot > 0) {
        double u = fk_rng_uniform(rng) * tot, acc = 0.0;
        for (pick = 0; pick + 1 < c->n; pick++) {
            acc += wt[pick];
            if (acc > u)
                break;
        }
    }
    return c->Xc + pick * (size_t)c->p;
}

/* Round 2: scatter about the pooled mean and one uniform point per restart. */
static int put_scatter(pcli *c, fk_rng *rng, fk_bundle *up)
{
    size_t P = (size_t)c->p;
    double *xtx = fk_bundle_add(up, "xtx", 2, (const uint64_t[]){P, P});
    double *cand = fk_bundle_add(up, "cand", 2, (const uint64_t[]){(uint64_t)c->S, P});
    if (!xtx || !cand)
        return FK_ENOMEM;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, c->p, c->p, (int)c->n, 1.0, c->Xc, c->p,
                c->Xc, c->p, 0.0, xtx, c->p);
    for (int r = 0; r < c->S; r++)
        memcpy(cand + (size_t)r * P, draw_point(c, NULL, 0, rng), P * sizeof(double));
    return FK_OK;
}

/* Seeding: squared distance of every point to its nearest seed; their sum and a point drawn
 * by them. */
static void seed_step(pcli *c, const double *C, int ncent, fk_rng *rng, double *tot, double *cand)
{
    fk_gmm_sqdist(c->Xc, c->n, c->p, c->xsq, C, ncent, c->D);
    double t = 0.0;
    for (size_t i = 0; i < c->n; i++) {
        double m = c->D[i * (size_t)ncent];
        for (int j = 1; j < ncent; j++)
            m = c->D[i * (size_t)ncent + j] < m ? c->D[i * (size_t)ncent + j] : m;
        c->dmin[i] = m;
        t += m;
    }
    *tot = t;
    memcpy(cand, draw_point(c, c->dmin, t, rng), (size_t)c->p * sizeof(double));
}

/* Lloyd: nearest-centre counts and sums, and the point farthest from its centre. */
static void lloyd_step(pcli *c, const double *C, double *nr, double *sx, double *far,
                       double *fard)
{
    int R = c->R, p = c->p;
    fk_gmm_sqdist(c->Xc, c->n, p, c->xsq, C, R, c->D);
    size_t fi = 0;
    double fd = -1.0;
    for (size_t i = 0; i < c->n; i++) {
        const double *d = c->D + i * (size_t)R;
        int b = 0;
        for (int r = 1; r < R; r++)
            if (d[r] < d[b])
                b = r;
        nr[b] += 1.0;
        cblas_daxpy(p, 1.0, c->Xc + i * (size_t)p, 1, sx + (size_t)b * p, 1);
        if (d[b] > fd) {
            fd = d[b];
            fi = i;
        }
    }
    *fard = fd;
    memcpy(far, c->Xc + fi * (size_t)p, (size_t)p * sizeof(double));
}

/* EM: E-step with the server's factor; responsibilities' counts and sums, log-likelihood
 * (-FK_GMM_MAX_ABS when it is not finite: the server ends the restart). */
static double em_step(pcli *c, const double *w, const double *mu, const double *chol, double *nr,
                      double *sx)
{
    double ll = fk_gmm_eee_estep(c->Xc, c->n, c->p, w, mu, chol, c->R, c->D, c->Z, c->mu_t);
    if (!(fabs(ll) < FK_GMM_MAX_ABS))
        return -FK_GMM_MAX_ABS;
    fk_gmm_stats(c->Xc, c->n, c->p, c->D, c->R, nr, sx);
    return ll;
}

/* The main step's task tensors, checked: stages, seed counts, centres, weights, factors. */
static int main_task(const pcli *c, const fk_bundle *task, const fk_tensor **t, fk_err *err)
{
    uint64_t S = (uint64_t)c->S, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t sv[1] = {S}, srp[3] = {S, R, P}, sr[2] = {S, R}, spp[3] = {S, P, P};
    const char *who = "the server's task";
    int rc;
    if ((rc = fk_fedgrem_take(task, "stage", 1, sv, 1, who, &t[0], err)) ||
        (rc = fk_fedgrem_take(task, "ncent", 1, sv, 1, who, &t[1], err)) ||
        (rc = fk_fedgrem_take(task, "C", 3, srp, 0, who, &t[2], err)) ||
        (rc = fk_fedgrem_take(task, "w", 2, sr, 1, who, &t[3], err)) ||
        (rc = fk_fedgrem_take(task, "chol", 3, spp, 0, who, &t[4], err)))
        return rc;
    for (int r = 0; r < c->S; r++) {
        double st = t[0]->data[r], nc = t[1]->data[r];
        if (st != floor(st) || st > S_FAILED || nc != floor(nc) || nc > c->R ||
            (st == S_SEED && nc < 1))
            return fk_err_set(err, FK_EFORMAT, "%s has restart %d at stage %g with %g seeds", who,
                              r, st, nc);
        for (int j = 0; st == S_EM && j < c->p; j++) /* a factor's diagonal is positive */
            if (!(t[4]->data[((size_t)r * P + j) * P + j] > 0))
                return fk_err_set(err, FK_EFORMAT,
                                  "%s has a Cholesky factor for restart %d with diagonal entry "
                                  "%d = %g",
                                  who, r, j, t[4]->data[((size_t)r * P + j) * P + j]);
    }
    return FK_OK;
}

static int put_main(pcli *c, const fk_bundle *task, fk_rng *rng, fk_bundle *up, double *ll_out,
                    fk_err *err)
{
    const fk_tensor *t[5];
    int rc = main_task(c, task, t, err);
    if (rc)
        return rc;
    uint64_t S = (uint64_t)c->S, R = (uint64_t)c->R, P = (uint64_t)c->p;
    const uint64_t sv[1] = {S}, sp[2] = {S, P}, sr[2] = {S, R}, srp[3] = {S, R, P};
    double *tot = fk_bundle_add(up, "tot", 1, sv), *cand = fk_bundle_add(up, "cand", 2, sp);
    double *nr = fk_bundle_add(up, "nr", 2, sr), *sx = fk_bundle_add(up, "sx", 3, srp);
    double *far = fk_bundle_add(up, "far", 2, sp), *fard = fk_bundle_add(up, "fard", 1, sv);
    double *ll = fk_bundle_add(up, "ll", 1, sv);
    if (!tot || !cand || !nr || !sx || !far || !fard || !ll)
        return fk_err_set(err, FK_ENOMEM, "client: out of memory");
    memset(tot, 0, S * sizeof *tot);
    memset(cand, 0, S * P * sizeof *cand);
    memset(nr, 0, S * R * sizeof *nr);
    memset(sx, 0, S * R * P * sizeof *sx);
    memset(far, 0, S * P * sizeof *far);
    memset(fard, 0, S * sizeof *fard);
    memset(ll, 0, S * sizeof *ll);
    *ll_out = -INFINITY;
    for (int r = 0; r < c->S; r++) {
        int st = (int)t[0]->data[r];
        const double *C = t[2]->data + (size_t)r * R * P;
        if (st == S_SEED)
            seed_step(c, C, (int)t[1]->data[r], rng, tot + r, cand + (size_t)r * P);
        else if (st == S_LLOYD)
            lloyd_step(c, C, nr + (size_t)r * R, sx + (size_t)r * R * P, far + (size_t)r * P,
                       fard + r);
        else if (st == S_EM)
            ll[r] = em_step(c, t[3]->data + (size_t)r * R, C, t[4]->data + (size_t)r * P * P,
                            nr + (size_t)r * R, sx + (size_t)r * R * P);
        if (st == S_EM && ll[r] > *ll_out)
            *ll_out = ll[r];
    }
    return FK_OK;
}

static int cli_step(void *v, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    pcli *c = v;
    const fk_tensor *op = fk_bundle_get(task, "op"), *tick = fk_bundle_get(task, "tick");
    if (!op || op->len != 1 || !(op->data[0] == G_SUMS || op->data[0] == G_SCATTER ||
                                 op->data[0] == G_MAIN))
        return fk_err_set(err, FK_EFORMAT, "task lacks 'op' (0 = sums, 1 = scatter, 2 = step)");
    if (!tick || tick->len != 1 || !(tick->data[0] >= 0 && tick->data[0] < 1e15) ||
        tick->data[0] != floor(tick->data[0]))
        return fk_err_set(err, FK_EFORMAT, "task lacks a whole step count 'tick'");
    rep->n_samples = (double)c->n;
    if (op->data[0] == G_SUMS)
        return put_sums(c, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory") : FK_OK;
    int rc = centre(c, task, err);
    if (rc)
        return rc;
    fk_rng rng; /* the same draws however often a step is repeated */
    fk_rng_init(&rng, c->seed,
                CAND_STREAM + ((uint64_t)tick->data[0] << CLIENT_BITS) + (uint64_t)c->k);
    if (op->data[0] == G_SCATTER)
        return put_scatter(c, &rng, up) ? fk_err_set(err, FK_ENOMEM, "client: out of memory")
                                        : FK_OK;
    double best = -INFINITY; /* the best restart's log-likelihood on this client, while in EM */
    rc = put_main(c, task, &rng, up, &best, err);
    if (!rc && best > -FK_GMM_MAX_ABS)
        rep->loss = -best / (double)c->n;
    return rc;
}

/* Negative log-likelihood per sample under the pooled EEE model and, with labels, the
 * mis-clustering rate of its hard labels. */
static int cli_evaluate(void *v, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    pcli *c = v;
    size_t R = (size_t)c->R, P = (size_t)c->p, K = (size_t)c->K;
    const uint64_t th[3] = {K, R, P}, ww[2] = {K, R}, sg[3] = {K, P, P};
    const fk_tensor *t, *w, *g;
    const char *who = "the pooled-em model";
    int rc;
    if ((rc = fk_fedgrem_take(model, "theta", 3, th, 0, who, &t, err)) ||
        (rc = fk_fedgrem_take(model, "w", 2, ww, 1, who, &w, err)) ||
        (rc = fk_fedgrem_take(model, "sigma", 3, sg, 0, who, &g, err)))
        return rc;
    const double *mu = t->data + c->k * R * P, *wk = w->data + c->k * R;
    double *sigma = malloc(P * P * sizeof *sigma), *chol = malloc(P * P * sizeof *chol);
    int *lab = malloc(c->n * sizeof *lab);
    if (!sigma || !chol || !lab) {
        rc = fk_err_set(err, FK_ENOMEM, "evaluate: out of memory");
        goto done;
    }
    memcpy(sigma, g->data + c->k * P * P, P * P * sizeof *sigma);
    if (fk_gmm_eee_chol(sigma, c->p, chol, NULL)) {
        rc = fk_err_set(err, FK_ENUMERIC, "%s has a covariance that is not positive definite", who);
        goto done;
    }
    const double *X = c->d->X.data; /* the uncentred data against the uncentred model */
    rep->n_samples = (double)c->n;
    rep->loss = -fk_gmm_eee_estep(X, c->n, c->p, wk, mu, chol, c->R, c->D, c->Z, c->mu_t) /
                (double)c->n;
    if (c->d->y && c->d->n_classes > 0) {
        for (size_t i = 0; i < c->n; i++) {
            const double *g_i = c->D + i * R;
            int b = 0;
            for (size_t r = 1; r < R; r++)
                if (g_i[r] > g_i[b])
                    b = (int)r;
            lab[i] = b;
        }
        double rate = NAN;
        rc = fk_misclustering_rate(c->d->y, lab, c->n, c->d->n_classes, c->R, &rate, err);
        rep->error = rate;
        rep->accuracy = 1.0 - rate;
    }
done:
    free(sigma);
    free(chol);
    free(lab);
    return rc;
}

/* Nothing to keep: the client's steps are functions of the task and the data. */
static int cli_save(void *v, fk_bundle *out, fk_err *err)
{
    (void)v;
    return fk_bundle_put_scalar(out, "stateless", 1) ? fk_err_set(err, FK_ENOMEM, "out of memory")
                                                      : FK_OK;
}

static int cli_load(void *v, const fk_bundle *in, fk_err *err)
{
    (void)v;
    (void)in;
    (void)err;
    return FK_OK;
}

const fk_method fk_method_pooled_em = {
    .name = "pooled-em",
    .summary = "EEE Gaussian mixture (Local-EM) on the union of all clients via summed statistics",
    .server_init = srv_init,
    .server_close = srv_close,
    .plan = srv_plan,
    .task = srv_task,
    .aggregate = srv_aggregate,
    .model = srv_model,
    .save = srv_save,
    .load = srv_load,
    .finished = srv_finished,
    .client_init = cli_init,
    .client_close = cli_close,
    .local_step = cli_step,
    .evaluate = cli_evaluate,
    .client_save = cli_save,
    .client_load = cli_load,
};

int fk_pooled_em_rounds(int R)
{
    return 2 + (R > 1 ? R - 1 : 0) + LLOYD_CAP + EM_CAP;
}
