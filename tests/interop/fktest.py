"""Shared helpers of the wire interop/security suites: a throwaway PKI made with
the openssl command-line tool, child processes bounded in time, grpcio peers
speaking raw bytes (generic handlers, no generated stubs needed)."""
import os
import re
import subprocess
import sys
import tempfile
import time

OPENSSL = "openssl"
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")
sanitizer_reports = []


def note_sanitizer(text, who):
    """Remember sanitizer reports found in a child's output; Checks.finish fails on them."""
    for m in SANITIZER_MARKS:
        if m in text:
            sanitizer_reports.append("%s: %s" % (who, text[text.index(m):][:3000]))
            return
CA_CNF = """[ca]
default_ca = d
[d]
database = {dir}/db/index.txt
serial = {dir}/db/serial
new_certs_dir = {dir}/db
default_md = sha256
policy = p
unique_subject = no
copy_extensions = none
[p]
commonName = supplied
[leaf]
basicConstraints = CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth,clientAuth
subjectAltName = {san}
"""


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60, **kw)


class CA:
    """One certificate authority in its own directory."""

    def __init__(self, top, name):
        self.dir = os.path.join(top, name)
        os.makedirs(os.path.join(self.dir, "db"))
        open(os.path.join(self.dir, "db", "index.txt"), "w").close()
        with open(os.path.join(self.dir, "db", "serial"), "w") as f:
            f.write("1000\n")
        self.key = os.path.join(self.dir, "ca.key")
        self.crt = os.path.join(self.dir, "ca.crt")
        run([OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", self.key, "-out", self.crt, "-subj", "/CN=" + name, "-days", "3",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"])

    def issue(self, name, san, start=None, end=None):
        """Key + certificate for CN=name with subjectAltName san; start/end as YYYYMMDDHHMMSSZ."""
        key = os.path.join(self.dir, name + ".key")
        csr = os.path.join(self.dir, name + ".csr")
        crt = os.path.join(self.dir, name + ".crt")
        cnf = os.path.join(self.dir, name + ".cnf")
        with open(cnf, "w") as f:
            f.write(CA_CNF.format(dir=self.dir, san=san))
        run([OPENSSL, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", key, "-out", csr, "-subj", "/CN=" + name])
        dates = ["-startdate", start or time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() - 3600)),
                 "-enddate", end or time.strftime("%Y%m%d%H%M%SZ", time.gmtime(time.time() + 2 * 86400))]
        run([OPENSSL, "ca", "-batch", "-notext", "-config", cnf, "-extensions", "leaf", "-cert", self.crt,
             "-keyfile", self.key, "-in", csr, "-out", crt] + dates)
        return crt, key


    def revoke_and_crl(self, crt):
        """Revoke crt and write a CRL of this CA; returns the CRL path."""
        cnf = os.path.join(self.dir, "crl.cnf")
        with open(cnf, "w") as f:
            f.write(CA_CNF.format(dir=self.dir, san="DNS:unused"))
        run([OPENSSL, "ca", "-config", cnf, "-cert", self.crt, "-keyfile", self.key, "-revoke", crt])
        crl = os.path.join(self.dir, "crl.pem")
        run([OPENSSL, "ca", "-config", cnf, "-cert", self.crt, "-keyfile", self.key, "-gencrl", "-crldays", "2",
             "-out", crl])
        return crl


class PKI:
    """The fixtures every suite uses: CA, server and client certificates, plus bad ones."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory(prefix="fkwire-")
        top = self.tmp.name
        self.ca = CA(top, "test-ca")
        self.server = self.ca.issue("server", "DNS:localhost,IP:127.0.0.1")
        self.client = self.ca.issue("client1", "DNS:client1")

    def bad(self):
        top = self.tmp.name
        self.other_ca = CA(top, "other-ca")
        self.foreign = self.other_ca.issue("intruder", "DNS:intruder")
        self.expired = self.ca.issue("expired", "DNS:expired", "20200101000000Z", "20210101000000Z")
        self.future = self.ca.issue("future", "DNS:future", "20990101000000Z", "20991231000000Z")

    def tls_dir(self):
        """A --tls_dir layout for fedkern-server: ca.crt, server.crt, server.key."""
        d = os.path.join(self.tmp.name, "tlsdir")
        if not os.path.isdir(d):
            os.makedirs(d)
            for src, dst in ((self.ca.crt, "ca.crt"), (self.server[0], "server.crt"), (self.server[1], "server.key")):
                with open(src, "rb") as a, open(os.path.join(d, dst), "wb") as b:
                    b.write(a.read())
        return d

    def close(self):
        self.tmp.cleanup()


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


class Proc:
    """A child process whose stderr goes to a file (for log assertions); always killed at exit."""

    def __init__(self, cmd, tmpdir, name):
        self.log = os.path.join(tmpdir, name + ".log")
        self.errf = open(self.log, "wb")
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.errf)
        self.port = None

    def wait_port(self, timeout=20):
        deadline = time.time() + timeout
        while time.time() < deadline:
            line = self.p.stdout.readline().decode()
            if not line:
                break
            m = re.match(r"PORT (\d+)", line)
            if m:
                self.port = int(m.group(1))
                return self.port
        raise RuntimeError("peer did not report its port; log:\n" + self.stderr())

    def stderr(self):
        self.errf.flush()
        with open(self.log, "rb") as f:
            return f.read().decode(errors="replace")

    def wait_log(self, pattern, timeout=10):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if re.search(pattern, self.stderr()):
                return True
            time.sleep(0.05)
        return False

    def stop(self, sig=15, timeout=20):
        if self.p.poll() is None:
            self.p.send_signal(sig)
        try:
            rc = self.p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.p.kill()
            rc = self.p.wait()
            rc = ("killed", rc)
        self.errf.flush()
        note_sanitizer(self.stderr(), self.log)
        return rc


def grpc_channel(port, pki, cert=None, target="localhost", options=()):
    import grpc
    cert = cert or pki.client
    creds = grpc.ssl_channel_credentials(root_certificates=read_file(pki.ca.crt),
                                         private_key=read_file(cert[1]), certificate_chain=read_file(cert[0]))
    opts = [("grpc.ssl_target_name_override", target), ("grpc.max_send_message_length", 1 << 30),
            ("grpc.max_receive_message_length", 1 << 30)] + list(options)
    return grpc.secure_channel("127.0.0.1:%d" % port, creds, options=opts)


def raw_unary(channel, path):
    return channel.unary_unary(path, request_serializer=None, response_deserializer=None)


class Checks:
    """Counts named checks; prints one line each and a summary; exit status for meson."""

    def __init__(self):
        self.failed = 0
        self.passed = 0

    def check(self, name, cond, detail=""):
        if cond:
            self.passed += 1
            print("ok   %s" % name)
        else:
            self.failed += 1
            print("FAIL %s %s" % (name, detail))
        sys.stdout.flush()

    def finish(self):
        self.check("no sanitizer reports from our processes", not sanitizer_reports, "\n".join(sanitizer_reports))
        print("%d passed, %d failed" % (self.passed, self.failed))
        return 1 if self.failed else 0
