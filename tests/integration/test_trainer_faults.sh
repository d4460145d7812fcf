#!/usr/bin/env bash
# External trainers that fail (tests/integration/fake_trainer.py): one sends a NaN gradient, one
# an answer of the wrong size, one hangs, one crashes mid-round and is restarted; a fifth is
# clean. Each failing worker logs why, sits those rounds out and shows trainer_failures in its
# /status; the coordinator's model never takes a bad update (every trainer only ever receives
# finite parameters, the run's losses stay finite and the model reaches the accuracy of clean
# training), and each worker trains again once its trainer answers (the crashed one restarted).
source "$(dirname "$0")/lib.sh"

use_fake_trainer

ROUNDS=${ROUNDS:-800}
write_ext_coordinator 5 "$ROUNDS" 2
start_coordinator

for w in clean nan size hang crash; do start_ext_worker "$w" 1; done
wait_for_line "$WORK/crash.out" "waiting for the trainer at ipc://" "the worker did not wait for its trainer"
start_trainer clean 1
start_trainer nan 2 --misbehave nan --at 4 --times 2
start_trainer size 3 --misbehave wrong-size --at 4 --times 2
start_trainer hang 4 --misbehave hang --at 4 --times 2
start_trainer crash 5 --misbehave crash --at 6
wait_for_line "$WORK/crash-trainer.log" "crashing" "the crashing trainer never crashed"
# Its connection closes with it: the request fails as "no trainer connected", not at the timeout.
wait_for_line "$WORK/crash.out" "no trainer connected to ipc://" "the worker did not notice the crash"
sleep 2.5  # rounds with no trainer at all
start_trainer crash 5
wait_for_line "$WORK/crash.out" "trainer connected at" "the restarted trainer was not taken"

# Every failing worker says why, sits the round out and counts it in /status.
declare -A WHY=([nan]="non-finite value" [size]="bytes, the model 84 values" \
                [hang]="did not answer within 1 s" [crash]="no trainer connected to ipc://")
for w in nan size hang crash; do
  wait_for_line "$WORK/$w.out" "the trainer failed (.*${WHY[$w]}.*); sitting the round out" \
    "worker $w did not log its trainer's failure"
  "$PY" - "$(cat "$WORK/$w.url")" "$w" <<'PY' || fail "worker $w: /status"
import json, sys, urllib.request
st = json.load(urllib.request.urlopen(sys.argv[1] + "/status", timeout=5))
c = st["counters"]
assert c["trainer_failures"] > 0, (sys.argv[2], c)
assert c["trainer_connections"] >= 1, (sys.argv[2], c)
print(sys.argv[2], {k: v for k, v in c.items() if k.startswith("trainer")})
PY
done
grep -q "no trainer connected to ipc://" "$WORK/crash.out" || fail "no round without a trainer"

wait "$CPID" || fail "coordinator exited with $?"
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || { tail -n 20 "$WORK/coord.err"; fail "coordinator did not finish"; }
! grep -q NONFINITE "$WORK"/*-trainer.log || fail "a trainer was sent non-finite parameters"
"$PY" - "$WORK" "$ROUNDS" "$SRC/tests/integration" <<'PY'
import csv, math, re, sys
import numpy as np
work, rounds = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])
import fake_trainer as ft
rows = list(csv.DictReader(open(f"{work}/metrics.csv")))
losses = [float(r["train_loss"]) for r in rows if r["train_loss"] not in ("", "nan")]
assert all(math.isfinite(x) for x in losses), losses
assert not any(r["train_loss"] == "nan" for r in rows), "a round's loss was not finite"
def fits(name):
    return [(int(m[1]), float(m[2])) for m in
            re.finditer(r"^fit \d+ round (\d+) acc ([0-9.]+)", open(f"{work}/{name}-trainer.log").read(), re.M)]
final = fits("clean")[-1][1]
# A clean reference: softmax regression trained centrally on every trainer's rows, evaluated on
# the clean trainer's held-out rows.
F, C = 20, 4
x, y = map(np.concatenate, zip(*(ft.synthetic(F, C, 600, s) for s in range(1, 6))))
ex, ey = ft.synthetic(F, C, 400, 1 + 7919)
w = np.zeros(C * (F + 1), dtype=np.float32)
for _ in range(300):
    w -= 0.5 * ft.loss_grad(w, x, y, F, C)[1]
reference = ft.accuracy(w, ex, ey, F, C)
assert final >= reference - 0.05, f"the model reached accuracy {final}, a clean run {reference}"
# Each worker trained again once its trainer answered: the trainer was asked (and answered)
# later rounds, well after its failures.
for name, at in (("nan", 4), ("size", 4), ("hang", 4), ("crash", 6)):
    got = fits(name)
    assert len(got) >= at + 10, (name, len(got))
parts = [int(r["participants"]) for r in rows]
assert parts[-1] == 5, parts[-10:]
print(f"final accuracy {final:.3f} (clean reference {reference:.3f}); participants in the last rounds {parts[-5:]}")
PY
echo "PASS: failing trainers cost their rounds only; the model stayed finite and trained on"
