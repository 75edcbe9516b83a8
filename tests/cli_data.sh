#!/usr/bin/env bash
# fedkern data: exit codes and one-line errors on generated files. Usage: cli_data.sh FEDKERN
set -u
fk=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
check() { # check WANT-EXIT NEEDLE ARGS...: run, compare exit status, stdout/stderr must contain NEEDLE
  local want=$1 needle=$2
  shift 2
  "$fk" data "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  local text
  text=$(cat "$dir/out" "$dir/err")
  if [ "$got" -ne "$want" ] || ! grep -qF -- "$needle" <<<"$text"; then
    echo "FAIL: data $* -> exit $got (want $want), output: $text"; fails=$((fails + 1))
  elif [ "$want" -ne 0 ] && [ "$(wc -l <"$dir/err")" -ne 1 ]; then
    echo "FAIL: data $* -> error is not one line: $(cat "$dir/err")"; fails=$((fails + 1))
  fi
}
printf '1,0.5,2\n2,1.5,4\n2,0,0\n' >"$dir/a.csv"
gzip -c "$dir/a.csv" >"$dir/a.csv.gz"
printf '1,2,3\n1,2\n' >"$dir/ragged.csv"
printf '1,2,3\n1,abc,3\n' >"$dir/word.csv"
printf '1,2,inf\n' >"$dir/inf.csv"
: >"$dir/empty.csv"
head -c 20 "$dir/a.csv.gz" >"$dir/cut.csv.gz"
printf '1,2,3,4\n' >"$dir/wide.csv"
printf 'not a matlab file, but long enough to have a header of one hundred and twenty-eight bytes..........................................\n' >"$dir/x.mat"

check 0 "rows=3 cols=2 classes=2 mean=1.33333333" info "$dir/a.csv"
check 0 "rows=3 cols=2 classes=2 mean=1.33333333" info "$dir/a.csv.gz"
check 0 "rows=3 cols=3 classes=0" info "$dir/a.csv" --label none
check 0 "rows=3 cols=2 classes=3" info --label last "$dir/a.csv"
check 0 "domains=2 cols=2 classes=2" check "$dir/a.csv" "$dir/a.csv.gz"
check 1 "ragged.csv:2: ragged row" info "$dir/ragged.csv"
check 1 "word.csv:2: column 2: non-numeric" info "$dir/word.csv"
check 1 "inf.csv:1: column 3: NaN or Inf" info "$dir/inf.csv"
check 1 "empty.csv: no data rows" info "$dir/empty.csv"
check 1 "truncated gzip" info "$dir/cut.csv.gz"
check 1 "wrong magic" info "$dir/x.mat"
check 1 "dimension mismatch" check "$dir/a.csv" "$dir/wide.csv"
check 1 "cannot open" info "$dir/missing.csv"
check 2 "unknown option --bogus" info "$dir/a.csv" --bogus 1
check 2 "--format 'xls'" info "$dir/a.csv" --format xls
check 2 "exactly one FILE" info
check 0 "usage: fedkern data info" --help
[ "$fails" -eq 0 ] && echo "cli_data: all checks passed"
exit $((fails > 0))
