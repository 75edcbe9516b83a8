/* fedkern bench blas: the dense-algebra baselines every later benchmark is a
 * ratio to. dgemm GFLOP/s at the shapes fedkern multiplies (2N x n times
 * n x 2N: random-feature Gram matrices), a square reference dgemm, and the
 * time of dsyevr for the top-m eigenpairs of a 2N x 2N SPD matrix next to a
 * full dsyevd. Each timing is the best of a few repetitions. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench/bench.h"
#include "common/base/params.h"
#include "common/la/blas.h"
#include "common/la/mat.h"
#include "common/la/rng.h"

static const char bench_name[] = "blas";
/* Stop repeating a case once its repetitions have used this many seconds. */
static const double case_budget = 10.0;

typedef struct opts {
    int json;
    int quick;
    long reps;
    long m;
} opts;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: fedkern bench blas [--json] [--quick] [--reps R] [--m M]\n"
            "\n"
            "dgemm GFLOP/s for (2N x n)(n x 2N), N in {250, 500, 1000, 2000},\n"
            "n in {800, 2000, 5000}, a square reference dgemm, and dsyevr time for the\n"
            "top-M eigenpairs (default 100) of a random SPD 2N x 2N matrix,\n"
            "N in {500, 1000, 2000}, with the full dsyevd time and their ratio.\n"
            "Each timing is the best of R repetitions (default 3; fewer once a case has\n"
            "taken %.0f s). --quick skips N = 2000 and n = 5000. OpenBLAS runs the\n"
            "thread count every fedkern program pins (FK_BLAS_THREADS, default 1).\n",
            case_budget);
}

static int parse(int argc, char **argv, opts *o)
{
    fk_params p;
    fk_err err = {0};
    fk_params_init(&p);
    int rc = fk_params_parse_args(&p, &argc, argv, &err);
    if (!rc && argc > 0)
        rc = fk_err_set(&err, FK_EINVAL, "unexpected argument '%s'", argv[0]);
    if (!rc)
        rc = fk_params_bool(&p, "json", 0, &o->json, &err);
    if (!rc)
        rc = fk_params_bool(&p, "quick", 0, &o->quick, &err);
    if (!rc)
        rc = fk_params_int(&p, "reps", 3, 1, 100, &o->reps, &err);
    if (!rc)
        rc = fk_params_int(&p, "m", 100, 1, 1000, &o->m, &err);
    const char *unused = rc ? NULL : fk_params_unused(&p);
    if (unused)
        rc = fk_err_set(&err, FK_EINVAL, "unknown option --%s; see --help", unused);
    fk_params_close(&p);
    if (rc)
        fprintf(stderr, "fedkern bench blas: %s\n", err.msg);
    return rc;
}

static int fill_normal(fk_mat *M, size_t rows, size_t cols, fk_rng *r)
{
    if (fk_mat_init(M, rows, cols))
        return FK_ENOMEM;
    for (size_t i = 0; i < rows * cols; i++)
        M->data[i] = fk_rng_normal(r);
    return FK_OK;
}

/* Best wall time of up to reps runs of C = A B. */
static double time_gemm(const fk_mat *A, const fk_mat *B, fk_mat *C, long reps, int *done)
{
    double best = INFINITY, spent = 0.0;
    int k = 0;
    while (k < reps && (k == 0 || spent < case_budget)) {
        double t0 = fk_bench_now();
        if (fk_gemm(FK_NOTRANS, FK_NOTRANS, 1.0, A, B, 0.0, C, NULL)) {
            *done = 0; /* shapes are the caller's: no time for a product that did not run */
            return NAN;
        }
        double t = fk_bench_now() - t0;
        best = t < best ? t : best;
        spent += t;
        k++;
    }
    *done = k;
    return best;
}

static int bench_gemm(const opts *o, size_t rows, size_t inner, size_t cols, const char *case_name,
                      const char *shape, fk_rng *r)
{
    fk_mat A = {0}, B = {0}, C = {0};
    if (fill_normal(&A, rows, inner, r) || fill_normal(&B, inner, cols, r) ||
        fk_mat_init(&C, rows, cols)) {
        fk_mat_close(&A);
        fk_mat_close(&B);
        fprintf(stderr, "fedkern bench blas: out of memory for %s\n", case_name);
        return 1;
    }
    int reps;
    double t = time_gemm(&A, &B, &C, o->reps, &reps);
    if (!reps) {
        fk_mat_close(&A);
        fk_mat_close(&B);
        fk_mat_close(&C);
        fprintf(stderr, "fedkern bench blas: dgemm failed for %s\n", case_name);
        return 1;
    }
    double flops = 2.0 * (double)rows * (double)inner * (double)cols;
    char extra[256];
    snprintf(extra, sizeof extra, "%s,\"seconds\":%.6g,\"reps\":%d", shape, t, reps);
    fk_bench_emit(o->json, bench_name, case_name, "gflops", flops / t * 1e-9, extra);
    fk_mat_close(&A);
    fk_mat_close(&B);
    fk_mat_close(&C);
    return 0;
}

