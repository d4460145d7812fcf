#!/usr/bin/env bash
# The example simulator configs write the same metrics CSVs, byte for byte, as the cores did
# before they were split into pieces (issue "the house"): a refactor that changes no arithmetic
# changes no row. The hashes are of the CSVs tern-sim wrote on x86_64 (Debian 12, g++ 12,
# Release); a change that alters arithmetic on purpose updates them and says why in its commit
# (the last: the compressed broadcast, docs/downloads.md, and CAT priced on the fresh gradient,
# docs/cat.md, which sim-cat runs). `download.ratio: 1` (the dense
# broadcast) still writes, byte for byte, what sim-quick wrote before it (commit d82cf5d's hash).
source "$(dirname "$0")/lib.sh"
declare -A golden=(
  [sim-quick]=cc3c2de6fc4901d9986921a292c015bb9c2322042e9a68dd17f8f33d41e0ef66
  [sim-cat]=26076dc9349ea6f22076a60b9ab6e194a35c719bfde8c72705db0c6efe4c4cd2
  [sim-dense]=776962f87e80186d7f12e50d4b96ca1c290a8734972bcaf67403daeecc670434
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
