# Shared helpers for the network-namespace tests. Usage: source lib.sh BIN_DIR SRC_DIR
# Each test gets two private namespaces joined by a veth pair: "c" (10.77.0.1/30, the
# coordinator's side) and "w" (10.77.0.2/30, the worker's side). Nothing is configured outside
# them, so no traffic can leave; the namespaces (and with them the veth pair and any shaping)
# are removed on exit, whatever the exit path.
set -euo pipefail
BIN="$1"
SRC="$2"
SKIP=77
WORK="$(mktemp -d /tmp/tern-netns.XXXXXX)"
NS_C="tern-c-$$"
NS_W="tern-w-$$"
ADDR_C=10.77.0.1
ADDR_W=10.77.0.2
DEV_C=veth-c
DEV_W=veth-w
PIDS=()

cleanup() {
  local p
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true
  done
  for p in "${PIDS[@]:-}"; do
    [ -n "$p" ] && wait "$p" 2>/dev/null || true
  done
  ip netns del "$NS_C" 2>/dev/null || true
  ip netns del "$NS_W" 2>/dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit "$SKIP"; }

# Skips (exit 77) unless we are root and the kernel and iproute2 can make namespaces, veth
# pairs and tbf qdiscs; on success the pair is up and addressed.
setup_pair() {
  [ "$(id -u)" = 0 ] || skip "needs root (network namespaces and tc)"
  command -v ip > /dev/null || skip "iproute2 'ip' not found"
  command -v tc > /dev/null || skip "iproute2 'tc' not found"
  ip netns add "$NS_C" 2> /dev/null || skip "cannot create a network namespace"
  ip netns add "$NS_W" 2> /dev/null || skip "cannot create a network namespace"
  ip -n "$NS_C" link add "$DEV_C" type veth peer name "$DEV_W" netns "$NS_W" 2> /dev/null ||
    skip "cannot create a veth pair"
  ip -n "$NS_C" addr add "$ADDR_C/30" dev "$DEV_C"
  ip -n "$NS_W" addr add "$ADDR_W/30" dev "$DEV_W"
  ip -n "$NS_C" link set lo up
  ip -n "$NS_W" link set lo up
  ip -n "$NS_C" link set "$DEV_C" up
  ip -n "$NS_W" link set "$DEV_W" up
  # One tbf to find out whether the kernel has it at all; shape_worker() replaces it.
  ip netns exec "$NS_W" tc qdisc add dev "$DEV_W" root tbf rate 1gbit burst 64k limit 1m \
    2> /dev/null || skip "the kernel has no tbf qdisc"
  ip netns exec "$NS_W" tc qdisc del dev "$DEV_W" root
}

# Checks the daemons are built and python3 is there (for the tests' checks), then setup_pair.
prepare_pair() {
  local b
  for b in tern-coordinator tern-worker; do
    [ -x "$BIN/$b" ] || fail "$BIN/$b not built"
  done
  command -v python3 > /dev/null || skip "python3 not found"
  setup_pair
}

# shape_worker add|change|replace RATE: token bucket on the worker's egress. The bucket holds two
# full frames (2 x 1514 bytes), so a send after an idle link has its first two frames go at once
# and every byte after them at RATE: a per-packet time b is unchanged, the fixed cost a is lower
# by 2 b. A one-frame bucket is the more literal link, but the qdisc's timer then fires late
# under virtualised clocks and every late tick is lost capacity (64-frame bulk transfers took
# 0.99-1.19x the frame time, varying from run to run; 0.97x, i.e. 62 of 64 frames, with two).
# Two rather than more, so that a 4-packet exploration probe is never carried whole by the
# bucket. The queue is long enough (4 MB) that tbf never drops: TCP's small-queue limit keeps
# far less queued.
shape_worker() {
  ip netns exec "$NS_W" tc qdisc "$1" dev "$DEV_W" root tbf rate "$2" burst 3028 limit 4000000
}

# shape_coordinator RATE: the same token bucket on the coordinator's egress (the worker's downlink).
shape_coordinator() {
  ip netns exec "$NS_C" tc qdisc add dev "$DEV_C" root tbf rate "$1" burst 3028 limit 4000000
}

# Bytes dropped by the worker's qdisc so far (0 expected: drops would mean retransmissions).
worker_qdisc_drops() {
  ip netns exec "$NS_W" tc -s qdisc show dev "$DEV_W" | sed -n 's/.*(dropped \([0-9]*\),.*/\1/p' |
    head -1
}

