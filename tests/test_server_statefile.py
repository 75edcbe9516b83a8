#!/usr/bin/env python3
"""The server's state file against the real daemons on 127.0.0.1 (issue 33, rows 4 and 5).

1. A present file that holds no federation (zero length, or another program's SQLite
   database) is refused with a message naming --init; --init starts a new federation in it;
   an absent file is a new federation as before.
2. `rm state.db` while a job runs: the server logs state_file_removed, writes the database
   back from its open connection (state_file_recreated), the job ends done, and a restarted
   server still knows the job (before: nothing logged, and 0 jobs after the restart).
   Another file moved over it: the server saves its own state beside it and exits 1.
   (Row 1) A byte of the stored model flipped while the server is down: `job result`
   answers DATA_LOSS with the restore steps (before: it served the changed model).
3. (Row 10, the client side) A client paused past its session's expiry is told so on its
   next call (FAILED_PRECONDITION), joins again and takes part in the rounds again.
4. A file-size limit (RLIMIT_FSIZE, `ulimit -f`) reached by the state file: the server logs
   the error naming the limit and keeps running (before: killed by SIGXFSZ without a log
   line); once the limit is raised the job ends done.

Usage: test_server_statefile.py FEDKERN FEDKERN_SERVER FEDKERN_CLIENT
Bounded: every wait has a timeout; the daemons are stopped at the end."""
import os
import random
import re
import resource
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time

FK, SERVER, CLIENT = (os.path.abspath(a) for a in sys.argv[1:4])
D = tempfile.mkdtemp(prefix="fk-statefile-")
PKI = f"{D}/pki"
procs = []
failures = []


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (f": {detail}" if detail and not cond else ""))
    if not cond:
        failures.append(name)
    return cond


def run(argv, **kw):
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)


def wait_log(path, pattern, seconds, start=0, proc=None):
    """The first match of pattern in path after offset start, or None after seconds (or once
    proc, if given, has exited)."""
    until = time.time() + seconds
    while time.time() < until:
        if os.path.exists(path):
            m = re.search(pattern, open(path, errors="replace").read()[start:])
            if m:
                return m
        if proc is not None and proc.poll() is not None:
            return None
        time.sleep(0.05)
    return None


def start_server(db, log, extra=(), preexec=None):
    start = os.path.getsize(log) if os.path.exists(log) else 0
    f = open(log, "a")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    p = subprocess.Popen([SERVER, "--listen", "127.0.0.1:0", "--tls_dir", PKI, "--state", db,
                          "--heartbeat_ms", "500", "--drain_ms", "200", "--metrics_listen",
                          "off", *extra], stdout=f, stderr=f, env=env, preexec_fn=preexec)
    procs.append(p)
    m = wait_log(log, r"event=server_ready [^\n]*port=(\d+)", 20, start, p)
    return p, int(m.group(1)) if m else None


