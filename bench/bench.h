/* Benchmarks behind `fedkern bench NAME`: each prints a table, or JSON lines
 * {"bench":...,"case":...,"metric":...,"value":...} with --json. Targets are
 * reported as ratios to baselines measured in the same run. */
#ifndef FK_BENCH_H
#define FK_BENCH_H

#include "common/base/err.h"

typedef struct fk_bench_entry {
    const char *name;     /* "blas", "fidelity knn", ... (words joined by one space) */
    const char *summary;
    int (*run)(int argc, char **argv); /* argv after the name words; returns exit status */
} fk_bench_entry;

extern const fk_bench_entry fk_benches[];

int fk_bench_wire(int argc, char **argv); /* bench/wire.c */
int fk_bench_server(int argc, char **argv); /* bench/server.c (built with fedkern, see client/meson.build) */
int fk_bench_fedgrem(int argc, char **argv); /* bench/fedgrem.c */
int fk_bench_fidelity_fedgrem(int argc, char **argv); /* bench/fidelity_fedgrem.c */
int fk_bench_fidelity_sfl(int argc, char **argv); /* bench/fidelity_sfl.c */
int fk_bench_sfl(int argc, char **argv);          /* bench/sfl.c */
/* Rows of `fidelity sfl` in bench/fidelity_sfl_ch2.c (E2.2, E2.3 with the KOMP baseline) and
 * bench/fidelity_sfl_res.c (label flips: resilient vs regularised ERM, AUC of the duals). */
FK_CHECKRETURN int fk__bench_sfl_resilient(int json, const char *dir, int ca, int cb,
                                           int n_train, int reps, long T, fk_err *err);
FK_CHECKRETURN int fk__bench_sfl_e22(int json, int reps, long T, double grel, fk_err *err);
FK_CHECKRETURN int fk__bench_sfl_e23(int json, int reps, long T, double grel, double komp_w,
                                     fk_err *err);

/* Dispatch argv (after "bench") to the longest matching entry name. */
int fk_bench_main(int argc, char **argv);

/* One result: JSON line when json != 0, else an aligned text row.
 * extra is NULL or a JSON fragment like "\"published\":31.4" appended to the line. */
void fk_bench_emit(int json, const char *bench, const char *case_name, const char *metric,
                   double value, const char *extra);

/* Benchmark runners (one file each in bench/). */
int fk_bench_fidelity_knn(int argc, char **argv);
int fk_bench_fidelity_kahm(int argc, char **argv); /* bench/fidelity_kahm.c */
int fk_bench_kahm(int argc, char **argv);          /* bench/kahm.c */
int fk_bench_fidelity_dica(int argc, char **argv); /* bench/fidelity_dica.c */
int fk_bench_dica(int argc, char **argv);          /* bench/dica.c */

/* Monotonic seconds. */
double fk_bench_now(void);

/* FK_OK if dir is a directory, else FK_EIO with the fix (pass --data-dir) in err. */
FK_CHECKRETURN int fk_bench_data_dir(const char *dir, fk_err *err);

/* Benchmark runners (one file each in bench/). */
int fk_bench_blas(int argc, char **argv);
int fk_bench_load(int argc, char **argv); /* bench/load.c */

#endif
