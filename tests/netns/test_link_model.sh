#!/usr/bin/env bash
# A worker behind a token-bucket link learns the link's per-packet time: right after the join-time
# calibration its fitted b is within 15% of P_max*8/rate at 2 Mbit/s and at 8 Mbit/s, and when the
# rate changes mid-run (2 -> 8 and 8 -> 2 Mbit/s) the b it reports has followed within 20 rounds.
# tbf charges whole Ethernet frames, 1514 bytes per full 1448-byte segment, so the link's true b is
# 4.6% above P_max*8/rate; the fitted b must be within 15% of that too.
#
# The coordinator runs in one namespace, the worker in another, joined by a veth pair whose worker
# end is shaped with tbf. The fitted b is read from the coordinator's metrics CSV (the model each
# worker reports in its push) and compared with the configured rate, never with the code's output.
source "$(dirname "$0")/lib.sh"

P_MAX=1448          # link.packet_bytes (TCP payload per 1500-byte frame with timestamps)
FEATURES=1600       # softmax, 10 classes: 16010 float parameters, ~64 KB (45 packets) per push
ROUNDS=60
CHANGE_AFTER=30     # rows in the metrics CSV before the rate changes
FOLLOW_ROUNDS=20
TOLERANCE=0.15

prepare_pair

write_coordinator() {  # FILE ENDPOINT_FILE
  cat > "$1" <<YAML
bind: tcp://$ADDR_C:0
endpoint_file: $2
min_workers: 1
max_rounds: $ROUNDS
round_deadline_seconds: 10
heartbeat_seconds: 0.5
worker_patience_seconds: 10
eval_every: 1000000
model: {kind: softmax, classes: 10, features: $FEATURES}
optimizer: {lr: 0.1}
training: {batch_size: 32, seed: 7}
allocation: {method: uniform, mean_ratio: 1.0}
logging: {level: ${LOG_LEVEL:-info}}
security: none
YAML
}

write_worker() {  # FILE ENDPOINT
  cat > "$1" <<YAML
name: shaped
coordinator: $2
data:
  format: synthetic
  rows: 2000
  features: $FEATURES
  classes: 10
  seed: 7
  shard: {index: 0, total: 1}
# Identity compression: every push is the full gradient, so the link dominates the round.
compression: {name: identity, error_feedback: false}
link: {packet_bytes: $P_MAX, measure: true}
heartbeat_seconds: 0.5
coordinator_patience_seconds: 10
logging: {level: ${LOG_LEVEL:-info}}
security: none
YAML
}

# run_phase NAME RATE_BEFORE RATE_AFTER: one training run that joins at RATE_BEFORE and is
# switched to RATE_AFTER once CHANGE_AFTER rounds are in the CSV. Writes $WORK/NAME.change with
# the last round closed before the switch.
run_phase() {
  local name=$1 before=$2 after=$3
  local dir="$WORK/$name"
  mkdir -p "$dir"
  shape_worker replace "$before"
  write_coordinator "$dir/coord.yaml" "$dir/endpoint"
  ip netns exec "$NS_C" "$BIN/tern-coordinator" --config "$dir/coord.yaml" \
    --metrics-csv "$dir/metrics.csv" > "$dir/coord.out" 2> "$dir/coord.err" &
  local cpid=$!
  PIDS+=("$cpid")
  wait_for_file "$dir/endpoint"
  write_worker "$dir/worker.yaml" "$(cat "$dir/endpoint")"
  ip netns exec "$NS_W" "$BIN/tern-worker" --config "$dir/worker.yaml" \
    > "$dir/worker.out" 2> "$dir/worker.err" &
  local wpid=$!
  PIDS+=("$wpid")

  local deadline=$((SECONDS + 120))
  while :; do
    local rows=0
    [ -s "$dir/metrics.csv" ] && rows=$(($(wc -l < "$dir/metrics.csv") - 1))
    if [ "$rows" -ge "$CHANGE_AFTER" ]; then
      shape_worker change "$after"
      tail -n 1 "$dir/metrics.csv" | cut -d, -f1 > "$WORK/$name.change"
      break
    fi
    kill -0 "$cpid" 2> /dev/null || break
    [ "$SECONDS" -lt "$deadline" ] || fail "$name: no $CHANGE_AFTER rounds within 120 s"
    sleep 0.02
  done
  local rc=0
  wait "$cpid" || rc=$?
  [ "$rc" = 0 ] || { tail -5 "$dir/coord.err"; fail "$name: coordinator exited with $rc"; }
  wait "$wpid" || rc=$?
  [ "$rc" = 0 ] || { tail -5 "$dir/worker.err"; fail "$name: worker exited with $rc"; }
  PIDS=()
  [ -s "$WORK/$name.change" ] || fail "$name: the run ended before the rate change"
  grep -q "^final: rounds=$ROUNDS " "$dir/coord.out" || fail "$name: coordinator did not finish"
  echo "$name: $before -> $after after round $(cat "$WORK/$name.change"); $(grep -o 'link model:.*' \
    "$dir/worker.out" | tail -1)"
}

