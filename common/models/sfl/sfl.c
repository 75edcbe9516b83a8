/* Dual ascent on an atom set (spec §3.6 Algorithm SFL-DA, §3.9 stopping and iterate
 * selection, §4.3 critical rows, §5.8 resilient closed form). */
#include <assert.h>
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/la/rng.h"
#include "common/models/sfl/sfl.h"
#include "common/models/sfl/sfl_int.h"

enum { KEEP_EVERY = 20, CHECK_EVERY = 50, POWER_ITERS = 50, MAX_CKPT = 48 };

void fk_sfl_opts_default(fk_sfl_opts *o, int mode)
{
    memset(o, 0, sizeof *o);
    o->mode = mode;
    o->eps = mode == FK_SFL_CLASSIFY ? 0.5 : 1e-3;
    o->c = 100;
    o->momentum = 1;
    o->T = 20000;
    o->tau_feas = 1e-4;
    o->tau_gap = 1e-4;
    o->tau_crit = 1e-8;
    o->tau_act = 1e-2;
    o->seed = 1;
    o->mc_batch = 256;
}

const char *fk_sfl_status_name(int status)
{
    return status == FK_SFL_CONVERGED    ? "converged"
           : status == FK_SFL_INFEASIBLE ? "infeasible"
                                         : "maxiter";
}

/* Solver workspace: the cached kernel matrix and the per-iteration vectors. */
typedef struct ws {
    const fk_sfl_opts *o;
    size_t N, J;
    const double *y, *v;
    double *K;                 /* N x J (the FISTA phases), NULL: rows from `rows` */
    fk__sfl_rows *rows;        /* kernel rows on demand (coordinate ascent, evaluations) */
    int det;                   /* 1: a gamma > 0 phase follows; thread-count independent sums */
    double *wv;                /* row weights: y/N (classify) or 1 (regress) */
    double *t, *abar, *alpha, *va, *f;
    double scale, kappa, Np, gamma, L, eta, box;
    /* 1: the working set ended on eval() of the returned lambda; abar, alpha, f and these are
     * its (the solve's closing evaluation is not repeated) */
    int fresh;
    double fresh_P, fresh_g, fresh_viol;
    size_t fresh_sup;
} ws;

static int hard(const ws *s)
{
    return s->o->mode == FK_SFL_REGRESS || s->o->res == FK_SFL_HARD;
}

double fk_sfl_slack(const fk_sfl_opts *o, size_t N, double lam, double loss)
{
    if (o->mode != FK_SFL_CLASSIFY)
        return 0;
    double kappa = 1.0 / (o->n_ref > 0 ? o->n_ref : (double)N), Np = (double)N;
    switch (o->res) {
    case FK_SFL_QUAD: return lam / (kappa * o->c * Np);
    case FK_SFL_HUBER: return lam / (kappa * Np);
    case FK_SFL_LINEAR: return loss > 0 ? loss : 0;
    default: return 0;
    }
}

size_t fk_sfl_threshold(const double *abar, const double *v, size_t J, double gamma,
                        double *alpha, double *va)
{
    size_t sup = 0;
    double thr = 2.0 * gamma;
    for (size_t j = 0; j < J; j++) {
        double a = abar[j];
        int on = a * a > thr;
        alpha[j] = on ? a : 0.0;
        if (va)
            va[j] = on ? v[j] * a : 0.0;
        sup += (size_t)on;
    }
    return sup;
}

static double dot(const double *a, const double *b, size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += a[j] * b[j];
        s1 += a[j + 1] * b[j + 1];
        s2 += a[j + 2] * b[j + 2];
        s3 += a[j + 3] * b[j + 3];
    }
    for (; j < n; j++)
        s0 += a[j] * b[j];
    return (s0 + s1) + (s2 + s3);
}

static double dot3(const double *a, const double *b, const double *c, size_t n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t j = 0;
    for (; j + 4 <= n; j += 4) {
        s0 += a[j] * b[j] * c[j];
        s1 += a[j + 1] * b[j + 1] * c[j + 1];
        s2 += a[j + 2] * b[j + 2] * c[j + 2];
        s3 += a[j + 3] * b[j + 3] * c[j + 3];
    }
    for (; j < n; j++)
        s0 += a[j] * b[j] * c[j];
    return (s0 + s1) + (s2 + s3);
}

static void axpy(double t, const double *x, double *y, size_t n)
{
    for (size_t j = 0; j < n; j++)
        y[j] += t * x[j];
}

/* coeffs without the N x J matrix: abar sums the rows of the non-zero duals only (few), f is
 * one pass over the rows. */
static size_t coeffs_rows(ws *s, const double *lam)
{
    size_t N = s->N, J = s->J;
    memset(s->abar, 0, J * sizeof *s->abar);
    for (size_t n = 0; n < N; n++) {
        s->t[n] = lam[n] * s->wv[n];
        if (s->t[n] != 0.0)
            axpy(s->t[n], fk__sfl_row(s->rows, n), s->abar, J);
    }
    size_t sup = fk_sfl_threshold(s->abar, s->v, J, s->gamma, s->alpha, s->va);
    for (size_t n = 0; n < N; n++)
        s->f[n] = dot(fk__sfl_row(s->rows, n), s->va, J);
    return sup;
}

/* abar = K^T (lam .* wv), alpha = threshold(abar), f = K (v .* alpha): the iteration's two
 * products and its one threshold (2.15)/(3.4). Returns the support size. */
static size_t coeffs(ws *s, const double *lam)
{
    if (!s->K)
        return coeffs_rows(s, lam);
    size_t N = s->N, J = s->J, sup = 0;
    for (size_t n = 0; n < N; n++)
        s->t[n] = lam[n] * s->wv[n];
    cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, s->K, (int)J, s->t, 1, 0.0,
                s->abar, 1);
    sup = fk_sfl_threshold(s->abar, s->v, J, s->gamma, s->alpha, s->va);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, s->K, (int)J, s->va, 1, 0.0,
                s->f, 1);
    return sup;
}

static double slack_cost(const ws *s, double u)
{
    switch (s->o->res) {
    case FK_SFL_QUAD: return 0.5 * s->o->c * u * u;
    case FK_SFL_HUBER: return u <= s->o->c ? 0.5 * u * u : s->o->c * (u - 0.5 * s->o->c);
    case FK_SFL_LINEAR: return s->o->c * u;
    default: return 0;
    }
}

typedef struct evalr {
    double P, g, viol;
    size_t sup;
    uint64_t sig; /* support signature, to see it change */
} evalr;

