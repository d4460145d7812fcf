#!/usr/bin/env bash
# tern-bench-transport in its smoke form: one interleaved pair per quickstart case, tern's round
# (the real coordinator and tern-loadgen) against the raw libzmq program. The CSV has the issue's
# columns, one row per case, the model's parameter count, and each ratio is tern over raw as
# recomputed here from the two round times; every round closed with every worker (the bench fails
# otherwise). Speed is not judged here (docs/performance.md has the measured table).
source "$(dirname "$0")/lib.sh"

[ -x "$BIN/tern-bench-transport" ] || { echo "SKIP: benchmarks not built"; exit 77; }
[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || { echo "SKIP: Fashion-MNIST not installed"; exit 77; }
"$BIN/tern-bench-transport" --quick --case identity-quickstart --case topk1-quickstart \
  --csv "$WORK/t.csv" > "$WORK/out" 2>&1 || { cat "$WORK/out"; fail "the bench failed"; }
cat "$WORK/out"
python3 - "$WORK/t.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
want = "case,d,compression,workers,tern_round_ms,raw_round_ms,ratio,coordinator_faults_per_round"
assert open(sys.argv[1]).readline().strip() == want
assert [r["case"] for r in rows] == ["identity-quickstart", "topk1-quickstart"], rows
for r in rows:
    assert int(r["d"]) == 7850, r            # softmax on 784 pixels, 10 classes
    assert int(r["workers"]) == 4, r
    tern, raw, ratio = float(r["tern_round_ms"]), float(r["raw_round_ms"]), float(r["ratio"])
    assert tern > 0 and raw > 0, r
    assert abs(ratio - tern / raw) <= 1e-3 * ratio, r
    assert float(r["coordinator_faults_per_round"]) >= 0, r
print("PASS: two cases, ratios consistent")
PY
grep -q "^transport: case=topk1-quickstart d=7850 " "$WORK/out" || fail "no summary line"
