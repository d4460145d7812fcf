#!/usr/bin/env bash
# Time to a target accuracy over a fleet of shaped links: the real tern-coordinator and a
# tern-worker daemon per link of the fleet (8 in fleets A and B), each worker in its own network namespace with its uplink and downlink
# shaped by tbf, trained by each method on each fleet (docs/fleet.md).
#
# Usage (as root): bench/fleet/run.sh [--quick] --csv FILE [--plot FILE.png]
#   --quick   one seed (instead of 3), softmax only (instead of softmax and the CNN), both
#             fleets, all four methods
#   --csv     the result, one row per run:
#             fleet,model,method,seed,seconds_to_target,rounds_to_target,upload_bytes,
#             download_bytes,final_accuracy (the evaluations go to FILE_curves.csv, FILE
#             less its .csv)
#   --plot    test accuracy against wall-clock, one panel per fleet and model, a line per method
# Environment: BIN (build/bin), DATA (/usr/share/datasets/fashion-mnist), FLEETS ("A B"; each
#   A, B or the path of a fleet file: your own links and partition, bench/fleet/fleets.py),
#   METHODS ("fp32 topk1 topk10 tern"), MODELS ("softmax" quick, "softmax cnn" full),
#   SEEDS ("1" quick, "1 2 3" full), TARGET (0.80) and CNN_TARGET (0.88), MAX_ROUNDS (2000;
#   the CNN 1000) and RUN_SECONDS (150 quick, 600 full; the CNN 1800): each run's caps (a run
#   that meets neither the target nor a cap is stopped and recorded with an empty
#   seconds_to_target). The CNN is examples/pytorch's, a PyTorch trainer beside each worker
#   (python3-torch) on the rows the fleet's partition gives it, evaluated federated.
#   KEEP=1 keeps the runs' configurations, logs and metrics (the directory is printed).
# Exit status: 0 done, 77 not root or no namespaces/tc/tbf, 1 a failure, 2 a usage error.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "$HERE/../.." && pwd)"
BIN="${BIN:-$SRC/build/bin}"
DATA="${DATA:-/usr/share/datasets/fashion-mnist}"
PY=/usr/bin/python3

usage() { sed -n '6,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
quick=0 csv_out="" plot_out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --csv) [ $# -ge 2 ] || usage; csv_out="$2"; shift ;;
    --plot) [ $# -ge 2 ] || usage; plot_out="$2"; shift ;;
    -h | --help) usage 0 ;;
    *) echo "run.sh: unknown argument '$1'" >&2; usage ;;
  esac
  shift
done
[ -n "$csv_out" ] || usage
# Absolute paths (the daemons run in their run's directory); left as given where they do not exist.
absolute() { (cd "$(dirname "$1")" 2> /dev/null && echo "$(pwd)/$(basename "$1")") || echo "$1"; }
csv_out=$(absolute "$csv_out")
[ -z "$plot_out" ] || plot_out=$(absolute "$plot_out")
BIN=$(absolute "$BIN")
DATA=$(absolute "$DATA")
if [ "$quick" = 1 ]; then
  SEEDS="${SEEDS:-1}" RUN_SECONDS="${RUN_SECONDS:-150}" MODELS="${MODELS:-softmax}"
else
  SEEDS="${SEEDS:-1 2 3}" RUN_SECONDS="${RUN_SECONDS:-600}" MODELS="${MODELS:-softmax cnn}"
fi
CNN_TARGET="${CNN_TARGET:-0.88}"
CNN_MAX_ROUNDS="${CNN_MAX_ROUNDS:-1000}"
CNN_RUN_SECONDS="${CNN_RUN_SECONDS:-1800}"
FLEETS="${FLEETS:-A B}"
METHODS="${METHODS:-fp32 topk1 topk10 tern}"
TARGET="${TARGET:-0.80}"
MAX_ROUNDS="${MAX_ROUNDS:-2000}"

