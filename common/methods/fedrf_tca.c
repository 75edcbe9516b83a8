#include "common/methods/fedrf_tca.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rff.h"
#include "common/methods/classifier.h"
#include "common/methods/mmd.h"
#include "common/methods/optimizer.h"
#include "common/methods/tca.h"

/* ---------- configuration shared by server and clients ---------- */

typedef struct cfg {
    long N, m, batch, tc, rounds, classes, target, eval_every;
    double sigma, lambda, lr, eps;
    size_t hidden[FK_MLP_MAX_HIDDEN];
    int n_hidden;
    int all;          /* participation: every source every round (setting I of Tables V/VI) */
    int drop_setting; /* Table III: 1 = A/A/A, 2 = A/A/B, 3 = A/B/C */
    int voting;       /* one-shot hard voting instead of classifier averaging */
    fk_opt_kind opt;
} cfg;

static int parse_hidden(const char *s, cfg *c, fk_err *err)
{
    c->n_hidden = 0;
    if (!*s || !strcmp(s, "none"))
        return FK_OK;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 100000 || c->n_hidden == FK_MLP_MAX_HIDDEN)
            return fk_err_set(err, FK_EINVAL,
                              "hidden: want up to %d comma-separated layer sizes like 100,100 "
                              "(or none)", FK_MLP_MAX_HIDDEN);
        c->hidden[c->n_hidden++] = (size_t)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return fk_err_set(err, FK_EINVAL, "hidden: unexpected '%c' in layer list", *end);
    }
    return FK_OK;
}

static int parse_cfg(const fk_params *p, int n_clients, cfg *c, fk_err *err)
{
    memset(c, 0, sizeof *c);
    int rc;
    if ((rc = fk_params_int(p, "N", 1000, 0, 1000000, &c->N, err)) ||
        (rc = fk_params_int(p, "m", 100, 0, 1000000, &c->m, err)) ||
        (rc = fk_params_double(p, "sigma", 1.0, -1e300, 1e300, &c->sigma, err)) ||
        (rc = fk_params_double(p, "lambda", 1.0, 0.0, 1e12, &c->lambda, err)) ||
        (rc = fk_params_double(p, "lr", 1e-3, 1e-12, 1e3, &c->lr, err)) ||
        (rc = fk_params_double(p, "eps", 1e-5, 0.0, 1.0, &c->eps, err)) ||
        (rc = fk_params_int(p, "batch", 128, 1, 100000000, &c->batch, err)) ||
        (rc = fk_params_int(p, "tc", 50, 1, 1000000000, &c->tc, err)) ||
        (rc = fk_params_int(p, "rounds", 0, 0, 1000000000, &c->rounds, err)) ||
        (rc = fk_params_int(p, "classes", 0, 0, 100000, &c->classes, err)) ||
        (rc = fk_params_int(p, "target", n_clients - 1, 0, n_clients - 1, &c->target, err)) ||
        (rc = fk_params_int(p, "eval_every", 1, 1, 1000000000, &c->eval_every, err)) ||
        (rc = fk_params_bool(p, "voting", 0, &c->voting, err)))
        return rc;
    if (c->N == 0)
        return fk_err_set(err, FK_EINVAL, "N (number of random frequencies) must be >= 1");
    if (!(c->sigma > 0))
        return fk_err_set(err, FK_EINVAL, "sigma (kernel width) must be > 0 (got %g)", c->sigma);
    if (c->m < 1 || c->m > 2 * c->N)
        return fk_err_set(err, FK_EINVAL, "m=%ld must be in 1..2N=%ld (the random-feature dimension)",
                          c->m, 2 * c->N);
    if (n_clients < 2)
        return fk_err_set(err, FK_EINVAL, "fedrf-tca needs at least one source and one target client");
    if ((rc = parse_hidden(fk_params_str(p, "hidden", "100,100"), c, err)) ||
        (rc = fk_opt_parse(fk_params_str(p, "optimizer", "adam"), &c->opt, err)))
        return rc;
    const char *part = fk_params_str(p, "participation", "random");
    if (strcmp(part, "random") && strcmp(part, "all"))
        return fk_err_set(err, FK_EINVAL, "participation must be random or all (got '%s')", part);
    c->all = !strcmp(part, "all");
    const char *ds = fk_params_str(p, "drop_setting", "I");
    c->drop_setting = !strcmp(ds, "I") ? 1 : !strcmp(ds, "II") ? 2 : !strcmp(ds, "III") ? 3 : 0;
    if (!c->drop_setting)
        return fk_err_set(err, FK_EINVAL, "drop_setting must be I, II or III (Table III; got '%s')",
                          ds);
    return FK_OK;
}

static size_t classifier_params(const cfg *c, size_t classes)
{
    fk_mlp net;
    fk_err e;
    if (fk_mlp_layout(&net, (size_t)c->m, c->hidden, c->n_hidden, classes, &e))
        return 0;
    return net.n_params;
}

