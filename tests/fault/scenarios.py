#!/usr/bin/env python3
"""Fault scenarios against the real daemons on 127.0.0.1: one fedkern-server,
six fedkern-client daemons, fedkern-faultproxy in between, jobs through
`fedkern job`. Every scenario is bounded in time and in the number of faults,
and stops by itself. A job must complete, and where the faults cannot change
the result (every client eventually answers every round before its deadline)
its model must be byte-identical to an unfaulted run with the same seed.

Usage: scenarios.py BUILD_DIR [SCENARIO...]
  scenarios: drop latency cuts corrupt stall client-kill server-kill disk-full multihost
  (default: all but multihost, which meson runs as its own test)
Exit 0 all passed, 1 a check failed, 77 (the meson skip code) when every
scenario asked for was skipped; a skip always prints "SKIP reason".
disk-full mounts a 16 MiB tmpfs on the state directory; without the right to
mount it falls back to the server's --state_max_mb limit (and says so).
multihost needs root for `ip netns`; without it: SKIP."""
import json
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

BUILD = os.path.abspath(sys.argv[1])
FEDKERN = os.path.join(BUILD, "fedkern")
SERVER = os.path.join(BUILD, "fedkern-server")
CLIENT = os.path.join(BUILD, "fedkern-client")
PROXY = os.path.join(BUILD, "fedkern-faultproxy")
K = 6
CLIENTS = ", ".join(f"c{i}" for i in range(K))

GMM_JOB = ("method = fedgrem\ndataset = gmm\nclients = " + CLIENTS + "\nseed = 11\nR = 3\n"
           "rounds = {rounds}\ndeadline = {deadline}\n")
TCA_JOB = ("method = fedrf-tca\ndataset = shift\nclients = " + CLIENTS + "\nseed = 3\n"
           "rounds = {rounds}\nN = 64\nm = 8\nhidden = 16\nbatch = 32\ntc = 4\nclasses = 2\n"
           "deadline = {deadline}\n")

failures = []
known = []
timings = []

# Known daemon bugs: a failing check whose logs show the signature is reported
# as KNOWN-BUG (listed at the end, not counted); once fixed the check passes.
KNOWN_BUGS = {}


def log(msg):
    print(msg, flush=True)


def check(name, cond, detail="", fed=None, bug=None):
    if not cond and bug in KNOWN_BUGS and fed and fed.logs_match(KNOWN_BUGS[bug][0]):
        log(f"KNOWN-BUG {name}: {detail}: {KNOWN_BUGS[bug][1]}")
        known.append(f"{name}: {KNOWN_BUGS[bug][1]}")
        return True
    log(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail else ""))
    if not cond:
        failures.append(name)
    return cond


def wait_for(paths, pattern, seconds):
    """First match of regex pattern in the file (or any of a list of files)
    within seconds, else None."""
    paths = [paths] if isinstance(paths, str) else paths
    until = time.time() + seconds
    rx = re.compile(pattern)
    while time.time() < until:
        for path in paths:
            try:
                m = rx.search(open(path, errors="replace").read())
            except FileNotFoundError:
                m = None
            if m:
                return m
        time.sleep(0.05)
    return None


def write_data(d):
    """Per-client CSVs: a 3-component mixture (gmm) and a two-class domain shift (shift)."""
    rng = random.Random(99)
    centers = [(0, 0, 0), (4, 4, 0), (0, 4, 4)]
    for c in range(K):
        with open(f"{d}/c{c}.csv", "w") as f:
            for _ in range(50 + 7 * c):
                k = rng.randrange(3)
                f.write(str(k + 1) + "".join(f",{centers[k][j] + rng.gauss(0, 1) + 0.05 * c:.6f}"
                                             for j in range(3)) + "\n")
        with open(f"{d}/d{c}.csv", "w") as f:
            for _ in range(80):
                k = rng.randrange(2)
                f.write(str(k + 1) + "".join(
                    f",{(1.5 if k else -1.5) * (j < 2) + (0.8 + 0.1 * c) * rng.gauss(0, 1) + 0.3 * c:.6f}"
                    for j in range(4)) + "\n")


