#!/usr/bin/env bash
# The example simulator configs write the same metrics CSVs, byte for byte, as the cores did
# before they were split into pieces (issue "the house"): a refactor that changes no arithmetic
# changes no row. The hashes are of the CSVs tern-sim wrote on x86_64 (Debian 12, g++ 12,
# Release); a change that alters arithmetic on purpose updates them and says why in its commit
# (the last: a push carries the link model only when the coordinator's copy is missing or stale,
# docs/link-model.md: fewer upload bytes, and CAT prices the smaller pushes; the hashes are the
# machine's CI runs on as well).
# sim-dense is sim-quick with `download.ratio: 1`, the dense broadcast.
source "$(dirname "$0")/lib.sh"
declare -A golden=(
  [sim-quick]=7219cc4acafc26097894ed2e9405ba4b238421b248fa21d739e50369b2c6600e
  [sim-cat]=3b7f8ff66122e9c06daabd1282d8820bc03365f1450f7a85eb10d6d7f094a243
  [sim-dense]=60a72c4dc027cac6cb9d9f7b0cfcba38beb536ce7ffbc6807a0c7e1ea81efe3a
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
