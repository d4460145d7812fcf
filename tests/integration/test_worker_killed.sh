#!/usr/bin/env bash
# kill -9 one of three workers mid-round: the round closes at its deadline with the other two,
# the coordinator marks the worker gone and re-plans; the worker is then restarted (as systemd's
# Restart=on-failure would), re-joins on its own under its old id, gets the full model and
# trains again; training finishes with all three and every replica equals the coordinator's model.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-4000}
write_coordinator "$WORK/coord.yaml" "$ROUNDS" 3
start_coordinator
write_worker "$WORK/worker.yaml" "$EP" 3
start_worker 0 w0; W0=$WPID
start_worker 1 w1; W1=$WPID
start_worker 2 w2; VICTIM=$WPID
for _ in $(seq 1 1200); do
  [ -s "$WORK/metrics.csv" ] && [ "$(wc -l < "$WORK/metrics.csv")" -ge 6 ] && break
  sleep 0.05
done
[ "$(wc -l < "$WORK/metrics.csv")" -ge 6 ] || fail "fewer than 5 rounds before the kill"
kill -9 "$VICTIM"
KILLED_AT=$(($(wc -l < "$WORK/metrics.csv") - 1))
for _ in $(seq 1 200); do
  grep -q "marked gone" "$WORK/coord.out" "$WORK/coord.err" && break
  sleep 0.05
done
grep -q "marked gone" "$WORK/coord.out" "$WORK/coord.err" || fail "the killed worker was never marked gone"
GONE_AT=$(($(wc -l < "$WORK/metrics.csv") - 1))
start_worker 2 w2-restarted; W2=$WPID

wait $CPID || fail "coordinator exited with $?"
for p in "$W0" "$W1" "$W2"; do wait "$p" || fail "a worker exited non-zero"; done
grep -q "^final: rounds=$ROUNDS " "$WORK/coord.out" || { tail -n 20 "$WORK/coord.err"; fail "coordinator did not finish"; }
grep -q "worker w2 re-joined as id" "$WORK/coord.out" || fail "the restarted worker did not re-join under its old id"
ref=$(grep '^model:' "$WORK/coord.out" | sed 's/.*checksum=//')
for w in w0 w1 w2-restarted; do
  got=$(grep '^replica:' "$WORK/$w.out" | sed 's/.*checksum=//')
  [ "$got" = "$ref" ] || fail "$w replica checksum '$got' != coordinator '$ref'"
done
python3 - "$WORK/metrics.csv" "$KILLED_AT" "$GONE_AT" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
killed, gone = int(sys.argv[2]), int(sys.argv[3])
rounds = [int(r["round"]) for r in rows]
assert rounds == list(range(len(rows))), "rounds skipped or repeated"
parts = [int(r["participants"]) for r in rows]
times = [float(r["time_s"]) for r in rows]
assert all(p == 3 for p in parts[:killed]), parts[:killed]
# The round the kill interrupted closed at the 2 s deadline with the two survivors.
deadline_rounds = [i for i in range(killed, gone + 1)
                   if parts[i] == 2 and times[i] - times[i - 1] >= 1.9]
assert deadline_rounds, ("no round closed at its deadline after the kill",
                         list(zip(parts[killed:gone + 1], times[killed:gone + 1])))
back = next(i for i in range(gone, len(rows)) if parts[i] == 3)
assert parts[-1] == 3, parts[-5:]
print(f"killed after round {killed - 1}; round {deadline_rounds[0]} closed at the deadline "
      f"({times[deadline_rounds[0]] - times[deadline_rounds[0] - 1]:.2f} s) with 2 workers; "
      f"marked gone by round {gone}; all 3 again from round {back} "
      f"({times[back] - times[gone]:.2f} s after the restart); {len(rows)} rounds")
PY
echo "PASS: a killed worker was restarted, re-joined and trained on; replicas match ($ref)"
