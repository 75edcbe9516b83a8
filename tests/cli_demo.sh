#!/bin/sh
# fedkern demo end to end: the real daemons on 127.0.0.1 over mTLS, all seven jobs to
# completion (fedrf-tca, fedgrem, dica, udica, kahm with one job predict, sfl binary and
# one-vs-one), each daemon model
# (and the predictions) equal to the in-process simulation, every daemon
# gone afterwards; plus the clear errors (no daemons beside fedkern, bad option).
set -u
fk=$1
rounds=20
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v timeout >/dev/null || fail "timeout(1) missing"

timeout -s INT 100 "$fk" demo --clients 3 --rounds $rounds --workdir "$dir/w" --json --no_plots \
  >"$dir/out.json" 2>"$dir/err.txt"
rc=$?
[ $rc = 0 ] || { cat "$dir/err.txt"; tail -n 5 "$dir/out.json"; fail "demo exited $rc"; }
/usr/bin/python3 - "$dir/out.json" $rounds <<'PY' || fail "JSON checks"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rounds = int(sys.argv[2])
final = {l["name"]: l for l in lines if "state" in l}
per_round = [l for l in lines if "round" in l]
predict = [l for l in lines if "predict" in l]
assert set(final) == {"fedrf-tca", "fedgrem", "dica", "udica", "kahm", "sfl", "sfl_ovo"}, final
assert final["sfl_ovo"]["method"] == "sfl", final["sfl_ovo"]
# the one-round job types (dica, udica, kahm, sfl) ignore --rounds
want_rounds = {"fedrf-tca": rounds, "fedgrem": rounds, "dica": 1, "udica": 1, "kahm": 1, "sfl": 1,
               "sfl_ovo": 1}
for m, f in final.items():
    assert f["state"] == "done" and f["rounds"] == want_rounds[m], f
    assert f["daemon_equals_sim"] is True, f
    got = sorted(l["round"] for l in per_round if l["name"] == m)
    assert got == list(range(1, want_rounds[m] + 1)), (m, got)
    assert all(l["participants"] == l["planned"] > 0 for l in per_round if l["name"] == m)
t, g = final["fedrf-tca"], final["fedgrem"]
assert t["clients"] == 3 and g["clients"] == 10, (t, g)
# 5 classes: chance is 0.2; the demo task reaches about 0.7 by round 20
assert 0.5 < t["accuracy"] <= 1 and t["accuracy"] == t["sim_accuracy"], t
assert 0 <= g["error"] < 0.1 and g["error"] == g["sim_error"], g
# dica, udica: 2 training domains + 1 unseen (3 classes, chance 1/3); kahm: 4 clients cover
# its 10 classes; sfl: two classes. Scores finite, equal to the simulation's, above chance.
d, u, k, s = final["dica"], final["udica"], final["kahm"], final["sfl"]
assert (d["clients"], u["clients"], k["clients"], s["clients"]) == (3, 3, 4, 3), (d, u, k, s)
for f, chance in ((d, 1 / 3), (u, 1 / 3), (k, 0.1), (s, 0.5)):
    assert math.isfinite(f["accuracy"]) and chance < f["accuracy"] <= 1, f
    assert f["accuracy"] == f["sim_accuracy"], f
# sfl one-vs-one: 4 classes (chance 0.25), 3 clients each lacking one class; the blobs separate
o = final["sfl_ovo"]
assert o["clients"] == 3 and 0.9 <= o["accuracy"] <= 1 and o["accuracy"] == o["sim_accuracy"], o
# one job predict through the daemons, for the kahm job, equal to the in-process model's
assert len(predict) == 1, predict
p = predict[0]
assert p["job"] == k["job"] and p["method"] == "kahm" and p["predict"] > 0, p
assert math.isfinite(p["accuracy"]) and 0.1 < p["accuracy"] <= 1, p
assert p["accuracy"] == p["sim_accuracy"] and p["daemon_equals_sim"] is True, p
PY
for f in pki/ca.pem server.log client-c9.log fedrf-tca.conf fedgrem.dat fedrf-tca-model.bin \
         dica.conf dica-c2.csv udica.conf udica-c2.csv kahm-c3.csv kahm-queries.csv kahm-model.bin sfl.conf sfl-c0.csv \
         sfl_ovo.conf sfl_ovo-c2.csv sfl_ovo-model.bin; do
  [ -s "$dir/w/$f" ] || fail "missing $f in the work directory"
done
# the data-leaving jobs: the job files opt in, the clients' own configs consent
grep -q "^upload_models = 1" "$dir/w/kahm.conf" || fail "kahm job not in mode A"
grep -q "^raw_sample_upload = acknowledged" "$dir/w/sfl.conf" || fail "sfl job not acknowledged"
grep -q "^raw_sample_upload = acknowledged" "$dir/w/sfl_ovo.conf" || fail "sfl_ovo job not acknowledged"
grep -q "^multiclass = ovo" "$dir/w/sfl_ovo.conf" || fail "sfl_ovo job not one-vs-one"
grep -q "^local\." "$dir/w/kahm.conf" "$dir/w/sfl.conf" "$dir/w/sfl_ovo.conf" && fail "a job file sets local.* keys"
grep -A2 "^\[local\]" "$dir/w/client-c0.conf" | grep -q "allow_raw_upload = true" || fail "client consent"
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
"$fk" demo --help | grep -q -- "--in_process" || fail "--help"

# --in_process: the same seven jobs and the predict row, no daemons
"$fk" demo --in_process --clients 3 --rounds 5 --workdir "$dir/w3" --json --no_plots \
  >"$dir/ip.json" 2>/dev/null || fail "--in_process exited $?"
/usr/bin/python3 - "$dir/ip.json" <<'PY' || fail "--in_process JSON checks"
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [l for l in lines if "round" not in l]
assert [l["method"] for l in rows] == ["fedrf-tca", "fedgrem", "dica", "udica", "kahm", "kahm",
                                      "sfl", "sfl"], rows
assert rows[-1]["name"] == "sfl_ovo" and rows[-1]["accuracy"] >= 0.9, rows[-1]
for l in rows:
    v = l.get("accuracy", l.get("error"))
    assert v is not None and math.isfinite(v), l
assert rows[5]["predict"] > 0, rows[5]
PY
echo ok
