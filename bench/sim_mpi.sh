#!/bin/sh
# bench/sim_mpi.sh FEDKERN [MPIRUN]: `fedkern sim` over P = 1, 2, 4 MPI ranks (issue 38,
# docs/mpi.md) on two jobs, against the in-process run of the same job in the same run:
#   fedgrem  the FedGrEM paper design with 10,000 simulated clients (`sim fedgrem --K 10000`)
#   dica     a dica job with 100 clients on its built-in data (`sim dica --clients 100`)
# Prints one row per (job, P): wall seconds, speed-up against the in-process run, and per rank
# the messages and bytes sent per round and the peak RSS (from FK_MPI_STATS=1), and checks
# that the output lines equal the in-process run's (times excepted).
# Rank 0 is the server side; the clients are dealt over ranks 1..P-1, so P = 2 puts every
# client on one rank (no parallel client work) and P = 4 gives three client ranks. On a
# machine with fewer cores than ranks the ranks are oversubscribed (--oversubscribe).
# Environment: FEDGREM_K (10000), FEDGREM_N (50 rows per client), FEDGREM_ROUNDS (5),
# DICA_CLIENTS (100), PS ("1 2 4").
set -u
fk=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
mpirun=${2:-mpirun}
K=${FEDGREM_K:-10000}
N=${FEDGREM_N:-50}
T=${FEDGREM_ROUNDS:-5}
DC=${DICA_CLIENTS:-100}
PS=${PS:-1 2 4}
export OMPI_MCA_btl_vader_single_copy_mechanism=none
asroot=
[ "$(id -u)" = 0 ] && asroot=--allow-run-as-root
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT

now() { date +%s.%N; }
# job NAME ARGS...: in process, then over each P; one table row each
job() {
  name=$1
  shift
  t0=$(now)
  echo "?" >"$dir/rss"
  tm=
  [ -x /usr/bin/time ] && tm="/usr/bin/time -f %M -o $dir/rss"
  # shellcheck disable=SC2086
  $tm "$fk" "$@" 2>"$dir/err" | sed 's/"seconds":[^,}]*//' >"$dir/one.txt" ||
    { echo "$name: in-process run failed: $(cat "$dir/err")"; return 1; }
  t1=$(now)
  base=$(echo "$t1 - $t0" | bc -l)
  printf '%-8s %-10s %8.2f %8s   rss %s KB (one process)\n' "$name" "in-proc" "$base" "1.00" "$(cat "$dir/rss")"
  for p in $PS; do
    t0=$(now)
    # shellcheck disable=SC2086
    "$mpirun" $asroot --oversubscribe -x FK_MPI_STATS=1 -n "$p" "$fk" "$@" 2>"$dir/err" |
      sed 's/"seconds":[^,}]*//' >"$dir/mpi.txt" || { echo "$name P=$p failed: $(tail -3 "$dir/err")"; continue; }
    t1=$(now)
    wall=$(echo "$t1 - $t0" | bc -l)
    same=same
    cmp -s "$dir/one.txt" "$dir/mpi.txt" || same=DIFFERS
    printf '%-8s P=%-8s %8.2f %8.2f   output %s\n' "$name" "$p" "$wall" "$(echo "$base / $wall" | bc -l)" "$same"
    sort -t= -k2 -n "$dir/err" | grep '^fk-mpi-stats' | sed 's/=/ /g' |
      awk '{r = $7 > 0 ? $7 : 1; printf "           rank %s: %7.1f msgs/round %12.0f bytes/round sent, %7.1f msgs/round %12.0f bytes/round received, peak RSS %6.1f MB\n", $3, $9 / r, $11 / r, $13 / r, $15 / r, $17 / 1024}'
  done
}

echo "fedkern bench sim-mpi: $(nproc) cores; wall seconds (mpirun's start included), speed-up = in-process / P ranks"
job fedgrem sim fedgrem --K "$K" --n "$N" --rounds "$T" --every 1 --json
job dica sim dica --clients "$DC" --json