in_c() { ip netns exec "$NS_C" "$@"; }
in_w() { ip netns exec "$NS_W" "$@"; }

wait_for_file() {
  for _ in $(seq 1 200); do [ -s "$1" ] && return 0; sleep 0.1; done
  fail "timed out waiting for $1"
}

# wait_for_line FILE PATTERN TENTHS: succeeds once FILE has a line matching the extended regular
# expression PATTERN, looking every 0.1 s, at most TENTHS times; fails (status 1) otherwise.
wait_for_line() {
  for _ in $(seq 1 "$3"); do
    grep -qE "$2" "$1" 2> /dev/null && return 0
    sleep 0.1
  done
  return 1
}

# write_synthetic_worker NAME FEATURES COORDINATOR_PATIENCE: $WORK/worker.yaml, a worker NAME on
# 200 synthetic rows of FEATURES features and 10 classes (top-T with error feedback), its
# coordinator given as ENDPOINT (start_daemons fills it in).
write_synthetic_worker() {
  cat > "$WORK/worker.yaml" <<YAML
name: $1
coordinator: ENDPOINT
data:
  format: synthetic
  rows: 200
  features: $2
  classes: 10
  seed: 7
  shard: {index: 0, total: 1}
compression: {name: topk, error_feedback: true}
tuning: {method: fixed}   # pushes at the cap: the sizes these tests shape links for
heartbeat_seconds: 0.5
coordinator_patience_seconds: $3
logging: {level: info}
security: none
YAML
}

# start_daemons [COORDINATOR ARGS...]: the coordinator on $WORK/coord.yaml in "c" and, once it has
# bound, the worker on $WORK/worker.yaml in "w" (output in $WORK/{coord,worker}.{out,err}); sets
# CPID and WPID. `ip netns exec` runs each directly (it execs the daemon), not through in_c or
# in_w: $! must be the daemon itself for the cleanup's kill to reach it.
start_daemons() {
  ip netns exec "$NS_C" "$BIN/tern-coordinator" --config "$WORK/coord.yaml" "$@" \
    > "$WORK/coord.out" 2> "$WORK/coord.err" &
  CPID=$!; PIDS+=("$CPID")
  wait_for_file "$WORK/endpoint"
  sed -i "s|ENDPOINT|$(cat "$WORK/endpoint")|" "$WORK/worker.yaml"
  ip netns exec "$NS_W" "$BIN/tern-worker" --config "$WORK/worker.yaml" \
    > "$WORK/worker.out" 2> "$WORK/worker.err" &
  WPID=$!; PIDS+=("$WPID")
}

# write_slow_uplink_coordinator FEATURES ROUNDS DEADLINE PATIENCE: $WORK/coord.yaml for the tests
# of a worker behind a slow uplink: one worker, a softmax model of FEATURES features and 10
# classes, ROUNDS rounds of round_deadline_seconds DEADLINE and worker_patience_seconds PATIENCE,
# caps of a quarter of the model (uniform), heartbeats every 0.25 s, no evaluation.
write_slow_uplink_coordinator() {
  cat > "$WORK/coord.yaml" <<YAML
bind: tcp://$ADDR_C:0
endpoint_file: $WORK/endpoint
min_workers: 1
max_rounds: $2
round_deadline_seconds: $3
heartbeat_seconds: 0.25
worker_patience_seconds: $4
eval_every: 1000000
model: {kind: softmax, classes: 10, features: $1}
optimizer: {lr: 0.1}
training: {batch_size: 32, seed: 7}
allocation: {method: uniform, mean_ratio: 0.25}
logging: {level: info}
security: none
YAML
}

# wait_for_rounds ROUNDS SECONDS: waits for the coordinator (CPID) to finish ROUNDS rounds within
# SECONDS, else fails with the last marked-gone and re-join lines and the worker's link samples.
wait_for_rounds() {
  local end=$((SECONDS + $2))
  while kill -0 "$CPID" 2> /dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.2; done
  if kill -0 "$CPID" 2> /dev/null; then
    grep -E "marked gone|re-joined" "$WORK/coord.out" | tail -4 >&2 || true
    grep -E "link sample|not timed|joined as" "$WORK/worker.out" | tail -30 >&2 || true
    fail "the coordinator did not finish $1 rounds in $2 s"
  fi
  wait "$CPID" || fail "the coordinator exited with $?"
  grep -q "^final: rounds=$1 " "$WORK/coord.out" || fail "the coordinator did not finish"
}
