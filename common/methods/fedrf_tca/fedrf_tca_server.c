/* FedRF-TCA server side: round sets, per-phase tasks, aggregation of the
 * statistics, W_RF and the classifier, and the global model. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "common/methods/classes.h"
#include "common/methods/fedrf_tca/fedrf_tca_int.h"
#include "common/methods/predict.h"

void fk__fedrf_server_close(void *p)
{
    fk__fedrf_server *s = p;
    if (!s)
        return;
    fk__fedrf_warm_close(s);
    free(s->class_values);
    free(s->inA);
    free(s->inW);
    free(s->inC);
    free(s->s);
    free(s->has_s);
    free(s->Wbar);
    free(s->Cbar);
    free(s->Wmodel);
    free(s->Cmodel);
    free(s->Wsum);
    free(s->W0);
    free(s->Csum);
    free(s->votes);
    free(s->has_vote);
    free(s->Wsel);
    free(s->Csel);
    free(s->Vsel);
    free(s->has_vsel);
    free(s);
}

int fk__fedrf_server_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    *out = NULL;
    fk__fedrf_server *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    int rc = fk__fedrf_parse_cfg(p, n_clients, &s->c, err);
    if (rc) {
        free(s);
        return rc;
    }
    if (s->c.classes < 2) {
        free(s);
        return fk_err_set(err, FK_EINVAL, "fedrf-tca: set classes (number of classes, >= 2) for the job");
    }
    /* a listed `classes` travels in the model, so predictions answer raw labels */
    fk_classes cls;
    if ((rc = fk_classes_parse(&cls, p, 0, 100000, FK_CLASSES_COUNT_OWN, err))) {
        free(s);
        return rc;
    }
    if (cls.listed && cls.v && cls.n == s->c.classes) {
        s->class_values = cls.v;
        cls.v = NULL;
    }
    fk_classes_close(&cls);
    s->n = n_clients;
    s->seed = seed;
    s->D = 2 * (size_t)s->c.N;
    s->WM = s->D * (size_t)s->c.m;
    s->PC = fk__fedrf_classifier_params(&s->c, (size_t)s->c.classes);
    size_t n = (size_t)n_clients;
    s->inA = calloc(n, 1);
    s->inW = calloc(n, 1);
    s->inC = calloc(n, 1);
    s->has_s = calloc(n, 1);
    s->has_vote = calloc(n, 1);
    s->s = calloc(n * s->D, sizeof *s->s);
    s->Wbar = calloc(s->WM, sizeof(double));
    s->Wmodel = calloc(s->WM, sizeof(double));
    s->Cbar = calloc(s->PC, sizeof(double));
    s->Cmodel = calloc(s->PC, sizeof(double));
    s->votes = calloc(n * s->PC, sizeof(double));
    s->Wsum = calloc(s->WM, sizeof(double));
    s->Csum = calloc(s->PC, sizeof(double));
    s->W0 = s->c.warm_start ? calloc(s->WM, sizeof(double)) : NULL;
    int sel = s->c.select_holdout > 0;
    s->Wsel = sel ? calloc(s->WM, sizeof(double)) : NULL;
    s->Csel = sel ? calloc(s->PC, sizeof(double)) : NULL;
    int vsel = sel && s->c.voting; /* voting: the selected candidate's classifiers to vote */
    s->Vsel = vsel ? calloc(n * s->PC, sizeof(double)) : NULL;
    s->has_vsel = vsel ? calloc(n, 1) : NULL;
    s->sel_acc = -1;
    s->sel_avg_acc = -1;
    if (!s->inA || !s->inW || !s->inC || !s->has_s || !s->has_vote || !s->s || !s->Wbar ||
        !s->Wmodel || !s->Cbar || !s->Cmodel || !s->votes || !s->Wsum || !s->Csum || !s->PC ||
        (s->c.warm_start && !s->W0) || (sel && (!s->Wsel || !s->Csel)) ||
        (vsel && (!s->Vsel || !s->has_vsel))) {
        fk__fedrf_server_close(s);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for the server state");
    }
    *out = s;
    return FK_OK;
}