void fk_fedrf_message_params(size_t N, size_t m, const size_t *hidden, int n_hidden,
                             size_t classes, fk_fedrf_counts *out)
{
    fk_mlp net;
    fk_err e;
    memset(out, 0, sizeof *out);
    out->w_rf = 2 * N * m;
    if (fk_mlp_layout(&net, m, hidden, n_hidden, classes, &e) == FK_OK)
        out->classifier = net.n_params;
    out->model = out->w_rf + out->classifier;
    out->sigma_paper = N;
    out->sigma_sent = 2 * N;
    out->total_paper = out->model + N;
    out->total_sent = out->model + 2 * N;
}

/* Bundle helpers. */
static double scalar(const fk_bundle *b, const char *name, double dflt)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    return t && t->len == 1 ? t->data[0] : dflt;
}

static int put_mat(fk_bundle *b, const char *name, size_t r, size_t c, const double *src, fk_err *err)
{
    uint64_t shape[2] = {r, c};
    if (fk_bundle_put(b, name, 2, shape, src))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory adding '%s'", name);
    return FK_OK;
}

static int put_vec(fk_bundle *b, const char *name, size_t n, const double *src, fk_err *err)
{
    if (fk_bundle_put_vec(b, name, n, src))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory adding '%s'", name);
    return FK_OK;
}

static int put_scalar(fk_bundle *b, const char *name, double v, fk_err *err)
{
    if (fk_bundle_put_scalar(b, name, v))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory adding '%s'", name);
    return FK_OK;
}

/* A tensor of exactly len values, or an FK_EFORMAT error naming it. */
static const fk_tensor *want_len(const fk_bundle *b, const char *name, size_t len, fk_err *err)
{
    const fk_tensor *t = fk_bundle_get(b, name);
    if (!t || t->len != len) {
        fk_err_set(err, FK_EFORMAT, "fedrf-tca: tensor '%s' %s (want %zu values, got %zu)", name,
                   t ? "has the wrong size" : "is missing", len, t ? t->len : (size_t)0);
        return NULL;
    }
    return t;
}

/* ---------- server ---------- */

typedef struct server {
    cfg c;
    int n;
    size_t D, WM, PC;
    long d_seen;                /* feature dimension reported by the clients */
    unsigned char *inA, *inW, *inC;
    double *s;                  /* n x D statistics of this round */
    unsigned char *has_s;
    double *Wbar, *Cbar;        /* averages of this round (phase 2) */
    int have_W, have_C;
    double *Wmodel, *Cmodel;    /* latest global model */
    int have_Wmodel, have_Cmodel;
    double *votes;              /* n x PC one-shot classifiers */
    unsigned char *has_vote;
} server;

static void server_close(void *p)
{
    server *s = p;
    if (!s)
        return;
    free(s->inA);
    free(s->inW);
    free(s->inC);
    free(s->s);
    free(s->has_s);
    free(s->Wbar);
    free(s->Cbar);
    free(s->Wmodel);
    free(s->Cmodel);
    free(s->votes);
    free(s->has_vote);
    free(s);
}