/* Wishart-like SPD test matrix: S = G^T G / n + I (column- and row-major alike). */
static int random_spd(fk_mat *S, size_t n, fk_rng *r)
{
    fk_mat G = {0};
    if (fill_normal(&G, n, n, r) || fk_mat_init(S, n, n)) {
        fk_mat_close(&G);
        return FK_ENOMEM;
    }
    int rc = fk_syrk(FK_TRANS, 1.0 / (double)n, &G, 0.0, S, NULL);
    for (size_t i = 0; !rc && i < n; i++)
        S->data[i * n + i] += 1.0;
    fk_mat_close(&G);
    return rc;
}

typedef struct eig_run {
    double seconds;
    int reps;
    double top; /* largest eigenvalue found */
    double *w;  /* eigenvalues, ascending (owned) */
    int info;
} eig_run;

/* Best of reps: dsyevr for eigenpairs il..iu (1-based, ascending), or full dsyevd when il == 0.
 * The input is copied before each run (not timed) since LAPACK overwrites it. */
static int time_eig(const fk_mat *S, int il, int iu, long reps, eig_run *out)
{
    size_t n = S->rows;
    lapack_int ln = (lapack_int)n;
    *out = (eig_run){.seconds = INFINITY};
    fk_mat work = {0}, Z = {0};
    size_t m = il ? (size_t)(iu - il + 1) : n;
    lapack_int *isuppz = malloc(2 * m * sizeof *isuppz);
    out->w = malloc(n * sizeof *out->w);
    if (!isuppz || !out->w || fk_mat_init(&work, n, n) || (il && fk_mat_init(&Z, n, m))) {
        free(isuppz);
        free(out->w);
        out->w = NULL;
        fk_mat_close(&work);
        return FK_ENOMEM;
    }
    double spent = 0.0;
    while (out->reps < reps && (out->reps == 0 || spent < case_budget)) {
        fk_copy(n * n, S->data, work.data);
        lapack_int found = 0, info;
        double t0 = fk_bench_now();
        if (il)
            info = LAPACKE_dsyevr(LAPACK_COL_MAJOR, 'V', 'I', 'L', ln, work.data, ln, 0.0, 0.0, il,
                                  iu, 0.0, &found, out->w, Z.data, ln, isuppz);
        else
            info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', ln, work.data, ln, out->w);
        double t = fk_bench_now() - t0;
        out->info = (int)info;
        if (info)
            break;
        out->seconds = t < out->seconds ? t : out->seconds;
        spent += t;
        out->reps++;
        out->top = out->w[(il ? (size_t)found : n) - 1];
    }
    free(isuppz);
    fk_mat_close(&work);
    fk_mat_close(&Z);
    return FK_OK;
}

static int bench_eig(const opts *o, size_t N, fk_rng *r)
{
    size_t n = 2 * N;
    int m = (int)(o->m < (long)n ? o->m : (long)n);
    fk_mat S = {0};
    if (random_spd(&S, n, r)) {
        fprintf(stderr, "fedkern bench blas: out of memory for a %zux%zu matrix\n", n, n);
        return 1;
    }
    eig_run top = {0}, full = {0};
    int rc = time_eig(&S, (int)n - m + 1, (int)n, o->reps, &top);
    if (!rc)
        rc = time_eig(&S, 0, 0, o->reps, &full);
    fk_mat_close(&S);
    if (rc || top.info || full.info) {
        fprintf(stderr, "fedkern bench blas: eigensolver failed for 2N = %zu (info %d / %d)\n", n,
                top.info, full.info);
        free(top.w);
        free(full.w);
        return 1;
    }
    /* the top-m eigenvalues of both solvers must agree: a result check, not just a timing */
    double diff = 0.0;
    for (int i = 0; i < m; i++)
        diff = fmax(diff, fabs(top.w[i] - full.w[n - (size_t)m + (size_t)i]));
    char case_name[64], extra[256];
    snprintf(case_name, sizeof case_name, "dsyevr top-m N=%zu", N);
    snprintf(extra, sizeof extra, "\"N\":%zu,\"n\":%zu,\"m\":%d,\"reps\":%d,\"max_eig_diff\":%.3g",
             N, n, m, top.reps, diff);
    fk_bench_emit(o->json, bench_name, case_name, "seconds", top.seconds, extra);
    snprintf(case_name, sizeof case_name, "dsyevd full N=%zu", N);
    snprintf(extra, sizeof extra, "\"N\":%zu,\"n\":%zu,\"reps\":%d", N, n, full.reps);
    fk_bench_emit(o->json, bench_name, case_name, "seconds", full.seconds, extra);
    snprintf(case_name, sizeof case_name, "eig full/top-m N=%zu", N);
    snprintf(extra, sizeof extra, "\"N\":%zu,\"n\":%zu,\"m\":%d", N, n, m);
    fk_bench_emit(o->json, bench_name, case_name, "ratio", full.seconds / top.seconds, extra);
    if (diff > 1e-8 * (1.0 + fabs(top.top))) {
        fprintf(stderr, "fedkern bench blas: dsyevr and dsyevd disagree by %.3g for 2N = %zu\n",
                diff, n);
        free(top.w);
        free(full.w);
        return 1;
    }
    free(top.w);
    free(full.w);
    return 0;
}

