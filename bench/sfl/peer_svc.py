#!/usr/bin/env python3
"""Peer for `fedkern bench sfl --pen`: scikit-learn's SVC (LIBSVM; the Debian package
python3-sklearn) on pen-digits 1 vs 7, all training rows of the two classes, default settings
(RBF kernel, gamma = 'scale', C = 1). Prints one line: best-of-3 process CPU seconds of the fit,
accuracy on the pair's test rows, number of support vectors. Not a copy of any peer's code:
it only calls the library."""
import argparse
import os
import time

import numpy as np
from sklearn.svm import SVC


def pair(path, a=1, b=7):
    d = np.loadtxt(path, delimiter=",")
    keep = (d[:, -1] == a) | (d[:, -1] == b)
    return d[keep, :-1] / 100.0, np.where(d[keep, -1] == a, 1, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data_dir", default="../shared/data")
    ap.add_argument("--reps", type=int, default=3)
    o = ap.parse_args()
    X, y = pair(os.path.join(o.data_dir, "uci-pendigits", "pendigits.tra"))
    Xt, yt = pair(os.path.join(o.data_dir, "uci-pendigits", "pendigits.tes"))
    best, m = float("inf"), None
    for _ in range(o.reps):
        t0 = time.process_time()
        m = SVC().fit(X, y)
        best = min(best, time.process_time() - t0)
    print(f"{best:.6f} {float((m.predict(Xt) == yt).mean()):.6f} {int(m.n_support_.sum())}")


if __name__ == "__main__":
    main()
