"""Interop: grpcio (Debian python3-grpcio, a gRPC stack nobody here wrote) against
fedkern's wire layer, both directions, over mutual TLS 1.3 on 127.0.0.1.
usage: test_interop.py NET_PEER [FEDKERN_SERVER]"""
import os
import struct
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

import fktest

MB = 1 << 20


def pattern(n):
    return bytes((i * 131 + 7) & 0xFF for i in range(256)) * (n // 256) + bytes((i * 131 + 7) & 0xFF for i in range(n % 256))


def grpcio_client_to_our_server(t, peer, pki):
    srv = fktest.Proc([peer, "serve", "--listen", "127.0.0.1:0", "--ca", pki.ca.crt, "--cert", pki.server[0],
                       "--key", pki.server[1], "--net.max_message", str(48 * MB)], pki.tmp.name, "peer-serve")
    srv.wait_port()
    try:
        ch = fktest.grpc_channel(srv.port, pki)
        echo = fktest.raw_unary(ch, "/fktest.Echo/Echo")
        small = pattern(1024)
        t.check("grpcio->ours echo 1 KB", echo(small, timeout=10) == small)
        t.check("grpcio->ours echo empty", echo(b"", timeout=10) == b"")
        big = pattern(40 * MB)
        t0 = time.time()
        got = echo(big, timeout=60)
        t.check("grpcio->ours echo 40 MB", got == big, "len %d" % len(got))
        print("     40 MB echo in %.2f s" % (time.time() - t0))
        size = fktest.raw_unary(ch, "/fktest.Echo/Size")(pattern(5 * MB + 3), timeout=30)
        t.check("grpcio->ours 5 MB request seen whole", struct.unpack("<Q", size)[0] == 5 * MB + 3)
        t.check("server saw the client identity", srv.wait_log(r"event=test_size cn=client1 "))
        sleep = fktest.raw_unary(ch, "/fktest.Echo/Sleep")
        t0 = time.time()
        try:
            sleep(struct.pack("<I", 5000), timeout=0.3)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        t.check("grpcio deadline against ours -> DEADLINE_EXCEEDED", code == grpc.StatusCode.DEADLINE_EXCEEDED,
                str(code))
        t.check("deadline came in time", time.time() - t0 < 2.0)
        t.check("our server cancelled the handler at the deadline", srv.wait_log(r"event=test_cancelled"))
        t.check("sleep shorter than the deadline answers", sleep(struct.pack("<I", 50), timeout=5) == b"late")
        try:
            fktest.raw_unary(ch, "/fktest.Echo/Nope")(b"x", timeout=5)
            code = grpc.StatusCode.OK
        except grpc.RpcError as e:
            code = e.code()
        t.check("unknown method -> UNIMPLEMENTED", code == grpc.StatusCode.UNIMPLEMENTED, str(code))
        # Many calls in flight on one connection.
        fs = [echo.future(pattern(1000 + i), timeout=20) for i in range(64)]
        t.check("64 concurrent calls", all(f.result() == pattern(1000 + i) for i, f in enumerate(fs)))
        ch.close()
    finally:
        rc = srv.stop()
        t.check("net_peer server exits 0 on SIGTERM", rc == 0, "rc=%s log:\n%s" % (rc, srv.stderr()[-2000:]))


class Handlers:
    def __init__(self):
        self.cancelled = threading.Event()
        self.peer_cn = None

    def echo(self, req, ctx):
        self.peer_cn = ctx.auth_context().get("x509_common_name")
        return req

    def sleep(self, req, ctx):
        ms = struct.unpack("<I", req[:4])[0]
        end = time.time() + ms / 1000.0
        while time.time() < end:
            if not ctx.is_active():
                self.cancelled.set()
                return b""
            time.sleep(0.01)
        return b"late"


def grpcio_server(pki, h, max_msg):
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", max_msg),
                                  ("grpc.max_send_message_length", max_msg)])
    handlers = {
        "Echo": grpc.unary_unary_rpc_method_handler(h.echo),
        "Sleep": grpc.unary_unary_rpc_method_handler(h.sleep),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fktest.Echo", handlers),))
    creds = grpc.ssl_server_credentials([(fktest.read_file(pki.server[1]), fktest.read_file(pki.server[0]))],
                                        root_certificates=fktest.read_file(pki.ca.crt), require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    return server, port


def our_call(peer, pki, port, *args, timeout=60):
    cmd = [peer, "call", "--port", str(port), "--server_name", "localhost", "--ca", pki.ca.crt,
           "--cert", pki.client[0], "--key", pki.client[1]] + list(args)
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    out = r.stdout.decode() + r.stderr.decode()
    fktest.note_sanitizer(out, " ".join(cmd[:2]))
    return out


def our_client_to_grpcio_server(t, peer, pki):
    h = Handlers()
    server, port = grpcio_server(pki, h, 64 * MB)
    try:
        out = our_call(peer, pki, port, "--method", "/fktest.Echo/Echo", "--size", "1024")
        t.check("ours->grpcio echo 1 KB", "status=OK len=1024 ok=1" in out, out)
        t.check("grpcio saw our client certificate", h.peer_cn == [b"client1"], str(h.peer_cn))
        out = our_call(peer, pki, port, "--method", "/fktest.Echo/Echo", "--size", str(40 * MB),
                       "--net.max_message", str(48 * MB))
        t.check("ours->grpcio echo 40 MB", "status=OK len=%d ok=1" % (40 * MB) in out, out[-500:])
        t0 = time.time()
        out = our_call(peer, pki, port, "--method", "/fktest.Echo/Sleep", "--sleep_ms", "5000", "--timeout_ms", "300")
        t.check("our deadline against grpcio -> DEADLINE_EXCEEDED", "status=DEADLINE_EXCEEDED" in out, out)
        t.check("our deadline came in time", time.time() - t0 < 3.0)
        t.check("grpcio saw the call end at our deadline", h.cancelled.wait(5))
        out = our_call(peer, pki, port, "--method", "/fktest.Echo/Nope", "--size", "4")
        t.check("grpcio unknown method -> UNIMPLEMENTED at our client", "status=UNIMPLEMENTED" in out, out)
        out = our_call(peer, pki, port, "--method", "/fktest.Echo/Echo", "--size", str(70 * MB),
                       "--net.max_message", str(100 * MB))
        t.check("grpcio's size limit reaches our client as RESOURCE_EXHAUSTED",
                "status=RESOURCE_EXHAUSTED" in out, out[-500:])
    finally:
        server.stop(0)


def main():
    peer = sys.argv[1]
    t = fktest.Checks()
    pki = fktest.PKI()
    try:
        grpcio_client_to_our_server(t, peer, pki)
        our_client_to_grpcio_server(t, peer, pki)
    finally:
        pki.close()
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
