#!/bin/sh
# Jobs in, against the real daemons on 127.0.0.1 over mTLS (issue 23): unknown job keys are
# refused at submit with the nearest known key, an unknown flag is exit 2 for fedkern,
# fedkern-server and fedkern-client before any other check, the old '-' spellings work with
# a warning, `job list` lists, `job status --follow` prints a line per round and exits 0 for
# a done job and 1 for a cancelled one, `job result --wait` exits non-zero for an unfinished
# job, `job result --selected` writes the model of the round with the best likelihood, a
# cancelled job keeps its last completed model (`--current`), and `fedkern sim --job` runs the
# submitted file in process to the same losses.
set -u
fk=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
bin=$(dirname "$fk")
dir=$(mktemp -d)
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; sleep 0.3; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.log "$dir"/*.txt; do [ -f "$f" ] && { echo "== $f"; tail -n 8 "$f"; }; done; exit 1; }
# expect CODE WHAT CMD...: CMD exits with CODE (stdout+stderr in out.txt)
expect() { want=$1; what=$2; shift 2; "$@" >out.txt 2>&1; got=$?; [ "$got" -eq "$want" ] || fail "$what: exit $got, want $want"; }
cd "$dir" || exit 1

# --- usage errors first: no server, no certificates needed
expect 2 "server unknown flag" "$bin/fedkern-server" --listne 127.0.0.1:1
grep -q "unknown option '--listne'; did you mean '--listen'?" out.txt || fail "server: no suggestion: $(cat out.txt)"
expect 2 "server unknown flag before missing tls" "$bin/fedkern-server" --log_levl debug
grep -q "did you mean '--log_level'" out.txt || fail "server log_levl: $(cat out.txt)"
expect 2 "client unknown flag" "$bin/fedkern-client" --backoff_max 100 --data.x y.csv
grep -q "did you mean '--backoff_max_ms'" out.txt || fail "client: no suggestion: $(cat out.txt)"
printf 'listen = 127.0.0.1:1\nlog_levle = info\n' >bad-server.conf
expect 2 "server unknown config key" "$bin/fedkern-server" --config bad-server.conf
grep -q "bad-server.conf: unknown key 'log_levle'; did you mean 'log_level'" out.txt || fail "config key: $(cat out.txt)"
expect 2 "job unknown flag" "$fk" job status 1 --folow
grep -q "unknown option '--folow'; did you mean '--follow'" out.txt || fail "job flag: $(cat out.txt)"
expect 2 "job flag of another subcommand" "$fk" job status 1 --wait 3
expect 2 "job unknown subcommand" "$fk" job lst
# the old spelling works and warns once (here the server then fails on its missing certificates: 1)
expect 1 "server old spelling" "$bin/fedkern-server" --log-level info --tls-dir nowhere
grep -q "warning: '--log-level' is the old spelling of '--log_level'" out.txt || fail "no warning: $(cat out.txt)"
grep -q "unknown" out.txt && fail "old spelling refused: $(cat out.txt)"

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$fk" certs init --dir pki >/dev/null && "$fk" certs issue --dir pki --server server --ip 127.0.0.1 >/dev/null \
  && "$fk" certs issue --dir pki --admin op >/dev/null || fail "certs"
for c in c0 c1 c2; do "$fk" certs issue --dir pki --client $c >/dev/null || fail "cert $c"; done
/usr/bin/python3 - <<'PY'
import random
random.seed(3)
for k in range(3):
    with open(f"c{k}.csv", "w") as f:
        for i in range(80):
            c = i % 2
            f.write(f"{c},{random.gauss(3 * c, 1):.6f},{random.gauss(-2 * c, 1):.6f}\n")
PY
"$bin/fedkern-server" --listen 127.0.0.1:$port --tls_dir pki --state state.db \
  --allow c0,c1,c2 --admins op --metrics_listen off >server.log 2>&1 &
pids="$pids $!"
sleep 0.5
for c in c0 c1 c2; do
  printf '[data]\ngmm = %s.csv\n' $c >$c.conf
  "$bin/fedkern-client" --server 127.0.0.1:$port --server_name server --tls_dir pki \
    --name $c --config $c.conf >$c.log 2>&1 &
  pids="$pids $!"
done
conn="--server 127.0.0.1:$port --server_name server --tls_dir pki --name op"
# job submit refuses clients that never joined; --wait_clients waits for them (no polling here):
# first a client that never joins (refused once the wait is over), then the three just started
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c9\n' >c9.conf
expect 1 "wait_clients for a client that never joins" "$fk" job submit c9.conf $conn --wait_clients 1
[ "$(grep -c 'never joined' out.txt)" = 1 ] || fail "wait_clients c9: $(cat out.txt)"
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c1, c2\nrounds = 3\nR = 2\nrestarts = 2\nquorum = 1\ndeadline = 20\n' >job.conf
"$fk" job submit job.conf $conn --wait_clients 20 >id.txt 2>submit.txt || fail "submit --wait_clients: $(cat submit.txt)"

# an unknown key is refused at submit, naming the nearest known key; nothing is stored
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c1, c2\nrounds = 3\nR = 2\nrestarts = 2\nquorum = 1\ndeadline = 20\nrestrats = 2\n' >typo.conf
expect 1 "typo submit" "$fk" job submit typo.conf $conn
grep -q "unknown job key 'restrats' (did you mean 'restarts'?) for job type fedgrem" out.txt || fail "typo: $(cat out.txt)"
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c1, c2\nsampling = 0.5\n' >sampling.conf
expect 1 "sampling submit" "$fk" job submit sampling.conf $conn
grep -q "unknown job key 'sampling'" out.txt || fail "sampling: $(cat out.txt)"

[ "$(cat id.txt)" = 1 ] || fail "first job id: $(cat id.txt)"
expect 0 "follow done job" "$fk" job status 1 --follow $conn
[ "$(grep -c '^job 1 round [123]/3:' out.txt)" -eq 3 ] || fail "follow: not one line per round: $(cat out.txt)"
grep -q "^job 1: done after 3 of 3 rounds" out.txt || fail "follow end: $(cat out.txt)"
cp out.txt follow.txt
# --selected: the model of the round whose loss (the likelihood the clients measured on it in
# the next round) is the smallest, the earliest of equals; the last model stays what
# `job result` writes
best=$(awk '/^job 1 round [23]\/3:/ { for (i = 1; i < NF; i++) if ($i == "loss") v = $(i + 1);
  split($4, a, "/"); if (b == "" || v + 0 < bv + 0) { b = a[1] - 1; bv = v } } END { print b }' follow.txt)
[ -n "$best" ] || fail "no loss per round in: $(cat follow.txt)"
expect 0 "result --selected" "$fk" job result 1 --out sel.bin --selected $conn
grep -q "^selected model of round $best: loss .* (smallest), measured in round $((best + 1))" out.txt ||
  fail "selected: want round $best: $(cat out.txt)"
expect 0 "model show selected" "$fk" model show sel.bin
grep -Eq "^ *round +$best\$" out.txt || fail "selected model: not round $best: $(cat out.txt)"
expect 0 "result (last)" "$fk" job result 1 --out last.bin --json $conn
grep -q '"model_round":3,"selected_by":""' out.txt || fail "last model: $(cat out.txt)"
cmp -s sel.bin last.bin && fail "the selected model of round $best is the last one"

# a long job: result --wait gives up with a non-zero exit and writes nothing; cancelled, follow exits 1
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c1, c2\nrounds = 100000\nR = 2\nrestarts = 2\nquorum = 1\ndeadline = 20\n' >long.conf
"$fk" job submit long.conf $conn >/dev/null || fail "submit long"
expect 1 "result --wait timeout" "$fk" job result 2 --out model2.bin --wait 1 $conn
grep -q "nothing written" out.txt || fail "wait: $(cat out.txt)"
[ -e model2.bin ] && fail "wait timeout wrote a model"
# a status call that times out is tried again within --wait, not the end of the wait (issue 35)
expect 1 "result --wait retries timeouts" "$fk" job result 2 --out model2.bin --wait 2 --timeout_ms 1 $conn
grep -q "DEADLINE_EXCEEDED; trying again" out.txt && grep -q "tries)" out.txt || fail "wait retry: $(cat out.txt)"
expect 0 "list" "$fk" job list $conn
grep -Eq '^1 +fedgrem +done +3 ' out.txt || fail "list job 1: $(cat out.txt)"
grep -Eq '^2 +fedgrem +running ' out.txt || fail "list job 2: $(cat out.txt)"
head -n 2 out.txt | tail -n 1 | grep -q '^2 ' || fail "list: newest first: $(cat out.txt)"
expect 0 "health" "$fk" health $conn
grep -q "^SERVING (" out.txt || fail "health: $(cat out.txt)"
expect 0 "job health --json" "$fk" job health --json $conn
grep -q '"status":"SERVING"' out.txt || fail "health json: $(cat out.txt)"
# (a completed round first, so the cancelled job has a model to keep)
for i in $(seq 100); do
  "$fk" job status 2 --json $conn >st.txt 2>&1
  grep -q "\"rounds_done\":0," st.txt || break
  sleep 0.1
done
"$fk" job cancel 2 $conn >/dev/null || fail "cancel"
expect 1 "follow cancelled job" "$fk" job status 2 --follow $conn
grep -q "^job 2: cancelled after" out.txt || fail "follow cancelled: $(cat out.txt)"
# a cancelled job keeps the model of its last completed round: --current writes it
expect 1 "result of a cancelled job" "$fk" job result 2 --out model2.bin $conn
grep -q "cancelled.*--current writes the model of its last completed round" out.txt ||
  fail "cancelled result: $(cat out.txt)"
[ -e model2.bin ] && fail "cancelled result without --current wrote a model"
done2=$("$fk" job status 2 --json $conn | sed -n 's/.*"rounds_done":\([0-9]*\),.*/\1/p')
[ -n "$done2" ] && [ "$done2" -ge 1 ] || fail "cancelled job: rounds completed '$done2'"
expect 0 "result --current of a cancelled job" "$fk" job result 2 --out model2.bin --current $conn
grep -q "^job 2: cancelled, model [0-9]* bytes written to model2.bin" out.txt ||
  fail "cancelled --current: $(cat out.txt)"
