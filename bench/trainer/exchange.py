#!/usr/bin/env python3
"""The trainer protocol's exchange cost against the compute it serves (docs/python.md).

A Python trainer (tern.run_trainer in its own process, a fit that does no arithmetic) answers
FitRequests from a pyzmq ROUTER standing in for the worker, over ipc://: the median round trip
of an N-parameter fp32 request and an N-parameter answer (framing, parsing, the size and
finiteness checks, both copies). Next to it: the example CNN's compute per round
(examples/pytorch/train.py's model, batch 32, local_steps steps of local SGD, one thread).
With --worker BIN (build/bin/tern-bench-trainer-exchange) the worker's side is the real one
(worker/external_trainer: the request built from the parameters, the answer parsed, checked and
divided back), so the round trip is the whole exchange a round pays.
Usage: /usr/bin/python3 bench/trainer/exchange.py [--params 1000000] [--repeats 50] [--worker BIN]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "python"))
from tern import trainer_pb2 as pb  # noqa: E402

TRAINER = """
import sys, numpy as np, tern
n = int(sys.argv[1])
class Echo(tern.NumPyTrainer):
    def get_parameters(self): return [np.zeros(n, np.float32)]
    def train_rows(self): return 1
    def fit(self, parameters, config): return tern.Delta(parameters), 1, {"loss": 0.0}
tern.run_trainer(Echo(), sys.argv[2])
"""


def exchange_seconds(n, repeats):
    """Median and quartiles of the round trip of an n-value request and answer."""
    with tempfile.TemporaryDirectory() as d:
        endpoint = f"ipc://{d}/trainer.sock"
        ctx = zmq.Context()
        sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.LINGER, 0)
        sock.bind(endpoint)
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        proc = subprocess.Popen([sys.executable, "-c", TRAINER, str(n), endpoint], env=env,
                                stderr=subprocess.DEVNULL)
        try:
            peer, _ = sock.recv_multipart()  # the hello
            sock.send_multipart([peer, pb.Envelope(version=1, hello_reply=pb.HelloReply(
                accepted=True)).SerializeToString()])
            payload = np.random.default_rng(0).normal(size=n).astype("<f4")
            times = []
            for i in range(repeats + 3):
                req = pb.Envelope(version=1, fit=pb.FitRequest(id=i, local_steps=2,
                                                                local_lr=0.1)).SerializeToString()
                t = time.perf_counter()
                sock.send_multipart([peer, req, payload], copy=False)
                frames = sock.recv_multipart(copy=False)
                elapsed = time.perf_counter() - t
                assert len(frames) == 3 and len(frames[2].buffer) == 4 * n
                if i >= 3:  # warm-up left out
                    times.append(elapsed)
        finally:
            proc.terminate()
            proc.wait(10)
            sock.close(0)
            ctx.term()
    q = statistics.quantiles(times, n=4)
    return statistics.median(times), q[0], q[2]


def worker_exchange_seconds(binary, n, repeats):
    """The same round trip with the worker's real side (tern-bench-trainer-exchange): median,
    first and third quartile, as that program measures them."""
    with tempfile.TemporaryDirectory() as d:
        endpoint = f"ipc://{d}/trainer.sock"
        worker = subprocess.Popen([binary, endpoint, str(repeats)], stdout=subprocess.PIPE,
                                  text=True)
        env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"))
        proc = subprocess.Popen([sys.executable, "-c", TRAINER, str(n), endpoint], env=env,
                                stderr=subprocess.DEVNULL)
        try:
            out, _ = worker.communicate(timeout=600)
        finally:
            proc.terminate()
            proc.wait(10)
    line = next(x for x in out.splitlines() if x.startswith("worker_side:"))
    fields = dict(f.split("=") for f in line.split()[1:])
    assert worker.returncode == 0 and int(fields["params"]) == n, out
    return (float(fields["median_ms"]) / 1e3, float(fields["q1_ms"]) / 1e3,
            float(fields["q3_ms"]) / 1e3)


def cnn_round_seconds(steps, repeats):
    """Median seconds of one round of the example's CNN: steps local SGD steps of batch 32."""
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset
    sys.path.insert(0, os.path.join(REPO, "examples", "pytorch"))
    from tern.torch import TorchTrainer
    from train import cnn
    model = cnn()
    data = TensorDataset(torch.rand(2048, 1, 28, 28), torch.randint(0, 10, (2048,)))
    trainer = TorchTrainer(model, nn.functional.cross_entropy, data, threads=1)
    params = trainer.get_parameters()
    times = []
    for r in range(repeats + 1):
        t = time.perf_counter()
        trainer.fit(params, dict(round=r, batch_size=32, local_steps=steps, local_lr=0.1, seed=r))
        if r:
            times.append(time.perf_counter() - t)
    return statistics.median(times), sum(p.size for p in params)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=50)
    ap.add_argument("--local-steps", type=int, default=10)
    ap.add_argument("--cnn-repeats", type=int, default=5)
    ap.add_argument("--worker", help="tern-bench-trainer-exchange: the worker's real side")
    args = ap.parse_args()
    cnn, cnn_params = cnn_round_seconds(args.local_steps, args.cnn_repeats)

    def measure(n):
        if args.worker:
            return worker_exchange_seconds(args.worker, n, args.repeats)
        return exchange_seconds(n, args.repeats)
    rows = [(args.params, *measure(args.params))]
    if cnn_params != args.params:
        rows.append((cnn_params, *measure(cnn_params)))
    print("worker side: " + ("tern-bench-trainer-exchange (the real one)" if args.worker
                             else "a pyzmq ROUTER"))
    print(f"CNN round (batch 32, {args.local_steps} local steps, 1 thread, {cnn_params} "
          f"parameters): {cnn * 1e3:.1f} ms (median of {args.cnn_repeats})")
    print(f"{'parameters':>10} | {'exchange ms (median)':>20} | {'quartiles ms':>15} | "
          f"{'of the CNN round':>16}")
    for n, med, lo, hi in rows:
        print(f"{n:>10} | {med * 1e3:>20.2f} | {lo * 1e3:>6.2f}-{hi * 1e3:<8.2f} | "
              f"{100 * med / cnn:>15.1f}%")


if __name__ == "__main__":
    main()
