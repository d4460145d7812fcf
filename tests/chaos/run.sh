#!/usr/bin/env bash
# Chaos soak: tests/chaos/run.sh BIN_DIR SRC_DIR [SECONDS=120]
# The quickstart's task (softmax on non-IID Fashion-MNIST) with 8 real workers, each in its own
# network namespace behind a veth pair to the coordinator's (on loopback when namespaces are not
# available), a coordinator that checkpoints every round and aggregates with a trimmed mean, and
# one Byzantine member for the whole run (tern-loadgen pushing noise of std 1e6). For SECONDS,
# at seeded random intervals: kill -9 of a worker (restarted a moment later), kill -9 of the
# coordinator (restarted on the same config, resuming from its checkpoint), a link cut of a
# worker for a few seconds, one multipart message of many frames, and a burst of joins under
# made-up names. Then the coordinator is paused (SIGTERM) and restarted at the round it paused
# at, which ends the run: its final line gives the accuracy and every worker is told to finish.
# Asserts: final accuracy >= ACC_BAR, every round in the metrics CSV exactly once across the
# restarts, no acknowledged round lost at a kill, no daemon exit but the kills made (no
# sanitizer report, "terminate called" or core), the coordinator's peak RSS under RSS_LIMIT_MB,
# and the Byzantine member clipped or benched in /status. docs/reliability.md ("The chaos soak").
# CHAOS_SEED picks the schedule (default 42); CHAOS_LOOPBACK=1 stays on loopback; KEEP=1 keeps
# the work directory.
set -euo pipefail
BIN="$1"
SRC="$2"
DURATION="${3:-120}"
SEED="${CHAOS_SEED:-42}"
WORKERS=8
ACC_BAR=0.80
RSS_LIMIT_MB=300
# Seconds the run trains undisturbed after the last fault, before the pause that ends it: the
# made-up names of a late join flood hold their seats until marked gone (10 s), and the model
# needs a few hundred rounds to shed what 60 noise pushers put in it.
SETTLE=20
FMNIST=/usr/share/datasets/fashion-mnist
SKIP=77
WORK="$(mktemp -d /tmp/tern-chaos.XXXXXX)"
NS_C="tern-chaos-c-$$"
NS_PREFIX="tern-chaos-w$$-"
PORT=5555
MODE=loopback
PIDS=()
declare -A WPID
CPID=""
BPID=""
CRASHES=()
CKILLS=0
RESUMES=()
HWM_MB=0
STATUS_SEEN=""