expect 0 "model show of a cancelled job's model" "$fk" model show model2.bin
grep -Eq "^ *round +$done2\$" out.txt || fail "cancelled model: not round $done2: $(cat out.txt)"

# the same job file in process: the same loss per round as the daemons
expect 0 "sim --job" "$fk" sim --job job.conf --data c2=c2.csv --data c0=c0.csv --data c1=c1.csv
for r in 1 2 3; do
  d=$(sed -n "s/^job 1 round $r\/3:.* loss \([^ ]*\).*/\1/p" follow.txt)
  s=$(sed -n "s/^fedgrem round *$r .* loss *\([^ ]*\) .*/\1/p" out.txt)
  [ -n "$d" ] && [ "$(printf '%.5g' "$d")" = "$(printf '%.5g' "$s")" ] || fail "round $r: daemons loss '$d', sim loss '$s'"
done
cp out.txt simjob.txt
# a method with a runner of its own runs a job file through the generic runner too
expect 0 "sim fedgrem --job" "$fk" sim fedgrem --job job.conf --data c2=c2.csv --data c0=c0.csv --data c1=c1.csv
cmp -s out.txt simjob.txt || fail "sim fedgrem --job differs from sim --job: $(cat out.txt)"
printf 'method = fedrf-tca\nclients = c0, c1, c2\nrounds = 2\nclasses = 2\n' >tca.conf
expect 0 "sim fedrf-tca --job" "$fk" sim fedrf-tca --job tca.conf --data c0=c0.csv --data c1=c1.csv --data c2=c2.csv
grep -q "^fedrf-tca round *2 *participants *3/3" out.txt || fail "sim fedrf-tca --job: $(cat out.txt)"
expect 2 "sim fedgrem-mor --job of a fedgrem file" "$fk" sim fedgrem-mor --job job.conf --data c0=c0.csv
grep -q "job file for method fedgrem, not for 'sim fedgrem-mor'" out.txt || fail "mor: $(cat out.txt)"
# fedkern data's loader options apply to every --data file: label last, a header, ';'
/usr/bin/python3 - <<'PY'
for k in range(3):
    with open(f"l{k}.csv", "w") as f:
        f.write("x;y;label\n")
        for l in open(f"c{k}.csv"):
            r = l.strip().split(",")
            f.write(";".join(r[1:] + r[:1]) + "\n")
