/* In-process federation: one server state and n client states driven through
 * the method operations table, with optional message loss. */
#ifndef FK_SIM_H
#define FK_SIM_H

#include <stdint.h>

#include "common/methods/method.h"

typedef struct fk_sim_round {
    int round;
    int planned;      /* clients contacted */
    int participants; /* updates that reached the server in the last phase */
    int refused;      /* updates the method's check_update refused, all phases */
    double loss;      /* sample-weighted mean over reports that define it */
    double accuracy;
    double error;
    double misclust, ari, rmse; /* the quality metrics (fk_report); NaN: not measured */
    double model_error;         /* kahm's largest modelling error; NaN: not measured */
    uint64_t bytes;   /* payload bytes down + up this round (8 per value) */
    double seconds;   /* wall time of the round */
} fk_sim_round;

typedef void (*fk_sim_progress)(const fk_sim_round *r, void *ctx);

typedef struct fk_sim_opts {
    int rounds;
    uint64_t seed;
    double drop;               /* probability that one update is lost, in [0, 1) */
    fk_sim_progress progress;  /* called after every round; may be NULL */
    void *ctx;
    fk_report *final_reports;  /* if not NULL (n_clients entries): each client's evaluate op on
                                  the final model; needs a non-NULL model argument */
} fk_sim_opts;

/* Seed of the plan RNG for a round: plans depend on (seed, round) only, so a
 * resumed server plans exactly as an uninterrupted one. */
void fk_sim_plan_rng(fk_rng *rng, uint64_t seed, int round);

/* Run o->rounds rounds, fewer when the method's finished op says so. On success *model
 * holds the server's final model (caller closes it) and last, if not NULL, the last round's
 * summary. */
FK_CHECKRETURN int fk_sim_run(const fk_method *m, const fk_params *p, const fk_dataset *clients,
                              int n_clients, const fk_sim_opts *o, fk_bundle *model,
                              fk_sim_round *last, fk_err *err);

/* The pieces of fk_sim_run another driver reuses, so that it calls the ops exactly as the
 * in-process loop does (cli/sim_mpi.c: the clients on other MPI ranks). */

/* A plan in the order the phase's tasks go out and its updates are folded: client order. */
void fk_sim_sort_plan(int *chosen, int n_chosen);

/* Close a phase: ups[0..n) are the updates of the planned clients in client order, with
 * arrived[k] = 0 for one that never came (a dropout; arrived NULL: all came). In order, each
 * arrived update may be lost (drop, from drop_rng), refused (check_update: r->refused) or
 * taken (r->bytes); the taken ones are moved to the front, the round's quality summarised,
 * and the method's aggregate folds them. */
FK_CHECKRETURN int fk_sim_close_phase(const fk_method *m, void *srv, int round, int phase,
                                      fk_update *ups, const unsigned char *arrived, int n,
                                      double drop, fk_rng *drop_rng, fk_sim_round *r, int *done,
                                      fk_err *err);

/* The drop stream of a run (fk_sim_run's drop_rng). */
void fk_sim_drop_rng(fk_rng *rng, uint64_t seed);

/* A driver that runs fk_sim_run's job another way (same arguments and contract, called after
 * fk_sim_run checked them). NULL (the default): in this process. Set once, before any
 * simulation, by a program that runs its simulations over several processes (`fedkern`
 * under mpirun: cli/sim_mpi.c); the one piece of process-wide state of the simulator. */
typedef int (*fk_sim_driver)(const fk_method *m, const fk_params *p, const fk_dataset *clients,
                             int n_clients, const fk_sim_opts *o, fk_bundle *model,
                             fk_sim_round *last, fk_err *err);
void fk_sim_set_driver(fk_sim_driver d);

/* Which clients' data this process makes or loads, set with the driver when a simulation runs
 * over several processes (each makes only its own clients'); NULL (the default): all. */
typedef int (*fk_sim_holds_fn)(int client);
void fk_sim_set_holds(fk_sim_holds_fn h);
/* 1 if this process makes or loads client's data. */
int fk_sim_holds(int client);
/* A mask of the n clients this process holds, for a sim_data op's `want`: *want NULL when it
 * holds every client (no hook), else malloc'd (the caller frees). */
FK_CHECKRETURN int fk_sim_want(int n, unsigned char **want, fk_err *err);

#endif