/* Primal candidate alpha_d(lam), its objective and violation, and the dual value g(lam). */
static evalr eval(ws *s, const double *lam)
{
    evalr e = {0};
    e.sup = coeffs(s, lam);
    size_t N = s->N, J = s->J;
    double pos = 0, Pa = 0;
    for (size_t j = 0; j < J; j++) {
        double a = s->abar[j], h = 0.5 * a * a - s->gamma;
        if (h > 0)
            pos += s->v[j] * h;
        if (s->alpha[j] != 0.0) {
            Pa += s->v[j] * (0.5 * a * a + s->gamma);
            e.sig = e.sig * 1099511628211ULL + (uint64_t)j + 1;
        }
    }
    const fk_sfl_opts *o = s->o;
    if (o->mode == FK_SFL_REGRESS) {
        double se = sqrt(o->eps), lin = 0;
        for (size_t n = 0; n < N; n++) {
            lin += lam[n] * s->y[n] - se * fabs(lam[n]);
            double r = fabs(s->f[n] - s->y[n]) - se;
            if (r > e.viol)
                e.viol = r;
        }
        e.g = lin - pos;
        e.P = Pa;
        return e;
    }
    double lin = 0, ridge = 0, Ps = 0;
    for (size_t n = 0; n < N; n++) {
        lin += lam[n] * (1.0 - o->eps);
        ridge += lam[n] * lam[n];
        double l = 1.0 - o->eps - s->y[n] * s->f[n];
        if (hard(s)) {
            if (l > e.viol)
                e.viol = l;
        } else if (l > 0) {
            Ps += s->kappa * slack_cost(s, l);
        }
    }
    double rt = o->res == FK_SFL_QUAD    ? 1.0 / (2.0 * s->kappa * o->c * s->Np * s->Np)
                : o->res == FK_SFL_HUBER ? 1.0 / (2.0 * s->kappa * s->Np * s->Np)
                                         : 0.0;
    e.g = lin / s->Np - pos - rt * ridge;
    e.P = Pa + Ps;
    return e;
}

/* Classification: N_p times the dual gradient (3.28) of row n at multiplier lh with the fit
 * already in s->f, l_n - u_n(lh) (the resilient slack of §5.8; 0 when hard or linear). */
static double gnum(const ws *s, size_t n, double lh)
{
    const fk_sfl_opts *o = s->o;
    double l = 1.0 - o->eps - s->y[n] * s->f[n];
    double u = o->res == FK_SFL_QUAD || o->res == FK_SFL_HUBER ? fk_sfl_slack(o, s->N, lh, l) : 0.0;
    return l - u;
}

/* One ascent step from lhat with the fit f = f(lhat) already in s->f. */
static void step(ws *s, const double *lhat, double *lam)
{
    const fk_sfl_opts *o = s->o;
    size_t N = s->N;
    if (o->mode == FK_SFL_REGRESS) { /* reduced dual: proximal step, soft threshold */
        double tau = s->eta * sqrt(o->eps);
        for (size_t n = 0; n < N; n++) {
            double z = lhat[n] + s->eta * (s->y[n] - s->f[n]);
            lam[n] = z > tau ? z - tau : z < -tau ? z + tau : 0.0;
        }
        return;
    }
    for (size_t n = 0; n < N; n++) {
        double z = lhat[n] + s->eta / s->Np * gnum(s, n, lhat[n]);
        z = z > 0 ? z : 0.0;
        lam[n] = z > s->box ? s->box : z;
    }
}

/* L = top eigenvalue of the un-thresholded operator lam -> wv .* K diag(v) K^T (wv .* lam),
 * 50 power iterations from a seeded random start; the resilient ridge adds its curvature. */
static double step_constant(ws *s)
{
    size_t N = s->N, J = s->J;
    double *x = s->f, *z = s->t;
    fk_rng rng;
    fk_rng_init(&rng, s->o->seed, 0x73666c4cULL);
    for (size_t n = 0; n < N; n++)
        x[n] = fk_rng_normal(&rng);
    double L = 0;
    for (int it = 0; it < POWER_ITERS; it++) {
        double nx = cblas_dnrm2((int)N, x, 1);
        if (!(nx > 0))
            break;
        for (size_t n = 0; n < N; n++)
            z[n] = x[n] / nx * s->wv[n];
        cblas_dgemv(CblasRowMajor, CblasTrans, (int)N, (int)J, 1.0, s->K, (int)J, z, 1, 0.0,
                    s->abar, 1);
        for (size_t j = 0; j < J; j++)
            s->abar[j] *= s->v[j];
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (int)N, (int)J, 1.0, s->K, (int)J, s->abar, 1,
                    0.0, x, 1);
        for (size_t n = 0; n < N; n++)
            x[n] *= s->wv[n];
        L = cblas_dnrm2((int)N, x, 1);
    }
    /* power iteration approaches L from below; 2 % headroom keeps the step stable */
    L *= 1.02;
    const fk_sfl_opts *o = s->o;
    if (o->mode == FK_SFL_CLASSIFY && o->res == FK_SFL_QUAD)
        L += 1.0 / (s->kappa * o->c * s->Np * s->Np);
    else if (o->mode == FK_SFL_CLASSIFY && o->res == FK_SFL_HUBER)
        L += 1.0 / (s->kappa * s->Np * s->Np);
    return L > 0 ? L : 1.0;
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fabs(x[i]) > m ? fabs(x[i]) : m;
    return m;
}

static double rel_change(const double *a, const double *b, size_t n)
{
    double d = 0, s = 0;
    for (size_t i = 0; i < n; i++) {
        d += (a[i] - b[i]) * (a[i] - b[i]);
        s += a[i] * a[i];
    }
    return s > 0 ? sqrt(d / s) : (d > 0 ? INFINITY : 0);
}

typedef struct phase_out {
    int status;
    long iters;
    int kept;
    double best_dual;
} phase_out;

/* One pass of the iteration at s->gamma from lam (updated in place to the returned
 * iterate); kbuf holds 3 buffers (lam N, alpha J, f N) for the kept iterate. */
