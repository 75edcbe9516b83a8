"""Baseline for `fedkern bench wire`: grpcio client -> grpcio server over loopback
mTLS, same cases as the C side, with the certificates the C side made.
usage: wire_grpcio.py --ca F --server-cert F --server-key F --client-cert F --client-key F
                      [--seconds S] [--latency_calls N] [--sizes MB,MB]
Prints JSON lines {"case":..., "metric":..., "value":...}."""
import argparse
import json
import sys
import threading
import time
from concurrent import futures

MB = 1 << 20


def emit(case, metric, value):
    print(json.dumps({"case": case, "metric": metric, "value": value}))
    sys.stdout.flush()


def run_grpcio(a, seconds, ncalls, sizes):
    import grpc
    big = (max(sizes) + 1) * MB
    opts = [("grpc.max_receive_message_length", big), ("grpc.max_send_message_length", big)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4), options=opts)
    handlers = {"Echo": grpc.unary_unary_rpc_method_handler(lambda r, c: r),
                "Sink": grpc.unary_unary_rpc_method_handler(lambda r, c: len(r).to_bytes(8, "little"))}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("fkbench.Wire", handlers),))
    rd = lambda n: open(n, "rb").read()  # noqa: E731
    creds = grpc.ssl_server_credentials([(rd(a.server_key), rd(a.server_cert))], root_certificates=rd(a.ca),
                                        require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    ccreds = grpc.ssl_channel_credentials(rd(a.ca), rd(a.client_key), rd(a.client_cert))
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
        reps = 3 if mb <= 16 else 1  # python copies dominate; fewer reps keep the run short
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
    for k in ("--ca", "--server-cert", "--server-key", "--client-cert", "--client-key"):
        ap.add_argument(k, required=True)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--latency_calls", type=int, default=1000)
    ap.add_argument("--sizes", default="16,128")
    a = ap.parse_args()
    run_grpcio(a, a.seconds, a.latency_calls, [int(s) for s in a.sizes.split(",")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
