#!/usr/bin/env bash
# A worker stopped while it computes a long gradient (two local SGD steps over a 60,000-row batch,
# seconds a round here and far more on a small board) stops within a tenth of a round: the
# computation ends between two chunks of rows (not only between the local steps, which would
# take a third of a round or more here), and its Leave reaches the coordinator, which goes on
# without waiting out its patience. (Before, the stop waited for the whole computation,
# past systemd's TimeoutStopSec on a slow board: killed, with no Leave sent.)
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 1000 1
sed -i "s/^round_deadline_seconds: .*/round_deadline_seconds: 120/;
        s/^worker_patience_seconds: .*/worker_patience_seconds: 60/;
        s/^eval_every: .*/eval_every: 1000/;
        s/^model: .*/model: {kind: mlp, classes: 10, hidden: 128}/;
        s/^training: .*/training: {batch_size: 60000, seed: 3, local_steps: 2, local_lr: 0.05}/" \
  "$WORK/coord.yaml"
start_coordinator
write_worker "$WORK/w.yaml" "$EP" 1
"$BIN/tern-worker" --config "$WORK/w.yaml" > "$WORK/w.out" 2> "$WORK/w.err" &
WPID=$!; PIDS+=($WPID)
# Three rounds closed: their spacing is a round's computation.
for _ in $(seq 1 1200); do
  [ -s "$WORK/metrics.csv" ] && [ "$(wc -l < "$WORK/metrics.csv")" -ge 4 ] && break
  kill -0 $WPID 2> /dev/null || { cat "$WORK/w.err"; fail "the worker exited early"; }
  sleep 0.1
done
ROUND=$(python3 - "$WORK/metrics.csv" <<'PY'
import csv, statistics, sys
t = [float(r["time_s"]) for r in csv.DictReader(open(sys.argv[1]))]
assert len(t) >= 3, f"only {len(t)} rounds closed"
print(statistics.median(b - a for a, b in zip(t, t[1:])))
PY
)
# A fifth into a round's computation (the round trip around it takes milliseconds): the next
# round closes, and the worker starts the one after at once.
LINES=$(wc -l < "$WORK/metrics.csv")
for _ in $(seq 1 3000); do [ "$(wc -l < "$WORK/metrics.csv")" -gt "$LINES" ] && break; sleep 0.02; done
sleep "$(python3 -c "print($ROUND / 5)")"
T0=$(date +%s.%N)
kill -TERM $WPID
set +e; wait $WPID; rc=$?; set -e
T1=$(date +%s.%N)
[ $rc -eq 0 ] || { cat "$WORK/w.err"; fail "the stopped worker exited with $rc"; }
python3 - "$T0" "$T1" "$ROUND" <<'PY'
import sys
t0, t1, round_s = map(float, sys.argv[1:])
took = t1 - t0
# The scenario is real only if a round's computation is long; the stop must not wait for it.
assert round_s > 1.0, f"a round took {round_s:.2f} s: too short to tell"
assert took < round_s / 10, f"the stop took {took:.2f} s, a round {round_s:.2f} s"
print(f"stopped in {took:.2f} s; a round's computation takes {round_s:.2f} s")
PY
wait_for_line "$WORK/coord.out" "left: stopped by signal" "the coordinator did not hear the worker leave"
grep -q "^replica: round=" "$WORK/w.out" || fail "the worker did not end its run normally"
# The stop fell inside a computation, which the worker left.
grep -q "the gradient was left unfinished: stopping" "$WORK/w.out" ||
  { tail "$WORK/w.out"; fail "the worker was not computing when it was stopped"; }
kill -TERM $CPID
wait $CPID || fail "the coordinator exited with $?"
echo "PASS: a worker stopped during a long gradient stops within a fraction of a round and leaves"
