#!/usr/bin/env bash
# A worker stopped while its push crosses a slow uplink: its uplink is shaped to 600 kbit/s and a
# push of a quarter of a 200,010-parameter model (top-k at the uniform cap) takes about 4 s. The
# worker is sent SIGTERM about a second into such a push. Its Leave goes out behind the push; had
# the worker closed its connection at once, the kernel would have reset it with both still
# queued (the coordinator's heartbeats unread), and the coordinator would have learnt nothing
# until its patience ran out (30 s here), the round held all that time. A coordinator that
# answers Leaves tells the stopping worker when its Leave is in: the worker waits for that (8 s
# at most), so the push counts in its round and the coordinator hears at once that it left.
source "$(dirname "$0")/lib.sh"

FEATURES=20000  # 200,010 parameters

prepare_pair
shape_worker add 600kbit

write_slow_uplink_coordinator "$FEATURES" 50 30 30
write_synthetic_worker stopping "$FEATURES" 30
start_daemons --metrics-csv "$WORK/metrics.csv"

# Rounds 0-2 closed (the link's calibration train and three pushes are behind it): round 3's
# push is under way once the worker has computed it.
wait_for_line "$WORK/coord.out" "round +2 t=" 600 ||
  fail "the coordinator did not close rounds 0-2 in 60 s"
sleep 1
grep -qE "round +3 t=" "$WORK/coord.out" && fail "round 3 closed before the stop"
stopped=$SECONDS
kill -TERM "$WPID"
rc=0
wait "$WPID" || rc=$?
[ "$rc" = 0 ] || fail "the stopped worker exited with $rc"
took=$((SECONDS - stopped))
# It waited for the coordinator's answer to its Leave, not out its 8 s grace.
[ "$took" -le 6 ] || fail "the stopped worker took $took s to exit"
grep -q "did not answer the Leave" "$WORK/worker.out" && fail "the Leave's answer never came"
wait_for_line "$WORK/coord.out" "worker 0 \(stopping\) left" 50 ||
  fail "the coordinator did not hear that the worker left (it would mark it gone after 30 s)"
heard=$((SECONDS - stopped))
# The push the worker was sending when it stopped was taken into its round (round 3).
grep -qE "round +3 t=.* workers=1 " "$WORK/coord.out" ||
  fail "round 3 did not close with the push that was crossing at the stop"
echo "PASS: a worker stopped during a slow push exited in $took s; the coordinator took its push and heard it leave within $heard s"
