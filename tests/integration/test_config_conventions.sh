#!/usr/bin/env bash
# The daemons' configuration conventions: TERN_* variables override the file and flags override
# both (flag > environment > file); logging.format: json gives one JSON object a line (jq reads
# every one); without --config the coordinator reads /etc/tern/coordinator.yaml (shown in a
# private mount namespace whose /etc is a copy, so the host's /etc is never touched).
source "$(dirname "$0")/lib.sh"

# run_pair NAME ARGS...: a coordinator (env and flags as given) and one worker train; their
# output in $WORK/NAME.{out,err} and $WORK/NAME-w.{out,err}.
run_pair() {
  local name=$1; shift
  rm -f "$WORK/endpoint"
  env "$@" > "$WORK/$name.out" 2> "$WORK/$name.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  write_worker "$WORK/worker.yaml" "$(cat "$WORK/endpoint")" 1
  TERN_LOGGING__FORMAT=json "$BIN/tern-worker" --config "$WORK/worker.yaml" \
    > "$WORK/$name-w.out" 2> "$WORK/$name-w.err" || fail "$name: the worker exited non-zero"
  wait "$CPID" || { cat "$WORK/$name.err"; fail "$name: the coordinator exited non-zero"; }
}

write_coordinator "$WORK/coord.yaml" 10 1
sed -i 's/^logging: {level: info}$/logging: {level: info, format: json}/' "$WORK/coord.yaml"

# Environment over file: the file says 10 rounds, TERN_MAX_ROUNDS 3.
run_pair env TERN_MAX_ROUNDS=3 "$BIN/tern-coordinator" --config "$WORK/coord.yaml"
grep -q '^final: rounds=3 ' "$WORK/env.out" || { cat "$WORK/env.out"; fail "TERN_MAX_ROUNDS=3 did not run 3 rounds"; }

# JSON logs: every line of both daemons' logs is an object with the documented fields.
for f in env.err env-w.err; do
  [ "$(wc -l < "$WORK/$f")" -ge 3 ] || { cat "$WORK/$f"; fail "$f: too few log lines"; }
  jq -e 'has("time") and has("level") and has("program") and has("name") and has("message")' \
    "$WORK/$f" > "$WORK/jq.out" || { cat "$WORK/$f"; fail "$f: a line is not a JSON log object"; }
  ! grep -qv '^true$' "$WORK/jq.out" || fail "$f: a log object lacks a field"
done
jq -e 'select(.program == "worker") | .name == "w"' "$WORK/env-w.err" > /dev/null ||
  fail "the worker's JSON lines do not name it"
grep -q '^final: ' "$WORK/env.out" && ! grep -q '^{' "$WORK/env.out" ||
  fail "stdout should hold the summary lines only"

# Flag over environment: --max-rounds 2 wins over TERN_MAX_ROUNDS=3.
run_pair flag TERN_MAX_ROUNDS=3 "$BIN/tern-coordinator" --config "$WORK/coord.yaml" --max-rounds 2
grep -q '^final: rounds=2 ' "$WORK/flag.out" || { cat "$WORK/flag.out"; fail "--max-rounds 2 did not win"; }

# A bad value from the environment is a configuration error naming its variable.
set +e
TERN_MAX_ROUNDS=lots "$BIN/tern-coordinator" --config "$WORK/coord.yaml" > "$WORK/bad.out" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "environment TERN_MAX_ROUNDS: 'max_rounds' has the wrong type" "$WORK/bad.out" ||
  { cat "$WORK/bad.out"; fail "TERN_MAX_ROUNDS=lots: exit $rc"; }

# No --config: /etc/tern/coordinator.yaml, in a mount namespace with a copy of /etc.
if ! unshare -m true 2> /dev/null; then
  echo "SKIP: the default path needs a private mount namespace (root)"; exit 77
fi
mkdir -p "$WORK/etc"
cp -a /etc/. "$WORK/etc/"
mkdir -p "$WORK/etc/tern"
cp "$WORK/coord.yaml" "$WORK/etc/tern/coordinator.yaml"
run_pair default TERN_MAX_ROUNDS=3 unshare -m --propagation private \
  sh -c 'mount --bind "$1" /etc && exec "$2/tern-coordinator"' _ "$WORK/etc" "$BIN"
grep -q '^final: rounds=3 ' "$WORK/default.out" ||
  { cat "$WORK/default.out" "$WORK/default.err"; fail "no --config: did not run /etc/tern/coordinator.yaml"; }
set +e
unshare -m --propagation private sh -c 'mount --bind "$1" /etc && rm "$1/tern/coordinator.yaml" &&
  exec "$2/tern-coordinator"' _ "$WORK/etc" "$BIN" > "$WORK/none.out" 2>&1
rc=$?
set -e
[ $rc -eq 2 ] && grep -q "no --config FILE given and /etc/tern/coordinator.yaml does not exist" "$WORK/none.out" ||
  { cat "$WORK/none.out"; fail "no --config and no default file: exit $rc"; }
echo "PASS: environment over file, flag over environment, JSON logs, /etc/tern default"
