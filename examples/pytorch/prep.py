#!/usr/bin/env python3
"""Each of N workers its own Fashion-MNIST rows: per class, Dirichlet(alpha) shares of the
training rows (unequal sizes, label skew), or with --alpha 0 the same shares for every class (no
label skew) in volumes falling geometrically by --volume-ratio from worker 0 to the last (as
tern's `data.partition`); the same shares of the test rows are each worker's held-out set.
Writes OUT/w0.npz ... (x_train, y_train, x_eval, y_eval; images as uint8)."""
import argparse
import gzip
import os
import sys

import numpy as np

FMNIST = "/usr/share/datasets/fashion-mnist"


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def split(labels, shares, rng):
    """Row indices of each worker: class c's rows cut by shares[c]."""
    parts = [[] for _ in range(shares.shape[1])]
    for c in range(shares.shape[0]):
        rows = rng.permutation(np.flatnonzero(labels == c))
        cuts = (np.cumsum(shares[c])[:-1] * len(rows)).astype(int)
        for w, chunk in enumerate(np.split(rows, cuts)):
            parts[w].extend(chunk.tolist())
    return [rng.permutation(np.array(p, dtype=np.int64)) for p in parts]


def geometric(workers, ratio):
    """Volume shares falling from worker 0 to the last by `ratio` in all, log-spaced."""
    shares = ratio ** (-np.arange(workers) / max(workers - 1, 1))
    return shares / shares.sum()


def draw_shares(args, rng):
    """classes x workers: each class's rows cut among the workers."""
    if args.alpha == 0:
        return np.tile(geometric(args.workers, args.volume_ratio), (10, 1))
    for _ in range(10000):  # every worker gets at least 2% of the rows
        shares = rng.dirichlet([args.alpha] * args.workers, size=10)
        if shares.sum(axis=0).min() >= 0.2:
            return shares
    sys.exit(f"prep.py: no Dirichlet({args.alpha}) draw in 10000 gives each of {args.workers} "
             "workers 2% of the rows (fewer workers or a larger --alpha)")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", default="out/pytorch-data")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--alpha", type=float, default=0.5, help="label skew; 0: none")
    ap.add_argument("--volume-ratio", type=float, default=1.0,
                    help="largest / smallest worker's rows, with --alpha 0 only")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--data", default=FMNIST)
    args = ap.parse_args()
    if args.alpha < 0 or args.volume_ratio < 1 or args.workers < 1:
        ap.error("--alpha must be >= 0, --volume-ratio >= 1, --workers >= 1")
    if args.alpha > 0 and args.volume_ratio != 1:
        ap.error("--volume-ratio needs --alpha 0 (Dirichlet shares set the volumes themselves)")
    x = idx(f"{args.data}/train-images-idx3-ubyte.gz")
    y = idx(f"{args.data}/train-labels-idx1-ubyte.gz")
    xt = idx(f"{args.data}/t10k-images-idx3-ubyte.gz")
    yt = idx(f"{args.data}/t10k-labels-idx1-ubyte.gz")
    rng = np.random.default_rng(args.seed)
    shares = draw_shares(args, rng)
    train, held = split(y, shares, rng), split(yt, shares, rng)
    os.makedirs(args.out, exist_ok=True)
    for w in range(args.workers):
        path = os.path.join(args.out, f"w{w}.npz")
        np.savez(path, x_train=x[train[w]], y_train=y[train[w]], x_eval=xt[held[w]],
                 y_eval=yt[held[w]])
        hist = np.bincount(y[train[w]], minlength=10)
        print(f"{path}: {len(train[w])} train rows, {len(held[w])} held-out rows, "
              f"labels {hist.tolist()}")


if __name__ == "__main__":
    main()
