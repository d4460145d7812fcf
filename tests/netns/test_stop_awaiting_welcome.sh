#!/usr/bin/env bash
# A worker stopped while its welcome is on the way: the coordinator admitted it when it sent the
# welcome, so the worker must not leave silently. The coordinator's side of the veth pair is
# shaped to 4 Mbit/s and the model is 800 kB (200,010 parameters): the welcome takes about 1.6 s
# to cross. The worker is sent SIGTERM as soon as the coordinator has admitted it. A stopping
# worker with a join out waits up to 3 s for its welcome, takes it, and leaves with a Leave: the
# coordinator hears at once that it left, rather than marking it gone after its patience (30 s
# here) with its slot and cap held meanwhile.
source "$(dirname "$0")/lib.sh"

FEATURES=20000  # 200,010 parameters: an 800 kB welcome

prepare_pair
shape_coordinator 4mbit
# Two workers are needed to start: the admitted one waits for a second that never comes.
cat > "$WORK/coord.yaml" <<YAML
bind: tcp://$ADDR_C:0
endpoint_file: $WORK/endpoint
min_workers: 2
max_rounds: 5
heartbeat_seconds: 0.5
worker_patience_seconds: 30
eval_every: 1000000
model: {kind: softmax, classes: 10, features: $FEATURES}
optimizer: {lr: 0.1}
training: {batch_size: 32, seed: 7}
logging: {level: info}
security: none
YAML
write_synthetic_worker leaving "$FEATURES" 60
start_daemons

for _ in $(seq 1 300); do
  grep -q "worker leaving joined as id" "$WORK/coord.out" 2> /dev/null && break
  sleep 0.02
done
grep -q "worker leaving joined as id" "$WORK/coord.out" || fail "the coordinator never admitted the worker"
stopped=$SECONDS
kill -TERM "$WPID"
# The welcome was still crossing when the stop came (else the test shows nothing).
grep -q "joined as worker" "$WORK/worker.out" && fail "the welcome had arrived before the stop"
rc=0
wait "$WPID" || rc=$?
[ "$rc" = 0 ] || fail "the stopped worker exited with $rc"
took=$((SECONDS - stopped))
[ "$took" -le 5 ] || fail "the stopped worker took $took s to exit"
grep -q "joined as worker" "$WORK/worker.out" || fail "the worker exited without its welcome"
wait_for_line "$WORK/coord.out" "worker 0 \(leaving\) left" 50 ||
  fail "the coordinator did not hear that the worker left (it would mark it gone after 30 s)"
echo "PASS: a worker stopped with its welcome on the way took it and left within $took s"
