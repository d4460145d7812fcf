#!/usr/bin/env bash
# SIGTERM before any round: the coordinator exits 0 and its last line is the summary of nothing
# (rounds=0); a worker stopped while its data loads or while it waits for a coordinator exits 0.
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
[ "$last" = "final: rounds=0 test_accuracy=none upload_bytes=0 full_bytes=0" ] ||
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

# A worker stopped while its data loads does not join, so the coordinator never admits, and then
# waits for, a worker that is already gone. The stop comes as soon as the worker can take it (its
# SIGTERM handler is in place, the load under way); a million CSV rows take far longer to load.
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
"$BIN/tern-worker" --config "$WORK/load.yaml" > "$WORK/load.out" 2>&1 &
LPID=$!; PIDS+=($LPID)
for _ in $(seq 1 1000); do
  mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$LPID/status" 2> /dev/null || true)
  [ -n "$mask" ] && (( (16#$mask >> 14) & 1 )) && break  # bit 14: SIGTERM (15) is caught
  sleep 0.01
done
kill -TERM $LPID
set +e; wait $LPID; rc=$?; set -e
[ $rc -eq 0 ] || { cat "$WORK/load.out"; fail "worker stopped while loading exited with $rc"; }
sleep 1  # a join that went out would have reached the coordinator by now
if grep -q "worker loading joined" "$WORK/coord.out"; then
  cat "$WORK/load.out"; fail "the coordinator admitted a worker stopped while loading its data"
fi
grep -q "stopped while loading the data: not joining" "$WORK/load.out" ||
  { cat "$WORK/load.out"; fail "the worker did not say it was stopped while loading"; }
# A second SIGTERM while the first is honoured (the load goes on to its end) ends the worker at
# once, as SIGTERM's default would.
"$BIN/tern-worker" --config "$WORK/load.yaml" --name twice > "$WORK/twice.out" 2>&1 &
TPID=$!; PIDS+=($TPID)
for _ in $(seq 1 1000); do
  mask=$(awk '/^SigCgt:/ { print $2 }' "/proc/$TPID/status" 2> /dev/null || true)
  [ -n "$mask" ] && (( (16#$mask >> 14) & 1 )) && break
  sleep 0.01
done
kill -TERM $TPID
sleep 0.1
kill -TERM $TPID 2> /dev/null || true
T0=$(date +%s.%N)
set +e; wait $TPID; rc=$?; set -e
T1=$(date +%s.%N)
# (A million rows take seconds to load: the second signal comes well before the load ends.)
[ $rc -eq 143 ] || { cat "$WORK/twice.out"; fail "a second SIGTERM while loading: exit $rc, not 143"; }
python3 -c "import sys; assert float(sys.argv[2]) - float(sys.argv[1]) < 1.0" "$T0" "$T1" ||
  fail "a second SIGTERM took more than a second to end the worker"
# The control: a worker that does join is logged in the words the check above looks for.
write_worker "$WORK/control.yaml" "$EP" 2
"$BIN/tern-worker" --config "$WORK/control.yaml" --name control --shard-index 0 \
  > "$WORK/control.out" 2>&1 &
KPID=$!; PIDS+=($KPID)
for _ in $(seq 1 600); do grep -q "worker control joined" "$WORK/coord.out" && break; sleep 0.1; done
grep -q "worker control joined" "$WORK/coord.out" ||
  { cat "$WORK/coord.out"; fail "the control worker's join was not logged as expected"; }
kill -TERM $KPID
set +e; wait $KPID; set -e
kill -TERM $CPID
wait $CPID || fail "coordinator exited with $?"
echo "PASS: stopped before training, exit 0, final line rounds=0"