static int server_init(void **out, const fk_params *p, int n_clients, uint64_t seed, fk_err *err)
{
    (void)seed;
    *out = NULL;
    server *s = calloc(1, sizeof *s);
    if (!s)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    int rc = parse_cfg(p, n_clients, &s->c, err);
    if (rc) {
        free(s);
        return rc;
    }
    if (s->c.classes < 2) {
        free(s);
        return fk_err_set(err, FK_EINVAL, "fedrf-tca: set classes (number of classes, >= 2) for the job");
    }
    s->n = n_clients;
    s->D = 2 * (size_t)s->c.N;
    s->WM = s->D * (size_t)s->c.m;
    s->PC = classifier_params(&s->c, (size_t)s->c.classes);
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
    if (!s->inA || !s->inW || !s->inC || !s->has_s || !s->has_vote || !s->s || !s->Wbar ||
        !s->Wmodel || !s->Cbar || !s->Cmodel || !s->votes || !s->PC) {
        server_close(s);
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

/* The sets of one round: A = S_t (sends Sigma l), and the Table III subsets
 * whose W and C arrive. */
static void draw_sets(const cfg *c, int n, fk_rng *rng, unsigned char *inA, unsigned char *inW,
                      unsigned char *inC)
{
    int K = n - 1;
    int *src = malloc(4 * (size_t)n * sizeof *src);
    if (!src)
        return;
    int *A = src + n, *B = A + n, *C = B + n, nA = 0, nB = 0, nC = 0;
    for (int i = 0, k = 0; i < n; i++)
        if (i != c->target)
            src[k++] = i;
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
}

static int srv_plan(void *p, int round, fk_rng *rng, int *chosen, int *n_chosen, fk_err *err)
{
    (void)round;
    (void)err;
    server *s = p;
    draw_sets(&s->c, s->n, rng, s->inA, s->inW, s->inC);
    memset(s->has_s, 0, (size_t)s->n);
    /* Every client steps every round (sources outside S_t on L_C alone). */
    for (int i = 0; i < s->n; i++)
        chosen[i] = i;
    *n_chosen = s->n;
    return FK_OK;
}

int fk_fedrf_round_sets(const fk_params *p, int n_clients, fk_rng *plan_rng, int *n_a, int *n_w,
                        int *n_c, fk_err *err)
{
    cfg c;
    int rc = parse_cfg(p, n_clients, &c, err);
    if (rc)
        return rc;
    unsigned char *f = calloc(3 * (size_t)n_clients, 1);
    if (!f)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    draw_sets(&c, n_clients, plan_rng, f, f + n_clients, f + 2 * n_clients);
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

static int is_last(const server *s, int round)
{
    return s->c.rounds > 0 && round == s->c.rounds;
}

/* Does source c send its classifier in this round? */
static int sends_c(const server *s, int round, int c)
{
    if (is_last(s, round))
        return 1; /* the final model collects every source's classifier */
    return !s->c.voting && round % s->c.tc == 0 && s->inC[c];
}

static int srv_task(void *p, int round, int phase, int c, fk_bundle *out, fk_err *err)
{
    server *s = p;
    int tgt = (int)s->c.target, rc = put_scalar(out, "phase", phase, err);
    if (rc)
        return rc;
    if (phase == 0)
        return put_scalar(out, "mmd", c == tgt ? any_set(s->inA, s->n, tgt) : s->inA[c], err);
    if (phase == 1) {
        if (c != tgt) {
            if (s->inA[c] && s->has_s[tgt] && (rc = put_vec(out, "s_peer", s->D, s->s + (size_t)tgt * s->D, err)))
                return rc;
            if ((rc = put_scalar(out, "send_W", s->inW[c], err)))
                return rc;
            return put_scalar(out, "send_C", sends_c(s, round, c), err);
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
        return put_scalar(out, "send_W", any_set(s->inW, s->n, tgt) || is_last(s, round), err);
    }
    int getsW = c == tgt || s->inW[c];
    int getsC = c == tgt || s->inC[c] || (is_last(s, round) && c != tgt);
    if (s->have_W && getsW && (rc = put_mat(out, "W", s->D, (size_t)s->c.m, s->Wbar, err)))
        return rc;
    if (s->have_C && getsC && (rc = put_vec(out, "C", s->PC, s->Cbar, err)))
        return rc;
    return FK_OK;
}

static int agg_stats(server *s, const fk_update *ups, int n, fk_err *err)
{
    for (int k = 0; k < n; k++) {
        const fk_tensor *t = fk_bundle_get(&ups[k].msg, "s");
        if (!t)
            continue;
        if (t->len != s->D)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: client %d sent a statistic of %zu values, "
                              "want 2N=%zu", ups[k].client, t->len, s->D);
        long d = (long)scalar(&ups[k].msg, "d", -1);
        if (s->d_seen == 0)
            s->d_seen = d;
        else if (d != s->d_seen)
            return fk_err_set(err, FK_EINVAL,
                              "fedrf-tca: client %d has %ld features but other clients have %ld; "
                              "all domains must share one feature space", ups[k].client, d, s->d_seen);
        memcpy(s->s + (size_t)ups[k].client * s->D, t->data, s->D * sizeof(double));
        s->has_s[ups[k].client] = 1;
    }
    return FK_OK;
}

static int agg_models(server *s, int round, const fk_update *ups, int n, fk_err *err)
{
    int tgt = (int)s->c.target, nW = 0, nWsrc = 0, nC = 0, got_target_W = 0;
    memset(s->Wbar, 0, s->WM * sizeof(double));
    memset(s->Cbar, 0, s->PC * sizeof(double));
    for (int k = 0; k < n; k++) {
        const fk_bundle *m = &ups[k].msg;
        if (fk_bundle_get(m, "W")) {
            const fk_tensor *t = want_len(m, "W", s->WM, err);
            if (!t)
                return FK_EFORMAT;
            cblas_daxpy((int)s->WM, 1.0, t->data, 1, s->Wbar, 1);
            nW++;
            nWsrc += ups[k].client != tgt;
            if (ups[k].client == tgt) {
                got_target_W = 1;
                memcpy(s->Wmodel, t->data, s->WM * sizeof(double));
            }
        }
        if (fk_bundle_get(m, "C")) {
            const fk_tensor *t = want_len(m, "C", s->PC, err);
            if (!t)
                return FK_EFORMAT;
            if (s->c.voting) {
                memcpy(s->votes + (size_t)ups[k].client * s->PC, t->data, s->PC * sizeof(double));
                s->has_vote[ups[k].client] = 1;
            } else {
                cblas_daxpy((int)s->PC, 1.0, t->data, 1, s->Cbar, 1);
                nC++;
            }
        }
    }
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
    (void)round;
    return FK_OK;
}

static int srv_aggregate(void *p, int round, int phase, const fk_update *ups, int n, int *done,
                         fk_err *err)
{
    server *s = p;
    *done = phase == 2;
    if (phase == 0)
        return agg_stats(s, ups, n, err);
    if (phase == 1)
        return agg_models(s, round, ups, n, err);
    return FK_OK;
}

static int srv_model(void *p, fk_bundle *out, fk_err *err)
{
    server *s = p;
    int rc;
    if (s->have_Wmodel && (rc = put_mat(out, "W", s->D, (size_t)s->c.m, s->Wmodel, err)))
        return rc;
    if (s->c.voting) {
        size_t k = 0;
        for (int i = 0; i < s->n; i++)
            k += s->has_vote[i];
        if (!k)
            return FK_OK;
        uint64_t shape[2] = {k, s->PC};
        double *dst = fk_bundle_add(out, "votes", 2, shape);
        if (!dst)
            return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
        for (int i = 0; i < s->n; i++)
            if (s->has_vote[i]) {
                memcpy(dst, s->votes + (size_t)i * s->PC, s->PC * sizeof(double));
                dst += s->PC;
            }
        return FK_OK;
    }
    if (s->have_Cmodel)
        return put_vec(out, "C", s->PC, s->Cmodel, err);
    return FK_OK;
}

static int srv_save(void *p, fk_bundle *out, fk_err *err)
{
    server *s = p;
    double meta[8] = {(double)s->n, (double)s->D, (double)s->c.m, (double)s->PC,
                      (double)s->d_seen, s->have_Wmodel, s->have_Cmodel, s->c.voting};
    int rc = put_vec(out, "meta", 8, meta, err);
    if (!rc)
        rc = put_mat(out, "Wmodel", s->D, (size_t)s->c.m, s->Wmodel, err);
    if (!rc)
        rc = put_vec(out, "Cmodel", s->PC, s->Cmodel, err);
    if (!rc)
        rc = put_mat(out, "votes", (size_t)s->n, s->PC, s->votes, err);
    if (!rc) {
        double *hv = fk_bundle_add(out, "has_vote", 1, (uint64_t[1]){(uint64_t)s->n});
        if (!hv)
            return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
        for (int i = 0; i < s->n; i++)
            hv[i] = s->has_vote[i];
    }
    return rc;
}

static int srv_load(void *p, const fk_bundle *in, fk_err *err)
{
    server *s = p;
    const fk_tensor *meta = want_len(in, "meta", 8, err), *W, *C, *V, *H;
    if (!meta)
        return FK_EFORMAT;
    if (meta->data[0] != s->n || meta->data[1] != (double)s->D || meta->data[2] != s->c.m ||
        meta->data[3] != (double)s->PC || meta->data[7] != s->c.voting)
        return fk_err_set(err, FK_EINVAL,
                          "fedrf-tca: checkpoint is for another job shape (clients, N, m, classifier "
                          "or voting differ)");
    if (!(W = want_len(in, "Wmodel", s->WM, err)) || !(C = want_len(in, "Cmodel", s->PC, err)) ||
        !(V = want_len(in, "votes", (size_t)s->n * s->PC, err)) ||
        !(H = want_len(in, "has_vote", (size_t)s->n, err)))
        return FK_EFORMAT;
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

/* ---------- client ---------- */

typedef struct client {
    cfg c;
    int idx, is_target, classes;
    fk_mat X;     /* P-L2 normalized rows */
    int *y;       /* NULL when unlabelled */
    fk_rff rff;
    fk_mlp net;
    size_t D, WM, PC, b;
    double *par;  /* W (D x m, row-major) then the classifier */
    fk_opt optW, optC;
    fk_rng rng;   /* mini-batches */
    int *perm;    /* index pool for sampling without replacement */
    fk_mat Xb, Phi; /* current mini-batch and its random features */
    int *yb;
    double *s_own, *grad, *z, *d;
    double loss;
    double evals; /* phase-2 calls, for the evaluation cadence */
    int batched;  /* a mini-batch was drawn (phase 0): phase 1 steps on it */
} client;

static void client_close(void *p)
{
    client *c = p;
    if (!c)
        return;
    fk_mat_close(&c->X);
    free(c->y);
    fk_rff_close(&c->rff);
    free(c->par);
    fk_opt_close(&c->optW);
    fk_opt_close(&c->optC);
    free(c->perm);
    fk_mat_close(&c->Xb);
    fk_mat_close(&c->Phi);
    free(c->yb);
    free(c->s_own);
    free(c->grad);
    free(c->z);
    free(c->d);
    free(c);
}

static const uint64_t BATCH_STREAM = 0x6261746368000000ULL;
static const uint64_t INIT_STREAM = 0x696e697400000000ULL;

static int client_alloc(client *c, const fk_dataset *data, fk_err *err)
{
    size_t n = data->X.rows;
    c->par = calloc(c->WM + c->PC, sizeof(double));
    c->perm = malloc(n * sizeof(int));
    c->yb = calloc(c->b, sizeof(int));
    c->s_own = calloc(c->D, sizeof(double));
    c->grad = calloc(c->WM + c->PC, sizeof(double));
    c->z = calloc((size_t)c->c.m + 1, sizeof(double));
    c->d = calloc(c->D, sizeof(double));
    if (!c->par || !c->perm || !c->yb || !c->s_own || !c->grad || !c->z || !c->d ||
        fk_mat_copy(&c->X, &data->X) || fk_mat_init(&c->Xb, c->b, data->X.cols) ||
        fk_mat_init(&c->Phi, c->b, c->D))
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory for client %d", c->idx);
    if (data->y) {
        c->y = malloc(n * sizeof(int));
        if (!c->y)
            return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
        memcpy(c->y, data->y, n * sizeof(int));
    }
    for (size_t i = 0; i < n; i++)
        c->perm[i] = (int)i;
    return FK_OK;
}

static int client_init(void **out, const fk_params *p, const fk_dataset *data, int idx,
                       int n_clients, uint64_t seed, fk_err *err)
{
    *out = NULL;
    client *c = calloc(1, sizeof *c);
    if (!c)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    int rc = parse_cfg(p, n_clients, &c->c, err);
    if (rc)
        goto fail;
    c->idx = idx;
    c->is_target = idx == c->c.target;
    c->classes = c->c.classes >= 2 ? (int)c->c.classes : data->n_classes;
    size_t n = data->X.rows;
    if (c->classes < 2) {
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: set classes (>= 2); the %s domain '%s' does not "
                        "say how many there are", c->is_target ? "target" : "source", data->name);
        goto fail;
    }
    if (n == 0 || data->X.cols == 0) {
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: domain '%s' is empty", data->name);
        goto fail;
    }
    if (c->c.m >= (long)n) {
        rc = fk_err_set(err, FK_EINVAL, "fedrf-tca: m=%ld must be below the %zu samples of '%s'",
                        c->c.m, n, data->name);
        goto fail;
    }
    if (!c->is_target && (rc = fk_labels_check(data->y, n, c->classes, data->name, err)))
        goto fail;
    if ((rc = fk_mlp_layout(&c->net, (size_t)c->c.m, c->c.hidden, c->c.n_hidden,
                            (size_t)c->classes, err)))
        goto fail;
    c->D = 2 * (size_t)c->c.N;
    c->WM = c->D * (size_t)c->c.m;
    c->PC = c->net.n_params;
    c->b = (size_t)c->c.batch < n ? (size_t)c->c.batch : n;
    if ((rc = client_alloc(c, data, err)))
        goto fail;
    fk_rows_l2_normalize(&c->X);
    if ((rc = fk_rff_init(&c->rff, seed, data->X.cols, (size_t)c->c.N, c->c.sigma, err)))
        goto fail;
    fk_rng init;
    fk_rng_init(&init, seed, INIT_STREAM + (uint64_t)idx);
    double r = 1.0 / sqrt((double)c->D);
    for (size_t i = 0; i < c->WM; i++)
        c->par[i] = r * (2.0 * fk_rng_uniform(&init) - 1.0);
    fk_mlp_init_params(&c->net, c->par + c->WM, &init);
    fk_rng_init(&c->rng, seed, BATCH_STREAM + (uint64_t)idx);
    if ((rc = fk_opt_init(&c->optW, c->c.opt, c->WM, c->c.lr, err)) ||
        (rc = fk_opt_init(&c->optC, c->c.opt, c->PC, c->c.lr, err)))
        goto fail;
    c->loss = NAN;
    *out = c;
    return FK_OK;
fail:
    client_close(c);
    return rc;
}

/* Draw a mini-batch without replacement and map it to random features. */
/* The mini-batch is perm[0..b): its rows, labels, random features and MMD
 * statistic (also rebuilt this way when a client state is loaded). */
static int load_batch(client *c, fk_err *err)
{
    for (size_t i = 0; i < c->b; i++) {
        memcpy(fk_mat_row(&c->Xb, i), fk_mat_row(&c->X, (size_t)c->perm[i]),
               c->X.cols * sizeof(double));
        c->yb[i] = c->y ? c->y[c->perm[i]] : 0;
    }
    int rc = fk_rff_map_into(&c->rff, &c->Xb, &c->Phi, err);
    if (rc)
        return rc;
    fk_mmd_embedding(&c->Phi, c->is_target ? -1.0 : 1.0, c->s_own);
    c->batched = 1;
    return FK_OK;
}

static int sample_batch(client *c, fk_err *err)
{
    size_t n = c->X.rows;
    for (size_t i = 0; i < c->b; i++) {
        size_t j = i + (size_t)fk_rng_below(&c->rng, n - i);
        int t = c->perm[i];
        c->perm[i] = c->perm[j];
        c->perm[j] = t;
    }
    return load_batch(c, err);
}

/* U = Phi W, rows normalized: F = U / (|U| + eps). Keeps U and the norms. */
static int project_rows(const client *c, const fk_mat *Phi, const double *W, fk_mat *U, fk_mat *F,
                        double *norms, fk_err *err)
{
    size_t b = Phi->rows, m = (size_t)c->c.m;
    if (fk_mat_init(U, b, m) || fk_mat_init(F, b, m)) {
        fk_mat_close(U);
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    }
    if (b)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, (int)m, (int)c->D, 1.0,
                    Phi->data, (int)Phi->ld, W, (int)m, 0.0, U->data, (int)U->ld);
    for (size_t i = 0; i < b; i++) {
        double r = cblas_dnrm2((int)m, fk_mat_row(U, i), 1);
        norms[i] = r;
        for (size_t j = 0; j < m; j++)
            F->data[i * m + j] = U->data[i * m + j] / (r + c->c.eps);
    }
    return FK_OK;
}

/* Source step: classification loss through the normalization into W and C,
 * plus lambda * the pairwise MMD when the target's statistic arrived. */
static int source_step(client *c, const fk_tensor *s_peer, fk_err *err)
{
    size_t b = c->b, m = (size_t)c->c.m;
    double *W = c->par, *gW = c->grad, *gC = c->grad + c->WM;
    double *norms = malloc(b * sizeof *norms);
    fk_mat U = {0}, F = {0}, gF = {0};
    int rc = norms ? project_rows(c, &c->Phi, W, &U, &F, norms, err)
                   : fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    if (!rc && fk_mat_init(&gF, b, m))
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    double Lc = 0, Lm = 0;
    if (!rc)
        rc = fk_mlp_loss_grad(&c->net, c->par + c->WM, &F, c->yb, &Lc, gC, &gF, err);
    if (!rc) {
        /* d f / d u for f = u / (|u| + eps): g_u = g_f/(r+eps) - u (u.g_f) / (r (r+eps)^2). */
        for (size_t i = 0; i < b; i++) {
            double r = norms[i], *u = fk_mat_row(&U, i), *g = fk_mat_row(&gF, i);
            double ug = cblas_ddot((int)m, u, 1, g, 1), a = 1.0 / (r + c->c.eps);
            double bcoef = r > 0 ? ug / (r * (r + c->c.eps) * (r + c->c.eps)) : 0.0;
            for (size_t j = 0; j < m; j++)
                g[j] = a * g[j] - bcoef * u[j];
        }
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)c->D, (int)m, (int)b, 1.0,
                    c->Phi.data, (int)c->Phi.ld, gF.data, (int)gF.ld, 0.0, gW, (int)m);
        if (s_peer && c->c.lambda > 0) {
            for (size_t k = 0; k < c->D; k++)
                c->d[k] = c->s_own[k] + s_peer->data[k];
            fk_mat Wm = fk_mat_view(W, c->D, m, m), gWm = fk_mat_view(gW, c->D, m, m);
            Lm = fk_mmd_loss(&Wm, c->d, c->c.lambda, &gWm, NULL, c->z);
        }
        fk_opt_step(&c->optW, W, gW);
        fk_opt_step(&c->optC, c->par + c->WM, gC);
        c->loss = Lc + c->c.lambda * Lm;
    }
    free(norms);
    fk_mat_close(&U);
    fk_mat_close(&F);
    fk_mat_close(&gF);
    return rc;
}