cleanup() {
  local p i
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2> /dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2> /dev/null || true; done
  if [ "$MODE" = netns ]; then
    ip netns del "$NS_C" 2> /dev/null || true
    for i in $(seq 0 $((WORKERS - 1))); do ip netns del "$NS_PREFIX$i" 2> /dev/null || true; done
  fi
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
fail() { echo "FAIL: $*" >&2; exit 1; }
log() { echo "chaos t=$((SECONDS - T0))s: $*"; }

for b in tern-coordinator tern-worker tern-loadgen tern-frame-flood; do
  [ -x "$BIN/$b" ] || fail "$BIN/$b not built"
done
command -v python3 > /dev/null || { echo "SKIP: python3 not found"; exit $SKIP; }
[ -d "$FMNIST" ] || { echo "SKIP: no Fashion-MNIST at $FMNIST"; exit $SKIP; }

# Namespaces when root and the kernel allows them: "c" holds the coordinator, the hostile peers
# and the Byzantine member (on its loopback); worker i sits in its own namespace behind a veth
# pair, 10.78.i.1 (the coordinator's side) - 10.78.i.2. Nothing is routed out of them.
setup_netns() {
  local i ns
  [ "${CHAOS_LOOPBACK:-0}" != 1 ] && [ "$(id -u)" = 0 ] && command -v ip > /dev/null || return 1
  ip netns add "$NS_C" 2> /dev/null || return 1
  MODE=netns
  ip -n "$NS_C" link set lo up
  for i in $(seq 0 $((WORKERS - 1))); do
    ns="$NS_PREFIX$i"
    ip netns add "$ns" || return 1
    ip -n "$NS_C" link add "cw$i" type veth peer name wc netns "$ns" || return 1
    ip -n "$NS_C" addr add "10.78.$i.1/30" dev "cw$i"
    ip -n "$ns" addr add "10.78.$i.2/30" dev wc
    ip -n "$ns" link set lo up
    ip -n "$NS_C" link set "cw$i" up
    ip -n "$ns" link set wc up
  done
}
if ! setup_netns; then
  [ "$MODE" = netns ] && fail "could make the coordinator's namespace but not the workers'"
  echo "chaos: no network namespaces (needs root and 'ip netns'): all on loopback, link cuts" \
    "are SIGSTOP/SIGCONT of the worker instead"
fi
# Command prefixes that run a program in the coordinator's or worker i's namespace. `ip netns
# exec` execs the program, so a backgrounded "${C[@]}" PROGRAM has the program itself as $!
# (a shell function would put a subshell there, which a kill would not reach through).
C=()
[ "$MODE" = netns ] && C=(ip netns exec "$NS_C")
w_prefix() { if [ "$MODE" = netns ]; then W=(ip netns exec "$NS_PREFIX$1"); else W=(); fi; }

if [ "$MODE" = netns ]; then BIND="tcp://0.0.0.0:$PORT"; else BIND="tcp://127.0.0.1:0"; fi
# The quickstart's coordinator (deploy/config/coordinator.yaml) with 8 workers, a checkpoint every
# round, a trimmed mean, the HTTP endpoint, and rounds enough for any soak (the end is a pause).
sed -e "s|^bind: .*|bind: $BIND|" -e 's/^min_workers: .*/min_workers: 8/' \
  -e 's/^max_rounds: .*/max_rounds: 100000000/' \
  "$SRC/deploy/config/coordinator.yaml" > "$WORK/coord.yaml"
cat >> "$WORK/coord.yaml" << YAML
endpoint_file: $WORK/endpoint
checkpoint: {path: $WORK/coord.ckpt, every: 1}
aggregation: {robust: trimmed_mean}
http: {bind: "127.0.0.1:0", url_file: $WORK/http_url}
YAML
# The quickstart's worker with 8 shards.
sed -e 's/^    total: 4/    total: 8/' -e 's/^  level: info/  level: warn/' \
  "$SRC/deploy/config/worker.yaml" > "$WORK/worker.yaml"

worker_endpoint() { if [ "$MODE" = netns ]; then echo "tcp://10.78.$1.1:$PORT"; else echo "$EP"; fi; }
local_endpoint() { if [ "$MODE" = netns ]; then echo "tcp://127.0.0.1:$PORT"; else echo "$EP"; fi; }

# start_coordinator [FLAG...]: the coordinator (its output appended to coord.out, coord.err); sets
# CPID and, the first time, EP (restarts bind the same endpoint).
start_coordinator() {
  rm -f "$WORK/endpoint" "$WORK/http_url"
  "${C[@]}" "$BIN/tern-coordinator" --config "$WORK/coord.yaml" --bind "$BIND" \
    --metrics-csv "$WORK/metrics.csv" "$@" >> "$WORK/coord.out" 2>> "$WORK/coord.err" &
  CPID=$!; PIDS+=("$CPID")
  for _ in $(seq 1 600); do [ -s "$WORK/endpoint" ] && break; sleep 0.1; done
  [ -s "$WORK/endpoint" ] || { tail "$WORK/coord.err"; fail "the coordinator did not bind"; }
  EP=$(cat "$WORK/endpoint")
  BIND="$EP"
  [ "$MODE" = netns ] && BIND="tcp://0.0.0.0:$PORT"
  return 0
}
start_worker() { # INDEX
  w_prefix "$1"
  "${W[@]}" "$BIN/tern-worker" --config "$WORK/worker.yaml" --coordinator "$(worker_endpoint "$1")" \
    --name "w$1" --shard-index "$1" >> "$WORK/w$1.out" 2>> "$WORK/w$1.err" &
  WPID[$1]=$!; PIDS+=("$!")
}
start_byzantine() {
  "${C[@]}" "$BIN/tern-loadgen" --config "$WORK/worker.yaml" --coordinator "$(local_endpoint)" \
    --workers 1 --scale 1e6 --seed "$SEED" --name-prefix byz \
    >> "$WORK/byz.out" 2>> "$WORK/byz.err" &
  BPID=$!; PIDS+=("$BPID")
}

# reap NAME PID: a process that ended without being killed here is a crash unless it exited 0.
reap() {
  local rc=0
  wait "$2" || rc=$?
  CRASHES+=("$1 exited with $rc at t=$((SECONDS - T0))s")
  log "$1 exited on its own with status $rc"
}
# Every daemon still running; a dead one is recorded (reap) and started again.
check_alive() {
  local i
  for i in $(seq 0 $((WORKERS - 1))); do
    kill -0 "${WPID[$i]}" 2> /dev/null || { reap "worker w$i" "${WPID[$i]}"; start_worker "$i"; }
  done
  kill -0 "$BPID" 2> /dev/null || { reap "byzantine loadgen" "$BPID"; start_byzantine; }
  kill -0 "$CPID" 2> /dev/null || { reap coordinator "$CPID"; start_coordinator; }
  return 0
}

sample_hwm() {
  local kb
  kb=$(sed -n 's/^VmHWM:[[:space:]]*\([0-9]*\) kB/\1/p' "/proc/$CPID/status" 2> /dev/null || true)
  [ -n "$kb" ] && [ $((kb / 1024)) -gt "$HWM_MB" ] && HWM_MB=$((kb / 1024))
  return 0
}
# The Byzantine member's line in /status (benched, pushes_clipped), kept if it shows it contained.
sample_status() {
  local url line
  url=$(cat "$WORK/http_url" 2> /dev/null || true)
  [ -n "$url" ] || return 0
  line=$("${C[@]}" curl -s --max-time 3 "$url/status" | python3 -c '
import json, sys
try:
    st = json.load(sys.stdin)
except ValueError:
    sys.exit(0)
for w in st.get("workers", []):
    if w.get("name", "").startswith("byz"):
        print(w["name"], "benched=%s pushes_clipped=%s" % (w.get("benched"), w.get("pushes_clipped")))
' || true)
  if [[ "$line" == *"benched=True"* ]] || [[ "$line" =~ pushes_clipped=[1-9] ]]; then
    STATUS_SEEN="$line"
  fi
  return 0
}
csv_rows() { [ -s "$WORK/metrics.csv" ] && echo $(($(wc -l < "$WORK/metrics.csv") - 1)) || echo 0; }

kill_worker() {
  local i=$((RANDOM % WORKERS))
  log "kill -9 worker w$i"
  kill -9 "${WPID[$i]}"; wait "${WPID[$i]}" 2> /dev/null || true
  sleep $((1 + RANDOM % 3))
  start_worker "$i"
}
kill_coordinator() {
  local rows resumed
  sample_hwm; sample_status
  rows=$(csv_rows)
  log "kill -9 coordinator after $rows rounds in the CSV"
  kill -9 "$CPID"; wait "$CPID" 2> /dev/null || true
  CKILLS=$((CKILLS + 1))
  sleep $((1 + RANDOM % 2))
  start_coordinator
  for _ in $(seq 1 300); do
    resumed=$(sed -n 's/.*resumed from checkpoint .* at round \([0-9]*\).*/\1/p' "$WORK/coord.out" "$WORK/coord.err" | sed -n "${CKILLS}p")
    [ -n "$resumed" ] && break
    sleep 0.1
  done
  [ -n "$resumed" ] || fail "the restarted coordinator did not say it resumed from its checkpoint"
  RESUMES+=("$rows:$resumed")
  log "coordinator resumed at round $resumed"
}
cut_link() {
  local i=$((RANDOM % WORKERS)) s=$((2 + RANDOM % 4))
  log "link of w$i cut for $s s"
  if [ "$MODE" = netns ]; then
    ip -n "$NS_PREFIX$i" link set wc down; sleep "$s"; ip -n "$NS_PREFIX$i" link set wc up
  else
    kill -STOP "${WPID[$i]}"; sleep "$s"; kill -CONT "${WPID[$i]}"
  fi
}
frame_flood() {
  local rc=0
  log "one message of 200000 frames"
  "${C[@]}" "$BIN/tern-frame-flood" --endpoint "$(local_endpoint)" --frames 200000 --timeout 20 \
    >> "$WORK/flood.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || log "the frame flood got no answer (status $rc)"
  log "$(tail -n 1 "$WORK/flood.out")"
}
join_flood() {
  local p
  log "60 joins under made-up names, gone after 4 s"
  "${C[@]}" "$BIN/tern-loadgen" --config "$WORK/worker.yaml" --coordinator "$(local_endpoint)" \
    --workers 60 --seed $((SEED + SECONDS)) --name-prefix "ghost$SECONDS" \
    >> "$WORK/ghosts.out" 2>&1 &
  p=$!; PIDS+=("$p")
  sleep 4
  kill -9 "$p"; wait "$p" 2> /dev/null || true
}

T0=$SECONDS
RANDOM=$SEED
start_coordinator
for i in $(seq 0 $((WORKERS - 1))); do start_worker "$i"; done
start_byzantine
log "mode $MODE, seed $SEED, soak of $DURATION s"

# The schedule: each kind of event once, in a seeded order, then seeded random picks.
EVENTS=(kill_worker kill_coordinator cut_link frame_flood join_flood)
ORDER=()
for _ in "${EVENTS[@]}"; do
  while :; do
    e=${EVENTS[$((RANDOM % ${#EVENTS[@]}))]}
    [[ " ${ORDER[*]:-} " == *" $e "* ]] || break
  done
  ORDER+=("$e")
done
PICKS=(kill_worker kill_worker kill_coordinator cut_link cut_link frame_flood join_flood)
n=0
while [ $((SECONDS - T0)) -lt "$DURATION" ]; do
  pause=$((4 + RANDOM % 9))
  for _ in $(seq 1 "$pause"); do sleep 1; sample_hwm; check_alive; done
  [ $((SECONDS - T0)) -lt "$DURATION" ] || break
  # Picked in this shell: a subshell's RANDOM is not the seeded sequence.
  e=${PICKS[$((RANDOM % ${#PICKS[@]}))]}
  [ "$n" -lt "${#ORDER[@]}" ] && e=${ORDER[$n]}
  n=$((n + 1))
  "$e"
  check_alive
done
log "soak over after $n events; the run settles for $SETTLE s, then pauses"
for _ in $(seq 1 "$SETTLE"); do sleep 1; sample_hwm; check_alive; done
check_alive
sample_hwm; sample_status

# The end: SIGTERM pauses at a checkpointed round, and a restart with max_rounds at that round
# has nothing left to train: it prints its final line (with the accuracy) and tells every worker
# and the Byzantine member to finish.
kill -TERM "$CPID"
rc=0; wait "$CPID" || rc=$?
[ "$rc" = 0 ] || CRASHES+=("coordinator exited with $rc at the pause")
STOPPED=$(sed -n 's/.*stop requested: checkpoint written at round \([0-9]*\).*/\1/p' "$WORK/coord.out" "$WORK/coord.err" | tail -1)
[ -n "$STOPPED" ] || { tail "$WORK/coord.out" "$WORK/coord.err"; fail "SIGTERM did not pause at a checkpoint"; }
: > "$WORK/last.out"
"${C[@]}" "$BIN/tern-coordinator" --config "$WORK/coord.yaml" --bind "$BIND" \
  --metrics-csv "$WORK/metrics.csv" --max-rounds "$STOPPED" > "$WORK/last.out" 2>&1 &
CPID=$!; PIDS+=("$CPID")
rc=0; wait "$CPID" || rc=$?
[ "$rc" = 0 ] || CRASHES+=("the last coordinator exited with $rc")
for i in $(seq 0 $((WORKERS - 1))); do
  rc=0; timeout 60 tail --pid="${WPID[$i]}" -f /dev/null || rc=$?
  [ "$rc" = 0 ] || { CRASHES+=("worker w$i did not finish"); continue; }
  rc=0; wait "${WPID[$i]}" || rc=$?
  [ "$rc" = 0 ] || CRASHES+=("worker w$i exited with $rc at the end")
done
timeout 30 tail --pid="$BPID" -f /dev/null || true
kill -0 "$BPID" 2> /dev/null && kill -9 "$BPID"
wait "$BPID" 2> /dev/null || true

FINAL=$(grep '^final:' "$WORK/last.out" | tail -1 || true)
echo "$FINAL"
ACC=$(sed -n 's/^final: .*test_accuracy=\([^ ]*\).*/\1/p' <<< "$FINAL")
python3 - "$WORK/metrics.csv" "$STOPPED" "$ACC" "$ACC_BAR" "$HWM_MB" "$RSS_LIMIT_MB" \
  "${RESUMES[*]:-}" << 'PY'
import csv, sys
path, stopped, acc, bar, hwm, limit, resumes = sys.argv[1:8]
rounds = [int(r["round"]) for r in csv.DictReader(open(path))]
# Every round once, in order, across the restarts: 0, 1, ..., the round paused at minus one.
assert rounds == list(range(int(stopped))), \
    f"metrics CSV rounds are not 0..{int(stopped) - 1} once each: {len(rounds)} rows"
# A kill loses at most the round in flight: the coordinator resumes at the CSV's last round or later.
for pair in resumes.split():
    rows, resumed = map(int, pair.split(":"))
    assert resumed >= rows - 1, f"killed with {rows} rounds in the CSV, resumed at round {resumed}"
print(f"rounds {stopped}; coordinator kills and resumes (CSV rows:resumed round): {resumes or 'none'}")
print(f"final accuracy {acc} (bar {bar}); coordinator peak RSS {hwm} MB (limit {limit} MB)")
assert acc not in ("", "none") and float(acc) >= float(bar), f"final accuracy {acc} < {bar}"
assert int(hwm) < int(limit), f"coordinator peak RSS {hwm} MB >= {limit} MB"
PY
[ -n "$STATUS_SEEN" ] || fail "the Byzantine member was never clipped or benched in /status"
echo "byzantine member in /status: $STATUS_SEEN"
[ "$CKILLS" -ge 1 ] || fail "the soak was too short to kill the coordinator"
if grep -lE "terminate called|AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|Segmentation fault|core dumped|bad_alloc" \
  "$WORK"/*.out "$WORK"/*.err; then
  fail "a daemon's output shows a crash or a sanitizer report (files above)"
fi
if [ "${#CRASHES[@]}" -gt 0 ]; then
  printf '  %s\n' "${CRASHES[@]}" >&2
  fail "daemons exited other than by the kills made"
fi
echo "PASS: $DURATION s of chaos ($MODE, seed $SEED): $CKILLS coordinator kills; $FINAL"
