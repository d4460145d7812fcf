#!/usr/bin/env bash
# 10,000 malformed and hostile messages (random bytes, truncated and mutated messages, too many
# frames, oversized payloads and frames, wrong versions, NaN payloads, foreign sessions, message
# types a worker never sends, bad joins) hit the coordinator during training over loopback:
# it keeps serving, the final model is bit-identical with an undisturbed run's, and its counters
# account for every message (each one that reaches the core is refused, answered and counted
# once; each frame over max_message_bytes is dropped by the transport with its connection).
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-1000}
COUNT=${BARRAGE_COUNT:-10000}
MAX_BYTES=1048576
[ -x "$BIN/tern-barrage" ] || fail "$BIN/tern-barrage not built"

# Rounds close only when every worker pushed (no deadline closes, nobody marked gone), and the
# workers join one at a time so ids and shards match between the two runs: the aggregation order
# is then fixed and the final models are comparable bit for bit.
config() {  # NAME
  write_coordinator "$WORK/$1.yaml" "$ROUNDS" 3 "max_message_bytes: $MAX_BYTES"
  sed -i 's/^round_deadline_seconds: .*/round_deadline_seconds: 60/;
          s/^worker_patience_seconds: .*/worker_patience_seconds: 60/;
          s/^eval_every: .*/eval_every: 1/' "$WORK/$1.yaml"
}

start_run() {  # NAME
  rm -f "$WORK/endpoint"
  config "$1"
  "$BIN/tern-coordinator" --config "$WORK/$1.yaml" --metrics-csv "$WORK/$1.csv" \
    > "$WORK/$1.out" 2> "$WORK/$1.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  EP=$(cat "$WORK/endpoint")
  write_worker "$WORK/$1-worker.yaml" "$EP" 3
  sed -i 's/^coordinator_patience_seconds: .*/coordinator_patience_seconds: 60/' "$WORK/$1-worker.yaml"
  WPIDS=()
  for i in 0 1 2; do
    "$BIN/tern-worker" --config "$WORK/$1-worker.yaml" --name "w$i" --shard-index $i \
      > "$WORK/$1-w$i.out" 2> "$WORK/$1-w$i.err" &
    WPIDS+=($!); PIDS+=($!)
    for _ in $(seq 1 600); do grep -q "worker w$i joined as id $i " "$WORK/$1.out" && break; sleep 0.05; done
    grep -q "worker w$i joined as id $i " "$WORK/$1.out" || fail "worker w$i did not join as id $i"
  done
}

finish_run() {  # NAME
  wait $CPID || { tail -n 20 "$WORK/$1.out" "$WORK/$1.err"; fail "$1: coordinator exited with $?"; }
  for p in "${WPIDS[@]}"; do wait "$p" || fail "$1: a worker exited non-zero"; done
  grep -q "^final: rounds=$ROUNDS " "$WORK/$1.out" || fail "$1: no final line"
  local model
  model=$(grep '^model:' "$WORK/$1.out" | sed 's/.*checksum=//')
  for i in 0 1 2; do
    got=$(grep '^replica:' "$WORK/$1-w$i.out" | sed 's/.*checksum=//')
    [ "$got" = "$model" ] || fail "$1: worker $i replica $got != coordinator $model"
  done
}

rejected_total() { sed -n 's/^rejections: total=\([0-9]*\).*/\1/p' "$WORK/$1.out"; }

# 1. Undisturbed.
start_run ref
finish_run ref
REF_MODEL=$(grep '^model:' "$WORK/ref.out")
REF_REJECTED=$(rejected_total ref)

# 2. The same run under the barrage, started once training is under way.
start_run hit
for _ in $(seq 1 600); do
  [ -s "$WORK/hit.csv" ] && [ "$(wc -l < "$WORK/hit.csv")" -ge 3 ] && break
  sleep 0.05
done
T0=$(date +%s.%N)
ROWS_AT_START=$(($(wc -l < "$WORK/hit.csv") - 1))
"$BIN/tern-barrage" --endpoint "$EP" --count "$COUNT" --seed 7 --dim 7850 \
  --max-message-bytes "$MAX_BYTES" > "$WORK/barrage.out" 2> "$WORK/barrage.err" \
  || { cat "$WORK/barrage.out" "$WORK/barrage.err"; fail "barrage: not every message was answered"; }
T1=$(date +%s.%N)
ROWS_AT_END=$(($(wc -l < "$WORK/hit.csv") - 1))
kill -0 $CPID 2>/dev/null || fail "the coordinator ended before the barrage did"
# It kept serving: rounds closed while the barrage ran (it takes seconds; a round, milliseconds).
[ "$ROWS_AT_END" -gt "$ROWS_AT_START" ] ||
  fail "no round closed during the barrage ($ROWS_AT_START rows before, $ROWS_AT_END after)"
finish_run hit
cat "$WORK/barrage.out"

HIT_MODEL=$(grep '^model:' "$WORK/hit.out")
[ "$HIT_MODEL" = "$REF_MODEL" ] || fail "model under barrage ($HIT_MODEL) != undisturbed ($REF_MODEL)"
TO_CORE=$(sed -n 's/^barrage: .* to_core=\([0-9]*\) .*/\1/p' "$WORK/barrage.out")
HIT_REJECTED=$(rejected_total hit)
grep '^rejections:' "$WORK/hit.out"
[ "$HIT_REJECTED" -eq $((REF_REJECTED + TO_CORE)) ] ||
  fail "coordinator counted $HIT_REJECTED rejections, expected $REF_REJECTED + $TO_CORE"
python3 - "$WORK/hit.csv" "$HIT_REJECTED" "$ROWS_AT_END" "$T0" "$T1" "$ROWS_AT_START" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert int(rows[-1]["rejected"]) == int(sys.argv[2]), (rows[-1]["rejected"], sys.argv[2])
assert all(int(r["participants"]) == 3 for r in rows), "a round closed without every worker"
t = [float(r["time_s"]) for r in rows]
gaps = [b - a for a, b in zip(t, t[1:])]
print(f"barrage lasted {float(sys.argv[5]) - float(sys.argv[4]):.1f} s; "
      f"{int(sys.argv[3]) - int(sys.argv[6])} rounds closed during it, {int(sys.argv[3])} by its "
      f"end; longest round gap {max(gaps):.3f} s")
PY
echo "PASS: $COUNT hostile messages; model identical to the undisturbed run; every message accounted for"
