#!/usr/bin/env bash
# OpenBLAS kernels that match the CPU (common/la/blas_core.c): every program re-executes
# itself once with OPENBLAS_CORETYPE=SkylakeX (AVX-512) or Haswell (AVX2) when OpenBLAS chose a
# pre-AVX2 core, logs the choice, never loops, and leaves a user's OPENBLAS_CORETYPE alone.
# OpenBLAS's report of its core is faked with a preloaded shim (support_fake_corename.c),
# so the "unknown CPU model" path runs on any AVX2 machine.
# Usage: cli_blas_core.sh FEDKERN FEDKERN_SERVER FEDKERN_CLIENT SHIM.so
set -u
fk=$1 srv=$2 cli=$3 shim=$4
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
has() { grep -qw "$1" <<<"$flags"; }
if has avx512f && has avx512cd && has avx512bw && has avx512dq && has avx512vl && has avx2 && has fma; then
    want=SkylakeX
elif has avx2 && has fma; then
    want=Haswell
else
    echo "SKIP: no AVX2 + FMA on this CPU: nothing to select"
    exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
unset OPENBLAS_CORETYPE FK_BLAS_CORE_AUTO FK_TEST_FAKE_CORE FK_TEST_FAKE_CORE_STUCK FK_BLAS_THREADS
# the shim comes before the sanitizer runtime in an ASan build; nothing in it is instrumented
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
starts="$dir/starts"

# run CASE ENV... -- PROGRAM ARGS: output in $dir/CASE.out (stdout + stderr), starts counted
run() {
    local name=$1; shift
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rm -f "$starts"
    env "${envs[@]}" LD_PRELOAD="$shim" FK_TEST_FAKE_CORE_STARTS="$starts" \
        timeout 20 "$@" >"$dir/$name.out" 2>&1
    echo $? >"$dir/$name.rc"
    # starts of fedkern programs only (the shim is loaded into `timeout` too)
    n_starts=$(cat "$starts" 2>/dev/null | grep -c '/fedkern[^/]*$')
}
expect() { # CASE LINE-REGEX STARTS
    grep -qE "$2" "$dir/$1.out" || fail "$1: no line matching '$2' in: $(cat "$dir/$1.out")"
    [ "$n_starts" -eq "$3" ] || fail "$1: $n_starts program starts, want $3"
}

# 1. OpenBLAS chose its generic core: the CLI selects the CPU's kernels, one re-execution
run generic -- "$fk" --version
expect generic "^blas threads=1 core=$want chosen_by=fedkern instead_of=Prescott$" 2
[ "$(cat "$dir/generic.rc")" = 0 ] || fail "generic: exit $(cat "$dir/generic.rc")"
# ... with the same arguments after the re-execution
run args -- "$fk" sim --help
"$fk" sim --help >"$dir/args.want" 2>&1
cmp -s "$dir/args.out" "$dir/args.want" || fail "sim --help differs after the re-execution"
[ "$n_starts" -eq 2 ] || fail "args: $n_starts program starts, want 2"
# ... and both daemons do the same: they say so when they are up (server_ready, client_started)
"$fk" certs init --dir "$dir/pki" >/dev/null 2>&1 &&
    "$fk" certs issue --dir "$dir/pki" --server server --ip 127.0.0.1 >/dev/null 2>&1 &&
    "$fk" certs issue --dir "$dir/pki" --client c1 >/dev/null 2>&1 || fail "certs"
# daemon CASE EVENT ENV... -- PROGRAM ARGS: started in the background, stopped once its log has
# EVENT (20 s at most); output in $dir/CASE.out, starts counted as in run
daemon() {
    local name=$1 event=$2; shift 2
    local envs=()
    while [ "$1" != "--" ]; do envs+=("$1"); shift; done
    shift
    rm -f "$starts"
    env "${envs[@]}" LD_PRELOAD="$shim" FK_TEST_FAKE_CORE_STARTS="$starts" "$@" \
        >"$dir/$name.out" 2>&1 &
    local pid=$! i
    for i in $(seq 200); do
        grep -q "event=$event " "$dir/$name.out" && break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    n_starts=$(cat "$starts" 2>/dev/null | grep -c '/fedkern[^/]*$')
}
srv_args=(--listen 127.0.0.1:0 --tls_dir "$dir/pki" --state "$dir/state.db" --metrics_listen off)
daemon server server_ready -- "$srv" "${srv_args[@]}"
expect server "event=server_ready .* blas_threads=1 blas_core=$want blas_chosen_by=fedkern blas_instead_of=Prescott$" 2
daemon client client_started -- "$cli" --server 127.0.0.1:9 --server_name server \
    --tls_dir "$dir/pki" --name c1
expect client "event=client_started .* blas_threads=1 blas_core=$want blas_chosen_by=fedkern blas_instead_of=Prescott$" 2

# 2. the user's OPENBLAS_CORETYPE wins, even a generic one: no re-execution
run user OPENBLAS_CORETYPE=Prescott -- "$fk" --version
expect user "^blas threads=1 core=Prescott chosen_by=user$" 1
daemon user_srv server_ready OPENBLAS_CORETYPE=Haswell -- "$srv" "${srv_args[@]}"
expect user_srv "event=server_ready .* blas_threads=1 blas_core=Haswell blas_chosen_by=user$" 1
# ... also when it differs from what an inherited guard says fedkern set
run user_guard FK_BLAS_CORE_AUTO=Prescott:$want OPENBLAS_CORETYPE=Haswell -- "$fk" --version
expect user_guard "^blas threads=1 core=Haswell chosen_by=user$" 1
# a process started by a re-executed one (guard and setting inherited) keeps them, no exec
run inherited FK_BLAS_CORE_AUTO=Prescott:$want OPENBLAS_CORETYPE=$want -- "$fk" --version
expect inherited "^blas threads=1 core=$want chosen_by=fedkern instead_of=Prescott$" 1

# 3. no loop: a library that ignores OPENBLAS_CORETYPE gets one re-execution, then a warning
run stuck FK_TEST_FAKE_CORE_STUCK=1 -- "$fk" --version
expect stuck "^blas threads=1 core=Prescott chosen_by=fedkern instead_of=Prescott$" 2
grep -q "level=warn event=blas_core core=Prescott coretype=$want msg=\"OpenBLAS did not take" \
    "$dir/stuck.out" || fail "stuck: no warning in: $(cat "$dir/stuck.out")"
[ "$(cat "$dir/stuck.rc")" = 0 ] || fail "stuck: exit $(cat "$dir/stuck.rc") (124: a loop)"

# 4. OpenBLAS already runs kernels for this CPU (or a core this rule does not know): kept
for core in Haswell Zen SkylakeX Cooperlake SomeFutureCore; do
    run "kept_$core" FK_TEST_FAKE_CORE=$core -- "$fk" --version
    expect "kept_$core" "^blas threads=1 core=$core chosen_by=openblas$" 1
done

# 5. the real OpenBLAS, no shim: never generic kernels on this CPU unless the user asks
out=$("$fk" --version) || fail "real --version exit $?"
line=$(grep '^blas ' <<<"$out")
case "$line" in
"blas threads=1 core="*" chosen_by=openblas" | "blas threads=1 core=$want chosen_by=fedkern "*) ;;
*) fail "real OpenBLAS: '$line'" ;;
esac
for g in Prescott Core2 Nehalem Sandybridge Atom Unknown; do
    grep -q "core=$g " <<<"$line" && fail "real OpenBLAS runs generic $g kernels: $line"
done

[ "$fails" -eq 0 ] && echo "cli_blas_core: all passed"
exit $((fails > 0))
