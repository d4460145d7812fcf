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
  [sim-quick]=14d6cdd8c6277749a02badc3351b311cf5853e97691a8c07ab9351f782e6c3c1
  [sim-cat]=b0aea7c007c32c81f8120ac7fa833db469ebee81aa815373b1ec16c743d43deb
  [sim-dense]=fc7767a9d8c15e1bbe8549503c1b9371c8ebf3ec129f0773d2d996276785eec7
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