static phase_out run_phase(ws *s, double *lam, double *prev, double *lhat, double *snap,
                           double *klam, double *kalpha, double *kf)
{
    const fk_sfl_opts *o = s->o;
    size_t N = s->N, J = s->J;
    phase_out r = {FK_SFL_MAXITER, 0, 0, -INFINITY};
    double theta = 1.0, bestP = INFINITY, ckpt[MAX_CKPT];
    long best_at = 0, sig_at = 0;
    uint64_t last_sig = 0;
    int n_ckpt = 0, grow = 0, has_snap = 0;
    memcpy(prev, lam, N * sizeof *lam);
    for (long t = 1; t <= o->T; t++) {
        /* FISTA extrapolation (spec step 7); plain ascent when momentum is off */
        double beta = 0;
        if (o->momentum) {
            double th1 = 0.5 * (1.0 + sqrt(1.0 + 4.0 * theta * theta));
            beta = (theta - 1.0) / th1;
            theta = th1;
        }
        for (size_t n = 0; n < N; n++)
            lhat[n] = lam[n] + beta * (lam[n] - prev[n]);
        coeffs(s, lhat);
        memcpy(prev, lam, N * sizeof *lam);
        step(s, lhat, lam);
        r.iters = t;
        int keep_now = s->gamma > 0 && t % KEEP_EVERY == 0, check_now = t % CHECK_EVERY == 0;
        if (!keep_now && !check_now)
            continue;
        evalr e = eval(s, lam);
        if (e.g > r.best_dual)
            r.best_dual = e.g;
        /* keep the best feasible primal candidate (§3.9 iterate selection) */
        if (keep_now && e.viol <= 0.05 * s->scale && e.P < bestP) {
            bestP = e.P;
            best_at = t;
            r.kept = 1;
            memcpy(klam, lam, N * sizeof *lam);
            memcpy(kalpha, s->alpha, J * sizeof *kalpha);
            memcpy(kf, s->f, N * sizeof *kf);
        }
        if (!check_now)
            continue;
        double lmax = max_abs(lam, N);
        if (hard(s) && !(lmax <= 1e12)) { /* backstop: the multipliers ran away */
            r.status = FK_SFL_INFEASIBLE;
            break;
        }
        if (hard(s) && t % 1000 == 0 && ((t / 1000) & (t / 1000 - 1)) == 0 &&
            n_ckpt < MAX_CKPT) { /* t = 1000 * 2^k: does ||lam||_inf keep doubling? */
            ckpt[n_ckpt++] = lmax;
            if (n_ckpt >= 2) {
                int g = ckpt[n_ckpt - 1] >= 1.8 * ckpt[n_ckpt - 2] &&
                        e.viol > 10 * o->tau_feas * s->scale;
                grow = g ? grow + 1 : 0;
                if (grow >= 3) {
                    r.status = FK_SFL_INFEASIBLE;
                    break;
                }
            }
        }
        if (s->gamma <= 0) { /* stopping rule 1, convex case: feasible and zero gap */
            if (e.viol <= o->tau_feas * s->scale &&
                fabs(e.P - e.g) / fmax(1.0, fabs(e.P)) <= o->tau_gap) {
                r.status = FK_SFL_CONVERGED;
                break;
            }
            continue;
        }
        /* gamma > 0: support steady for 500 iterations and lambda settled, or the kept
         * iterate has not improved for 2000 iterations */
        if (e.sig != last_sig || e.sup == 0) {
            last_sig = e.sig;
            sig_at = t;
        }
        if (t % 500 == 0) {
            if (has_snap && t - sig_at >= 500 && rel_change(lam, snap, N) <= 1e-5) {
                r.status = FK_SFL_CONVERGED;
                break;
            }
            memcpy(snap, lam, N * sizeof *lam);
            has_snap = 1;
        }
        if (r.kept && t - best_at >= 2000) {
            r.status = FK_SFL_CONVERGED;
            break;
        }
    }
    return r;
}

enum { WS_MAX = 1200, WS_STEPS = 200, WS_FIRST = 64 };

/* Cholesky solve of the n x n row-major SPD M (lower part) in place, b overwritten: plain loops
 * whose sums do not depend on the BLAS thread count. Non-zero when M is not positive definite. */
static int chol_solve(double *M, size_t n, double *b)
{
    for (size_t j = 0; j < n; j++) {
        double d = M[j * n + j] - dot(M + j * n, M + j * n, j);
        if (!(d > 0))
            return 1;
        d = sqrt(d);
        M[j * n + j] = d;
        for (size_t i = j + 1; i < n; i++)
            M[i * n + j] = (M[i * n + j] - dot(M + i * n, M + j * n, j)) / d;
    }
    for (size_t i = 0; i < n; i++)
        b[i] = (b[i] - dot(M + i * n, b, i)) / M[i * n + i];
    for (size_t i = n; i-- > 0;) {
        double t = b[i];
        for (size_t k = i + 1; k < n; k++)
            t -= M[k * n + i] * b[k];
        b[i] = t / M[i * n + i];
    }
    return 0;
}

/* The resilient ridge of the classification dual, rt ||lambda||^2 (0: regression, hard or
 * linear cost). */
static double ridge(const ws *s)
{
    const fk_sfl_opts *o = s->o;
    if (o->mode == FK_SFL_REGRESS)
        return 0.0;
    return o->res == FK_SFL_QUAD    ? 1.0 / (2.0 * s->kappa * o->c * s->Np * s->Np)
           : o->res == FK_SFL_HUBER ? 1.0 / (2.0 * s->kappa * s->Np * s->Np)
                                    : 0.0;
}

/* A working set of rows W with its Gram block, grown in place: rows that join later cost only
 * their own products with W (issue 36). */
typedef struct wset {
    size_t n, cap, max;
    int *idx;          /* cap: the rows of W */
    double *B;         /* cap x J: B_i = wv_i sqrt(v) .* K_i */
    double *H;         /* cap x cap (leading dimension cap): B B' + 2 rt I, both triangles */
    double *sv;        /* J: sqrt(v) */
    unsigned char *in; /* N: 1 when the row is in W */
} wset;

static void wset_close(wset *w)
{
    free(w->idx);
    free(w->B);
    free(w->H);
    free(w->sv);
    free(w->in);
    memset(w, 0, sizeof *w);
}

/* An empty working set for N rows. Its size is capped at WS_MAX rows and at 256 MB of scaled
 * kernel rows. */
FK_CHECKRETURN static int wset_init(const ws *s, wset *w, fk_err *err)
{
    memset(w, 0, sizeof *w);
    w->in = calloc(s->N, 1);
    w->sv = malloc(s->J * sizeof *w->sv);
    for (size_t j = 0; w->sv && j < s->J; j++)
        w->sv[j] = sqrt(s->v[j]);
    if (!w->in || !w->sv) {
        wset_close(w);
        return fk_err_set(err, FK_ENOMEM,
                          "sfl solve: out of memory for the working set of %zu rows", s->N);
    }
    size_t by_mem = ((size_t)256 << 20) / (s->J * sizeof(double));
    w->max = by_mem < WS_MAX ? (by_mem < 2 ? 2 : by_mem) : WS_MAX;
    return FK_OK;
}

/* Rows add[0..k) (not in W, n + k <= max) join W: their scaled kernel rows, then their Gram
 * rows against all of W (BLAS, or plain dot products when a gamma > 0 phase follows so the
 * sums do not depend on the BLAS thread count). */
