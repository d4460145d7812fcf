"""trainer.proto's ModelFile: the layout and initial parameters a coordinator with
``model: {kind: external, file: PATH}`` starts from."""
import os
import tempfile
from typing import List, Tuple

import numpy as np

from tern import trainer_pb2 as pb


def _named_arrays(model) -> List[Tuple[str, np.ndarray]]:
    if hasattr(model, "named_parameters"):  # a torch nn.Module
        return [(n, p.detach().cpu().numpy()) for n, p in model.named_parameters()]
    if hasattr(model, "get_parameters"):  # a NumPyTrainer
        arrays = model.get_parameters()
        names = model.tensor_names() or [f"t{i}" for i in range(len(arrays))]
        return list(zip(names, arrays))
    if isinstance(model, dict):
        return list(model.items())
    return [(str(n), a) for n, a in model]


def encode_model_file(model) -> bytes:
    """The ModelFile bytes of ``model``: an nn.Module, a NumPyTrainer, a dict or (name, array)s."""
    named = _named_arrays(model)
    if not named:
        raise ValueError("a model file needs at least one tensor")
    f = pb.ModelFile(version=pb.TRAINER_PROTOCOL_VERSION)
    for name, a in named:
        f.tensors.add(name=name, shape=[int(d) for d in np.shape(a)])
    f.parameters = b"".join(np.asarray(a, dtype="<f4").tobytes() for _, a in named)
    return f.SerializeToString()


def save_model_file(path: str, model) -> None:
    """Writes ``model``'s ModelFile to ``path`` atomically (a temporary file renamed)."""
    data = encode_model_file(model)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".model-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load_model_file(path: str) -> List[Tuple[str, np.ndarray]]:
    """The (name, fp32 array) pairs of a model file; ValueError when it is not one."""
    f = pb.ModelFile()
    with open(path, "rb") as src:
        f.ParseFromString(src.read())
    if f.version != pb.TRAINER_PROTOCOL_VERSION:
        raise ValueError(f"{path}: model file version {f.version}, this reads "
                         f"{pb.TRAINER_PROTOCOL_VERSION}")
    shapes = [tuple(t.shape) for t in f.tensors]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    if len(f.parameters) != 4 * sum(sizes):
        raise ValueError(f"{path}: {len(f.parameters)} bytes of parameters, the layout needs "
                         f"{4 * sum(sizes)}")
    flat = np.frombuffer(f.parameters, dtype="<f4").astype(np.float32)
    out, at = [], 0
    for t, shape, size in zip(f.tensors, shapes, sizes):
        out.append((t.name, flat[at:at + size].reshape(shape)))
        at += size
    return out
