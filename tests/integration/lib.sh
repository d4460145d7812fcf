# Shared helpers for the integration tests. Usage: source lib.sh BIN_DIR SRC_DIR
set -euo pipefail
BIN="$1"
SRC="$2"
WORK="$(mktemp -d /tmp/tern-it.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do kill -9 "$p" 2>/dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
FMNIST=/usr/share/datasets/fashion-mnist

# write_coordinator FILE ROUNDS MIN_WORKERS [extra yaml]
write_coordinator() {
  cat > "$1" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/endpoint
min_workers: $3
max_rounds: $2
round_deadline_seconds: 2
heartbeat_seconds: 0.5
worker_patience_seconds: 3
eval_every: 5
model: {kind: softmax, classes: 10}
optimizer: {lr: 0.5}
training: {batch_size: 64, seed: 3}
allocation: {method: uniform, mean_ratio: 0.05}
test_data:
  format: idx
  images: $FMNIST/t10k-images-idx3-ubyte.gz
  labels: $FMNIST/t10k-labels-idx1-ubyte.gz
logging: {level: info}
security: ${SECURITY:-none}
${4:-}
YAML
}

# write_worker FILE ENDPOINT TOTAL
write_worker() {
  cat > "$1" <<YAML
name: w
coordinator: $2
data:
  format: idx
  images: $FMNIST/train-images-idx3-ubyte.gz
  labels: $FMNIST/train-labels-idx1-ubyte.gz
  shard: {index: 0, total: $3}
  partition: {dirichlet_alpha: 0.5, seed: 3}
compression: {name: topk, error_feedback: true}
tuning: {method: fixed}   # pushes at the cap: runs comparable bit for bit (test_cluster_cat runs CAT)
heartbeat_seconds: 0.5
coordinator_patience_seconds: 5
logging: {level: info}
security: ${SECURITY:-none}
YAML
}

# wait_for_line FILE PATTERN WHAT: until grep finds PATTERN in FILE (60 s at most, then FILE is
# shown and the test fails with WHAT).
wait_for_line() {
  for _ in $(seq 1 600); do grep -q "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  cat "$1" || true
  fail "$3"
}

wait_for_file() {
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  fail "timed out waiting for $1"
}

# start_coordinator: runs tern-coordinator on $WORK/coord.yaml with its metrics CSV in
# $WORK/metrics.csv and output in $WORK/coord.{out,err}; sets CPID and, once it has bound, EP.
start_coordinator() {
  "$BIN/tern-coordinator" --config "$WORK/coord.yaml" --metrics-csv "$WORK/metrics.csv" \
    > "$WORK/coord.out" 2> "$WORK/coord.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  EP=$(cat "$WORK/endpoint")
}

# start_worker INDEX OUTPUT-PREFIX: a worker on $WORK/worker.yaml named wINDEX with shard INDEX;
# sets WPID.
start_worker() {
  "$BIN/tern-worker" --config "$WORK/worker.yaml" --name "w$1" --shard-index "$1" \
    > "$WORK/$2.out" 2> "$WORK/$2.err" &
  WPID=$!; PIDS+=($WPID)
}

# check_replicas N: the coordinator printed its final line and workers w0..w(N-1) each ended
# with a replica equal to its model; sets REF to the model's checksum.
check_replicas() {
  grep -q '^final: rounds=' "$WORK/coord.out" || { cat "$WORK/coord.out" "$WORK/coord.err"; fail "no final line"; }
  REF=$(grep '^model:' "$WORK/coord.out" | sed 's/.*checksum=//' || true)
  [ -n "$REF" ] || fail "the coordinator printed no model checksum"
  for i in $(seq 0 $(($1 - 1))); do
    got=$(grep '^replica:' "$WORK/w$i.out" | sed 's/.*checksum=//' || true)
    [ "$got" = "$REF" ] || fail "worker $i replica checksum $got != coordinator $REF"
  done
}

# finish_cluster N ROUNDS: the coordinator and every worker started so far exit 0, the
# coordinator trained ROUNDS rounds, and workers w0..w(N-1) end with its model (check_replicas).
finish_cluster() {
  wait "$CPID" || fail "coordinator exited with $?"
  for p in "${PIDS[@]:1}"; do wait "$p" || fail "a worker exited non-zero"; done
  grep -q "^final: rounds=$2 " "$WORK/coord.out" || { cat "$WORK/coord.out" "$WORK/coord.err"; fail "no final line for $2 rounds"; }
  check_replicas "$1"
}

# use_fake_trainer: skips the test (77) without Debian's python3 modules or protoc; otherwise
# sets PY and FAKE (tests/integration/fake_trainer.py with its protobuf module) and writes the
# fake trainer's model file to $WORK/model.bin.
use_fake_trainer() {
  PY=/usr/bin/python3
  "$PY" -c 'import zmq, numpy, google.protobuf' 2> /dev/null || { echo "SKIP: $PY lacks zmq, numpy or protobuf"; exit 77; }
  command -v protoc > /dev/null || { echo "SKIP: no protoc"; exit 77; }
  protoc --proto_path="$SRC/proto" --python_out="$WORK" "$SRC/proto/trainer.proto"
  FAKE=("$PY" "$SRC/tests/integration/fake_trainer.py" --pb-dir "$WORK")
  "${FAKE[@]}" --write-model "$WORK/model.bin"
}

# write_ext_coordinator MIN_WORKERS ROUNDS DEADLINE [extra yaml]: $WORK/coord.yaml for the fake
# trainer's model ($WORK/model.bin, from use_fake_trainer).
write_ext_coordinator() {
  cat > "$WORK/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/endpoint
min_workers: $1
max_rounds: $2
round_deadline_seconds: $3
heartbeat_seconds: 0.5
worker_patience_seconds: 5
model: {kind: external, file: $WORK/model.bin}
optimizer: {lr: 0.5}
training: {batch_size: 32, seed: 3}
allocation: {method: uniform, mean_ratio: 0.5}
logging: {level: info}
security: none
${4:-}
YAML
}

# start_trainer NAME SEED [fake_trainer.py options]: NAME's fake trainer at ipc://$WORK/NAME.sock,
# its output appended to $WORK/NAME-trainer.log; sets TPID.
start_trainer() {
  local name=$1 seed=$2
  shift 2
  "${FAKE[@]}" --endpoint "ipc://$WORK/$name.sock" --seed "$seed" "$@" >> "$WORK/$name-trainer.log" 2>&1 &
  TPID=$!; PIDS+=($TPID)
}

# start_ext_worker NAME [TIMEOUT]: a worker whose trainer is NAME's (trainer.timeout_seconds
# TIMEOUT; none: the round deadline's), output in $WORK/NAME.{out,err}, /status URL in NAME.url.
start_ext_worker() {
  cat > "$WORK/$1.yaml" <<YAML
name: $1
coordinator: $EP
trainer: {kind: external, endpoint: ipc://$WORK/$1.sock${2:+, timeout_seconds: $2}}
compression: {name: topk, error_feedback: true}
heartbeat_seconds: 0.5
coordinator_patience_seconds: 5
logging: {level: info}
security: none
YAML
  "$BIN/tern-worker" --config "$WORK/$1.yaml" --http 127.0.0.1:0 --http-url-file "$WORK/$1.url" \
    > "$WORK/$1.out" 2> "$WORK/$1.err" &
  PIDS+=($!)
}
