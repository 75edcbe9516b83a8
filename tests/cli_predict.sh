#!/bin/sh
# A trained model is something you use (issue 34), through the real daemons on 127.0.0.1 over
# mTLS: a clustering (fedgrem) and a domain-generalisation classifier (dica) train, then
#  - `job predict` (the server's predict op) and `model eval` of `job result`'s file (no server,
#    no client config) score a held-out file the same;
#  - `model eval` of each client's own file gives the quality the job reports for that client
#    (`fedkern sim --job`'s final per-client evaluation, the same ops on the same data, whose
#    model equals the daemons' byte for byte);
#  - a file of the wrong width gets one clear error, and a per-client mixture without --client
#    says which option to give.
# Usage: cli_predict.sh FEDKERN (fedkern-server and fedkern-client beside it)
set -u
fk=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
bin=$(dirname "$fk")
dir=$(mktemp -d); [ -n "${KEEP:-}" ] && echo "dir $dir"
pids=""
cleanup() { for p in $pids; do kill "$p" 2>/dev/null; done; sleep 0.3; [ -n "${KEEP:-}" ] || rm -rf "$dir"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; for f in "$dir"/*.log; do echo "== $f"; tail -n 5 "$f"; done; exit 1; }
cd "$dir" || exit 1
port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$fk" certs init --dir pki >/dev/null && "$fk" certs issue --dir pki --server server --ip 127.0.0.1 >/dev/null \
  && "$fk" certs issue --dir pki --admin op >/dev/null || fail "certs"
for c in s0 s1 s2; do "$fk" certs issue --dir pki --client $c >/dev/null || fail "cert $c"; done
# blobs: 5 Gaussian clusters dealt to three sites, and 200 new rows of the same mixture;
# dom0..dom3: four shifted domains of one 4-class problem (dom3 is never trained on)
"$fk" data split synthetic/gmm:client=0,samples=300 --clients 3 --by dirichlet:1 --seed 1 \
  --out sites >/dev/null || fail "split blobs"
"$fk" data split synthetic/gmm:client=1,samples=200 --clients 1 --by iid --out gen >/dev/null &&
  mv gen/client0.csv new.csv || fail "split new rows"
for k in 0 1 2 3; do
  "$fk" data split synthetic/shift:client=$k,samples=150,dims=16,classes=4 --clients 1 --by iid \
    --out d$k >/dev/null && mv d$k/client0.csv dom$k.csv || fail "split domain $k"
done
# raw0..raw3: the same domains as a raw instrument would give them (another unit and offset
# per column); the clients z-score them (data.raw.prep) or apply one saved map (data.rawa.affine)
/usr/bin/python3 - <<'PY' || fail "raw domains"
for k in range(4):
    with open("raw%d.csv" % k, "w") as f:
        for line in open("dom%d.csv" % k):
            v = line.strip().split(",")
            f.write(",".join([v[0]] + ["%.17g" % (float(x) * (7 + j) + 100 * j)
                                       for j, x in enumerate(v[1:])]) + "\n")
PY
"$fk" data info raw0.csv --prep zscore --save_affine aff.csv >/dev/null || fail "save affine"
OPENBLAS_NUM_THREADS=1 "$bin/fedkern-server" --listen 127.0.0.1:$port --tls_dir pki --state state.db \
  --allow s0,s1,s2 --admins op --metrics_listen off >server.log 2>&1 &
pids="$pids $!"
sleep 0.5
for k in 0 1 2; do
  OPENBLAS_NUM_THREADS=1 "$bin/fedkern-client" --server 127.0.0.1:$port --server_name server \
    --tls_dir pki --name s$k --data.blobs sites/client$k.csv --data.dom dom$k.csv \
    --data.raw raw$k.csv --data.raw.prep zscore --data.rawa raw$k.csv --data.rawa.affine aff.csv \
    >s$k.log 2>&1 &
  pids="$pids $!"
done
conn="--server 127.0.0.1:$port --server_name server --tls_dir pki --name op"
printf 'method = fedgrem\ndataset = blobs\nclients = s0, s1, s2\nrounds = 10\nseed = 1\nR = 5\n' >g.conf
printf 'method = dica\ndataset = dom\nclients = s0, s1, s2\nseed = 3\nR = 100\n' >d.conf
idg=$("$fk" job submit g.conf --wait_clients 10 $conn) || fail "submit fedgrem"
idd=$("$fk" job submit d.conf $conn) || fail "submit dica"
"$fk" job result "$idg" --out g.bin --wait 60 $conn >/dev/null 2>&1 || fail "fedgrem job did not finish"
"$fk" job result "$idd" --out d.bin --wait 60 $conn >/dev/null 2>&1 || fail "dica job did not finish"
# the same jobs in one process: per-client final scores, and the same model bytes
OPENBLAS_NUM_THREADS=1 "$fk" sim --job g.conf --data s0=sites/client0.csv --data s1=sites/client1.csv \
  --data s2=sites/client2.csv --model_out gs.bin --json >gs.json 2>gs.err || fail "sim fedgrem: $(cat gs.err)"
OPENBLAS_NUM_THREADS=1 "$fk" sim --job d.conf --data s0=dom0.csv --data s1=dom1.csv --data s2=dom2.csv \
  --model_out ds.bin --json >ds.json 2>ds.err || fail "sim dica: $(cat ds.err)"
for m in "g $idg" "d $idd"; do
  set -- $m
  nd=$(( $(wc -c <$1.bin) - 27 - ${#2} )); ns=$(( $(wc -c <$1s.bin) - 27 - 3 ))
  [ "$nd" = "$ns" ] && cmp -s -n "$nd" $1.bin $1s.bin || fail "$1: the daemons' model differs from the simulation's"
done
# held-out rows, both ways: the server's predict op and the model file alone
"$fk" job predict "$idg" --data new.csv --client 1 --json $conn >gp.json 2>gp.err || fail "job predict fedgrem: $(cat gp.err)"
"$fk" model eval g.bin --data new.csv --client 1 --json >ge.json || fail "model eval fedgrem"
# a file sent in several calls (a small message limit) gets the same answers, row by row
"$fk" job predict "$idg" --data new.csv --client 1 --out gp1.csv $conn 2>/dev/null || fail "job predict in one call"
"$fk" job predict "$idg" --data new.csv --client 1 --out gpn.csv --net.max_message 8192 $conn \
  2>gpn.err || fail "job predict in batches: $(cat gpn.err)"
grep -q "queries sent in [0-9]* calls" gpn.err || fail "no batches: $(cat gpn.err)"
cmp -s gp1.csv gpn.csv || fail "batched job predict differs"
"$fk" job predict "$idd" --data dom3.csv --json $conn >dp.json 2>dp.err || fail "job predict dica: $(cat dp.err)"
"$fk" model eval d.bin --data dom3.csv --json >de.json || fail "model eval dica"
# each client's own file: the quality the job's final evaluation reports for that client
for k in 0 1 2; do
  "$fk" model eval g.bin --data sites/client$k.csv --client $k --json >ge$k.json || fail "model eval fedgrem client $k"
  "$fk" model eval d.bin --data dom$k.csv --json >de$k.json || fail "model eval dica client $k"
done
/usr/bin/python3 - <<'PY' || fail "scores differ"
import json
def one(f): return json.load(open(f))
def finals(f):
    return {d["client"]: d for d in map(json.loads, open(f)) if d.get("final")}
gp, ge, dp, de = one("gp.json"), one("ge.json"), one("dp.json"), one("de.json")
assert gp["queries"] == ge["rows"] == 200, (gp, ge)
for k in ("accuracy", "misclust", "ari"):
    assert abs(gp[k] - ge[k]) < 1e-9, (k, gp, ge)
assert dp["queries"] == de["rows"] == 150 and abs(dp["accuracy"] - de["accuracy"]) < 1e-9, (dp, de)
assert ge["accuracy"] > 0.9, ge  # the new rows come from the same five clusters
gf, df = finals("gs.json"), finals("ds.json")
for k in range(3):
    g, d = one("ge%d.json" % k), one("de%d.json" % k)
    assert abs(g["accuracy"] - gf[k]["accuracy"]) < 1e-8, (k, g, gf[k])
    assert abs(d["accuracy"] - df[k]["accuracy"]) < 1e-8, (k, d, df[k])
print("fedgrem new rows: accuracy %.4f (1 - misclust), ari %.4f; dica unseen domain: accuracy %.4f"
      % (ge["accuracy"], ge["ari"], de["accuracy"]))
PY
# bad input: rows of another width, one clear error; a per-client mixture without --client
"$fk" job predict "$idd" --data new.csv $conn >bad.out 2>bad.err && fail "dica predicted 10-column rows"
grep -q "the rows have 10 columns but the model was trained on 16 features" bad.err &&
  [ "$(wc -l <bad.err)" -eq 1 ] || fail "wrong width: $(cat bad.err)"
"$fk" model predict g.bin --data new.csv --out x.csv >bad.out 2>bad.err && fail "fedgrem predicted without --client"
grep -q "name the client whose mixture to use (--client N" bad.err || fail "no --client: $(cat bad.err)"
# issue 34: the clients' own preprocessing travels in the model. A dica job on the raw files
# the clients z-score: model show names it, model eval and job predict of the raw held-out
# domain apply it (= giving --prep zscore by hand), and the in-process sim with --prep zscore
# makes the same model; the saved affine map travels as numbers.
printf 'method = dica\ndataset = raw\nclients = s0, s1, s2\nseed = 3\nR = 100\n' >r.conf
printf 'method = dica\ndataset = rawa\nclients = s0, s1, s2\nseed = 3\nR = 100\n' >ra.conf
idr=$("$fk" job submit r.conf $conn) || fail "submit dica raw"
ida=$("$fk" job submit ra.conf $conn) || fail "submit dica rawa"
"$fk" job result "$idr" --out r.bin --wait 60 $conn >/dev/null 2>&1 || fail "dica raw job did not finish"
"$fk" job result "$ida" --out ra.bin --wait 60 $conn >/dev/null 2>&1 || fail "dica rawa job did not finish"
"$fk" model show r.bin >show.txt || fail "model show r.bin"
grep -q "client preprocessing: zscore (every client" show.txt || fail "model show: $(cat show.txt)"
"$fk" model show ra.bin >showa.txt || fail "model show ra.bin"
grep -q "client preprocessing: an affine map (16 columns)" showa.txt || fail "model show affine: $(cat showa.txt)"
"$fk" model eval r.bin --data raw3.csv --json >re.json 2>re.err || fail "model eval raw: $(cat re.err)"
grep -q "applying the clients' preprocessing the model records: zscore" re.err || fail "no note: $(cat re.err)"
"$fk" model eval r.bin --data raw3.csv --prep zscore --json >reh.json 2>/dev/null || fail "model eval --prep"
"$fk" model eval r.bin --data raw3.csv --model_prep 0 --json >ren.json 2>/dev/null || fail "model eval --model_prep 0"
"$fk" job predict "$idr" --data raw3.csv --json $conn >rp.json 2>rp.err || fail "job predict raw: $(cat rp.err)"
"$fk" model eval ra.bin --data raw3.csv --json >rae.json 2>/dev/null || fail "model eval rawa"
"$fk" model eval ra.bin --data raw3.csv --affine aff.csv --json >raeh.json 2>/dev/null || fail "model eval --affine"
OPENBLAS_NUM_THREADS=1 "$fk" sim --job r.conf --data s0=raw0.csv --data s1=raw1.csv --data s2=raw2.csv \
  --prep zscore --model_out rs.bin >/dev/null 2>rs.err || fail "sim dica raw: $(cat rs.err)"
nd=$(( $(wc -c <r.bin) - 27 - ${#idr} )); ns=$(( $(wc -c <rs.bin) - 27 - 3 ))
[ "$nd" = "$ns" ] && cmp -s -n "$nd" r.bin rs.bin || fail "raw: the daemons' model differs from the simulation's"
/usr/bin/python3 - <<'PY' || fail "preprocessing scores differ"
import json
def one(f): return json.load(open(f))
re_, reh, ren, rp, rae, raeh = map(one, ("re.json", "reh.json", "ren.json", "rp.json", "rae.json", "raeh.json"))
de = one("de.json")
assert abs(re_["accuracy"] - reh["accuracy"]) < 1e-12 and abs(rp["accuracy"] - re_["accuracy"]) < 1e-9, (re_, reh, rp)
assert abs(rae["accuracy"] - raeh["accuracy"]) < 1e-12, (rae, raeh)
assert ren["accuracy"] < re_["accuracy"] - 0.2, (ren, re_)  # the raw rows as loaded: much worse
print("dica on raw files the clients z-scored: held-out domain %.4f with the model's record, "
      "%.4f without it; affine map: %.4f" % (re_["accuracy"], ren["accuracy"], rae["accuracy"]))
PY
# dica with center_test = batch: a file sent in several calls is centred per call, and job
# predict says so (model predict centres the whole file)
printf 'method = dica\ndataset = dom\nclients = s0, s1, s2\nseed = 3\nR = 100\ncenter_test = batch\n' >b.conf
idb=$("$fk" job submit b.conf $conn) || fail "submit dica batch"
"$fk" job result "$idb" --out b.bin --wait 60 $conn >/dev/null 2>&1 || fail "dica batch job did not finish"
"$fk" job predict "$idb" --data dom3.csv --out bp.csv --net.max_message 8192 $conn 2>bp.err ||
  fail "job predict dica batch: $(cat bp.err)"
grep -q "each centred on its own rows" bp.err || fail "no batch-centring warning: $(cat bp.err)"
"$fk" job predict "$idb" --data dom3.csv --out bp1.csv $conn 2>bp1.err || fail "job predict dica batch, one call"
grep -q "centred on its own" bp1.err && fail "warned for one call: $(cat bp1.err)"
"$fk" model predict b.bin --data dom3.csv --out bm.csv 2>/dev/null || fail "model predict dica batch"
cmp -s bp1.csv bm.csv || fail "one call and model predict differ for a batch-centred model"
echo "cli_predict: all checks passed"
