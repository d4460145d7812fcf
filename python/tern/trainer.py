"""The framework-neutral trainer API: parameters in as a list of NumPy arrays, an update out."""
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np


class Gradient:
    """An update that is the mean gradient of the loss over the rows used (one step)."""

    kind = "gradient"

    def __init__(self, arrays: Sequence[np.ndarray]):
        self.arrays = list(arrays)


class Delta:
    """An update that is the start parameters minus the parameters after the local steps."""

    kind = "delta"

    def __init__(self, arrays: Sequence[np.ndarray]):
        self.arrays = list(arrays)


class NumPyTrainer:
    """Subclass and implement get_parameters, fit, train_rows (and evaluate for held-out rows).

    ``config`` (fit and evaluate) is a dict: round, batch_size, local_steps, local_lr, seed.
    """

    framework = "numpy " + np.__version__  # free text the worker logs and shows in /status

    def get_parameters(self) -> List[np.ndarray]:
        """The model's tensors (their shapes are the layout; their values the initial model)."""
        raise NotImplementedError("a trainer implements get_parameters()")

    def tensor_names(self) -> Optional[List[str]]:
        """One name per tensor of get_parameters(); None names them t0, t1, ..."""
        return None

    def train_rows(self) -> int:
        """Rows this trainer trains on: its share of the federation's data."""
        raise NotImplementedError("a trainer implements train_rows()")

    def label_histogram(self) -> Dict[int, int]:
        """Label -> rows among the training rows (optional: empty when unknown)."""
        return {}

    def eval_rows(self) -> int:
        """Held-out rows evaluate() measures on (0: the trainer does not evaluate)."""
        return 0

    def fit(self, parameters: List[np.ndarray], config: dict) -> Tuple[object, int, dict]:
        """Train at ``parameters``: (Gradient(...) or Delta(...), rows used, {"loss": mean loss}).

        A plain list of arrays is taken as a Gradient.
        """
        raise NotImplementedError("a trainer implements fit()")

    def evaluate(self, parameters: List[np.ndarray], config: dict) -> Tuple[float, int, dict]:
        """Evaluate ``parameters`` on the held-out rows: (mean loss, rows, {"accuracy": a})."""
        raise NotImplementedError("a trainer with eval_rows() > 0 implements evaluate()")


class Layout:
    """Names and shapes of a model's tensors; splits and joins the flat fp32 vector."""

    def __init__(self, names: Sequence[str], shapes: Sequence[Tuple[int, ...]]):
        if len(names) != len(shapes):
            raise ValueError(f"{len(names)} tensor names for {len(shapes)} tensors")
        if len(set(names)) != len(names):
            raise ValueError("tensor names repeat")
        self.names = list(names)
        self.shapes = [tuple(int(d) for d in s) for s in shapes]
        self.sizes = [int(np.prod(s, dtype=np.int64)) for s in self.shapes]
        self.size = sum(self.sizes)

    @classmethod
    def of(cls, trainer: NumPyTrainer) -> "Layout":
        arrays = trainer.get_parameters()
        names = trainer.tensor_names() or [f"t{i}" for i in range(len(arrays))]
        return cls(names, [np.shape(a) for a in arrays])

    def describe(self) -> str:
        return ", ".join(f"{n}{list(s)}" for n, s in zip(self.names, self.shapes))

    def split(self, flat: np.ndarray) -> List[np.ndarray]:
        """Views of ``flat`` (fp32, length size) in the layout's shapes."""
        out, at = [], 0
        for shape, size in zip(self.shapes, self.sizes):
            out.append(flat[at:at + size].reshape(shape))
            at += size
        return out

    def join(self, arrays: Sequence[np.ndarray], out: Optional[np.ndarray] = None) -> np.ndarray:
        """One little-endian fp32 vector of ``arrays`` (into ``out`` when given); ValueError
        when one's shape is not the layout's (a transposed matrix has the right size, not the
        right shape)."""
        arrays = list(arrays)
        if len(arrays) != len(self.shapes):
            raise ValueError(f"{len(arrays)} arrays, the layout has {len(self.shapes)} tensors")
        if out is None:
            out = np.empty(self.size, dtype="<f4")
        at = 0
        for i, (a, shape, size) in enumerate(zip(arrays, self.shapes, self.sizes)):
            a = np.asarray(a)
            if a.shape != shape:
                raise ValueError(f"tensor {self.names[i]}: shape {list(a.shape)}, "
                                 f"the layout has {list(shape)}")
            out[at:at + size] = a.reshape(-1)
            at += size
        return out