/* Uniform size in 0..k, then a uniform subset of that size (spec §2.3 step 1). */
static void random_subset(fk_rng *rng, const int *from, int k, int *to, int *n_to)
{
    /* partial Fisher-Yates on a copy; to may not alias from */
    memcpy(to, from, (size_t)k * sizeof *to);
    int size = (int)fk_rng_below(rng, (uint64_t)k + 1);
    for (int i = 0; i < size; i++) {
        int j = i + (int)fk_rng_below(rng, (uint64_t)(k - i));
        int t = to[i];
        to[i] = to[j];
        to[j] = t;
    }
    *n_to = size;
}

/* Table XVIII: one sender of Sigma l and one of W (and C), or every source. */
static void ordered_sets(const fk__fedrf_cfg *c, const int *src, int K, int round, fk_rng *rng,
                         unsigned char *inA, unsigned char *inW, unsigned char *inC)
{
    if (c->order == FK__FEDRF_ORDER_ALL) {
        for (int i = 0; i < K; i++)
            inA[src[i]] = inW[src[i]] = inC[src[i]] = 1;
        return;
    }
    int cyclic = src[((round - 1) % K + K) % K], a, w;
    if (c->order == FK__FEDRF_ORDER_ORDERED) {
        a = w = cyclic;
    } else if (c->order == FK__FEDRF_ORDER_ORDERED_RANDOM) {
        a = cyclic;
        w = src[fk_rng_below(rng, (uint64_t)K)];
    } else if (c->order == FK__FEDRF_ORDER_RANDOM) {
        a = w = src[fk_rng_below(rng, (uint64_t)K)];
    } else {
        a = src[fk_rng_below(rng, (uint64_t)K)];
        w = src[fk_rng_below(rng, (uint64_t)K)];
    }
    inA[a] = 1;
    inW[w] = inC[w] = 1;
}

/* The sets of one round: A = S_t (sends Sigma l), and the Table III subsets
 * whose W and C arrive (or the Table XVIII senders). */
int fk__fedrf_draw_sets(const fk__fedrf_cfg *c, int n, int round, fk_rng *rng, unsigned char *inA,
                        unsigned char *inW, unsigned char *inC, fk_err *err)
{
    int K = n - 1;
    int *src = malloc(4 * (size_t)n * sizeof *src);
    if (!src)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory drawing the sets of round %d",
                          round);
    int *A = src + n, *B = A + n, *C = B + n, nA = 0, nB = 0, nC = 0;
    for (int i = 0, k = 0; i < n; i++)
        if (i != c->target)
            src[k++] = i;
    if (c->order != FK__FEDRF_ORDER_SUBSET) {
        memset(inA, 0, (size_t)n);
        memset(inW, 0, (size_t)n);
        memset(inC, 0, (size_t)n);
        ordered_sets(c, src, K, round, rng, inA, inW, inC);
        free(src);
        return FK_OK;
    }
    if (c->all) {
        memcpy(A, src, (size_t)K * sizeof *A);
        nA = K;
    } else {
        random_subset(rng, src, K, A, &nA);
    }
    random_subset(rng, A, nA, B, &nB);
    random_subset(rng, B, nB, C, &nC);
    memset(inA, 0, (size_t)n);
    memset(inW, 0, (size_t)n);
    memset(inC, 0, (size_t)n);
    const int *wset = c->drop_setting == 3 ? B : A;
    int nw = c->drop_setting == 3 ? nB : nA;
    const int *cset = c->drop_setting == 1 ? A : c->drop_setting == 2 ? B : C;
    int nc = c->drop_setting == 1 ? nA : c->drop_setting == 2 ? nB : nC;
    for (int i = 0; i < nA; i++)
        inA[A[i]] = 1;
    for (int i = 0; i < nw; i++)
        inW[wset[i]] = 1;
    for (int i = 0; i < nc; i++)
        inC[cset[i]] = 1;
    free(src);
    return FK_OK;
}

