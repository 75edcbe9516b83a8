#!/usr/bin/env python3
"""The units' system-call filter fits the daemons: a FedGrEM job runs end to end on
127.0.0.1 (server + 3 clients on generated data) with the server and one client under
strace -f; every system call they make must be allowed by
  SystemCallFilter=@system-service  minus  ~@privileged @resources
(the sets expanded by 'systemd-analyze syscall-filter', as the shipped units say).
Also checks the address families used (RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX).
Prints a SKIP line (exit 77) if strace or systemd-analyze is missing or ptrace is not allowed.
usage: test_syscalls.py SRCDIR FEDKERN FEDKERN-SERVER FEDKERN-CLIENT"""
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import socket
import tempfile
import threading
import time

failures = []


def check(what, ok, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else ": " + str(detail)[:1500]))
    if not ok:
        failures.append(what)


def unit_filter(src, unit):
    """(allow groups, deny groups) from a shipped unit's SystemCallFilter= lines."""
    allow, deny = [], []
    for line in open(os.path.join(src, "deploy", "systemd", unit)):
        m = re.match(r"^SystemCallFilter=(~?)(.*)$", line.strip())
        if m:
            (deny if m.group(1) else allow).extend(m.group(2).split())
    return allow, deny


def syscall_groups():
    out = subprocess.run(["systemd-analyze", "syscall-filter"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=60).stdout
    groups, cur = {}, None
    for line in out.splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if line.startswith("@"):
            cur = groups.setdefault(s, set())
        elif cur is not None:
            cur.add(s)
    return groups


def expand(names, groups, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if n.startswith("@"):
            if n in seen:
                continue
            seen.add(n)
            out |= expand(groups.get(n, ()), groups, seen)
        else:
            out.add(n)
    return out


def traced(path):
    calls, families = set(), set()
    for line in open(path, errors="replace"):
        m = re.match(r"^\d+\s+([a-z_0-9]+)\(", line)
        if m:
            calls.add(m.group(1))
            f = re.match(r"^\d+\s+socket\((AF_[A-Z0-9]+)", line)
            if f:
                families.add(f.group(1))
    return calls, families


def signal_traced(p, sig):
    """Signal the program strace runs (strace does not forward signals), else p itself."""
    try:
        kids = open("/proc/%d/task/%d/children" % (p.pid, p.pid)).read().split()
    except OSError:
        kids = []
    for k in kids or [str(p.pid)]:
        try:
            os.kill(int(k), sig)
        except ProcessLookupError:
            pass


def wait_log(path, needle, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if os.path.exists(path) and needle in open(path).read():
            return True
        time.sleep(0.05)
    return False


def main():
    src, fedkern, server, client = sys.argv[1:5]
    for tool in ("strace", "systemd-analyze"):
        if not shutil.which(tool):
            print("SKIP: %s not installed (Debian packages strace, systemd)" % tool)
            return 77
    probe = subprocess.run(["strace", "-qq", "-o", "/dev/null", "true"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
    if probe.returncode != 0:
        print("SKIP: strace cannot trace here (%s)" % probe.stdout.strip()[:200])
        return 77
    groups = syscall_groups()
    allowed_by = {}
    for who, unit in (("fedkern-server", "fedkern-server.service.in"), ("fedkern-client", "fedkern-client@.service.in")):
        allow_g, deny_g = unit_filter(src, unit)
        allowed_by[who] = expand(allow_g, groups) - expand(deny_g, groups)
        check("%s filter expanded (%s minus %s: %d calls)" % (unit, " ".join(allow_g), " ".join(deny_g),
                                                              len(allowed_by[who])), len(allowed_by[who]) > 100)
    procs = []
    with tempfile.TemporaryDirectory(prefix="fk-syscalls-") as tmp:
        # a notify socket drained by a thread, so the sd_notify calls are traced too
        nsock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        nsock.bind(os.path.join(tmp, "notify"))
        notes = []

        def drain():
            while True:
                try:
                    notes.append(nsock.recv(4096))
                except OSError:
                    return
        threading.Thread(target=drain, daemon=True).start()
        env = dict(os.environ, NOTIFY_SOCKET=os.path.join(tmp, "notify"), WATCHDOG_USEC="1000000")
        # LeakSanitizer cannot run under ptrace; the other ops tests check leaks
        env["ASAN_OPTIONS"] = ":".join(filter(None, [os.environ.get("ASAN_OPTIONS", ""), "detect_leaks=0"]))
        tls = os.path.join(tmp, "tls")
        for args in (["init"], ["issue", "--server", "localhost", "--ip", "127.0.0.1"], ["issue", "--admin", "ops"],
                     ["issue", "--client", "a"], ["issue", "--client", "b"], ["issue", "--client", "c"], ["crl"]):
            subprocess.run([fedkern, "certs"] + args + ["--dir", tls], check=True, timeout=60, stdout=subprocess.DEVNULL)
        rng = random.Random(1)
        for c in "abc":  # two well separated 5-D clusters, label first
            with open(os.path.join(tmp, c + ".csv"), "w") as f:
                for _ in range(300):
                    k = rng.randint(0, 1)
                    mu = [3, 3, 0, 0, 1] if k else [-3, -3, 0, 0, -1]
                    f.write("%d,%s\n" % (k, ",".join("%.4f" % (m + rng.gauss(0, 1)) for m in mu)))
        slog, strace_s = os.path.join(tmp, "server.log"), os.path.join(tmp, "server.strace")
        procs.append(subprocess.Popen(["strace", "-f", "-qq", "-o", strace_s, server, "--listen", "127.0.0.1:0",
                                       "--metrics_listen", "127.0.0.1:0", "--tls_dir", tls, "--tls.crl", os.path.join(tls, "crl.pem"),
                                       "--state", os.path.join(tmp, "state.db")],
                                      stdout=open(slog, "w"), stderr=subprocess.STDOUT, env=env))
        try:
            if not wait_log(slog, "event=server_ready", 30):
                check("server starts under strace", False, open(slog).read()[-800:])
                return 1
            port = re.search(r"event=server_ready .*port=(\d+)", open(slog).read()).group(1)
            mport = re.search(r"event=metrics_listening .*port=(\d+)", open(slog).read())
            strace_c = os.path.join(tmp, "client.strace")
            for c in "abc":
                cmd = [client, "--server", "127.0.0.1:" + port, "--server_name", "localhost", "--tls_dir", tls,
                       "--name", c, "--data.mix", os.path.join(tmp, c + ".csv")]
                if c == "a":
                    cmd = ["strace", "-f", "-qq", "-o", strace_c] + cmd
                procs.append(subprocess.Popen(cmd, stdout=open(os.path.join(tmp, c + ".log"), "w"),
                                              stderr=subprocess.STDOUT, env=env))
            job = os.path.join(tmp, "job.conf")
            with open(job, "w") as f:
                f.write("method = fedgrem\ndataset = mix\nclients = a, b, c\nrounds = 4\nR = 2\n"
                        "deadline = 30\nquorum = 1.0\n")
            conn = ["--server", "127.0.0.1:" + port, "--server_name", "localhost", "--tls_dir", tls, "--name", "ops"]
            # the clients may still be joining: the job is submitted without the client check
            r = subprocess.run([fedkern, "job", "submit", job, "--skip_client_check"] + conn, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=60)
            check("job submitted", r.returncode == 0, r.stdout)
            r = subprocess.run([fedkern, "job", "result", "1", "--out", os.path.join(tmp, "m.bin"), "--wait", "90"]
                               + conn, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            check("the job completes with the daemons under strace", r.returncode == 0 and "done" in r.stdout,
                  r.stdout)
            if mport:  # exercise the metrics listener too
                subprocess.run(["curl", "-s", "-o", "/dev/null", "http://127.0.0.1:%s/metrics" % mport.group(1)],
                               timeout=30)
            signal_traced(procs[0], signal.SIGHUP)  # and a TLS reload
            check("SIGHUP reload under strace", wait_log(slog, "event=tls_reloaded", 10))
        finally:
            for p in reversed(procs):
                if p.poll() is None:
                    signal_traced(p, signal.SIGTERM)
            rcs = []
            for p in procs:
                try:
                    rcs.append(p.wait(timeout=30))
                except subprocess.TimeoutExpired:
                    p.kill()
                    rcs.append(p.wait())
            check("all daemons exit 0 at SIGTERM", rcs == [0] * len(procs), rcs)
        try:
            nsock.shutdown(socket.SHUT_RDWR)  # wakes the drain thread
        except OSError:
            pass
        nsock.close()
        check("sd_notify messages were sent (and traced)", any(b"WATCHDOG=1" in n for n in notes), len(notes))
        for who, path in (("fedkern-server", strace_s), ("fedkern-client", strace_c)):
            calls, families = traced(path)
            denied = sorted(calls - allowed_by[who])
            if os.geteuid() == 0 and "fchown" in denied:
                # SQLite fchowns a new WAL/journal only when euid is 0 (robustFchown); the
                # units run as the 'fedkern' user, so this call never happens there
                denied.remove("fchown")
                print("note %s: fchown seen because this test runs as root (SQLite, WAL file)" % who)
            check("%s: %d distinct system calls, all allowed by the unit's filter" % (who, len(calls)),
                  len(calls) > 20 and not denied, "denied: %s" % denied)
            bad = sorted(families - {"AF_INET", "AF_INET6", "AF_UNIX"})
            check("%s: socket families %s within RestrictAddressFamilies" % (who, sorted(families)), not bad, bad)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
