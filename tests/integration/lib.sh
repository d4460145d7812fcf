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
heartbeat_seconds: 0.5
coordinator_patience_seconds: 5
logging: {level: info}
security: ${SECURITY:-none}
YAML
}

wait_for_file() {
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  fail "timed out waiting for $1"
}