int fk__fedrf_server_plan(void *p, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    fk__fedrf_server *s = p;
    /* A failed draw fails the plan: the previous round's sets must not be reused. */
    int rc = fk__fedrf_draw_sets(&s->c, s->n, round, rng, s->inA, s->inW, s->inC, err);
    if (rc)
        return rc;
    memset(s->has_s, 0, (size_t)s->n);
    /* Every client steps every round (sources outside S_t on L_C alone). */
    for (int i = 0; i < s->n; i++)
        chosen[i] = i;
    *n_chosen = s->n;
    return FK_OK;
}

int fk_fedrf_round_sets(const fk_params *p, int n_clients, int round, fk_rng *plan_rng, int *n_a,
                        int *n_w, int *n_c, fk_err *err)
{
    fk__fedrf_cfg c;
    int rc = fk__fedrf_parse_cfg(p, n_clients, &c, err);
    if (rc)
        return rc;
    unsigned char *f = calloc(3 * (size_t)n_clients, 1);
    if (!f)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    rc = fk__fedrf_draw_sets(&c, n_clients, round, plan_rng, f, f + n_clients, f + 2 * n_clients,
                             err);
    if (rc) {
        free(f);
        return rc;
    }
    *n_a = *n_w = *n_c = 0;
    for (int i = 0; i < n_clients; i++) {
        *n_a += f[i];
        *n_w += f[n_clients + i];
        *n_c += f[2 * n_clients + i];
    }
    free(f);
    return FK_OK;
}

static int any_set(const unsigned char *f, int n, int skip)
{
    for (int i = 0; i < n; i++)
        if (i != skip && f[i])
            return 1;
    return 0;
}

static int is_last(const fk__fedrf_server *s, int round)
{
    return s->c.rounds > 0 && round == s->c.rounds;
}

int fk__fedrf_sends_c(const fk__fedrf_server *s, int round, int c)
{
    if (c == (int)s->c.target)
        return 0;
    if (is_last(s, round))
        return 1; /* the final model collects every source's classifier */
    if (s->c.voting) /* one-shot, unless selection scores the vote every round */
        return s->c.select_holdout > 0;
    return round % s->c.tc == 0 && s->inC[c];
}

/* Classifiers to vote, k x PC under `name`: the rows of V (n x PC) flagged in has (nothing when
 * none has arrived yet). */
FK_CHECKRETURN static int put_votes(const fk__fedrf_server *s, const double *V, const unsigned char *has,
                     const char *name, fk_bundle *out, fk_err *err)
{
    size_t k = 0;
    for (int i = 0; i < s->n; i++)
        k += has[i];
    if (!k)
        return FK_OK;
    uint64_t shape[2] = {k, s->PC};
    double *dst = fk_bundle_add(out, name, 2, shape);
    if (!dst)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    for (int i = 0; i < s->n; i++)
        if (has[i]) {
            memcpy(dst, V + (size_t)i * s->PC, s->PC * sizeof(double));
            dst += s->PC;
        }
    return FK_OK;
}

/* The tail average (avg_last) into a new tensor of `name`: sum / count. */
FK_CHECKRETURN static int put_mean(fk_bundle *out, const char *name, int ndim, const uint64_t *shape,
                    const double *sum, size_t len, double cnt, fk_err *err)
{
    double *dst = fk_bundle_add(out, name, ndim, shape);
    if (!dst)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    for (size_t i = 0; i < len; i++)
        dst[i] = sum[i] / cnt;
    return FK_OK;
}