class Fed:
    """One federation in its own work directory."""

    def __init__(self, name, ips="127.0.0.1"):
        self.dir = tempfile.mkdtemp(prefix=f"fk-fault-{name}-")
        self.name = name
        self.pki = f"{self.dir}/pki"
        self.db = f"{self.dir}/state/state.db"
        os.makedirs(f"{self.dir}/state")
        self.server = None
        self.proxy = None
        self.clients = [None] * K
        self.port = None
        self.proxy_port = None
        self.server_starts = 0
        self.client_state = False
        run([FEDKERN, "certs", "init", "--dir", self.pki])
        run([FEDKERN, "certs", "issue", "--dir", self.pki, "--server", "server", "--ip", ips])
        run([FEDKERN, "certs", "issue", "--dir", self.pki, "--admin", "op"])
        for c in range(K):
            run([FEDKERN, "certs", "issue", "--dir", self.pki, "--client", f"c{c}"])
        write_data(self.dir)

    def spawn(self, argv, logname, prefix=()):
        f = open(f"{self.dir}/{logname}", "a")
        return subprocess.Popen(list(prefix) + argv, stdout=f, stderr=f)

    def start_server(self, extra=(), listen=None, prefix=()):
        logp = f"{self.dir}/server.log"
        start = os.path.getsize(logp) if os.path.exists(logp) else 0
        listen = listen or (f"127.0.0.1:{self.port}" if self.port else "127.0.0.1:0")
        self.server = self.spawn([SERVER, "--listen", listen, "--tls_dir", self.pki, "--state",
                                  self.db, "--heartbeat_ms", "500", "--drain_ms", "200",
                                  "--metrics_listen", "127.0.0.1:0", *extra], "server.log", prefix)
        self.server_starts += 1
        until = time.time() + 20
        while time.time() < until:
            text = open(logp, errors="replace").read()[start:]
            m = re.search(r"event=server_ready [^\n]*port=(\d+)", text)
            if m:
                self.port = int(m.group(1))
                return
            if self.server.poll() is not None:
                break
            time.sleep(0.02)
        raise RuntimeError(f"fedkern-server did not start; see {logp}:\n" + open(logp).read()[-2000:])

    def start_proxy(self, *args):
        logp = f"{self.dir}/proxy.log"
        self.proxy = self.spawn([PROXY, "--listen", "127.0.0.1:0", "--target",
                                 f"127.0.0.1:{self.port}", "--seed", "17", "--max-seconds", "600",
                                 *args], "proxy.log")
        m = wait_for(logp, r"event=proxy_ready listen=\S+ port=(\d+)", 10)
        if not m:
            raise RuntimeError("fedkern-faultproxy did not start")
        self.proxy_port = int(m.group(1))

    def start_client(self, c, server=None, prefix=()):
        server = server or f"127.0.0.1:{self.proxy_port or self.port}"
        self.clients[c] = self.spawn([CLIENT, "--server", server, "--server_name", "server",
                                      "--tls_dir", self.pki, "--name", f"c{c}", "--data.gmm",
                                      f"{self.dir}/c{c}.csv", "--data.shift",
                                      f"{self.dir}/d{c}.csv", "--backoff_max_ms", "500",
                                      *self.state_dir(c), "--log_level", "debug"],
                                     f"client{c}.log", prefix)

    def state_dir(self, c):
        """--state_dir where clients are killed and must continue their jobs; elsewhere
        none, so the other scenarios do not pay a client fsync per step."""
        return ["--state_dir", f"{self.dir}/cstate-c{c}"] if self.client_state else []

    def start_all(self, proxy_args=None):
        self.start_server()
        if proxy_args is not None:
            self.start_proxy(*proxy_args)
        for c in range(K):
            self.start_client(c)

    def job(self, sub, *args, server=None, prefix=(), timeout=200):
        server = server or f"127.0.0.1:{self.port}"
        r = subprocess.run(list(prefix) + [FEDKERN, "job", sub, *args, "--server", server,
                                           "--server_name", "server", "--tls_dir", self.pki,
                                           "--name", "op"],
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def submit(self, text, **kw):
        path = f"{self.dir}/job.conf"
        with open(path, "w") as f:
            f.write(text)
        # the clients may still be joining (through the proxy): the fault scenarios test the
        # rounds, not the submit-time client check
        rc, out, err = self.job("submit", path, "--skip_client_check", **kw)
        if rc:
            raise RuntimeError(f"job submit failed: {err}")
        return out.strip()

    def result(self, jid, wait=150, **kw):
        """Model bytes of a finished job, or None with the reason printed."""
        out = f"{self.dir}/model-{jid}.bin"
        rc, so, se = self.job("result", jid, "--out", out, "--wait", str(wait), **kw,
                              timeout=wait + 30)
        if rc:
            log(f"     job result {jid}: {se.strip()} {so.strip()}")
            return None
        return bundle_of(open(out, "rb").read())

    def status(self, jid, **kw):
        rc, out, _ = self.job("status", jid, "--json", **kw)
        try:
            return json.loads(out) if rc == 0 else {}
        except ValueError:
            return {}

    def kill(self, p, sig=signal.SIGKILL):
        if p and p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def close(self, keep=False):
        for c in range(K):
            self.kill(self.clients[c], signal.SIGTERM)
        self.kill(self.proxy, signal.SIGTERM)
        self.kill(self.server, signal.SIGTERM)
        if keep:
            log(f"     logs kept in {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def logs_match(self, pattern):
        rx = re.compile(pattern)
        for name in os.listdir(self.dir):
            if name.endswith(".log") and rx.search(open(f"{self.dir}/{name}", errors="replace").read()):
                return True
        return False

    def acknowledged(self):
        """Updates the server acknowledged, from the clients' debug logs:
        {(client, job, attempt, round, phase)}, stale answers excluded."""
        acks = set()
        for c in range(K):
            stale = set()
            try:
                text = open(f"{self.dir}/client{c}.log", errors="replace").read()
            except FileNotFoundError:
                continue
            for m in re.finditer(r"event=(update_stale|update_done) job=(\d+)(?:\.(\d+))? "
                                 r"round=(\d+)(?: phase=(\d+))?", text):
                key = (int(m.group(2)), int(m.group(3) or 0), int(m.group(4)))
                if m.group(1) == "update_stale":
                    stale.add(key)
                elif key not in stale:
                    acks.add((f"c{c}",) + key + (int(m.group(5) or 0),))
        return acks

    def stored(self):
        con = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10)
        try:
            # retention (issue 35) deletes the bytes of closed rounds' updates once the next
            # checkpoint is durable; each update's report row is written in the update's own
            # transaction and kept, so it too proves the acknowledged update was stored
            return set(con.execute("SELECT identity, job_id, attempt, round, phase FROM updates "
                                   "UNION SELECT identity, job_id, attempt, round, phase "
                                   "FROM update_reports"))
        finally:
            con.close()


def run(argv):
    r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if r.returncode:
        raise RuntimeError(" ".join(argv) + ": " + r.stderr)
    return r.stdout


REFS = {}


def bundle_of(data):
    """The model file's Bundle: its ModelInfo trailer (fields 15-18: method, round, job id,
    software) names the job, which differs between runs of the same model."""
    out, i = bytearray(), 0
    def varint(i):
        v, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if b < 0x80:
                return v, i
    while i < len(data):
        start = i
        key, i = varint(i)
        wt = key & 7
        if wt == 0:
            _, i = varint(i)
        elif wt == 1:
            i += 8
        elif wt == 2:
            n, i = varint(i)
            i += n
        elif wt == 5:
            i += 4
        else:
            return bytes(data)  # not protobuf as expected: compare whole files
        if not 15 <= key >> 3 <= 18:
            out += data[start:i]
    return bytes(out)


def job_text(kind, rounds, deadline=30):
    return (GMM_JOB if kind == "gmm" else TCA_JOB).format(rounds=rounds, deadline=deadline)


def reference(kind, rounds, deadline=30):
    """Model of the unfaulted run (cached per job text)."""
    text = job_text(kind, rounds, deadline)
    if text not in REFS:
        fed = Fed(f"ref-{kind}")
        try:
            t0 = time.time()
            fed.start_all()
            jid = fed.submit(text)
            REFS[text] = fed.result(jid)
            timings.append((f"reference {kind} rounds={rounds}", time.time() - t0))
        finally:
            fed.close()
    return REFS[text]


def proxy_faults(fed):
    plog = open(f"{fed.dir}/proxy.log").read()
    return {k: len(re.findall(f"fate={k}", plog)) for k in ("dropped", "periodic_cut")}


def job_under(name, kind, rounds, proxy_args, enough=None, max_jobs=6, after=None):
    """Jobs with every client behind the proxy, one after the other until
    enough(faults) holds (at most max_jobs; one job when enough is None): each
    must complete with the unfaulted model. Repeating the job keeps the check
    independent of how fast a job is compared with the faults' timing."""
    ref = reference(kind, rounds)
    fed = Fed(name)
    ok = False
    try:
        t0 = time.time()
        fed.start_all(proxy_args)
        ok = True
        for j in range(max_jobs if enough else 1):
            jid = fed.submit(job_text(kind, rounds))
            model = fed.result(jid)
            st = fed.status(jid)
            faults = proxy_faults(fed)
            ok &= check(f"{name}: {kind} job {j + 1} completes",
                        model is not None and st.get("state") == "done",
                        f"{time.time() - t0:.1f} s, dropouts {st.get('dropouts_total')}, "
                        f"proxy {faults}")
            if model is not None:
                # also 'corrupt': a corrupted TLS record length stalls a connection (each peer
                # waits for bytes that never come); the client notices by its unanswered PING
                # and reconnects before the server would end its session (docs/daemons.md
                # "Sessions"), so no client becomes a dropout and the model is the same
                ok &= check(f"{name}: {kind} job {j + 1} model identical to the unfaulted run",
                            model == ref)
            if not ok or (enough and enough(faults)):
                break
        timings.append((f"{name} {kind} ({j + 1} jobs)", time.time() - t0))
        if after:
            ok &= after(fed)
        return fed, faults
    finally:
        fed.close(keep=not ok)


def scenario_drop():
    """30 % of connections reset at accept; with periodic cuts too, so that the
    clients reconnect many times through the dropping proxy."""
    for kind, rounds in (("gmm", 30), ("shift", 12)):
        _, faults = job_under("drop30", kind, rounds, ["--drop", "0.3"])
        check(f"drop30: the proxy dropped connections ({kind})", faults["dropped"] > 0,
              str(faults["dropped"]))
    _, faults = job_under("drop30+cuts", "gmm", 30, ["--drop", "0.3", "--cut-every-ms", "300"],
                          lambda f: f["dropped"] >= 5)
    check("drop30+cuts: many reconnections were dropped", faults["dropped"] >= 5,
          str(faults))


def scenario_latency():
    """500 ms added each way on every chunk (1 s round trip), 100 ms jitter."""
    for kind in ("gmm", "shift"):
        job_under("latency500", kind, 3, ["--latency-ms", "500", "--jitter-ms", "100"])


def scenario_cuts():
    """Every open connection reset (RST) every 400 ms."""
    for kind, rounds in (("gmm", 30), ("shift", 12)):
        _, faults = job_under("cuts", kind, rounds, ["--cut-every-ms", "300"],
                              lambda f: f["periodic_cut"] >= 3)
        check(f"cuts: connections were cut ({kind})", faults["periodic_cut"] > 0,
              str(faults["periodic_cut"]))


def scenario_corrupt():
    """Bytes flipped on the wire: TLS must reject the records (the connection
    fails and is rebuilt), never deliver them; the job completes unchanged."""
    def tls_rejected(fed):
        text = open(f"{fed.dir}/server.log", errors="replace").read()
        for c in range(K):
            text += open(f"{fed.dir}/client{c}.log", errors="replace").read()
        hits = re.findall(r"event=\w+ [^\n]*(?:bad record mac|decryption failed|bad_record_mac|"
                          r"SSL|TLS|tls|decrypt)[^\n]*", text)
        return check("corrupt: TLS rejected corrupted records (connections failed and were rebuilt)",
                     len(hits) > 0, f"{len(hits)} TLS errors, e.g. {hits[0][:160] if hits else ''}")

    job_under("corrupt", "gmm", 30, ["--corrupt", "0.0001"], after=tls_rejected)


def scenario_stall():
    """Each client's first connection stalls mid-job: after 12000 bytes the proxy forwards
    nothing more either way and sends no FIN or RST (each side waits for bytes that never
    come, as a damaged TLS record length leaves them; 'corrupt' makes one only now and then).
    The client notices by its unanswered PING and reconnects before the server ends its
    session (docs/daemons.md "Sessions"): no dropout, the unfaulted model. Before: the client
    noticed at its Heartbeat deadline (5 s), every session had expired (3 x 500 ms), 12
    dropouts and another model."""
    script = f"{tempfile.mkdtemp(prefix='fk-fault-rules-')}/stall.rules"
    with open(script, "w") as f:  # connections 0..K-1 (the first of each client) stall
        f.write("blackhole-after=12000\n" * K + "drop=0\n" * 200)

    def holed(fed):
        plog = open(f"{fed.dir}/proxy.log").read()
        n = plog.count("conn_blackholed")
        expired = open(f"{fed.dir}/server.log", errors="replace").read().count(
            "event=session_expired")
        return (check("stall: connections were blackholed", n > 0, str(n)) &
                check("stall: no session expired", expired == 0, str(expired)))

    try:
        job_under("stall", "gmm", 30, ["--script", script], after=holed)
    finally:
        shutil.rmtree(os.path.dirname(script), ignore_errors=True)


def scenario_client_kill():
    """Clients killed with SIGKILL at random moments, each restarted 0.2-1 s later."""
    for kind, rounds in (("gmm", 600), ("shift", 60)):
        client_kill(kind, rounds)


def client_kill(kind, rounds):
    """8 kills spread over as many jobs as it takes (at most 12), each job must complete.
    Gone clients are no longer planned, so a short job can end between two kills."""
    deadline = 5
    rng = random.Random(23)
    fed = Fed("client-kill")
    fed.client_state = True
    ok = False
    try:
        t0 = time.time()
        fed.start_all()
        kills, jobs, ok = 0, 0, True
        while kills < 8 and jobs < 12 and ok and time.time() - t0 < 150:
            jid = fed.submit(job_text(kind, rounds, deadline))
            jobs += 1
            while kills < 8 and time.time() - t0 < 150:
                time.sleep(rng.uniform(0.1, 0.4))
                if fed.status(jid).get("state") != "running":
                    break
                c = rng.randrange(K)
                fed.kill(fed.clients[c])
                kills += 1
                time.sleep(rng.uniform(0.1, 0.4))
                fed.start_client(c)
            model = fed.result(jid)
            st = fed.status(jid)
            ok &= check(f"client-kill: {kind} job {jobs} completes after SIGKILLs of clients",
                        model is not None,
                        f"{kills} kills so far, {time.time() - t0:.1f} s, dropouts "
                        f"{st.get('dropouts_total')}", fed, f"client-kill {kind}")
            if model is None:
                break
        timings.append((f"client-kill {kind} ({jobs} jobs)", time.time() - t0))
        dead = {f"c{c}": fed.clients[c].poll() for c in range(K) if fed.clients[c].poll() is not None}
        ok &= check(f"client-kill: {kind}: every restarted client is still running", not dead,
                    f"exited (code or -signal): {dead}")
        if not known or not known[-1].startswith(f"client-kill: {kind}"):
            ok &= check(f"client-kill: {kind}: 8 kills while jobs ran", kills == 8, str(kills))
        acks, stored = fed.acknowledged(), fed.stored()
        ok &= check(f"client-kill: {kind}: every acknowledged update is in the state db",
                    acks and acks <= stored, f"{len(acks)} acknowledged, {len(stored)} stored")
        if ok and kind == "gmm":
            ok &= lost_state(fed, jobs + 1)
    finally:
        fed.close(keep=not ok)


def lost_state(fed, jid):
    """A client restarted without its state directory cannot do FedGrEM steps
    after round 1: it reports each failure, backs off, the server counts it as a
    dropout with the reason and closes the phase without waiting for the deadline."""
    rounds, deadline = 30, 5
    t0 = time.time()
    got = fed.submit(job_text("gmm", rounds, deadline))
    if got != str(jid):
        return check("lost-state: job submitted with the expected id", False, f"{got} != {jid}")
    jid = got
    if not wait_for(f"{fed.dir}/server.log", rf"event=round_closed job={jid} round=2 ", 30):
        return check("lost-state: round 2 closed", False)
    fed.kill(fed.clients[0])
    shutil.rmtree(f"{fed.dir}/cstate-c0", ignore_errors=True)
    fed.start_client(0)
    model = fed.result(jid, wait=120)
    dt = time.time() - t0
    timings.append(("client-kill lost-state gmm", dt))
    slog = open(f"{fed.dir}/server.log", errors="replace").read()
    clog = open(f"{fed.dir}/client0.log", errors="replace").read()
    failed = re.findall(rf"event=client_failed job={jid} [^\n]*client=c0 [^\n]*", slog)
    drops = re.findall(rf"event=dropout job={jid} [^\n]*client=c0 reason=\"client failed:[^\n]*", slog)
    reports = len(re.findall(rf"event=failure_reported job={jid}\.", clog))
    ok = check("lost-state: the job completes without the client's state",
               model is not None, f"{dt:.1f} s")
    ok &= check("lost-state: the server logs the client's failure with its reason",
                failed and "before its initialisation" in failed[0],
                failed[0][:200] if failed else "no client_failed line")
    ok &= check("lost-state: each failure counted as a dropout with the reason", len(drops) >= 1,
                f"{len(drops)} dropouts, {len(failed)} failures; e.g. {drops[0][:160] if drops else ''}")
    ok &= check("lost-state: the client reports once per task and backs off (no spinning)",
                0 < reports <= rounds and re.search(r"event=task_backoff", clog) is not None,
                f"{reports} failure reports for {rounds} rounds")
    # every failed phase closed once the others answered, not at its 5 s deadline
    ok &= check("lost-state: phases close without waiting for the deadline",
                dt < rounds * deadline / 4, f"{dt:.1f} s for {rounds} rounds, deadline {deadline} s")
    # no job runs any more: the next idle PullTask answer (long poll, <= 20 s) lists none,
    # and the clients remove their state files of the ended jobs
    def left():
        return sorted(f"c{c}/{n}" for c in range(K) if os.path.isdir(f"{fed.dir}/cstate-c{c}")
                      for n in os.listdir(f"{fed.dir}/cstate-c{c}"))
    until = time.time() + 40
    while left() and time.time() < until:
        time.sleep(0.5)
    ok &= check("lost-state: the clients removed the state files of the ended jobs", not left(),
                " ".join(left()[:6]))
    return ok


def scenario_server_kill():
    """The server killed with SIGKILL 20 times in one job, restarted each time."""
    rounds = 4000
    ref = reference("gmm", rounds)
    rng = random.Random(29)
    fed = Fed("server-kill")
    ok = False
    try:
        t0 = time.time()
        fed.start_all()
        jid = fed.submit(job_text("gmm", rounds))
        kills = 0
        while kills < 20 and time.time() - t0 < 240:
            time.sleep(rng.uniform(0.1, 0.5))
            if fed.status(jid).get("state") != "running":
                break
            fed.kill(fed.server)
            kills += 1
            fed.start_server()
        left = fed.status(jid)
        model = fed.result(jid)
        dt = time.time() - t0
        timings.append(("server-kill gmm (20 kills)", dt))
        slog = open(f"{fed.dir}/server.log").read()
        resumed = len(re.findall(r"event=job_resumed job=1 ", slog))
        ok = check("server-kill: job completes after 20 SIGKILLs of the server",
                   model is not None and kills == 20 and resumed == 20,
                   f"{kills} kills, {resumed} resumes, round {left.get('rounds_done')} after the "
                   f"last kill, {dt:.1f} s")
        ok &= check("server-kill: model identical to the unfaulted run", model == ref, "", fed,
                    "server-kill model")
        crashed = [c for c in range(K) if fed.clients[c].poll() is not None]
        ok &= check("server-kill: every client survived the server kills", not crashed,
                    f"crashed: {crashed}", fed, "server-kill model")
        acks, stored = fed.acknowledged(), fed.stored()
        lost = acks - stored
        ok &= check("server-kill: no acknowledged update lost (clients' acks vs updates table)",
                    acks and not lost, f"{len(acks)} acknowledged, {len(stored)} stored, "
                    f"lost {sorted(lost)[:5]}")
        r = subprocess.run(["sqlite3", fed.db, "PRAGMA integrity_check;"], capture_output=True,
                           text=True, timeout=30)
        ok &= check("server-kill: sqlite3 integrity_check ok", r.stdout.strip() == "ok",
                    r.stdout.strip()[:200])
    finally:
        fed.close(keep=not ok)


def try_mount_tmpfs(path, size_kb):
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", path],
                       capture_output=True, text=True)
    return r.returncode == 0, r.stderr.strip()