PY
expect 0 "sim --job loader options" "$fk" sim fedgrem --job job.conf --data c0=l0.csv --data c1=l1.csv \
  --data c2=l2.csv --label last --header --delim ";"
cmp -s out.txt simjob.txt || fail "sim --job with loader options differs: $(cat out.txt)"
expect 2 "sim --job loader option typo" "$fk" sim --job job.conf --data c0=l0.csv --data c1=l1.csv \
  --data c2=l2.csv --label lst
grep -q "label" out.txt || fail "label lst: $(cat out.txt)"
# job status --json: job_clients is the job's clients; clients (planned this round) is 0 once done
expect 0 "status json" "$fk" job status 1 --json $conn
/usr/bin/python3 -c 'import json,sys; d=json.load(open("out.txt")); assert d["job_clients"] == 3 and d["clients"] == 0, d' ||
  fail "status json: $(cat out.txt)"
expect 0 "status text" "$fk" job status 1 $conn
grep -q "^job 1: done, method fedgrem, 3 of 3 rounds done, 3 clients" out.txt || fail "status text: $(cat out.txt)"
# job predict takes the loader options: the same answers for the same rows written otherwise
printf 'method = kahm\ndataset = gmm\nclients = c0, c1, c2\nquorum = 1\ndeadline = 20\n' >kahm.conf
"$fk" job submit kahm.conf $conn >kid.txt || fail "submit kahm"
kid=$(cat kid.txt)
expect 0 "follow kahm" "$fk" job status $kid --follow $conn
expect 0 "job predict" "$fk" job predict $kid --data c0.csv --out p0.csv --json $conn
cp out.txt p0.json
expect 0 "job predict loader options" "$fk" job predict $kid --data l0.csv --label last --header --delim ";" \
  --out pl.csv --json $conn
