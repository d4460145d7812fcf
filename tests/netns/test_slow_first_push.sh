#!/usr/bin/env bash
# A worker behind a slow uplink whose pushes take longer than the coordinator's patience from
# the first round on: its uplink is shaped to 600 kbit/s and each push (a quarter of a 200,010-
# parameter model) takes about 3 s, against 1 s of patience. Its heartbeats queue behind each
# push, so the coordinator hears nothing while it sends. Before any link fit the coordinator used
# to mark it gone after 1 s, refuse its push as from an unknown session, and welcome it again,
# at the same cap and with nothing measured: the same push, refused again, for ever (no round
# closed). While no link is fitted, a worker whose push is awaited now has until the round's
# deadline (15 s) for its first push, then twice what that took, and every round closes with
# its push, before the fit and after it.
source "$(dirname "$0")/lib.sh"

FEATURES=20000  # 200,010 parameters
ROUNDS=12  # past the calibration train: the link is fitted for the last rounds
PATIENCE=1

prepare_pair
shape_worker add 600kbit

write_slow_uplink_coordinator "$FEATURES" "$ROUNDS" 15 "$PATIENCE"
write_synthetic_worker slow "$FEATURES" 30
start_daemons --metrics-csv "$WORK/metrics.csv"

wait_for_rounds "$ROUNDS" 150
! grep -q "marked gone" "$WORK/coord.out" || fail "the sending worker was marked gone"
python3 - "$WORK/metrics.csv" "$PATIENCE" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
patience = float(sys.argv[2])
assert all(int(r["participants"]) == 1 for r in rows), "a round closed without the worker's push"
t = [0.0] + [float(r["time_s"]) for r in rows]
gaps = [b - a for a, b in zip(t, t[1:])]
# The scenario is real only if the pushes outlast the patience.
assert min(gaps) > 2 * patience, f"rounds of {gaps} s: pushes not longer than the patience"
print("rounds of " + ", ".join(f"{g:.1f}" for g in gaps) + f" s against {patience} s of patience")
PY
# The last rounds ran on a fitted link: the coordinator's copy of the worker's model (a push
# carries it when the fit is first identified, and when its samples double) has a b and more
# than the first samples.
read -r link_b samples < <(python3 -c 'import csv, sys
r = list(csv.DictReader(open(sys.argv[1])))[-1]
print(r["link_b"], r["link_samples"])' "$WORK/metrics.csv")
python3 -c "import sys; sys.exit(0 if float('$link_b') > 0 and int('$samples') >= 4 else 1)" ||
  fail "the link was not fitted by the last round (b=$link_b, n=$samples)"
wait "$WPID" || fail "the worker exited with $?"
echo "PASS: a worker whose first pushes outlast the patience is waited for, every round with its push"