def fill(path):
    """Write zeros into path until the file system is full."""
    try:
        with open(path, "wb") as f:
            while True:
                f.write(b"\0" * 4096)
                f.flush()
    except OSError:
        pass


def scenario_disk_full():
    """Disk full on the state directory: a clear error, updates refused (not
    acknowledged), and the job goes on once space is back."""
    rounds = 300
    ref = reference("gmm", rounds)
    fed = Fed("disk-full")
    state = f"{fed.dir}/state"
    # 16 MiB: room for SQLite's WAL to reach its 4 MiB auto-checkpoint once space is back
    mounted, why = try_mount_tmpfs(state, 16384)
    ok = False
    try:
        t0 = time.time()
        if mounted:
            log("     disk-full: state directory on a 16 MiB tmpfs; the disk is filled with a file")
            fed.start_server()
        else:
            log(f"     disk-full: cannot mount a tmpfs ({why}); using --state_max_mb 1 instead")
            fed.start_server(["--state_max_mb", "1"])
        for c in range(K):
            fed.start_client(c)
        jid = fed.submit(job_text("gmm", rounds))
        m = wait_for(f"{fed.dir}/server.log", r"event=round_closed job=1 round=3 ", 60)
        check("disk-full: rounds close before the disk fills", m is not None)
        filler = f"{state}/filler"
        if mounted:
            fill(filler)
        full_at = time.time()
        # the server must now refuse: a clear error in its log and in the clients' logs
        m = wait_for(f"{fed.dir}/server.log", r"level=(error|warn) [^\n]*full[^\n]*", 30)
        ok = check("disk-full: the server logs a clear error", m is not None,
                   m.group(0)[:200] if m else "no error line")
        # one 20 s budget for all clients: when the server stalls first, none pushes at all
        refused = wait_for([f"{fed.dir}/client{c}.log" for c in range(K)],
                           r"event=(push_refused|connection_dropped) [^\n]*full[^\n]*", 20)
        time.sleep(2)
        acks_full = fed.acknowledged()
        time.sleep(3)
        grew = fed.acknowledged() - acks_full
        # the server may fail on the round's own state first; then no client pushes at all
        ok &= check("disk-full: nothing acknowledged while full (clients refused or idle)",
                    not grew, refused.group(0)[:200] if refused else
                    f"no refusal logged; {len(grew)} acknowledged while full")
        stored = fed.stored()
        ok &= check("disk-full: every acknowledged update is stored", acks_full <= stored,
                    f"{len(acks_full)} acknowledged, {len(stored)} stored")
        st = fed.status(jid)
        rounds_while_full = st.get("rounds_done")
        time.sleep(2)
        st2 = fed.status(jid)
        ok &= check("disk-full: no round closes while the disk is full",
                    st2.get("rounds_done") == rounds_while_full and st2.get("state") == "running",
                    f"{rounds_while_full} -> {st2.get('rounds_done')}, {st2.get('state')}")
        ok &= check("disk-full: the server is still running", fed.server.poll() is None)
        if mounted:
            os.unlink(filler)
        model = fed.result(jid, wait=120)
        dt = time.time() - t0
        timings.append(("disk-full gmm", dt))
        if mounted:
            ok &= check("disk-full: the job completes once space is back", model is not None,
                        f"{time.time() - full_at:.1f} s after the disk filled")
            ok &= check("disk-full: the completed model equals the unfaulted run",
                        model == ref)
    finally:
        for c in range(K):  # stop everything before the state directory goes away
            fed.kill(fed.clients[c], signal.SIGTERM)
        fed.kill(fed.server, signal.SIGTERM)
        if mounted:
            if ok:
                subprocess.run(["umount", "-l", state], capture_output=True)
            else:  # keep the state db with the logs for a post-mortem
                shutil.copytree(state, f"{fed.dir}/state-copy", dirs_exist_ok=True)
                subprocess.run(["umount", "-l", state], capture_output=True)
        fed.close(keep=not ok)


