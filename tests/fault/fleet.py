#!/usr/bin/env python3
"""A fleet of real fedkern-client processes: one fedkern-server on 127.0.0.1,
N fedkern-client daemons (each with its own certificate from `fedkern certs`
and its own built-in data, synthetic/gmm:client=I), a FedGrEM job over all of
them, and a few clients SIGKILLed right after round 1 closes. The job must end
`done` by quorum: the killed clients are dropouts of the later rounds, every
other client answers, and the server stays up.

Usage: fleet.py BUILD_DIR [--clients N] [--kill_frac F] [--rounds R]
                [--deadline S] [--quorum Q] [--timeout S] [--seed S] [--keep] [--json]
  --clients N    client processes (50; issue 24's full check is 200)
  --kill_frac F  fraction SIGKILLed after round 1 closes (0.05, at least one client)
  --rounds R     FedGrEM rounds (5)
  --deadline S   seconds a phase waits for its clients (15)
  --quorum Q     job quorum (0.9)
  --timeout S    hard limit of the whole run (600): past it everything is killed, exit 1
  --keep         keep the work directory (logs) even when the run passes
  --json         one JSON line with the measured figures at the end
Exit 0 passed, 1 a check failed. Every child is killed on every exit path (the
children also die with this process: PR_SET_PDEATHSIG)."""
import argparse
import ctypes
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ap = argparse.ArgumentParser(description=__doc__,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("build")
ap.add_argument("--clients", type=int, default=50)
ap.add_argument("--kill_frac", type=float, default=0.05)
ap.add_argument("--rounds", type=int, default=5)
ap.add_argument("--deadline", type=int, default=15)
ap.add_argument("--quorum", type=float, default=0.9)
ap.add_argument("--timeout", type=float, default=600)
ap.add_argument("--seed", type=int, default=7)
ap.add_argument("--keep", action="store_true")
ap.add_argument("--json", action="store_true")
A = ap.parse_args()
if not 2 <= A.clients <= 1000:  # synthetic/gmm takes 2..1000 tasks
    sys.exit("fleet.py: --clients must be in 2..1000")
if A.rounds < 3:  # round 1, the round the kill lands in, and one round after it
    sys.exit("fleet.py: --rounds must be at least 3")

BUILD = os.path.abspath(A.build)
FEDKERN = os.path.join(BUILD, "fedkern")
SERVER = os.path.join(BUILD, "fedkern-server")
CLIENT = os.path.join(BUILD, "fedkern-client")
N = A.clients
KILL = max(1, int(N * A.kill_frac + 0.5))
T0 = time.time()
children = []  # every process started, killed on exit
failures = []
LIBC = ctypes.CDLL(None, use_errno=True)


class HardTimeout(Exception):
    pass


def on_alarm(_sig, _frm):
    raise HardTimeout(f"hard timeout of {A.timeout:.0f} s")


def on_term(sig, _frm):
    raise KeyboardInterrupt(f"signal {sig}")


def log(msg):
    print(f"[{time.time() - T0:7.1f} s] {msg}", flush=True)


def check(name, cond, detail=""):
    log(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""))
    if not cond:
        failures.append(name)
    return cond


def die_with_parent():
    """In the child: SIGKILL when this script dies, however it dies."""
    LIBC.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def spawn(argv, logpath, nice=0):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", MALLOC_PERTURB_="0")
    f = open(logpath, "ab")
    pre = ["nice", "-n", str(nice)] if nice else []
    p = subprocess.Popen(pre + argv, stdout=f, stderr=f, stdin=subprocess.DEVNULL, env=env,
                         preexec_fn=die_with_parent)
    f.close()
    children.append(p)
    return p


def run(argv, timeout=60):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                       preexec_fn=die_with_parent)
    if r.returncode:
        raise RuntimeError(" ".join(argv) + f" exited {r.returncode}: " + r.stderr.strip())
    return r.stdout


