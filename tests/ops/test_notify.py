#!/usr/bin/env python3
"""sd_notify protocol of fedkern-server and fedkern-client: each daemon runs with
NOTIFY_SOCKET on a test AF_UNIX datagram socket and WATCHDOG_USEC=300 ms; the test
checks READY=1, STATUS=, periodic WATCHDOG=1, that a stuck loop (the test-only
FEDKERN_TEST_STALL_MS + SIGUSR2 hook, common/sys/notify.h) stops the pings, that
they resume, and STOPPING=1 at SIGTERM. 127.0.0.1 only; every wait is bounded.
usage: test_notify.py FEDKERN FEDKERN-SERVER FEDKERN-CLIENT"""
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import opscheck

WATCHDOG_USEC = 300000
STALL_MS = 1500
failures = []


def check(what, ok, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else ": " + detail))
    if not ok:
        failures.append(what)


class Listener:
    """The test's notify socket, drained by a thread the whole time (like PID 1 does: an
    unread AF_UNIX datagram queue holds only net.unix.max_dgram_qlen messages, after
    which the daemon's sd_notify blocks); messages kept with their arrival time."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.05)
        self.msgs = []
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self._drain, daemon=True)
        self.thread.start()

    def _drain(self):
        while not self.done:
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.msgs.append((time.monotonic(), data.decode(errors="replace")))

    def close(self):
        self.done = True
        self.thread.join(timeout=5)
        self.sock.close()

    def pump(self, seconds):
        time.sleep(seconds)

    def wait_for(self, needle, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if any(needle in m for _, m in self.msgs):
                return True
            self.pump(0.1)
        return any(needle in m for _, m in self.msgs)

    def times(self, needle, since=0.0):
        return [t for t, m in self.msgs if needle in m and t >= since]


def start(cmd, sockpath, log):
    env = dict(os.environ, NOTIFY_SOCKET=sockpath, WATCHDOG_USEC=str(WATCHDOG_USEC),
               FEDKERN_TEST_STALL_MS=str(STALL_MS))
    env.pop("WATCHDOG_PID", None)
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)


def exercise(who, proc, lis):
    check(who + ": READY=1", lis.wait_for("READY=1", 15), str(lis.msgs[:5]))
    ready = [m for _, m in lis.msgs if "READY=1" in m]
    check(who + ": STATUS= with READY", bool(ready) and "STATUS=" in ready[0], str(ready[:1]))
    lis.pump(1.5)
    t0 = time.monotonic() - 1.5
    pings = lis.times("WATCHDOG=1", since=t0)
    # half of 300 ms: about 10 pings in 1.5 s; at least 5 even on a loaded machine
    check(who + ": WATCHDOG=1 every ~150 ms", len(pings) >= 5, "%d pings in 1.5 s" % len(pings))
    proc.send_signal(signal.SIGUSR2)
    ts = time.monotonic()
    lis.pump(STALL_MS / 1000.0 + 1.5)
    # the loop is blocked for STALL_MS: no ping in [ts + 0.3, ts + STALL_MS - 0.1]
    gap = [t for t in lis.times("WATCHDOG=1", since=ts + 0.3) if t < ts + STALL_MS / 1000.0 - 0.1]
    check(who + ": stuck loop stops WATCHDOG=1", not gap, "%d pings while stalled" % len(gap))
    around = lis.times("WATCHDOG=1", since=ts - 1.0)
    longest = max((b - a for a, b in zip(around, around[1:])), default=0.0)
    check(who + ": longest ping gap covers the stall", longest >= STALL_MS / 1000.0 * 0.8,
          "longest gap %.2f s" % longest)
    after = lis.times("WATCHDOG=1", since=ts + STALL_MS / 1000.0)
    check(who + ": pings resume after the stall", len(after) >= 3, "%d pings" % len(after))
    check(who + ": still running after the stall", proc.poll() is None)
    proc.send_signal(signal.SIGTERM)
    check(who + ": STOPPING=1 at SIGTERM", lis.wait_for("STOPPING=1", 10), str(lis.msgs[-3:]))
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = proc.wait()
    check(who + ": exit 0 after SIGTERM", rc == 0, "rc=%s" % rc)


def main():
    fedkern, server, client = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="fk-notify-") as tmp:
        tls = os.path.join(tmp, "tls")
        for args in (["init"], ["issue", "--server", "localhost", "--ip", "127.0.0.1"],
                     ["issue", "--client", "alice"], ["issue", "--admin", "ops"]):
            subprocess.run([fedkern, "certs"] + args + ["--dir", tls], check=True, timeout=60,
                           stdout=subprocess.DEVNULL)
        slog = open(os.path.join(tmp, "server.log"), "w+")
        s_sock = os.path.join(tmp, "server.notify")
        lis = Listener(s_sock)
        srv = start([server, "--listen", "127.0.0.1:0", "--metrics_listen", "off", "--tls_dir", tls,
                     "--state", os.path.join(tmp, "state.db")], s_sock, slog)
        try:
            lis.wait_for("READY=1", 15)
            slog.flush()
            m = re.search(r"event=server_ready .*port=(\d+)", open(slog.name).read())
            port = m.group(1) if m else "0"
            # the client first, while the server runs, so it joins for real
            c_sock = os.path.join(tmp, "client.notify")
            clis = Listener(c_sock)
            clog = open(os.path.join(tmp, "client.log"), "w+")
            cl = start([client, "--server", "127.0.0.1:" + port, "--server_name", "localhost",
                        "--tls_dir", tls, "--name", "alice"], c_sock, clog)
            job = os.path.join(tmp, "job.conf")
            with open(job, "w") as f:
                f.write("method = fedgrem\ndataset = nowhere\nclients = alice\nrounds = 3\n"
                        "deadline = 600\nquorum = 1.0\n")
            # alice holds no data set (and may not have joined yet): submitted unchecked
            r = subprocess.run([fedkern, "job", "submit", job, "--skip_client_check", "--server", "127.0.0.1:" + port,
                                "--server_name", "localhost", "--tls_dir", tls, "--name", "ops"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
            check("job submitted (for the server's STATUS line)", r.returncode == 0, r.stdout)
            try:
                exercise("fedkern-client", cl, clis)
                check("fedkern-client: STATUS= reports the join",
                      any("STATUS=joins: 1" in msg for _, msg in clis.msgs),
                      str([msg for _, msg in clis.msgs if "STATUS" in msg][:4]))
            finally:
                if cl.poll() is None:
                    cl.kill()
                    cl.wait()
            exercise("fedkern-server", srv, lis)
            check("fedkern-server: STATUS= names jobs and rounds",
                  any("STATUS=jobs running: 0, rounds closed: 0" in msg for _, msg in lis.msgs),
                  str(lis.msgs[:2]))
            status = [msg for _, msg in lis.msgs if "STATUS=job 1 (fedgrem) round 1/3 phase" in msg]
            check("fedkern-server: STATUS= follows the running job's round", bool(status),
                  str([msg for _, msg in lis.msgs if "STATUS" in msg][:6]))
            if status:
                print("     " + status[0].replace("\n", " | "))
        finally:
            if srv.poll() is None:
                srv.kill()
                srv.wait()
        # without NOTIFY_SOCKET nothing is sent and nothing fails (a plain run)
        env = {k: v for k, v in os.environ.items() if k != "NOTIFY_SOCKET"}
        p = subprocess.Popen([server, "--listen", "127.0.0.1:0", "--metrics_listen", "off", "--tls_dir", tls, "--state",
                              os.path.join(tmp, "state2.db")], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        time.sleep(1.0)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        check("no NOTIFY_SOCKET: server runs and exits 0", p.returncode == 0 and "server_ready" in out,
              out[-500:])
        # a socket nobody listens on: one warning, then the daemon runs as usual
        env = dict(os.environ, NOTIFY_SOCKET=os.path.join(tmp, "nobody.sock"), WATCHDOG_USEC="100000")
        p = subprocess.Popen([server, "--listen", "127.0.0.1:0", "--metrics_listen", "off", "--tls_dir", tls,
                              "--state", os.path.join(tmp, "state3.db")], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
        time.sleep(1.5)
        p.send_signal(signal.SIGTERM)
        out, _ = p.communicate(timeout=20)
        check("unreachable NOTIFY_SOCKET: one notify_failed line, exit 0",
              p.returncode == 0 and out.count("event=notify_failed") == 1, out[-800:])
        for name, bad in opscheck.log_reports(tmp):  # the ASan+UBSan build reports into the daemons' logs
            check("no sanitizer report in " + name, not bad, bad)
        if failures:
            for name in ("server.log", "client.log"):
                print("---- " + name)
                print(open(os.path.join(tmp, name)).read()[-3000:])
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
