#!/usr/bin/env python3
"""The Grafana dashboard deploy/grafana-fedkern.json against the metrics the server exports:
it parses, every panel has a unique id and at least one query, and every metric name a query
uses (fedkern_* and process_*, with the _bucket/_sum/_count of a histogram) is one that
server/metrics.c (or common/net/metrics_http.c) writes. A metric renamed or removed in the
server fails here instead of leaving an empty panel.

Usage: check_grafana.py SOURCE_ROOT"""
import json
import re
import sys

root = sys.argv[1]
dash = json.load(open(f"{root}/deploy/grafana-fedkern.json"))
src = open(f"{root}/server/metrics.c").read() + open(f"{root}/common/net/metrics_http.c").read()
exported = set(re.findall(r'"((?:fedkern|process)_[a-z_]+)', src))
# fedkern_job_<field> and fedkern_job_client_<field> are written per report field
# (fk_report_fields, common/methods/registry.c)
reg = open(f"{root}/common/methods/registry.c").read()
table = reg[reg.index("fk_report_fields[FK_REPORT_N_FIELDS] = {"):]
fields = set(re.findall(r'\{"([a-z_]+)", offsetof', table[:table.index("};")]))
for f in fields:
    exported |= {f"fedkern_job_{f}", f"fedkern_job_client_{f}"}
failures = []
if not fields:
    failures.append("no report fields found in common/methods/registry.c")
ids = set()
for p in dash["panels"]:
    if p["id"] in ids:
        failures.append(f"panel id {p['id']} used twice")
    ids.add(p["id"])
    if not p.get("targets"):
        failures.append(f"panel '{p['title']}' has no query")
    for t in p.get("targets", []):
        for name in re.findall(r"\b((?:fedkern|process)_[a-z_]+)", t["expr"]):
            base = re.sub(r"_(bucket|sum|count)$", "", name)
            if name not in exported and base not in exported:
                failures.append(f"panel '{p['title']}': metric {name} is not exported by the server")
for f in failures:
    print("FAIL:", f)
print(f"{len(dash['panels'])} panels, {sum(len(p.get('targets', [])) for p in dash['panels'])} "
      f"queries, {len(failures)} problems")
sys.exit(1 if failures else 0)
