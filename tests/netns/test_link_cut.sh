#!/usr/bin/env bash
# A worker's link is cut (`ip link set ... down`) and restored, twice: a short cut (below every
# patience) and a long one (past both the coordinator's worker patience and the worker's
# coordinator patience); then its connection is blackholed (every packet dropped, no reset).
# After each, the worker is pushing again within RECOVER_S seconds (15 s after the blackhole),
# without any operator action; the other worker trains on throughout; no round is skipped or
# closed twice; and when training stops every replica equals the coordinator's model.
#
# The coordinator and worker "near" run in one namespace, worker "far" in the other, behind the
# veth pair whose far end is cut. Time to recover (link up -> first round with both workers) is
# printed for docs/reliability.md.
source "$(dirname "$0")/lib.sh"

SHORT_CUT_S=${SHORT_CUT_S:-1}
LONG_CUT_S=${LONG_CUT_S:-7}
PATIENCE_S=3        # worker_patience_seconds (coordinator) and coordinator_patience_seconds (worker)
RECOVER_S=${RECOVER_S:-30}
FEATURES=200

prepare_pair

cat > "$WORK/coord.yaml" <<YAML
bind: tcp://$ADDR_C:0
endpoint_file: $WORK/endpoint
min_workers: 2
max_rounds: 100000000
round_deadline_seconds: 1
heartbeat_seconds: 0.5
worker_patience_seconds: $PATIENCE_S
eval_every: 1000000
model: {kind: softmax, classes: 10, features: $FEATURES}
optimizer: {lr: 0.1}
training: {batch_size: 32, seed: 7}
allocation: {method: uniform, mean_ratio: 0.1}
logging: {level: warn}  # a line per round at info: thousands here
security: none
YAML

write_worker() {  # FILE ENDPOINT NAME INDEX
  cat > "$1" <<YAML
name: $3
coordinator: $2
data:
  format: synthetic
  rows: 4000
  features: $FEATURES
  classes: 10
  seed: 7
  shard: {index: $4, total: 2}
compression: {name: topk, error_feedback: true}
heartbeat_seconds: 0.5
coordinator_patience_seconds: $PATIENCE_S
logging: {level: info}
security: none
YAML
}

ip netns exec "$NS_C" "$BIN/tern-coordinator" --config "$WORK/coord.yaml" --metrics-csv "$WORK/metrics.csv" \
  > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=("$CPID")
wait_for_file "$WORK/endpoint"
EP=$(cat "$WORK/endpoint")
write_worker "$WORK/near.yaml" "$EP" near 0
write_worker "$WORK/far.yaml" "$EP" far 1
ip netns exec "$NS_C" "$BIN/tern-worker" --config "$WORK/near.yaml" > "$WORK/near.out" 2> "$WORK/near.err" &
NEAR=$!; PIDS+=("$NEAR")
ip netns exec "$NS_W" "$BIN/tern-worker" --config "$WORK/far.yaml" > "$WORK/far.out" 2> "$WORK/far.err" &
FAR=$!; PIDS+=("$FAR")

rows() { [ -s "$WORK/metrics.csv" ] && echo $(($(wc -l < "$WORK/metrics.csv") - 1)) || echo 0; }
now() { date +%s.%N; }

# Waits until N more rounds closed with both workers after the row count FROM; prints the wall
# time at which the first of them was seen.
wait_both_back() {  # FROM N WHAT
  local from=$1 n=$2 what=$3 first="" end=$((SECONDS + RECOVER_S))
  while [ "$SECONDS" -lt "$end" ]; do
    kill -0 "$CPID" 2> /dev/null || fail "the coordinator exited during $what"
    local both
    both=$(tail -n +"$((from + 2))" "$WORK/metrics.csv" | awk -F, '$8 == 2' | wc -l)
    if [ "$both" -ge 1 ] && [ -z "$first" ]; then first=$(now); fi
    if [ "$both" -ge "$n" ]; then echo "$first"; return 0; fi
    sleep 0.05
  done
  tail -n 5 "$WORK/far.err" "$WORK/coord.err" >&2
  fail "$what: the far worker was not pushing again within $RECOVER_S s"
}

wait_both_back 0 20 "start-up" > /dev/null
echo "training with both workers; cutting the far worker's link for $SHORT_CUT_S s"

cut_link() {  # SECONDS NAME: down, wait, up; writes NAME.rows (rows at link up) and NAME.up
  local at_down
  at_down=$(rows)
  in_w ip link set "$DEV_W" down
  sleep "$1"
  echo "$at_down" > "$WORK/$2.down_rows"
  rows > "$WORK/$2.rows"
  in_w ip link set "$DEV_W" up
  now > "$WORK/$2.up"
}

cut_link "$SHORT_CUT_S" short
BACK=$(wait_both_back "$(cat "$WORK/short.rows")" 20 "the short cut") || exit 1
echo "short cut: both workers back $(python3 -c "print(f'{$BACK - $(cat "$WORK/short.up"):.2f}')") s after link up"
echo "$BACK" > "$WORK/short.back"
# Below every patience the connection outlives the cut: the far worker is still the same member.
[ "$(grep -c "joined as worker" "$WORK/far.out")" = 1 ] || fail "the far worker re-joined after the short cut"