if [ "$(id -u)" != 0 ]; then echo "run.sh: needs root (network namespaces and tc)" >&2; exit 77; fi
for tool in ip tc; do
  command -v "$tool" > /dev/null || { echo "run.sh: '$tool' (iproute2) not found" >&2; exit 77; }
done
for b in tern-coordinator tern-worker; do
  [ -x "$BIN/$b" ] || { echo "run.sh: $BIN/$b not built (set BIN)" >&2; exit 1; }
done
for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz \
  t10k-labels-idx1-ubyte.gz; do
  [ -r "$DATA/$f" ] || { echo "run.sh: $DATA/$f missing (deploy/install-deps.sh)" >&2; exit 1; }
done
cnn_check=()
[[ " $MODELS " == *" cnn "* ]] && cnn_check=(--cnn)
# shellcheck disable=SC2086 # FLEETS is a list
"$PY" "$HERE/fleets.py" check "${cnn_check[@]}" $FLEETS || exit 2
for m in $METHODS; do
  [ -r "$HERE/methods/$m.yaml" ] || { echo "run.sh: no method $m in $HERE/methods" >&2; exit 2; }
done
for model in $MODELS; do
  case "$model" in
    softmax) ;;
    cnn) "$PY" -c "import torch, zmq, google.protobuf, numpy" 2> /dev/null || {
      echo "run.sh: the CNN needs python3-torch python3-zmq python3-protobuf python3-numpy" >&2
      exit 1
    } ;;
    *) echo "run.sh: unknown model '$model' (softmax, cnn)" >&2; exit 2 ;;
  esac
done
if [ -n "$plot_out" ] && ! command -v gnuplot > /dev/null; then
  echo "run.sh: --plot needs gnuplot (gnuplot-nox)" >&2; exit 1
fi

source "$SRC/tests/netns/lib.sh" "$BIN" "$SRC"
source "$HERE/fleet_ns.sh"
TRAINERS=()
# Each fleet file is read once: every run reads the copy checked here, whatever happens to the
# file meanwhile.
mkdir "$WORK/fleets"
# shellcheck disable=SC2086 # FLEETS is a list
resolved=$("$PY" "$HERE/fleets.py" resolve "${cnn_check[@]}" "$WORK/fleets" $FLEETS) || exit 2
mapfile -t RESOLVED <<< "$resolved"

# write_coordinator_config DIR MODEL METHOD SEED, write_worker_config DIR MODEL METHOD FLEET SEED
# PORT K (FLEET as FLEETS gives it; $WORKERS is the fleet's): a run's configuration files: the
# shipped file, the method's sections, what every run sets, and for the CNN its model file and
# examples/pytorch's training recipe (local SGD of 10 steps, docs/python.md), a trainer's socket
# in each worker's place of data and no test set.
write_coordinator_config() {
  local model_args=(--set "training.seed=$4"
    --set "test_data={format: idx, images: $DATA/t10k-images-idx3-ubyte.gz,
      labels: $DATA/t10k-labels-idx1-ubyte.gz}")
  [ "$2" = cnn ] && model_args=(--drop test_data
    --set "model={kind: external, file: $WORK/cnn-model.tern}"
    --set "training={batch_size: 32, local_steps: 10, local_lr: 0.1, seed: $4}"
    --set "optimizer={lr: 0.1, momentum: 0.5, decay: 0.5, decay_every: 200}"
    --set "round_deadline_seconds=60" --set "worker_patience_seconds=60")
  "$PY" "$HERE/merge_config.py" "$SRC/deploy/config/coordinator.yaml" "$1/coord.yaml" \
    --method "$HERE/methods/$3.yaml" coordinator \
    --set "bind=tcp://*:0" --set "min_workers=$WORKERS" \
    --set "max_rounds=$(per_model "$2" MAX_ROUNDS)" --set "target_accuracy=$(per_model "$2" TARGET)" \
    "${model_args[@]}"
}
write_worker_config() {
  local dir=$1 model=$2 method=$3 fleet=$4 seed=$5 port=$6 k=$7 partition
  partition=$("$PY" "$HERE/fleets.py" partition "$fleet" "$seed")
  local model_args=(--set "data.images=$DATA/train-images-idx3-ubyte.gz"
    --set "data.labels=$DATA/train-labels-idx1-ubyte.gz"
    --set "data.shard={index: $k, total: $WORKERS}"
    --set "data.partition=$partition")
  [ "$model" = cnn ] && model_args=(--drop data --set "coordinator_patience_seconds=60"
    --set "trainer={kind: external, endpoint: 'ipc://$dir/t$k.sock', timeout_seconds: 120}")
  "$PY" "$HERE/merge_config.py" "$SRC/deploy/config/worker.yaml" "$dir/w$k.yaml" \
    --method "$HERE/methods/$method.yaml" worker \
    --set "name=fleet-$k" --set "coordinator=tcp://$(fleet_addr_c "$k"):$port" "${model_args[@]}"
}
# per_model MODEL NAME: the setting NAME (TARGET, MAX_ROUNDS, RUN_SECONDS) for MODEL: CNN_NAME
# for the CNN.
per_model() {
  local name=$2
  [ "$1" = cnn ] && name="CNN_$2"
  echo "${!name}"
}

