#!/usr/bin/env bash
# SIGTERM before any round: the coordinator exits 0 and its last line is the summary of nothing
# (rounds=0); a worker stopped while its data loads or while it waits for a coordinator exits 0,
# and a daemon stopped while its data loads stops at once (a coordinator then prints no final line).
source "$(dirname "$0")/lib.sh"

# stop_unstarted NAME: a coordinator on NAME.yaml (output NAME.out, NAME.err) stopped by SIGTERM
# once it has bound, before any worker came; it must exit 0.
stop_unstarted() {
  rm -f "$WORK/endpoint"
  "$BIN/tern-coordinator" --config "$WORK/$1.yaml" > "$WORK/$1.out" 2> "$WORK/$1.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  kill -TERM $CPID
  set +e; wait $CPID; rc=$?; set -e
  [ $rc -eq 0 ] || { cat "$WORK/$1.err"; fail "coordinator $1 stopped before training exited with $rc"; }
}

write_coordinator "$WORK/coord.yaml" 30 2
stop_unstarted coord
last=$(tail -n 1 "$WORK/coord.out")
[ "$last" = "final: rounds=0 test_accuracy=none upload_bytes=0 download_bytes=0 full_bytes=0" ] ||
  fail "last line: '$last'"

# With checkpoints configured, a stop before any round writes none: a round-0 checkpoint made
# the next start a resume, which skipped min_workers and bound the run to this model.
write_coordinator "$WORK/ck.yaml" 30 2 "checkpoint: {path: $WORK/ck.ckpt, every: 5}"
stop_unstarted ck
[ ! -e "$WORK/ck.ckpt" ] || fail "a stop before any round wrote a checkpoint"
grep -q "stop requested before any round: no checkpoint written" "$WORK/ck.out" ||
  { cat "$WORK/ck.out"; fail "the coordinator did not say why it wrote no checkpoint"; }

# Nobody listens on port 1: the worker loads its shard, then keeps trying to join.
write_worker "$WORK/w.yaml" tcp://127.0.0.1:1 1
for delay in 0.2 3; do
  "$BIN/tern-worker" --config "$WORK/w.yaml" > "$WORK/w.out" 2> "$WORK/w.err" &
  WPID=$!; PIDS+=($WPID)
  sleep $delay
  kill -TERM $WPID
  set +e; wait $WPID; rc=$?; set -e
  [ $rc -eq 0 ] || { cat "$WORK/w.err"; fail "worker stopped after ${delay}s exited with $rc"; }
done

# A worker stopped while its data loads stops at once, without finishing the load, and does not
# join, so the coordinator never admits, and then waits for, a worker that is already gone. The
# stop comes as soon as the worker can take it (its SIGTERM handler is in place, the load under
# way); a million CSV rows take seconds to load. (Before, the load went on to its end, which on a
# small board can outlast systemd's TimeoutStopSec.)
rm -f "$WORK/endpoint"
start_coordinator
seq 1000000 | awk 'BEGIN { print "a,b,c,d,e,f,g,h,y" } { print "0.5,1.25,2,3.5,4,5.75,6,7.125," $1 % 10 }' \
  > "$WORK/big.csv"
cat > "$WORK/load.yaml" <<YAML
name: loading
coordinator: $EP
data: {format: csv, path: $WORK/big.csv}
security: none
YAML
# stop_while_loading PROGRAM CONFIG OUTPUT: PROGRAM on CONFIG, sent SIGTERM as soon as it catches
# it (its handler in place, the load under way); it must exit 0.
stop_while_loading() {
  "$BIN/$1" --config "$2" > "$3" 2>&1 &
  local pid=$! rc mask; PIDS+=($pid)
  for _ in $(seq 1 1000); do
    mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$pid/status" 2> /dev/null || true)
    [ -n "$mask" ] && (( (16#$mask >> 14) & 1 )) && break  # bit 14: SIGTERM (15) is caught
    sleep 0.01
  done
  kill -TERM $pid
  set +e; wait $pid; rc=$?; set -e
  [ $rc -eq 0 ] || { cat "$3"; fail "$1 stopped while loading exited with $rc"; }
}
stop_while_loading tern-worker "$WORK/load.yaml" "$WORK/load.out"
! grep -q "rows, .* features" "$WORK/load.out" ||
  { cat "$WORK/load.out"; fail "the stopped worker loaded its data to the end"; }
sleep 1  # a join that went out would have reached the coordinator by now
if grep -q "worker loading joined" "$WORK/coord.out"; then
  cat "$WORK/load.out"; fail "the coordinator admitted a worker stopped while loading its data"
fi
grep -q "stopped while loading the data: not joining" "$WORK/load.out" ||
  { cat "$WORK/load.out"; fail "the worker did not say it was stopped while loading"; }
# The control: unstopped, the same worker says it loaded its shard in the words looked for above.
cat > "$WORK/loaded.yaml" <<YAML
name: loaded
coordinator: tcp://127.0.0.1:1
data: {format: csv, path: $WORK/big.csv}
security: none
YAML
"$BIN/tern-worker" --config "$WORK/loaded.yaml" > "$WORK/loaded.out" 2>&1 &
DPID=$!; PIDS+=($DPID)
wait_for_line "$WORK/loaded.out" "shard 0/1: 1000000 rows, 8 features" \
  "the control worker did not log its loaded shard as expected"
kill -TERM $DPID
set +e; wait $DPID; set -e

# A coordinator stopped while its test data loads stops at once as well, before it binds.
mkdir -p "$WORK/cl"
cat > "$WORK/cl/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/cl/endpoint
min_workers: 1
max_rounds: 5
model: {kind: softmax, classes: 10}
test_data: {format: csv, path: $WORK/big.csv}
security: none
YAML
stop_while_loading tern-coordinator "$WORK/cl/coord.yaml" "$WORK/cl/coord.out"
grep -q "stopped while loading the test data: exiting" "$WORK/cl/coord.out" ||
  { cat "$WORK/cl/coord.out"; fail "the coordinator did not say it was stopped while loading"; }
! grep -q "test set:" "$WORK/cl/coord.out" || fail "the stopped coordinator loaded its test data to the end"
[ ! -e "$WORK/cl/endpoint" ] || fail "the coordinator stopped while loading bound its socket"
# The control: a worker that does join is logged in the words the check above looks for.
write_worker "$WORK/control.yaml" "$EP" 2
"$BIN/tern-worker" --config "$WORK/control.yaml" --name control --shard-index 0 \
  > "$WORK/control.out" 2>&1 &
KPID=$!; PIDS+=($KPID)
wait_for_line "$WORK/coord.out" "worker control joined" \
  "the control worker's join was not logged as expected"
kill -TERM $KPID
set +e; wait $KPID; set -e
kill -TERM $CPID
wait $CPID || fail "coordinator exited with $?"
echo "PASS: stopped before training, exit 0, final line rounds=0"
