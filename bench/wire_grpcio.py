"""Baseline for `fedkern bench wire`: grpcio client -> grpcio server over loopback
mTLS, same cases as the C side. Also writes the throwaway PKI both sides use.
usage: wire_grpcio.py --pki DIR [--seconds S] [--latency-calls N] [--sizes MB,MB] [--skip-grpcio]
Prints JSON lines {"case":..., "metric":..., "value":...}."""
import argparse
import json
import os
import shutil
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "interop"))
import fktest  # noqa: E402

MB = 1 << 20


def emit(case, metric, value):
    print(json.dumps({"case": case, "metric": metric, "value": value}))
    sys.stdout.flush()


def write_pki(d):
    pki = fktest.PKI()
    for src, dst in ((pki.ca.crt, "ca.crt"), (pki.server[0], "server.crt"), (pki.server[1], "server.key"),
                     (pki.client[0], "client.crt"), (pki.client[1], "client.key")):
        shutil.copy(src, os.path.join(d, dst))
    pki.close()


def run_grpcio(d, seconds, ncalls, sizes):
    import grpc
    big = (max(sizes) + 1) * MB
    opts = [("grpc.max_receive_message_length", big), ("grpc.max_send_message_length", big)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=opts)
    handlers = {"Echo": grpc.unary_unary_rpc_method_handler(lambda r, c: r),
                "Sink": grpc.unary_unary_rpc_method_handler(lambda r, c: len(r).to_bytes(8, "little"))}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fkbench.Wire", handlers),))
    rd = lambda n: open(os.path.join(d, n), "rb").read()  # noqa: E731
    creds = grpc.ssl_server_credentials([(rd("server.key"), rd("server.crt"))], root_certificates=rd("ca.crt"),
                                        require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    ccreds = grpc.ssl_channel_credentials(rd("ca.crt"), rd("client.key"), rd("client.crt"))
    ch = grpc.secure_channel("127.0.0.1:%d" % port, ccreds,
                             options=opts + [("grpc.ssl_target_name_override", "localhost")])
    echo = ch.unary_unary("/fkbench.Wire/Echo", request_serializer=None, response_deserializer=None)
    sink = ch.unary_unary("/fkbench.Wire/Sink", request_serializer=None, response_deserializer=None)
    msg = bytes(1024)
    for _ in range(50):
        echo(msg, timeout=10)
    lat = []
    for _ in range(ncalls):
        t0 = time.perf_counter()
        echo(msg, timeout=10)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    emit("grpcio 1KB unary", "p50_us", lat[len(lat) // 2] * 1e6)
    emit("grpcio 1KB unary", "p99_us", lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e6)
    # Call rate with 32 calls in flight.
    done = [0]
    lock = threading.Lock()
    stop = time.perf_counter() + seconds
    sem = threading.Semaphore(32)

    def finished(f):
        with lock:
            done[0] += 1
        sem.release()

    t0 = time.perf_counter()
    while time.perf_counter() < stop:
        sem.acquire()
        echo.future(msg, timeout=10).add_done_callback(finished)
    for _ in range(32):
        sem.acquire()
    emit("grpcio 1KB unary", "calls_per_s", done[0] / (time.perf_counter() - t0))
    for mb in sizes:
        payload = bytes(mb * MB)
        reps = 3 if mb <= 16 else 1
        sink(payload, timeout=120)
        t0 = time.perf_counter()
        c0 = time.process_time()
        for _ in range(reps):
            sink(payload, timeout=120)
        cpu = time.process_time() - c0
        # CPU of the whole process: grpcio client and server both live in it.
        emit("grpcio %dMB upload" % mb, "MB_per_cpu_s", reps * mb / cpu)
        emit("grpcio %dMB upload" % mb, "MB_per_s", reps * mb / (time.perf_counter() - t0))
    ch.close()
    server.stop(0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pki", required=True)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--latency-calls", type=int, default=1000)
    ap.add_argument("--sizes", default="16,128")
    ap.add_argument("--skip-grpcio", action="store_true")
    a = ap.parse_args()
    write_pki(a.pki)
    print(json.dumps({"pki": a.pki}))
    sys.stdout.flush()
    if not a.skip_grpcio:
        run_grpcio(a.pki, a.seconds, a.latency_calls, [int(s) for s in a.sizes.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
