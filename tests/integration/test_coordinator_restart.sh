#!/usr/bin/env bash
# kill -9 the coordinator mid-run and start it again on the same endpoint: it resumes from its
# last checkpoint, every worker re-joins on its own and continues, training finishes, replicas
# match the coordinator's model, and the final accuracy is within 1 point of an undisturbed run
# with the same seed. Prints the time from restart to the first resumed round. Then: a finished
# run restarted (idle, or trained on to a larger max_rounds), SIGTERM as a pause, a pause
# restarted at its max_rounds, and a checkpoint path that can never be written.
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-200}
KILL_AFTER=${KILL_AFTER:-77}   # rows in the metrics CSV before the kill
EVERY=5

run_workers() {  # ENDPOINT PREFIX
  write_worker "$WORK/$2-worker.yaml" "$1" 3
  WPIDS=()
  for i in 0 1 2; do
    "$BIN/tern-worker" --config "$WORK/$2-worker.yaml" --name "w$i" --shard-index $i \
      > "$WORK/$2-w$i.out" 2> "$WORK/$2-w$i.err" &
    WPIDS+=($!); PIDS+=($!)
  done
}

# A decaying step size so the final accuracy is a plateau, not one noisy sample of a trajectory.
coordinator_config() {  # FILE CHECKPOINT
  write_coordinator "$1" "$ROUNDS" 3 "checkpoint: {path: $2, every: $EVERY}"
  sed -i 's/^optimizer: .*/optimizer: {lr: 0.2, momentum: 0.5, decay: 0.5, decay_every: 50}/;
          s/^training: .*/training: {batch_size: 128, seed: 3}/' "$1"
}

final_accuracy() {  # the final line's accuracy, which these runs (test data) must have measured
  local acc
  acc=$(sed -n 's/^final: .*test_accuracy=\([^ ]*\).*/\1/p' "$1")
  [[ "$acc" =~ ^[0-9]+\.[0-9]+$ ]] || fail "$1: final line's test_accuracy is '$acc', not a number"
  echo "$acc"
}

# start_cluster CONFIG CSV NAME PREFIX [FLAG...]: a coordinator (output in NAME.out, NAME.err)
# and its three workers (PREFIX-w*.out); sets CPID and EP.
start_cluster() {
  rm -f "$WORK/endpoint"
  "$BIN/tern-coordinator" --config "$1" --metrics-csv "$2" "${@:5}" \
    > "$WORK/$3.out" 2> "$WORK/$3.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  EP=$(cat "$WORK/endpoint")
  run_workers "$EP" "$4"
}

# pause_cluster NAME ROWS: a cluster on NAME.yaml (checkpoints every 50 rounds) stopped by SIGTERM
# once its CSV (NAME.csv) holds more than ROWS lines; sets STOPPED to the round it paused at.
pause_cluster() {
  coordinator_config "$WORK/$1.yaml" "$WORK/$1.ckpt"
  sed -i 's/every: 5}/every: 50}/' "$WORK/$1.yaml"
  start_cluster "$WORK/$1.yaml" "$WORK/$1.csv" "${1}1" "$1"
  wait_rows "$WORK/$1.csv" "$2"
  kill -TERM "$CPID"
  wait "$CPID" || fail "the paused coordinator exited with $?"
  STOPPED=$(sed -n 's/.*stop requested: checkpoint written at round \([0-9]*\).*/\1/p' "$WORK/${1}1.out")
  [ -n "$STOPPED" ] || { tail "$WORK/${1}1.out"; fail "SIGTERM did not write a pause checkpoint"; }
}

wait_rows() {  # CSV N: until the CSV holds more than N lines (header included)
  for _ in $(seq 1 1200); do
    [ -s "$1" ] && [ "$(wc -l < "$1")" -gt "$2" ] && return 0
    sleep 0.05
  done
  fail "timed out waiting for more than $2 lines in $1"
}

# 1. The undisturbed reference, with checkpoints written the same way.
coordinator_config "$WORK/ref.yaml" "$WORK/ref.ckpt"
start_cluster "$WORK/ref.yaml" "$WORK/ref.csv" ref ref
wait $CPID || { tail -n 20 "$WORK/ref.out" "$WORK/ref.err"; fail "reference coordinator exited with $?"; }
for p in "${WPIDS[@]}"; do wait "$p" || fail "a reference worker exited non-zero"; done
REF_ACC=$(final_accuracy "$WORK/ref.out")
[ -n "$REF_ACC" ] || fail "reference run printed no final line"
rm -f "$WORK/endpoint"

