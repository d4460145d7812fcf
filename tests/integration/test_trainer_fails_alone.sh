#!/usr/bin/env bash
# A fleet whose only worker's trainer fails a round (tests/integration/fake_trainer.py answering
# with a NaN gradient, twice in a row): the worker says so with a push carrying nothing, the
# coordinator refuses it as worker_failed, asks again at the deadline, and the run goes on to its
# last round. Before, nothing was pushed and the round stayed open for good.
source "$(dirname "$0")/lib.sh"

use_fake_trainer

ROUNDS=10
write_ext_coordinator 1 "$ROUNDS" 1 "http: {bind: \"127.0.0.1:0\", url_file: $WORK/coord.url}"
start_coordinator
start_ext_worker alone 1
start_trainer alone 1 --misbehave nan --at 3 --times 2

wait_for_line "$WORK/alone.out" "the trainer failed (.*non-finite value.*); sitting the round out" \
  "the worker did not log its trainer's failure"
wait_for_line "$WORK/coord.out" "could not compute round 2: the trainer's gradient holds a non-finite" \
  "the coordinator did not log the worker's failure"
"$PY" - "$(cat "$WORK/coord.url")" <<'PY' || fail "coordinator /status"
import json, sys, time, urllib.request
for _ in range(100):  # /status is refreshed on the daemon's tick
    st = json.load(urllib.request.urlopen(sys.argv[1] + "/status", timeout=5))
    if st["rejected"]["worker_failed"] >= 1:
        break
    time.sleep(0.1)
assert st["rejected"]["worker_failed"] >= 1, st["rejected"]
PY
wait "$CPID" || fail "coordinator exited with $?"
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || { tail -n 20 "$WORK/coord.err"; fail "the run did not reach its last round"; }
grep -c "could not compute round 2" "$WORK/coord.out" | grep -qx 2 || fail "round 2 was not asked again after the first failure"
echo "PASS: a lone worker whose trainer failed was asked again and the run finished"
