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
# loader options and preprocessing, as a client's data.NAME.* keys take them
printf 'x;lab;y\n0.5;7;2\n1.5;8;4\n2.5;7;6\n' >"$dir/semi.csv"
check 0 "rows=3 cols=2 classes=2" info "$dir/semi.csv" --label 2 --header --delim semicolon
check 0 "class rows: 7:2 8:1" info "$dir/semi.csv" --label 2 --header --delim ';'
check 0 "finite: yes" info "$dir/semi.csv" --label 2 --header --delim ';'
check 1 "label column 4 does not exist" info "$dir/semi.csv" --label 4 --header --delim ';'
check 2 "--label 'middle'" info "$dir/a.csv" --label middle
check 2 "--prep 'l1,whiten': unknown step 'whiten'" info "$dir/a.csv" --prep l1,whiten
check 1 "--save_affine needs a zscore step" info "$dir/a.csv" --save_affine "$dir/m.csv"
check 0 "rows=3 cols=2 classes=2" info "$dir/a.csv" --prep zscore --save_affine "$dir/m.csv"
z=$("$fk" data info "$dir/a.csv" --prep zscore | head -1)
check 0 "$z" info "$dir/a.csv" --affine "$dir/m.csv"
check 1 "the affine map" info "$dir/wide.csv" --label none --affine "$dir/m.csv"
check 1 "catalog data set with its own loader settings" info pendigits/train --label last
# split: one file per client, per-client class counts, the same files for the same seed
awk 'BEGIN { for (i = 0; i < 120; i++) printf "%d,%d,%d\n", i % 4, i % 6, i }' >"$dir/big.csv"
check 0 "client0.csv rows=40 classes 0:" split "$dir/big.csv" --clients 3 --by iid --seed 5 --out "$dir/s1"
"$fk" data split "$dir/big.csv" --clients 3 --by iid --seed 5 --out "$dir/s2" >/dev/null
cmp -s "$dir/s1/client2.csv" "$dir/s2/client2.csv" || { echo "FAIL: split is not deterministic"; fails=$((fails + 1)); }
"$fk" data split "$dir/big.csv" --clients 3 --by iid --seed 6 --out "$dir/s3" >/dev/null
cmp -s "$dir/s1/client2.csv" "$dir/s3/client2.csv" && { echo "FAIL: split ignores the seed"; fails=$((fails + 1)); }
check 0 "rows=40 cols=2 classes=4" info "$dir/s1/client1.csv"
check 0 "client0.csv rows=30 classes 0:30 1:0" split "$dir/big.csv" --clients 4 --by label-skew --out "$dir/s4"
check 0 "client2.csv" split "$dir/big.csv" --clients 3 --by dirichlet:0.5 --seed 2 --out "$dir/s5"
check 0 "client1.csv rows=40" split "$dir/big.csv" --clients 3 --by column:1 --out "$dir/s6"
check 1 "6 distinct values, fewer than the 7 clients" split "$dir/big.csv" --clients 7 --by column:1 --out "$dir/s7"
check 1 "needs class labels" split "$dir/big.csv" --label none --clients 2 --by label-skew --out "$dir/s8"
check 2 "--by 'random'" split "$dir/big.csv" --clients 2 --by random --out "$dir/s9"
check 2 "split needs --clients K" split "$dir/big.csv" --by iid --out "$dir/s9"
# built-in synthetic data carries class indices only: info and split used to crash on it
check 0 "class rows: 0:40 1:40 2:40 3:40 4:40" info synthetic/shift:client=0
check 0 "client0.csv rows=200 classes 0:40" split synthetic/shift:client=0 --clients 1 --by iid --out "$dir/s10"
check 0 "rows=200 cols=32 classes=5" info "$dir/s10/client0.csv"
# every fedkern program pins the BLAS thread count; a value that is not a count is one clear error
FK_BLAS_THREADS=2x check 2 "FK_BLAS_THREADS = '2x' is not a thread count" info synthetic/shift:client=0
FK_BLAS_THREADS=2 check 0 "class rows: 0:40" info synthetic/shift:client=0
[ "$fails" -eq 0 ] && echo "cli_data: all checks passed"
exit $((fails > 0))
