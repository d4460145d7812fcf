"""The trainer's side of the trainer protocol (docs/python.md): a DEALER that connects to the
worker's ROUTER, says Hello on every (re)connection, and answers each FitRequest."""
import logging
import signal
import threading
import time
import traceback
from typing import Optional

import numpy as np
import zmq
from zmq.utils.monitor import recv_monitor_message

from tern import trainer_pb2 as pb
from tern.trainer import Delta, Gradient, Layout, NumPyTrainer

VERSION = pb.TRAINER_PROTOCOL_VERSION
log = logging.getLogger("tern.trainer")


class TrainerRefused(RuntimeError):
    """The worker refused the Hello (HelloReply.accepted false): the reason is the message."""


def _envelope(**body) -> bytes:
    return pb.Envelope(version=VERSION, **body).SerializeToString()


def hello_of(trainer: NumPyTrainer, layout: Layout) -> pb.Hello:
    """The Hello describing ``trainer``: its layout, rows, label histogram and framework."""
    hist = sorted((int(k), int(v)) for k, v in (trainer.label_histogram() or {}).items())
    return pb.Hello(
        tensors=[pb.Tensor(name=n, shape=s) for n, s in zip(layout.names, layout.shapes)],
        train_rows=int(trainer.train_rows()),
        label_histogram=[pb.LabelCount(label=k, count=v) for k, v in hist],
        eval_rows=int(trainer.eval_rows()),
        framework=str(trainer.framework))


def config_of(req: pb.FitRequest) -> dict:
    return {"round": req.round, "batch_size": req.batch_size, "local_steps": req.local_steps,
            "local_lr": req.local_lr, "seed": req.seed, "id": req.id}


class Buffers:
    """The vectors a session reuses: the parameters, and answers zmq may still be sending.

    A fresh multi-megabyte array per request costs its page faults (tens of ms for 4 MB on
    some machines, more than the transfer); reused ones are touched once.
    """

    def __init__(self, size: int):
        self.params = np.empty(size, np.float32)
        self.answers = []  # [array, zmq.MessageTracker or None]

    def answer(self) -> list:
        """An answer buffer zmq no longer holds (a new one when all are in flight)."""
        for slot in self.answers:
            if slot[1] is None or slot[1].done:
                slot[1] = None
                return slot
        slot = [np.empty(len(self.params), "<f4"), None]
        if len(self.answers) < 4:
            self.answers.append(slot)
        return slot


def answer_fit(trainer: NumPyTrainer, layout: Layout, req: pb.FitRequest, payload,
               buffers: Buffers):
    """The answer to one FitRequest: ([FitResult], None) on a failure, else ([FitResult, update],
    the buffer slot holding the update)."""
    try:
        return _fit(trainer, layout, req, payload, buffers)
    except Exception as e:  # the user's code failed: the worker sits the round out
        log.error("round %d: fit failed:\n%s", req.round, traceback.format_exc())
        return [_envelope(result=pb.FitResult(id=req.id, error=f"{type(e).__name__}: {e}"))], None


def _fit(trainer, layout, req, payload, buffers):
    def fail(why):
        log.error("round %d: %s", req.round, why)
        return [_envelope(result=pb.FitResult(id=req.id, error=why))], None

    got = 0 if payload is None else len(payload)
    if got != 4 * layout.size:
        return fail(f"a payload of {got} bytes, the layout ({layout.size} values) needs "
                    f"{4 * layout.size}")
    received = np.frombuffer(payload, dtype="<f4")
    np.copyto(buffers.params, received)
    params = layout.split(buffers.params)
    config = config_of(req)
    result = pb.FitResult(id=req.id)
    if req.evaluate and trainer.eval_rows() > 0:
        loss, rows, metrics = trainer.evaluate(params, config)
        result.evaluation.CopyFrom(pb.Evaluation(
            loss=float(loss), accuracy=float(metrics.get("accuracy", 0.0)), rows=int(rows)))
        np.copyto(buffers.params, received)  # fit starts from the parameters as received
    update, rows, metrics = trainer.fit(params, config)
    if not isinstance(update, (Gradient, Delta)):
        update = Gradient(update)
    slot = buffers.answer()
    out = layout.join(update.arrays, slot[0])
    # A sum in float64 cannot overflow from finite fp32 values: non-finite iff one value is.
    if not np.isfinite(out.sum(dtype=np.float64)):
        return fail("the update holds a non-finite value (NaN or infinity)")
    result.kind = pb.FitResult.DELTA if isinstance(update, Delta) else pb.FitResult.GRADIENT
    result.loss = float(metrics.get("loss", 0.0))
    result.rows = int(rows)
    return [_envelope(result=result), out], slot


def _error_reply(text: str):
    return [_envelope(error=pb.Error(text=text))]


class _Stop:
    """A stop flag set by SIGTERM/SIGINT (main thread only) or by the caller's event."""

    def __init__(self, event: Optional[threading.Event], handle_signals: bool):
        self.event = event or threading.Event()
        self.saved = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                self.saved[sig] = signal.signal(sig, self._on_signal)

    def _on_signal(self, signum, _frame):
        if self.event.is_set():  # a second signal: stop now, even within a fit
            raise SystemExit(128 + signum)
        log.info("signal %d: stopping after the current request (again: at once)", signum)
        self.event.set()

    def restore(self):
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)


