#!/usr/bin/env bash
# One command: a small CNN (train.py) trained by 4 PyTorch trainers, each on its own non-IID
# Fashion-MNIST rows, through 4 tern workers and one coordinator on loopback; ends with the
# coordinator's final line (test_accuracy: the row-weighted mean of the workers' evaluations on
# their own held-out rows). docs/python.md explains each piece.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
out="${TERN_OUT:-out/pytorch}"
rounds="${TERN_ROUNDS:-400}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# Debian's packages: the Python side and the data set (root only; otherwise say what is missing).
need=()
for m in torch:python3-torch zmq:python3-zmq google.protobuf:python3-protobuf numpy:python3-numpy; do
  "$PY" -c "import ${m%%:*}" 2>/dev/null || need+=("${m##*:}")
done
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update && apt-get install -y "${need[@]}"
  else
    echo "run.sh: install first (as root): apt-get install ${need[*]}" >&2
    exit 1
  fi
fi
if [ ! -x build/bin/tern-worker ] || [ ! -x build/bin/tern-coordinator ]; then
  bash deploy/install-deps.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build -j"${TERN_JOBS:-2}" --target tern-coordinator tern-worker
fi
export PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"

"$PY" examples/pytorch/prep.py --out "$out/data"
"$PY" examples/pytorch/train.py --write-model "$out/model.tern"

cat > "$out/coordinator.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $out/endpoint
min_workers: 4
max_rounds: $rounds
eval_every: 25
round_deadline_seconds: 60
heartbeat_seconds: 1
worker_patience_seconds: 60
model: {kind: external, file: $out/model.tern}
optimizer: {lr: 0.1, momentum: 0.5, decay: 0.5, decay_every: 200}
training: {batch_size: 32, local_steps: 10, local_lr: 0.1, seed: 7}
allocation: {method: uniform, mean_ratio: 0.05}
logging: {level: info}
security: none
YAML

pids=()
trainers=()
cleanup() { for p in "${pids[@]:-}" "${trainers[@]:-}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
rm -f "$out/endpoint"
build/bin/tern-coordinator --config "$out/coordinator.yaml" --metrics-csv "$out/metrics.csv" \
  > "$out/coordinator.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [ -s "$out/endpoint" ] && break; sleep 0.1; done
[ -s "$out/endpoint" ] || { cat "$out/coordinator.log" >&2; echo "run.sh: the coordinator did not start" >&2; exit 1; }
endpoint=$(cat "$out/endpoint")

for i in 0 1 2 3; do
  cat > "$out/worker-$i.yaml" <<YAML
name: worker-$i
coordinator: $endpoint
trainer: {kind: external, endpoint: ipc://$out/w$i.sock}
compression: {name: topk, error_feedback: true}
heartbeat_seconds: 1
coordinator_patience_seconds: 60
logging: {level: warn}
security: none
YAML
  build/bin/tern-worker --config "$out/worker-$i.yaml" > "$out/worker-$i.log" 2>&1 &
  pids+=($!)
  "$PY" examples/pytorch/train.py "$out/data/w$i.npz" "ipc://$out/w$i.sock" \
    > "$out/trainer-$i.log" 2>&1 &
  trainers+=($!)
done
echo "run.sh: training $rounds rounds; progress in $out/coordinator.log"
# Until the coordinator ends; a trainer that fails first (a Python error) ends the run with its
# log. One that ends cleanly was told by its worker that training is over.
while kill -0 "${pids[0]}" 2>/dev/null; do
  for i in 0 1 2 3; do
    [ -n "${trainers[$i]}" ] || continue
    if ! kill -0 "${trainers[$i]}" 2>/dev/null; then
      trc=0
      wait "${trainers[$i]}" || trc=$?
      trainers[i]=""
      [ "$trc" = 0 ] && continue
      tail -20 "$out/trainer-$i.log" >&2
      echo "run.sh: trainer $i failed (status $trc) before the coordinator ended" >&2
      exit 1
    fi
  done
  sleep 1
done
rc=0
wait "${pids[0]}" || rc=$?
grep '^final:' "$out/coordinator.log" | tail -1 || { tail -20 "$out/coordinator.log" >&2; exit 1; }
exit "$rc"
