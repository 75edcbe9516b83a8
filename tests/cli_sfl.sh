#!/bin/sh
# sfl across the real daemons on 127.0.0.1 over mTLS: a job with two consenting clients runs
# to the end (the uploads logged as counts on the client), a client without its own consent
# refuses with a clear error and counts as a dropout, and a job that tries to set a client's
# local.* key is refused at submit (the clients refuse it too, tests/test_client_local.c).
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
for c in c0 c1 c2; do "$fk" certs issue --dir pki --client $c >/dev/null || fail "cert $c"; done
/usr/bin/python3 - <<'PY'
import math, random
random.seed(4)
lab = lambda a, b: int((a - 3) ** 2 + 0.25 * b * b <= 9 or (a + 10) ** 2 + 0.25 * (b - 6) ** 2 <= 30)
for k in range(3):
    with open(f"c{k}.csv", "w") as f:
        for i in range(40):
            a, b = random.uniform(-20, 11), random.uniform(-11, 20)
            f.write(f"{lab(a, b)},{a + random.gauss(0, math.sqrt(0.2)):.6f},{b + random.gauss(0, math.sqrt(0.2)):.6f}\n")
PY
# three blobs for the multiclass = ovo job below (c1 lacks class 2)
/usr/bin/python3 - <<'PY'
import random
random.seed(9)
cen = [(0, 0), (4, 0), (2, 3.5)]
for k, held in ((0, (0, 1, 2)), (1, (0, 1)), (2, (2,))):
    with open(f"m{k}.csv", "w") as f:
        for i in range(36):
            j = held[i % len(held)]
            f.write(f"{j},{cen[j][0] + random.gauss(0, 0.7):.6f},{cen[j][1] + random.gauss(0, 0.7):.6f}\n")
PY
printf '[local]\nallow_raw_upload = true\n' > consent.conf
: > none.conf
"$bin/fedkern-server" --listen 127.0.0.1:$port --tls_dir pki --state state.db \
  --allow c0,c1,c2 --admins op --metrics_listen off >server.log 2>&1 &