# 2. The same run, with the coordinator killed mid-run and restarted on the same endpoint.
coordinator_config "$WORK/coord.yaml" "$WORK/coord.ckpt"
start_cluster "$WORK/coord.yaml" "$WORK/before.csv" before run
wait_rows "$WORK/before.csv" "$KILL_AFTER"
kill -9 "$CPID"
wait "$CPID" 2>/dev/null || true
KILLED_AT=$(($(wc -l < "$WORK/before.csv") - 1))
[ "$KILLED_AT" -lt "$ROUNDS" ] || fail "training finished before the kill"
[ -s "$WORK/coord.ckpt" ] || fail "no checkpoint was written before the kill"
T0=$(date +%s.%N)
# The restarted coordinator goes on in the same metrics CSV.
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" --bind "$EP" --metrics-csv "$WORK/before.csv" \
  > "$WORK/after.out" 2> "$WORK/after.err" &
CPID=$!; PIDS+=($CPID)
# The first resumed round has closed once the CSV holds the header, the rounds before the
# checkpoint and one more row.
for _ in $(seq 1 600); do
  R=$(sed -n 's/.*resumed from checkpoint .* at round \([0-9]*\).*/\1/p' "$WORK/after.out")
  [ -n "$R" ] && [ "$(wc -l < "$WORK/before.csv")" -ge $((R + 2)) ] && break
  sleep 0.05
done
T1=$(date +%s.%N)
wait $CPID || { tail -n 20 "$WORK/after.out" "$WORK/after.err"; fail "restarted coordinator exited with $?"; }
for p in "${WPIDS[@]}"; do wait "$p" || fail "a worker exited non-zero after the restart"; done

grep -q "resumed from checkpoint" "$WORK/after.out" || fail "the restarted coordinator did not resume"
grep -q "^final: rounds=$ROUNDS " "$WORK/after.out" || { tail -n 20 "$WORK/after.out" "$WORK/after.err"; fail "no final line"; }
RESUMED_AT=$(sed -n 's/.*resumed from checkpoint .* at round \([0-9]*\).*/\1/p' "$WORK/after.out")
ref=$(grep '^model:' "$WORK/after.out" | sed 's/.*checksum=//')
for i in 0 1 2; do
  grep -Eq "unknown session|re-joining" "$WORK/run-w$i.out" || fail "worker $i never re-joined"
  got=$(grep '^replica:' "$WORK/run-w$i.out" | sed 's/.*checksum=//')
  [ "$got" = "$ref" ] || fail "worker $i replica checksum $got != coordinator $ref"
done
ACC=$(final_accuracy "$WORK/after.out")
[ -n "$ACC" ] || fail "the restarted run printed no final accuracy"
python3 - "$REF_ACC" "$ACC" "$WORK/before.csv" "$RESUMED_AT" "$KILLED_AT" "$T0" "$T1" "$ROUNDS" "$EVERY" <<'PY'
import csv, sys
ref, acc = float(sys.argv[1]), float(sys.argv[2])
rows = list(csv.DictReader(open(sys.argv[3])))
resumed, killed, every = int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[9])
# One CSV over the kill: every round once, none skipped, the redone ones not twice.
rounds = [int(r["round"]) for r in rows]
assert rounds == list(range(int(sys.argv[8]))), (rounds[:3], len(rounds))
# From the last checkpoint (every `every` rounds), not an older one: at most `every` rounds redone.
assert resumed % every == 0 and killed - every <= resumed <= killed, (resumed, killed, every)
assert int(rows[-1]["participants"]) == 3, rows[-1]["participants"]
print(f"killed after round {killed - 1}, resumed at round {resumed} "
      f"(redid {killed - resumed} rounds); first resumed round closed "
      f"{float(sys.argv[7]) - float(sys.argv[6]):.2f} s after the restart")
print(f"final accuracy {acc:.4f}, undisturbed {ref:.4f}")
assert abs(acc - ref) <= 0.01, (acc, ref)
PY

# 3. The finished reference run, started again: with the same max_rounds there is nothing to do
# (said, exit 0, no round trained); with a larger one it trains on from its last round.
rm -f "$WORK/endpoint"
timeout 60 "$BIN/tern-coordinator" --config "$WORK/ref.yaml" > "$WORK/again.out" 2>&1 ||
  { cat "$WORK/again.out"; fail "restarting a finished run exited non-zero"; }
grep -q "training had already finished at round $ROUNDS" "$WORK/again.out" ||
  { cat "$WORK/again.out"; fail "restarting a finished run did not say it had finished"; }
grep -q "^final: rounds=$ROUNDS " "$WORK/again.out" || fail "restarting a finished run trained"
MORE=$((ROUNDS + 10))
start_cluster "$WORK/ref.yaml" "$WORK/more.csv" more more --max-rounds "$MORE"
wait $CPID || { tail -n 20 "$WORK/more.out" "$WORK/more.err"; fail "extended run exited with $?"; }
for p in "${WPIDS[@]}"; do wait "$p" || fail "a worker of the extended run exited non-zero"; done
grep -q "^final: rounds=$MORE " "$WORK/more.out" || { tail "$WORK/more.out"; fail "the extended run did not reach round $MORE"; }
FIRST=$(sed -n 2p "$WORK/more.csv" | cut -d, -f1)
[ "$FIRST" = "$ROUNDS" ] || fail "the extended run started at round $FIRST, not $ROUNDS"

