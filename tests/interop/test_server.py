"""fedkern-server against grpcio: PKI from `fedkern certs`, stubs generated at test
time with protoc from proto/, Health/Check, Join, Heartbeat, unimplemented RPCs,
graceful SIGTERM. usage: test_server.py FEDKERN FEDKERN_SERVER PROTO_DIR"""
import os
import subprocess
import sys
import tempfile

import grpc

import fktest


def main():
    fedkern, server, proto = sys.argv[1:4]
    t = fktest.Checks()
    tmp = tempfile.TemporaryDirectory(prefix="fkserver-")
    d = os.path.join(tmp.name, "pki")
    for args in (["init"], ["issue", "--server", "srv1", "--dns", "localhost", "--ip", "127.0.0.1"],
                 ["issue", "--client", "alice"], ["issue", "--client", "bob"],
                 ["issue", "--admin", "op"]):
        fktest.run([fedkern, "certs"] + args[:1] + ["--dir", d] + args[1:])
    gen = os.path.join(tmp.name, "gen")
    os.makedirs(gen)
    fktest.run(["protoc", "-I", proto, "--python_out", gen, os.path.join(proto, "fedkern.proto")])
    hdir = os.path.join(proto, "grpc", "health", "v1")
    fktest.run(["protoc", "-I", hdir, "--python_out", gen, os.path.join(hdir, "health.proto")])
    sys.path.insert(0, gen)
    import fedkern_pb2 as pb
    import health_pb2 as hpb

    srv = fktest.Proc([server, "--listen", "127.0.0.1:0", "--tls_dir", d, "--heartbeat_ms", "2500",
                       "--state", os.path.join(tmp.name, "state.db"), "--partial_client_mb", "1",
                       "--partial_total_mb", "1"], tmp.name, "server")
    ok = srv.wait_log(r"event=server_ready .* port=(\d+)", 20)
    t.check("fedkern-server starts", ok, srv.stderr())
    if not ok:
        srv.stop()
        return t.finish()
    import re
    port = int(re.search(r"event=server_ready .* port=(\d+)", srv.stderr()).group(1))

    def channel(who):
        creds = grpc.ssl_channel_credentials(fktest.read_file(os.path.join(d, "ca.pem")),
                                             fktest.read_file(os.path.join(d, who + ".key")),
                                             fktest.read_file(os.path.join(d, who + ".pem")))
        return grpc.secure_channel("127.0.0.1:%d" % port, creds, options=[("grpc.ssl_target_name_override", "localhost")])

    def call(ch, path, req, resp_cls, timeout=5):
        fn = ch.unary_unary(path, request_serializer=lambda m: m.SerializeToString(),
                            response_deserializer=resp_cls.FromString)
        return fn(req, timeout=timeout)

    def code_of(fn):
        try:
            fn()
            return grpc.StatusCode.OK
        except grpc.RpcError as e:
            return e.code()

    try:
        ch = channel("client-alice")
        h = call(ch, "/grpc.health.v1.Health/Check", hpb.HealthCheckRequest(), hpb.HealthCheckResponse)
        t.check("Health/Check = SERVING", h.status == hpb.HealthCheckResponse.SERVING, str(h))
        h = call(ch, "/grpc.health.v1.Health/Check", hpb.HealthCheckRequest(service="fedkern.v1.Federation"),
                 hpb.HealthCheckResponse)
        t.check("Health/Check(fedkern.v1.Federation) = SERVING", h.status == hpb.HealthCheckResponse.SERVING)
        c = code_of(lambda: call(ch, "/grpc.health.v1.Health/Check", hpb.HealthCheckRequest(service="nope"),
                                 hpb.HealthCheckResponse))
        t.check("Health/Check(unknown) = NOT_FOUND", c == grpc.StatusCode.NOT_FOUND, str(c))
        j = call(ch, "/fedkern.v1.Federation/Join",
                 pb.JoinRequest(name="alice", protocol_version=1, software="grpcio-test", methods=["fedavg"], n_samples=10),
                 pb.JoinResponse)
        t.check("Join answers with a session", len(j.session_id) == 32 and j.client_id == "alice", str(j))
        t.check("Join tells the heartbeat interval and limits",
                j.heartbeat_interval_ms == 2500 and j.max_message_size == 32 << 20 and j.protocol_version == 1, str(j))
        hb = call(ch, "/fedkern.v1.Federation/Heartbeat", pb.HeartbeatRequest(session_id=j.session_id),
                  pb.HeartbeatResponse)
        t.check("Heartbeat answers", hb.heartbeat_interval_ms == 2500 and not hb.cancel_task, str(hb))
        # docs/protocol.md section 8 gives the default the server announces (issue 33 row 11)
        doc = open(os.path.join(proto, "..", "docs", "protocol.md")).read()
        m = re.search(r"\| maximum message size \| (\d+) MiB", doc)
        t.check("docs/protocol.md states the default maximum message size the server uses",
                m is not None and int(m.group(1)) << 20 == j.max_message_size,
                (m.group(0) if m else "no row") + " vs %d" % j.max_message_size)
        # session ids are checked on every call (issue 33 row 10; docs/protocol.md section 2)
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/Heartbeat", pb.HeartbeatRequest(session_id="x" * 32),
                                 pb.HeartbeatResponse))
        t.check("Heartbeat with an unknown session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/PullTask", pb.PullTaskRequest(session_id="x" * 32),
                                 pb.PullTaskResponse, timeout=2))
        t.check("PullTask with an unknown session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/PullTask", pb.PullTaskRequest(),
                                 pb.PullTaskResponse, timeout=2))
        t.check("PullTask without a session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        chb = channel("client-bob")
        jb = call(chb, "/fedkern.v1.Federation/Join", pb.JoinRequest(protocol_version=1), pb.JoinResponse)
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/PullTask", pb.PullTaskRequest(session_id=jb.session_id),
                                 pb.PullTaskResponse, timeout=2))
        t.check("PullTask with another client's session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/Heartbeat", pb.HeartbeatRequest(session_id=jb.session_id),
                                 pb.HeartbeatResponse))
        t.check("Heartbeat with another client's session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        push = pb.PushUpdateRequest(session_id="x" * 32, job_id="1.0", update_id="u" * 32, round=1,
                                    bundle=pb.Bundle())
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/PushUpdate", push, pb.PushUpdateResponse))
        t.check("PushUpdate with an unknown session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        push.session_id = jb.session_id
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/PushUpdate", push, pb.PushUpdateResponse))
        t.check("PushUpdate with another client's session = FAILED_PRECONDITION",
                c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        # chunk reassembly (issue 33 row 7): only for the task a client owes in an open phase,
        # within the per-client and global caps (--partial_client_mb 1 --partial_total_mb 1)
        adm = channel("admin-op")
        sub = call(adm, "/fedkern.v1.Federation/SubmitJob",
                   pb.SubmitJobRequest(config="method = fedgrem\ndataset = gmm\nclients = alice, bob\n"
                                       "rounds = 2\ndeadline = 60\n", skip_client_check=True),
                   pb.SubmitJobResponse)
        t.check("SubmitJob answers job 1", sub.job_id == "1", str(sub))
        ta = call(ch, "/fedkern.v1.Federation/PullTask", pb.PullTaskRequest(session_id=j.session_id),
                  pb.PullTaskResponse, timeout=5)
        tb = call(chb, "/fedkern.v1.Federation/PullTask", pb.PullTaskRequest(session_id=jb.session_id),
                  pb.PullTaskResponse, timeout=5)
        t.check("both clients get their task of job 1", ta.kind == pb.TASK_RUN and tb.kind == pb.TASK_RUN
                and ta.job_id == "1.0", "%s / %s" % (ta.kind, tb.kind))

        def chunk_push(sess, job_id, uid, task, index, total, size, total_size):
            return pb.PushUpdateRequest(
                session_id=sess, job_id=job_id, update_id=uid, round=task.round, phase=task.phase,
                chunk=pb.Chunk(index=index, total=total, chunk_size=size, total_size=total_size,
                               sha256=b"\x01" * 32,
                               data=b"x" * (size if index + 1 < total else total_size - size * (total - 1))))

        def push_result(req):
            try:
                r = call(ch if req.session_id == j.session_id else chb, "/fedkern.v1.Federation/PushUpdate",
                         req, pb.PushUpdateResponse)
                return grpc.StatusCode.OK, r.state, r.message
            except grpc.RpcError as e:
                return e.code(), None, e.details()

        # a last chunk announcing 1023 MiB for a job that does not exist: nothing held
        c, st, msg = push_result(chunk_push(j.session_id, "999.0", "a" * 32, ta, 1022, 1023, 1 << 20,
                                            1023 << 20))
        t.check("chunk for a job that does not wait for the client = UPDATE_STALE",
                c == grpc.StatusCode.OK and st == pb.UPDATE_STALE, "%s %s %s" % (c, st, msg))
        c, st, msg = push_result(chunk_push(j.session_id, "1.0", "b" * 32, ta, 1, 2, 1 << 20, 2 << 20))
        t.check("chunk of an update over the client cap = RESOURCE_EXHAUSTED",
                c == grpc.StatusCode.RESOURCE_EXHAUSTED, "%s %s %s" % (c, st, msg))
        c, st, msg = push_result(chunk_push(j.session_id, "1.0", "c" * 32, ta, 0, 3, 300 << 10, 900 << 10))
        c2, st2, _ = push_result(chunk_push(j.session_id, "1.0", "c" * 32, ta, 1, 3, 300 << 10, 900 << 10))
        t.check("600 KiB of a 900 KiB update held (UPDATE_PARTIAL)",
                st == pb.UPDATE_PARTIAL and st2 == pb.UPDATE_PARTIAL, "%s %s %s" % (c, st, msg))
        c, st, msg = push_result(chunk_push(jb.session_id, "1.0", "d" * 32, tb, 0, 3, 300 << 10, 900 << 10))
        c2, st2, msg2 = push_result(chunk_push(jb.session_id, "1.0", "d" * 32, tb, 1, 3, 300 << 10, 900 << 10))
        t.check("the other client's chunk past the global cap = RESOURCE_EXHAUSTED",
                st == pb.UPDATE_PARTIAL and c2 == grpc.StatusCode.RESOURCE_EXHAUSTED and "in all" in msg2,
                "%s %s / %s %s" % (c, st, c2, msg2))
        call(adm, "/fedkern.v1.Federation/CancelJob", pb.CancelJobRequest(job_id="1"),
             pb.CancelJobResponse)
        adm.close()
        chb.close()
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/Join", pb.JoinRequest(name="mallory", protocol_version=1),
                                 pb.JoinResponse))
        t.check("Join under another name = PERMISSION_DENIED", c == grpc.StatusCode.PERMISSION_DENIED, str(c))
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/Join", pb.JoinRequest(protocol_version=2), pb.JoinResponse))
        t.check("Join with protocol 2 = FAILED_PRECONDITION", c == grpc.StatusCode.FAILED_PRECONDITION, str(c))
        raw = ch.unary_unary("/fedkern.v1.Federation/Join", request_serializer=None, response_deserializer=None)
        c = code_of(lambda: raw(b"\x0a\xff\xff\xff\xff\x0f", timeout=5))
        t.check("undecodable Join = INVALID_ARGUMENT", c == grpc.StatusCode.INVALID_ARGUMENT, str(c))
        p = call(ch, "/fedkern.v1.Federation/PullTask", pb.PullTaskRequest(session_id=j.session_id),
                 pb.PullTaskResponse, timeout=2)
        t.check("PullTask without a job: long poll answers TASK_NONE before the deadline",
                p.kind == pb.TASK_NONE, str(p))
        ch.close()
        # SIGHUP rebuilds the TLS context (certificate/CRL reload); a broken reload keeps the old one.
        srv.p.send_signal(1)
        t.check("SIGHUP reloads TLS", srv.wait_log(r"event=tls_reloaded"))
        ca_pem = os.path.join(d, "ca.pem")
        os.rename(ca_pem, ca_pem + ".away")
        srv.p.send_signal(1)
        t.check("SIGHUP with a missing CA keeps the old certificates", srv.wait_log(r"event=tls_reload_failed .*ca.pem"))
        os.rename(ca_pem + ".away", ca_pem)
        ch2 = channel("client-alice")
        h = call(ch2, "/grpc.health.v1.Health/Check", hpb.HealthCheckRequest(), hpb.HealthCheckResponse)
        t.check("still serving new connections after the reloads", h.status == hpb.HealthCheckResponse.SERVING)
        ch2.close()
        ch = channel("admin-op")
        c = code_of(lambda: call(ch, "/fedkern.v1.Federation/Join", pb.JoinRequest(protocol_version=1), pb.JoinResponse))
        t.check("Join with an admin certificate = PERMISSION_DENIED", c == grpc.StatusCode.PERMISSION_DENIED, str(c))
        st = call(ch, "/fedkern.v1.Federation/JobStatus", pb.JobStatusRequest(job_id="1"), pb.JobStatusResponse)
        t.check("JobStatus of job 1", st.job_id == "1", str(st))
        for bad in ("1.0", "1.5", "1x", "+1", " 1", "0", "-1"):
            try:
                call(ch, "/fedkern.v1.Federation/JobStatus", pb.JobStatusRequest(job_id=bad), pb.JobStatusResponse)
                c, det = grpc.StatusCode.OK, ""
            except grpc.RpcError as e:
                c, det = e.code(), e.details()
            t.check("JobStatus of job id '%s' = INVALID_ARGUMENT naming it" % bad,
                    c == grpc.StatusCode.INVALID_ARGUMENT and ("'%s'" % bad) in det, "%s %s" % (c, det))
        # Keep a connection open across SIGTERM: the server must GOAWAY it and still exit 0.
        h = call(ch, "/grpc.health.v1.Health/Check", hpb.HealthCheckRequest(), hpb.HealthCheckResponse)
        rc = srv.stop()
        t.check("SIGTERM: exit 0 with a client connected", rc == 0, str(rc))
        t.check("SIGTERM: logged the drain", "event=server_stopping" in srv.stderr() and "event=server_stopped" in srv.stderr())
        ch.close()
        bad = subprocess.run([server, "--listen", "127.0.0.1:0", "--tls_dir", d, "--no-such-key", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        t.check("unknown option refused with exit 2", bad.returncode == 2 and b"no-such-key" in bad.stderr, str(bad))
        bad = subprocess.run([server, "--listen", "127.0.0.1:0", "--tls_dir", os.path.join(tmp.name, "none")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
        t.check("missing tls dir: one clear error", bad.returncode == 1 and bad.stderr.count(b"\n") == 1, str(bad))
        cfg = os.path.join(tmp.name, "server.conf")
        with open(cfg, "w") as f:
            f.write("listen = 127.0.0.1:0\ntls-dir = %s\nstate = %s\n[net]\nmax_message = 1000\n"
                    % (d, os.path.join(tmp.name, "state2.db")))
        srv = fktest.Proc([server, "--config", cfg], tmp.name, "server2")
        ok = srv.wait_log(r"event=server_ready .* port=(\d+)", 20)
        port = int(re.search(r"event=server_ready .* port=(\d+)", srv.stderr()).group(1)) if ok else 0
        ch = channel("client-alice")
        j = call(ch, "/fedkern.v1.Federation/Join", pb.JoinRequest(protocol_version=1), pb.JoinResponse) if ok else None
        t.check("config file read ([net] max_message)", j is not None and j.max_message_size == 1000, str(j))
        ch.close()
        t.check("second server exits 0", srv.stop() == 0)
    finally:
        srv.stop()
        if t.failed:
            print(srv.stderr()[-3000:])
        tmp.cleanup()
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
