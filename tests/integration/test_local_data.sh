#!/usr/bin/env bash
# data.mode local: each worker trains on all the rows of its own file. Two workers with different
# files (other rows, other labels) are admitted together (no partition fingerprint to compare,
# where two shards cut from different data sets would be refused), each loads its file whole and
# its held-out rows (data.eval), and the run trains with both.
source "$(dirname "$0")/lib.sh"

# make_csv FILE ROWS SEED LABELS: ROWS rows of 8 features, labels in [0, LABELS).
make_csv() {
  awk -v rows="$2" -v seed="$3" -v labels="$4" 'BEGIN {
    srand(seed); print "a,b,c,d,e,f,g,h,y"
    for (i = 0; i < rows; i++) {
      y = int(rand() * labels); line = ""
      for (j = 0; j < 8; j++) line = line sprintf("%.3f,", (j == y % 8 ? 2 : 0) + rand())
      print line y
    }
  }' > "$1"
}
make_csv "$WORK/a.csv" 300 1 4
make_csv "$WORK/b.csv" 500 2 6
make_csv "$WORK/eval.csv" 100 3 6
make_csv "$WORK/test.csv" 400 4 6

cat > "$WORK/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/endpoint
min_workers: 2
max_rounds: 30
round_deadline_seconds: 2
heartbeat_seconds: 0.5
worker_patience_seconds: 3
model: {kind: softmax, features: 8, classes: 6}
optimizer: {lr: 0.5}
training: {batch_size: 32, seed: 3}
allocation: {method: uniform, mean_ratio: 0.5}
test_data: {format: csv, path: $WORK/test.csv}
logging: {level: info}
security: none
YAML
start_coordinator
for w in a b; do
  cat > "$WORK/$w.yaml" <<YAML
name: $w
coordinator: $EP
data:
  mode: local
  format: csv
  path: $WORK/$w.csv
  eval: {format: csv, path: $WORK/eval.csv}
compression: {name: topk, error_feedback: true}
logging: {level: info}
security: none
YAML
  "$BIN/tern-worker" --config "$WORK/$w.yaml" > "$WORK/$w.out" 2> "$WORK/$w.err" &
  PIDS+=($!)
done
for _ in $(seq 1 600); do kill -0 "$CPID" 2> /dev/null || break; sleep 0.1; done
kill -0 "$CPID" 2> /dev/null && { tail -n 5 "$WORK"/*.out; fail "the run did not end within 60 s"; }
wait "$CPID" || fail "coordinator exited with $?"
grep -q "^final: rounds=30 " "$WORK/coord.out" || { tail -n 20 "$WORK/coord.out"; fail "the run did not finish"; }
grep -q "local data: 300 rows, 8 features" "$WORK/a.out" || fail "worker a did not load its file whole"
grep -q "local data: 500 rows, 8 features" "$WORK/b.out" || fail "worker b did not load its file whole"
grep -q "held-out data: 100 rows" "$WORK/a.out" || fail "worker a did not load data.eval"
! grep -qi "partition" "$WORK/a.out" "$WORK/b.out" "$WORK/coord.out" || fail "a partition check refused local data"
python3 - "$WORK/metrics.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert all(int(r["participants"]) == 2 for r in rows), [r["participants"] for r in rows]
PY
echo "PASS: workers with their own files trained together, each on all its rows"
