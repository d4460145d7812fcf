#!/usr/bin/env bash
# A worker whose gradient takes longer than the coordinator's patience (an MLP on a 60,000-row
# batch, about a second a round here, against 0.3 s of patience) keeps its place: it computes on
# a second thread while its event loop goes on sending heartbeats, so it is never marked gone
# and every round closes with its push. (Computing on the event loop's thread, it was marked gone
# every round, its pushes refused, and no round closed.)
source "$(dirname "$0")/lib.sh"

ROUNDS=5
PATIENCE=0.3
write_coordinator "$WORK/coord.yaml" "$ROUNDS" 1
sed -i "s/^heartbeat_seconds: .*/heartbeat_seconds: 0.05/;
        s/^worker_patience_seconds: .*/worker_patience_seconds: $PATIENCE/;
        s/^round_deadline_seconds: .*/round_deadline_seconds: 60/;
        s/^model: .*/model: {kind: mlp, classes: 10, hidden: 128}/;
        s/^training: .*/training: {batch_size: 60000, seed: 3}/" "$WORK/coord.yaml"
start_coordinator
write_worker "$WORK/w.yaml" "$EP" 1
sed -i 's/^heartbeat_seconds: .*/heartbeat_seconds: 0.05/' "$WORK/w.yaml"
timeout 300 "$BIN/tern-worker" --config "$WORK/w.yaml" > "$WORK/w.out" 2> "$WORK/w.err" ||
  { tail "$WORK/w.out" "$WORK/coord.out"; fail "the worker exited with $?"; }
wait "$CPID" || fail "the coordinator exited with $?"
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || { tail "$WORK/coord.out"; fail "training did not finish"; }
! grep -q "marked gone" "$WORK/coord.out" "$WORK/coord.err" || fail "the computing worker was marked gone"
python3 - "$WORK/metrics.csv" "$PATIENCE" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
patience = float(sys.argv[2])
assert all(int(r["participants"]) == 1 for r in rows), "a round closed without the worker's push"
t = [float(r["time_s"]) for r in rows]
gap = statistics.median(b - a for a, b in zip(t, t[1:]))
# The scenario is real only if a round's computation outlasts the patience.
assert gap > patience, f"rounds took {gap:.2f} s, not longer than the {patience} s patience"
print(f"{len(rows)} rounds of {gap:.2f} s (median) against {patience} s of patience")
PY
echo "PASS: a worker computing longer than the coordinator's patience stays a member"
