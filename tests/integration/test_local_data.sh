#!/usr/bin/env bash
# Device-local data and federated evaluation (docs/python.md): four workers, each with its own CSV
# file of 1,000 / 2,000 / 3,000 / 4,000 rows (data.mode local) and its own held-out rows
# (data.eval), are all admitted (no partition_mismatch), with shares 0.1 / 0.2 / 0.3 / 0.4 in
# /status; the coordinator has no test set, and its federated accuracy equals the row-weighted
# mean recomputed here from the per-worker evaluations /status shows; stopped, its final line
# reports it.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import numpy' 2> /dev/null || { echo "skip: /usr/bin/python3 has no numpy"; exit 77; }

"$PY" "$SRC/tests/integration/local_data.py" "$WORK"

cat > "$WORK/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/endpoint
min_workers: 4
max_rounds: 1000000
round_deadline_seconds: 5
heartbeat_seconds: 0.5
worker_patience_seconds: 5
eval_every: 5
model: {kind: softmax, features: 20, classes: 3}
optimizer: {lr: 0.3}
training: {batch_size: 32, seed: 3}
allocation: {method: uniform, mean_ratio: 0.5}
http: {bind: "127.0.0.1:0", url_file: $WORK/coord.url}
logging: {level: info}
security: none
YAML
start_coordinator
for i in 0 1 2 3; do
  cat > "$WORK/w$i.yaml" <<YAML
name: w$i
coordinator: $EP
data:
  mode: local
  format: csv
  path: $WORK/d$i.csv
  label_column: label
  eval: {format: csv, path: $WORK/e$i.csv, label_column: label}
compression: {name: topk}
heartbeat_seconds: 0.5
coordinator_patience_seconds: 5
security: none
YAML
  "$BIN/tern-worker" --config "$WORK/w$i.yaml" > "$WORK/w$i.out" 2> "$WORK/w$i.err" &
  PIDS+=($!)
done
wait_for_file "$WORK/coord.url"

# The shares and the federated accuracy against its recomputation, once a federated evaluation
# is in; "ok" or what differs.
check_status() {
  "$PY" - "$(cat "$WORK/coord.url")/status" <<'PY'
import json, sys, urllib.request
s = json.load(urllib.request.urlopen(sys.argv[1], timeout=5))
fed = s.get("federated")
if not fed:
    print("wait"); sys.exit()
shares = sorted((w["name"], round(w["share"], 6)) for w in s["workers"])
want = [("w0", 0.1), ("w1", 0.2), ("w2", 0.3), ("w3", 0.4)]
if shares != want:
    print(f"shares {shares} != {want}"); sys.exit()
ev = [w["evaluation"] for w in s["workers"] if w["evaluation"] and w["evaluation"]["round"] == fed["round"]]
rows = sum(e["rows"] for e in ev)
mean = sum(e["accuracy"] * e["rows"] for e in ev) / rows
if rows != fed["rows"] or abs(mean - fed["accuracy"]) > 1e-9:
    print(f"federated {fed} != recomputed {mean} over {rows} rows"); sys.exit()
if abs(s["test_accuracy"] - fed["accuracy"]) > 1e-9:
    print(f"test_accuracy {s['test_accuracy']} != federated {fed['accuracy']}"); sys.exit()
print("ok", len(ev), rows, fed["accuracy"])
PY
}
verdict=wait
for _ in $(seq 1 300); do
  verdict=$(check_status 2> "$WORK/check.err" || echo wait)
  case "$verdict" in ok*|shares*|federated*|test_accuracy*) break;; esac
  sleep 0.1
done
case "$verdict" in ok*) echo "status: $verdict";; *) fail "status: $verdict";; esac
# A stop ends the run with its final line (the federated accuracy of the last evaluation).
kill -TERM "$CPID"
wait "$CPID" || fail "coordinator exited with $?"
grep -q "partition_mismatch" "$WORK"/w*.err "$WORK/coord.err" && fail "a worker was refused for its partition"
line=$(grep '^final:' "$WORK/coord.out") || fail "no final line"
echo "$line"
acc=$(echo "$line" | sed -n 's/.*test_accuracy=\([0-9.]*\).*/\1/p')
"$PY" -c "import sys; sys.exit(0 if float('$acc') > 0.7 else 1)" || fail "federated accuracy $acc"
echo "PASS"