run_phase up 2mbit 8mbit
run_phase down 8mbit 2mbit
drops=$(worker_qdisc_drops)
[ "${drops:-0}" = 0 ] || echo "note: the worker's tbf dropped $drops packets (TCP retransmitted)"

python3 - "$WORK" "$P_MAX" "$FOLLOW_ROUNDS" "$TOLERANCE" <<'PY'
import csv, sys

work, p_max, follow, tol = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
phases = [("up", 2e6, 8e6), ("down", 8e6, 2e6)]
frame = p_max + 66  # a full segment on the wire: payload + TCP (32) + IP (20) + Ethernet (14)
failures = []

def reference(rate):  # the spec's per-packet time
    return p_max * 8 / rate

def on_wire(rate):  # what tbf charges per full segment
    return frame * 8 / rate

def close(b, rate):
    return abs(b / reference(rate) - 1) <= tol and abs(b / on_wire(rate) - 1) <= tol

def load(name):
    rows = []
    for r in csv.DictReader(open(f"{work}/{name}/metrics.csv")):
        # One worker: the ';'-joined per-worker columns hold a single value.
        rows.append((int(r["round"]), float(r["link_b"]), int(r["link_samples"])))
    return rows

print(f"{'phase':<6} {'when':<28} {'rate':>6} {'P*8/rate':>9} {'frame*8/rate':>12} "
      f"{'fitted b':>9} {'b/P-ref':>7} {'b/frame':>7} {'samples':>7}")
def line(phase, when, rate, b, n):
    print(f"{phase:<6} {when:<28} {rate/1e6:>4.0f}Mb {reference(rate)*1e3:>7.3f}ms "
          f"{on_wire(rate)*1e3:>10.3f}ms {b*1e3:>7.3f}ms {b/reference(rate):>7.3f} "
          f"{b/on_wire(rate):>7.3f} {n:>7}")

for name, before, after in phases:
    rows = load(name)
    change = int(open(f"{work}/{name}.change").read())
    # Calibration: 4 sizes x 2 repeats (the worker's defaults), one probe ahead of each of the
    # first 8 pushes; the first push that reports those 8 probes and 8 pushes as samples carries
    # the model fitted from the whole calibration train.
    calibrated = next((r for r in rows if r[2] >= 16), None)
    if calibrated is None:
        failures.append(f"{name}: no row reports the calibration samples")
        continue
    rnd, b, n = calibrated
    line(name, f"after calibration (round {rnd})", before, b, n)
    if not close(b, before):
        failures.append(f"{name}: b={b*1e3:.3f} ms after calibration at {before/1e6:.0f} Mbit/s, "
                        f"expected {reference(before)*1e3:.3f} ms (P_max) and "
                        f"{on_wire(before)*1e3:.3f} ms (frames) +-{tol:.0%}")
    settled = [r for r in rows if rnd < r[0] <= change]
    if settled:
        ratios = [r[1] / reference(before) for r in settled]
        print(f"{'':<6} rounds {settled[0][0]}..{change} before the change: b/P-ref "
              f"{min(ratios):.3f}..{max(ratios):.3f}")
    after_rows = [r for r in rows if r[0] > change]
    followed = next((r[0] - change for r in after_rows if close(r[1], after)), None)
    print(f"{'':<6} rate changed after round {change}; first within {tol:.0%} of the new rate "
          f"{followed} rounds later")
    window = [r for r in rows if r[0] >= change + follow]
    if len(window) < 5:
        failures.append(f"{name}: only {len(window)} rounds after round {change}+{follow}")
    for rnd, b, n in window[:1] + window[-1:]:
        line(name, f"{rnd - change} rounds after change", after, b, n)
    bad = [r for r in window if not close(r[1], after)]
    if bad:
        rnd, b, _ = bad[0]
        failures.append(f"{name}: {len(bad)} of {len(window)} rounds from {follow} after the "
                        f"change are off by more than {tol:.0%} (round {rnd}: b={b*1e3:.3f} ms, "
                        f"expected {reference(after)*1e3:.3f} ms)")

if failures:
    print("\n".join("FAIL: " + f for f in failures), file=sys.stderr)
    sys.exit(1)
PY
echo "PASS: the fitted per-packet time matched P_max*8/rate and frame*8/rate within 15% after" \
  "calibration at 2 and 8 Mbit/s and followed both rate changes within $FOLLOW_ROUNDS rounds"
