#!/usr/bin/env bash
# fedkern-client loads and checks every declared data set at start: a missing file, a file of
# the wrong format, a NaN, a bad loader option stop it before it joins, with one error line
# naming the data set (exit 1); an unknown key in any section ([data] loader options and
# [local] consents and caps included) is a usage error (exit 2) naming the nearest key; good
# data sets are loaded with their options.
# Usage: cli_client_data.sh FEDKERN FEDKERN-CLIENT
set -u
fk=$1
client=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
"$fk" certs init --dir "$dir/pki" >/dev/null || exit 1
"$fk" certs issue --dir "$dir/pki" --client site-a >/dev/null || exit 1
base=(--server 127.0.0.1:1 --tls_dir "$dir/pki" --name site-a --backoff_max_ms 200)
check() { # check WANT-EXIT NEEDLE ARGS...: the client's exit status and its one error line
  # (data sets loaded before the bad one are logged on stderr too)
  local want=$1 needle=$2
  shift 2
  timeout 10 "$client" "${base[@]}" "$@" >"$dir/out" 2>"$dir/err"
  local got=$?
  if [ "$got" -ne "$want" ] || ! grep -qF -- "$needle" "$dir/err"; then
    echo "FAIL: $* -> exit $got (want $want): $(cat "$dir/err")"; fails=$((fails + 1))
  elif [ "$(grep -c '^fedkern-client:' "$dir/err")" -ne 1 ]; then
    echo "FAIL: $* -> the error is not one line: $(cat "$dir/err")"; fails=$((fails + 1))
  fi
}
printf '1,0.5,2\n2,1.5,4\n' >"$dir/good.csv"
printf '1,0.5,2\n2,nan,4\n' >"$dir/nan.csv"
printf 'not a matlab file, but long enough to have a header of one hundred and twenty-eight bytes..........................................\n' >"$dir/x.mat"
check 1 "data set 'train' (data.train = $dir/missing.csv): $dir/missing.csv: cannot open" --data.train "$dir/missing.csv"
check 1 "data set 'train'" --data.ok "$dir/good.csv" --data.train "$dir/x.mat"
check 1 "nan.csv:2: column 2: NaN or Inf" --data.train "$dir/nan.csv"
check 1 "data.train.label = 'middle'" --data.train "$dir/good.csv" --data.train.label middle
check 2 "unknown loader option 'lable' of data set 'train' (key 'data.train.lable'); did you mean 'data.train.label'?" --data.train "$dir/good.csv" --data.train.lable last
# a misspelt consent cap must not start a client that uploads on the default cap (1)
printf 'server = 127.0.0.1:1\n[data]\ntrain = %s\n[local]\nallow_raw_upload = true\nmax_upload_fractoin = 0.05\n' \
  "$dir/good.csv" >"$dir/typo.conf"
check 2 "$dir/typo.conf: unknown key 'local.max_upload_fractoin'; did you mean 'local.max_upload_fraction'?" --config "$dir/typo.conf"
check 2 "unknown option '--local.allow_model_uplaod'; did you mean '--local.allow_model_upload'?" --data.train "$dir/good.csv" --local.allow_model_uplaod true
check 2 "unknown option '--local.anything'" --data.train "$dir/good.csv" --local.anything 1
check 2 "unknown key 'tls.cetr'; did you mean 'tls.cert'?" --config <(printf '[tls]\ncetr = x\n')
check 1 "label column 7 does not exist" --data.train "$dir/good.csv" --data.train.label 7
check 1 "fix the [data] section" --data.train synthetic/gmm:client=0,bogus=1
# good data sets: loaded (with their options) and logged, then the client tries to join
timeout 2 "$client" "${base[@]}" --data.train "$dir/good.csv" --data.train.label last \
  --data.train.prep l2 --data.gen synthetic/gmm:client=1 --local.allow_raw_upload true \
  --local.max_upload_fraction 0.05 --local.allow_model_upload false >"$dir/out" 2>&1
[ $? -eq 124 ] || { echo "FAIL: good data: the client did not keep running: $(cat "$dir/out")"; fails=$((fails + 1)); }
grep -q "event=data_loaded dataset=train .*samples=2 dims=2 classes=2" "$dir/out" ||
  { echo "FAIL: good data not logged: $(cat "$dir/out")"; fails=$((fails + 1)); }
grep -q "event=data_loaded dataset=gen " "$dir/out" ||
  { echo "FAIL: synthetic data not loaded at start: $(cat "$dir/out")"; fails=$((fails + 1)); }
[ "$fails" -eq 0 ] && echo "cli_client_data: all checks passed"
exit $((fails > 0))