def kill_all():
    for p in children:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    until = time.time() + 10
    for p in children:
        try:
            p.wait(max(0.1, until - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def rss_kb(pid, field="VmRSS"):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cpu_s(pid):
    """User + system CPU seconds of a live process (/proc/PID/stat fields 14 and 15)."""
    try:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def wait_log(path, pattern, seconds, proc=None):
    until = time.time() + seconds
    rx = re.compile(pattern)
    while time.time() < until:
        try:
            m = rx.search(open(path, errors="replace").read())
        except FileNotFoundError:
            m = None
        if m:
            return m
        if proc is not None and proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def tail_until(path, needle, seconds, proc):
    """True once needle appears in the growing file: reads only the new bytes and polls
    every 2 ms, so the kill follows the event within milliseconds (later rounds can close
    in 30 ms)."""
    until = time.time() + seconds
    pos, buf = 0, b""
    key = needle.encode()
    with open(path, "rb") as f:
        while time.time() < until and proc.poll() is None:
            f.seek(pos)
            chunk = f.read()
            pos += len(chunk)
            buf = buf[-len(key):] + chunk
            if key in buf:
                return True
            if not chunk:
                time.sleep(0.002)
    return False


def joined(path):
    try:
        text = open(path, errors="replace").read()
    except FileNotFoundError:
        return set()
    return set(re.findall(r"event=client_joined client=(\S+)", text))


def fleet(d, figures):
    pki = f"{d}/pki"
    slog = f"{d}/server.log"
    # Certificates: a CA, the server, the operator, and one per client process.
    t = time.time()
    run([FEDKERN, "certs", "init", "--dir", pki])
    run([FEDKERN, "certs", "issue", "--dir", pki, "--server", "server", "--ip", "127.0.0.1"])
    run([FEDKERN, "certs", "issue", "--dir", pki, "--admin", "op"])
    for i in range(N):
        run([FEDKERN, "certs", "issue", "--dir", pki, "--client", f"c{i}"])
    figures["certs_seconds"] = round(time.time() - t, 2)
    log(f"{N + 3} certificates issued in {figures['certs_seconds']} s")

    # The server: loopback only, ephemeral ports, 1 s heartbeats so dead clients are noticed.
    server = spawn([SERVER, "--listen", "127.0.0.1:0", "--tls_dir", pki, "--state",
                    f"{d}/state.db", "--heartbeat_ms", "1000", "--drain_ms", "200",
                    "--metrics_listen", "127.0.0.1:0"], slog)
    m = wait_log(slog, r"event=server_ready [^\n]*port=(\d+)", 30, server)
    if not m:
        raise RuntimeError("fedkern-server did not start:\n" + open(slog).read()[-2000:])
    port = int(m.group(1))
    figures["server_rss_idle_kb"] = rss_kb(server.pid)

    # The clients: nice'd, one BLAS thread each, each its own GMM task of the same design.
    t = time.time()
    clients = []
    for i in range(N):
        clients.append(spawn([CLIENT, "--server", f"127.0.0.1:{port}", "--server_name", "server",
                              "--tls_dir", pki, "--name", f"c{i}", "--data.gmm",
                              f"synthetic/gmm:client={i},tasks={N},seed={A.seed}",
                              "--backoff_max_ms", "2000"], f"{d}/client{i}.log", nice=10))
    until = time.time() + 60 + 0.5 * N
    while len(joined(slog)) < N and time.time() < until and server.poll() is None:
        time.sleep(0.2)
    n_joined = len(joined(slog))
    figures["join_seconds"] = round(time.time() - t, 2)
    if not check(f"all {N} clients joined", n_joined == N,
                 f"{n_joined} in {figures['join_seconds']} s"):
        return
    figures["server_rss_joined_kb"] = rss_kb(server.pid)
    figures["clients_rss_mb"] = round(sum(rss_kb(p.pid) for p in clients) / 1024, 1)

    # The job: FedGrEM over every client; no --skip_client_check, every client has joined.
    conf = f"{d}/job.conf"
    with open(conf, "w") as f:
        f.write(f"method = fedgrem\ndataset = gmm\nclients = c[0-{N - 1}]\nseed = {A.seed}\n"
                f"R = 5\nrounds = {A.rounds}\nquorum = {A.quorum}\ndeadline = {A.deadline}\n"
                "retries = 1\n")
    cli = ["--server", f"127.0.0.1:{port}", "--server_name", "server", "--tls_dir", pki,
           "--name", "op"]
    t = time.time()
    jid = run([FEDKERN, "job", "submit", conf, *cli]).strip()
    log(f"job {jid} submitted: fedgrem, {N} clients, {A.rounds} rounds, quorum {A.quorum}, "
        f"deadline {A.deadline} s")
    follow = subprocess.Popen([FEDKERN, "job", "status", jid, "--follow", "--json", *cli],
                              stdout=open(f"{d}/follow.jsonl", "w"), stderr=subprocess.STDOUT,
                              preexec_fn=die_with_parent)
    children.append(follow)

    # SIGKILL KILL random clients as soon as the server logs that round 1 closed.
    budget = A.rounds * 3 * A.deadline + 60
    if not tail_until(slog, f"event=round_closed job={jid} round=1 ", budget, server):
        check("round 1 closed", False, "no round_closed for round 1")
        return
    victims = sorted(random.Random(A.seed).sample(range(N), KILL))
    for v in victims:
        clients[v].send_signal(signal.SIGKILL)
    closed_at_kill = len(re.findall(rf"event=round_closed job={jid} ",
                                    open(slog, errors="replace").read()))
    figures["killed"] = KILL
    figures["killed_after_round"] = closed_at_kill
    log(f"SIGKILLed {KILL} clients ({', '.join(f'c{v}' for v in victims)}) "
        f"{time.time() - t:.1f} s into the job, {closed_at_kill} round(s) closed")
    check("the kill landed mid-job (two rounds or more left)", closed_at_kill <= A.rounds - 2,
          f"{closed_at_kill} of {A.rounds} rounds closed")

    # The job must end done: `status --follow` exits 0 only for done.
    try:
        frc = follow.wait(budget)
    except subprocess.TimeoutExpired:
        frc = None
    figures["job_seconds"] = round(time.time() - t, 2)
    out = f"{d}/model.bin"
    r = subprocess.run([FEDKERN, "job", "result", jid, "--out", out, "--wait", "30", *cli],
                       capture_output=True, text=True, timeout=90, preexec_fn=die_with_parent)
    st = subprocess.run([FEDKERN, "job", "status", jid, "--json", *cli], capture_output=True,
                        text=True, timeout=60, preexec_fn=die_with_parent)
    try:
        status = json.loads(st.stdout)
    except ValueError:
        status = {}
    figures["server_cpu_seconds"] = round(cpu_s(server.pid), 2)
    figures["server_rss_kb"] = rss_kb(server.pid)
    figures["server_rss_peak_kb"] = rss_kb(server.pid, "VmHWM")
    text = open(slog, errors="replace").read()
    rounds = [dict(round=int(m.group(1)), attempt=int(m.group(2)), participants=int(m.group(3)),
                   dropouts=int(m.group(4)), seconds=float(m.group(5)))
              for m in re.finditer(rf"event=round_closed job={jid} round=(\d+) attempt=(\d+) "
                                   r"participants=(\d+) dropouts=(\d+) [^\n]*?round_seconds=([\d.]+)",
                                   text)]
    figures["rounds"] = rounds
    figures["dropouts"] = sum(x["dropouts"] for x in rounds)
    figures["dropout_clients"] = sorted(set(re.findall(rf"event=dropout job={jid} [^\n]*client=(\S+)",
                                                      text)))
    figures["quorum_missed"] = len(re.findall(rf"event=quorum_missed job={jid} ", text))
    for x in rounds:
        log(f"round {x['round']} (attempt {x['attempt']}): {x['participants']} participants, "
            f"{x['dropouts']} dropouts, {x['seconds']:.2f} s")

    check("job status --follow ends done (exit 0)", frc == 0,
          f"exit {frc}, state {status.get('state')}, {status.get('message', '')}")
    check("job state done, every round run", status.get("state") == "done" and
          status.get("rounds_done") == A.rounds,
          f"{status.get('state')}, {status.get('rounds_done')} of {A.rounds} rounds")
    check("job result written", r.returncode == 0 and os.path.exists(out) and os.path.getsize(out) > 0,
          r.stderr.strip())
    check(f"every round closed, {A.rounds} of them", len({x['round'] for x in rounds}) == A.rounds,
          str(len(rounds)))
    # The round open at the kill may have taken answers from a victim before it died; every
    # later round plans the killed clients, waits out its deadline and closes by quorum.
    need = int(A.quorum * N + 0.999999)
    at_kill = [x for x in rounds if x["round"] == closed_at_kill + 1]
    later = [x for x in rounds if x["round"] > closed_at_kill + 1]
    check("the round open at the kill closed with its quorum",
          at_kill and all(x["participants"] >= max(need, N - KILL) for x in at_kill),
          f"participants {[x['participants'] for x in at_kill]} (quorum {need}), "
          f"dropouts {[x['dropouts'] for x in at_kill]}")
    check("the later rounds closed by quorum without the killed clients",
          later and all(x["dropouts"] >= KILL and need <= x["participants"] <= N - KILL
                        for x in later),
          f"{len(later)} rounds, participants {[x['participants'] for x in later]} "
          f"(quorum {need}), dropouts {[x['dropouts'] for x in later]}")
    check("no round missed its quorum (no retry)", figures["quorum_missed"] == 0,
          str(figures["quorum_missed"]))
    killed = {f"c{v}" for v in victims}
    check("the killed clients are the dropouts", killed <= set(figures["dropout_clients"]),
          f"dropouts {figures['dropout_clients'][:12]}")
    alive = [i for i, p in enumerate(clients) if i not in victims and p.poll() is not None]
    check("every other client is still running", not alive, f"exited: {alive[:10]}")
    check("the server is still running", server.poll() is None)

    # A clean stop: SIGTERM to the clients, then to the server; each exits 0, and no log
    # carries a sanitizer report (the sanitizer build runs this too).
    live = [(i, p) for i, p in enumerate(clients) if i not in victims]
    for _, p in live:
        p.send_signal(signal.SIGTERM)
    bad = []
    for i, p in live:
        try:
            if p.wait(30) != 0:
                bad.append((f"c{i}", p.returncode))
        except subprocess.TimeoutExpired:
            bad.append((f"c{i}", "no exit in 30 s"))
    check("every client stops on SIGTERM with exit 0", not bad, str(bad[:10]))
    server.send_signal(signal.SIGTERM)
    try:
        src = server.wait(30)
    except subprocess.TimeoutExpired:
        src = None
    check("the server stops on SIGTERM with exit 0", src == 0, f"exit {src}")
    reports = [name for name in os.listdir(d) if name.endswith(".log") and
               re.search(r"Sanitizer|runtime error:", open(f"{d}/{name}", errors="replace").read())]
    check("no sanitizer report in any log", not reports, str(reports[:10]))


def main():
    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.alarm(int(A.timeout))
    for b in (FEDKERN, SERVER, CLIENT):
        if not os.access(b, os.X_OK):
            sys.exit(f"fleet.py: {b} not built")
    d = tempfile.mkdtemp(prefix="fk-fleet-")
    figures = {"clients": N}
    try:
        fleet(d, figures)
    except (HardTimeout, KeyboardInterrupt, RuntimeError, subprocess.TimeoutExpired) as e:
        check("the run finished", False, str(e))
    finally:
        signal.alarm(0)
        kill_all()
    figures["wall_seconds"] = round(time.time() - T0, 1)
    figures["passed"] = not failures
    log(f"{'PASS' if not failures else 'FAIL'}: {N} clients, {figures.get('killed', 0)} killed, "
        f"job {figures.get('job_seconds')} s, server RSS {figures.get('server_rss_kb', 0) / 1024:.1f} MB "
        f"(peak {figures.get('server_rss_peak_kb', 0) / 1024:.1f} MB), "
        f"server CPU {figures.get('server_cpu_seconds')} s, "
        f"wall {figures['wall_seconds']} s")
    if A.json:
        print(json.dumps(figures), flush=True)
    if failures or A.keep:
        log(f"work directory kept: {d}")
    else:
        shutil.rmtree(d, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
