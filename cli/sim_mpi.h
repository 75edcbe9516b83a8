/* fedkern under mpirun (issue 38): the simulations of this process over MPI ranks. Rank 0
 * runs the server side of every fk_sim_run through the method's ops, the clients are dealt
 * over the other ranks (client i to rank 1 + i mod (P - 1)), and tasks and updates travel
 * between them as encoded bundles (docs/mpi.md). The only file with MPI calls is
 * cli/sim_mpi.c; a build without MPI (meson -Dmpi=disabled) keeps these functions as the
 * one-process answers. */
#ifndef FK_CLI_SIM_MPI_H
#define FK_CLI_SIM_MPI_H

#include "common/base/err.h"

/* Start MPI when this process was launched by mpirun / srun (their environment says so),
 * before any command runs; with more than one rank, every later fk_sim_run goes over the
 * ranks and the ranks other than 0 write nothing to stdout. Without a launcher (or without
 * MPI in the build) nothing changes. */
FK_CHECKRETURN int fk_mpi_start(int *argc, char ***argv, fk_err *err);
/* End MPI with the process's exit status: a rank that fails with MPI running ends the
 * whole job (MPI_Abort), so no rank waits for one that is gone. Returns status. */
int fk_mpi_finish(int status);

int fk_mpi_rank(void); /* 0 without MPI */

#endif