[ "$(wc -l <p0.csv)" -eq 80 ] && cmp -s p0.csv pl.csv && cmp -s p0.json out.txt || fail "job predict with loader options: $(cat out.txt p0.json)"
expect 2 "job predict loader option typo" "$fk" job predict $kid --data l0.csv --lable last $conn
grep -q "did you mean '--label'" out.txt || fail "predict lable: $(cat out.txt)"
expect 2 "sim --job typo" "$fk" sim --job typo.conf --data c0=c0.csv --data c1=c1.csv --data c2=c2.csv
grep -q "'restrats' (did you mean 'restarts'?)" out.txt || fail "sim typo: $(cat out.txt)"
expect 1 "sim --job missing client" "$fk" sim --job job.conf --data c0=c0.csv --data c1=c1.csv
grep -q "client 'c2' of the job has no --data c2=FILE" out.txt || fail "sim missing: $(cat out.txt)"
# pooled-em as a job file (it ran into its final evaluation with no model: "the pooled-em model
# sent no 'theta'"): a round budget that ends before its EM stage gives a model that is not
# ready, unscored (nan) and said so; without `rounds` its own budget runs it to convergence
printf 'method = pooled-em\nclients = c0, c1, c2\nrounds = 3\nR = 2\nseed = 1\n' >pem.conf
expect 0 "sim --job pooled-em, 3 rounds" "$fk" sim --job pem.conf --data c0=c0.csv --data c1=c1.csv --data c2=c2.csv
grep -q "the model is not ready after 3 rounds" out.txt || fail "pooled-em 3 rounds: $(cat out.txt)"
[ "$(grep -c "^pooled-em final client .* loss *nan" out.txt)" -eq 3 ] || fail "pooled-em 3 rounds: $(cat out.txt)"
grep -v rounds pem.conf >pem2.conf
expect 0 "sim --job pooled-em" "$fk" sim --job pem2.conf --data c0=c0.csv --data c1=c1.csv --data c2=c2.csv
[ "$(grep -c "^pooled-em final client .* loss *[0-9.-]* *accuracy *[0-9.]" out.txt)" -eq 3 ] &&
  ! grep -q "not ready" out.txt || fail "pooled-em: $(cat out.txt)"
echo ok
