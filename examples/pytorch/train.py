#!/usr/bin/env python3
"""A tern trainer: a small CNN on this device's own Fashion-MNIST rows (examples/pytorch).
python3 train.py DATA.npz ipc:///PATH/trainer.sock   serves the worker bound there;
python3 train.py --write-model model.tern            writes the initial model file."""
import argparse

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import tern
import tern.torch


def cnn():
    torch.manual_seed(0)  # every device starts from the same model (the model file's)
    return nn.Sequential(nn.Conv2d(1, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 10))


def rows(data, part):
    x = torch.from_numpy(data[f"x_{part}"]).float().div_(255).unsqueeze(1)
    return TensorDataset(x, torch.from_numpy(data[f"y_{part}"]).long())


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("data", nargs="?")
    ap.add_argument("endpoint", nargs="?")
    ap.add_argument("--write-model")
    args = ap.parse_args()
    if args.write_model:
        tern.save_model_file(args.write_model, cnn())
    else:
        data = np.load(args.data)
        tern.torch.run(cnn(), nn.functional.cross_entropy, DataLoader(rows(data, "train"), 32),
                       args.endpoint, DataLoader(rows(data, "eval"), 32))