/* JSON string body for s (quotes, backslashes and control bytes escaped). */
static void json_escape(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    for (; s && *s && o + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
        else if (c < 0x20)
            o += (size_t)snprintf(out + o, cap - o, "\\u%04x", c);
        else
            out[o++] = (char)c;
    }
    out[o] = '\0';
}

/* CPU vector features, so a generic OpenBLAS kernel on a newer CPU shows up next to the
 * figures (OpenBLAS falls back to e.g. Prescott on CPU models it does not know; then
 * OPENBLAS_CORETYPE=Haswell or SkylakeX selects the right kernels). */
static void cpu_features(char *out, size_t cap)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    snprintf(out, cap, ",\"avx2\":%d,\"avx512f\":%d", __builtin_cpu_supports("avx2") ? 1 : 0,
             __builtin_cpu_supports("avx512f") ? 1 : 0);
#else
    out[0] = '\0';
    (void)cap;
#endif
}

/* OpenBLAS x86 cores whose kernels use AVX or later. */
static int core_has_avx_kernels(const char *core)
{
    static const char *const avx_cores[] = {
        "Sandybridge",    "Haswell",   "SkylakeX",  "Cooperlake",
        "SapphireRapids", "Zen",       "Bulldozer", "Piledriver",
        "Steamroller",    "Excavator", NULL};
    for (int i = 0; avx_cores[i]; i++)
        if (!strcasecmp(core, avx_cores[i]))
            return 1;
    return 0;
}

/* One stderr hint when OpenBLAS runs generic kernels on an AVX2 machine. */
static void coretype_hint(const char *core)
{
#if defined(__x86_64__) || defined(__i386__)
    if (core && __builtin_cpu_supports("avx2") && !core_has_avx_kernels(core))
        fprintf(stderr,
                "fedkern bench blas: note: OpenBLAS picked the %s kernels on a CPU with %s; "
                "OPENBLAS_CORETYPE=%s may be several times faster\n",
                core, __builtin_cpu_supports("avx512f") ? "AVX-512" : "AVX2",
                __builtin_cpu_supports("avx512f") ? "SkylakeX" : "Haswell");
#else
    (void)core;
#endif
}

static void emit_info(const opts *o)
{
    char core[64], config[256], cpu[64], coretype[64], extra[600];
    json_escape(openblas_get_corename(), core, sizeof core);
    json_escape(openblas_get_config(), config, sizeof config);
    cpu_features(cpu, sizeof cpu);
    const char *env = getenv("OPENBLAS_CORETYPE");
    json_escape(env ? env : "", coretype, sizeof coretype);
    snprintf(extra, sizeof extra,
             "\"core\":\"%s\",\"procs\":%d%s,\"OPENBLAS_CORETYPE\":\"%s\",\"config\":\"%s\"", core,
             openblas_get_num_procs(), cpu, coretype, config);
    fk_bench_emit(o->json, bench_name, "openblas", "threads", openblas_get_num_threads(), extra);
    coretype_hint(openblas_get_corename());
}

int fk_bench_blas(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    opts o = {0};
    if (parse(argc, argv, &o))
        return 2;
    fk_rng r;
    fk_rng_init(&r, 20240601, 0);
    emit_info(&o);
    static const size_t Ns[] = {250, 500, 1000, 2000};
    static const size_t ns[] = {800, 2000, 5000};
    int failed = 0;
    for (size_t a = 0; a < sizeof Ns / sizeof Ns[0]; a++)
        for (size_t b = 0; b < sizeof ns / sizeof ns[0]; b++) {
            size_t N = Ns[a], n = ns[b];
            if (o.quick && (N > 1000 || n > 2000))
                continue;
            char case_name[64], shape[128];
            snprintf(case_name, sizeof case_name, "dgemm N=%zu n=%zu", N, n);
            snprintf(shape, sizeof shape, "\"N\":%zu,\"n\":%zu,\"shape\":\"%zux%zu*%zux%zu\"", N, n,
                     2 * N, n, n, 2 * N);
            failed |= bench_gemm(&o, 2 * N, n, 2 * N, case_name, shape, &r);
        }
    size_t sq = o.quick ? 1000 : 2000;
    char case_name[64], shape[128];
    snprintf(case_name, sizeof case_name, "dgemm square %zu", sq);
    snprintf(shape, sizeof shape, "\"shape\":\"%zux%zu*%zux%zu\"", sq, sq, sq, sq);
    failed |= bench_gemm(&o, sq, sq, sq, case_name, shape, &r);
    static const size_t eN[] = {500, 1000, 2000};
    for (size_t a = 0; a < sizeof eN / sizeof eN[0]; a++) {
        if (o.quick && eN[a] > 1000)
            continue;
        failed |= bench_eig(&o, eN[a], &r);
    }
    return failed ? 1 : 0;
}
