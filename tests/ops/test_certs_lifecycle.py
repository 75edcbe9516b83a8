#!/usr/bin/env python3
"""Certificate lifecycle against a running fedkern-server on 127.0.0.1:
  revocation: 'fedkern certs revoke' + SIGHUP -> the revoked client's new handshakes
  are refused with a log line saying why, other clients still get in; a server started
  with that CRL refuses it from the start;
  rotation: 'fedkern certs renew --server' + SIGHUP -> new connections get the new
  server certificate while a connection opened before keeps working (HTTP/2 PING).
Every wait is bounded.   client side: a fedkern-client given tls.crl refuses a revoked server certificate.
usage: test_certs_lifecycle.py FEDKERN FEDKERN-SERVER FEDKERN-CLIENT"""
import os
import re
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import time

import opscheck

failures = []
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def check(what, ok, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else ": " + str(detail)[:800]))
    if not ok:
        failures.append(what)


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


def read_frames(s, want_type, deadline):
    """Read HTTP/2 frames until one of want_type arrives; returns its payload or None."""
    buf = b""
    s.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            d = s.recv(65536)
        except socket.timeout:
            continue
        if not d:
            return None
        buf += d
        while len(buf) >= 9:
            n = int.from_bytes(buf[0:3], "big")
            if len(buf) < 9 + n:
                break
            t, flags, payload = buf[3], buf[4], buf[9:9 + n]
            buf = buf[9 + n:]
            if t == want_type and (t != 6 or flags & 1):
                return payload
    return None


def connect(tls, client, port):
    """mTLS 1.3 connection with ALPN h2 as client NAME; returns (sock, server DER cert)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.load_verify_locations(os.path.join(tls, "ca.pem"))
    ctx.load_cert_chain(os.path.join(tls, "client-%s.pem" % client), os.path.join(tls, "client-%s.key" % client))
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="localhost")
    s.sendall(PREFACE + frame(4, 0, 0, b""))
    return s, s.getpeercert(binary_form=True)


def h2_alive(s, tag):
    """PING with an 8-byte tag; True when the server answers with the same tag."""
    try:
        s.sendall(frame(6, 0, 0, tag))
        return read_frames(s, 6, time.monotonic() + 10) == tag
    except (OSError, ssl.SSLError):
        return False


def try_client(tls, client, port):
    """'ok' if the server accepts NAME's certificate (answers a PING), else the error text."""
    try:
        s, _ = connect(tls, client, port)
    except (OSError, ssl.SSLError) as e:
        return str(e)
    try:
        return "ok" if h2_alive(s, b"probe123") else "no answer"
    except (OSError, ssl.SSLError) as e:
        return str(e)
    finally:
        s.close()


def der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


