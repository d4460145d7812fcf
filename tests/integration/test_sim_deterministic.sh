#!/usr/bin/env bash
# The simulator with one seed and config gives a byte-identical metrics CSV, and every replica
# matches the coordinator's model (tern-sim exits non-zero otherwise). Run as the README gives it:
# the example config names the CSV (sim-quick-metrics.csv, in the working directory).
source "$(dirname "$0")/lib.sh"
for run in a b; do
  mkdir -p "$WORK/$run"
  (cd "$WORK/$run" && "$BIN/tern-sim" --config "$SRC/deploy/config/sim-quick.yaml" --max-rounds 40 > out)
done
csv_a="$WORK/a/sim-quick-metrics.csv" csv_b="$WORK/b/sim-quick-metrics.csv"
[ -f "$csv_a" ] && [ -f "$csv_b" ] || fail "the example config wrote no metrics CSV"
[ "$(wc -l < "$csv_a")" -eq 41 ] || fail "expected 40 rows"
cmp "$csv_a" "$csv_b" || fail "CSVs differ"
grep -q "replicas differing from the coordinator: 0" "$WORK/a/out" || fail "replica mismatch"
tail -n 1 "$WORK/a/out" | grep -q '^final: rounds=40 ' || fail "the last line is not the final summary"
# --metrics-csv overrides the config's path.
"$BIN/tern-sim" --config "$SRC/deploy/config/sim-quick.yaml" --max-rounds 40 --metrics-csv "$WORK/c.csv" > "$WORK/c.out"
cmp "$csv_a" "$WORK/c.csv" || fail "--metrics-csv wrote a different CSV"
echo "PASS: identical CSVs ($(md5sum < "$csv_a" | cut -c1-12))"
