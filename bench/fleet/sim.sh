#!/usr/bin/env bash
# The fleets of run.sh in tern-sim: the same shipped configurations, method sections and run
# settings, the fleet's uplinks as the simulator's links (sim_config.py says what differs), and
# the same CSV. With --real, a table of the simulator's seconds to target against the daemons'
# per fleet and method (means over the seeds both have), in Markdown (docs/fleet.md).
#
# Usage: bench/fleet/sim.sh [--quick] --csv FILE [--real REAL_CSV] [--workers N]
#   --workers N  simulate N workers (default: one per link of the fleet, 8 in A and B): the fleet
#                stretched, each of its L links held by N / L workers (sim_config.py); only the
#                fleet's own count compares with run.sh
# Environment: BIN, DATA, FLEETS, METHODS, SEEDS, TARGET, MAX_ROUNDS as run.sh; LATENCY_MS (0.1),
#   COMPUTE_SECONDS (0.003), BURST_BYTES (2896) of every simulated link, EVAL_SECONDS (0.02).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
SRC="$(cd "$HERE/../.." && pwd)"
BIN="${BIN:-$SRC/build/bin}"
PY=/usr/bin/python3
export DATA="${DATA:-/usr/share/datasets/fashion-mnist}" TARGET="${TARGET:-0.80}"
export MAX_ROUNDS="${MAX_ROUNDS:-2000}"

usage() { sed -n '7,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit "${1:-2}"; }
quick=0 csv_out="" real="" workers=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --csv) [ $# -ge 2 ] || usage; csv_out="$2"; shift ;;
    --real) [ $# -ge 2 ] || usage; real="$2"; shift ;;
    --workers) [ $# -ge 2 ] || usage; workers="$2"; shift ;;
    -h | --help) usage 0 ;;
    *) usage ;;
  esac
  shift
done
[ -n "$csv_out" ] || usage
[ -x "$BIN/tern-sim" ] || { echo "sim.sh: $BIN/tern-sim not built (set BIN)" >&2; exit 1; }
if [ "$quick" = 1 ]; then SEEDS="${SEEDS:-1}"; else SEEDS="${SEEDS:-1 2 3}"; fi
FLEETS="${FLEETS:-A B}"
METHODS="${METHODS:-fp32 topk1 topk10 tern}"
# shellcheck disable=SC2086 # FLEETS is a list
"$PY" "$HERE/fleets.py" check $FLEETS || exit 2
WORK="$(mktemp -d /tmp/tern-fleet-sim.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT
# Each fleet file is read once: every run reads the copy checked here.
mkdir "$WORK/fleets"
# shellcheck disable=SC2086 # FLEETS is a list
resolved=$("$PY" "$HERE/fleets.py" resolve "$WORK/fleets" $FLEETS) || exit 2
mapfile -t RESOLVED <<< "$resolved"

"$PY" "$HERE/summarize.py" --header > "$WORK/result.csv"
for fleet in "${RESOLVED[@]}"; do
  name=$("$PY" "$HERE/fleets.py" name "$fleet")
  for seed in $SEEDS; do
    for method in $METHODS; do
      run="$WORK/$name-$method-$seed"
      WORKERS="$workers" METRICS_CSV="$run.csv" "$PY" "$HERE/sim_config.py" "$SRC" \
        "$HERE/methods/$method.yaml" "$fleet" "$seed" "$run.yaml"
      "$BIN/tern-sim" --config "$run.yaml" --log-level warn > "$run.out"
      "$PY" "$HERE/summarize.py" "$run.csv" "$TARGET" "$name" softmax "$method" "$seed" \
        "$WORK/curves.csv" | tee -a "$WORK/result.csv"
    done
  done
done
cp "$WORK/result.csv" "$csv_out"
[ -z "$real" ] || "$PY" "$HERE/tables.py" sim "$real" "$csv_out"
