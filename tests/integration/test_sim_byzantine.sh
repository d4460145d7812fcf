#!/usr/bin/env bash
# One of 8 simulated workers is Byzantine: it scales every push by 1e6 and claims 2^40 samples in
# its join. With robust aggregation on (trimmed mean with its defaults: trim 0.2, clipping at 2x
# the median norm, the weight cap) the final accuracy stays within 0.02 of the clean run's
# (docs/security.md, "Poisoned pushes and stragglers").
source "$(dirname "$0")/lib.sh"
# write_sim FILE [extra yaml]: the quick simulation's task with 8 workers.
write_sim() {
  sed -e 's/^workers: 4/workers: 8/' -e '/^metrics_csv:/d' "$SRC/deploy/config/sim-quick.yaml" > "$1"
  printf '%s\n' "${2:-}" >> "$1"
}
accuracy() { sed -n 's/^final: .*test_accuracy=\([0-9.]*\).*/\1/p' "$1"; }
write_sim "$WORK/clean.yaml"
write_sim "$WORK/byzantine.yaml" "byzantine: {workers: 1, scale: 1e6, samples: 1099511627776}"
sed -i 's/^  allocation:/  aggregation: {robust: trimmed_mean}\n  allocation:/' \
  "$WORK/byzantine.yaml"
grep -q "robust: trimmed_mean" "$WORK/byzantine.yaml" || fail "robust aggregation not configured"
for run in clean byzantine; do
  (cd "$WORK" && "$BIN/tern-sim" --config "$run.yaml" --metrics-csv "$run.csv" > "$run.out") ||
    fail "$run: tern-sim failed: $(tail -n 3 "$WORK/$run.out")"
done
clean=$(accuracy "$WORK/clean.out")
byz=$(accuracy "$WORK/byzantine.out")
[ -n "$clean" ] && [ -n "$byz" ] || fail "no final accuracy (clean '$clean', byzantine '$byz')"
echo "final accuracy: clean $clean, one Byzantine worker of 8 with trimmed mean $byz"
python3 - "$clean" "$byz" <<'PY' || fail "accuracy with a Byzantine worker is not within 0.02 of the clean run"
import sys
clean, byz = map(float, sys.argv[1:])
sys.exit(0 if abs(clean - byz) <= 0.02 else 1)
PY
echo "PASS: one Byzantine worker of 8 leaves the accuracy within 0.02 of the clean run"
