#!/usr/bin/env python3
"""Run the `sh run` blocks of docs/tutorial.md and compare each one's output with the
`text` block right under it.

usage: tutorial_run.py [--update] TUTORIAL.md FEDKERN FEDKERN-SERVER FEDKERN-CLIENT

The blocks run in order in one bash process (so `cd`, variables and background daemons carry
over), in a fresh temporary directory, with the three programs first on PATH and the
tutorial's port 7443 replaced by a free one. Each block's stdout and stderr together are its
output; a block must end with status 0. Before comparing, both sides are normalised: the
port and the directory, timings (`*_seconds` values), UTC times and session ids; numbers then compare
with a relative tolerance of 1e-6 (BLAS builds differ in the last digits). A `...` line in a
`text` block matches any number of lines. A `sh run` block without a `text` block under it
must print nothing. A picture `![...](tutorial-X.svg)` on the page must be an SVG the blocks
wrote as X.svg.

--update rewrites TUTORIAL.md with the real outputs (adding `text` blocks where missing) and
exits 0 if every block succeeded; review the diff.

Bounded: the whole run has 120 s; every process the blocks start is in one process group,
which is killed at the end whatever happened.
"""
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

PORT = "7443"
RUN_FENCE = re.compile(r"^```sh run\s*$")
TEXT_FENCE = re.compile(r"^```text\s*$")
TIME_LIMIT = 120


def parse(lines):
    """[(start, end, code, out_start, out_end, expected)] for each `sh run` block: line
    indexes of the fences (end exclusive), out_* None when no text block follows."""
    blocks, i = [], 0
    while i < len(lines):
        if not RUN_FENCE.match(lines[i]):
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].rstrip("\n") != "```":
            j += 1
        if j == len(lines):
            sys.exit(f"tutorial line {i + 1}: `sh run` block not closed")
        code = "".join(lines[i + 1:j])
        k = j + 1
        while k < len(lines) and not lines[k].strip():
            k += 1
        out_start = out_end = expected = None
        if k < len(lines) and TEXT_FENCE.match(lines[k]):
            m = k + 1
            while m < len(lines) and lines[m].rstrip("\n") != "```":
                m += 1
            if m == len(lines):
                sys.exit(f"tutorial line {k + 1}: `text` block not closed")
            out_start, out_end, expected = k, m + 1, "".join(lines[k + 1:m])
        blocks.append((i, j + 1, code, out_start, out_end, expected))
        i = j + 1
    return blocks


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def run_blocks(blocks, bindir, work, port):
    """Runs all blocks in one bash; returns [(rc, output)] for the blocks that ran."""
    outdir = os.path.join(work, ".out")
    os.mkdir(outdir)
    run = os.path.join(work, "tutorial")
    os.mkdir(run)
    script = ["set -u", f'export PATH="{bindir}:$PATH"', f'cd "{run}"']
    for n, b in enumerate(blocks):
        code = b[2].replace(PORT, port)
        script.append(f"{{\n{code}\n}} >'{outdir}/{n}.out' 2>&1 </dev/null\n"
                      f"echo $? >'{outdir}/{n}.rc'\n"
                      f"[ \"$(cat '{outdir}/{n}.rc')\" = 0 ] || exit 1")
    with open(os.path.join(work, "all.sh"), "w") as f:
        f.write("\n".join(script) + "\n")
    p = subprocess.Popen(["bash", os.path.join(work, "all.sh")], start_new_session=True,
                         stdin=subprocess.DEVNULL)
    try:
        p.wait(timeout=TIME_LIMIT)
    except subprocess.TimeoutExpired:
        print(f"tutorial: not done after {TIME_LIMIT} s; stopping it")
    finally:
        # the blocks' daemons run in bash's process group (its session): stop them all
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                break
            if sig == signal.SIGTERM:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
                time.sleep(0.5)
    results = []
    for n in range(len(blocks)):
        rc_path = os.path.join(outdir, f"{n}.rc")
        if not os.path.exists(rc_path):
            break
        with open(rc_path) as f:
            rc = int(f.read().strip() or "1")
        with open(os.path.join(outdir, f"{n}.out"), errors="replace") as f:
            out = f.read()
        results.append((rc, out.replace(port, PORT).replace(run, "~/fedkern-tutorial")))
    return results


NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def normalise(text):
    text = re.sub(r'(_seconds"?:?\s*)[-+0-9.eE]+', r"\1<t>", text)
    text = re.sub(r"\b(session=)[0-9a-f]+", r"\1<id>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", "<time>", text)
    text = re.sub(r"\bts=\S+", "ts=<time>", text)
    return [l.rstrip() for l in text.rstrip("\n").split("\n")] if text.strip() else []


def line_match(want, got):
    wt, gt = NUM.split(want), NUM.split(got)
    if wt != gt:
        return False
    for a, b in zip(NUM.findall(want), NUM.findall(got)):
        x, y = float(a), float(b)
        if x != y and abs(x - y) > 1e-6 * max(abs(x), abs(y)):
            return False
    return True


def match(want, got):
    """Lines of want against lines of got; '...' matches any run of lines."""
    if not want:
        return not got
    if want[0] == "...":
        return any(match(want[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and line_match(want[0], got[0]) and match(want[1:], got[1:])


IMAGE = re.compile(r"\]\(tutorial-([A-Za-z0-9_-]+\.svg)\)")


def images(doc, text, run, update):
    """Each picture `tutorial-X.svg` the page shows must be an SVG the blocks wrote as X.svg;
    --update copies it next to the page. Returns the number of failures."""
    fails = 0
    for name in IMAGE.findall(text):
        src = os.path.join(run, name)
        try:
            with open(src, "rb") as f:
                head = f.read(256)
        except OSError:
            head = b""
        if b"<svg" not in head:
            print(f"FAIL: {doc}: the page shows tutorial-{name}, but the blocks wrote no SVG {name}")
            fails += 1
        elif update:
            shutil.copyfile(src, os.path.join(os.path.dirname(os.path.abspath(doc)),
                                              "tutorial-" + name))
    return fails


def main():
    args = sys.argv[1:]
    update = bool(args) and args[0] == "--update"
    if update:
        args = args[1:]
    if len(args) != 4:
        sys.exit(__doc__)
    doc, progs = args[0], args[1:]
    with open(doc) as f:
        lines = f.readlines()
    blocks = parse(lines)
    if not blocks:
        sys.exit(f"{doc}: no `sh run` blocks")
    work = tempfile.mkdtemp(prefix="fk-tutorial-")
    try:
        bindir = os.path.join(work, "bin")
        os.mkdir(bindir)
        for prog, name in zip(progs, ("fedkern", "fedkern-server", "fedkern-client")):
            os.symlink(os.path.abspath(prog), os.path.join(bindir, name))
        results = run_blocks(blocks, bindir, work, free_port())
        image_fails = images(doc, "".join(lines), os.path.join(work, "tutorial"), update)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    fails = image_fails
    for n, b in enumerate(blocks):
        where = f"{doc} line {b[0] + 1}"
        if n >= len(results):
            print(f"FAIL: {where}: not run (an earlier block failed)")
            fails += 1
            continue
        rc, out = results[n]
        if rc != 0:
            print(f"FAIL: {where}: exit status {rc}; output:\n{out}")
            fails += 1
            continue
        want = normalise(b[5] or "")
        got = normalise(out)
        if not update and not match(want, got):
            print(f"FAIL: {where}: output differs\n--- page\n{b[5] or ''}--- real\n{out}")
            fails += 1
    if update and len(results) == len(blocks):
        for n in reversed(range(len(blocks))):
            b, out = blocks[n], results[n][1]
            new = ["```text\n"] + [l + "\n" for l in out.rstrip("\n").split("\n")] + ["```\n"] \
                if out.strip() else []
            if b[3] is not None:
                lines[b[3]:b[4]] = new
            elif new:
                lines[b[1]:b[1]] = ["\n"] + new
        with open(doc, "w") as f:
            f.writelines(lines)
        print(f"{doc}: {len(blocks)} blocks run, outputs rewritten")
    if fails:
        print(f"tutorial: {fails} of {len(blocks)} blocks failed")
        sys.exit(1)
    if not update:
        print(f"tutorial: all {len(blocks)} blocks ran and printed what the page shows")


if __name__ == "__main__":
    main()
