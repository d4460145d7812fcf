#!/usr/bin/env bash
# The daemons' tunings in tern-sim: softmax on Fashion-MNIST over deploy/config/sim-cat.yaml's four
# edge links (top-k with error feedback, measured link model), each method over several seeds;
# one CSV row per run with the simulated seconds, rounds and upload bytes to the target accuracy.
# docs/cat.md, "The tuner in the daemons", has the table this produces.
#
#   bench/cat/daemon_tuning.sh --sim build/bin/tern-sim --csv docs/results/cat_daemon_tuning.csv
#
# Options: --seeds "1 2 3", --target 0.8, --max-rounds 400, --methods "fixed:0.3:measured ..."
# (each the tuning method, the coordinator's mean cap ratio and the worker's cost model).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
src=$(cd "$here/../.." && pwd)
sim="$src/build/bin/tern-sim"
csv=""
seeds="1 2 3"
target=0.8
max_rounds=400
methods="fixed:0.3:measured cat-paper:0.3:measured cat:0.3:measured
         cat-paper:0.3:payload cat:0.3:payload
         fixed:0.03:measured cat-paper:0.03:measured cat:0.03:measured cat:0.03:payload"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --sim) sim="$2"; shift 2 ;;
    --csv) csv="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --target) target="$2"; shift 2 ;;
    --max-rounds) max_rounds="$2"; shift 2 ;;
    --methods) methods="$2"; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n "$csv" ]] || { echo "usage: $0 [--sim BIN] --csv FILE [--seeds S] [--target A]" >&2; exit 2; }
[[ -x "$sim" ]] || { echo "no tern-sim at $sim" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# sim-cat.yaml with the method, the cap ratio and the seed (the minibatches' and the partition's)
# set, evaluated every other round so that the target's round is known to two rounds.
config() {
  local method=$1 ratio=$2 cost_model=$3 seed=$4
  sed -e "s/^\(    method: \)cat$/\1$method/" \
      -e "s/^\(    cost_model: \).*/\1$cost_model/" \
      -e "s/^\(    mean_ratio: \).*/\1$ratio/" \
      -e "s/^\(    seed: \).*/\1$seed/" \
      -e "s/^\(  eval_every: \).*/\12/" \
      -e "s/^\(  max_rounds: \).*/\1$max_rounds/" \
      "$src/deploy/config/sim-cat.yaml"
}

echo "method,cost_model,cap_ratio,seed,target,seconds_to_target,rounds_to_target,upload_bytes_to_target,mean_level_to_target,final_accuracy,final_upload_bytes" >"$csv"
for seed in $seeds; do
  for entry in $methods; do
    IFS=: read -r method ratio cost_model <<<"$entry"
    yaml="$work/$method-$ratio-$cost_model-$seed.yaml"
    config "$method" "$ratio" "$cost_model" "$seed" >"$yaml"
    grep -q "method: $method" "$yaml" || { echo "config edit failed for $method" >&2; exit 1; }
    metrics="$work/$method-$ratio-$cost_model-$seed.csv"
    (cd "$work" && "$sim" --config "$yaml" --metrics-csv "$metrics" >/dev/null)
    python3 - "$metrics" "$target" "$method" "$cost_model" "$ratio" "$seed" >>"$csv" <<'EOF'
import csv, sys
path, target, method, cost_model, ratio, seed = sys.argv[1], float(sys.argv[2]), *sys.argv[3:]
rows = list(csv.DictReader(open(path)))
levels, hit = [], None
for r in rows:
    levels += [int(x) for x in r["levels"].split(";") if x and int(x) > 0]
    if r["evaluated"] == "1" and float(r["test_accuracy"]) >= target:
        hit = r
        break
last = [r for r in rows if r["evaluated"] == "1"][-1]
mean_level = sum(levels) / len(levels) if levels else 0
if hit:
    print(f"{method},{cost_model},{ratio},{seed},{target},{float(hit['time_s']):.3f},{hit['round']},"
          f"{hit['upload_bytes']},{mean_level:.0f},{float(last['test_accuracy']):.4f},{rows[-1]['upload_bytes']}")
else:
    print(f"{method},{cost_model},{ratio},{seed},{target},,,,{mean_level:.0f},"
          f"{float(last['test_accuracy']):.4f},{rows[-1]['upload_bytes']}")
EOF
    tail -1 "$csv" >&2
  done
done
