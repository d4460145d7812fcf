#!/usr/bin/python3
"""A fake external trainer for tern-worker (proto/trainer.proto): softmax regression in NumPy on a
synthetic data set (or a CSV file: label first, then the features), with switches that make it
misbehave from a given request on, for the fault tests.

  fake_trainer.py --pb-dir DIR --write-model FILE --features F --classes C
  fake_trainer.py --pb-dir DIR --endpoint ipc://PATH --seed S [--misbehave MODE --at N --times K]

MODE: crash (exits on receiving request N), hang (does not answer K requests from N on),
wrong-size (answers K requests from N on with one value too few), nan (a NaN in K gradients
from N on). K = 0: for good. Every request prints a line "fit N round R acc A" with the held-out
accuracy at the parameters it was sent; non-finite parameters print "NONFINITE".
"""
import argparse
import os
import sys
import time

import numpy as np
import zmq


def load_pb(pb_dir):
    sys.path.insert(0, pb_dir)
    import trainer_pb2  # generated at run time by protoc --python_out

    return trainer_pb2


def synthetic(features, classes, rows, seed):
    # One set of class centres for every trainer (seed 1234); rows drawn with `seed`.
    centres = np.random.default_rng(1234).normal(size=(classes, features)) * 0.4
    rng = np.random.default_rng(seed)
    y = rng.integers(0, classes, size=rows)
    x = centres[y] + rng.normal(size=(rows, features))
    return x.astype(np.float32), y.astype(np.int64)


def load_csv(path):
    data = np.loadtxt(path, delimiter=",", dtype=np.float64, ndmin=2)
    return data[:, 1:].astype(np.float32), data[:, 0].astype(np.int64)


def split(params, features, classes):
    w = params[: classes * features].reshape(classes, features)
    b = params[classes * features:]
    return w, b


def loss_grad(params, x, y, features, classes):
    w, b = split(params.astype(np.float64), features, classes)
    logits = x @ w.T + b
    logits -= logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    loss = -np.mean(np.log(p[np.arange(len(y)), y] + 1e-12))
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    gw = p.T @ x
    gb = p.sum(axis=0)
    return loss, np.concatenate([gw.ravel(), gb]).astype(np.float32)


def accuracy(params, x, y, features, classes):
    w, b = split(params.astype(np.float64), features, classes)
    return float(np.mean(np.argmax(x @ w.T + b, axis=1) == y))


def envelope(pb):
    e = pb.Envelope()
    e.version = pb.TRAINER_PROTOCOL_VERSION
    return e


def layout(pb, e_tensors, features, classes):
    for name, shape in (("weight", [classes, features]), ("bias", [classes])):
        t = e_tensors.add()
        t.name = name
        t.shape.extend(shape)


def write_model(pb, args):
    m = pb.ModelFile()
    m.version = pb.TRAINER_PROTOCOL_VERSION
    layout(pb, m.tensors, args.features, args.classes)
    m.parameters = np.zeros(args.classes * (args.features + 1), dtype="<f4").tobytes()
    with open(args.write_model, "wb") as f:
        f.write(m.SerializeToString())


def hello(pb, sock, args, y):
    e = envelope(pb)
    layout(pb, e.hello.tensors, args.features, args.classes)
    e.hello.train_rows = len(y)
    for label, count in zip(*np.unique(y, return_counts=True)):
        c = e.hello.label_histogram.add()
        c.label = int(label)
        c.count = int(count)
    e.hello.eval_rows = args.eval_rows
    e.hello.framework = "numpy " + np.__version__
    sock.send(e.SerializeToString())
    reply = pb.Envelope()
    reply.ParseFromString(sock.recv())
    if not reply.hello_reply.accepted:
        print("refused:", reply.hello_reply.reason, flush=True)
        sys.exit(2)
    print("hello accepted", flush=True)


def misbehaves(args, n):
    if args.misbehave is None or n < args.at:
        return False
    return args.times == 0 or n < args.at + args.times


def fit(pb, args, req, params, data, n):
    x, y, ex, ey = data
    rng = np.random.default_rng([req.seed, req.round, args.seed])
    result = envelope(pb)
    r = result.result
    r.id = req.id
    if req.evaluate and len(ey) > 0:
        r.evaluation.loss = loss_grad(params, ex, ey, args.features, args.classes)[0]
        r.evaluation.accuracy = accuracy(params, ex, ey, args.features, args.classes)
        r.evaluation.rows = len(ey)
    steps = max(1, req.local_steps)
    local = params.copy()
    total = 0.0
    for _ in range(steps):
        rows = rng.integers(0, len(y), size=min(req.batch_size, len(y)))
        loss, g = loss_grad(local, x[rows], y[rows], args.features, args.classes)
        total += loss
        if steps > 1:
            local = local - np.float32(req.local_lr) * g
    if steps > 1:
        r.kind = pb.FitResult.DELTA
        g = (params - local).astype(np.float32)
    r.loss = total / steps
    r.rows = min(req.batch_size, len(y)) * steps
    if misbehaves(args, n) and args.misbehave == "nan":
        g = g.copy()
        g[0] = np.nan
    if misbehaves(args, n) and args.misbehave == "wrong-size":
        g = g[:-1]
    return result, g


def serve(pb, args):
    if args.data:
        x, y = load_csv(args.data)
    else:
        x, y = synthetic(args.features, args.classes, args.rows, args.seed)
    ex, ey = synthetic(args.features, args.classes, args.eval_rows, args.seed + 7919)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(args.endpoint)
    hello(pb, sock, args, y)
    n = 0
    while True:
        frames = sock.recv_multipart()
        req = pb.Envelope()
        req.ParseFromString(frames[0])
        if not req.HasField("fit"):
            continue
        n += 1
        params = np.frombuffer(frames[1], dtype="<f4")
        acc = accuracy(params, ex, ey, args.features, args.classes)
        finite = bool(np.all(np.isfinite(params)))
        print(f"fit {n} round {req.fit.round} acc {acc:.4f}" + ("" if finite else " NONFINITE"),
              flush=True)
        if misbehaves(args, n) and args.misbehave == "crash":
            print("crashing", flush=True)
            os._exit(3)
        if misbehaves(args, n) and args.misbehave == "hang":
            continue
        result, g = fit(pb, args, req.fit, params, (x, y, ex, ey), n)
        sock.send_multipart([result.SerializeToString(), g.astype("<f4").tobytes()])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--pb-dir", required=True)
    p.add_argument("--write-model")
    p.add_argument("--endpoint")
    p.add_argument("--features", type=int, default=20)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--rows", type=int, default=600)
    p.add_argument("--eval-rows", type=int, default=400)
    p.add_argument("--data", help="a CSV file: label, then the features")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--misbehave", choices=["crash", "hang", "wrong-size", "nan"])
    p.add_argument("--at", type=int, default=5, help="the request (from 1) it starts on")
    p.add_argument("--times", type=int, default=2, help="how many requests (0: for good)")
    args = p.parse_args()
    pb = load_pb(args.pb_dir)
    if args.write_model:
        write_model(pb, args)
        return
    serve(pb, args)


if __name__ == "__main__":
    main()
