#!/usr/bin/env bash
# A worker whose push at its cap takes longer than the coordinator's round deadline: its uplink
# is shaped to 600 kbit/s and a push of a quarter of a 200,010-parameter model (top-k at the
# uniform cap) is over 200 kB, about 3 s, against a deadline of 2 s and 1 s of patience. Before,
# it was marked gone at the deadline, its push refused as from an unknown session, and it
# re-joined at the same cap, for ever: no round closed. Its calibration train restarted at every
# re-join, so it never timed more than one probe size and never learned its link (and when its
# samples did spread, a one-packet probe the shaper's bucket passed free could outweigh them all,
# with the same result). Now the train goes on across re-joins until the link is fitted, and from
# then on the worker sends the part of its cap that the fitted link carries within the deadline:
# every round closes with its push.
source "$(dirname "$0")/lib.sh"

FEATURES=20000  # 200,010 parameters
ROUNDS=12
DEADLINE=2
RATE_BYTES=75000  # 600 kbit/s

prepare_pair
shape_worker add 600kbit

write_slow_uplink_coordinator "$FEATURES" "$ROUNDS" "$DEADLINE" 1
write_synthetic_worker slow "$FEATURES" 30
sed -i "s|level: info|level: debug|" "$WORK/worker.yaml"  # its link samples, said on a failure
start_daemons --metrics-csv "$WORK/metrics.csv"

wait_for_rounds "$ROUNDS" 150
# The worker said why it sent less than its cap, and how much less.
line=$(grep -m1 "a push at the cap of .*: sending [0-9]*," "$WORK/worker.out") ||
  fail "the worker never held a push to the deadline"
level=$(sed -n 's/.*: sending \([0-9]*\),.*/\1/p' <<< "$line")
cap=$(sed -n 's/.*a push at the cap of \([0-9]*\) coordinates.*/\1/p' <<< "$line")
echo "worker: $line"
python3 - "$WORK/metrics.csv" "$DEADLINE" "$RATE_BYTES" "$level" "$cap" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
deadline, rate, level, cap = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
assert all(int(r["participants"]) == 1 for r in rows), "a round closed without the worker's push"
t = [float(r["time_s"]) for r in rows]
up = [int(r["upload_bytes"]) for r in rows]
# Rounds after the first: each push (its upload, probes included) crossed the shaped link within
# the deadline, and so did the round.
gaps = [b - a for a, b in zip(t, t[1:])]
pushes = [b - a for a, b in zip(up, up[1:])]
assert max(gaps) < deadline, f"rounds of {gaps} s against a deadline of {deadline} s"
assert max(pushes) / rate < deadline, f"pushes of {pushes} bytes at {rate} B/s"
# The scenario is real: at the cap the same push (bytes in proportion to the coordinates sent)
# would not have crossed the link within the deadline.
at_cap = min(pushes) * cap / level
assert at_cap / rate > deadline, f"a push at the cap ({at_cap:.0f} bytes) fits the deadline anyway"
print(f"rounds of {min(gaps):.2f}-{max(gaps):.2f} s, pushes of {min(pushes)}-{max(pushes)} bytes "
      f"(the first held to {level} of the cap's {cap} coordinates; at the cap about {at_cap / rate:.1f} s) "
      f"against a deadline of {deadline} s")
PY
wait "$WPID" || fail "the worker exited with $?"
# Each re-join while the link was being learnt named the worker's replica, which was still the
# model (or a round's sparse update from it): no welcome carried the whole model again.
rejoins=$(grep -c "worker slow re-joined" "$WORK/coord.out" || true)
spared=$(grep -cE "worker slow holds the model of round [0-9]+: welcomed (without it|with the update)" \
  "$WORK/coord.out" || true)
[ "$rejoins" -ge 1 ] || fail "the worker never re-joined: no push was marked gone while the link was learnt"
[ "$spared" = "$rejoins" ] || fail "$spared of $rejoins re-joins were welcomed without the whole model"
echo "PASS: a worker whose push at its cap outlasts the round's deadline sends what arrives in time" \
  "(its $rejoins re-joins welcomed without the whole model)"