/* Target step: mean over the received sources of |W^T (s_i + s_T)|^2. */
static void target_step(client *c, const fk_tensor *s_src)
{
    size_t m = (size_t)c->c.m, k = s_src ? (size_t)s_src->shape[0] : 0;
    if (!k) {
        c->loss = NAN;
        return;
    }
    double *gW = c->grad, L = 0;
    memset(gW, 0, c->WM * sizeof *gW);
    fk_mat Wm = fk_mat_view(c->par, c->D, m, m), gWm = fk_mat_view(gW, c->D, m, m);
    for (size_t i = 0; i < k; i++) {
        for (size_t j = 0; j < c->D; j++)
            c->d[j] = s_src->data[i * c->D + j] + c->s_own[j];
        L += fk_mmd_loss(&Wm, c->d, 1.0 / (double)k, &gWm, NULL, c->z) / (double)k;
    }
    fk_opt_step(&c->optW, c->par, gW);
    c->loss = L;
}

/* Predictions for all rows of the client's data with W and one classifier
 * (votes == NULL) or a majority vote of k classifiers. */
static int predict_all(const client *c, const double *W, const double *C, const double *votes,
                       size_t k, int *pred, fk_err *err)
{
    size_t n = c->X.rows, chunk = 256, cls = (size_t)c->classes;
    int rc = FK_OK;
    int *one = malloc(chunk * sizeof *one);
    int *tally = calloc(chunk * cls, sizeof *tally);
    double *norms = malloc(chunk * sizeof *norms);
    if (!one || !tally || !norms)
        rc = fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    for (size_t r0 = 0; r0 < n && !rc; r0 += chunk) {
        size_t b = n - r0 < chunk ? n - r0 : chunk;
        fk_mat Xc = fk_mat_rows(&c->X, r0, b), Phi, U, F;
        if ((rc = fk_rff_map(&c->rff, &Xc, &Phi, err)))
            break;
        rc = project_rows(c, &Phi, W, &U, &F, norms, err);
        fk_mat_close(&Phi);
        if (rc)
            break;
        if (!votes) {
            rc = fk_mlp_predict(&c->net, C, &F, pred + r0, err);
        } else {
            memset(tally, 0, chunk * cls * sizeof *tally);
            for (size_t v = 0; v < k && !rc; v++) {
                rc = fk_mlp_predict(&c->net, votes + v * c->PC, &F, one, err);
                for (size_t i = 0; i < b && !rc; i++)
                    tally[i * cls + (size_t)one[i]]++;
            }
            for (size_t i = 0; i < b; i++) {
                int best = 0; /* majority, ties to the smallest class */
                for (size_t q = 1; q < cls; q++)
                    if (tally[i * cls + q] > tally[i * cls + (size_t)best])
                        best = (int)q;
                pred[r0 + i] = best;
            }
        }
        fk_mat_close(&U);
        fk_mat_close(&F);
    }
    free(one);
    free(tally);
    free(norms);
    return rc;
}

