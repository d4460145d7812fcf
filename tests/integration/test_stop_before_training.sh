#!/usr/bin/env bash
# SIGTERM before any round: the coordinator exits 0 and its last line is the summary of nothing
# (rounds=0); a worker stopped while its data loads or while it waits for a coordinator exits 0.
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 30 2
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
kill -TERM $CPID
set +e; wait $CPID; rc=$?; set -e
[ $rc -eq 0 ] || { cat "$WORK/coord.err"; fail "coordinator exited with $rc"; }
last=$(tail -n 1 "$WORK/coord.out")
[ "$last" = "final: rounds=0 test_accuracy=0.0000 upload_bytes=0 full_bytes=0" ] ||
  fail "last line: '$last'"

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
echo "PASS: stopped before training, exit 0, final line rounds=0"
