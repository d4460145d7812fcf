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

echo "PASS: settings that cannot work exit 2 at once, naming the key or flag"