def start_clients(port):
    out = []
    for c in range(3):
        f = open(f"{D}/c{c}.log", "a")
        p = subprocess.Popen([CLIENT, "--server", f"127.0.0.1:{port}", "--server_name", "server",
                              "--tls_dir", PKI, "--name", f"c{c}", "--data.gmm", f"{D}/c{c}.csv",
                              "--backoff_max_ms", "300"], stdout=f, stderr=f,
                             env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        procs.append(p)
        out.append(p)
    return out


def stop(p, sig=signal.SIGTERM):
    if p.poll() is None:
        p.send_signal(sig)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def wait_exit(p, seconds):
    """The exit status, or None when p still runs after seconds (then it is stopped)."""
    try:
        return p.wait(seconds)
    except subprocess.TimeoutExpired:
        stop(p)
        return None


def job(port, *args):
    return run([FK, "job", *args, "--server", f"127.0.0.1:{port}", "--server_name", "server",
                "--tls_dir", PKI, "--name", "op"])


def submit(port, rounds):
    with open(f"{D}/job.conf", "w") as f:
        f.write(f"method = fedgrem\ndataset = gmm\nclients = c0, c1, c2\nrounds = {rounds}\n"
                "R = 2\nrestarts = 2\nquorum = 1\ndeadline = 20\n")
    r = job(port, "submit", f"{D}/job.conf", "--wait_clients", "20")
    check("job submitted", r.returncode == 0, r.stderr)
    return r.stdout.strip()


def running_job(name, rounds):
    """A server on D/name/state.db (log D/name.log), three clients and a job of `rounds`
    rounds with three closed: (server, port, clients, job id, db, log), or None."""
    os.makedirs(f"{D}/{name}")
    db, log = f"{D}/{name}/state.db", f"{D}/{name}.log"
    p, port = start_server(db, log)
    if not check(f"{name}: server starts", port is not None):
        return None
    clients = start_clients(port)
    jid = submit(port, rounds)
    check(f"{name}: rounds close",
          wait_log(log, r"event=round_closed job=1 round=3 ", 60) is not None)
    return p, port, clients, jid, db, log


def case_presence():
    """An empty or foreign file is refused without --init; absent is new."""
    db = f"{D}/p/state.db"
    os.makedirs(f"{D}/p")
    log = f"{D}/presence.log"
    open(db, "wb").close()
    p, port = start_server(db, log)
    rc = wait_exit(p, 5)
    text = open(log).read()
    check("empty file: refused, exit 1", port is None and rc == 1, f"exit {rc}")
    check("empty file: the message names --init", "empty file" in text and "--init" in text,
          text[-400:])
    p, port = start_server(db, log, ["--init"])
    check("empty file with --init: the server starts", port is not None)
    stop(p)
    os.unlink(db)
    foreign = sqlite3.connect(db)
    foreign.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    foreign.execute("INSERT INTO photos (path) VALUES ('a.jpg')")
    foreign.commit()
    foreign.close()
    p, port = start_server(db, log)
    rc = wait_exit(p, 5)
    text = open(log).read()
    check("foreign SQLite file: refused, exit 1", port is None and rc == 1, f"exit {rc}")
    check("foreign SQLite file: the message says so",
          "without fedkern's tables" in text and "--init" in text, text[-400:])
    names = [r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")]
    check("foreign SQLite file: left as it was", names == ["photos"], str(names))
    shutil.rmtree(f"{D}/p")
    os.makedirs(f"{D}/p")
    p, port = start_server(db, log)
    check("absent file: a new federation", port is not None)
    stop(p)


def case_removed():
    """rm state.db while a job runs: written back, the job ends done, a restart knows it."""
    fed = running_job("removed", 60)
    if not fed:
        return
    p, port, clients, jid, db, log = fed
    os.unlink(db)
    m = wait_log(log, r"level=error [^\n]*event=state_file_removed[^\n]*", 5)
    check("rm state.db: an error line within seconds", m is not None)
    m = wait_log(log, r"event=state_file_recreated[^\n]*", 10)
    check("rm state.db: the file is written back", m is not None and os.path.exists(db))
    r = job(port, "status", jid, "--follow")
    check("the job ends done", r.returncode == 0 and "done" in r.stdout, r.stdout[-300:])
    for c in clients:
        stop(c)
    check("server stops cleanly", stop(p) == 0)
    p, port = start_server(db, log)
    if not check("server restarts on the written-back file", port is not None):
        return
    r = job(port, "status", jid, "--json")
    check("after the restart the job is still there, done",
          r.returncode == 0 and '"done"' in r.stdout, (r.stdout + r.stderr)[-300:])
    r = job(port, "result", jid, "--out", f"{D}/model.bin")
    check("and its model is served", r.returncode == 0 and os.path.getsize(f"{D}/model.bin") > 0,
          r.stderr)
    stop(p)
    # row 1: one byte of the stored model flipped while the server is down (the SQLite pages
    # stay sound): job result refuses it with the restore steps instead of serving it
    con = sqlite3.connect(db)
    rowid, blob = con.execute("SELECT rowid, blob FROM models ORDER BY round DESC LIMIT 1").fetchone()
    blob = bytearray(blob)
    blob[len(blob) // 2] ^= 0x04
    con.execute("UPDATE models SET blob = ? WHERE rowid = ?", (bytes(blob), rowid))
    con.commit()
    con.close()
    p, port = start_server(db, log)
    if not check("server starts with a flipped byte in a done job's model", port is not None):
        return
    r = job(port, "result", jid, "--out", f"{D}/model2.bin")
    check("job result refuses the changed model (DATA_LOSS, restore steps)",
          r.returncode != 0 and "DATA_LOSS" in r.stderr and "SHA-256" in r.stderr
          and "restore the latest backup" in r.stderr and not os.path.exists(f"{D}/model2.bin"),
          (r.stdout + r.stderr)[-400:])
    check("the mismatch is logged", wait_log(log, r"level=error [^\n]*state_checksum_mismatch", 5)
          is not None)
    stop(p)


def case_replaced():
    """Another file moved over state.db while a job runs: the server saves its own state
    beside it, leaves the new file alone and stops with exit 1."""
    fed = running_job("replaced", 100000)
    if not fed:
        return
    p, _, clients, _, db, log = fed
    other = sqlite3.connect(f"{D}/replaced/other.db")
    other.execute("CREATE TABLE t (x)")
    other.commit()
    other.close()
    os.rename(f"{D}/replaced/other.db", db)
    m = wait_log(log, r"level=error [^\n]*event=state_file_replaced[^\n]*", 5)
    check("replaced: an error line within seconds", m is not None)
    rc = wait_exit(p, 30)
    check("replaced: the server stops with exit 1", rc == 1, f"exit {rc}")
    saved = re.search(r"saved=(\S+)", m.group(0)).group(1) if m else ""
    ok = bool(saved) and os.path.exists(saved)
    check("replaced: the server's state is saved beside it", ok, saved)
    if ok:
        n = sqlite3.connect(saved).execute("SELECT count(*) FROM jobs").fetchone()[0]
        check("replaced: the saved copy holds the job", n == 1, str(n))
    names = [r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master")]
    check("replaced: the new file is left alone", names == ["t"], str(names))
    for c in clients:
        stop(c)


def case_session():
    """A client paused past its session's expiry (3 heartbeat intervals) comes back: its next
    call is answered FAILED_PRECONDITION (or its connection was dropped), it joins again and
    takes part in the job's rounds again."""
    fed = running_job("session", 100000)
    if not fed:
        return
    p, _, clients, _, _, log = fed
    c0log = f"{D}/c0.log"
    start_c0 = os.path.getsize(c0log)
    clients[0].send_signal(signal.SIGSTOP)
    m = wait_log(log, r"event=session_expired client=c0 ", 10)
    check("the paused client's session expires", m is not None)
    start = os.path.getsize(log)
    clients[0].send_signal(signal.SIGCONT)
    m = wait_log(c0log, r"event=(session_lost|disconnected)[^\n]*", 10, start_c0)
    check("the client notices (session_lost or a new connection)", m is not None)
    print(f"     c0: {m.group(0)[:100] if m else None}")
    m = wait_log(log, r"event=client_joined client=c0 ", 10, start)
    check("it joins again", m is not None)
    m = wait_log(log, r"event=round_closed job=1 round=\d+ attempt=\d+ participants=3 ", 30,
                 start)
    check("and takes part in a round again", m is not None)
    for c in clients:
        stop(c)
    stop(p)


def case_file_limit():
    """A file-size limit: logged like a full disk, not a SIGXFSZ death; raised, the job ends."""
    os.makedirs(f"{D}/f")
    db = f"{D}/f/state.db"
    log = f"{D}/fsize.log"
    limit = 512 * 1024

    def small_fsize():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    p, port = start_server(db, log, preexec=small_fsize)
    if not check("server starts under a 512 KiB file-size limit", port is not None):
        return
    clients = start_clients(port)
    jid = submit(port, 100000)
    m = wait_log(log, r"level=(error|warn) [^\n]*file-size limit[^\n]*", 90)
    time.sleep(1)
    alive = p.poll() is None
    check("the limit is logged", m is not None,
          f"server exit {p.returncode}" + (" (SIGXFSZ)" if p.returncode == -signal.SIGXFSZ
                                           else ""))
    check("the server is still running", alive, f"exit {p.returncode}")
    if alive:
        resource.prlimit(p.pid, resource.RLIMIT_FSIZE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        start = os.path.getsize(log)
        n = int(re.findall(r"event=round_closed job=1 round=(\d+)", open(log).read())[-1])
        m = wait_log(log, rf"event=round_closed job=1 round=({n + 3}) ", 60, start)
        check("rounds close again once the limit is raised", m is not None)
        r = job(port, "cancel", jid)
        check("job cancelled", r.returncode == 0, r.stderr)
    for c in clients:
        stop(c)
    stop(p)


def main():
    try:
        run([FK, "certs", "init", "--dir", PKI])
        run([FK, "certs", "issue", "--dir", PKI, "--server", "server", "--ip", "127.0.0.1"])
        run([FK, "certs", "issue", "--dir", PKI, "--admin", "op"])
        random.seed(3)
        for c in range(3):
            run([FK, "certs", "issue", "--dir", PKI, "--client", f"c{c}"])
            with open(f"{D}/c{c}.csv", "w") as f:
                for i in range(80):
                    k = i % 2
                    f.write(f"{k},{random.gauss(3 * k, 1):.6f},{random.gauss(-2 * k, 1):.6f}\n")
        cases = sys.argv[4:] or ["presence", "removed", "replaced", "session", "file-limit"]
        for name in cases:
            try:
                {"presence": case_presence, "removed": case_removed, "replaced": case_replaced,
                 "session": case_session, "file-limit": case_file_limit}[name]()
            except Exception as e:  # one broken case must not hide the others
                check(f"{name}: ran without an exception", False, repr(e))
    finally:
        for p in procs:
            stop(p, signal.SIGKILL)
    if failures:
        print(f"{len(failures)} failed; logs in {D}")
        for name in sorted(os.listdir(D)):
            if name.endswith(".log") and name.startswith(("presence", "removed", "replaced", "session", "fsize", "c0")):
                print(f"== {name}\n" + open(f"{D}/{name}", errors="replace").read()[-1500:])
        return 1
    shutil.rmtree(D, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