static int accuracy(const client *c, const double *W, const double *C, const double *votes,
                    size_t k, double *acc, fk_err *err)
{
    *acc = NAN;
    if (!c->y)
        return FK_OK;
    int *pred = malloc(c->X.rows * sizeof *pred);
    if (!pred)
        return fk_err_set(err, FK_ENOMEM, "fedrf-tca: out of memory");
    int rc = predict_all(c, W, C, votes, k, pred, err);
    size_t ok = 0;
    for (size_t i = 0; i < c->X.rows && !rc; i++)
        ok += pred[i] == c->y[i];
    if (!rc)
        *acc = (double)ok / (double)c->X.rows;
    free(pred);
    return rc;
}

static int cli_step(void *p, const fk_bundle *task, fk_bundle *up, fk_report *rep, fk_err *err)
{
    client *c = p;
    int phase = (int)scalar(task, "phase", -1), rc = FK_OK;
    rep->n_samples = (double)c->X.rows;
    if (phase == 0) {
        if ((rc = sample_batch(c, err)))
            return rc;
        if (scalar(task, "mmd", 0) != 0) {
            if ((rc = put_vec(up, "s", c->D, c->s_own, err)))
                return rc;
            return put_scalar(up, "d", (double)c->X.cols, err);
        }
        return FK_OK;
    }
    if (phase == 1) {
        if (!c->batched) /* e.g. a restarted client without its saved state */
            return fk_err_set(err, FK_ESTATE, "fedrf-tca: client %d got a phase-1 step without "
                              "the mini-batch of phase 0 (client state lost)", c->idx);
        if (c->is_target) {
            const fk_tensor *s = fk_bundle_get(task, "s_src");
            if (s && (s->ndim != 2 || s->shape[1] != c->D))
                return fk_err_set(err, FK_EFORMAT, "fedrf-tca: s_src must be k x 2N");
            target_step(c, s);
        } else {
            const fk_tensor *s = fk_bundle_get(task, "s_peer");
            if (s && s->len != c->D)
                return fk_err_set(err, FK_EFORMAT, "fedrf-tca: s_peer must have 2N values");
            if ((rc = source_step(c, s, err)))
                return rc;
        }
        if (scalar(task, "send_W", 0) != 0 &&
            (rc = put_mat(up, "W", c->D, (size_t)c->c.m, c->par, err)))
            return rc;
        if (scalar(task, "send_C", 0) != 0 && (rc = put_vec(up, "C", c->PC, c->par + c->WM, err)))
            return rc;
        return FK_OK;
    }
    if (phase != 2)
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca: task has no valid phase");
    const fk_tensor *W = fk_bundle_get(task, "W"), *C = fk_bundle_get(task, "C");
    if (W) {
        if (W->len != c->WM)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: averaged W has %zu values, want %zu",
                              W->len, c->WM);
        memcpy(c->par, W->data, c->WM * sizeof(double));
    }
    if (C) {
        if (C->len != c->PC)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: averaged classifier has %zu values, "
                              "want %zu", C->len, c->PC);
        memcpy(c->par + c->WM, C->data, c->PC * sizeof(double));
    }
    rep->loss = c->loss;
    c->evals += 1;
    if (c->is_target && fmod(c->evals, (double)c->c.eval_every) == 0)
        rc = accuracy(c, c->par, c->par + c->WM, NULL, 0, &rep->accuracy, err);
    return rc;
}

