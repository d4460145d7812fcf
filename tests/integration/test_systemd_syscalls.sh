#!/usr/bin/env bash
# Every system call the daemons make is one their systemd units allow. A unit's
# SystemCallFilter kills the process (SIGSYS) at the first call outside it, so a call the daemons
# need but the filter denies makes the service die as it starts and restart forever. The
# filter's groups are expanded with `systemd-analyze syscall-filter`; a short cluster runs under
# strace as systemd would start it (a notify socket, a watchdog), with checkpoints, every HTTP
# endpoint asked, and SIGTERM to each daemon, once in plaintext and once with CURVE, and each call
# it made is checked against the unit of the daemon that made it.
source "$(dirname "$0")/lib.sh"

command -v systemd-analyze > /dev/null || { echo "SKIP: systemd-analyze not installed"; exit 77; }
command -v strace > /dev/null || fail "strace is not installed (deploy/install-deps.sh installs it)"
strace -f -qq -o /dev/null true 2> /dev/null ||
  { echo "SKIP: this environment does not allow ptrace"; exit 77; }

# allowed UNIT: the calls the unit's SystemCallFilter lines admit, one per line.
allowed() {
  python3 - "$1" <<'PY'
import subprocess, sys
cache = {}
def expand(item):
    if not item.startswith("@"):
        return {item}
    if item not in cache:
        out = subprocess.run(["systemd-analyze", "syscall-filter", item], capture_output=True,
                             text=True, check=True).stdout
        names = set()
        for line in out.splitlines()[1:]:
            t = line.strip()
            if t and not t.startswith("#"):
                names |= expand(t)
        cache[item] = names
    return cache[item]
allow, deny = None, set()
for line in open(sys.argv[1]):
    if not line.startswith("SystemCallFilter="):
        continue
    value = line.split("=", 1)[1].strip()
    if value.startswith("~"):
        for item in value[1:].split():
            deny |= expand(item)
    else:
        allow = allow or set()
        for item in value.split():
            allow |= expand(item)
if allow is None:
    sys.exit("no allow-list in " + sys.argv[1])
print("\n".join(sorted(allow - deny)))
PY
}

# used TRACE-PREFIX: the calls named in strace -ff output files TRACE-PREFIX.*, one per line.
used() {
  cat "$1".* | sed -nE 's/^([a-z0-9_]+)\(.*/\1/p; s/^<\.\.\. ([a-z0-9_]+) resumed>.*/\1/p' |
    sort -u
}

# As systemd starts them: a notify socket (READY, STATUS, watchdog pings) that a listener reads.
python3 - "$WORK/notify" "$WORK/notify.log" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as log:
    while True:
        log.write(s.recv(4096) + b"\n")
PY
PIDS+=($!)
for _ in $(seq 1 100); do [ -S "$WORK/notify" ] && break; sleep 0.05; done
[ -S "$WORK/notify" ] || fail "the notify listener did not start"
export NOTIFY_SOCKET="$WORK/notify" WATCHDOG_USEC=2000000

