"""run_trainer against a fake worker: the Hello, fit round trips, evaluation and failures."""
import time

import numpy as np
import pytest
from conftest import envelope
from softmax_trainer import SoftmaxTrainer

import tern
from tern import trainer_pb2 as pb


def request(**kw):
    base = dict(id=7, round=3, batch_size=32, local_steps=1, local_lr=0.1, seed=11)
    base.update(kw)
    return base


def params_of(rng):
    return [rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=3).astype(np.float32)]


def test_hello_describes_the_trainer(serve, data):
    x, y, xe, ye = data
    worker = serve(SoftmaxTrainer(x, y, 3, xe, ye))
    env, payload = worker.recv()
    assert env.version == pb.TRAINER_PROTOCOL_VERSION and payload is None
    hello = env.hello
    assert [(t.name, list(t.shape)) for t in hello.tensors] == [("weight", [5, 3]),
                                                                ("bias", [3])]
    assert hello.train_rows == 150 and hello.eval_rows == 50
    got = {c.label: c.count for c in hello.label_histogram}
    assert got == {k: int((y == k).sum()) for k in range(3)}
    assert hello.framework.startswith("numpy ")


def test_gradient_round_trip(serve, data):
    x, y, _, _ = data
    trainer = SoftmaxTrainer(x, y, 3)
    worker = serve(trainer)
    worker.handshake()
    params = params_of(np.random.default_rng(1))
    result, update = worker.fit(params, **request())
    assert not result.error and result.id == 7
    assert result.kind == pb.FitResult.GRADIENT and result.rows == 32
    expected, rows, metrics = trainer.fit(params, {"seed": 11, "round": 3, "batch_size": 32,
                                                   "local_steps": 1, "local_lr": 0.1})
    np.testing.assert_allclose(update, np.concatenate([a.ravel() for a in expected.arrays]),
                               rtol=1e-6)
    assert result.loss == pytest.approx(metrics["loss"])


def test_delta_after_local_steps(serve, data):
    x, y, _, _ = data
    trainer = SoftmaxTrainer(x, y, 3)
    worker = serve(trainer)
    worker.handshake()
    params = params_of(np.random.default_rng(2))
    result, update = worker.fit(params, **request(local_steps=5, local_lr=0.5))
    assert result.kind == pb.FitResult.DELTA and result.rows == 5 * 32
    w, b = (p.copy() for p in params)  # start minus end of 5 plain SGD steps
    rng = np.random.default_rng([11, 3])
    for _ in range(5):
        rows = rng.choice(150, size=32, replace=False)
        _, gw, gb, _ = trainer.loss_grad(w, b, x[rows], y[rows])
        w, b = w - 0.5 * gw, b - 0.5 * gb
    want = np.concatenate([(params[0] - w).ravel(), (params[1] - b).ravel()])
    np.testing.assert_allclose(update, want, rtol=1e-5, atol=1e-7)


def test_evaluation_is_at_the_given_parameters(serve, data):
    x, y, xe, ye = data
    trainer = SoftmaxTrainer(x, y, 3, xe, ye)
    worker = serve(trainer)
    worker.handshake()
    params = params_of(np.random.default_rng(3))
    result, _ = worker.fit(params, **request(local_steps=3, evaluate=True))
    loss, rows, metrics = trainer.evaluate(params, {})
    assert result.evaluation.rows == 50 == rows
    assert result.evaluation.loss == pytest.approx(loss)
    assert result.evaluation.accuracy == pytest.approx(metrics["accuracy"])
    plain, _ = worker.fit(params, **request())
    assert plain.evaluation.rows == 0


def test_wrong_size_request_fails_and_the_trainer_goes_on(serve, data):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.handshake()
    params = params_of(np.random.default_rng(4))
    result, update = worker.fit(params, payload=b"\0" * 16, **request(id=1))
    assert update is None and result.id == 1
    assert "16 bytes" in result.error and "72" in result.error
    result, update = worker.fit(params, **request(id=2))
    assert not result.error and update.size == 18


def test_fit_exception_and_non_finite_update_answer_an_error(serve, data):
    class Broken(SoftmaxTrainer):
        def fit(self, parameters, config):
            if config["round"] == 1:
                raise RuntimeError("out of memory")
            return tern.Gradient([np.full((5, 3), np.nan), np.zeros(3)]), 1, {"loss": 0.0}

    x, y, _, _ = data
    worker = serve(Broken(x, y, 3))
    worker.handshake()
    params = params_of(np.random.default_rng(5))
    result, update = worker.fit(params, **request(round=1))
    assert update is None and result.error == "RuntimeError: out of memory"
    result, update = worker.fit(params, **request(round=2))
    assert update is None and "non-finite" in result.error