class Netns:
    """Server and clients each in their own network namespace, one veth pair per
    client to the server's namespace, addresses from 198.18.0.0/15 (RFC 2544)."""

    def __init__(self, n_clients):
        tag = f"fk{os.getpid() % 10000000}"
        self.server = f"{tag}s"
        self.clients = [f"{tag}c{i}" for i in range(n_clients)]
        self.links = []
        self.made = []

    def ip(self, *args):
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
        if r.returncode:
            raise OSError("ip " + " ".join(args) + ": " + r.stderr.strip())

    def create(self):
        for ns in [self.server] + self.clients:
            self.ip("netns", "add", ns)
            self.made.append(ns)
            self.ip("-n", ns, "link", "set", "lo", "up")
        for i, ns in enumerate(self.clients):
            a, b = f"{self.server}{i}", f"{ns}v"
            self.ip("link", "add", a, "netns", self.server, "type", "veth", "peer", "name", b,
                    "netns", ns)
            self.ip("-n", self.server, "addr", "add", f"198.18.{i + 1}.1/24", "dev", a)
            self.ip("-n", ns, "addr", "add", f"198.18.{i + 1}.2/24", "dev", b)
            self.ip("-n", self.server, "link", "set", a, "up")
            self.ip("-n", ns, "link", "set", b, "up")

    def exec(self, ns):
        return ["ip", "netns", "exec", ns]

    def destroy(self):
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=20)
        self.made = []


