#!/usr/bin/env bash
# kill -9 one of three workers mid-run: the coordinator keeps running, closes rounds at the
# deadline, marks the worker gone, and finishes training with the other two.
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 60 3
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" --metrics-csv "$WORK/metrics.csv" \
  > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
EP=$(cat "$WORK/endpoint")
write_worker "$WORK/worker.yaml" "$EP" 3
for i in 0 1 2; do
  "$BIN/tern-worker" --config "$WORK/worker.yaml" --name "w$i" --shard-index $i \
    > "$WORK/w$i.out" 2> "$WORK/w$i.err" &
  PIDS+=($!)
done
VICTIM=${PIDS[3]}
for _ in $(seq 1 1200); do
  [ -s "$WORK/metrics.csv" ] && [ "$(wc -l < "$WORK/metrics.csv")" -ge 6 ] && break
  sleep 0.05
done
kill -9 "$VICTIM"
wait $CPID || fail "coordinator exited with $?"
grep -q '^final: rounds=60 ' "$WORK/coord.out" || { tail -20 "$WORK/coord.err"; fail "coordinator did not finish"; }
cat "$WORK/coord.out" "$WORK/coord.err" | grep -q "marked gone" || fail "the killed worker was never marked gone"
python3 - "$WORK/metrics.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
parts = [int(r["participants"]) for r in rows]
assert parts[0] == 3 and parts[-1] == 2, parts
print("participants over time:", parts[:8], "...", parts[-3:])
PY
echo "PASS: coordinator survived a killed worker"
