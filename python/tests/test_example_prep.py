"""examples/pytorch/prep.py: the rows each worker gets (the fleet benchmark's CNN partition)."""
import argparse
import importlib.util
import os

import numpy as np

HERE = os.path.dirname(__file__)
spec = importlib.util.spec_from_file_location(
    "prep", os.path.join(HERE, "..", "..", "examples", "pytorch", "prep.py"))
prep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prep)


def test_geometric_volumes_fall_by_the_ratio_from_the_first_worker_to_the_last():
    shares = prep.geometric(8, 10.0)
    assert abs(shares.sum() - 1) < 1e-12
    assert abs(shares[0] / shares[-1] - 10.0) < 1e-9
    # log-spaced: each step divides by the same factor, 10^(1/7)
    steps = shares[:-1] / shares[1:]
    assert np.allclose(steps, 10.0 ** (1 / 7))
    assert np.allclose(prep.geometric(1, 10.0), [1.0])


def test_alpha_zero_cuts_every_class_alike_in_the_geometric_volumes():
    rng = np.random.default_rng(3)
    labels = np.repeat(np.arange(10), 1000)
    args = argparse.Namespace(alpha=0.0, volume_ratio=10.0, workers=8)
    shares = prep.draw_shares(args, rng)
    parts = prep.split(labels, shares, rng)
    assert sorted(np.concatenate(parts).tolist()) == list(range(len(labels)))  # a partition
    sizes = np.array([len(p) for p in parts])
    assert np.all(np.abs(sizes - prep.geometric(8, 10.0) * len(labels)) <= 10)
    for p in parts:  # no label skew: every class holds a tenth of a worker's rows (+-1 a class)
        hist = np.bincount(labels[p], minlength=10)
        assert hist.max() - hist.min() <= 1


def test_dirichlet_shares_skew_labels_and_give_every_worker_rows():
    rng = np.random.default_rng(3)
    args = argparse.Namespace(alpha=0.3, volume_ratio=1.0, workers=8)
    shares = prep.draw_shares(args, rng)
    assert shares.shape == (10, 8)
    assert np.allclose(shares.sum(axis=1), 1)
    assert shares.sum(axis=0).min() >= 0.2
    assert shares.max() > 0.5  # alpha 0.3: some class mostly on one worker
