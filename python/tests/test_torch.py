"""tern.torch: layout, GRADIENT and DELTA against torch's own arithmetic, evaluation."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

import tern  # noqa: E402
from tern import trainer_pb2 as pb  # noqa: E402
from tern.torch import TorchTrainer, round_seed  # noqa: E402


def setup(evaluate=True):
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 1).long()
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    train = DataLoader(TensorDataset(x, y), batch_size=16)
    held = DataLoader(TensorDataset(x[:20], y[:20]), batch_size=7) if evaluate else None
    return model, x, y, TorchTrainer(model, nn.functional.cross_entropy, train, held)


def config(**kw):
    base = dict(round=1, batch_size=16, local_steps=1, local_lr=0.1, seed=5)
    base.update(kw)
    return base


def test_layout_and_rows():
    model, _, y, trainer = setup()
    assert trainer.tensor_names() == ["0.weight", "0.bias", "2.weight", "2.bias"]
    assert [a.shape for a in trainer.get_parameters()] == [(8, 4), (8,), (3, 8), (3,)]
    assert trainer.train_rows() == 64 and trainer.eval_rows() == 20
    assert trainer.label_histogram() == {k: int((y == k).sum()) for k in range(3) if (y == k).any()}
    assert torch.get_num_threads() == 1


def test_gradient_is_torch_autograd_on_the_seeded_batch():
    model, x, y, trainer = setup()
    params = [a + 0.1 for a in trainer.get_parameters()]
    update, rows, metrics = trainer.fit(params, config())
    assert isinstance(update, tern.Gradient) and rows == 16
    idx = torch.randperm(64, generator=torch.Generator().manual_seed(round_seed(config())))[:16]
    ref = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    with torch.no_grad():
        for p, a in zip(ref.parameters(), params):
            p.copy_(torch.from_numpy(a))
    loss = nn.functional.cross_entropy(ref(x[idx]), y[idx])
    loss.backward()
    for got, p in zip(update.arrays, ref.parameters()):
        np.testing.assert_allclose(got, p.grad.numpy(), rtol=1e-5, atol=1e-7)
    assert metrics["loss"] == pytest.approx(float(loss), rel=1e-6)


def test_delta_is_start_minus_end_of_local_sgd():
    model, x, y, trainer = setup()
    params = trainer.get_parameters()
    update, rows, _ = trainer.fit(params, config(local_steps=3, local_lr=0.2))
    assert isinstance(update, tern.Delta) and rows == 48
    ref = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    with torch.no_grad():
        for p, a in zip(ref.parameters(), params):
            p.copy_(torch.from_numpy(a))
    sgd = torch.optim.SGD(ref.parameters(), lr=0.2)
    order = torch.randperm(64, generator=torch.Generator().manual_seed(round_seed(config())))
    for s in range(3):
        idx = order[16 * s:16 * (s + 1)]
        sgd.zero_grad()
        nn.functional.cross_entropy(ref(x[idx]), y[idx]).backward()
        sgd.step()
    for got, start, p in zip(update.arrays, params, ref.parameters()):
        np.testing.assert_allclose(got, start - p.detach().numpy(), rtol=1e-4, atol=1e-6)


def test_evaluation_counts_correct_rows():
    model, x, y, trainer = setup()
    params = trainer.get_parameters()
    loss, rows, metrics = trainer.evaluate(params, config())
    with torch.no_grad():
        out = model(x[:20])
    assert rows == 20
    assert metrics["accuracy"] == pytest.approx(float((out.argmax(1) == y[:20]).float().mean()))
    assert loss == pytest.approx(float(nn.functional.cross_entropy(out, y[:20])), rel=1e-5)


def test_torch_trainer_through_the_protocol(serve):
    _, _, _, trainer = setup()
    worker = serve(trainer)
    hello = worker.handshake()
    assert hello.framework.startswith("torch ") and hello.eval_rows == 20
    params = trainer.get_parameters()
    result, update = worker.fit(params, id=9, round=1, batch_size=16, local_steps=4,
                                local_lr=0.1, seed=2, evaluate=True)
    assert result.kind == pb.FitResult.DELTA and result.rows == 64
    assert result.evaluation.rows == 20 and update.size == 8 * 4 + 8 + 3 * 8 + 3


def test_model_file_of_a_module(tmp_path):
    model, _, _, _ = setup(evaluate=False)
    tern.save_model_file(str(tmp_path / "m"), model)
    back = tern.load_model_file(str(tmp_path / "m"))
    assert [n for n, _ in back] == [n for n, _ in model.named_parameters()]
    for (_, a), (_, p) in zip(back, model.named_parameters()):
        np.testing.assert_array_equal(a, p.detach().numpy())


def test_rounds_of_one_seed_draw_different_batches():
    _, _, _, trainer = setup(evaluate=False)
    params = trainer.get_parameters()
    first, _, _ = trainer.fit(params, config(round=1))
    again, _, _ = trainer.fit(params, config(round=1))
    second, _, _ = trainer.fit(params, config(round=2))
    np.testing.assert_array_equal(first.arrays[0], again.arrays[0])
    assert not np.array_equal(first.arrays[0], second.arrays[0])
