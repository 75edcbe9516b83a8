#!/usr/bin/env bash
# fedkern model show|eval|predict on model files written by `fedkern sim --model_out` (the same
# file format `fedkern job result` writes), without a server. Usage: cli_model.sh FEDKERN
set -u
fk=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
# three separated Gaussian classes in 4 dimensions: 4 clients and a held-out test file
python3 - "$dir" <<'PY'
import random, sys
random.seed(1)
cs = [(0, 0, 0, 0), (4, 4, 0, 0), (0, 4, 4, 0)]
def w(path, n):
    with open(path, "w") as f:
        for i in range(n):
            k = i % 3
            f.write(",".join([str(k)] + ["%.5f" % (c + random.gauss(0, 0.7)) for c in cs[k]]) + "\n")
for c in range(4):
    w("%s/c%d.csv" % (sys.argv[1], c), 60)
w("%s/test.csv" % sys.argv[1], 150)
PY
"$fk" sim kahm --data "$dir/c0.csv" --data "$dir/c1.csv" --data "$dir/c2.csv" --data "$dir/c3.csv" \
  --upload_models 1 --local.allow_model_upload 1 --model_out "$dir/k.model" >/dev/null 2>&1 ||
  fail "sim kahm --model_out"
out=$("$fk" model show "$dir/k.model") || fail "model show exit $?"
grep -q "method   kahm" <<<"$out" || fail "model show: no method line: $out"
grep -q "round    1" <<<"$out" || fail "model show: no round line"
grep -qE "upload +scalar +1" <<<"$out" || fail "model show: no upload parameter"
"$fk" model show --json "$dir/k.model" | python3 -c '
import json, sys
d = json.load(sys.stdin)
assert d["method"] == "kahm" and d["round"] == 1 and any(t["name"] == "holders" for t in d["tensors"]), d
' || fail "model show --json"
# eval: the kahm model on held-out rows of the same classes is accurate
"$fk" model eval "$dir/k.model" --data "$dir/test.csv" --json >"$dir/eval.json" || fail "model eval exit"
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rows"] == 150 and d["accuracy"] > 0.9 and d["ari"] > 0.7, d
assert abs(d["misclust"] - (1 - d["accuracy"])) < 0.05, d
' "$dir/eval.json" || fail "model eval scores: $(cat "$dir/eval.json")"
# predict: one label,distance line per row; its labels give the accuracy eval printed
"$fk" model predict "$dir/k.model" --data "$dir/test.csv" --out "$dir/p.csv" 2>/dev/null ||
  fail "model predict exit"
python3 -c '
import json, sys
p = [l.split(",") for l in open(sys.argv[1])]
t = [l.split(",")[0] for l in open(sys.argv[2])]
assert len(p) == 150, len(p)
acc = sum(float(a[0]) == float(b) for a, b in zip(p, t)) / 150
assert abs(acc - json.load(open(sys.argv[3]))["accuracy"]) < 1e-8, acc
' "$dir/p.csv" "$dir/test.csv" "$dir/eval.json" || fail "model predict output"
# the loader options of fedkern data: the same rows with the label last under a header row
python3 - "$dir" <<'PY'
import sys
d = sys.argv[1]
for n in ["c0", "c1", "c2", "c3", "test"]:
    rows = [l.strip().split(",") for l in open("%s/%s.csv" % (d, n))]
    with open("%s/%s_last.csv" % (d, n), "w") as f:
        f.write("a;b;c;d;label\n")
        for r in rows:
            f.write(";".join(r[1:] + r[:1]) + "\n")
PY
L="--label last --header --delim ;"
"$fk" model eval "$dir/k.model" --data "$dir/test_last.csv" $L --json >"$dir/eval_last.json" ||
  fail "model eval with loader options"
