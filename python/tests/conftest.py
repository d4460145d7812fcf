"""A fake worker (a pyzmq ROUTER bound where a tern worker binds) driving tern.run_trainer."""
import os
import sys
import threading

import numpy as np
import pytest
import zmq

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

import tern  # noqa: E402
from tern import trainer_pb2 as pb  # noqa: E402


def envelope(version=1, **body):
    return pb.Envelope(version=version, **body).SerializeToString()


class FakeWorker:
    """Binds a ROUTER at an ipc:// path and speaks the worker's side of the protocol."""

    def __init__(self, ctx, endpoint):
        self.ctx, self.endpoint = ctx, endpoint
        self.bind()

    def bind(self):
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(self.endpoint)
        self.peer = None

    def restart(self):
        self.sock.close(0)
        self.bind()

    def recv(self, timeout=5.0):
        """(Envelope, payload bytes or None) of the trainer's next message."""
        if not self.sock.poll(int(timeout * 1000)):
            raise AssertionError("the trainer did not answer in time")
        frames = self.sock.recv_multipart()
        self.peer = frames[0]
        env = pb.Envelope()
        env.ParseFromString(frames[1])
        assert len(frames) <= 3
        return env, (frames[2] if len(frames) == 3 else None)

    def send(self, env_bytes, payload=None):
        frames = [self.peer, env_bytes] + ([payload] if payload is not None else [])
        self.sock.send_multipart(frames)

    def handshake(self):
        env, payload = self.recv()
        assert env.WhichOneof("body") == "hello" and payload is None
        self.send(envelope(hello_reply=pb.HelloReply(accepted=True)))
        return env.hello

    def fit(self, params, payload=None, **request):
        flat = np.concatenate([np.asarray(p, "<f4").ravel() for p in params])
        self.send(envelope(fit=pb.FitRequest(**request)),
                  flat.tobytes() if payload is None else payload)
        env, out = self.recv(timeout=20.0)
        assert env.WhichOneof("body") == "result"
        return env.result, (None if out is None else np.frombuffer(out, "<f4"))


@pytest.fixture
def ctx():
    c = zmq.Context()
    yield c
    c.term()


@pytest.fixture
def serve(ctx, tmp_path):
    """serve(trainer) -> FakeWorker: the trainer runs in a thread until the test ends."""
    started = []

    def start(trainer):
        worker = FakeWorker(ctx, f"ipc://{tmp_path}/trainer.sock")
        stop = threading.Event()
        errors = []

        def body():
            try:
                tern.run_trainer(trainer, worker.endpoint, stop=stop, handle_signals=False,
                                 context=ctx)
            except Exception as e:  # noqa: BLE001 (the test reads it)
                errors.append(e)

        t = threading.Thread(target=body, daemon=True)
        t.start()
        worker.thread, worker.errors = t, errors
        started.append((worker, stop, t))
        return worker

    yield start
    for worker, stop, t in started:
        stop.set()
        t.join(5)
        assert not t.is_alive(), "run_trainer did not stop"
        worker.sock.close(0)


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 5)).astype(np.float32)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 1).astype(np.int64)
    return x[:150], y[:150], x[150:], y[150:]
