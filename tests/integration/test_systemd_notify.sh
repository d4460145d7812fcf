#!/usr/bin/env bash
# Started with NOTIFY_SOCKET pointing at a test socket (as systemd does for Type=notify), each
# daemon sends READY=1 first, then WATCHDOG=1 pings at half of WATCHDOG_USEC and STATUS= lines
# with the round, and STOPPING=1 when training ends.
source "$(dirname "$0")/lib.sh"

listen() {  # listen SOCKET OUTFILE: one line per datagram, "SECONDS TEXT", newlines shown as '|'
  python3 - "$1" "$2" <<'PY' &
import os, socket, sys, time
path, out = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path)
with open(out, "w") as f:
    while True:
        data = s.recv(4096).decode()
        f.write(f"{time.monotonic():.4f} " + data.replace("\n", "|") + "\n")
        f.flush()
PY
  PIDS+=($!)
  for _ in $(seq 1 100); do [ -S "$1" ] && return 0; sleep 0.05; done
  fail "listener did not start"
}

check_sequence() {  # check_sequence FILE NAME WATCHDOG_USEC
  python3 - "$1" "$2" "$3" <<'PY'
import statistics, sys
stamped = [l.rstrip("\n").split(" ", 1) for l in open(sys.argv[1])]
times = [float(t) for t, _ in stamped]
lines = [text for _, text in stamped]
name = sys.argv[2]
watchdog_usec = int(sys.argv[3])
assert lines, f"{name}: no notification at all"
assert lines[0].split("|")[0] == "READY=1", f"{name}: first notification is {lines[0]!r}"
events = [e for l in lines for e in l.split("|") if e]
first_watchdog = events.index("WATCHDOG=1") if "WATCHDOG=1" in events else None
assert first_watchdog is not None, f"{name}: no WATCHDOG=1 in {events}"
assert events.count("WATCHDOG=1") >= 2, f"{name}: expected repeated pings, got {events}"
# Pings come at half of WATCHDOG_USEC; systemd would kill a daemon whose pings are further apart
# than WATCHDOG_USEC. The median gap is robust to a ping delayed now and then on a busy machine.
pings = [t for t, l in zip(times, lines) if "WATCHDOG=1" in l.split("|")]
gaps = [b - a for a, b in zip(pings, pings[1:])]
median_gap = statistics.median(gaps)
assert median_gap < 0.75 * watchdog_usec / 1e6, f"{name}: median gap between pings {median_gap:.3f} s"
assert any(e.startswith("STATUS=") for e in events), f"{name}: no STATUS= line"
assert "STOPPING=1" in events, f"{name}: no STOPPING=1 in {events[-3:]}"
assert events.index("STOPPING=1") > first_watchdog, f"{name}: STOPPING=1 before any ping"
print(f"{name}: {len(events)} notifications, first READY=1, "
      f"{events.count('WATCHDOG=1')} watchdog pings (median gap {median_gap:.3f} s), then STOPPING=1")
PY
}

# Coordinator: waits for its worker (pinging the watchdog meanwhile), then trains 300 rounds,
# long enough for the worker to ping a few times too.
write_coordinator "$WORK/coord.yaml" 300 1
listen "$WORK/coord.sock" "$WORK/coord.notify"
NOTIFY_SOCKET="$WORK/coord.sock" WATCHDOG_USEC=400000 \
  "$BIN/tern-coordinator" --config "$WORK/coord.yaml" > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
for _ in $(seq 1 100); do
  [ "$(grep -c 'WATCHDOG=1' "$WORK/coord.notify" 2>/dev/null)" -ge 3 ] && break; sleep 0.1
done

# Worker: connects to that coordinator (READY once its shard is loaded and its socket connected).
write_worker "$WORK/worker.yaml" "$(cat "$WORK/endpoint")" 1
listen "$WORK/worker.sock" "$WORK/worker.notify"
NOTIFY_SOCKET="$WORK/worker.sock" WATCHDOG_USEC=400000 \
  "$BIN/tern-worker" --config "$WORK/worker.yaml" > "$WORK/w.out" 2> "$WORK/w.err" &
WPID=$!; PIDS+=($WPID)
wait "$CPID" || fail "coordinator exited with $?"
wait "$WPID" || fail "worker exited with $?"
sleep 0.3  # let the listeners write the last datagrams

check_sequence "$WORK/coord.notify" coordinator 400000
check_sequence "$WORK/worker.notify" worker 400000
grep -q 'STATUS=.*round' "$WORK/coord.notify" || fail "coordinator STATUS lacks the round"
grep -q 'STATUS=.*accuracy' "$WORK/coord.notify" || fail "coordinator STATUS lacks the accuracy"

# Without NOTIFY_SOCKET nothing is sent and nothing breaks: the other tests run that way.
echo "PASS: READY=1, then WATCHDOG=1 pings and STATUS, then STOPPING=1 from both daemons"