same_scores() { python3 -c '
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
for k in ("model", "data"):
    a.pop(k), b.pop(k)
assert a == b, (a, b)
' "$@"; }
same_scores "$dir/eval.json" "$dir/eval_last.json" || fail "eval with loader options differs: $(cat "$dir/eval_last.json")"
"$fk" model predict "$dir/k.model" --data "$dir/test_last.csv" $L --out "$dir/p_last.csv" 2>/dev/null ||
  fail "model predict with loader options"
cmp -s "$dir/p.csv" "$dir/p_last.csv" || fail "predict with loader options differs"
# sim takes them too, for every --data file: the same model, hence the same scores
"$fk" sim kahm --data "$dir/c0_last.csv" --data "$dir/c1_last.csv" --data "$dir/c2_last.csv" \
  --data "$dir/c3_last.csv" $L --upload_models 1 --local.allow_model_upload 1 \
  --model_out "$dir/k_last.model" >/dev/null 2>&1 || fail "sim kahm with loader options"
"$fk" model eval "$dir/k_last.model" --data "$dir/test.csv" --json >"$dir/eval_k_last.json" ||
  fail "eval of the sim model with loader options"
same_scores "$dir/eval.json" "$dir/eval_k_last.json" || fail "sim with loader options: another model"
err=$("$fk" sim kahm --label last 2>&1)
[ $? -eq 2 ] && grep -q "need --data" <<<"$err" || fail "sim loader options without --data: $err"
# another family from the same files: sfl one-vs-one; model eval gives the accuracy its own
# predictions give, and model show lists what prediction needs (the raw class list)
"$fk" sim sfl --data "$dir/c0.csv" --data "$dir/c1.csv" --data "$dir/c2.csv" --data "$dir/c3.csv" \
  --raw_sample_upload acknowledged --local.allow_raw_upload 1 --multiclass ovo \
  --classes 0,1,2 --model_out "$dir/s.model" >/dev/null 2>&1 || fail "sim sfl --model_out"
"$fk" model show "$dir/s.model" | grep -qE "classes +3 +0 1 2" || fail "sfl model show: no classes"
"$fk" model eval "$dir/s.model" --data "$dir/test.csv" --json >"$dir/eval_s.json" ||
  fail "sfl model eval exit"
"$fk" model predict "$dir/s.model" --data "$dir/test.csv" --out "$dir/ps.csv" 2>/dev/null ||
  fail "sfl model predict exit"
python3 -c '
import json, sys
d = json.load(open(sys.argv[3]))
p = [l.split(",") for l in open(sys.argv[1])]
t = [l.split(",")[0] for l in open(sys.argv[2])]
acc = sum(float(a[0]) == float(b) for a, b in zip(p, t)) / len(t)
assert d["rows"] == 150 and d["accuracy"] > 0.9 and abs(acc - d["accuracy"]) < 1e-12, (acc, d)
' "$dir/ps.csv" "$dir/test.csv" "$dir/eval_s.json" || fail "sfl eval: $(cat "$dir/eval_s.json")"
# refusals: rows of another width (one clear error), a file that is no model, unknown option,
# no --data
"$fk" sim dica --model_out "$dir/d.model" >/dev/null 2>&1 || fail "sim dica --model_out"
err=$("$fk" model eval "$dir/d.model" --data "$dir/test.csv" 2>&1)
[ $? -eq 1 ] && grep -q "the rows have 4 columns but the model was trained on 5" <<<"$err" &&
  [ "$(wc -l <<<"$err")" -eq 1 ] || fail "dica eval of 4 columns: $err"
printf 'not a model' >"$dir/bad.model"
err=$("$fk" model show "$dir/bad.model" 2>&1)
[ $? -eq 1 ] && grep -q "not a model file" <<<"$err" || fail "bad file: $err"
"$fk" model eval "$dir/k.model" --data "$dir/test.csv" --bogus 1 >/dev/null 2>&1
[ $? -eq 2 ] || fail "unknown option is not a usage error"
"$fk" model predict "$dir/k.model" --out "$dir/x.csv" >/dev/null 2>&1
[ $? -eq 2 ] || fail "predict without --data is not a usage error"
[ "$fails" -eq 0 ] && echo "cli_model: all checks passed"
exit "$fails"
