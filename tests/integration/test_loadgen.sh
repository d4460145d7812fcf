#!/usr/bin/env bash
# tern-loadgen drives a real coordinator with 60 protocol-complete workers from one process: every
# worker joins, every round closes with all 60 pushes, and the load generator stops after its
# rounds with every worker having answered each of them.
source "$(dirname "$0")/lib.sh"

N=60
ROUNDS=8
write_coordinator "$WORK/coord.yaml" 1000 $N "max_workers: $N"
sed -i 's/round_deadline_seconds: 2/round_deadline_seconds: 20/; s/worker_patience_seconds: 3/worker_patience_seconds: 20/' "$WORK/coord.yaml"
start_coordinator
write_worker "$WORK/worker.yaml" "$EP" 10
"$BIN/tern-loadgen" --config "$WORK/worker.yaml" --workers $N --rounds $ROUNDS --seed 5 \
  > "$WORK/load.out" 2> "$WORK/load.err" || { cat "$WORK/load.err"; fail "tern-loadgen exited with $?"; }
# The load generator stops once it has sent its last pushes; the coordinator closes that round
# when it has read them all (a stop ends training at once, with what is unread left unread).
for _ in $(seq 1 150); do
  [ -f "$WORK/metrics.csv" ] && [ "$(($(wc -l < "$WORK/metrics.csv") - 1))" -ge $ROUNDS ] && break
  sleep 0.1
done
kill -TERM "$CPID"; wait "$CPID" || true
cat "$WORK/load.out"
line=$(grep '^loadgen: ' "$WORK/load.out") || fail "no summary line"
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p" <<< "$line"; }
[ "$(field workers)" = $N ] || fail "workers: $line"
[ "$(field joined)" = $N ] || fail "not every worker joined: $line"
[ "$(field min_rounds_per_worker)" -ge $ROUNDS ] || fail "a worker answered fewer than $ROUNDS rounds: $line"
# The coordinator's own record: each of the first ROUNDS rounds aggregated all N workers' pushes.
python3 - "$WORK/metrics.csv" $N $ROUNDS <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
n, rounds = int(sys.argv[2]), int(sys.argv[3])
assert len(rows) >= rounds, len(rows)
for r in rows[:rounds]:
    assert int(r["participants"]) == n, r
print(f"{len(rows)} rounds recorded, the first {rounds} with {n} pushes each")
PY
echo "PASS: $N load workers from one process, every round closed with all of them"
