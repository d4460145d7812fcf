#!/usr/bin/env bash
# A fleet whose only worker's trainer fails a round (tests/integration/fake_trainer.py answering
# with a NaN gradient, twice in a row): the worker says so with a push carrying nothing, the
# coordinator refuses it as worker_failed, asks again at the deadline, and the run goes on to its
# last round. Before, nothing was pushed and the round stayed open for good.
source "$(dirname "$0")/lib.sh"

use_fake_trainer

ROUNDS=10
cat > "$WORK/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/endpoint
min_workers: 1
max_rounds: $ROUNDS
round_deadline_seconds: 1
heartbeat_seconds: 0.5
worker_patience_seconds: 5
model: {kind: external, file: $WORK/model.bin}
optimizer: {lr: 0.5}
training: {batch_size: 32, seed: 3}
allocation: {method: uniform, mean_ratio: 0.5}
http: {bind: "127.0.0.1:0", url_file: $WORK/coord.url}
logging: {level: info}
security: none
YAML
start_coordinator
cat > "$WORK/alone.yaml" <<YAML
name: alone
coordinator: $EP
trainer: {kind: external, endpoint: ipc://$WORK/alone.sock, timeout_seconds: 1}
compression: {name: topk, error_feedback: true}
heartbeat_seconds: 0.5
coordinator_patience_seconds: 5
logging: {level: info}
security: none
YAML
"$BIN/tern-worker" --config "$WORK/alone.yaml" > "$WORK/alone.out" 2> "$WORK/alone.err" &
PIDS+=($!)
"${FAKE[@]}" --endpoint "ipc://$WORK/alone.sock" --seed 1 --misbehave nan --at 3 --times 2 \
  >> "$WORK/alone-trainer.log" 2>&1 &
PIDS+=($!)

wait_for_line "$WORK/alone.out" "the trainer failed (.*non-finite value.*); sitting the round out" \
  "the worker did not log its trainer's failure"
wait_for_line "$WORK/coord.out" "could not compute round 2: the trainer's gradient holds a non-finite" \
  "the coordinator did not log the worker's failure"
"$PY" - "$(cat "$WORK/coord.url")" <<'PY' || fail "coordinator /status"
import json, sys, time, urllib.request
for _ in range(100):  # /status is refreshed on the daemon's tick
    st = json.load(urllib.request.urlopen(sys.argv[1] + "/status", timeout=5))
    if st["rejected"]["worker_failed"] >= 1:
        break
    time.sleep(0.1)
assert st["rejected"]["worker_failed"] >= 1, st["rejected"]
PY
wait "$CPID" || fail "coordinator exited with $?"
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || { tail -n 20 "$WORK/coord.err"; fail "the run did not reach its last round"; }
grep -c "could not compute round 2" "$WORK/coord.out" | grep -qx 2 || fail "round 2 was not asked again after the first failure"
echo "PASS: a lone worker whose trainer failed was asked again and the run finished"
