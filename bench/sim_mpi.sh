#!/bin/sh
# bench/sim_mpi.sh FEDKERN [MPIRUN]: kept for the scripts that call it; the bench is the
# subcommand `fedkern bench sim-mpi` (bench/sim_mpi.c, docs/mpi.md): `fedkern sim` over
# P = 1, 2, 4 MPI ranks against the in-process run of the same job in the same run, on FedGrEM
# with 10,000 simulated clients and dica with 100 clients.
# Environment, as before: FEDGREM_K (10000), FEDGREM_N (50 rows per client), FEDGREM_ROUNDS
# (3), DICA_CLIENTS (100), PS ("1 2 4"); JSON=1 for JSON lines.
set -u
fk=$1
ps=$(echo "${PS:-1 2 4}" | tr ' ' ',')
set -- "$fk" bench sim-mpi --clients "${FEDGREM_K:-10000}" --n "${FEDGREM_N:-50}" \
  --rounds "${FEDGREM_ROUNDS:-3}" --dica_clients "${DICA_CLIENTS:-100}" --ps "$ps" \
  ${2:+--mpirun "$2"}
[ "${JSON:-0}" = 1 ] && set -- "$@" --json
exec "$@"