FK_CHECKRETURN static int wset_add(ws *s, wset *w, const int *add, size_t k, double rt, fk_err *err)
{
    size_t J = s->J, n0 = w->n, n1 = n0 + k;
    assert(n1 <= w->max);
    if (n1 > w->cap) {
        size_t cap = 2 * w->cap > n1 ? 2 * w->cap : n1;
        cap = cap < w->max ? cap : w->max;
        int *ni = realloc(w->idx, cap * sizeof *ni);
        if (ni)
            w->idx = ni;
        double *nB = ni ? realloc(w->B, cap * J * sizeof *nB) : NULL;
        if (nB)
            w->B = nB;
        double *nH = nB ? malloc(cap * cap * sizeof *nH) : NULL;
        if (!nH)
            return fk_err_set(err, FK_ENOMEM,
                              "sfl solve: out of memory for a working set of %zu rows x %zu "
                              "atoms",
                              cap, J);
        for (size_t i = 0; i < n0; i++)
            memcpy(nH + i * cap, w->H + i * w->cap, n0 * sizeof *nH);
        free(w->H);
        w->H = nH;
        w->cap = cap;
    }
    size_t cap = w->cap;
    for (size_t i = 0; i < k; i++) {
        size_t n = (size_t)add[i];
        const double *kr = fk__sfl_row(s->rows, n);
        double *b = w->B + (n0 + i) * J;
        for (size_t j = 0; j < J; j++)
            b[j] = kr[j] * s->wv[n] * w->sv[j];
        w->idx[n0 + i] = (int)n;
        w->in[n] = 1;
    }
    double *H = w->H, *B = w->B;
    if (s->det) {
        for (size_t i = n0; i < n1; i++)
            for (size_t c = 0; c <= i; c++)
                H[i * cap + c] = dot(B + i * J, B + c * J, J);
    } else {
        if (n0 > 0)
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)k, (int)n0, (int)J, 1.0,
                        B + n0 * J, (int)J, B, (int)J, 0.0, H + n0 * cap, (int)cap);
        cblas_dsyrk(CblasRowMajor, CblasLower, CblasNoTrans, (int)k, (int)J, 1.0, B + n0 * J,
                    (int)J, 0.0, H + n0 * cap + n0, (int)cap);
    }
    for (size_t i = n0; i < n1; i++) {
        H[i * cap + i] += 2.0 * rt;
        for (size_t c = 0; c < i; c++)
            H[c * cap + i] = H[i * cap + c];
    }
    w->n = n1;
    return FK_OK;
}

/* The dual restricted to W (the other rows at 0) is the box QP max c'l - l'Hl/2, 0 <= l <= box,
 * c_i = (1 - eps)/N; solved exactly by block principal pivoting (Judice and Pires 1994) with
 * Murty's single pivot as the backup against cycling, from lam's values on W (Cholesky on the
 * free rows). *ok = 0 when it did not finish (lam unchanged). */
FK_CHECKRETURN static int wset_bpp(ws *s, const wset *w, double *lam, int *ok, fk_err *err)
{
    size_t nW = w->n, cap = w->cap;
    *ok = 0;
    double *M = malloc((nW * nW + 1) * sizeof *M), *l = malloc((5 * nW + 1) * sizeof *l);
    int *fr = malloc((nW + 1) * sizeof *fr);
    if (!M || !l || !fr) {
        free(M);
        free(l);
        free(fr);
        return fk_err_set(err, FK_ENOMEM, "sfl solve: out of memory for the working set");
    }
    const double *H = w->H;
    double *x = l + nW, *g = l + 2 * nW, *rhs = l + 3 * nW, *hl = l + 4 * nW;
    double c0 = (1.0 - s->o->eps) / s->Np, box = s->box, gtol = 1e-12 * c0;
    /* fr 0 = at 0, 1 = free, 2 = at the box */
    for (size_t i = 0; i < nW; i++) {
        l[i] = lam[w->idx[i]];
        fr[i] = l[i] <= 0 ? 0 : l[i] >= box ? 2 : 1;
    }
    size_t best = nW + 1;
    int backup = 3;
    for (int it = 0; it < WS_STEPS; it++) {
        size_t nf = 0, a = 0;
        for (size_t i = 0; i < nW; i++)
            nf += fr[i] == 1;
        for (size_t i = 0; i < nW; i++) {
            if (fr[i] != 1)
                continue;
            double r = c0;
            size_t b = 0;
            for (size_t k = 0; k < nW; k++) {
                if (fr[k] == 2)
                    r -= H[i * cap + k] * box;
                else if (fr[k] == 1)
                    M[a * nf + b++] = H[i * cap + k];
            }
            rhs[a++] = r;
        }
        if (nf > 0 && (s->det ? chol_solve(M, nf, rhs)
                              : LAPACKE_dposv(LAPACK_ROW_MAJOR, 'L', (lapack_int)nf, 1, M,
                                              (lapack_int)nf, rhs, 1)) != 0)
            break;
        a = 0;
        for (size_t i = 0; i < nW; i++)
            x[i] = fr[i] == 1 ? rhs[a++] : fr[i] == 2 ? box : 0.0;
        for (size_t i = 0; i < nW; i++) /* H x, the same sums at any BLAS thread count */
            hl[i] = dot(H + i * cap, x, nW);
        size_t ninf = 0, last = nW;
        for (size_t i = 0; i < nW; i++) {
            g[i] = c0 - hl[i];
            int bad = fr[i] == 1 ? x[i] < 0 || x[i] > box
                      : fr[i] == 0 ? g[i] > gtol
                                   : g[i] < -gtol;
            if (bad) {
                ninf++;
                last = i;
            }
        }
        if (ninf == 0) {
            memcpy(l, x, nW * sizeof *l);
            *ok = 1;
            break;
        }
        int all = 1;
        if (ninf < best) {
            best = ninf;
            backup = 3;
        } else if (backup > 0) {
            backup--;
        } else {
            all = 0;
        }
        for (size_t i = 0; i < nW; i++) {
            if (!all && i != last)
                continue;
            if (fr[i] == 1 && x[i] < 0)
                fr[i] = 0;
            else if (fr[i] == 1 && x[i] > box)
                fr[i] = 2;
            else if (fr[i] != 1 && (fr[i] == 0 ? g[i] > gtol : g[i] < -gtol))
                fr[i] = 1;
        }
    }
    if (*ok)
        for (size_t i = 0; i < nW; i++)
            lam[w->idx[i]] = l[i];
    free(M);
    free(l);
    free(fr);
    return FK_OK;
}

/* Working-set solve inside the coordinate ascent (classification with the resilient ridge):
 * the QP on the rows W (the others fixed at 0) solved exactly from the coordinate ascent's
 * iterate. *ok = 0 when it did not finish (the caller keeps the coordinate ascent). */
FK_CHECKRETURN static int ws_solve(ws *s, double *lam, const int *W, size_t nW, double rt, int *ok,
                                   fk_err *err)
{
    wset w;
    *ok = 0;
    int rc = wset_init(s, &w, err);
    if (!rc && nW <= w.max && !(rc = wset_add(s, &w, W, nW, rt, err)))
        rc = wset_bpp(s, &w, lam, ok, err);
    wset_close(&w);
    return rc;
}

