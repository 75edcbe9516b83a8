#!/bin/sh
# fedkern demo end to end: the real daemons on 127.0.0.1 over mTLS, both jobs to
# completion, each daemon model equal to the in-process simulation, every daemon
# gone afterwards; plus the clear errors (no daemons beside fedkern, bad option).
set -u
fk=$1
rounds=20
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v timeout >/dev/null || fail "timeout(1) missing"

timeout -s INT 100 "$fk" demo --clients 3 --rounds $rounds --workdir "$dir/w" --json --no-plots \
  >"$dir/out.json" 2>"$dir/err.txt"
rc=$?
[ $rc = 0 ] || { cat "$dir/err.txt"; tail -n 5 "$dir/out.json"; fail "demo exited $rc"; }
/usr/bin/python3 - "$dir/out.json" $rounds <<'PY' || fail "JSON checks"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rounds = int(sys.argv[2])
final = {l["method"]: l for l in lines if "state" in l}
per_round = [l for l in lines if "round" in l]
assert set(final) == {"fedrf-tca", "fedgrem"}, final
for m, f in final.items():
    assert f["state"] == "done" and f["rounds"] == rounds, f
    assert f["daemon_equals_sim"] is True, f
    got = sorted(l["round"] for l in per_round if l["method"] == m)
    assert got == list(range(1, rounds + 1)), (m, got)
    assert all(l["participants"] == l["planned"] > 0 for l in per_round if l["method"] == m)
t, g = final["fedrf-tca"], final["fedgrem"]
assert t["clients"] == 3 and g["clients"] == 10, (t, g)
# 5 classes: chance is 0.2; the demo task reaches about 0.7 by round 20
assert 0.5 < t["accuracy"] <= 1 and t["accuracy"] == t["sim_accuracy"], t
assert 0 <= g["error"] < 0.1 and g["error"] == g["sim_error"], g
PY
for f in pki/ca.pem server.log client-c9.log fedrf-tca.conf fedgrem.dat fedrf-tca-model.bin; do
  [ -s "$dir/w/$f" ] || fail "missing $f in the work directory"
done
grep -q "event=server_stopped" "$dir/w/server.log" || fail "server not stopped with SIGTERM"
grep -q "event=client_stopped" "$dir/w/client-c0.log" || fail "client not stopped with SIGTERM"
sleep 0.2
pgrep -f "$dir/w/" >/dev/null && fail "daemons left running"

# a fedkern without its daemons beside it: one clear error, exit 1
mkdir "$dir/bin" && cp "$fk" "$dir/bin/fedkern"
"$dir/bin/fedkern" demo --workdir "$dir/w2" >/dev/null 2>"$dir/err2.txt"; [ $? = 1 ] || fail "missing daemons not exit 1"
grep -q "^fedkern demo: fedkern-server not found: looked for $dir/bin/fedkern-server" "$dir/err2.txt" \
  || fail "missing-daemon message: $(cat "$dir/err2.txt")"
"$fk" demo --colour red 2>/dev/null; [ $? = 2 ] || fail "unknown option not a usage error"
"$fk" demo --help | grep -q -- "--in-process" || fail "--help"
echo ok