int fk__fedrf_server_task(void *p, int round, int phase, int c, fk_bundle *out, fk_err *err)
{
    fk__fedrf_server *s = p;
    int tgt = (int)s->c.target, rc = fk__fedrf_put_scalar(out, "phase", phase, err);
    if (rc)
        return rc;
    if (phase == 0) {
        /* lambda = 0 is the "without Sigma l" baseline (spec §2.8, T15): no statistics at all,
         * so the target never steps and its W changes only by averaging. */
        int mmd = !s->c.source_only && s->c.lambda > 0 && (c == tgt ? any_set(s->inA, s->n, tgt) : s->inA[c]);
        if (s->c.warm_start && round == 1 && (rc = fk__fedrf_put_scalar(out, "warm", 1, err)))
            return rc;
        return fk__fedrf_put_scalar(out, "mmd", mmd, err);
    }
    if (phase == 1 && round == 1 && s->have_W0 &&
        (rc = fk__fedrf_put_mat(out, "W_init", s->D, (size_t)s->c.m, s->W0, err)))
        return rc;
    if (phase == 1) {
        if (c != tgt) {
            if (s->inA[c] && s->has_s[tgt] &&
                (rc = fk__fedrf_put_vec(out, "s_peer", s->D, s->s + (size_t)tgt * s->D, err)))
                return rc;
            if ((rc = fk__fedrf_put_scalar(out, "send_W", s->inW[c], err)))
                return rc;
            return fk__fedrf_put_scalar(out, "send_C", fk__fedrf_sends_c(s, round, c), err);
        }
        size_t k = 0;
        for (int i = 0; i < s->n; i++)
            k += i != tgt && s->inA[i] && s->has_s[i];
        if (k && s->has_s[tgt]) {
            uint64_t shape[2] = {k, s->D};
            double *dst = fk_bundle_add(out, "s_src", 2, shape);
            if (!dst)
                return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
            for (int i = 0; i < s->n; i++)
                if (i != tgt && s->inA[i] && s->has_s[i]) {
                    memcpy(dst, s->s + (size_t)i * s->D, s->D * sizeof *dst);
                    dst += s->D;
                }
        }
        /* source_only: the target only receives the sources' average */
        return fk__fedrf_put_scalar(out, "send_W", !s->c.source_only &&
                                    (any_set(s->inW, s->n, tgt) || is_last(s, round)), err);
    }
    int getsW = c == tgt || s->inW[c];
    int getsC = c == tgt || s->inC[c] || (is_last(s, round) && c != tgt);
    if (s->have_W && getsW && (rc = fk__fedrf_put_mat(out, "W", s->D, (size_t)s->c.m, s->Wbar, err)))
        return rc;
    if (s->have_C && getsC && (rc = fk__fedrf_put_vec(out, "C", s->PC, s->Cbar, err)))
        return rc;
    /* select_holdout: every source scores the round's global model on its held-out rows (with
     * voting: W and the vote of the sources' current classifiers) ... */
    if (fk__fedrf_sel_asked(s, c) &&
        ((rc = fk__fedrf_put_mat(out, "sel_W", s->D, (size_t)s->c.m, s->Wmodel, err)) ||
         (rc = s->c.voting ? put_votes(s, s->votes, s->has_vote, "sel_V", out, err)
                           : fk__fedrf_put_vec(out, "sel_C", s->PC, s->Cmodel, err))))
        return rc;
    /* ... and in the last round the tail average as one more candidate (voting: W_avg and the
     * same vote) */
    const uint64_t wsh[2] = {s->D, (uint64_t)s->c.m}, csh[1] = {s->PC};
    if (fk__fedrf_sel_avg_asked(s, round, c) &&
        ((rc = put_mean(out, "sel_W_avg", 2, wsh, s->Wsum, s->WM, s->nWsum, err)) ||
         (!s->c.voting && (rc = put_mean(out, "sel_C_avg", 1, csh, s->Csum, s->PC, s->nCsum, err)))))
        return rc;
    /* Voting: the target reports the accuracy of the vote once the classifiers are in (the last
     * round), never of its own classifier, which no step trains. */
    if (s->c.voting && c == tgt && is_last(s, round))
        return put_votes(s, s->votes, s->has_vote, "votes", out, err);
    return FK_OK;
}

