"""Model files, the generated protocol module and the command line."""
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import zmq

import tern
from tern import trainer_pb2 as pb

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
REPO = os.path.dirname(PYTHON_DIR)


def test_model_file_round_trip(tmp_path):
    named = {"conv.weight": np.arange(24, dtype=np.float32).reshape(2, 3, 4),
             "conv.bias": np.array([0.5, -1.5], np.float32), "scale": np.float32(3.0)}
    path = str(tmp_path / "model.tern")
    tern.save_model_file(path, named)
    f = pb.ModelFile()
    f.ParseFromString(open(path, "rb").read())
    assert f.version == pb.TRAINER_PROTOCOL_VERSION
    assert [(t.name, list(t.shape)) for t in f.tensors] == [
        ("conv.weight", [2, 3, 4]), ("conv.bias", [2]), ("scale", [])]
    assert len(f.parameters) == 4 * 27
    back = tern.load_model_file(path)
    assert [n for n, _ in back] == list(named)
    for (_, a), b in zip(back, named.values()):
        np.testing.assert_array_equal(a, b)
    assert os.listdir(tmp_path) == ["model.tern"]  # no temporary file left


def test_load_refuses_other_versions_and_sizes(tmp_path):
    path = str(tmp_path / "m")
    f = pb.ModelFile(version=2, tensors=[pb.Tensor(name="w", shape=[2])],
                     parameters=b"\0" * 8)
    open(path, "wb").write(f.SerializeToString())
    with pytest.raises(ValueError, match="version 2"):
        tern.load_model_file(path)
    f.version, f.parameters = 1, b"\0" * 4
    open(path, "wb").write(f.SerializeToString())
    with pytest.raises(ValueError, match="needs 8"):
        tern.load_model_file(path)


def test_command_line_shows_a_model_file(tmp_path):
    path = str(tmp_path / "m")
    tern.save_model_file(path, [("w", np.zeros((3, 2), np.float32))])
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    out = subprocess.run([sys.executable, "-m", "tern", "model-file", path], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert "w [3, 2]" in out and "1 tensors, 6 parameters" in out


@pytest.mark.skipif(shutil.which("protoc") is None, reason="protoc is not installed")
def test_generated_module_matches_the_proto(tmp_path):
    subprocess.run(["protoc", f"--proto_path={REPO}/proto", f"--python_out={tmp_path}",
                    f"{REPO}/proto/trainer.proto"], check=True)
    fresh = open(tmp_path / "trainer_pb2.py").read()
    committed = open(os.path.join(PYTHON_DIR, "tern", "trainer_pb2.py")).read()
    assert fresh == committed, "regenerate python/tern/trainer_pb2.py (docs/python.md)"


def start_trainer(tmp_path, script):
    """A worker's ROUTER bound at tmp_path/w.sock and the trainer `script` in its own process."""
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(f"ipc://{tmp_path}/w.sock")
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            text=True)
    return ctx, router, proc


def test_sigterm_stops_the_trainer_cleanly(tmp_path):
    script = (
        "import numpy as np, tern\n"
        "class T(tern.NumPyTrainer):\n"
        "    def get_parameters(self): return [np.zeros(3, np.float32)]\n"
        "    def train_rows(self): return 1\n"
        f"tern.run_trainer(T(), 'ipc://{tmp_path}/w.sock')\n"
        "print('stopped')\n")
    ctx, router, proc = start_trainer(tmp_path, script)
    try:
        assert router.poll(20000), "no hello from the trainer"  # it runs: handlers installed
        router.recv_multipart()
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=10)
    finally:
        proc.kill()
        router.close()
        ctx.term()
    assert proc.returncode == 0 and out.strip() == "stopped"


def test_a_second_signal_stops_a_trainer_within_its_fit(tmp_path):
    script = (
        "import sys, time, numpy as np, tern\n"
        "class T(tern.NumPyTrainer):\n"
        "    def get_parameters(self): return [np.zeros(3, np.float32)]\n"
        "    def train_rows(self): return 1\n"
        "    def fit(self, parameters, config):\n"
        "        print('fitting', flush=True); time.sleep(60)\n"
        f"tern.run_trainer(T(), 'ipc://{tmp_path}/w.sock')\n")
    ctx, router, proc = start_trainer(tmp_path, script)
    try:
        assert router.poll(20000), "no hello from the trainer"
        peer, _ = router.recv_multipart()
        request = pb.Envelope(version=1, fit=pb.FitRequest(id=1, local_steps=1))
        router.send_multipart([peer, request.SerializeToString(), b"\0" * 12])
        assert proc.stdout.readline().strip() == "fitting"
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
    finally:
        proc.kill()
        router.close()
        ctx.term()
    assert proc.returncode == 128 + signal.SIGTERM
