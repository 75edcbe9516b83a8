"""Shared by the ops tests: the sanitizer reports an ASan+UBSan build writes into
the daemons' logs (none in a normal build)."""
import os

MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:")


def sanitizer_reports(text):
    """The markers of sanitizer reports that text contains."""
    return [m for m in MARKERS if m in text]


def log_reports(directory, names=None):
    """(name, reports) for each log in directory: the given names (a missing one
    counts as empty), else every *.log there, sorted."""
    if names is None:
        names = [n for n in sorted(os.listdir(directory)) if n.endswith(".log")]
    out = []
    for name in names:
        p = os.path.join(directory, name)
        out.append((name, sanitizer_reports(open(p).read() if os.path.exists(p) else "")))
    return out