def scenario_multihost():
    """The same FedGrEM and FedRF-TCA jobs with server and clients in separate
    network namespaces joined by veth pairs; models equal to loopback runs."""
    if os.geteuid() != 0:
        return skip("multihost: creating network namespaces needs root (CAP_SYS_ADMIN)")
    nets = Netns(K)
    try:
        nets.create()
    except (OSError, subprocess.SubprocessError) as e:
        nets.destroy()
        return skip(f"multihost: cannot create network namespaces and veth pairs: {e}")
    prev = {sig: signal.signal(sig, lambda *_: sys.exit(1)) for sig in (signal.SIGTERM, signal.SIGINT)}
    fed = Fed("multihost")
    ok = False
    try:
        t0 = time.time()
        fed.start_server(listen="0.0.0.0:7443", prefix=nets.exec(nets.server))
        for c in range(K):
            fed.start_client(c, server=f"198.18.{c + 1}.1:7443", prefix=nets.exec(nets.clients[c]))
        admin = dict(server="198.18.1.1:7443", prefix=nets.exec(nets.clients[0]))
        ok = True
        for kind, rounds in (("gmm", 10), ("shift", 6)):
            ref = reference(kind, rounds)
            jid = fed.submit(job_text(kind, rounds), **admin)
            model = fed.result(jid, **admin)
            ok &= check(f"multihost: {kind} job completes across namespaces", model is not None,
                        f"{time.time() - t0:.1f} s")
            ok &= check(f"multihost: {kind} model identical to the loopback run", model == ref)
        peers = re.findall(r"event=client_joined client=c\d+ \S+ peer=(198\.18\.\d+\.2):",
                           open(f"{fed.dir}/server.log").read())
        ok &= check("multihost: clients joined from their namespace addresses",
                    len(set(peers)) == K, " ".join(sorted(set(peers))))
        timings.append(("multihost gmm+shift", time.time() - t0))
    finally:
        fed.close(keep=not ok)
        nets.destroy()
        for sig, h in prev.items():
            signal.signal(sig, h)
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        check("multihost: namespaces removed", nets.server not in left, "")


