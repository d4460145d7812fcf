#!/usr/bin/env bash
# The NumPy-only trainer of examples/numpy (softmax regression through tern's Python API, no
# torch) trains four devices' own rows to the federated accuracy the built-in softmax reaches on
# the same rows under the same settings, within 0.01 (docs/python.md).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import numpy, zmq, google.protobuf' 2> /dev/null ||
  { echo "skip: /usr/bin/python3 lacks numpy, zmq or protobuf"; exit 77; }
export PYTHONPATH="$SRC/python"
"$PY" "$SRC/tests/integration/local_data.py" "$WORK" 4

# coordinator RUN MODEL_YAML: the coordinator of run RUN ($WORK/RUN) on its own endpoint file.
coordinator() {
  mkdir -p "$WORK/$1"
  cat > "$WORK/$1/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/$1/endpoint
min_workers: 4
max_rounds: 300
round_deadline_seconds: 10
heartbeat_seconds: 0.5
worker_patience_seconds: 10
eval_every: 50
model: $2
optimizer: {lr: 0.2}
training: {batch_size: 32, seed: 3}
allocation: {method: uniform, mean_ratio: 0.5}
logging: {level: info}
security: none
YAML
  "$BIN/tern-coordinator" --config "$WORK/$1/coord.yaml" > "$WORK/$1/coord.out" \
    2> "$WORK/$1/coord.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/$1/endpoint"
}

# worker RUN I DATA_YAML: worker I of run RUN.
worker() {
  cat > "$WORK/$1/w$2.yaml" <<YAML
name: w$2
coordinator: $(cat "$WORK/$1/endpoint")
$3
compression: {name: topk}
heartbeat_seconds: 0.5
coordinator_patience_seconds: 10
security: none
YAML
  "$BIN/tern-worker" --config "$WORK/$1/w$2.yaml" > "$WORK/$1/w$2.out" 2> "$WORK/$1/w$2.err" &
  PIDS+=($!)
}

# accuracy RUN: the final line's test_accuracy (after finished RUN).
finished() {
  wait "$CPID" || { cat "$WORK/$1/coord.err"; fail "$1: the coordinator exited with $?"; }
}
accuracy() {
  grep '^final:' "$WORK/$1/coord.out" | sed -n 's/.*rounds=300 test_accuracy=\([0-9.]*\) .*/\1/p'
}

coordinator builtin "{kind: softmax, features: 20, classes: 3}"
for i in 0 1 2 3; do
  worker builtin $i "data: {mode: local, format: csv, path: $WORK/d$i.csv, label_column: label,
  eval: {format: csv, path: $WORK/e$i.csv, label_column: label}}"
done
finished builtin
builtin=$(accuracy builtin)

"$PY" "$SRC/examples/numpy/softmax.py" "$WORK/d0.csv" "$WORK/e0.csv" 3 --write-model "$WORK/model.tern"
coordinator numpy "{kind: external, file: $WORK/model.tern}"
for i in 0 1 2 3; do
  worker numpy $i "trainer: {kind: external, endpoint: 'ipc://$WORK/numpy/t$i.sock'}"
  "$PY" "$SRC/examples/numpy/softmax.py" "$WORK/d$i.csv" "$WORK/e$i.csv" 3 \
    "ipc://$WORK/numpy/t$i.sock" > "$WORK/numpy/t$i.out" 2>&1 &
  PIDS+=($!)
done
finished numpy
numpy=$(accuracy numpy)
echo "federated accuracy after 300 rounds: built-in $builtin, NumPy trainer $numpy"
[ -n "$builtin" ] && [ -n "$numpy" ] || fail "a run printed no final accuracy"
"$PY" -c "import sys; sys.exit(0 if abs($builtin - $numpy) <= 0.01 and $builtin > 0.8 else 1)" ||
  fail "built-in $builtin and NumPy $numpy differ by more than 0.01"
echo "PASS"