def test_an_update_of_the_right_size_in_the_wrong_shape_answers_an_error(serve, data):
    class Transposed(SoftmaxTrainer):
        def fit(self, parameters, config):
            update, rows, metrics = super().fit(parameters, config)
            if config["round"] == 1:
                update = tern.Gradient([update.arrays[0].T, update.arrays[1]])
            return update, rows, metrics

    x, y, _, _ = data
    worker = serve(Transposed(x, y, 3))
    worker.handshake()
    params = params_of(np.random.default_rng(6))
    result, update = worker.fit(params, **request(round=1))
    assert update is None and "shape [3, 5]" in result.error and "[5, 3]" in result.error
    result, update = worker.fit(params, **request(round=2))
    assert not result.error and update.size == 18


def test_other_version_is_answered_with_an_error(serve, data):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.handshake()
    worker.send(envelope(version=2, fit=pb.FitRequest(id=1)), b"")
    env, payload = worker.recv()
    assert env.WhichOneof("body") == "error" and payload is None
    assert "version 2" in env.error.text
    worker.send(b"\xff\xff not a protobuf")
    env, _ = worker.recv()
    assert env.WhichOneof("body") == "error"


def test_refused_hello_stops_the_trainer(serve, data):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.recv()
    worker.send(envelope(hello_reply=pb.HelloReply(accepted=False, reason="layout differs")))
    worker.thread.join(5)
    assert not worker.thread.is_alive()
    assert isinstance(worker.errors[0], tern.TrainerRefused)
    assert "layout differs" in str(worker.errors[0])


def test_done_ends_run_trainer_without_an_error(serve, data, caplog):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.handshake()
    result, _ = worker.fit(params_of(np.random.default_rng(5)), **request())
    assert not result.error
    worker.send(envelope(done=pb.Done(reason="the coordinator finished training")))
    worker.sock.close(1000)  # the worker exits right after its Done, as the daemon does
    worker.thread.join(5)
    assert not worker.thread.is_alive()
    assert worker.errors == []
    # Done said, the connection's end is no worker gone away.
    assert not [r for r in caplog.records if "went away" in r.getMessage()]


def test_hello_again_after_a_worker_restart(serve, data):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.handshake()
    worker.restart()
    assert worker.handshake().train_rows == 150
    result, _ = worker.fit(params_of(np.random.default_rng(6)), **request())
    assert not result.error


def test_hello_again_when_asked(serve, data):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.handshake()
    worker.send(envelope(error=pb.Error(text="hello first")))
    assert worker.handshake().train_rows == 150


def test_request_before_a_hello_reply_resends_the_hello(serve, data):
    x, y, _, _ = data
    worker = serve(SoftmaxTrainer(x, y, 3))
    worker.recv()  # the hello, left unanswered
    time.sleep(1.1)
    worker.send(envelope(fit=pb.FitRequest(**request())),
                np.zeros(18, "<f4").tobytes())
    bodies = [worker.recv()[0].WhichOneof("body") for _ in range(2)]
    assert bodies == ["hello", "result"]


def test_fit_sees_the_parameters_as_received_after_evaluate_and_earlier_requests(serve, data):
    class Scribbler(SoftmaxTrainer):
        def evaluate(self, parameters, config):
            for p in parameters:
                p[...] = 99.0  # the trainer may change what it is given
            return 0.0, 1, {"accuracy": 0.5}

        def fit(self, parameters, config):
            return tern.Gradient([p.copy() for p in parameters]), 1, {"loss": 0.0}

    x, y, xe, ye = data
    worker = serve(Scribbler(x, y, 3, xe, ye))
    worker.handshake()
    for seed in (7, 8, 9):  # answers in reused buffers stay each request's own
        params = params_of(np.random.default_rng(seed))
        result, update = worker.fit(params, **request(id=seed, evaluate=seed == 8))
        assert result.id == seed
        np.testing.assert_array_equal(update, np.concatenate([p.ravel() for p in params]))


def test_a_done_before_the_connection_ends_is_read_first(ctx, tmp_path, data, caplog):
    """Both the Done and the connection's end are waiting when the trainer looks (the order a
    busy trainer sees them in): the Done is taken first, and no "went away" is said."""
    from conftest import FakeWorker

    from tern.client import _Session
    x, y, _, _ = data
    worker = FakeWorker(ctx, f"ipc://{tmp_path}/trainer.sock")
    session = _Session(ctx, SoftmaxTrainer(x, y, 3), worker.endpoint)
    try:
        assert session.monitor.poll(5000)
        session.on_monitor()  # connected: the Hello goes out
        worker.handshake()
        assert session.sock.poll(5000)
        session.on_message()
        assert session.accepted
        worker.send(envelope(done=pb.Done(reason="the coordinator finished training")))
        worker.sock.close(1000)
        assert session.monitor.poll(5000)  # the disconnection, with the Done still unread
        session.on_monitor()
        assert session.done
        assert not [r for r in caplog.records if "went away" in r.getMessage()]
    finally:
        session.close()