static int by_gain(const void *a, const void *b)
{
    const double *x = a, *y = b; /* (gradient, row) pairs: largest gradient, then lowest row */
    return x[0] > y[0] ? -1 : x[0] < y[0] ? 1 : x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Classification with the resilient ridge (rt > 0) at gamma = 0 by a growing working set
 * (issue 36; the chunking of SVM solvers): the QP on W (the other rows at 0) is solved exactly
 * (wset_bpp), every row is evaluated (one pass over the kernel rows: abar from W's rows, f for
 * all), and the stopping rule of the coordinate ascent applies; otherwise the rows outside W
 * whose gradient (1 - eps - y_n f_n)/N exceeds tol join W, the most violating first and at most
 * max(WS_FIRST, |W|/2) at a time (tol falls tenfold when none does). The Gram block is kept,
 * so a row's products with W are computed once. W starts from the warm start's non-zero duals
 * (the WS_FIRST * 4 largest) or WS_FIRST rows drawn from fk_rng(seed); the other duals are set
 * to 0. Few non-zero duals at the optimum (157 of 1557 rows on pen-digits 1 vs 7) keep W and its
 * Gram block small where the coordinate ascent's first epochs left 607 rows non-zero. A pass
 * counts as one iteration. *fallback = 1 when W would outgrow its cap or the QP did not finish:
 * the caller continues with the coordinate ascent from lam. */
FK_CHECKRETURN static int run_ws(ws *s, double *lam, phase_out *out, int *fallback, fk_err *err)
{
    const fk_sfl_opts *o = s->o;
    size_t N = s->N;
    phase_out r = {FK_SFL_MAXITER, 0, 0, -INFINITY};
    *fallback = 0;
    double rt = ridge(s), unit = s->scale / s->Np, tol = 0.1 * unit, floor_tol = 1e-15 * unit;
    wset w;
    int rc = wset_init(s, &w, err);
    if (rc)
        return rc;
    int *add = malloc(N * sizeof *add);
    double *gv = malloc(2 * N * sizeof *gv);
    if (!add || !gv) {
        free(add);
        free(gv);
        wset_close(&w);
        return fk_err_set(err, FK_ENOMEM, "sfl solve: out of memory for %zu rows", N);
    }
    size_t k = 0, first = WS_FIRST < w.max ? WS_FIRST : w.max;
    for (size_t n = 0; n < N; n++) /* the warm start's non-zero duals, largest first */
        if (lam[n] > 0) {
            gv[2 * k] = lam[n];
            gv[2 * k + 1] = (double)n;
            k++;
        }
    memset(lam, 0, N * sizeof *lam);
    if (k) {
        qsort(gv, k, 2 * sizeof *gv, by_gain);
        k = k < 4 * first ? k : 4 * first;
        for (size_t i = 0; i < k; i++) {
            add[i] = (int)gv[2 * i + 1];
            lam[add[i]] = gv[2 * i];
        }
    } else { /* a seeded sample of the rows */
        fk_rng rng;
        fk_rng_init(&rng, o->seed, 0x77735f31ULL);
        for (size_t n = 0; n < N; n++)
            add[n] = (int)n;
        fk_rng_shuffle(&rng, add, N);
        k = N < first ? N : first;
    }
    for (long t = 1; t <= o->T; t++) {
        r.iters = t;
        int ok = 0;
        if ((rc = wset_add(s, &w, add, k, rt, err)) || (rc = wset_bpp(s, &w, lam, &ok, err)))
            break;
        if (!ok) {
            *fallback = 1;
            break;
        }
        evalr e = eval(s, lam); /* every row, abar afresh */
        if (e.g > r.best_dual)
            r.best_dual = e.g;
        if (e.viol <= o->tau_feas * s->scale &&
            fabs(e.P - e.g) / fmax(1.0, fabs(e.P)) <= o->tau_gap) {
            r.status = FK_SFL_CONVERGED;
            s->fresh = 1;
            s->fresh_P = e.P;
            s->fresh_g = e.g;
            s->fresh_viol = e.viol;
            s->fresh_sup = e.sup;
            break;
        }
        for (k = 0; k == 0;) { /* the violators outside W */
            for (size_t n = 0; n < N; n++) {
                double gr = ((1.0 - o->eps) - s->y[n] * s->f[n]) / s->Np;
                if (!w.in[n] && gr > tol) {
                    gv[2 * k] = gr;
                    gv[2 * k + 1] = (double)n;
                    k++;
                }
            }
            if (k || tol <= floor_tol)
                break;
            tol = fmax(0.1 * tol, floor_tol);
        }
        size_t q = w.n / 2 > first ? w.n / 2 : first;
        qsort(gv, k, 2 * sizeof *gv, by_gain);
        k = k < q ? k : q;
        if (k == 0 || w.n + k > w.max) {
            *fallback = 1;
            break;
        }
        for (size_t i = 0; i < k; i++)
            add[i] = (int)gv[2 * i + 1];
    }
    free(add);
    free(gv);
    wset_close(&w);
    *out = r;
    return rc;
}

/* The gamma = 0 problems by dual coordinate ascent (issue 36): at gamma = 0 the dual is a
 * concave quadratic in lambda (plus the |lambda| term of the regression's reduced dual) over a
 * box, so one row's multiplier has a closed-form maximiser given the others: with abar =
 * K^T (lam .* wv) kept up to date, row n costs one kernel row (computed on demand), one dot
 * product (f_n) and one axpy (abar). Epochs visit the rows in a seeded random order; rows at a
 * bound whose gradient points out of the box by more than the last epoch's largest violation
 * are shrunk out (LIBLINEAR's rule, Hsieh et al. 2008), so later epochs touch the rows that can
 * still move: few non-zero duals make them cheap. When the active rows' largest projected
 * gradient falls below tol, every row is evaluated exactly (fresh abar and f) and the stopping
 * rule of the FISTA phase applies unchanged (violation <= tau_feas scale and relative gap <=
 * tau_gap); otherwise the shrunk rows come back and tol falls tenfold. The infeasibility rule
 * is the FISTA phase's with epochs for iterations. An epoch counts as one iteration. */
FK_CHECKRETURN static int run_cd(ws *s, double *lam, phase_out *out, fk_err *err)
{
    const fk_sfl_opts *o = s->o;
    size_t N = s->N, J = s->J;
    phase_out r = {FK_SFL_MAXITER, 0, 0, -INFINITY};
    int *idx = malloc(N * sizeof *idx);
    double *qd = malloc(N * sizeof *qd);
    if (!idx || !qd) {
        free(idx);
        free(qd);
        return fk_err_set(err, FK_ENOMEM, "sfl solve: out of memory");
    }
    int reg = o->mode == FK_SFL_REGRESS;
    double rt = ridge(s);
    double se = reg ? sqrt(o->eps) : 0.0, unit = reg ? s->scale : s->scale / s->Np;
    const double *v = s->v, *y = s->y, *wv = s->wv;
    double *abar = s->abar;
    memset(abar, 0, J * sizeof *abar);
    for (size_t n = 0; n < N; n++) {
        idx[n] = (int)n;
        qd[n] = -1.0;
        if (lam[n] != 0.0)
            axpy(lam[n] * wv[n], fk__sfl_row(s->rows, n), abar, J);
    }
    fk_rng rng;
    fk_rng_init(&rng, o->seed, 0x63645f31ULL);
    double tol = 0.1 * unit, shrink = INFINITY, ckpt[MAX_CKPT];
    int n_ckpt = 0, grow = 0, try_ws = 1, rc = FK_OK;
    size_t A = N;
    for (long t = 1; t <= o->T; t++) {
        r.iters = t;
        fk_rng_shuffle(&rng, idx, A);
        double vmax = 0;
        for (size_t i = 0; i < A;) {
            size_t n = (size_t)idx[i];
            const double *k = fk__sfl_row(s->rows, n);
            if (qd[n] < 0) {
                double q = dot3(k, k, v, J);
                qd[n] = reg ? q : q * wv[n] * wv[n] + 2.0 * rt;
            }
            double fn = dot3(k, v, abar, J), ln = lam[n], nl = ln, pg;
            int off = 0;
            if (reg) {
                double rr = y[n] - fn;
                if (ln > 0)
                    pg = rr - se;
                else if (ln < 0)
                    pg = rr + se;
                else {
                    pg = fabs(rr) > se ? fabs(rr) - se : 0.0;
                    off = fabs(rr) - se < -shrink;
                }
                if (qd[n] > 0) {
                    double z = ln + rr / qd[n], th = se / qd[n];
                    nl = z > th ? z - th : z < -th ? z + th : 0.0;
                }
            } else {
                double gr = ((1.0 - o->eps) - y[n] * fn) / s->Np - 2.0 * rt * ln;
                if (ln <= 0) {
                    pg = gr > 0 ? gr : 0.0;
                    off = gr < -shrink;
                } else if (ln >= s->box) {
                    pg = gr < 0 ? gr : 0.0;
                    off = gr > shrink;
                } else {
                    pg = gr;
                }
                if (qd[n] > 0) {
                    nl = ln + gr / qd[n];
                    nl = nl > 0 ? (nl < s->box ? nl : s->box) : 0.0;
                }
            }
            if (off) { /* shrink: swap to the end of the active part */
                idx[i] = idx[--A];
                idx[A] = (int)n;
                continue;
            }
            vmax = fmax(vmax, fabs(pg));
            if (nl != ln) {
                axpy((nl - ln) * wv[n], k, abar, J);
                lam[n] = nl;
            }
            i++;
        }
        double lmax = max_abs(lam, N);
        if (hard(s) && !(lmax <= 1e12)) { /* backstop: the multipliers ran away */
            r.status = FK_SFL_INFEASIBLE;
            break;
        }
        int ck = hard(s) && t % 1000 == 0 && ((t / 1000) & (t / 1000 - 1)) == 0 &&
                 n_ckpt < MAX_CKPT;
        int wsd = 0;
        if (rt > 0 && try_ws && (t & (t - 1)) == 0 && t >= 2) { /* the working set of the non-zero duals */
            size_t nW = 0;
            for (size_t i = 0; i < A; i++)
                if (lam[idx[i]] > 0)
                    nW++;
            if (nW <= WS_MAX && nW > 0) {
                int *Wl = malloc(nW * sizeof *Wl), ok = 0;
                if (!Wl) {
                    rc = fk_err_set(err, FK_ENOMEM, "sfl solve: out of memory");
                    break;
                }
                nW = 0;
                for (size_t i = 0; i < A; i++)
                    if (lam[idx[i]] > 0)
                        Wl[nW++] = idx[i];
                rc = ws_solve(s, lam, Wl, nW, rt, &ok, err);
                free(Wl);
                if (rc)
                    break;
                try_ws = ok;
                wsd = ok;
            }
        }
        if (vmax > tol && !ck && !wsd) {
            shrink = vmax;
            continue;
        }
        evalr e = eval(s, lam); /* every row, abar afresh */
        if (e.g > r.best_dual)
            r.best_dual = e.g;
        if (ck) { /* t = 1000 * 2^k: does ||lam||_inf keep doubling? */
            ckpt[n_ckpt++] = lmax;
            if (n_ckpt >= 2) {
                int g = ckpt[n_ckpt - 1] >= 1.8 * ckpt[n_ckpt - 2] &&
                        e.viol > 10 * o->tau_feas * s->scale;
                grow = g ? grow + 1 : 0;
                if (grow >= 3) {
                    r.status = FK_SFL_INFEASIBLE;
                    break;
                }
            }
        }
        if (e.viol <= o->tau_feas * s->scale &&
            fabs(e.P - e.g) / fmax(1.0, fabs(e.P)) <= o->tau_gap) {
            r.status = FK_SFL_CONVERGED;
            break;
        }
        if (wsd) { /* the working set's optimum is not the whole problem's: every row back */
            A = N;
            shrink = INFINITY;
        } else if (vmax <= tol) {
            if (A == N)
                tol = fmax(0.1 * tol, 1e-15 * unit);
            A = N; /* the shrunk rows come back */
            shrink = INFINITY;
        }
    }
    free(idx);
    free(qd);
    *out = r;
    return rc;
}

static void worst_rows(const double *lam, size_t N, int *out, int *n_out)
{
    int n = 0;
    for (size_t i = 0; i < N; i++) { /* insertion into a sorted top-20 */
        double a = fabs(lam[i]);
        int k = n < 20 ? n++ : 20;
        if (k == 20 && a <= fabs(lam[out[19]]))
            continue;
        if (k == 20)
            k = 19;
        while (k > 0 && fabs(lam[out[k - 1]]) < a) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = (int)i;
    }
    *n_out = n;
}

FK_CHECKRETURN static int check_args(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                      const fk_sfl_opts *o, fk_err *err)
{
    if (N < 1 || p < 1 || !a || a->J < 1 || a->p != p)
        return fk_err_set(err, FK_EINVAL,
                          "sfl solve: need N >= 1 rows of p >= 1 features and a non-empty atom "
                          "set of the same dimension (got N = %zu, p = %d, atoms of p = %d)",
                          N, p, a ? a->p : -1);
    if (N > 2147483647u || a->J > 2147483647u)
        return fk_err_set(err, FK_ELIMIT, "sfl solve: %zu rows x %zu atoms is beyond the BLAS "
                                          "index range", N, a->J);
    if (o->mode != FK_SFL_REGRESS && o->mode != FK_SFL_CLASSIFY)
        return fk_err_set(err, FK_EINVAL, "sfl solve: unknown mode %d", o->mode);
    if (!(o->eps >= 0) || (o->mode == FK_SFL_CLASSIFY && !(o->eps < 1)) || !(o->gamma >= 0) ||
        !(o->gamma_rel >= 0 && o->gamma_rel < 1) || o->T < 1)
        return fk_err_set(err, FK_EINVAL,
                          "sfl solve: eps = %g (classification: [0, 1)), gamma = %g (>= 0), "
                          "gamma_rel = %g ([0, 1)), T = %ld (>= 1)",
                          o->eps, o->gamma, o->gamma_rel, o->T);
    if (o->mode == FK_SFL_CLASSIFY && o->res != FK_SFL_HARD && !(o->c > 0 && isfinite(o->c)))
        return fk_err_set(err, FK_EINVAL, "sfl solve: resilient cost parameter c = %g must be > 0",
                          o->c);
    if (o->solver != FK_SFL_SOLVER_REDUCED || o->mc_resample)
        return fk_err_set(err, FK_EINVAL, "sfl solve: Variant A and mc_resample are regression "
                                          "solvers (solver = variant_a, mode = regress)");
    for (size_t i = 0; i < N * (size_t)p; i++)
        if (!isfinite(X[i]))
            return fk_err_set(err, FK_EINVAL, "sfl solve: row %zu feature %zu is NaN or infinite",
                              i / (size_t)p, i % (size_t)p);
    for (size_t n = 0; n < N; n++)
        if (!isfinite(y[n]) || (o->mode == FK_SFL_CLASSIFY && y[n] != 1.0 && y[n] != -1.0))
            return fk_err_set(err, FK_EINVAL,
                              "sfl solve: target %zu is %g (classification needs labels +1/-1, "
                              "regression finite values)",
                              n, y[n]);
    return FK_OK;
}

/* The problem's constants: slack weight, tolerance scale and the dual box (§5.8). */
static ws ws_params(const double *y, size_t N, const fk_sfl_atoms *a, const fk_sfl_opts *o)
{
    ws s = {.o = o, .N = N, .J = a->J, .y = y, .v = a->v, .Np = (double)N};
    s.kappa = 1.0 / (o->n_ref > 0 ? o->n_ref : (double)N);
    s.scale = o->mode == FK_SFL_REGRESS ? sqrt(o->eps) : 1.0 - o->eps;
    if (!(s.scale > 0))
        s.scale = 1.0;
    s.box = o->mode != FK_SFL_CLASSIFY        ? INFINITY
            : o->res == FK_SFL_HUBER || o->res == FK_SFL_LINEAR ? o->c * s.kappa * s.Np
                                                                : INFINITY;
    return s;
}

int fk_sfl_eval_at(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                   const fk_sfl_opts *o, const double *lam, fk_sfl_eval *ev, double *abar,
                   double *alpha, double *f, double *grad, fk_err *err)
{
    memset(ev, 0, sizeof *ev);
    int rc = check_args(X, y, N, p, a, o, err);
    if (rc)
        return rc;
    for (size_t n = 0; n < N; n++)
        if (!isfinite(lam[n]))
            return fk_err_set(err, FK_EINVAL, "sfl eval: lambda %zu is not finite", n);
    size_t J = a->J;
    ws s = ws_params(y, N, a, o);
    s.gamma = o->gamma;
    s.K = malloc(N * J * sizeof(double));
    double *buf = malloc((3 * N + 3 * J) * sizeof(double));
    if (!s.K || !buf) {
        free(s.K);
        free(buf);
        return fk_err_set(err, FK_ENOMEM, "sfl eval: out of memory for %zu x %zu kernel matrix",
                          N, J);
    }
    s.wv = buf;
    s.t = buf + N;
    s.f = buf + 2 * N;
    s.abar = buf + 3 * N;
    s.alpha = s.abar + J;
    s.va = s.alpha + J;
    fk_sfl_kernel(X, N, p, a, s.K);
    for (size_t n = 0; n < N; n++)
        s.wv[n] = o->mode == FK_SFL_CLASSIFY ? y[n] / s.Np : 1.0;
    evalr e = eval(&s, lam);
    ev->g = e.g;
    ev->P = e.P;
    ev->viol = e.viol;
    ev->support = e.sup;
    if (abar)
        memcpy(abar, s.abar, J * sizeof *abar);
    if (alpha)
        memcpy(alpha, s.alpha, J * sizeof *alpha);
    if (f)
        memcpy(f, s.f, N * sizeof *f);
    for (size_t n = 0; grad && n < N; n++) {
        double sg = lam[n] > 0 ? 1.0 : lam[n] < 0 ? -1.0 : 0.0;
        grad[n] = o->mode == FK_SFL_CLASSIFY ? gnum(&s, n, lam[n]) / s.Np
                                             : y[n] - s.f[n] - sqrt(o->eps) * sg;
    }
    free(s.K);
    free(buf);
    return FK_OK;
}

/* The FISTA phases (gamma > 0) need the whole kernel matrix and the step constant. */
FK_CHECKRETURN static int need_matrix(ws *s, fk_err *err)
{
    if (s->K)
        return FK_OK;
    s->K = (double *)fk__sfl_rows_full(s->rows);
    if (!s->K)
        return fk_err_set(err, FK_ELIMIT,
                          "sfl solve: gamma > 0 needs the whole %zu x %zu kernel matrix (%.0f MB), "
                          "beyond the kernel-row budget of %.0f MB; solve at gamma = 0 or with "
                          "fewer rows or atoms",
                          s->N, s->J, (double)s->N * (double)s->J * 8.0 / 1048576.0,
                          (double)s->rows->R * (double)s->J * 8.0 / 1048576.0);
    s->L = step_constant(s);
    s->eta = 1.0 / s->L;
    return FK_OK;
}

/* The gamma = 0 problem: the working set where the dual has the resilient ridge, else (and when
 * the working set gives up) the coordinate ascent, from where it stopped. */
FK_CHECKRETURN static int run_dual0(ws *s, double *lam, phase_out *out, fk_err *err)
{
    int fallback = 1, rc = FK_OK;
    phase_out first = {FK_SFL_MAXITER, 0, 0, -INFINITY};
    if (ridge(s) > 0)
        rc = run_ws(s, lam, &first, &fallback, err);
    if (rc || !fallback) {
        *out = first;
        return rc;
    }
    rc = run_cd(s, lam, out, err);
    out->iters += first.iters;
    out->best_dual = fmax(out->best_dual, first.best_dual);
    return rc;
}

int fk_sfl_solve(const double *X, const double *y, size_t N, int p, const fk_sfl_atoms *a,
                 const fk_sfl_opts *o, const double *lambda0, fk_sfl_fit *fit, fk_err *err)
{
    if (o->solver == FK_SFL_SOLVER_VA && o->mode == FK_SFL_REGRESS)
        return fk_sfl_solve_a(X, y, N, p, a, o, lambda0, fit, err);
    memset(fit, 0, sizeof *fit);
    int rc = check_args(X, y, N, p, a, o, err);
    if (rc)
        return rc;
    size_t J = a->J;
    ws s = ws_params(y, N, a, o);
    /* gamma > 0 (FISTA) needs the whole matrix, as before up to 4e9 entries; gamma = 0 works in
     * the row budget whatever N x J */
    double budget = o->cache_mb * 1048576.0, whole = (double)N * (double)J * sizeof(double);
    if (!(budget > 0))
        budget = (double)FK__SFL_CACHE_DEFAULT_MB * 1048576.0;
    if ((o->gamma > 0 || o->gamma_rel > 0) && o->cache_mb <= 0 && (double)N * (double)J <= 4e9)
        budget = fmax(budget, whole);
    fk__sfl_rows rows;
    if ((rc = fk__sfl_rows_init(&rows, X, N, p, a, budget, err)))
        return rc;
    s.rows = &rows;
    double *buf = malloc((6 * N + 4 * J) * sizeof(double));
    double *klam = malloc(2 * N * sizeof(double));
    fit->lambda = malloc(N * sizeof(double));
    fit->alpha = malloc(J * sizeof(double));
    fit->f = malloc(N * sizeof(double));
    if (!buf || !klam || !fit->lambda || !fit->alpha || !fit->f) {
        fk__sfl_rows_close(&rows);
        free(buf);
        free(klam);
        fk_sfl_fit_close(fit);
        return fk_err_set(err, FK_ENOMEM, "sfl solve: out of memory for %zu rows x %zu atoms",
                          N, J);
    }
    double *lam = fit->lambda;
    s.wv = buf;
    s.t = buf + N;
    s.f = buf + 2 * N;
    double *prev = buf + 3 * N, *lhat = buf + 4 * N, *snap = buf + 5 * N;
    s.abar = buf + 6 * N;
    s.alpha = s.abar + J;
    s.va = s.alpha + J;
    double *kalpha = s.va + J;
    double *kf = klam + N;
    for (size_t n = 0; n < N; n++)
        s.wv[n] = o->mode == FK_SFL_CLASSIFY ? y[n] / s.Np : 1.0;
    /* start: warm, or 0 (the coordinate ascent starts from no active row) */
    for (size_t n = 0; n < N; n++)
        lam[n] = lambda0 ? lambda0[n] : 0.0;
    if (o->mode == FK_SFL_CLASSIFY)
        for (size_t n = 0; n < N; n++) /* a warm start from another scale still lies in the box */
            lam[n] = lam[n] < 0 || !isfinite(lam[n]) ? 0 : lam[n] > s.box ? s.box : lam[n];
    phase_out ph = {FK_SFL_CONVERGED, 0, 0, -INFINITY};
    long iters = 0;
    double best_dual = -INFINITY;
    int two = (o->gamma > 0 || o->gamma_rel > 0) && !lambda0; /* continuation, §3.9 */
    if (two) { /* gamma = 0 pass first */
        s.gamma = 0;
        s.det = 1; /* the thresholded iteration after it would amplify rounding differences */
        rc = run_dual0(&s, lam, &ph, err);
        iters += ph.iters;
        best_dual = ph.best_dual;
    }
    if (!rc && ph.status != FK_SFL_INFEASIBLE) {
        s.gamma = o->gamma;
        if (o->gamma_rel > 0) { /* relative gamma from the gamma = 0 (or warm) solution */
            s.fresh = 0;
            coeffs(&s, lam);
            double m = max_abs(s.abar, J);
            s.gamma = o->gamma_rel * 0.5 * m * m;
        }
        if (!two || s.gamma > 0) {
            if (s.gamma > 0) {
                s.fresh = 0;
                if (!(rc = need_matrix(&s, err)))
                    ph = run_phase(&s, lam, prev, lhat, snap, klam, kalpha, kf);
            } else {
                rc = run_dual0(&s, lam, &ph, err);
            }
            iters += ph.iters;
            best_dual = fmax(best_dual, ph.best_dual);
        }
    }
    if (rc) {
        fk__sfl_rows_close(&rows);
        free(buf);
        free(klam);
        fk_sfl_fit_close(fit);
        return rc;
    }
    fit->N = N;
    fit->J = J;
    fit->status = ph.status;
    fit->iters = iters;
    fit->gamma = s.gamma;
    fit->L = s.L;
    if (s.gamma > 0 && ph.kept) { /* return the kept best-feasible iterate */
        memcpy(lam, klam, N * sizeof *lam);
        fit->kept = 1;
    }
    evalr e = {.P = s.fresh_P, .g = s.fresh_g, .viol = s.fresh_viol, .sup = s.fresh_sup};
    if (!s.fresh || fit->kept)
        e = eval(&s, lam);
    memcpy(fit->alpha, s.alpha, J * sizeof(double));
    memcpy(fit->f, s.f, N * sizeof(double));
    fit->viol = e.viol;
    fit->primal = e.P;
    fit->dual = e.g;
    fit->best_dual = fmax(best_dual, e.g);
    fit->support = e.sup;
    if (fit->status == FK_SFL_INFEASIBLE)
        worst_rows(lam, N, fit->worst, &fit->n_worst);
    free(klam);
    fk__sfl_rows_close(&rows);
    free(buf);
    return FK_OK;
}

void fk_sfl_critical(const fk_sfl_fit *fit, const double *y, const fk_sfl_opts *o, int *idx,
                     size_t *n_crit, size_t *not_conv)
{
    size_t N = fit->N, c = 0, nc = 0;
    double lmax = max_abs(fit->lambda, N);
    for (size_t n = 0; n < N; n++) {
        double lam = fit->lambda[n];
        if (!(fabs(lam) > o->tau_crit * lmax) || lam == 0.0)
            continue;
        int active;
        if (o->mode == FK_SFL_REGRESS) {
            active = fabs(fit->f[n] - y[n]) >= sqrt(o->eps) * (1.0 - o->tau_act);
        } else {
            double l = 1.0 - o->eps - y[n] * fit->f[n];
            active = l - fk_sfl_slack(o, N, lam, l) >= -o->tau_act * (1.0 - o->eps);
        }
        if (active)
            idx[c++] = (int)n;
        else
            nc++;
    }
    *n_crit = c;
    if (not_conv)
        *not_conv = nc;
}