# cnn_prepare FLEET SEED: the CNN's model file (once) and each worker's rows as the fleet's
# partition cuts them with SEED (examples/pytorch/prep.py, once per fleet and seed).
cnn_prepare() {
  [ -s "$WORK/cnn-model.tern" ] ||
    PYTHONPATH="$SRC/python" "$PY" "$SRC/examples/pytorch/train.py" \
      --write-model "$WORK/cnn-model.tern"
  [ -d "$WORK/cnn-$FLEET_NAME-$2" ] && return 0
  # shellcheck disable=SC2046 # fleets.py prints the options, split on purpose
  "$PY" "$SRC/examples/pytorch/prep.py" --out "$WORK/cnn-$FLEET_NAME-$2" \
    --workers "$WORKERS" --seed "$2" --data "$DATA" $("$PY" "$HERE/fleets.py" prep "$1") \
    > "$WORK/cnn-$FLEET_NAME-$2.txt"
}

# start_trainers DIR FLEET SEED: worker k's PyTorch trainer serving ipc://DIR/tK.sock on its
# rows, one thread each (the fleet's trainers share the machine); in the host's namespace, as ipc needs none.
start_trainers() {
  local k
  for k in $(seq 0 $((WORKERS - 1))); do
    OMP_NUM_THREADS=1 PYTHONPATH="$SRC/python" "$PY" "$SRC/examples/pytorch/train.py" \
      "$WORK/cnn-$FLEET_NAME-$3/w$k.npz" "ipc://$1/t$k.sock" > "$1/t$k.out" 2>&1 &
    TRAINERS+=($!)
  done
}

# stop_run CPID: the coordinator stopped (SIGTERM: it writes its last row and final line; then
# SIGKILL), then the workers given 15 s to hear the end before they are killed.
stop_run() {
  local p end
  if kill -0 "$1" 2> /dev/null; then
    kill -TERM "$1" 2> /dev/null || true
    end=$((SECONDS + 10))
    while kill -0 "$1" 2> /dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
  fi
  end=$((SECONDS + 15))
  for p in "${PIDS[@]}"; do
    while kill -0 "$p" 2> /dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
    kill -9 "$p" 2> /dev/null || true
    wait "$p" 2> /dev/null || true
  done
  PIDS=()
  for p in "${TRAINERS[@]:-}"; do
    [ -n "$p" ] || continue
    kill "$p" 2> /dev/null || true
    wait "$p" 2> /dev/null || true
  done
  TRAINERS=()
}

