#!/usr/bin/env bash
# Settings that cannot work are configuration errors: exit status 2 at once, before any data
# loads, with the YAML key's file:line:column or the flag named; never a daemon that retries for
# ever, ignores the value or fails later with status 1.
source "$(dirname "$0")/lib.sh"

# refused OUT PATTERN WHAT CMD...: CMD exits 2 within 20 s, its output matching PATTERN (kept in
# $WORK/OUT), or the test fails saying WHAT.
refused() {
  local out="$WORK/$1" pattern="$2" what="$3" rc
  shift 3
  set +e
  (cd "$WORK" && timeout 20 "$@" > "$out" 2>&1); rc=$?
  set -e
  [ $rc -eq 2 ] && grep -q -- "$pattern" "$out" || { cat "$out"; fail "$what: exit $rc"; }
}

write_coordinator "$WORK/c.yaml" 5 1
write_worker "$WORK/w.yaml" tcp://127.0.0.1:1 1

# A worker name the coordinator refuses at every join: empty, or longer than 256 bytes.
sed 's|^name: .*|name: ""|' "$WORK/w.yaml" > "$WORK/name.yaml"
line=$(grep -n '^name:' "$WORK/name.yaml" | cut -d: -f1)
refused name.out "$WORK/name.yaml:$line:7: 'name' must not be empty" "an empty worker name" \
  "$BIN/tern-worker" --config "$WORK/name.yaml"
refused name_flag.out "--name must be at most 256 bytes, got 300" "a 300-byte --name" \
  "$BIN/tern-worker" --config "$WORK/w.yaml" --name "$(printf 'n%.0s' $(seq 300))"

# A setting the daemon would silently ignore: a data key the format does not read, a link-seconds
# budget under another allocation method, a target accuracy with nothing to evaluate it on.
sed 's|^  format: idx|  format: idx\n  rows: 100|' "$WORK/w.yaml" > "$WORK/rows.yaml"
line=$(grep -n '^  rows:' "$WORK/rows.yaml" | cut -d: -f1)
refused rows.out "$WORK/rows.yaml:$line:9: 'rows' is not read by format idx" "rows on idx data" \
  "$BIN/tern-worker" --config "$WORK/rows.yaml"
sed 's|^allocation: .*|allocation: {method: uniform, mean_ratio: 0.05, seconds_per_round: 0.1}|' \
  "$WORK/c.yaml" > "$WORK/alloc.yaml"
line=$(grep -n '^allocation:' "$WORK/alloc.yaml" | cut -d: -f1)
refused alloc.out \
  "$WORK/alloc.yaml:$line:[0-9]*: 'allocation.seconds_per_round' is read by method cost-aware only" \
  "seconds_per_round under uniform" "$BIN/tern-coordinator" --config "$WORK/alloc.yaml"
# The simulator's workers hold no held-out rows: a target there needs test_data (a coordinator
# daemon checks it at the workers' federated evaluations instead).
printf 'train_data: {format: synthetic, rows: 10, features: 3}\ncoordinator:\n  target_accuracy: 0.9\n' \
  > "$WORK/target.yaml"
refused target.out "$WORK/target.yaml:3:20: 'target_accuracy' is checked at evaluations of" \
  "target_accuracy without test_data" "$BIN/tern-sim" --config "$WORK/target.yaml"

# Found before any data loads, at the key, rather than with exit status 1 once the data is in: an
# HTTP port past 65535 (YAML or --http), a model with no width, a directory as the configuration.
printf 'http: {bind: "127.0.0.1:99999"}\n' >> "$WORK/c.yaml"
line=$(grep -n '^http:' "$WORK/c.yaml" | cut -d: -f1)
refused http.out "$WORK/c.yaml:$line:14: 'http.bind' must be HOST:PORT" "http port 99999" \
  "$BIN/tern-coordinator" --config "$WORK/c.yaml"
sed -i '/^http:/d' "$WORK/c.yaml"
refused http_flag.out "--http must be HOST:PORT.*nonsense" "--http nonsense" \
  "$BIN/tern-coordinator" --config "$WORK/c.yaml" --http nonsense
refused http_worker.out "--http must be HOST:PORT.*port must be 0..65535" "worker --http :70000" \
  "$BIN/tern-worker" --config "$WORK/w.yaml" --http :70000
sed -e '/^test_data:/,/^  labels:/d' "$WORK/c.yaml" > "$WORK/width.yaml"
line=$(grep -n '^model:' "$WORK/width.yaml" | cut -d: -f1)
refused width.out "$WORK/width.yaml:$line:8: 'model.features' must be set" "no model width" \
  "$BIN/tern-coordinator" --config "$WORK/width.yaml"
refused dir.out "$WORK:1:1: is a directory" "a directory as --config" \
  "$BIN/tern-coordinator" --config "$WORK"

# A flag that overrides a key takes the key's range; 0 is refused, not read as "not given".
for args in "--min-workers 4000000000" "--min-workers 0" "--max-rounds 0"; do
  # shellcheck disable=SC2086
  refused flag.out "${args%% *}: Value ${args##* } not in range 1 to " "tern-coordinator $args" \
    "$BIN/tern-coordinator" --config "$WORK/c.yaml" $args
done
refused shard.out "--shard-index: Value -3 not in range 0 to 99999" "--shard-index -3" \
  "$BIN/tern-worker" --config "$WORK/w.yaml" --shard-index -3
for args in "--workers 0" "--max-rounds 0"; do
  # shellcheck disable=SC2086
  refused sim.out "${args%% *}: Value 0 not in range 1 to " "tern-sim $args" \
    "$BIN/tern-sim" --config "$SRC/deploy/config/sim-quick.yaml" $args
done

# Settings that work but rarely as meant are warned about at start: a server step far above the
# local one with local steps (each round moves the model 20 times the workers' mean delta).
sed -e 's|^optimizer: .*|optimizer: {lr: 1.0}|' \
  -e 's|^training: .*|training: {batch_size: 64, seed: 3, local_steps: 5, local_lr: 0.05}|' \
  "$WORK/c.yaml" > "$WORK/overstep.yaml"
set +e
(cd "$WORK" && timeout 3 "$BIN/tern-coordinator" --config "$WORK/overstep.yaml" > overstep.out 2>&1)
set -e
grep -q "optimizer.lr 1 is 20 times training.local_lr 0.05: with local_steps 5" "$WORK/overstep.out" \
  || { cat "$WORK/overstep.out"; fail "no warning of a server step 20 times the local one"; }

echo "PASS: settings that cannot work exit 2 at once, naming the key or flag"
