/* Benchmarks behind `fedkern bench NAME`: each prints a table, or JSON lines
 * {"bench":...,"case":...,"metric":...,"value":...} with --json. Targets are
 * reported as ratios to baselines measured in the same run. */
#ifndef FK_BENCH_H
#define FK_BENCH_H

#include <stddef.h>

#include <stdint.h>

#include "common/base/err.h"
#include "common/data/dataset.h"
#include "common/la/mat.h"

typedef struct fk_bench_entry {
    const char *name;     /* "blas", "fidelity knn", ... (words joined by one space) */
    const char *summary;
    int (*run)(int argc, char **argv); /* argv after the name words; returns exit status */
} fk_bench_entry;

/* The benchmarks not tied to one job type (this folder), NULL-terminated. A method family
 * with benchmarks has a folder bench/<family>/ named like common/methods/<family>/, with a
 * meson.build that appends its files to fk_bench_src and an entries.c that defines
 * `const fk_bench_entry fk_bench_family_<family>[]`; bench/meson.build finds the folder and
 * fk_bench_main searches its table after this one. No line here or in bench.c names it. */
extern const fk_bench_entry fk_benches[];

int fk_bench_wire(int argc, char **argv); /* bench/wire.c */
int fk_bench_server(int argc, char **argv); /* bench/server.c (built with fedkern, see client/meson.build) */
int fk_bench_stall(int argc, char **argv);  /* bench/stall.c */
int fk_bench_state(int argc, char **argv);  /* bench/state.c */
int fk_bench_sim_mpi(int argc, char **argv); /* bench/sim_mpi.c */

/* The end of an in-process server (bench/server.c): close the service, then the gRPC server,
 * drain the loop (works in flight finish), free the service. */
typedef struct uv_loop_s uv_loop_t;
typedef struct fk_service fk_service;
typedef struct fk_grpc_server fk_grpc_server;
void fk_bench_service_stop(uv_loop_t *loop, fk_service *svc, fk_grpc_server *srv);
/* Run the loop until n clients hold a session or limit_s passed; the sessions held. */
int fk_bench_wait_sessions(uv_loop_t *loop, fk_service *svc, int n, double limit_s);

/* Dispatch argv (after "bench") to the longest matching entry name. */
int fk_bench_main(int argc, char **argv);

/* One result: JSON line when json != 0, else an aligned text row.
 * extra is NULL or a JSON fragment like "\"published\":31.4" appended to the line. */
void fk_bench_emit(int json, const char *bench, const char *case_name, const char *metric,
                   double value, const char *extra);

/* Benchmark runners (one file each in bench/). */
int fk_bench_fidelity_knn(int argc, char **argv);

/* Monotonic seconds. */
double fk_bench_now(void);
/* Process CPU seconds (all threads): next to fk_bench_now on a machine shared with other jobs,
 * where the wall clock measures the scheduler as much as the code. */
double fk_bench_cpu_now(void);

/* The dgemm baseline speed benches report their GFLOP/s against: best-of-reps GFLOP/s of
 * an (a x k) * (k x b) row-major product on seeded normal entries, measured now (so in the
 * same run and under the same load as the bench). NaN when the matrices cannot be had. */
double fk_bench_dgemm_rate(size_t a, size_t k, size_t b, int reps);

/* X = n x d standard normal entries from fk_rng(seed); FK_ENOMEM (X empty) when they do not fit. */
FK_CHECKRETURN int fk_bench_normal_rows(fk_mat *X, size_t n, size_t d, uint64_t seed, fk_err *err);

/* Peak resident set of this process so far, MiB. */
double fk_bench_peak_mb(void);

/* ds[i] = Office-Caltech10 SURF domain domains[i] ("amazon", "caltech", "dslr", "webcam")
 * from the catalog under dir. On failure the sets loaded so far stay in ds: the caller
 * closes all four (ds zeroed on entry). */
FK_CHECKRETURN int fk_bench_load_surf(fk_dataset ds[4], const char *const domains[4],
                                      const char *dir, fk_err *err);

/* FK_OK if dir is a directory, else FK_EIO with the fix (pass --data_dir) in err. */
FK_CHECKRETURN int fk_bench_data_dir(const char *dir, fk_err *err);

/* A grid of independent runs (issue 38 "Grids"): run(ctx, i, out_i, err) for i = 0..n-1, each
 * writing out_size bytes at outs + i * out_size (a plain struct of numbers: no pointers).
 * In one process the runs go in order and stop at the first that fails. Under a grid driver
 * (fedkern under mpirun: cli/sim_mpi.c, run i on rank i mod P, rank 0 writes the rows) every
 * process gets every run's out and the same outcome, so the caller emits its rows in order
 * and prints exactly what the one-process run prints. Returns FK_OK when every run succeeded,
 * else the first failing run's (lowest i) code and message; *n_done = the runs before it. */
typedef int (*fk_bench_run_fn)(void *ctx, int i, void *out, fk_err *err);
typedef int (*fk_bench_grid_driver)(int n, size_t out_size, fk_bench_run_fn run, void *ctx,
                                    void *outs, int *n_done, fk_err *err);
FK_CHECKRETURN int fk_bench_grid(int n, size_t out_size, fk_bench_run_fn run, void *ctx,
                                 void *outs, int *n_done, fk_err *err);
/* Set once, before any bench, by a program that spreads grids over processes; NULL (the
 * default): in this process. */
void fk_bench_set_grid_driver(fk_bench_grid_driver d);

/* Benchmark runners (one file each in bench/). */
int fk_bench_blas(int argc, char **argv);
int fk_bench_load(int argc, char **argv); /* bench/load.c */

#endif