class _Session:
    """One trainer's connection: the socket, its monitor and the Hello state."""

    def __init__(self, ctx, trainer, endpoint):
        self.trainer = trainer
        self.layout = Layout.of(trainer)
        if self.layout.size == 0:
            raise ValueError("the trainer's model has no parameters")
        self.hello = _envelope(hello=hello_of(trainer, self.layout))
        self.sock = ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 1000)
        self.sock.setsockopt(zmq.RECONNECT_IVL, 100)
        self.sock.setsockopt(zmq.RECONNECT_IVL_MAX, 1000)
        self.monitor = self.sock.get_monitor_socket(zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED)
        self.sock.connect(endpoint)
        self.accepted = False
        self.done = False  # the worker said Done: training is over
        self.hello_sent_at = None
        self.buffers = Buffers(self.layout.size)

    def send_hello(self, why: str):
        log.info("hello (%s): %d tensors, %d values, %d train rows, %d eval rows", why,
                 len(self.layout.names), self.layout.size, self.trainer.train_rows(),
                 self.trainer.eval_rows())
        self.sock.send(self.hello)
        self.accepted = False
        self.hello_sent_at = time.monotonic()

    def on_monitor(self):
        event = recv_monitor_message(self.monitor)["event"]
        if event == zmq.EVENT_CONNECTED:
            self.send_hello("connected")
        elif event == zmq.EVENT_DISCONNECTED:
            # What the worker said before it went is read first: a Done ends the session.
            while not self.done and self.sock.poll(0):
                self.on_message()
            if self.done:
                return
            log.warning("the worker went away; reconnecting")
            self.accepted = False

    def on_message(self):
        frames = self.sock.recv_multipart(copy=False)
        env = pb.Envelope()
        try:
            env.ParseFromString(frames[0].bytes)
        except Exception:
            self.sock.send_multipart(_error_reply("an envelope that does not parse"))
            return
        if env.version != VERSION:
            self.sock.send_multipart(_error_reply(
                f"protocol version {env.version}, this trainer speaks {VERSION}"))
            return
        body = env.WhichOneof("body")
        if body == "hello_reply":
            self._on_hello_reply(env.hello_reply)
        elif body == "fit":
            self._on_fit(env.fit, frames[1].buffer if len(frames) > 1 else None)
        elif body == "error":
            log.warning("the worker says: %s", env.error.text)
            if "hello" in env.error.text.lower():
                self.send_hello("asked")
        elif body == "done":
            log.info("the worker is done: %s", env.done.reason or "training finished")
            self.done = True
        else:
            self.sock.send_multipart(_error_reply(f"a trainer does not take {body or 'nothing'}"))

    def _on_hello_reply(self, reply):
        if not reply.accepted:
            raise TrainerRefused(f"the worker refused this trainer: {reply.reason}")
        log.info("the worker accepted the hello")
        self.accepted = True

    def _on_fit(self, req, payload):
        # A request before the worker took the Hello: a worker that restarted and missed it.
        if not self.accepted and time.monotonic() - (self.hello_sent_at or 0) > 1.0:
            self.send_hello("a request before a hello reply")
        started = time.monotonic()
        frames, slot = answer_fit(self.trainer, self.layout, req, payload, self.buffers)
        tracker = self.sock.send_multipart(frames, copy=False, track=slot is not None)
        if slot is not None:
            slot[1] = tracker
        log.debug("round %d: answered in %.3f s", req.round, time.monotonic() - started)

    def close(self):
        self.sock.disable_monitor()
        self.monitor.close(0)
        self.sock.close()


def _default_logging():
    """Info lines on stderr when the program configured no logging itself."""
    root = logging.getLogger()
    if not root.handlers and not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(
            logging.Formatter("%(asctime)s tern-trainer %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)


def run_trainer(trainer: NumPyTrainer, endpoint: str, *, stop: Optional[threading.Event] = None,
                handle_signals: bool = True, context: Optional[zmq.Context] = None) -> None:
    """Serve ``trainer`` to the worker bound at ``endpoint`` until SIGTERM/SIGINT, ``stop``, or
    the worker's Done (training is over).

    Survives worker restarts (the socket reconnects and says Hello again). Raises
    TrainerRefused when the worker refuses the Hello (a layout other than its model's).
    """
    ctx = context or zmq.Context.instance()
    _default_logging()
    flag = _Stop(stop, handle_signals)
    try:
        session = _Session(ctx, trainer, endpoint)
        try:
            _serve(session, flag.event, endpoint)
        finally:
            session.close()
    finally:
        flag.restore()


def _serve(session: "_Session", stop: threading.Event, endpoint: str) -> None:
    poller = zmq.Poller()
    poller.register(session.sock, zmq.POLLIN)
    poller.register(session.monitor, zmq.POLLIN)
    log.info("trainer for %s: layout %s", endpoint, session.layout.describe())
    while not stop.is_set() and not session.done:
        ready = dict(poller.poll(100))
        # Messages first: a worker that exits says Done before its connection closes, and both
        # may be seen in one poll.
        if session.sock in ready:
            session.on_message()
        if session.monitor in ready and not session.done:
            session.on_monitor()
