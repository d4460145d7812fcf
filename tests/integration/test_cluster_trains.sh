#!/usr/bin/env bash
# One coordinator and 3 workers train 30 rounds on loopback: the loss falls and every worker's
# replica ends bit-identical with the coordinator's model.
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 30 3
start_coordinator
write_worker "$WORK/worker.yaml" "$EP" 3
for i in 0 1 2; do start_worker $i "w$i"; done
finish_cluster 3 30
# Loss falls: mean train loss of the last 5 rounds below that of the first 5.
python3 - "$WORK/metrics.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 30, len(rows)
first = sum(float(r["train_loss"]) for r in rows[:5]) / 5
last = sum(float(r["train_loss"]) for r in rows[-5:]) / 5
print(f"train loss first5={first:.4f} last5={last:.4f}")
assert last < 0.8 * first, (first, last)
assert int(rows[-1]["upload_bytes"]) < int(rows[-1]["full_bytes"])
PY
echo "PASS: 3 workers trained 30 rounds; replicas match ($REF)"
