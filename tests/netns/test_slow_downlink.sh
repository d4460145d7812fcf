#!/usr/bin/env bash
# A worker behind a slow downlink: the coordinator's side of the veth pair is shaped to 4 Mbit/s
# and the model is large (500,010 parameters), so its welcome takes about 4 s to cross and each
# update about 2 s.
# - The welcome takes longer than the worker's coordinator patience (2.5 s): a worker that
#   re-joined at every silence over its live connection threw the half-received welcome away each
#   time and never joined. Its silences over a live connection are waited out longer.
# - The coordinator's Finish carries the last round's update, and the coordinator exits once it
#   has sent it: what of it is still queued when the process ends must not be thrown away (the
#   worker would never learn that training ended and would keep asking for a coordinator that is
#   gone, its replica a step behind). The worker must end on its own with the final model.
source "$(dirname "$0")/lib.sh"

FEATURES=50000   # 500,010 parameters; an update of 40% of them is about 0.9 MB
ROUNDS=2

prepare_pair
# The coordinator's egress: 4 Mbit/s, a queue long enough that tbf never drops.
shape_coordinator 4mbit

cat > "$WORK/coord.yaml" <<YAML
bind: tcp://$ADDR_C:0
endpoint_file: $WORK/endpoint
min_workers: 1
max_rounds: $ROUNDS
round_deadline_seconds: 20
heartbeat_seconds: 0.5
worker_patience_seconds: 60
eval_every: 1000000
model: {kind: softmax, classes: 10, features: $FEATURES}
optimizer: {lr: 0.1}
training: {batch_size: 32, seed: 7}
allocation: {method: uniform, mean_ratio: 0.4}
logging: {level: info}
security: none
YAML
write_synthetic_worker far "$FEATURES" 2.5
start_daemons

end=$((SECONDS + 120))
while kill -0 "$CPID" 2> /dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
if kill -0 "$CPID" 2> /dev/null; then
  grep -c "re-joining" "$WORK/worker.out" >&2 || true
  fail "the coordinator did not finish $ROUNDS rounds in 120 s (the worker never joined?)"
fi
wait "$CPID" || fail "the coordinator exited with $?"
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || fail "the coordinator did not finish"
# The worker ends on its own (without the Finish it would re-join a coordinator that is gone,
# its waits growing to 20 s).
end=$((SECONDS + 40))
while kill -0 "$WPID" 2> /dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
if kill -0 "$WPID" 2> /dev/null; then
  tail -5 "$WORK/worker.err" >&2
  fail "the worker did not hear that training finished (no Finish within 40 s of the coordinator's exit)"
fi
wait "$WPID" || fail "the worker exited with $?"
grep -q "coordinator finished training at round $ROUNDS" "$WORK/worker.err" "$WORK/worker.out" ||
  fail "the worker ended without the coordinator's Finish"
ref=$(grep '^model:' "$WORK/coord.out" | sed 's/.*checksum=//')
got=$(grep '^replica:' "$WORK/worker.out" | sed 's/.*checksum=//')
[ -n "$ref" ] || fail "the coordinator printed no model checksum"
[ "$got" = "$ref" ] || fail "the worker's replica '$got' is not the coordinator's final model '$ref'"
grep -q "did not confirm" "$WORK/coord.out" && fail "the coordinator exited before the worker confirmed the end"
rejoins=$(grep -c "re-joining" "$WORK/worker.out" || true)
# The welcome is sent while the worker waits for it: one re-join at most (a second for the
# timing's sake), where a patience that ignored the welcome's size re-joined dozens of times.
[ "$rejoins" -le 2 ] || fail "the worker re-joined $rejoins times before its welcome arrived"
echo "PASS: the welcome crossed the 4 Mbit/s downlink after $rejoins re-join(s), the last update before the coordinator exited; replica = model ($ref)"