# run_cluster TAG COORDINATOR-SECURITY WORKER-SECURITY: the cluster under strace, traces in
# $WORK/TAG.
run_cluster() {
  mkdir -p "$WORK/$1"
  rm -f "$WORK/endpoint"
  : > "$WORK/notify.log"  # each run's own READY and WATCHDOG lines
  SECURITY="$2" write_coordinator "$WORK/$1/coord.yaml" 100000 2 "checkpoint: {path: $WORK/$1/coord.ckpt, every: 3}
http: {bind: \"127.0.0.1:0\", url_file: $WORK/$1/coord.url}
metrics_csv: $WORK/$1/coord.csv"
  # -y names each descriptor's file: the CSV's sync is found among the coordinator's calls.
  strace -ff -qq -y -o "$WORK/$1/coord.trace" \
    "$BIN/tern-coordinator" --config "$WORK/$1/coord.yaml" > "$WORK/$1/coord.out" 2> "$WORK/$1/coord.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  # The daemon itself too: a failed run's cleanup kills strace, which lets its tracee run on.
  PIDS+=($(pgrep -P "$CPID" | head -1))
  EP=$(cat "$WORK/endpoint")
  WPIDS=()
  for i in 0 1; do
    SECURITY="$3" write_worker "$WORK/$1/w$i.yaml" "$EP" 2
    printf 'http: {bind: "127.0.0.1:0", url_file: %s}\n' "$WORK/$1/w$i.url" >> "$WORK/$1/w$i.yaml"
    strace -ff -qq -o "$WORK/$1/w$i.trace" "$BIN/tern-worker" --config "$WORK/$1/w$i.yaml" \
      --name "w$i" --shard-index "$i" > "$WORK/$1/w$i.out" 2> "$WORK/$1/w$i.err" &
    WPIDS+=($!); PIDS+=($!)
  done
  get() { python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).read()' "$1"; }
  for f in coord w0 w1; do
    wait_for_file "$WORK/$1/$f.url"
    get "$(cat "$WORK/$1/$f.url")/metrics" || fail "$f's /metrics did not answer"
    get "$(cat "$WORK/$1/$f.url")/status" || fail "$f's /status did not answer"
  done
  for p in "${WPIDS[@]}"; do PIDS+=($(pgrep -P "$p" | head -1)); done
  # A few checkpoints, then the stops: SIGTERM pauses the coordinator (a last checkpoint) and ends
  # each worker.
  for _ in $(seq 1 300); do [ -s "$WORK/$1/coord.ckpt" ] && break; sleep 0.1; done
  # (one every 3 rounds: the workers were admitted and trained)
  [ -s "$WORK/$1/coord.ckpt" ] || fail "no checkpoint was written ($1)"
  sleep 1
  # The signals go to the daemons, not to strace (their parent).
  daemon() { pgrep -P "$1" | head -1; }
  kill -TERM "$(daemon "$CPID")"
  # (the work folder goes with the test: a failure shows the daemon's last lines here)
  wait "$CPID" ||
    { status=$?; tail "$WORK/$1/coord.out" "$WORK/$1/coord.err"; fail "the coordinator exited with $status"; }
  grep -q 'stop requested: checkpoint written' "$WORK/$1/coord.out" ||
    { tail "$WORK/$1/coord.out" "$WORK/$1/coord.err"; fail "the coordinator did not pause"; }
  for p in "${WPIDS[@]}"; do
    kill -TERM "$(daemon "$p")"
    wait "$p" || { status=$?; tail "$WORK/$1"/w*.out "$WORK/$1"/w*.err; fail "a worker exited with $status"; }
  done
  grep -q 'READY=1' "$WORK/notify.log" || fail "no daemon said READY=1 on the notify socket"
  grep -q 'WATCHDOG=1' "$WORK/notify.log" || fail "no daemon pinged the watchdog"
}

run_cluster plain none none
# With CURVE (docs/security.md) libzmq's handshake and key handling run too.
mkdir -p "$WORK/keys" "$WORK/allow"
"$BIN/tern-coordinator" keygen --out "$WORK/keys/coordinator" > /dev/null
"$BIN/tern-worker" keygen --out "$WORK/keys/worker" > /dev/null
cp "$WORK/keys/worker.pub" "$WORK/allow/"
run_cluster curve \
  "{mode: curve, secret_key_file: $WORK/keys/coordinator.key, allowlist: $WORK/allow}" \
  "{mode: curve, secret_key_file: $WORK/keys/worker.key, server_public_key_file: $WORK/keys/coordinator.pub}"
grep -q 'CURVE on: .*1 worker key' "$WORK/curve/coord.out" "$WORK/curve/coord.err" ||
  fail "the second cluster did not say it runs CURVE (see $WORK/curve)"

# Before each checkpoint the metrics rows written so far were synced to disk: a power loss right
# after a checkpoint must not leave the rounds before it, which a resumed run does not redo,
# without their rows. (glibc renames with renameat or renameat2 on some architectures.)
python3 - "$WORK"/plain/coord.trace.* <<'PY' || fail "a checkpoint was written before the metrics rows were synced"
import re, sys
checkpoints = syncs = 0
for name in sys.argv[1:]:
    unsynced = False
    for line in open(name, errors="replace"):
        if re.match(r'(write|pwrite64|writev)\(\d+<[^>]*/coord\.csv>', line):
            unsynced = True
        elif re.match(r'(fsync|fdatasync)\(\d+<[^>]*/coord\.csv>\) += 0', line):
            unsynced = False
            syncs += 1
        elif re.match(r'(rename|renameat2?)\((AT_FDCWD[^,]*, )?"[^"]*/coord\.ckpt\.tmp"', line):
            checkpoints += 1
            if unsynced:
                sys.exit("checkpoint %d renamed into place with unsynced rows before it (%s)"
                         % (checkpoints, name))
if checkpoints < 2 or syncs < 2:
    sys.exit("the trace holds %d checkpoints and %d syncs of the CSV: too few to judge"
             % (checkpoints, syncs))
print("%d checkpoints, each after the rows before it were synced" % checkpoints)
PY

UNITS="$SRC/deploy/systemd"
allowed "$UNITS/tern-coordinator.service" > "$WORK/coord.allowed"
allowed "$UNITS/tern-worker@.service" > "$WORK/worker.allowed"
[ "$(wc -l < "$WORK/coord.allowed")" -gt 100 ] || fail "the coordinator unit's filter did not expand"
{ used "$WORK/plain/coord.trace"; used "$WORK/curve/coord.trace"; } | sort -u > "$WORK/coord.used"
cat "$WORK"/plain/w0.trace.* "$WORK"/curve/w0.trace.* > /dev/null || fail "no worker trace"
for t in plain curve; do used "$WORK/$t/w0.trace"; used "$WORK/$t/w1.trace"; done |
  sort -u > "$WORK/worker.used"
[ "$(wc -l < "$WORK/coord.used")" -gt 20 ] || fail "the coordinator's trace names too few calls"
[ "$(wc -l < "$WORK/worker.used")" -gt 20 ] || fail "the workers' traces name too few calls"
for call in connect openat; do
  grep -qx "$call" "$WORK/worker.used" || fail "the workers' traces miss $call: not read right"
done
bad=$(comm -23 "$WORK/coord.used" "$WORK/coord.allowed")
[ -z "$bad" ] || fail "tern-coordinator.service's SystemCallFilter denies calls the coordinator makes: $bad"
bad=$(comm -23 "$WORK/worker.used" "$WORK/worker.allowed")
[ -z "$bad" ] || fail "tern-worker@.service's SystemCallFilter denies calls the worker makes: $bad"
echo "PASS: the units' system call filters admit all $(sort -u "$WORK/coord.used" "$WORK/worker.used" | wc -l) calls the daemons made"
