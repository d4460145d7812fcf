#!/usr/bin/env bash
# One multipart message of 16M empty frames (2 bytes each on the wire, 32 MB) from an
# unauthenticated peer against a plaintext coordinator under a 1 GiB address-space limit (a small
# board's memory): its frame guard closes the connection at the first frame past a tern
# message's, so libzmq never buffers the message (it would hold about 64 bytes per frame, over
# 1 GiB here: before the guard this killed the coordinator). The coordinator counts the cut,
# answers the peer's next message over a new connection, and then trains a worker to the end;
# its peak RSS grows by less than 256 MB. docs/security.md gives the measurement.
source "$(dirname "$0")/lib.sh"

FRAMES=${FRAMES:-$((16 << 20))}
LIMIT_MB=${LIMIT_MB:-256}
[ -x "$BIN/tern-frame-flood" ] || fail "$BIN/tern-frame-flood not built"
[ -d "$FMNIST" ] || { echo "SKIP: no Fashion-MNIST at $FMNIST"; exit 77; }

write_coordinator "$WORK/coord.yaml" 20 1
prlimit --as=$((1 << 30)) "$BIN/tern-coordinator" --config "$WORK/coord.yaml" \
  --metrics-csv "$WORK/metrics.csv" > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
EP=$(cat "$WORK/endpoint")

hwm_kb() { sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$CPID/status"; }
BEFORE=$(hwm_kb)
"$BIN/tern-frame-flood" --endpoint "$EP" --frames "$FRAMES" --timeout 120 > "$WORK/flood.out" \
  || { cat "$WORK/flood.out"; tail -n 20 "$WORK/coord.out" "$WORK/coord.err"; fail "the flood was not answered"; }
cat "$WORK/flood.out"
kill -0 $CPID 2>/dev/null || { tail -20 "$WORK/coord.err"; fail "the coordinator died of the flood"; }
AFTER=$(hwm_kb)
GROWTH_MB=$(( (AFTER - BEFORE) / 1024 ))
echo "coordinator VmHWM: $((BEFORE / 1024)) MB before the flood, $((AFTER / 1024)) MB after ($GROWTH_MB MB for $FRAMES frames)"
[ "$GROWTH_MB" -lt "$LIMIT_MB" ] || fail "peak RSS grew by $GROWTH_MB MB (limit $LIMIT_MB MB)"

# It keeps serving: a worker joins and trains every round.
write_worker "$WORK/worker.yaml" "$EP" 1
"$BIN/tern-worker" --config "$WORK/worker.yaml" > "$WORK/w.out" 2> "$WORK/w.err" &
WPID=$!; PIDS+=($WPID)
wait $CPID || { tail -n 20 "$WORK/coord.out" "$WORK/coord.err"; fail "coordinator exited with $?"; }
wait $WPID || fail "the worker exited non-zero"
grep -q "^final: rounds=20 " "$WORK/coord.out" || fail "no final line after 20 rounds"
grep -q "flood=cut" "$WORK/flood.out" || fail "the flood's connection was not cut"
grep -q "guard_refused=1" "$WORK/coord.out" || { grep '^connections' "$WORK/coord.out"; fail "the cut was not counted"; }
echo "PASS: $FRAMES frames in one message cut at the guard and counted; peak RSS +$GROWTH_MB MB; 20 rounds trained after"
