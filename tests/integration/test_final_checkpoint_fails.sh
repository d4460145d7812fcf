#!/usr/bin/env bash
# A run that finishes but cannot write its final checkpoint exits 3 (not 1, which the unit would
# restart into a resume of the older checkpoint, waiting for workers told training is over),
# saying so; training goes on past a failed checkpoint to its end.
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 300 1 "checkpoint: {path: $WORK/ck/coord.ckpt, every: 100}"
mkdir -p "$WORK/ck"
start_coordinator
write_worker "$WORK/worker.yaml" "$EP" 1
start_worker 0 w0
for _ in $(seq 1 1200); do
  [ -s "$WORK/metrics.csv" ] && [ "$(wc -l < "$WORK/metrics.csv")" -gt 110 ] && break
  sleep 0.05
done
[ "$(wc -l < "$WORK/metrics.csv")" -gt 110 ] || fail "fewer than 110 rounds in a minute"
[ -s "$WORK/ck/coord.ckpt" ] || fail "no checkpoint at round 100"
# The next write's temporary file cannot be created: a directory holds its name.
mkdir "$WORK/ck/coord.ckpt.tmp"
set +e; wait "$CPID"; rc=$?; set -e
# Training went on past the failed write at round 200 (counted, logged) to its end.
[ "$(wc -l < "$WORK/metrics.csv")" -eq 301 ] || fail "training stopped at a failed checkpoint"
[ $rc -eq 3 ] || { tail "$WORK/coord.out" "$WORK/coord.err"; fail "a finished run whose final checkpoint failed exited $rc, not 3"; }
grep -q "^final: rounds=300 " "$WORK/coord.out" || fail "no final line"
wait "$WPID" || fail "the worker exited with $?"
echo "PASS: a finished run whose final checkpoint cannot be written exits 3"
