#!/usr/bin/env bash
# The simulator with one seed and config gives a byte-identical metrics CSV, and every replica
# matches the coordinator's model (tern-sim exits non-zero otherwise).
source "$(dirname "$0")/lib.sh"
"$BIN/tern-sim" --config "$SRC/deploy/config/sim-quick.yaml" --max-rounds 40 --metrics-csv "$WORK/a.csv" > "$WORK/a.out"
"$BIN/tern-sim" --config "$SRC/deploy/config/sim-quick.yaml" --max-rounds 40 --metrics-csv "$WORK/b.csv" > "$WORK/b.out"
[ "$(wc -l < "$WORK/a.csv")" -eq 41 ] || fail "expected 40 rows"
cmp "$WORK/a.csv" "$WORK/b.csv" || fail "CSVs differ"
grep -q "replicas differing from the coordinator: 0" "$WORK/a.out" || fail "replica mismatch"
echo "PASS: identical CSVs ($(md5sum < "$WORK/a.csv" | cut -c1-12))"