skipped = []


def skip(reason):
    log(f"SKIP {reason}")
    skipped.append(reason)


SCENARIOS = {
    "drop": scenario_drop,
    "latency": scenario_latency,
    "cuts": scenario_cuts,
    "corrupt": scenario_corrupt,
    "stall": scenario_stall,
    "client-kill": scenario_client_kill,
    "server-kill": scenario_server_kill,
    "disk-full": scenario_disk_full,
    "multihost": scenario_multihost,
}


def main():
    names = sys.argv[2:] or [n for n in SCENARIOS if n != "multihost"]
    t0 = time.time()
    for n in names:
        if n not in SCENARIOS:
            print(f"scenarios.py: unknown scenario '{n}'; use {' '.join(SCENARIOS)}")
            return 2
        s0 = time.time()
        try:
            SCENARIOS[n]()
        except Exception as e:  # one broken scenario must not hide the others
            check(f"{n}: ran without an exception", False, repr(e))
        log(f"---- {n}: {time.time() - s0:.1f} s")
    log("timings:")
    for name, dt in timings:
        log(f"  {name:40s} {dt:7.1f} s")
    for k in known:
        log(f"KNOWN-BUG (not counted): {k}")
    log(f"{len(failures)} failed, {len(known)} known bugs, {time.time() - t0:.1f} s total")
    if failures:
        return 1
    return 77 if skipped and len(skipped) == len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
