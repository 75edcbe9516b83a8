#!/usr/bin/env bash
# Every test suite: normal build, ASan+UBSan build, bounded libFuzzer runs.
# Prints one closing line "N passed, N failed". Exit status 0 only if all pass.
set -uo pipefail
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
fuzz_seconds=${FK_FUZZ_SECONDS:-15}

deploy/bootstrap.sh || { echo "0 passed, 1 failed"; exit 1; }

passed=0
failed=0
count() { # count SUITE-LABEL MESON-BUILDDIR: add meson's testlog outcome to the totals
  local log="$2/meson-logs/testlog.json"
  [ -f "$log" ] || { failed=$((failed + 1)); return; }
  local ok bad skip
  ok=$(grep -c '"result": "OK"' "$log" || true)
  skip=$(grep -c '"result": "SKIP"' "$log" || true) # skips print their reason in the test log
  bad=$(grep -vc '"result": "OK"\|"result": "SKIP"\|^$' "$log" || true)
  echo "$1: $ok passed, $bad failed, $skip skipped"
  passed=$((passed + ok))
  failed=$((failed + bad))
}

run_meson_tests() { # LABEL BUILDDIR TEST-ARGS SETUP-ARGS...
  local label=$1 dir=$2 test_args=$3
  shift 3
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >/dev/null || { echo "$label: meson setup failed"; failed=$((failed + 1)); return; }
  fi
  if ! ninja -C "$dir" >"$dir.ninja.log" 2>&1; then
    cat "$dir.ninja.log"; echo "$label: build failed"; failed=$((failed + 1)); return
  fi
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs --num-processes 2 $test_args >"$dir.test.log" 2>&1
  tail -n 15 "$dir.test.log"
  count "$label" "$dir"
}

# The normal build runs every suite, the fault suite (tests/fault: proxy, fault scenarios,
# multi-host, load; ~6 min) and the package suite (tests/ops/test_deb.sh: builds the .deb
# files, ~2.5 min) included; the sanitizer build runs all but those two.
run_meson_tests normal build "" -Db_ndebug=false
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  run_meson_tests asan build-asan "--no-suite fault --no-suite package" -Db_sanitize=address,undefined -Db_lundef=false

# Fuzz: clang + libFuzzer, each target a bounded run from its seed corpus.
if [ ! -f build-fuzz/build.ninja ]; then
  CC=clang meson setup build-fuzz -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
if ninja -C build-fuzz >build-fuzz.ninja.log 2>&1; then
  for exe in build-fuzz/tests/fuzz/fuzz_*; do
    [ -f "$exe" ] && [ -x "$exe" ] || continue
    name=${exe##*/fuzz_}
    work=$(mktemp -d)
    cp -r "tests/fuzz/corpus/$name/." "$work/" 2>/dev/null || true
    if "$exe" "$work" -max_total_time="$fuzz_seconds" -rss_limit_mb=2048 -timeout=10 -artifact_prefix="build-fuzz/$name-" \
        >"build-fuzz/$name.log" 2>&1; then
      passed=$((passed + 1)); echo "fuzz $name: ok ($fuzz_seconds s)"
    else
      failed=$((failed + 1)); echo "fuzz $name: FAILED"; tail -n 40 "build-fuzz/$name.log"
    fi
    rm -rf "$work"
  done
else
  cat build-fuzz.ninja.log; echo "fuzz: build failed"; failed=$((failed + 1))
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