FK_CHECKRETURN static int agg_stats(fk__fedrf_server *s, const fk_update *up, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(&up->msg, "s");
    if (!t)
        return FK_OK;
    if (t->len != s->D)
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca: client %d sent a statistic of %zu values, "
                          "want 2N=%zu", up->client, t->len, s->D);
    long d = (long)fk__fedrf_scalar(&up->msg, "d", -1);
    if (s->d_seen == 0)
        s->d_seen = d;
    else if (d != s->d_seen)
        return fk_err_set(err, FK_EINVAL,
                          "fedrf-tca: client %d's number of features differs from the other "
                          "clients'; all domains must share one feature space",
                          up->client);
    memcpy(s->s + (size_t)up->client * s->D, t->data, s->D * sizeof(double));
    s->has_s[up->client] = 1;
    return FK_OK;
}

static void models_begin(fk__fedrf_server *s)
{
    s->f_nW = s->f_nWsrc = s->f_nC = s->f_got_target_W = 0;
    memset(s->Wbar, 0, s->WM * sizeof(double));
    memset(s->Cbar, 0, s->PC * sizeof(double));
}

FK_CHECKRETURN static int models_add(fk__fedrf_server *s, const fk_update *up, fk_err *err)
{
    int tgt = (int)s->c.target;
    const fk_bundle *m = &up->msg;
    if (fk_bundle_get(m, "W")) {
        const fk_tensor *t = fk__fedrf_want_len(m, "W", s->WM, err);
        if (!t)
            return FK_EFORMAT;
        cblas_daxpy((int)s->WM, 1.0, t->data, 1, s->Wbar, 1);
        s->f_nW++;
        s->f_nWsrc += up->client != tgt;
        if (up->client == tgt) {
            s->f_got_target_W = 1;
            memcpy(s->Wmodel, t->data, s->WM * sizeof(double));
        }
    }
    if (fk_bundle_get(m, "C")) {
        const fk_tensor *t = fk__fedrf_want_len(m, "C", s->PC, err);
        if (!t)
            return FK_EFORMAT;
        if (s->c.voting) {
            memcpy(s->votes + (size_t)up->client * s->PC, t->data, s->PC * sizeof(double));
            s->has_vote[up->client] = 1;
        } else {
            cblas_daxpy((int)s->PC, 1.0, t->data, 1, s->Cbar, 1);
            s->f_nC++;
        }
    }
    return FK_OK;
}

static void models_end(fk__fedrf_server *s, int round)
{
    int nW = s->f_nW, nWsrc = s->f_nWsrc, nC = s->f_nC, got_target_W = s->f_got_target_W;
    /* Average only when some source took part (nothing is exchanged otherwise). */
    s->have_W = nWsrc > 0;
    if (s->have_W) {
        cblas_dscal((int)s->WM, 1.0 / nW, s->Wbar, 1);
        memcpy(s->Wmodel, s->Wbar, s->WM * sizeof(double));
        s->have_Wmodel = 1;
    } else if (got_target_W) {
        s->have_Wmodel = 1;
    }
    s->have_C = nC > 0;
    if (s->have_C) {
        cblas_dscal((int)s->PC, 1.0 / nC, s->Cbar, 1);
        memcpy(s->Cmodel, s->Cbar, s->PC * sizeof(double));
        s->have_Cmodel = 1;
    }
    /* Tail average (avg_last): the models aggregated in the last avg_last rounds, so the reported
     * model does not hinge on where the last steps happened to land; it needs no target label.
     * Only fresh aggregates count: a classifier averaged every T_C rounds enters once, not once
     * per round it stayed (a stale classifier next to a newer W scored up to 18 points lower). */
    if (s->c.avg_last > 0 && s->c.rounds > 0 && round > s->c.rounds - s->c.avg_last) {
        if (s->have_W || got_target_W) {
            cblas_daxpy((int)s->WM, 1.0, s->Wmodel, 1, s->Wsum, 1);
            s->nWsum += 1;
        }
        if (s->have_C) {
            cblas_daxpy((int)s->PC, 1.0, s->Cmodel, 1, s->Csum, 1);
            s->nCsum += 1;
        }
    }
}

int fk__fedrf_sel_asked(const fk__fedrf_server *s, int c)
{
    if (!(s->c.select_holdout > 0 && c != (int)s->c.target && s->have_Wmodel))
        return 0;
    if (!s->c.voting)
        return s->have_Cmodel;
    for (int i = 0; i < s->n; i++) /* voting: once some classifier is in to vote */
        if (s->has_vote[i])
            return 1;
    return 0;
}

