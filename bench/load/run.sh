#!/usr/bin/env bash
# Many connected workers against one coordinator on loopback: tern-loadgen runs N workers in one
# process for R rounds; this measures the coordinator's CPU per worker per round in the steady
# state (from its /proc CPU times between the end of round 2 and the last round) and its peak RSS,
# and checks that every round closed with all N workers. It also reports the coordinator's minor
# page faults per round over the same rounds (fresh pages it touches: memory churn) against the
# model's pages. MODEL sets the model (default softmax on Fashion-MNIST, 7,850 parameters; e.g.
# MODEL="{kind: mlp, hidden: 1270, classes: 10}" for about 1e6).
# Usage: [MODEL=...] bench/load/run.sh BIN_DIR [WORKERS=1000] [ROUNDS=100]
set -euo pipefail
BIN="$1"; N="${2:-1000}"; ROUNDS="${3:-100}"
MODEL="${MODEL:-{kind: softmax, classes: 10\}}"
FMNIST=/usr/share/datasets/fashion-mnist
WORK="$(mktemp -d /tmp/tern-load.XXXXXX)"
CPID=""
cleanup() { [ -n "$CPID" ] && kill -9 "$CPID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"
cat > "$WORK/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $WORK/endpoint
min_workers: $N
max_workers: $N
max_rounds: $((ROUNDS + 1000))
round_deadline_seconds: 60
heartbeat_seconds: 2
worker_patience_seconds: 60
eval_every: 1000000
model: $MODEL
optimizer: {lr: 0.1}
training: {batch_size: 32, seed: 3}
allocation: {method: uniform, mean_ratio: 0.05}
test_data: {format: idx, images: $FMNIST/t10k-images-idx3-ubyte.gz, labels: $FMNIST/t10k-labels-idx1-ubyte.gz}
logging: {level: warn}
security: none
YAML
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" --metrics-csv "$WORK/metrics.csv" \
  > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!
for _ in $(seq 100); do [ -s "$WORK/endpoint" ] && break; sleep 0.1; done
cat > "$WORK/worker.yaml" <<YAML
name: load
coordinator: $(cat "$WORK/endpoint")
data:
  format: idx
  images: $FMNIST/train-images-idx3-ubyte.gz
  labels: $FMNIST/train-labels-idx1-ubyte.gz
  shard: {index: 0, total: 20}
compression: {name: topk, error_feedback: true}
heartbeat_seconds: 2
coordinator_patience_seconds: 60
logging: {level: error}
security: none
YAML
cpu() { awk '{print $14 + $15}' "/proc/$CPID/stat"; }
faults() { awk '{print $10}' "/proc/$CPID/stat"; }
rows() { [ -f "$WORK/metrics.csv" ] && echo $(($(wc -l < "$WORK/metrics.csv") - 1)) || echo 0; }
"$BIN/tern-loadgen" --config "$WORK/worker.yaml" --workers "$N" --rounds "$ROUNDS" > "$WORK/load.out" &
LPID=$!
while [ "$(rows)" -lt 2 ] && kill -0 $LPID 2>/dev/null; do sleep 0.05; done
cpu0=$(cpu); rows0=$(rows); faults0=$(faults)
wait $LPID
cpu1=$(cpu); rows1=$(rows); faults1=$(faults)
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$CPID/status")
tick=$(getconf CLK_TCK)
cat "$WORK/load.out"
python3 - "$WORK/metrics.csv" "$N" "$rows0" "$rows1" "$cpu0" "$cpu1" "$tick" "$hwm" \
  "$faults0" "$faults1" <<'PY'
import csv, sys
path, n, r0, r1, c0, c1, tick, hwm, f0, f1 = sys.argv[1], *map(int, sys.argv[2:])
rows = list(csv.DictReader(open(path)))[:r1]
# full_bytes counts 4 bytes a parameter for every push: the model's size.
params = int(rows[-1]["full_bytes"]) / max(1, 4 * sum(int(r["participants"]) for r in rows))
short = [r["round"] for r in rows if int(r["participants"]) != n]
rounds = r1 - r0
us = (c1 - c0) / tick * 1e6 / max(1, rounds * n)
print(f"load: workers={n} rounds={len(rows)} rounds_short_of_all={len(short)} "
      f"coordinator_cpu_us_per_worker_round={us:.1f} (over {rounds} rounds) "
      f"coordinator_peak_rss_mb={hwm / 1024:.1f} "
      f"coordinator_minor_faults_per_round={(f1 - f0) / max(1, rounds):.1f} "
      f"model_pages={params * 4 / 4096:.0f}")
assert not short, f"rounds without every worker: {short[:10]}"
PY
