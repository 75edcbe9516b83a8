#!/usr/bin/env python3
"""The shipped example configs and man pages match the programs:
  - every option in 'fedkern-server --help' / 'fedkern-client --help' is a key of the
    example config (set or commented out) and is described in fedkern.conf(5) and the
    daemon's man page;
  - fedkern-server starts from deploy/config/server.conf and fedkern-client from
    client.conf (only addresses/paths overridden by flags, so every key in the files
    is parsed and accepted);
  - both example job files are accepted by the running server ('fedkern job submit').
127.0.0.1 only; bounded. usage: test_configs.py SRCDIR FEDKERN FEDKERN-SERVER FEDKERN-CLIENT"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import opscheck

failures = []


def check(what, ok, detail=""):
    print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else ": " + str(detail)[:1500]))
    if not ok:
        failures.append(what)


def help_keys(binary):
    out = subprocess.run([binary, "--help"], stdout=subprocess.PIPE, text=True, timeout=30).stdout
    keys = re.findall(r"^  --(data\.DATASET|local\.KEY|[a-z][a-z0-9_.\-]*)", out, re.M)
    return [k for k in keys if k not in ("help", "version", "config")]


def conf_keys(path):
    """Keys set or commented out ('# key = ...') in an INI file, with [section] prefixes."""
    keys, section = set(), ""
    for line in open(path):
        m = re.match(r"^\s*\[(\w+)\]", line)
        if m:
            section = m.group(1) + "."
            continue
        m = re.match(r"^\s*#?\s*([A-Za-z][A-Za-z0-9_.\-]*)\s*=", line)
        if m:
            keys.add(section + m.group(1))
    return keys


def man_text(path):
    return subprocess.run(["man", "-l", path], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                          env=dict(os.environ, MANWIDTH="200"), timeout=30).stdout.replace("\u2010", "-")


def wait_log(path, needle, seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if needle in open(path).read():
            return True
        time.sleep(0.05)
    return False


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            return p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    return p.returncode


def main():
    src, fedkern, server, client = sys.argv[1:5]
    cfg = os.path.join(src, "deploy", "config")
    man = os.path.join(src, "docs", "man")
    have_man = subprocess.run(["sh", "-c", "command -v man"], stdout=subprocess.DEVNULL).returncode == 0
    conf5 = man_text(os.path.join(man, "fedkern.conf.5")) if have_man else open(os.path.join(man, "fedkern.conf.5")).read()
    for binary, example, page in ((server, "server.conf", "fedkern-server.8"), (client, "client.conf", "fedkern-client.8")):
        keys = help_keys(binary)
        have = conf_keys(os.path.join(cfg, example))
        page_text = man_text(os.path.join(man, page)) if have_man else open(os.path.join(man, page)).read()
        # data.DATASET and local.KEY name sections: the example must show the section
        missing = [k for k in keys if k not in ("data.DATASET", "local.KEY") and k not in have]
        check("%s documents every option of %s --help (%d)" % (example, os.path.basename(binary), len(keys)),
              not missing, missing)
        if example == "client.conf":
            check("client.conf has a [data] example", any(k.startswith("data.") for k in have))
            check("client.conf has a [local] example", any(k.startswith("local.") for k in have))
        nomatch = [k for k in keys if k not in ("data.DATASET", "local.KEY") and k.split(".")[-1] not in conf5]
        check("fedkern.conf(5) describes every %s key" % os.path.basename(binary), not nomatch, nomatch)
        nomatch = [k for k in keys if not k.startswith("net.") and k != "data.DATASET"
                   and "--" + k.replace("KEY", "") not in page_text]
        check("%s lists every option" % page, not nomatch, nomatch)

    with tempfile.TemporaryDirectory(prefix="fk-configs-") as tmp:
        tls = os.path.join(tmp, "tls")
        for args in (["init"], ["issue", "--server", "localhost", "--ip", "127.0.0.1"],
                     ["issue", "--client", "hospital-a"], ["issue", "--client", "hospital-b"],
                     ["issue", "--client", "hospital-c"], ["issue", "--admin", "ops"], ["crl"]):
            subprocess.run([fedkern, "certs"] + args + ["--dir", tls], check=True, timeout=60, stdout=subprocess.DEVNULL)
        slog = os.path.join(tmp, "server.log")
        srv = subprocess.Popen([server, "--config", os.path.join(cfg, "server.conf"), "--listen", "127.0.0.1:0",
                                "--tls_dir", tls, "--tls.server_name", "localhost", "--tls.crl",
                                os.path.join(tls, "crl.pem"), "--state", os.path.join(tmp, "state.db"),
                                "--metrics_listen", "127.0.0.1:0"],
                               stdout=open(slog, "w"), stderr=subprocess.STDOUT)
        try:
            up = wait_log(slog, "event=server_ready", 15)
            check("fedkern-server starts from the example server.conf", up, open(slog).read()[-800:])
            if not up:
                return 1
            port = re.search(r"event=server_ready .*port=(\d+)", open(slog).read()).group(1)
            clog = os.path.join(tmp, "client.log")
            # the client loads its data sets at start: the example's sources live on a real
            # site, so the test's own small files take their place (same keys, by flag)
            data = os.path.join(tmp, "part.csv")
            with open(data, "w") as f:
                f.write("1,0.5,2\n2,1.5,4\n1,0.25,3\n")
            cl = subprocess.Popen([client, "--config", os.path.join(cfg, "client.conf"), "--server",
                                   "127.0.0.1:" + port, "--server_name", "localhost", "--tls_dir", tls,
                                   "--name", "hospital-a", "--tls.crl", os.path.join(tls, "crl.pem"),
                                   "--data.office-surf", data, "--data.fashion-mnist", data],
                                  stdout=open(clog, "w"), stderr=subprocess.STDOUT)
            check("fedkern-client starts from the example client.conf and joins",
                  wait_log(clog, "event=joined", 15), open(clog).read()[-800:])
            check("fedkern-client exits 0 at SIGTERM", stop(cl) == 0, open(clog).read()[-800:])
            for job in ("job-fedrf-tca.conf", "job-fedgrem.conf"):
                conn = ["--server", "127.0.0.1:" + port, "--server_name", "localhost", "--tls_dir", tls,
                        "--name", "ops"]
                # only hospital-a ever joined: the others are named, and the job refused
                r = subprocess.run([fedkern, "job", "submit", os.path.join(cfg, job)] + conn,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
                check("the server refuses %s while hospital-b/c never joined" % job,
                      r.returncode != 0 and "clients hospital-b, hospital-c have never joined" in r.stdout,
                      r.stdout)
                r = subprocess.run([fedkern, "job", "submit", os.path.join(cfg, job), "--skip_client_check"] + conn,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
                check("the server accepts the example %s" % job, r.returncode == 0, r.stdout)
        finally:
            rc = stop(srv)
        check("fedkern-server exits 0 at SIGTERM", rc == 0, open(slog).read()[-800:])
        for name, bad in opscheck.log_reports(tmp, ("server.log", "client.log")):
            check("no sanitizer report in " + name, not bad, bad)
    print("%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