echo "cutting the far worker's link for $LONG_CUT_S s (patience $PATIENCE_S s on both sides)"
cut_link "$LONG_CUT_S" long
BACK=$(wait_both_back "$(cat "$WORK/long.rows")" 20 "the long cut") || exit 1
echo "$BACK" > "$WORK/long.back"
echo "long cut: both workers back $(python3 -c "print(f'{$BACK - $(cat "$WORK/long.up"):.2f}')") s after link up"

# A path that goes dead without a reset (a lost NAT mapping): every packet of the far worker's
# connection is dropped, both ways, while new connections get through. The worker re-joins on
# silence over a new connection; without that, its joins queued on the dead one until ZMTP's
# heartbeat timeout (30 s) or the kernel (about 15 minutes) gave up on it.
PORT=$(in_w ss -tnH state established | awk '{print $3}' | sed 's/.*://' | head -n 1)
[ -n "$PORT" ] || fail "no established connection from the far worker"
echo "blackholing the far worker's connection (local port $PORT); new connections pass"
# Without tc's drop action at hand: the flow's packets are classified into an HTB class whose
# queue holds none (pfifo limit 0), so each is dropped; everything else passes at 1 Gbit/s.
blackhole() {  # IN DEV MATCH...: e.g. blackhole in_w veth-w sport 1234
  local in=$1 dev=$2; shift 2
  $in tc qdisc add dev "$dev" root handle 1: htb default 1
  $in tc class add dev "$dev" parent 1: classid 1:1 htb rate 1gbit 2> /dev/null
  $in tc class add dev "$dev" parent 1: classid 1:2 htb rate 8bit 2> /dev/null
  $in tc qdisc add dev "$dev" parent 1:2 handle 20: pfifo limit 0
  $in tc filter add dev "$dev" parent 1: protocol ip prio 1 u32 match ip "$@" 0xffff flowid 1:2
}
blackhole in_w "$DEV_W" sport "$PORT"
blackhole in_c "$DEV_C" dport "$PORT"
HOLE_AT=$(now)
sleep 1  # rounds already past the filters close; after this one none has both
at_hole=$(rows)
RECOVER_S=${BLACKHOLE_RECOVER_S:-15} BACK=$(wait_both_back "$at_hole" 20 "the blackholed connection") || exit 1
echo "blackholed connection: both workers back $(python3 -c "print(f'{$BACK - $HOLE_AT:.2f}')") s later"
NEW_PORT=$(in_w ss -tnH state established | awk '{print $3}' | sed 's/.*://' | grep -vx "$PORT" | head -n 1)
[ -n "$NEW_PORT" ] || { in_w tc -s qdisc show dev "$DEV_W"; in_w ss -tn; fail "the far worker is back but not over a new connection"; }

# Stop training: without checkpoints the coordinator tells every worker to finish, with the
# last update, so the replicas can be compared with its model.
kill -TERM "$CPID"
wait "$CPID" || { tail -n 5 "$WORK/coord.err"; fail "coordinator exited with $? after SIGTERM"; }
rc=0
wait "$NEAR" || rc=$?
[ "$rc" = 0 ] || { tail -n 5 "$WORK/near.err"; fail "near worker exited with $rc"; }
wait "$FAR" || rc=$?
[ "$rc" = 0 ] || { tail -n 5 "$WORK/far.err"; fail "far worker exited with $rc"; }
PIDS=()

ref=$(grep '^model:' "$WORK/coord.out" | sed 's/.*checksum=//')
[ -n "$ref" ] || fail "the coordinator printed no model checksum"
for w in near far; do
  got=$(grep '^replica:' "$WORK/$w.out" | sed 's/.*checksum=//')
  [ "$got" = "$ref" ] || fail "$w replica checksum '$got' != coordinator '$ref'"
done
grep -q "marked gone" "$WORK/coord.out" "$WORK/coord.err" ||
  fail "the long cut did not make the coordinator mark the far worker gone"
far_joins=$(cat "$WORK/far.out" "$WORK/far.err" | grep -c "joined as worker")
[ "$far_joins" -ge 2 ] || fail "the far worker joined $far_joins time(s); expected a re-join after the long cut"

python3 - "$WORK" <<'PY'
import csv, sys
work = sys.argv[1]
rows = list(csv.DictReader(open(f"{work}/metrics.csv")))
rounds = [int(r["round"]) for r in rows]
# Every round closed exactly once, in order: nothing skipped, nothing closed twice.
assert rounds == list(range(rounds[0], rounds[0] + len(rounds))), "rounds not contiguous"
parts = [int(r["participants"]) for r in rows]
assert min(parts) >= 1, "a round closed with nobody"
for cut in ("short", "long"):
    down = int(open(f"{work}/{cut}.down_rows").read())
    up = int(open(f"{work}/{cut}.rows").read())
    alone = sum(1 for p in parts[down:up] if p == 1)
    print(f"{cut} cut: rounds {down}..{up} closed while the link was down, {alone} of them by "
          f"the near worker alone")
    if cut == "long":
        # 7 s is well past the round deadline: the near worker must have trained on alone.
        assert alone >= 1, "no round closed with the near worker alone during the long cut"
print(f"{len(rows)} rounds, contiguous, {sum(1 for p in parts if p == 2)} with both workers; "
      f"late pushes dropped: {rows[-1]['late_pushes']}")
PY
echo "PASS: the far worker came back after a ${SHORT_CUT_S} s and a ${LONG_CUT_S} s link cut and a" \
  "blackholed connection;" \
  "replicas match the coordinator's model ($ref)"
