#!/usr/bin/env python3
"""fedkern bench: the quick benchmarks run to completion on built-in data and
print well-formed JSON lines with the rows the issues ask for; the fidelity
benchmarks refuse a missing data folder at once, with one line. No timing is
asserted (machines are noisy): only that the numbers exist and are sane.
Usage: cli_bench.py FEDKERN"""
import json
import math
import os
import subprocess
import sys

FK = sys.argv[1]
failures = []


def run(args, timeout=600):
    try:
        p = subprocess.run([FK, "bench"] + args, capture_output=True, text=True, errors="replace",
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return -1, "", f"still running after {timeout} s\n"
    return p.returncode, p.stdout, p.stderr


def rows(out):
    table = {}
    for line in out.splitlines():
        r = json.loads(line)  # every stdout line must be JSON
        table.setdefault((r["case"], r["metric"]), []).append(r)
    return table


def check(cond, what):
    if not cond:
        failures.append(what)


def positive(table, case, metric):
    r = table.get((case, metric))
    ok = bool(r) and isinstance(r[0]["value"], (int, float)) and math.isfinite(r[0]["value"]) \
        and r[0]["value"] > 0
    check(ok, f"{case} {metric}: want a finite positive value, got {r}")
    return r[0] if ok else None


# rf-tca on random data of the A->C shape (no data folder)
rc, out, err = run(["rf-tca", "--quick", "--json", "--data_dir", "/nonexistent-fedkern-data"])
check(rc == 0, f"bench rf-tca exit {rc}: {err}")
if rc == 0:
    t = rows(out)
    check(t[("random", "data_is_office_surf_a_c")][0]["value"] == 0, "rf-tca: expected random data")
    positive(t, "dgemm 2081x800x1000", "gflops")
    for n in (500, 1000, 2000):
        case = f"rf-tca A->C N={n} m=20"
        positive(t, case, "fit_transform_seconds")
        k = t.get((case, "krylov_seconds"))
        check(bool(k) and k[0].get("converged") is True, f"{case}: Krylov did not converge: {k}")
        check(positive(t, case, "krylov_columns") is not None, f"{case}: no Krylov columns")
        for metric in ("dominant_kernels_ratio_to_dgemm", "krylov_op_ratio_to_dgemm",
                       "pipeline_ratio_to_dgemm"):
            r = positive(t, case, metric)
            check(r is None or r["value"] < 2.0, f"{case} {metric} implausible: {r}")
    for n in (1000, 2000):
        positive(t, f"rf-tca-orf A->C N={n} m=20", "omega_seconds")
        positive(t, f"rf-tca-orf A->C N={n} m=20", "fit_transform_seconds")
    positive(t, "kernel-tca A->C m=20", "fit_transform_seconds")
    positive(t, "process", "peak_rss_mb")

# FedGrEM wall time, few rounds: the run itself and its estimation error
rc, out, err = run(["fedgrem", "--json", "--rounds", "200", "--reps", "1", "--no_scaling"])
check(rc == 0, f"bench fedgrem exit {rc}: {err}")
if rc == 0:
    t = rows(out)
    r = positive(t, "sim K10 R5 p10 n150 T200", "seconds_best_of_reps")
    check(r is None or (math.isfinite(r["E_theta"]) and r["E_theta"] < 5), f"fedgrem E_theta: {r}")

# Fashion-MNIST (Debian's dataset-fashion-mnist) through two small t-SNE embeddings: each seed is
# its own embedding, and the over-embedding rows are the mean, sd and standard error of the cells.
FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"
if not os.path.exists(FASHION):
    print(f"cli_bench: skipping the Fashion-MNIST rows ({FASHION} missing: "
          "apt-get install dataset-fashion-mnist)")
else:
    sub = "fashion-mnist-tsne10-sub600"
    rc, out, err = run(["fidelity", "fedgrem", "--json", "--skip_sim", "--skip_pendigits",
                        "--skip_mor", "--fashion_data", sub, "--fashion_clients", "3",
                        "--tsne_seeds", "1,2", "--tsne_iters", "300", "--real_reps", "1",
                        "--real_methods", "3", "--rounds", "50"])
    check(rc == 0, f"bench fidelity fedgrem {sub} exit {rc}: {err}")
    if rc == 0:
        t = rows(out)
        for eps in ("0.0", "24.0"):
            for m in ("fedgrem", "fedem", "local-em"):
                metric = "misclustering_pct"
                v = [positive(t, f"{sub} tsne-seed={s} eps={eps}% {m}", metric) for s in (1, 2)]
                mean = positive(t, f"{sub} over embeddings eps={eps}% {m}", metric)
                if None in v or mean is None:
                    continue
                a, b = v[0]["value"], v[1]["value"]
                sd = abs(a - b) / math.sqrt(2)
                check(abs(mean["value"] - (a + b) / 2) < 1e-6 and
                      abs(mean["sd_over_embeddings"] - sd) < 2e-3 and
                      abs(mean["se_of_mean"] - sd / math.sqrt(2)) < 2e-3 and
                      mean["embeddings"] == "1,2", f"{sub} eps={eps} {m}: {a}, {b} -> {mean}")
        # the seeds must give different embeddings, so some cell differs between them
        cells = [(t[(f"{sub} tsne-seed=1 eps=0.0% {m}", "misclustering_pct")][0]["value"],
                  t[(f"{sub} tsne-seed=2 eps=0.0% {m}", "misclustering_pct")][0]["value"])
                 for m in ("fedgrem", "fedem", "local-em")]
        check(any(a != b for a, b in cells), f"{sub}: seeds 1 and 2 gave the same cells {cells}")
        r = t[(f"{sub} over embeddings eps=0.0% fedgrem", "misclustering_pct")][0]
        check(r.get("target_met") == (abs(r["value"] - 34.44) <= 3) and
              r.get("target_of") == "issue 5", f"{sub} target row: {r}")
        # the spec's other claims are differences of the over-embedding means, with verdicts
        mean = {(eps, m): t[(f"{sub} over embeddings eps={eps}% {m}", "misclustering_pct")][0]["value"]
                for eps in ("0.0", "24.0") for m in ("fedgrem", "fedem", "local-em")}
        spec = "spec 6.7 check 5"
        claims = (("eps=0.0%", "fedgrem_minus_local_em_pct",
                   mean["0.0", "fedgrem"] - mean["0.0", "local-em"], lambda d: d < 0, spec),
                  ("eps=24.0%", "fedgrem_minus_local_em_pct",
                   mean["24.0", "fedgrem"] - mean["24.0", "local-em"], lambda d: d < 0, spec),
                  ("eps=24.0%", "fedgrem_minus_fedem_pct",
                   mean["24.0", "fedgrem"] - mean["24.0", "fedem"], lambda d: d < 0, "issue 5"),
                  ("fedgrem eps=0->24%", "change_pct",
                   mean["24.0", "fedgrem"] - mean["0.0", "fedgrem"], lambda d: abs(d) <= 1.5, spec),
                  ("fedem eps=0->24%", "change_pct",
                   mean["24.0", "fedem"] - mean["0.0", "fedem"], lambda d: d > 0, spec))
        for what, metric, d, ok, of in claims:
            r = t.get((f"{sub} over embeddings {what}", metric), [None])[0]
            check(r is not None and abs(r["value"] - d) < 1e-5 and r["target_met"] == ok(d) and
                  r["target_of"] == of, f"{sub} {what} {metric}: {r}")
        for s in (1, 2):  # each embedding's own FedGrEM - FedEM row under contamination
            g, f = (t[(f"{sub} tsne-seed={s} eps=24.0% {m}", "misclustering_pct")][0]["value"]
                    for m in ("fedgrem", "fedem"))
            r = t.get((f"{sub} tsne-seed={s} eps=24.0%", "fedgrem_minus_fedem_pct"), [None])[0]
            check(r is not None and abs(r["value"] - (g - f)) < 1e-5 and
                  r["target_met"] == (g < f), f"{sub} seed {s} fedgrem - fedem: {r}")
        check(not any("pooled" in k[0] for k in t), f"{sub}: pooled claims without pooled runs")

# BLAS baselines
rc, out, err = run(["blas", "--quick", "--json"])
check(rc == 0, f"bench blas exit {rc}: {err}")
if rc == 0:
    check(len(rows(out)) > 0, "bench blas printed no rows")

# kahm mode-B serving through the server and 4 in-process client agents (small, quick)
rc, out, err = run(["kahm", "serve", "--clients", "4", "--queries", "100", "--reps", "2",
                    "--single", "3", "--json"], timeout=300)
check(rc == 0, f"bench kahm serve exit {rc}: {err}")
if rc == 0:
    t = rows(out)
    for case in ("batch clients=4 queries_per_call=100 dim=64 calls=2",
                 "single clients=4 queries_per_call=1 dim=64 calls=3"):
        for metric in ("latency_p50_ms", "latency_p99_ms", "queries_per_s", "accuracy"):
            positive(t, case, metric)
        f = t.get((case, "fewest_clients_answering"))
        check(bool(f) and f[0]["value"] == 4, f"{case}: not every client answered: {f}")

# bad input: one line on stderr, non-zero exit, nothing run
for args, needle in (
        (["rf-tca", "--bogus"], "unknown option --bogus"),
        (["fidelity", "rf-tca", "--data_dir", "/nonexistent-fedkern-data"], "--data_dir"),
        (["fidelity", "rf-tca", "--fed_features", "sobol"], "orthogonal"),
        (["fidelity", "knn", "--data_dir", "/nonexistent-fedkern-data"], "--data_dir"),
        (["fidelity", "fedgrem", "--data_dir", "/nonexistent-fedkern-data"], "--skip_pendigits")):
    rc, out, err = run(args, timeout=30)
    lines = err.strip().splitlines()
    check(rc != 0 and len(lines) == 1 and needle in lines[0] and not out,
          f"bench {' '.join(args)}: exit {rc}, stderr {err!r}, stdout {out[:200]!r}")

for f in failures:
    print("FAIL:", f)
print(f"cli_bench: {len(failures)} failure(s)")
sys.exit(1 if failures else 0)
