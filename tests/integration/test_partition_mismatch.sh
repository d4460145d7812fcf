#!/usr/bin/env bash
# Workers that cut their shards from different partitions are not trained together: with one
# worker of a 2-shard partition live, a worker configured with data.shard.total 3 is refused
# (PARTITION_MISMATCH), says why and waits to ask again (not admitted); the run trains with the
# right second worker, every replica equal to the model.
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 20 2
start_coordinator
write_worker "$WORK/worker.yaml" "$EP" 2
start_worker 0 w0
for _ in $(seq 1 300); do grep -q "worker w0 joined" "$WORK/coord.out" && break; sleep 0.1; done
grep -q "worker w0 joined" "$WORK/coord.out" || fail "w0 did not join"

sed 's/total: 2/total: 3/' "$WORK/worker.yaml" > "$WORK/odd.yaml"
"$BIN/tern-worker" --config "$WORK/odd.yaml" --name odd --shard-index 1 \
  > "$WORK/odd.out" 2> "$WORK/odd.err" &
OPID=$!; PIDS+=($OPID)
for _ in $(seq 1 300); do
  grep -q "refused this worker's shard" "$WORK/odd.out" "$WORK/odd.err" && break
  sleep 0.1
done
grep -q "shard 1 of 3 is cut from another partition than live worker 'w0''s shard 0 of 2" \
  "$WORK/odd.out" "$WORK/odd.err" || { cat "$WORK/odd.out" "$WORK/odd.err"; fail "the mismatched worker did not say why"; }
! grep -q "worker odd joined" "$WORK/coord.out" || fail "the mismatched worker was admitted"
kill -0 "$OPID" || fail "the mismatched worker stopped: it should wait and ask again"
# Its join was answered: a stop does not wait out the 3 s grace for a welcome.
T0=$(date +%s.%N)
kill -TERM "$OPID"
wait "$OPID" || fail "the waiting worker exited with $? on SIGTERM"
T1=$(date +%s.%N)
python3 -c "import sys; assert float(sys.argv[2]) - float(sys.argv[1]) < 2.0, 'slow stop'" "$T0" "$T1" ||
  fail "a worker whose join was refused waited for a welcome on its stop"
PIDS=("${PIDS[@]:0:2}")   # the coordinator and w0: finish_cluster waits for these and w1

start_worker 1 w1
finish_cluster 2 20
python3 - "$WORK/metrics.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 20 and all(int(r["participants"]) == 2 for r in rows), rows[:2]
PY
echo "PASS: a worker of another partition is refused and waits; the run trains with its own"