pids="$pids $!"
sleep 0.5
for c in c0 c1 c2; do
  conf=consent.conf; [ $c = c2 ] && conf=none.conf
  "$bin/fedkern-client" --server 127.0.0.1:$port --server_name server --tls_dir pki \
    --name $c --data.e31 $c.csv --data.m3 m${c#c}.csv --config $conf >$c.log 2>&1 &
  pids="$pids $!"
done
conn="--server 127.0.0.1:$port --server_name server --tls_dir pki --name op"
# job submit refuses clients that never joined: wait (10 s at most) until all three have
for i in $(seq 100); do
  n=0; for c in c0 c1 c2; do grep -q "event=joined" $c.log && n=$((n + 1)); done
  [ $n = 3 ] && break; sleep 0.1
done
[ $n = 3 ] || fail "the clients did not join"
printf 'method = sfl\ndataset = e31\nclients = c0, c1, c2\nseed = 7\ndeadline = 4\nquorum = 0.6\nraw_sample_upload = acknowledged\nwidth_min = 1\nwidth_max = 3\nn_widths = 3\n' > job.conf
"$fk" job submit job.conf $conn >/dev/null || fail "submit"
"$fk" job result 1 --out model.bin --wait 60 $conn >status1.txt 2>&1 || fail "job 1: $(cat status1.txt)"
grep -q "participants *2" status1.txt || fail "job 1 should have run with the two consenting clients"
grep -q "event=sfl_upload client=0 rows=[0-9]* of=40 bytes=" c0.log || fail "client 0 did not log its upload"
grep -q "refuses the sfl job.*allow_raw_upload = true" c2.log || fail "client 2 did not refuse clearly"
grep -q "event=sfl_upload " c2.log && fail "client 2 uploaded without consent"
printf 'local.allow_raw_upload = true\n' | cat job.conf - > job2.conf
"$fk" job submit job2.conf $conn >submit2.txt 2>&1 && fail "a job setting local.* was accepted"
grep -q "job key 'local.allow_raw_upload': local.\* keys are each client's own" submit2.txt \
  || fail "a job setting local.* was not refused clearly: $(cat submit2.txt)"
# multiclass = ovo (spec A14) on three classes through the daemons: the model equals the
# in-process simulation's bit for bit (fedkern sim --job with the same job file and data).
# c1's file (data set m3, three blobs) lacks class 2.
printf 'method = sfl\ndataset = m3\nclients = c0, c1\nseed = 5\ndeadline = 4\nraw_sample_upload = acknowledged\nmulticlass = ovo\nclasses = 0,1,2\nwidth_min = 0.5\nwidth_max = 2\nn_widths = 3\n' > job3.conf
id3=$("$fk" job submit job3.conf $conn) || fail "submit ovo"
"$fk" job result "$id3" --out ovo.bin --wait 60 $conn >status3.txt 2>&1 || fail "ovo job: $(cat status3.txt)"
grep -q "participants *2" status3.txt || fail "ovo job should have run with both clients"
"$fk" sim --job job3.conf --data c0=m0.csv --data c1=m1.csv --local.allow_raw_upload true \
  --model_out sim3.bin >sim3.txt 2>&1 || fail "sim ovo: $(cat sim3.txt)"
# a model file is the model bundle's bytes, then its info (27 bytes + the job id: "sfl",
# round 1, the id, the software version); the bundles must match byte for byte
nd=$(( $(wc -c <ovo.bin) - 27 - ${#id3} )); ns=$(( $(wc -c <sim3.bin) - 27 - 3 ))
[ "$nd" = "$ns" ] && [ "$nd" -gt 1000 ] || fail "ovo: model sizes differ ($nd, $ns bytes)"
cmp -s -n "$nd" ovo.bin sim3.bin || fail "ovo: the daemons' model differs from the simulation's"
"$fk" model show ovo.bin --json >t_daemon.json || fail "show the ovo model"
grep -q '"mK"' t_daemon.json || fail "ovo model lacks the per-pair kernel counts"
# the per-problem diagnostics of the uploads (spec §6.4): in the model and the server's log
grep -q '"pair_client_status"' t_daemon.json || fail "ovo model lacks the clients' per-pair diagnostics"
for pr in 0,1 0,2 1,2; do
  grep -q "event=sfl_server_solved pair=$pr .*clients=2 client_status=converged" server.log \
    || fail "server log lacks the clients' diagnostics of pair $pr"
done
grep -q "event=sfl_upload_received client=1 .*problems=3 .*solved=3 converged=3" server.log \
  || fail "server log lacks client 1's per-problem summary"
# the literal Algorithm 1 (solver = variant_a, mc_resample = true, regression on the e31 labels):
# its Monte-Carlo atoms come from the parties' seeded fk_rng, so the daemons' model equals the
# simulation's byte for byte
printf 'method = sfl\ndataset = e31\nclients = c0, c1\nseed = 11\ndeadline = 4\nraw_sample_upload = acknowledged\nmode = regress\neps = 0.04\natoms = grid\nbox_lo = -20\nbox_hi = 20\ngrid_h = 2\nwidth_min = 1\nwidth_max = 3\nn_widths = 3\nsolver = variant_a\nmc_resample = true\nmc_batch = 64\nT_client = 300\nT_server = 300\n' > job4.conf
id4=$("$fk" job submit job4.conf $conn) || fail "submit mc_resample"
"$fk" job result "$id4" --out mc.bin --wait 60 $conn >status4.txt 2>&1 || fail "mc job: $(cat status4.txt)"
"$fk" sim --job job4.conf --data c0=c0.csv --data c1=c1.csv --local.allow_raw_upload true \
  --model_out sim4.bin >sim4.txt 2>&1 || fail "sim mc_resample: $(cat sim4.txt)"
nd=$(( $(wc -c <mc.bin) - 27 - ${#id4} )); ns=$(( $(wc -c <sim4.bin) - 27 - 3 ))
[ "$nd" = "$ns" ] && [ "$nd" -gt 1000 ] || fail "mc_resample: model sizes differ ($nd, $ns bytes)"
cmp -s -n "$nd" mc.bin sim4.bin || fail "mc_resample: the daemons' model differs from the simulation's"
# fedkern sim sfl with multiclass = ovo on its built-in data (one blob per class), no --job
"$fk" sim sfl --multiclass ovo --classes 1,2,3,4 --raw_sample_upload acknowledged \
  --local.allow_raw_upload true --clients 3 --sim_n 40 --json >simb.json 2>simb.err \
  || fail "sim sfl ovo on built-in data: $(cat simb.err)"
/usr/bin/python3 - simb.json <<'PY' || fail "sim sfl ovo on built-in data: $(cat simb.json)"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
r = [l for l in lines if l.get("round") == 1]
assert len(r) == 1 and r[0]["participants"] == 3 and r[0]["accuracy"] >= 0.9, r
PY
echo ok