class Server:
    def __init__(self, binary, tls, tmp, tag):
        self.log = os.path.join(tmp, "server-%s.log" % tag)
        self.p = subprocess.Popen([binary, "--listen", "127.0.0.1:0", "--tls_dir", tls, "--metrics_listen", "off", "--tls.crl",
                                   os.path.join(tls, "crl.pem"), "--state", os.path.join(tmp, tag + ".db")],
                                  stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        self.port = None
        end = time.monotonic() + 15
        while time.monotonic() < end and self.p.poll() is None:
            m = re.search(r"event=server_ready .*port=(\d+)", self.text())
            if m:
                self.port = int(m.group(1))
                return
            time.sleep(0.05)

    def text(self):
        with open(self.log) as f:
            return f.read()

    def reload(self, event):
        n = self.text().count("event=" + event)
        self.p.send_signal(signal.SIGHUP)
        end = time.monotonic() + 10
        while time.monotonic() < end and self.text().count("event=" + event) == n:
            time.sleep(0.05)
        return self.text().count("event=" + event) > n

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def fk(fedkern, *args):
    return subprocess.run([fedkern, "certs"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=60)


def main():
    fedkern, server, client = sys.argv[1:4]
    with tempfile.TemporaryDirectory(prefix="fk-certs-") as tmp:
        tls = os.path.join(tmp, "tls")
        for args in (["init"], ["issue", "--server", "localhost", "--ip", "127.0.0.1"],
                     ["issue", "--client", "alice"], ["issue", "--client", "bob"], ["crl"]):
            r = fk(fedkern, *(args + ["--dir", tls]))
            assert r.returncode == 0, r.stdout
        for args, want, what in ((["revoke"], 2, "revoke without a name"),
                                 (["revoke", "carol"], 1, "revoke of an unknown name"),
                                 (["crl", "--client", "bob"], 2, "crl with a certificate"),
                                 (["renew", "--client", "carol"], 1, "renew of an unknown name")):
            r = fk(fedkern, *(args + ["--dir", tls]))
            lines = r.stdout.strip().splitlines()
            check("certs %s: exit %d, one 'fedkern certs:' line" % (what, want),
                  r.returncode == want and len(lines) == 1 and lines[0].startswith("fedkern certs: "), r.stdout)
        srv = Server(server, tls, tmp, "a")
        try:
            check("server starts with an empty CRL", srv.port is not None, srv.text()[-1000:])
            if srv.port is None:
                return 1
            check("alice connects before revocation", try_client(tls, "alice", srv.port) == "ok")
            old, old_cert = connect(tls, "bob", srv.port)
            check("bob's long-lived connection works", h2_alive(old, b"before00"))

            # --- revocation
            r = fk(fedkern, "revoke", "--dir", tls, "alice")
            check("certs revoke alice", r.returncode == 0 and "revoked client-alice" in r.stdout, r.stdout)
            r = fk(fedkern, "revoke", "--dir", tls, "--client", "alice", "--json")
            check("revoking again is a no-op", r.returncode == 0 and '"added":false' in r.stdout, r.stdout)
            out = subprocess.run(["openssl", "crl", "-in", os.path.join(tls, "crl.pem"), "-noout", "-text"],
                                 stdout=subprocess.PIPE, text=True, timeout=30).stdout
            check("the CRL lists one revoked certificate", out.count("Serial Number:") == 1, out)
            check("SIGHUP reloads the CRL", srv.reload("tls_reloaded"), srv.text()[-800:])
            res = try_client(tls, "alice", srv.port)
            check("revoked alice is refused after SIGHUP", res != "ok", res)
            time.sleep(0.3)
            log = srv.text()
            print("     " + next((l for l in log.splitlines() if "certificate revoked" in l), ""))
            check("the server log says the certificate is revoked",
                  re.search(r"level=\w+ event=\w+ .*certificate revoked", log) is not None, log[-1500:])
            check("bob (not revoked) still connects", try_client(tls, "bob", srv.port) == "ok")

            # --- rotation
            r = fk(fedkern, "renew", "--dir", tls, "--server", "localhost", "--ip", "127.0.0.1")
            check("certs renew --server", r.returncode == 0 and os.path.exists(
                os.path.join(tls, "server-localhost.pem.old")), r.stdout)
            new_der = der(os.path.join(tls, "server-localhost.pem"))
            check("the renewed certificate differs", new_der != old_cert)
            check("SIGHUP reloads the rotated certificate", srv.reload("tls_reloaded"), srv.text()[-800:])
            s2, cert2 = connect(tls, "bob", srv.port)
            check("a new connection gets the new server certificate", cert2 == new_der)
            check("the new connection works", h2_alive(s2, b"newconn1"))
            s2.close()
            check("the connection opened before rotation keeps working", h2_alive(old, b"afterrot"))
            check("... and still holds the old certificate", old.getpeercert(binary_form=True) == old_cert)
            old.close()

            # --- a broken file on reload keeps the old context
            with open(os.path.join(tls, "crl.pem"), "w") as f:
                f.write("not a CRL\n")
            check("a broken CRL on SIGHUP is refused and logged", srv.reload("tls_reload_failed"),
                  srv.text()[-800:])
            check("... and the server keeps serving", try_client(tls, "bob", srv.port) == "ok")
            r = fk(fedkern, "crl", "--dir", tls)
            check("a broken crl.pem is not overwritten by 'certs crl'", r.returncode != 0, r.stdout)
            os.unlink(os.path.join(tls, "crl.pem"))
            fk(fedkern, "revoke", "--dir", tls, "alice", "--crl_days", "1")
            check("a CRL due within 30 days is reported on reload", srv.reload("crl_expiring"),
                  srv.text()[-800:])
            check("SIGTERM: exit 0", srv.stop() == 0)
        finally:
            srv.stop()

        # --- at start: a server started with the CRL refuses alice from its first handshake
        srv = Server(server, tls, tmp, "b")
        try:
            check("restarted server is up", srv.port is not None, srv.text()[-800:])
            if srv.port:
                res = try_client(tls, "alice", srv.port)
                check("revoked alice is refused at start", res != "ok", res)
                check("bob connects to the restarted server", try_client(tls, "bob", srv.port) == "ok")
                # client side: revoke the server's certificate; a client with tls.crl refuses it
                r = fk(fedkern, "revoke", "--dir", tls, "--server", "localhost")
                check("certs revoke --server", r.returncode == 0, r.stdout)
                clog = os.path.join(tmp, "client.log")
                cp = subprocess.Popen([client, "--server", "127.0.0.1:%d" % srv.port, "--server_name", "localhost",
                                       "--tls_dir", tls, "--name", "bob", "--tls.crl", os.path.join(tls, "crl.pem")],
                                      stdout=open(clog, "w"), stderr=subprocess.STDOUT)
                end = time.monotonic() + 10
                while time.monotonic() < end and "certificate revoked" not in open(clog).read():
                    time.sleep(0.1)
                cp.send_signal(signal.SIGTERM)
                try:
                    cp.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    cp.kill()
                    cp.wait()
                text = open(clog).read()
                check("a client with tls.crl refuses the revoked server certificate",
                      "certificate revoked" in text and "event=joined" not in text, text[-800:])
        finally:
            srv.stop()
        for name, bad in opscheck.log_reports(tmp):  # the ASan+UBSan build reports into the daemons' logs
            check("no sanitizer report in " + name, not bad, bad)
        if failures:
            for tag in ("a", "b"):
                p = os.path.join(tmp, "server-%s.log" % tag)
                if os.path.exists(p):
                    print("---- server-%s.log" % tag)
                    print(open(p).read()[-3000:])
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