# 4. SIGTERM with checkpoints is a pause: the coordinator writes its checkpoint at the round it
# stopped in and exits 0 without telling the workers to finish; they wait, re-join the restarted
# coordinator, and training goes on from that round, nothing redone.
pause_cluster pause 60
[ "$STOPPED" -lt "$ROUNDS" ] || fail "training finished before the pause"
sleep 1
for p in "${WPIDS[@]}"; do kill -0 "$p" 2>/dev/null || fail "a worker ended at the pause"; done
"$BIN/tern-coordinator" --config "$WORK/pause.yaml" --bind "$EP" --metrics-csv "$WORK/pause.csv" \
  > "$WORK/pause2.out" 2> "$WORK/pause2.err" &
CPID=$!; PIDS+=($CPID)
wait $CPID || { tail -20 "$WORK/pause2.out"; fail "the coordinator restarted after the pause exited with $?"; }
for p in "${WPIDS[@]}"; do wait "$p" || fail "a worker exited non-zero after the pause"; done
grep -q "resumed from checkpoint .* at round $STOPPED\b" "$WORK/pause2.out" ||
  { grep resumed "$WORK/pause2.out"; fail "the restart did not resume at round $STOPPED"; }
grep -q "^final: rounds=$ROUNDS " "$WORK/pause2.out" || fail "training did not finish after the pause"
# The workers' replicas were the paused model: re-joining, they were not sent it again (a worker
# whose last round start the pause cut off gets the whole model), and every replica ends on the
# model all the same.
welcomed=$(grep -c "holds the model of round $STOPPED: welcomed without it" "$WORK/pause2.out" || true)
[ "$welcomed" -ge 1 ] || fail "no worker re-joining after the pause was welcomed without the model"
ref=$(grep '^model:' "$WORK/pause2.out" | sed 's/.*checksum=//')
for i in 0 1 2; do
  got=$(grep '^replica:' "$WORK/pause-w$i.out" | sed 's/.*checksum=//')
  [ "$got" = "$ref" ] || fail "after the pause worker $i replica checksum $got != coordinator $ref"
done
python3 - "$WORK/pause.csv" "$ROUNDS" <<'PY'
import csv, sys
rounds = [int(r["round"]) for r in csv.DictReader(open(sys.argv[1]))]
assert rounds == list(range(int(sys.argv[2]))), (rounds[:3], len(rounds))
PY

# 5. A pause, then a restart with max_rounds at the paused round: nothing is left to train, and
# the workers waiting for the run are told it has finished and exit 0. Before, the coordinator
# trained one round past max_rounds (and with a smaller max_rounds refused the checkpoint as
# damaged, exit 1, while the workers waited forever).
pause_cluster stop 30
"$BIN/tern-coordinator" --config "$WORK/stop.yaml" --bind "$EP" --metrics-csv "$WORK/stop.csv" \
  --max-rounds "$STOPPED" > "$WORK/stop2.out" 2> "$WORK/stop2.err" &
CPID=$!; PIDS+=($CPID)
wait $CPID || { tail -20 "$WORK/stop2.out"; fail "the coordinator restarted at its max_rounds exited with $?"; }
grep -q "training had already finished at round $STOPPED" "$WORK/stop2.out" ||
  { tail "$WORK/stop2.out"; fail "the restart at max_rounds did not say training had finished"; }
grep -q "^final: rounds=$STOPPED " "$WORK/stop2.out" || { tail "$WORK/stop2.out"; fail "the restart at max_rounds trained"; }
for p in "${WPIDS[@]}"; do
  for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$p" 2>/dev/null && fail "a worker still waits for a run that has finished"
  wait "$p" || fail "a worker told the run had finished exited non-zero"
done
[ "$(($(wc -l < "$WORK/stop.csv") - 1))" -eq "$STOPPED" ] || fail "rows were written past max_rounds"

# 6. A checkpoint path that can never be written is refused at start-up, before listening.
rm -f "$WORK/endpoint"
coordinator_config "$WORK/bad.yaml" "$WORK/no-such-dir/c.ckpt"
set +e
timeout 60 "$BIN/tern-coordinator" --config "$WORK/bad.yaml" > "$WORK/bad.out" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] || { cat "$WORK/bad.out"; fail "unwritable checkpoint path: exit $rc, not 1"; }
grep -q "no-such-dir/c.ckpt.tmp: cannot create" "$WORK/bad.out" || { cat "$WORK/bad.out"; fail "no clear message"; }
[ ! -e "$WORK/endpoint" ] || fail "the coordinator listened before refusing its checkpoint path"
echo "PASS: coordinator killed and restarted; all workers continued; replicas match ($ref);" \
  "a finished run restarts idle, or trains on to a larger max_rounds; SIGTERM pauses and a" \
  "restart resumes at that round ($welcomed of 3 workers welcomed without the model), one at its max_rounds trains nothing and releases the workers;" \
  "a bad checkpoint path is refused at start-up"
