#!/usr/bin/env python3
"""Unit tests of fedkern-faultproxy with plain TCP echo peers on 127.0.0.1.
Each fault is checked to do what it says within a time bound.
Usage: test_faultproxy.py PATH/TO/fedkern-faultproxy"""
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

PROXY = sys.argv[1]
failures = []


def echo_server():
    """Echo every byte back; one thread per connection."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(256)

    def serve(c):
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass
        finally:
            c.close()

    def loop():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(c,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return ls, ls.getsockname()[1]


class Proxy:
    def __init__(self, target, *args):
        self.log = tempfile.NamedTemporaryFile(mode="w+", suffix=".log", delete=False)
        self.p = subprocess.Popen([PROXY, "--target", f"127.0.0.1:{target}", "--listen",
                                   "127.0.0.1:0", "--max-seconds", "60", *args],
                                  stderr=self.log, stdout=subprocess.DEVNULL)
        deadline = time.time() + 10
        self.port = None
        while time.time() < deadline and self.port is None:
            m = re.search(r"event=proxy_ready listen=\S+ port=(\d+)", open(self.log.name).read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.02)
        if self.port is None:
            raise RuntimeError("proxy did not start: " + open(self.log.name).read())

    def text(self):
        return open(self.log.name).read()

    def close(self):
        """SIGTERM: the proxy must stop cleanly (exit 0, no sanitizer report)."""
        self.p.terminate()
        try:
            rc = self.p.wait(10)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
        text = self.text()
        if rc != 0 or "Sanitizer" in text or "runtime error" in text:
            check("proxy exits cleanly on SIGTERM", False, f"exit {rc}: {text[-1500:]}")
        os.unlink(self.log.name)


def connect(port, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_n(s, n):
    """Read up to n bytes; returns (data, how) with how in ok/eof/reset/timeout."""
    got = bytearray()
    try:
        while len(got) < n:
            d = s.recv(n - len(got))
            if not d:
                return bytes(got), "eof"
            got += d
    except ConnectionResetError:
        return bytes(got), "reset"
    except socket.timeout:
        return bytes(got), "timeout"
    return bytes(got), "ok"


def send_quietly(s, data):
    try:
        s.sendall(data)
    except OSError:
        pass  # the fault under test closed the connection


def echo_round(port, payload, timeout=5.0):
    s = connect(port, timeout)
    try:
        t0 = time.time()
        threading.Thread(target=send_quietly, args=(s, payload), daemon=True).start()
        data, how = recv_n(s, len(payload))
        return data, how, time.time() - t0
    finally:
        s.close()


def check(name, cond, detail=""):
    print(("ok   " if cond else "FAIL ") + name + (": " + detail if detail else ""))
    if not cond:
        failures.append(name)


def payload(n, seed=1):
    return bytes((i * 131 + seed * 7 + (i >> 8)) & 0xFF for i in range(n))


def test_passthrough(tport):
    p = Proxy(tport)
    try:
        data = payload(300000)
        got, how, dt = echo_round(p.port, data)
        check("passthrough 300 kB echoed intact", got == data and how == "ok", f"{how} {dt:.2f}s")
    finally:
        p.close()


def try_conn(port):
    """1 if an echo round trip works, 0 if the connection was dropped."""
    try:
        got, how, _ = echo_round(port, b"ping", timeout=3)
        return 1 if got == b"ping" else 0
    except OSError:
        return 0


def test_drop(tport):
    fates = []
    for _ in range(2):
        p = Proxy(tport, "--drop", "0.3", "--seed", "5")
        try:
            fates.append([try_conn(p.port) for _ in range(60)])
        finally:
            p.close()
    lost = fates[0].count(0)
    check("drop 0.3 loses 10..50 % of 60 connections", 6 <= lost <= 30, f"{lost}/60")
    check("drop is reproducible from the seed", fates[0] == fates[1])
    p = Proxy(tport, "--drop", "0.3", "--seed", "6")
    try:
        other = [try_conn(p.port) for _ in range(60)]
    finally:
        p.close()
    check("another seed drops other connections", other != fates[0])


def test_latency(tport):
    p = Proxy(tport, "--latency-ms", "300", "--jitter-ms", "100")
    try:
        got, how, dt = echo_round(p.port, b"x" * 10)
        check("latency 300+0..100 ms each way: round trip 0.6..1.5 s",
              got == b"x" * 10 and 0.6 <= dt <= 1.5, f"{dt:.3f}s")
        # order is kept under jitter: many small writes come back in order
        s = connect(p.port)
        try:
            msg = b"".join(b"%05d" % i for i in range(200))
            for i in range(200):
                s.sendall(b"%05d" % i)
            got, how = recv_n(s, len(msg))
            check("jitter keeps byte order", got == msg, how)
        finally:
            s.close()
    finally:
        p.close()


def test_rate(tport):
    p = Proxy(tport, "--rate", "40000")
    try:
        data = payload(40000)
        got, how, dt = echo_round(p.port, data, timeout=10)
        check("rate 40 kB/s: 40 kB echoed in 0.9..4 s", got == data and 0.9 <= dt <= 4,
              f"{how} {dt:.2f}s")
    finally:
        p.close()


def test_cut(tport):
    p = Proxy(tport, "--cut-after", "1000")
    try:
        t0 = time.time()
        got, how, dt = echo_round(p.port, payload(5000))
        check("cut-after 1000: at most 1000 bytes, then reset within 2 s",
              len(got) <= 1000 and how in ("reset", "eof") and dt < 2, f"{len(got)} {how} {dt:.2f}s")
        check("cut-after is a reset (RST), not a clean close", how == "reset", how)
        check("proxy logs the cut", "fate=cut_after" in p.text())
        del t0
    finally:
        p.close()


def test_blackhole(tport):
    p = Proxy(tport, "--blackhole-after", "1000")
    try:
        s = connect(p.port, timeout=2.0)
        try:
            s.sendall(payload(5000))
            got, how = recv_n(s, 5000)
            check("blackhole-after 1000: at most 1000 bytes back, then silence (no FIN, no RST)",
                  len(got) <= 1000 and how == "timeout", f"{len(got)} {how}")
            s.sendall(b"more")  # the socket is still open: writes succeed
            got2, how2 = recv_n(s, 1)
            check("blackhole stays silent", got2 == b"" and how2 == "timeout", how2)
        finally:
            s.close()
    finally:
        p.close()


def test_corrupt(tport):
    p = Proxy(tport, "--corrupt", "0.001", "--seed", "3")
    try:
        data = payload(100000)
        got, how, _ = echo_round(p.port, data)
        diff = sum(1 for a, b in zip(got, data) if a != b)
        # each byte crosses the proxy twice: expect about 200 flipped bytes
        check("corrupt 0.001: same length, 50..500 bytes differ", len(got) == len(data)
              and 50 <= diff <= 500, f"{diff}")
    finally:
        p.close()


def test_periodic_cut(tport):
    p = Proxy(tport, "--cut-every-ms", "500")
    try:
        s = connect(p.port, timeout=3.0)
        try:
            t0 = time.time()
            s.sendall(b"a")
            got, how = recv_n(s, 1)
            how2 = "open"
            try:
                while time.time() - t0 < 3:
                    if not s.recv(1):
                        how2 = "eof"
                        break
            except ConnectionResetError:
                how2 = "reset"
            except socket.timeout:
                how2 = "timeout"
            dt = time.time() - t0
            check("cut-every-ms 500: an idle connection is reset within 1 s",
                  got == b"a" and how2 == "reset" and dt < 1.0, f"{how2} {dt:.2f}s")
        finally:
            s.close()
        check("new connections still work after a periodic cut", try_conn(p.port) == 1)
    finally:
        p.close()


def test_script(tport):
    with tempfile.NamedTemporaryFile("w", suffix=".rules", delete=False) as f:
        f.write("# conn 0 dropped, conn 1 clean, conn 2 cut after 10 bytes\n"
                "drop=1\n\nlatency-ms=0\ncut-after=10\n")
        path = f.name
    try:
        p = Proxy(tport, "--script", path)
        try:
            r = [try_conn(p.port), try_conn(p.port)]
            got, how, _ = echo_round(p.port, payload(100))
            check("script: line i applies to connection i", r == [0, 1] and len(got) <= 10,
                  f"{r} {len(got)} {how}")
        finally:
            p.close()
        with open(path, "w") as f:
            f.write("latency=5\n")
        r = subprocess.run([PROXY, "--target", "127.0.0.1:1", "--script", path],
                           capture_output=True, text=True, timeout=10)
        check("script with an unknown key: exit 2 and one line naming it",
              r.returncode == 2 and "unknown key 'latency'" in r.stderr
              and r.stderr.count("\n") == 1, r.stderr.strip())
    finally:
        os.unlink(path)


def test_usage():
    r = subprocess.run([PROXY, "--target", "127.0.0.1:1", "--drop", "2"],
                       capture_output=True, text=True, timeout=10)
    check("--drop 2 refused with exit 2", r.returncode == 2 and "drop" in r.stderr, r.stderr.strip())
    r = subprocess.run([PROXY], capture_output=True, text=True, timeout=10)
    check("missing --target: exit 2", r.returncode == 2 and "--target" in r.stderr)
    r = subprocess.run([PROXY, "--help"], capture_output=True, text=True, timeout=10)
    check("--help documents every fault", r.returncode == 0 and all(
        k in r.stdout for k in ("--drop", "--latency-ms", "--jitter-ms", "--rate", "--cut-after",
                                "--blackhole-after", "--corrupt", "--cut-every-ms", "--script")))
    r = subprocess.run([PROXY, "--target", "127.0.0.1:1", "--max-seconds", "0.5"],
                       capture_output=True, text=True, timeout=10)
    check("--max-seconds: exits by itself", r.returncode == 0 and "max_seconds" in r.stderr)


def test_unreachable():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    dead = s.getsockname()[1]
    s.close()
    p = Proxy(dead)
    try:
        check("unreachable target: the client connection is closed", try_conn(p.port) == 0)
        check("unreachable target is logged", "target_unreachable" in p.text())
    finally:
        p.close()


def main():
    t0 = time.time()
    ls, tport = echo_server()
    for t in (test_passthrough, test_drop, test_latency, test_rate, test_cut, test_blackhole,
              test_corrupt, test_periodic_cut, test_script):
        t(tport)
    test_usage()
    test_unreachable()
    ls.close()
    print(f"{len(failures)} failed in {time.time() - t0:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
