#!/usr/bin/env bash
# The fleet benchmark on a fleet of the user's own (a fleet file): as many workers as the file has
# links, each link shaped at its rates, the shards cut by its partition, its name in the CSV; a
# fleet file it cannot use is refused before anything runs.
# Usage: test_fleet_file.sh BIN_DIR SRC_DIR
set -euo pipefail
BIN="$1"
SRC="$2"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root"; exit 77; }
DATA=/usr/share/datasets/fashion-mnist
[ -r "$DATA/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST"; exit 77; }
/usr/bin/python3 -c "import yaml" 2> /dev/null || { echo "SKIP: no python3-yaml"; exit 77; }
T="$(mktemp -d /tmp/tern-fleet-file.XXXXXX)"
kept=""
trap 'rm -rf "$T" ${kept:+"$kept"}' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$T/lab.yaml" << 'EOF'
name: lab-3
links:
  - {up: 0.5, down: 2}
  - {up: 5, down: 20, count: 2}
partition: {dirichlet_alpha: 0, volume_ratio: 4}
EOF
printf 'links: [{up: 0, down: 1}]\n' > "$T/bad.yaml"

set +e
BIN="$BIN" FLEETS="A $T/bad.yaml" bash "$SRC/bench/fleet/run.sh" --csv "$T/bad.csv" \
  > "$T/bad.out" 2>&1
rc=$?
set -e
[ "$rc" = 2 ] || fail "a bad fleet file: exit $rc, expected 2 ($(cat "$T/bad.out"))"
grep -q "links\[0\].up: 0 is outside" "$T/bad.out" || fail "no reason given: $(cat "$T/bad.out")"
[ ! -e "$T/bad.csv" ] || fail "a bad fleet file still produced a CSV"

set +e
BIN="$BIN" FLEETS="$T/lab.yaml" METHODS=tern TARGET=0.70 MAX_ROUNDS=400 RUN_SECONDS=90 KEEP=1 \
  bash "$SRC/bench/fleet/run.sh" --quick --csv "$T/lab.csv" > "$T/run.out" 2>&1
rc=$?
set -e
kept=$(sed -n 's/^runs kept in //p' "$T/run.out")
[ "$rc" = 77 ] && { echo "SKIP: $(tail -1 "$T/run.out")"; exit 77; }
[ "$rc" = 0 ] || fail "run.sh exit $rc: $(tail -20 "$T/run.out")"
[ -d "${kept:-/nonexistent}" ] || fail "KEEP=1 named no directory: $(cat "$T/run.out")"

# One row, the fleet's name, the target reached.
[ "$(wc -l < "$T/lab.csv")" = 2 ] || fail "expected a header and one row: $(cat "$T/lab.csv")"
IFS=, read -r fleet model method seed secs rounds up down acc < <(tail -1 "$T/lab.csv")
[ "$fleet,$model,$method,$seed" = "lab-3,softmax,tern,1" ] || fail "row: $(tail -1 "$T/lab.csv")"
for v in "$secs" "$rounds"; do
  [ -n "$v" ] || fail "target 0.70 not reached: $(tail -1 "$T/lab.csv")"
done
[ "$((up > 0 && down > 0))" = 1 ] || fail "no bytes counted: $(tail -1 "$T/lab.csv")"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.70) }' || fail "final accuracy $acc below the target"

# Three workers: the coordinator waited for three, each worker's shard is one of three, cut 4:1.
run="$kept/lab-3-softmax-tern-1"
grep -qx "min_workers: 3" "$run/coord.yaml" || fail "coord.yaml: $(grep workers "$run/coord.yaml")"
for k in 0 1 2; do
  [ -s "$run/w$k.yaml" ] || fail "no configuration for worker $k"
  grep -q "total: 3" "$run/w$k.yaml" || fail "worker $k's shard: $(grep -A2 shard "$run/w$k.yaml")"
  grep -q "volume_ratio: 4" "$run/w$k.yaml" || fail "worker $k's partition"
done
[ ! -e "$run/w3.yaml" ] || fail "a fourth worker was started"
# The first round had three participants (the coordinator's metrics CSV).
pushes=$(awk -F, 'NR == 1 { for (i = 1; i <= NF; i++) if ($i == "participants") c = i; next }
  c && NR == 2 { print $c }' "$run/metrics.csv")
[ "$pushes" = 3 ] || fail "the first round had '$pushes' participants, expected 3"
echo "PASS: a fleet file of 3 workers ran to 0.70 in $secs s ($rounds rounds)"
