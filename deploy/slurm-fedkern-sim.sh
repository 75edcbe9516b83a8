#!/bin/sh
# Example Slurm batch script: one `fedkern sim` over MPI ranks (docs/mpi.md).
#   sbatch deploy/slurm-fedkern-sim.sh job.conf DATA_DIR [OUT]
# job.conf is a job file of `fedkern job submit` (method, clients = c0, c1, ..., seed, keys);
# DATA_DIR holds one file per client, NAME.csv for each client NAME of its `clients`, on a
# file system every node sees (each rank reads only its own clients' files). Rank 0 (the
# server side) writes the model to OUT (default model.bin) and the per-round lines to the
# job's output file.
#SBATCH --job-name=fedkern-sim
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=16
#SBATCH --cpus-per-task=1
#SBATCH --time=02:00:00
#SBATCH --output=fedkern-sim-%j.out
set -eu
job=${1:?usage: sbatch slurm-fedkern-sim.sh job.conf DATA_DIR [OUT]}
data=${2:?usage: sbatch slurm-fedkern-sim.sh job.conf DATA_DIR [OUT]}
out=${3:-model.bin}
# one BLAS thread per rank; the same OpenBLAS kernels on every node, so the model is the one
# process's bit for bit (docs/numerics.md); set the core type of the oldest node
export FK_BLAS_THREADS=1
export OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-Haswell}
# --data NAME=DATA_DIR/NAME.csv for every client of the job file
clients=$(sed -n 's/^[[:space:]]*clients[[:space:]]*=[[:space:]]*//p' "$job" | tr ',' ' ')
set --
for c in $clients; do
  set -- "$@" --data "$c=$data/$c.csv"
done
# Slurm starts the ranks (PMIx; use --mpi=pmi2 for an MPI built for PMI2, or run
# `mpirun fedkern sim ...` here instead: Open MPI's mpirun reads the allocation)
srun --mpi=pmix fedkern sim --job "$job" "$@" --model_out "$out"