static int cli_evaluate(void *p, const fk_bundle *model, fk_report *rep, fk_err *err)
{
    client *c = p;
    rep->n_samples = (double)c->X.rows;
    const fk_tensor *W = fk_bundle_get(model, "W");
    const double *Wd = c->par;
    if (W) {
        if (W->len != c->WM)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: model W has %zu values, want %zu",
                              W->len, c->WM);
        Wd = W->data;
    }
    const fk_tensor *V = fk_bundle_get(model, "votes"), *C = fk_bundle_get(model, "C");
    if (V) {
        if (V->ndim != 2 || V->shape[1] != c->PC)
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: votes must be k x %zu", c->PC);
        return accuracy(c, Wd, NULL, V->data, (size_t)V->shape[0], &rep->accuracy, err);
    }
    if (C && C->len != c->PC)
        return fk_err_set(err, FK_EFORMAT, "fedrf-tca: model classifier has %zu values, want %zu",
                          C->len, c->PC);
    return accuracy(c, Wd, C ? C->data : c->par + c->WM, NULL, 0, &rep->accuracy, err);
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

static int cli_save(void *p, fk_bundle *out, fk_err *err)
{
    client *c = p;
    double rs[10], meta[5] = {(double)c->D, (double)c->c.m, (double)c->PC, c->evals, c->loss};
    rng_pack(&c->rng, rs);
    int rc = put_vec(out, "meta", 5, meta, err);
    if (!rc)
        rc = put_vec(out, "par", c->WM + c->PC, c->par, err);
    if (!rc)
        rc = put_vec(out, "rng", 10, rs, err);
    if (!rc)
        rc = put_scalar(out, "batched", c->batched, err);
    double t[2] = {c->optW.t, c->optC.t};
    if (!rc)
        rc = put_vec(out, "opt_t", 2, t, err);
    if (!rc && c->c.opt == FK_OPT_ADAM) {
        if ((rc = put_vec(out, "optW_m", c->WM, c->optW.m, err)) ||
            (rc = put_vec(out, "optW_v", c->WM, c->optW.v, err)) ||
            (rc = put_vec(out, "optC_m", c->PC, c->optC.m, err)))
            return rc;
        rc = put_vec(out, "optC_v", c->PC, c->optC.v, err);
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

static int cli_load(void *p, const fk_bundle *in, fk_err *err)
{
    client *c = p;
    const fk_tensor *meta = want_len(in, "meta", 5, err), *par, *rs, *t, *perm;
    if (!meta)
        return FK_EFORMAT;
    if (meta->data[0] != (double)c->D || meta->data[1] != c->c.m || meta->data[2] != (double)c->PC)
        return fk_err_set(err, FK_EINVAL, "fedrf-tca: client checkpoint is for another shape "
                          "(N, m or classifier differ)");
    if (!(par = want_len(in, "par", c->WM + c->PC, err)) || !(rs = want_len(in, "rng", 10, err)) ||
        !(t = want_len(in, "opt_t", 2, err)) || !(perm = want_len(in, "perm", c->X.rows, err)))
        return FK_EFORMAT;
    for (size_t i = 0; i < c->X.rows; i++) {
        double v = perm->data[i];
        if (!(v >= 0 && v < (double)c->X.rows))
            return fk_err_set(err, FK_EFORMAT, "fedrf-tca: client checkpoint has a bad sample index");
        c->perm[i] = (int)v;
    }
    if (c->c.opt == FK_OPT_ADAM) {
        const fk_tensor *a = want_len(in, "optW_m", c->WM, err), *b = want_len(in, "optW_v", c->WM, err);
        const fk_tensor *e = want_len(in, "optC_m", c->PC, err), *f = want_len(in, "optC_v", c->PC, err);
        if (!a || !b || !e || !f)
            return FK_EFORMAT;
        memcpy(c->optW.m, a->data, c->WM * sizeof(double));
        memcpy(c->optW.v, b->data, c->WM * sizeof(double));
        memcpy(c->optC.m, e->data, c->PC * sizeof(double));
        memcpy(c->optC.v, f->data, c->PC * sizeof(double));
    }
    memcpy(c->par, par->data, (c->WM + c->PC) * sizeof(double));
    rng_unpack(&c->rng, rs->data);
    c->optW.t = t->data[0];
    c->optC.t = t->data[1];
    c->evals = meta->data[3];
    c->loss = meta->data[4];
    /* the current mini-batch is perm[0..b): rebuilt, not stored (absent in older checkpoints) */
    c->batched = 0;
    if (scalar(in, "batched", 0) != 0)
        return load_batch(c, err);
    return FK_OK;
}

const fk_method fk_method_fedrf_tca = {
    .name = "fedrf-tca",
    .summary = "federated domain adaptation with random-feature TCA (Feng et al.)",
    .server_init = server_init,
    .server_close = server_close,
    .plan = srv_plan,
    .task = srv_task,
    .aggregate = srv_aggregate,
    .model = srv_model,
    .save = srv_save,
    .load = srv_load,
    .client_init = client_init,
    .client_close = client_close,
    .local_step = cli_step,
    .evaluate = cli_evaluate,
    .client_save = cli_save,
    .client_load = cli_load,
};
