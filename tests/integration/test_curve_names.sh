#!/usr/bin/env bash
# CURVE binds worker names to keys: with an allowlist whose lines carry names=, the worker with
# key pi-1 trains as pi-1, while a worker with the other allowlisted key (names=pi-2) asking for
# the name pi-1 is refused at every join (the ZAP user id checked against the allowlist), counted
# as name_not_allowed, and never joins.
source "$(dirname "$0")/lib.sh"

python3 -c 'import ctypes, sys; sys.exit(0 if ctypes.CDLL("libzmq.so.5").zmq_has(b"curve") else 1)' \
  || { echo "SKIP: this libzmq has no CURVE support"; exit 77; }
[ -d "$FMNIST" ] || { echo "SKIP: no Fashion-MNIST at $FMNIST"; exit 77; }

mkdir -p "$WORK/keys"
for k in coordinator one two; do "$BIN/tern-worker" keygen --out "$WORK/keys/$k" > /dev/null; done
key() { sed -n 's/^\([^#][^ ]*\).*/\1/p' "$WORK/keys/$1.pub"; }
printf '%s pi-1 names=pi-1\n%s pi-2 names=pi-2\n' "$(key one)" "$(key two)" > "$WORK/allow"

SECURITY="{mode: curve, secret_key_file: $WORK/keys/coordinator.key, allowlist: $WORK/allow}" \
  write_coordinator "$WORK/coord.yaml" 100000 1
start_coordinator
write_worker "$WORK/base.yaml" "$EP" 2
for k in one two; do
  sed "s|^security: .*|security: {mode: curve, secret_key_file: $WORK/keys/$k.key, server_public_key_file: $WORK/keys/coordinator.pub}|" \
    "$WORK/base.yaml" > "$WORK/$k.yaml"
done
"$BIN/tern-worker" --config "$WORK/one.yaml" --name pi-1 --shard-index 0 > "$WORK/one.out" 2>&1 &
OPID=$!; PIDS+=($OPID)
wait_for_line "$WORK/coord.out" "worker pi-1 joined as id 0" "pi-1 did not join with its own key"
"$BIN/tern-worker" --config "$WORK/two.yaml" --name pi-1 --shard-index 1 > "$WORK/two.out" 2>&1 &
TPID=$!; PIDS+=($TPID)
wait_for_line "$WORK/two.out" "refused the name 'pi-1'" "the other key's join under pi-1 was not refused"
grep -q "not one this worker's key may use" "$WORK/two.out" || { cat "$WORK/two.out"; fail "the refusal does not say why"; }
kill -TERM "$TPID"; wait "$TPID" || true
kill -TERM "$OPID"; wait "$OPID" || true
kill -TERM "$CPID"; wait "$CPID" || true
grep '^rejections:' "$WORK/coord.out"
grep -q '^rejections: .*name_not_allowed=[1-9]' "$WORK/coord.out" || fail "name_not_allowed was not counted"
[ "$(grep -c 'worker pi-1 joined\|worker pi-1 re-joined' "$WORK/coord.out")" -eq 1 ] \
  || fail "pi-1 was joined by another key"
grep -q "allowlisted key(s) without names=" "$WORK/coord.out" && fail "warned about keys that have names="
echo "PASS: a key's names= enforced at every join (the other key refused the name pi-1, counted)"
