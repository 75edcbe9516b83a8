#!/bin/sh
# Job ownership against the real daemons on 127.0.0.1 over mTLS (issue 33): a job belongs to
# the admin who submitted it; another admin may not read it (status, result, list), predict
# on it or cancel it unless the server's admins list makes it an operator (NAME:operator);
# the owner survives a server restart; a misspelt role stops the server.
set -u
fk=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
bin=$(dirname "$fk")
dir=$(mktemp -d)
pids=""
spid=""
cleanup() { for p in $pids $spid; do kill "$p" 2>/dev/null; done; sleep 0.3; rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.log "$dir"/*.txt; do [ -f "$f" ] && { echo "== $f"; tail -n 8 "$f"; }; done; exit 1; }
# expect CODE WHAT CMD...: CMD exits with CODE (stdout+stderr in out.txt)
expect() { want=$1; what=$2; shift 2; "$@" >out.txt 2>&1; got=$?; [ "$got" -eq "$want" ] || fail "$what: exit $got, want $want: $(cat out.txt)"; }
cd "$dir" || exit 1

port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$fk" certs init --dir pki >/dev/null && "$fk" certs issue --dir pki --server server --ip 127.0.0.1 >/dev/null || fail "certs"
for a in alice bob ops mallory; do "$fk" certs issue --dir pki --admin $a >/dev/null || fail "cert $a"; done
for c in c0 c1; do "$fk" certs issue --dir pki --client $c >/dev/null || fail "cert $c"; done
for k in 0 1; do
  /usr/bin/python3 -c "
import random
random.seed($k)
for i in range(60):
    c = i % 2
    print(f'{c},{random.gauss(3 * c, 1):.6f},{random.gauss(-2 * c, 1):.6f}')" >c$k.csv
done
server() {
  OPENBLAS_NUM_THREADS=1 "$bin/fedkern-server" --listen 127.0.0.1:$port --tls_dir pki --state state.db \
    --allow c0,c1 --admins "alice,bob:owner,ops:operator" --metrics_listen off >>server.log 2>&1 &
  spid=$!
  sleep 0.5
}
# a misspelt role is refused at start, naming the nearest one
expect 1 "misspelt role" "$bin/fedkern-server" --listen 127.0.0.1:$port --tls_dir pki --state x.db \
  --admins "alice,ops:operatr" --metrics_listen off
grep -q "unknown role 'operatr'; did you mean 'operator'" out.txt || fail "role typo: $(cat out.txt)"
server
for c in c0 c1; do
  printf '[data]\ngmm = %s.csv\n' $c >$c.conf
  OPENBLAS_NUM_THREADS=1 "$bin/fedkern-client" --server 127.0.0.1:$port --server_name server --tls_dir pki \
    --name $c --config $c.conf >$c.log 2>&1 &
  pids="$pids $!"
done
as() { who=$1; shift; "$fk" job "$@" --server 127.0.0.1:$port --server_name server --tls_dir pki --name "$who"; }
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c1\nrounds = 2\nR = 2\nrestarts = 2\nquorum = 1\ndeadline = 20\n' >job.conf
as alice submit job.conf --wait_clients 20 >id.txt 2>submit.txt || fail "alice submit: $(cat submit.txt)"
id=$(cat id.txt)
expect 0 "alice follows her job" as alice status "$id" --follow
# bob, an admin too, is not the owner: every use of the job is refused, naming why
for call in "status $id" "result $id --out m.bin" "cancel $id" "predict $id --data c0.csv" "delete $id"; do
  # shellcheck disable=SC2086
  expect 1 "bob: $call" as bob $call
  grep -q "PERMISSION_DENIED.*job $id belongs to another admin" out.txt || fail "bob $call: $(cat out.txt)"
done
[ -e m.bin ] && fail "bob got alice's model"
expect 0 "bob lists" as bob list
grep -Eq "^$id " out.txt && fail "bob sees alice's job in the list: $(cat out.txt)"
grep -q "job=$id reason=not_owner" server.log || fail "refusal not logged"
# mallory holds an admin certificate but is not on the list: refused as before
expect 1 "mallory" as mallory status "$id"
grep -q "PERMISSION_DENIED" out.txt || fail "mallory: $(cat out.txt)"
# the operator may read it, and the owner may too
expect 0 "ops status" as ops status "$id"
expect 0 "ops list" as ops list
grep -Eq "^$id +fedgrem +done" out.txt || fail "ops list: $(cat out.txt)"
expect 0 "alice result" as alice result "$id" --out m.bin
[ -s m.bin ] || fail "alice's model not written"
# bob's own job is his: alice may not cancel it, bob and the operator may
printf 'method = fedgrem\ndataset = gmm\nclients = c0, c1\nrounds = 100000\nR = 2\nrestarts = 2\nquorum = 1\ndeadline = 20\n' >long.conf
as bob submit long.conf >id2.txt 2>submit2.txt || fail "bob submit: $(cat submit2.txt)"
id2=$(cat id2.txt)
expect 1 "alice cancels bob's job" as alice cancel "$id2"
grep -q "job $id2 belongs to another admin" out.txt || fail "alice cancel: $(cat out.txt)"
# the owner is stored with the job: the same after a restart
kill "$spid"; wait "$spid" 2>/dev/null
server
expect 1 "bob after restart" as bob status "$id"
grep -q "job $id belongs to another admin" out.txt || fail "bob after restart: $(cat out.txt)"
expect 0 "alice after restart" as alice status "$id"
expect 0 "ops cancels bob's job" as ops cancel "$id2"
# delete (issue 35): not alice's to delete; bob deletes his cancelled job, alice's stays
expect 1 "alice deletes bob's job" as alice delete "$id2"
grep -q "job $id2 belongs to another admin" out.txt || fail "alice delete: $(cat out.txt)"
expect 0 "bob deletes his job" as bob delete "$id2"
expect 1 "bob's job is gone" as ops status "$id2"
grep -q "NOT_FOUND" out.txt || fail "deleted job: $(cat out.txt)"
expect 0 "alice's job stays" as alice status "$id"
echo "cli_owners: all checks passed"