int fk__fedrf_sel_avg_asked(const fk__fedrf_server *s, int round, int c)
{
    return fk__fedrf_sel_asked(s, c) && is_last(s, round) && s->nWsum > 0 &&
           (s->c.voting || s->nCsum > 0);
}

/* Keep a candidate as the selected model: W and the classifier (voting: the classifiers to
 * vote), its held-out accuracy and round (0: the tail average). */
static void keep_sel(fk__fedrf_server *s, double acc, double round, const double *W, double wdiv,
                     const double *C, double cdiv)
{
    for (size_t i = 0; i < s->WM; i++)
        s->Wsel[i] = W[i] / wdiv;
    if (s->c.voting) {
        memcpy(s->Vsel, s->votes, (size_t)s->n * s->PC * sizeof(double));
        memcpy(s->has_vsel, s->has_vote, (size_t)s->n);
    } else {
        for (size_t i = 0; i < s->PC; i++)
            s->Csel[i] = C[i] / cdiv;
    }
    s->sel_acc = acc;
    s->sel_round = round;
    s->have_sel = 1;
}

/* select_holdout: the pooled held-out accuracy of this round's global model (the counts are
 * checked by check_update); keep the model when it beats every earlier round. In the last round
 * the tail average is a candidate too; it wins ties (it does not hinge on one round's steps).
 * Target labels are never involved. */
static void select_add(fk__fedrf_server *s, const fk_update *up)
{
    if (!fk_bundle_get(&up->msg, "sel_n"))
        return;
    double nk = fk__fedrf_scalar(&up->msg, "sel_n", 0);
    s->f_ok += fk__fedrf_scalar(&up->msg, "sel_ok", 0);
    s->f_cnt += nk;
    if (fk_bundle_get(&up->msg, "sel_ok_avg")) {
        s->f_ok_avg += fk__fedrf_scalar(&up->msg, "sel_ok_avg", 0);
        s->f_cnt_avg += nk;
    }
}

static void select_end(fk__fedrf_server *s, int round)
{
    double ok = s->f_ok, cnt = s->f_cnt, ok_avg = s->f_ok_avg, cnt_avg = s->f_cnt_avg;
    if (cnt > 0 && ok / cnt > s->sel_acc)
        keep_sel(s, ok / cnt, round, s->Wmodel, 1.0, s->Cmodel, 1.0);
    if (cnt_avg > 0) {
        s->sel_avg_acc = ok_avg / cnt_avg;
        if (s->sel_avg_acc >= s->sel_acc)
            keep_sel(s, s->sel_avg_acc, 0, s->Wsum, s->nWsum, s->Csum, s->nCsum);
    }
}

/* Streaming aggregation: each update folded in as it comes (client order), the phase's sums
 * in the server state; nothing of an update is kept past its fold but what the state keeps
 * anyway (phase 0's per-client statistics, a voting classifier). */
int fk__fedrf_server_fold_begin(void *p, int round, int phase, fk_err *err)
{
    fk__fedrf_server *s = p;
    if (phase == 0 && s->c.warm_start && round == 1)
        return fk__fedrf_warm_begin(s, err);
    if (phase == 1)
        models_begin(s);
    if (phase == 2)
        s->f_ok = s->f_cnt = s->f_ok_avg = s->f_cnt_avg = 0;
    return FK_OK;
}

int fk__fedrf_server_fold(void *p, int round, int phase, const fk_update *up, fk_err *err)
{
    fk__fedrf_server *s = p;
    (void)round;
    if (phase == 0) {
        if (s->warm.open)
            fk__fedrf_warm_add(s, up);
        return agg_stats(s, up, err);
    }
    if (phase == 1)
        return models_add(s, up, err);
    select_add(s, up);
    return FK_OK;
}

