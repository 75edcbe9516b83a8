#!/bin/sh
# fedkern model export: the .npz and .json hold every tensor of the model, and the NumPy block
# of docs/operations.md ("Export") reproduces `fedkern model predict` from the .npz: labels
# exactly, distances and values to 1e-9, for a fedgrem clustering, sfl classification and
# regression, dica and fedrf-tca (averaged and voting; their random frequencies exported as
# "omega"). Usage: cli_export.sh FEDKERN docs/operations.md (needs /usr/bin/python3 with numpy)
set -u
fk=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
doc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
py=/usr/bin/python3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
$py -c 'import numpy' 2>/dev/null || { echo "SKIP: no numpy for $py"; exit 77; }
cd "$dir" || exit 1
# the docs' block, as the page shows it
$py - "$doc" <<'PY' >predictors.py || fail "no python block under '### Export' in $doc"
import re, sys
text = open(sys.argv[1]).read()
sec = text[text.index("### Export"):]
print(re.search(r"```python\n(.*?)```", sec, re.S).group(1))
PY
# fedgrem on five Gaussian clusters at three sites, new rows of the same mixture
"$fk" data split synthetic/gmm:client=0,samples=300 --clients 3 --by dirichlet:1 --seed 1 \
  --out sites >/dev/null 2>split.err || fail "split: $(cat split.err)"
"$fk" data split synthetic/gmm:client=1,samples=200 --clients 1 --by iid --out gen >/dev/null &&
  mv gen/client0.csv new.csv || fail "split new"
printf 'method = fedgrem\ndataset = blobs\nclients = s0, s1, s2\nrounds = 8\nseed = 1\nR = 5\n' >g.conf
"$fk" sim --job g.conf --data s0=sites/client0.csv --data s1=sites/client1.csv \
  --data s2=sites/client2.csv --model_out g.bin >/dev/null 2>&1 || fail "sim fedgrem"
# sfl: two classes in 2-d (raw labels 3 and 8, features shifted and scaled by the job's map)
# and a 1-d regression
$py - <<'PY'
import math, random
random.seed(4)
for k in range(3):
    for name, n in (("c%d" % k, 40), ("t%d" % k, 60)):
        with open(name + ".csv", "w") as f:
            for i in range(n):
                a, b = random.uniform(-4, 4), random.uniform(-4, 4)
                lab = 3 if a * a + b * b < 6 else 8
                f.write("%d,%.6f,%.6f\n" % (lab, 2 * a + 0.5, 2 * b + 0.5))
    with open("r%d.csv" % k, "w") as f:
        for i in range(40):
            x = random.uniform(0, 6)
            f.write("%.6f,%.6f\n" % (math.sin(x) + random.gauss(0, 0.01), x))
PY
cat t0.csv t1.csv t2.csv >test.csv
S="--raw_sample_upload acknowledged --local.allow_raw_upload 1"
"$fk" sim sfl --data c0.csv --data c1.csv --data c2.csv $S --pos_label 3 --neg_label 8 \
  --x_shift 0.5 --x_scale 2 --model_out s.bin >/dev/null 2>&1 || fail "sim sfl binary"
"$fk" sim sfl --data r0.csv --data r1.csv --data r2.csv $S --mode regress --eps 0.01 \
  --width_min 0.5 --width_max 1.5 --model_out r.bin >/dev/null 2>&1 || fail "sim sfl regression"
# dica on three shifted domains (16 features, 4 classes), the fourth never trained on
for k in 0 1 2 3; do
  "$fk" data split synthetic/shift:client=$k,samples=100,dims=16,classes=4 --clients 1 \
    --by iid --out d$k >/dev/null 2>&1 && mv d$k/client0.csv dom$k.csv || fail "split domain $k"
done
printf 'method = dica\ndataset = dom\nclients = a, b, c\nseed = 3\nR = 60\n' >d.conf
# the clients z-score their files (issue 34: recorded in the model, applied by model predict
# and by the docs' client_prep to the raw rows)
"$fk" sim --job d.conf --data a=dom0.csv --data b=dom1.csv --data c=dom2.csv --prep zscore \
  --model_out d.bin >/dev/null 2>&1 || fail "sim dica"
"$fk" model predict d.bin --data dom3.csv --out pd.csv 2>/dev/null || fail "predict d"
# sim prints the means apart of a job type that names clients apart (issue 34): dica's
# holdout client is `unseen`, its mean is that client's final score
(cat d.conf; echo "holdout = last") >dh.conf
"$fk" sim --job dh.conf --data a=dom0.csv --data b=dom1.csv --data c=dom2.csv --json >dh.json \
  2>/dev/null || fail "sim dica holdout"
$py - <<'PY' || fail "sim role means: $(cat dh.json)"
import json
rows = [json.loads(l) for l in open("dh.json")]
fin = {d["client"]: d for d in rows if d.get("final")}
role = {d["final_role"]: d for d in rows if "final_role" in d}
assert role["unseen"]["unseen_accuracy"] == fin[2]["accuracy"] and role["unseen"]["clients"] == 1, role
assert role["train"]["clients"] == 2 and min(fin[0]["accuracy"], fin[1]["accuracy"]) <= role["train"]["train_accuracy"] <= max(fin[0]["accuracy"], fin[1]["accuracy"]), role
PY
# a model of an older fedkern (or of a job with an old client): no data_prep; model show says
# "unknown", model eval warns and uses the rows as loaded (= --model_prep 0 on the new one)
$py - <<'PY' || fail "strip data_prep"
def varint(b, i):
    v = s = 0
    while True:
        v |= (b[i] & 0x7f) << s
        s += 7
        i += 1
        if b[i - 1] < 0x80:
            return v, i
