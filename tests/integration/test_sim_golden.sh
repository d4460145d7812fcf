#!/usr/bin/env bash
# The example simulator configs write the same metrics CSVs, byte for byte, as the cores did
# before they were split into pieces (issue "the house"): a refactor that changes no arithmetic
# changes no row. The hashes are of the CSVs tern-sim wrote on x86_64 (Debian 12, g++ 12,
# Release); a change that alters arithmetic on purpose updates them and says why in its commit
# (the last: calibration probes skipped on slow links, docs/link-model.md, on the machine CI runs
# on, where the commit before already wrote other bytes: the hashes are the machine's as well).
# sim-dense is sim-quick with `download.ratio: 1`, the dense broadcast.
source "$(dirname "$0")/lib.sh"
declare -A golden=(
  [sim-quick]=8d13c02f163e7bf8d2914b9f22803864ecde685ab3543fcedd2b7cc66ad4bac9
  [sim-cat]=9275091be3192d30f47dd2f7fddbf4daa9869f73d9d676ad4fc8a94c8b93d490
  [sim-dense]=b1cc889faa918c5c8910faead2d78db28f84668d6416455e2fc11b338f02e726
)
[ "$(uname -m)" = x86_64 ] || { echo "SKIP: the hashes are x86_64's"; exit 77; }
# sim-quick with the dense broadcast, writing the same CSV name.
sed 's/^  allocation:/  download:\n    ratio: 1\n  allocation:/' "$SRC/deploy/config/sim-quick.yaml" \
  > "$WORK/sim-dense.yaml"
grep -q '^    ratio: 1$' "$WORK/sim-dense.yaml" || fail "sim-quick.yaml has no allocation section"
for name in sim-quick sim-cat sim-dense; do
  config="$SRC/deploy/config/$name.yaml"
  [ "$name" = sim-dense ] && config="$WORK/sim-dense.yaml"
  mkdir -p "$WORK/$name"
  (cd "$WORK/$name" && "$BIN/tern-sim" --config "$config" --metrics-csv "$name-metrics.csv" > out) ||
    fail "$name: tern-sim failed: $(tail -n 3 "$WORK/$name/out")"
  csv="$WORK/$name/$name-metrics.csv"
  [ -f "$csv" ] || fail "$name: no metrics CSV"
  got=$(sha256sum "$csv" | cut -d' ' -f1)
  [ "$got" = "${golden[$name]}" ] || fail "$name: metrics CSV changed (sha256 $got, want ${golden[$name]})"
  echo "PASS: $name metrics CSV unchanged ($(wc -l < "$csv") lines)"
done
