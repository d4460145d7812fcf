#!/usr/bin/env bash
# Every system call the daemons make is one their systemd units allow. A unit's
# SystemCallFilter kills the process (SIGSYS) at the first call outside it, so a call the daemons
# need but the filter denies makes the service die as it starts and restart forever. The
# filter's groups are expanded with `systemd-analyze syscall-filter`; a short cluster (with
# checkpoints and the HTTP endpoint, asked once) runs under strace, and each call it made is
# checked against the unit of the daemon that made it.
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

write_coordinator "$WORK/coord.yaml" 30 2 "checkpoint: {path: $WORK/coord.ckpt, every: 3}
http: {bind: \"127.0.0.1:0\", url_file: $WORK/coord.url}"
write_worker "$WORK/worker.yaml" PLACEHOLDER 2
strace -ff -qq -o "$WORK/coord.trace" \
  "$BIN/tern-coordinator" --config "$WORK/coord.yaml" > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
EP=$(cat "$WORK/endpoint")
sed -i "s|PLACEHOLDER|$EP|" "$WORK/worker.yaml"
printf 'http: {bind: "127.0.0.1:0"}\n' >> "$WORK/worker.yaml"
for i in 0 1; do
  strace -ff -qq -o "$WORK/w$i.trace" "$BIN/tern-worker" --config "$WORK/worker.yaml" \
    --name "w$i" --shard-index "$i" > "$WORK/w$i.out" 2> "$WORK/w$i.err" &
  PIDS+=($!)
done
wait_for_file "$WORK/coord.url"
python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1] + "/metrics").read()' \
  "$(cat "$WORK/coord.url")" || fail "the coordinator's /metrics did not answer"
for p in "${PIDS[@]}"; do wait "$p" || fail "a daemon exited with $? (see $WORK)"; done
grep -q '^final: rounds=30 ' "$WORK/coord.out" || { cat "$WORK/coord.err"; fail "no final line"; }

UNITS="$SRC/deploy/systemd"
allowed "$UNITS/tern-coordinator.service" > "$WORK/coord.allowed"
allowed "$UNITS/tern-worker@.service" > "$WORK/worker.allowed"
[ "$(wc -l < "$WORK/coord.allowed")" -gt 100 ] || fail "the coordinator unit's filter did not expand"
used "$WORK/coord.trace" > "$WORK/coord.used"
cat "$WORK"/w0.trace.* > /dev/null || fail "no worker trace"
{ used "$WORK/w0.trace"; used "$WORK/w1.trace"; } | sort -u > "$WORK/worker.used"
[ "$(wc -l < "$WORK/coord.used")" -gt 20 ] || fail "the coordinator's trace names too few calls"
bad=$(comm -23 "$WORK/coord.used" "$WORK/coord.allowed")
[ -z "$bad" ] || fail "tern-coordinator.service's SystemCallFilter denies calls the coordinator makes: $bad"
bad=$(comm -23 "$WORK/worker.used" "$WORK/worker.allowed")
[ -z "$bad" ] || fail "tern-worker@.service's SystemCallFilter denies calls the worker makes: $bad"
echo "PASS: the units' system call filters admit all $(sort -u "$WORK/coord.used" "$WORK/worker.used" | wc -l) calls the daemons made"
