"""Security: every bad peer is refused by fedkern's wire layer with a log line
saying why; oversized messages get RESOURCE_EXHAUSTED without being allocated.
usage: test_security.py NET_PEER"""
import socket
import ssl
import sys

import grpc

import fktest

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def raw_tls(port, pki, cert=None, maxver=ssl.TLSVersion.TLSv1_3):
    """Handshake with Python's ssl module and try one read; returns what happened."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(pki.ca.crt)
    ctx.set_alpn_protocols(["h2"])
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.maximum_version = maxver
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                data = s.recv(100)
                return "open" if data else "closed"
    except (ssl.SSLError, ConnectionError, OSError) as e:
        return "refused: %s" % e


def grpc_code(fn):
    try:
        fn()
        return grpc.StatusCode.OK
    except grpc.RpcError as e:
        return e.code()


def main():
    peer = sys.argv[1]
    t = fktest.Checks()
    pki = fktest.PKI()
    pki.bad()
    srv = fktest.Proc([peer, "serve", "--listen", "127.0.0.1:0", "--ca", pki.ca.crt, "--cert", pki.server[0],
                       "--key", pki.server[1], "--net.max_message", str(1 << 20),
                       "--net.handshake_timeout_ms", "1500"], pki.tmp.name, "serve")
    port = srv.wait_port()
    try:
        # Plaintext HTTP/2 client.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(PREFACE)
            try:
                got = s.recv(100)
            except OSError:
                got = b""
        t.check("plaintext client gets no HTTP/2", not got.startswith(b"\x00"), repr(got))
        t.check("plaintext refused with a reason", srv.wait_log(r'conn_refused .*reason="TLS handshake failed: .*(wrong version|http request|record)'))
        ch = grpc.insecure_channel("127.0.0.1:%d" % port)
        t.check("grpcio plaintext channel fails", grpc_code(lambda: fktest.raw_unary(ch, "/fktest.Echo/Echo")(b"x", timeout=3)) == grpc.StatusCode.UNAVAILABLE)
        ch.close()

        # TLS client without a certificate.
        r = raw_tls(port, pki)
        t.check("TLS without client certificate refused", r != "open", r)
        t.check("log says no certificate", srv.wait_log(r'conn_refused .*did not return a certificate'))

        # Certificate from another CA, expired, not yet valid.
        for label, cert, why in (("foreign CA", pki.foreign, "unable to get local issuer|unknown ca"),
                                 ("expired", pki.expired, "certificate has expired"),
                                 ("not yet valid", pki.future, "certificate is not yet valid")):
            ch = fktest.grpc_channel(port, pki, cert=cert)
            code = grpc_code(lambda: fktest.raw_unary(ch, "/fktest.Echo/Echo")(b"x", timeout=5))
            ch.close()
            t.check("%s client certificate refused" % label, code == grpc.StatusCode.UNAVAILABLE, str(code))
            t.check("log says %s" % label, srv.wait_log(r"conn_refused .*(%s)" % why))

        # TLS 1.2 only.
        r = raw_tls(port, pki, cert=pki.client, maxver=ssl.TLSVersion.TLSv1_2)
        t.check("TLS 1.2 refused", r.startswith("refused"), r)
        t.check("log says unsupported protocol", srv.wait_log(r"conn_refused .*unsupported protocol"))

        # A TCP client that never finishes the handshake.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            t.check("silent client dropped at the handshake timeout", srv.wait_log(r"conn_refused .*not finished within 1500 ms", 6))

        # Dead peers: a TLS client that never answers PINGs is dropped by our server.
        srv2 = fktest.Proc([peer, "serve", "--listen", "127.0.0.1:0", "--ca", pki.ca.crt, "--cert", pki.server[0],
                            "--key", pki.server[1], "--net.keepalive_ms", "200", "--net.keepalive_timeout_ms", "300"],
                           pki.tmp.name, "serve-ka")
        port2 = srv2.wait_port()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_verify_locations(pki.ca.crt)
        ctx.set_alpn_protocols(["h2"])
        ctx.load_cert_chain(pki.client[0], pki.client[1])
        with socket.create_connection(("127.0.0.1", port2), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")
                t.check("server drops a peer that ignores PINGs",
                        srv2.wait_log(r'event=conn_keepalive .*PING not answered in 300 ms', 8))
        t.check("keepalive server exits 0", srv2.stop() == 0)

        # ... and our client drops a server that never answers (TLS up, HTTP/2 silent).
        sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        sctx.load_cert_chain(pki.server[0], pki.server[1])
        sctx.load_verify_locations(pki.ca.crt)
        sctx.verify_mode = ssl.CERT_REQUIRED
        sctx.set_alpn_protocols(["h2"])
        ls = socket.socket()
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        held = []

        def silent():
            c, _ = ls.accept()
            try:
                held.append(sctx.wrap_socket(c, server_side=True))
            except (ssl.SSLError, OSError):
                pass

        import threading
        th = threading.Thread(target=silent)
        th.start()
        out = subprocess_call(peer, pki, ls.getsockname()[1], "--server_name", "localhost", "--timeout_ms", "20000",
                              "--net.keepalive_ms", "200", "--net.keepalive_timeout_ms", "300")
        th.join(5)
        for h in held:
            h.close()
        ls.close()
        t.check("our client gives up on a silent server via keepalive",
                "status=UNAVAILABLE" in out and "keepalive PING not answered" in out, out)

        # Our client checks the server name.
        out = subprocess_call(peer, pki, port, "--server_name", "wrong.example")
        t.check("our client refuses a wrong server name", "status=UNAVAILABLE" in out and "ok=0" in out, out)
        t.check("client log says hostname mismatch", "hostname mismatch" in out, out)
        out = subprocess_call(peer, pki, port, "--server_name", "127.0.0.2")
        t.check("our client refuses a wrong server IP", "status=UNAVAILABLE" in out and "IP address mismatch" in out, out)
        out = subprocess_call(peer, pki, port, "--server_name", "127.0.0.1")
        t.check("our client accepts the right server IP", "status=OK" in out and "ok=1" in out, out)

        # Oversized message: RESOURCE_EXHAUSTED, never allocated.
        ch = fktest.grpc_channel(port, pki)
        echo = fktest.raw_unary(ch, "/fktest.Echo/Echo")
        code = grpc_code(lambda: echo(b"z" * ((1 << 20) + 1), timeout=10))
        t.check("oversized request -> RESOURCE_EXHAUSTED", code == grpc.StatusCode.RESOURCE_EXHAUSTED, str(code))
        t.check("log says why, nothing allocated",
                srv.wait_log(r'grpc_refused .*exceeds the limit of 1048576 bytes" allocated=0'))
        code = grpc_code(lambda: echo(b"z" * (48 << 20), timeout=20))
        t.check("48 MB request -> RESOURCE_EXHAUSTED", code == grpc.StatusCode.RESOURCE_EXHAUSTED, str(code))
        ch.close()
        out = subprocess_call(peer, pki, port, "--server_name", "localhost", "--size", str(20 << 20),
                              "--net.max_message", str(64 << 20))
        t.check("our client sending 20 MB to a 1 MB server gets the server's RESOURCE_EXHAUSTED",
                "status=RESOURCE_EXHAUSTED" in out and "exceeds the limit of 1048576" in out, out)
        t.check("connection that sent 49 MB held no message buffer",
                srv.wait_log(r"conn_closed .*cn=client1 peak_mem=0 "))
        ch = fktest.grpc_channel(port, pki)
        t.check("a good client still works after all that", fktest.raw_unary(ch, "/fktest.Echo/Echo")(b"hi", timeout=5) == b"hi")
        ch.close()
        rc = srv.stop()
        t.check("server exits 0 on SIGTERM", rc == 0, str(rc))

        # Revocation: a CRL naming a client certificate shuts that client out.
        revoked = pki.ca.issue("revoked", "DNS:revoked")
        crl = pki.ca.revoke_and_crl(revoked[0])
        srv = fktest.Proc([peer, "serve", "--listen", "127.0.0.1:0", "--ca", pki.ca.crt, "--cert", pki.server[0],
                           "--key", pki.server[1], "--crl", crl], pki.tmp.name, "serve-crl")
        port = srv.wait_port()
        ch = fktest.grpc_channel(port, pki, cert=revoked)
        code = grpc_code(lambda: fktest.raw_unary(ch, "/fktest.Echo/Echo")(b"x", timeout=5))
        ch.close()
        t.check("revoked client certificate refused", code == grpc.StatusCode.UNAVAILABLE, str(code))
        t.check("log says revoked", srv.wait_log(r"conn_refused .*certificate revoked"))
        ch = fktest.grpc_channel(port, pki)
        t.check("unrevoked client still served with the CRL on",
                fktest.raw_unary(ch, "/fktest.Echo/Echo")(b"ok", timeout=5) == b"ok")
        ch.close()
    finally:
        rc = srv.stop()
        t.check("server exits 0 on SIGTERM", rc == 0, str(rc))
        if t.failed:
            print(srv.stderr()[-4000:])
        pki.close()
    return t.finish()


def subprocess_call(peer, pki, port, *args):
    import subprocess
    cmd = [peer, "call", "--port", str(port), "--ca", pki.ca.crt, "--cert", pki.client[0], "--key", pki.client[1],
           "--size", "16"] + list(args)
    if "--timeout_ms" not in args:
        cmd += ["--timeout_ms", "5000"]
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    out = r.stdout.decode() + r.stderr.decode()
    fktest.note_sanitizer(out, " ".join(cmd[:2]))
    return out


if __name__ == "__main__":
    sys.exit(main())
