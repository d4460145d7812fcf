#!/usr/bin/env python3
"""A NumPy-only tern trainer: softmax regression on this device's own CSV rows (no torch).
python3 softmax.py TRAIN.csv EVAL.csv CLASSES ipc:///PATH/trainer.sock  serves the worker there;
python3 softmax.py TRAIN.csv EVAL.csv CLASSES --write-model FILE     writes the initial model."""
import sys

import numpy as np

import tern


def load(path):  # a header line, then features..., label (the last column)
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    return data[:, :-1].astype(np.float32), data[:, -1].astype(np.int64)


class Softmax(tern.NumPyTrainer):
    def __init__(self, train, held_out, classes):
        (self.x, self.y), (self.xe, self.ye) = load(train), load(held_out)
        self.shapes = [(classes, self.x.shape[1]), (classes,)]  # W (row-major) then b

    def get_parameters(self):
        return [np.zeros(s, np.float32) for s in self.shapes]

    def train_rows(self):
        return len(self.y)

    def eval_rows(self):
        return len(self.ye)

    def label_histogram(self):
        return dict(zip(*(a.tolist() for a in np.unique(self.y, return_counts=True))))

    def scores(self, params, x, y):  # mean cross-entropy, its gradient, and the logits
        w, b = params
        z = x @ w.T + b
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(len(y)), y] + 1e-12).mean())
        p[np.arange(len(y)), y] -= 1.0
        return loss, [p.T @ x / len(y), p.mean(axis=0)], z

    def fit(self, parameters, config):
        rng = np.random.default_rng([config["seed"], config["round"]])
        rows = rng.integers(0, len(self.y), size=config["batch_size"])
        loss, grad, _ = self.scores(parameters, self.x[rows], self.y[rows])
        return tern.Gradient(grad), len(rows), {"loss": loss}

    def evaluate(self, parameters, config):
        loss, _, z = self.scores(parameters, self.xe, self.ye)
        return loss, len(self.ye), {"accuracy": float((z.argmax(axis=1) == self.ye).mean())}


if __name__ == "__main__":
    trainer = Softmax(sys.argv[1], sys.argv[2], int(sys.argv[3]))
    if sys.argv[4] == "--write-model":
        tern.save_model_file(sys.argv[5], trainer)
    else:
        tern.run_trainer(trainer, sys.argv[4])
