#!/usr/bin/env bash
# The coordinator's checkpoint on disk (docs/reliability.md): while checkpoints cannot be written
# /healthz is degraded with the reason (and ok again after the next written one), the failures
# logged at a bounded rate and counted; a damaged newest checkpoint falls back to the previous
# generation with an error logged and counted; with neither usable, or a path that is no regular
# file, the coordinator refuses to start (non-zero exit, a clear message) instead of starting
# afresh.
source "$(dirname "$0")/lib.sh"

CK="$WORK/ck/coord.ckpt"
mkdir -p "$WORK/ck"
write_coordinator "$WORK/coord.yaml" 100000 1 "checkpoint: {path: $CK, every: 5}
http: {bind: \"127.0.0.1:0\", url_file: $WORK/coord.url}"

# healthz: "STATUS BODY" of the coordinator's /healthz.
healthz() {
  python3 - "$(cat "$WORK/coord.url")/healthz" <<'PY'
import sys, urllib.request, urllib.error
try:
    r = urllib.request.urlopen(sys.argv[1], timeout=5)
    print(r.status, r.read().decode().strip())
except urllib.error.HTTPError as e:
    print(e.code, e.read().decode().strip())
PY
}
# metric NAME: its value in /metrics (empty when absent).
metric() {
  python3 - "$(cat "$WORK/coord.url")/metrics" "$1" <<'PY'
import sys, urllib.request
for line in urllib.request.urlopen(sys.argv[1], timeout=5).read().decode().splitlines():
    if line.split(" ")[0] == sys.argv[2]:
        print(int(float(line.split(" ")[1])))
PY
}
# wait_health PREFIX WHAT: until /healthz answers with PREFIX (30 s at most).
wait_health() {
  for _ in $(seq 1 300); do case "$(healthz)" in "$1"*) return 0;; esac; sleep 0.1; done
  fail "$2 (/healthz: $(healthz))"
}
rows() { [ -s "$WORK/metrics.csv" ] && echo $(($(wc -l < "$WORK/metrics.csv") - 1)) || echo 0; }
# flip FILE: one bit flipped in the middle of FILE.
flip() {
  python3 - "$1" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read()); b[len(b) // 2] ^= 0x04
open(sys.argv[1], "wb").write(bytes(b))
PY
}

# 1. Checkpoints that cannot be written turn /healthz degraded, and it recovers. A directory in
# the temporary file's place stops the write even for root (chmod would not).
start_coordinator
wait_for_file "$WORK/coord.url"
write_worker "$WORK/worker.yaml" "$EP" 1
start_worker 0 w0
for _ in $(seq 1 600); do [ "$(rows)" -gt 20 ] && break; sleep 0.05; done
[ "$(rows)" -gt 20 ] || fail "fewer than 20 rounds trained"
wait_health "200 ok" "/healthz is not ok while checkpoints are written"
[ -s "$CK" ] && [ -s "$CK.prev" ] || fail "no two checkpoint generations after 20 rounds"
# The coordinator may hold its own temporary file there for a moment: retry until the directory
# stands in its place.
for _ in $(seq 1 200); do mkdir "$CK.tmp" 2>/dev/null && break; sleep 0.01; done
[ -d "$CK.tmp" ] || fail "no directory could take the temporary checkpoint's place"
wait_health "503 degraded: checkpoint not written" "/healthz did not report failing checkpoints"
AT=$(rows)
for _ in $(seq 1 600); do [ "$(rows)" -gt $((AT + 40)) ] && break; sleep 0.05; done
FAILED=$(metric tern_checkpoint_write_failures_total)
[ "${FAILED:-0}" -ge 5 ] || fail "fewer than 5 failed checkpoint writes counted (${FAILED:-none})"
LOGGED=$(grep -c "not written" "$WORK/coord.out" || true)
[ "$LOGGED" -le 2 ] || fail "$FAILED failed checkpoint writes took $LOGGED log lines (not rate-limited)"
rmdir "$CK.tmp"
wait_health "200 ok" "/healthz stayed degraded after a checkpoint was written again"
grep -q "checkpoint written again" "$WORK/coord.out" || fail "the recovery was not logged"
kill -TERM "$CPID"
set +e; wait "$CPID"; rc=$?; set -e
[ $rc -eq 0 ] || { tail "$WORK/coord.out" "$WORK/coord.err"; fail "the paused coordinator exited $rc"; }
kill -9 "$WPID" 2>/dev/null || true
wait "$WPID" 2>/dev/null || true
STOPPED=$(sed -n 's/.*stop requested: checkpoint written at round \([0-9]*\).*/\1/p' "$WORK/coord.out")
[ -n "$STOPPED" ] || fail "SIGTERM did not write a pause checkpoint"

# 2. A flipped bit in the newest checkpoint: the coordinator resumes the previous one (up to 5
# rounds earlier), says so as an error, counts it, and keeps the damaged file aside.
flip "$CK"
rm -f "$WORK/endpoint" "$WORK/coord.url"
start_coordinator
wait_for_file "$WORK/coord.url"
wait_for_line "$WORK/coord.out" "resumed from checkpoint $CK.prev at round" "no resume from the previous generation"
grep -q "\[error\].*checkpoint $CK is unusable (checkpoint does not match its whole-file checksum" \
  "$WORK/coord.out" || { cat "$WORK/coord.out"; fail "the fallback was not logged as an error with its reason"; }
R=$(sed -n 's/.*resumed from checkpoint .* at round \([0-9]*\).*/\1/p' "$WORK/coord.out")
[ "$R" -le "$STOPPED" ] || fail "resumed at round $R, past the damaged checkpoint's $STOPPED"
[ "$(metric tern_checkpoint_fallbacks_total)" = 1 ] || fail "the fallback was not counted"
[ -s "$CK.damaged" ] || fail "the damaged checkpoint was not kept aside"
kill -TERM "$CPID"
wait "$CPID" || fail "the resumed coordinator exited with $?"

# refuses WHAT PATTERN: the coordinator on coord.yaml exits non-zero within 20 s, before
# listening, with PATTERN on stderr.
refuses() {
  rm -f "$WORK/endpoint"
  set +e
  timeout 20 "$BIN/tern-coordinator" --config "$WORK/coord.yaml" > "$WORK/r.out" 2> "$WORK/r.err"
  rc=$?
  set -e
  [ $rc -ne 0 ] && [ $rc -ne 124 ] || fail "$1: exit $rc (124: it hung)"
  grep -q "$2" "$WORK/r.err" || { cat "$WORK/r.out" "$WORK/r.err"; fail "$1: no clear message"; }
  [ ! -e "$WORK/endpoint" ] || fail "$1: the coordinator listened"
}

# 3. Both generations damaged: no silent fresh start.
flip "$CK"
flip "$CK.prev"
refuses "two damaged generations" "no usable checkpoint: $CK: checkpoint does not match"

# 4. Paths that are no regular file: refused, never read (/dev/zero), never waited on (FIFO).
rm -f "$CK" "$CK.prev"
ln -s "$WORK/ck/nothing" "$CK"
refuses "a dangling symbolic link" "symbolic link to nothing"
rm "$CK" && mkfifo "$CK"
refuses "a FIFO" "is a FIFO"
rm "$CK" && mkdir "$CK"
refuses "a directory" "is a directory"
rmdir "$CK"
write_coordinator "$WORK/coord.yaml" 100000 1 "checkpoint: {path: /dev/zero, every: 5}"
refuses "/dev/zero" "is a device"
echo "PASS: checkpoint failures degrade /healthz; a damaged checkpoint falls back or stops the start"