# run_one FLEET MODEL METHOD SEED: one training run of the fleet FLEETS names FLEET (its name
# $FLEET_NAME, its $WORKERS workers); appends its row to $RESULT and its evaluations to $CURVES.
run_one() {
  local fleet=$1 model=$2 method=$3 seed=$4 dir="$WORK/$FLEET_NAME-$2-$3-$4" k port end
  local started=$SECONDS
  mkdir -p "$dir"
  write_coordinator_config "$dir" "$model" "$method" "$seed"
  if [ "$model" = cnn ]; then
    cnn_prepare "$fleet" "$seed"
    start_trainers "$dir" "$fleet" "$seed"
  fi
  # Each daemon runs in the run's directory: a relative path a shipped file names (a checkpoint,
  # say) stays there. The subshell execs `ip netns exec`, which execs the daemon: $! is the daemon.
  (cd "$dir" && exec ip netns exec "$NS_C" "$BIN/tern-coordinator" --config "$dir/coord.yaml" \
    --endpoint-file "$dir/endpoint" --metrics-csv "$dir/metrics.csv") \
    > "$dir/coord.out" 2> "$dir/coord.err" &
  local cpid=$!
  PIDS+=("$cpid")
  wait_for_file "$dir/endpoint"
  port=$(sed 's/.*://' "$dir/endpoint")
  for k in $(seq 0 $((WORKERS - 1))); do
    write_worker_config "$dir" "$model" "$method" "$fleet" "$seed" "$port" "$k"
    (cd "$dir" && exec ip netns exec "$(fleet_ns "$k")" "$BIN/tern-worker" \
      --config "$dir/w$k.yaml") \
      > "$dir/w$k.out" 2> "$dir/w$k.err" &
    PIDS+=($!)
  done
  end=$((SECONDS + $(per_model "$model" RUN_SECONDS)))
  while kill -0 "$cpid" 2> /dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.5; done
  local timed_out=0
  kill -0 "$cpid" 2> /dev/null && timed_out=1
  stop_run "$cpid"
  local row
  row=$("$PY" "$HERE/summarize.py" "$dir/metrics.csv" "$(per_model "$model" TARGET)" \
    "$FLEET_NAME" "$model" "$method" "$seed" "$CURVES")
  echo "$row" >> "$RESULT"
  echo "fleet $FLEET_NAME $model $method seed $seed: $row ($((SECONDS - started)) s$(
    [ "$timed_out" = 1 ] && echo ", stopped at $(per_model "$model" RUN_SECONDS) s"), qdisc drops" \
    "$(fleet_drops), load $(cut -d' ' -f1-3 /proc/loadavg))"
  grep -h '^final:' "$dir/coord.out" ||
    echo "  (no final line; $dir/coord.err: $(tail -1 "$dir/coord.err"))"
}

RESULT="$WORK/result.csv"
CURVES="$WORK/curves.csv"
"$PY" "$HERE/summarize.py" --header > "$RESULT"
: > "$CURVES"
most=$(for f in "${RESOLVED[@]}"; do "$PY" "$HERE/fleets.py" workers "$f"; done | sort -n | tail -1)
fleet_setup "$most"
[ "${KEEP:-0}" = 1 ] && echo "runs kept in $WORK"
begin=$SECONDS
for fleet in "${RESOLVED[@]}"; do
  read -r -a links <<< "$("$PY" "$HERE/fleets.py" links "$fleet")"
  WORKERS=$((${#links[@]} / 2))
  FLEET_NAME=$("$PY" "$HERE/fleets.py" name "$fleet")
  for k in $(seq 0 $((WORKERS - 1))); do
    fleet_shape "$k" "${links[$((2 * k))]}" "${links[$((2 * k + 1))]}"
  done
  for model in $MODELS; do
    for seed in $SEEDS; do
      for method in $METHODS; do run_one "$fleet" "$model" "$method" "$seed"; done
    done
  done
done
cp "$RESULT" "$csv_out"
cp "$CURVES" "${csv_out%.csv}_curves.csv"
[ -z "$plot_out" ] || "$PY" "$HERE/plot.py" "$CURVES" "softmax:$TARGET,cnn:$CNN_TARGET" "$plot_out"
echo "fleet benchmark: $((SECONDS - begin)) s; $csv_out${plot_out:+, $plot_out}"
