"""tern's Python side: external trainers for tern workers (docs/python.md).

A trainer is a local process that computes gradients (or local-SGD deltas) and evaluations for
one tern worker daemon over the trainer protocol (proto/trainer.proto). Subclass
:class:`NumPyTrainer` for any framework, or use :mod:`tern.torch` for a PyTorch ``nn.Module``.
"""
from tern.client import TrainerRefused, run_trainer
from tern.model_file import load_model_file, save_model_file
from tern.trainer import Delta, Gradient, NumPyTrainer
from tern.trainer_pb2 import TRAINER_PROTOCOL_VERSION as PROTOCOL_VERSION

__version__ = "0.1.0"

__all__ = [
    "Delta",
    "Gradient",
    "NumPyTrainer",
    "PROTOCOL_VERSION",
    "TrainerRefused",
    "load_model_file",
    "run_trainer",
    "save_model_file",
]