int fk__fedrf_server_fold_end(void *p, int round, int phase, int *done, fk_err *err)
{
    fk__fedrf_server *s = p;
    *done = phase == 2;
    if (phase == 0 && s->warm.open)
        return fk__fedrf_warm_end(s, err);
    if (phase == 1)
        models_end(s, round);
    if (phase == 2)
        select_end(s, round);
    return FK_OK;
}

int fk__fedrf_server_aggregate(void *p, int round, int phase, const fk_update *ups, int n, int *done,
                              fk_err *err)
{
    int rc = fk__fedrf_server_fold_begin(p, round, phase, err);
    for (int k = 0; k < n && !rc; k++)
        rc = fk__fedrf_server_fold(p, round, phase, &ups[k], err);
    if (rc) {
        fk__fedrf_warm_close(p);
        return rc;
    }
    return fk__fedrf_server_fold_end(p, round, phase, done, err);
}

/* What predict needs besides W and the classifier (fedrf_tca_predict.c): Omega's seed, kind,
 * width and input dimension, the extractor and the classifier's layout. */
FK_CHECKRETURN static int put_predict_keys(const fk__fedrf_server *s, fk_bundle *out, fk_err *err)
{
    double hid[FK_MLP_MAX_HIDDEN];
    for (int i = 0; i < s->c.n_hidden; i++)
        hid[i] = (double)s->c.hidden[i];
    if (fk_model_put_seed(out, "rff_seed", s->seed) ||
        fk_bundle_put_scalar(out, "rff_orthogonal", s->c.features == FK_RFF_ORTHOGONAL) ||
        fk_bundle_put_scalar(out, "sigma", s->c.sigma) ||
        fk_bundle_put_scalar(out, "d", (double)s->d_seen) ||
        fk_bundle_put_scalar(out, "eps", s->c.eps) ||
        fk_bundle_put_scalar(out, "n_classes", (double)s->c.classes) ||
        fk_bundle_put_scalar(out, "dense", s->c.dense) ||
        fk_bundle_put_vec(out, "hidden", (size_t)s->c.n_hidden, hid) ||
        (s->class_values &&
         fk_bundle_put_vec(out, "class_values", (size_t)s->c.classes, s->class_values)))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca model: out of memory");
    return FK_OK;
}

int fk__fedrf_server_model(void *p, fk_bundle *out, fk_err *err)
{
    fk__fedrf_server *s = p;
    int rc = put_predict_keys(s, out, err);
    if (rc)
        return rc;
    if (s->have_Wmodel && (rc = fk__fedrf_put_mat(out, "W", s->D, (size_t)s->c.m, s->Wmodel, err)))
        return rc;
    const uint64_t wsh[2] = {s->D, (uint64_t)s->c.m}, csh[1] = {s->PC};
    if (s->nWsum > 0 && (rc = put_mean(out, "W_avg", 2, wsh, s->Wsum, s->WM, s->nWsum, err)))
        return rc;
    if (s->nCsum > 0 && !s->c.voting &&
        (rc = put_mean(out, "C_avg", 1, csh, s->Csum, s->PC, s->nCsum, err)))
        return rc;
    if (s->have_sel &&
        ((rc = fk__fedrf_put_mat(out, "W_sel", s->D, (size_t)s->c.m, s->Wsel, err)) ||
         (rc = s->c.voting ? put_votes(s, s->Vsel, s->has_vsel, "votes_sel", out, err)
                           : fk__fedrf_put_vec(out, "C_sel", s->PC, s->Csel, err)) ||
         (rc = fk__fedrf_put_scalar(out, "sel_round", s->sel_round, err)) ||
         (rc = fk__fedrf_put_scalar(out, "sel_acc", s->sel_acc, err))))
        return rc;
    if (s->sel_avg_acc >= 0 && (rc = fk__fedrf_put_scalar(out, "sel_avg_acc", s->sel_avg_acc, err)))
        return rc;
    if (s->c.voting)
        return put_votes(s, s->votes, s->has_vote, "votes", out, err);
    if (s->have_Cmodel)
        return fk__fedrf_put_vec(out, "C", s->PC, s->Cmodel, err);
    return FK_OK;
}