b, out, i = open("d.bin", "rb").read(), bytearray(), 0
while i < len(b):
    start = i
    tag, i = varint(b, i)
    assert tag & 7 in (0, 2), tag  # tensors, strings: length-delimited; the round: a varint
    n, i = varint(b, i)
    if tag & 7 == 2:
        i += n
    body = b[start:i]
    if tag >> 3 == 1 and b"data_prep" in bytes(body[:40]):
        continue
    out += body
open("dold.bin", "wb").write(bytes(out))
PY
"$fk" model show dold.bin >dold.txt 2>&1 || fail "model show old: $(cat dold.txt)"
grep -q "client preprocessing: unknown" dold.txt || fail "old model show: $(cat dold.txt)"
"$fk" model eval dold.bin --data dom3.csv --json >dold.json 2>dold.err || fail "eval old: $(cat dold.err)"
grep -q "warning: the model does not record the clients' preprocessing" dold.err || fail "no warning: $(cat dold.err)"
"$fk" model eval d.bin --data dom3.csv --model_prep 0 --json >dnew0.json 2>/dev/null || fail "eval --model_prep 0"
[ "$(sed 's/"model":"[^"]*",//' dold.json)" = "$(sed 's/"model":"[^"]*",//' dnew0.json)" ] ||
  fail "old model: $(cat dold.json dnew0.json)"
# fedrf-tca on the same domains (dom3 the unlabelled target), averaged and voting
printf 'method = fedrf-tca\ndataset = dom\nclients = a, b, c, t\nrounds = 4\nseed = 2\nN = 20\nm = 6\nhidden = 8\nbatch = 32\ntc = 2\nclasses = 4\n' >f.conf
(cat f.conf; echo "voting = 1") >v.conf
"$fk" data info dom0.csv --prep l1,zscore --save_affine aff.csv >/dev/null || fail "save affine"
for m in f v; do
  # voting: every client's file through one saved map (recorded as numbers in the model)
  aff=""; [ $m = v ] && aff="--affine aff.csv"
  "$fk" sim --job $m.conf --data a=dom0.csv --data b=dom1.csv --data c=dom2.csv --data t=dom3.csv \
    $aff --model_out $m.bin >/dev/null 2>&1 || fail "sim fedrf-tca ($m)"
  "$fk" model predict $m.bin --data dom3.csv --out p$m.csv 2>/dev/null || fail "predict $m"
done
for m in g s r d f v; do
  "$fk" model export $m.bin --format npz --out $m.npz 2>/dev/null || fail "export $m npz"
  "$fk" model export $m.bin --format json --out $m.json 2>/dev/null || fail "export $m json"
done
"$fk" model predict g.bin --data new.csv --client 1 --out pg.csv 2>/dev/null || fail "predict g"
"$fk" model predict s.bin --data test.csv --out ps.csv 2>/dev/null || fail "predict s"
cat r0.csv r1.csv >rtest.csv
"$fk" model predict r.bin --data rtest.csv --out pr.csv 2>/dev/null || fail "predict r"
$py - <<'PY' || fail "numpy differs from model predict"
import json
import numpy as np
exec(open("predictors.py").read())
def rows(path):
    return np.loadtxt(path, delimiter=",", ndmin=2)[:, 1:]
def same(tag, lab, dist, csv):
    c = np.loadtxt(csv, delimiter=",", ndmin=2)
    assert len(c) == len(lab), (tag, len(c), len(lab))
    assert np.array_equal(c[:, 0], lab) or np.allclose(c[:, 0], lab, rtol=0, atol=1e-9), tag
    err = np.max(np.abs(c[:, 1] - dist))
    assert err <= 1e-9, (tag, err)
    print("%s: %d rows, labels equal, distances within %.1e" % (tag, len(lab), err))
for m in "gsrdfv":  # the json holds the same arrays as the npz
    z, j = np.load(m + ".npz"), json.load(open(m + ".json"))
    for name, a in j["arrays"].items():
        assert np.array_equal(np.asarray(a["data"], float).reshape(a["shape"]), z[name]), (m, name)
    want = "fedgrem sfl sfl dica fedrf-tca fedrf-tca".split()["gsrdfv".index(m)]
    assert str(z["method"]) == j["method"] == want, m
assert np.load("d.npz")["omega"].shape == (60, 16)
lab, d = predict_mixture(np.load("g.npz"), rows("new.csv"), 1)
same("fedgrem client 1", lab, d, "pg.csv")
lab, d = predict_sfl(np.load("s.npz"), rows("test.csv"))
same("sfl binary", lab, d, "ps.csv")
lab, d = predict_sfl(np.load("r.npz"), rows("rtest.csv"))
same("sfl regression", lab, d, "pr.csv")
z = np.load("d.npz")
assert list(z["data_prep"][0]) == [3, 0, 0, 0, 0, 0, 0, 0], z["data_prep"]
lab, d = predict_dica(z, client_prep(z, rows("dom3.csv")))
same("dica unseen domain", lab, d, "pd.csv")
lab, d = predict_fedrf_tca(np.load("f.npz"), client_prep(np.load("f.npz"), rows("dom3.csv")))
same("fedrf-tca target", lab, d, "pf.csv")
z = np.load("v.npz")
assert z["data_prep_shift"].shape == (1, 16), z["data_prep_shift"].shape
lab, d = predict_fedrf_tca(z, client_prep(z, rows("dom3.csv")))
same("fedrf-tca target, voting", lab, d, "pv.csv")
PY
"$fk" model export g.bin --format xml --out x 2>err.txt && fail "export --format xml accepted"
grep -q "format must be npz or json" err.txt || fail "bad format: $(cat err.txt)"
echo "cli_export: all checks passed"
