#!/usr/bin/env bash
# A worker's trainer socket is served between rounds (docs/trainer-faults.md): while no round
# runs (the coordinator waits for a second worker), a trainer that stops shows in /status as not
# connected, and a restarted one's Hello is answered at once, not at the next round's request.
# A worker whose trainer trains another model is not admitted, and its /healthz says why.
# Then a second worker comes and both train; its trainer, killed while rounds run, shows as gone
# too, and once restarted both train to the end.
source "$(dirname "$0")/lib.sh"

use_fake_trainer

ROUNDS=300
write_ext_coordinator 2 "$ROUNDS" 2 "eval_every: 2"
start_coordinator

# trainer_state NAME CONNECTED: waits (10 s at most) until NAME's /status says trainer.connected
# is CONNECTED (True/False) and its /metrics tern_trainer_connected 1 (0); prints the status.
trainer_state() {
  "$PY" - "$(cat "$WORK/$1.url")" "$2" <<'PY'
import json, sys, time, urllib.request
want = sys.argv[2] == "True"
for _ in range(100):
    st = json.load(urllib.request.urlopen(sys.argv[1] + "/status", timeout=5))
    metrics = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode()
    gauge = f"tern_trainer_connected {int(want)}" in metrics.splitlines()
    if st["trainer"]["connected"] == want and gauge:
        print(st["trainer"], st["counters"]["trainer_connections"])
        sys.exit(0)
    time.sleep(0.1)
sys.exit(f"trainer.connected stayed {st['trainer']['connected']}: {st['trainer']}")
PY
}

start_ext_worker a
wait_for_line "$WORK/a.out" "waiting for the trainer at ipc://" "worker a did not wait for its trainer"
start_trainer a 1
wait_for_line "$WORK/a.out" "trainer connected at" "worker a did not take its trainer"
wait_for_file "$WORK/a.url"
trainer_state a True || fail "worker a's trainer is not shown connected"

# No round runs (one worker of two): the trainer stops and is seen gone.
kill "$TPID"; wait "$TPID" 2> /dev/null || true
trainer_state a False || fail "a trainer gone between rounds is still shown connected"
grep -q "disconnected" "$WORK/a.out" || fail "the worker did not log its trainer's going"

# A restarted trainer is answered within seconds with no request out.
start_trainer a 1
for _ in $(seq 1 30); do grep -q "hello accepted" "$WORK/a-trainer.log" && break; sleep 0.1; done
grep -q "hello accepted" "$WORK/a-trainer.log" || fail "the restarted trainer's Hello was not answered between rounds"
trainer_state a True || fail "the restarted trainer is not shown connected"
! grep -q '^fit ' "$WORK/a-trainer.log" || fail "a request went out before any round"
[ "$(grep -c "hello accepted" "$WORK/a-trainer.log")" = 2 ] || fail "two Hellos, two answers expected"

# A trainer of another model (10 features, not 20): the coordinator refuses the join.
start_ext_worker odd
start_trainer odd 3 --features 10
wait_for_line "$WORK/odd.out" "another layout than this worker's trainer" "the odd worker was not refused"
wait_for_file "$WORK/odd.url"
"$PY" - "$(cat "$WORK/odd.url")" <<'PY' || fail "the refused worker's /healthz does not say why"
import sys, time, urllib.error, urllib.request
for _ in range(100):
    try:
        urllib.request.urlopen(sys.argv[1] + "/healthz", timeout=5)
        body = "ok"
    except urllib.error.HTTPError as e:
        body = e.read().decode()
        if e.code == 503 and "not admitted: the coordinator's model has another layout" in body:
            print("odd /healthz:", body.strip())
            sys.exit(0)
    time.sleep(0.1)
sys.exit(f"/healthz said {body!r}")
PY
kill "${PIDS[-2]}" "$TPID"  # the odd worker and its trainer

start_ext_worker b
start_trainer b 2
wait_for_line "$WORK/b-trainer.log" "^fit 5 " "worker b's trainer was not asked to fit"
wait_for_file "$WORK/b.url"
kill "$TPID"; wait "$TPID" 2> /dev/null || true
trainer_state b False || fail "a trainer killed while rounds run is still shown connected"
kill -0 "$CPID" 2> /dev/null || fail "the run ended before the trainer's kill was seen"
# Worker a's /status has the last evaluation it reported (its trainer's 400 held-out rows).
"$PY" - "$(cat "$WORK/a.url")" <<'PY' || fail "worker a's /status has no evaluation of its own"
import json, sys, urllib.request
ev = json.load(urllib.request.urlopen(sys.argv[1] + "/status", timeout=5))["workers"][0]["evaluation"]
assert ev and ev["rows"] == 400 and 0 < ev["accuracy"] <= 1 and ev["round"] % 2 == 0, ev
print("worker a's last evaluation:", ev)
PY
start_trainer b 2
wait "$CPID" || fail "coordinator exited with $?"
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || { tail -n 20 "$WORK/coord.err"; fail "the coordinator did not finish"; }
grep -q '^fit ' "$WORK/a-trainer.log" || fail "the restarted trainer was never asked to fit"
echo "PASS: the trainer socket is served between rounds"
