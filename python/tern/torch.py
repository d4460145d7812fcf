"""A PyTorch trainer: an nn.Module, a loss function and a DataLoader, and tern does the rest."""
from typing import Dict, List, Optional

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, TensorDataset

from tern.client import run_trainer
from tern.trainer import Delta, Gradient, NumPyTrainer


def _dataset(data) -> Dataset:
    return data.dataset if isinstance(data, DataLoader) else data


def _labels_of(dataset) -> Optional[torch.Tensor]:
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) >= 2:
        y = dataset.tensors[1]
        if y.dim() == 1 and not y.is_floating_point():
            return y
    return None


def round_seed(config) -> int:
    """A seed of the request's seed and round together: the rounds draw different batches
    whether or not the worker varies the seed itself."""
    state = np.random.SeedSequence([int(config["seed"]), int(config["round"])]).generate_state(2)
    return (int(state[0]) << 31) | (int(state[1]) >> 1)  # 63 bits: torch takes an int64


class TorchTrainer(NumPyTrainer):
    """Trains ``model`` (its named_parameters, in order, are the layout) with plain SGD.

    Each FitRequest takes local_steps minibatches of batch_size rows (the coordinator's
    training settings; batch_size 0: the DataLoader's), drawn with the request's seed and
    round. One step answers the mean gradient (GRADIENT); more answer start minus end
    parameters (DELTA).
    Buffers (BatchNorm statistics) stay local to the device.
    """

    def __init__(self, model: torch.nn.Module, loss_fn, train: DataLoader,
                 eval_loader: Optional[DataLoader] = None, *, threads: int = 1,
                 labels: Optional[Dict[int, int]] = None):
        torch.set_num_threads(threads)
        self.model = model
        self.loss_fn = loss_fn
        self.train = _dataset(train)
        self.collate = train.collate_fn if isinstance(train, DataLoader) else None
        self.default_batch = train.batch_size if isinstance(train, DataLoader) else 32
        self.eval_loader = eval_loader
        self.params = [p for _, p in model.named_parameters()]
        self.names = [n for n, _ in model.named_parameters()]
        self.labels = labels
        self.framework = "torch " + torch.__version__

    def get_parameters(self) -> List[np.ndarray]:
        return [p.detach().cpu().numpy().copy() for p in self.params]

    def tensor_names(self) -> List[str]:
        return self.names

    def train_rows(self) -> int:
        return len(self.train)

    def eval_rows(self) -> int:
        return 0 if self.eval_loader is None else len(_dataset(self.eval_loader))

    def label_histogram(self) -> Dict[int, int]:
        if self.labels is not None:
            return self.labels
        y = _labels_of(self.train)
        if y is None:
            return {}
        counts = torch.bincount(y.long())
        return {int(k): int(c) for k, c in enumerate(counts.tolist()) if c > 0}

    def _load(self, parameters: List[np.ndarray]) -> None:
        with torch.no_grad():
            for p, a in zip(self.params, parameters):
                p.copy_(torch.from_numpy(np.ascontiguousarray(a)).view_as(p))

    def _batches(self, config):
        """local_steps batches of rows drawn without replacement (a new permutation each pass)."""
        batch = int(config["batch_size"]) or self.default_batch or 32
        g = torch.Generator().manual_seed(round_seed(config))
        n = len(self.train)
        order = torch.randperm(n, generator=g)
        at = 0
        for _ in range(max(1, int(config["local_steps"]))):
            if at + batch > n:
                order, at = torch.randperm(n, generator=g), 0
            idx = order[at:at + batch]
            at += batch
            if isinstance(self.train, TensorDataset):
                yield tuple(t[idx] for t in self.train.tensors)
            else:
                yield self.collate([self.train[int(i)] for i in idx])

    def fit(self, parameters, config):
        self._load(parameters)
        torch.manual_seed(round_seed(config))
        self.model.train()
        steps = max(1, int(config["local_steps"]))
        lr = float(config["local_lr"])
        total_loss, rows = 0.0, 0
        for x, y in self._batches(config):
            for p in self.params:
                p.grad = None
            loss = self.loss_fn(self.model(x), y)
            loss.backward()
            total_loss += float(loss) * len(y)
            rows += len(y)
            if steps > 1:
                with torch.no_grad():
                    for p in self.params:
                        if p.grad is not None:
                            p.sub_(p.grad, alpha=lr)
        metrics = {"loss": total_loss / max(rows, 1)}
        if steps == 1:
            grads = [np.zeros(p.shape, np.float32) if p.grad is None
                     else p.grad.detach().cpu().numpy() for p in self.params]
            return Gradient(grads), rows, metrics
        after = self.get_parameters()
        return Delta([a - b for a, b in zip(parameters, after)]), rows, metrics

    def evaluate(self, parameters, config):
        self._load(parameters)
        self.model.eval()
        total_loss, correct, rows = 0.0, 0, 0
        with torch.no_grad():
            for x, y in self.eval_loader:
                out = self.model(x)
                total_loss += float(self.loss_fn(out, y)) * len(y)
                if out.dim() == 2 and y.dim() == 1:
                    correct += int((out.argmax(dim=1) == y).sum())
                rows += len(y)
        return total_loss / max(rows, 1), rows, {"accuracy": correct / max(rows, 1)}


def run(model: torch.nn.Module, loss_fn, train: DataLoader, endpoint: str,
        eval_loader: Optional[DataLoader] = None, *, threads: int = 1, **kwargs) -> None:
    """Serves ``model`` to the worker at ``endpoint`` until SIGTERM/SIGINT (tern.run_trainer)."""
    run_trainer(TorchTrainer(model, loss_fn, train, eval_loader, threads=threads), endpoint,
                **kwargs)
