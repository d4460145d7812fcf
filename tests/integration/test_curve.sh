#!/usr/bin/env bash
# CURVE on loopback: keys made by both keygen subcommands (secret files 0600, no overwrite without
# --force); a coordinator with an allowlist trains with the listed worker while it refuses a worker
# whose key is not listed, a plaintext worker and a worker expecting another coordinator key,
# counting them; after the second key is added and
# SIGHUP sent, that worker is admitted and takes part in rounds. As root, a capture of the port
# shows no plaintext of a marker (a worker's name, sent in its join) with CURVE on, and - the
# control that the check can see it - shows the marker in a run with `security: none`.
source "$(dirname "$0")/lib.sh"

python3 -c 'import ctypes, sys; sys.exit(0 if ctypes.CDLL("libzmq.so.5").zmq_has(b"curve") else 1)' \
  || { echo "SKIP: this libzmq has no CURVE support"; exit 77; }
MARKER=marker-7f3a91
CAPTURE=1
if [ "$(id -u)" -ne 0 ]; then
  echo "note: not root, the traffic capture part is skipped"; CAPTURE=0
elif ! command -v tcpdump > /dev/null; then
  echo "note: tcpdump not installed (deploy/install-deps.sh), the traffic capture part is skipped"
  CAPTURE=0
fi

# --- keys ------------------------------------------------------------------------------------
mkdir -p "$WORK/keys" "$WORK/allow"
"$BIN/tern-coordinator" keygen --out "$WORK/keys/coordinator" > "$WORK/keygen.out"
"$BIN/tern-worker" keygen --out "$WORK/keys/listed" >> "$WORK/keygen.out"
"$BIN/tern-worker" keygen --out "$WORK/keys/unlisted" >> "$WORK/keygen.out"
for k in coordinator listed unlisted; do
  [ "$(stat -c %a "$WORK/keys/$k.key")" = 600 ] || fail "$k.key has mode $(stat -c %a "$WORK/keys/$k.key"), not 600"
  [ "$(stat -c %a "$WORK/keys/$k.pub")" = 644 ] || fail "$k.pub is not 644"
done
before=$(md5sum "$WORK/keys/listed.key")
if "$BIN/tern-worker" keygen --out "$WORK/keys/listed" > "$WORK/keygen2.out" 2>&1; then
  fail "keygen overwrote an existing key without --force"
fi
grep -q 'already exists (use --force' "$WORK/keygen2.out" || { cat "$WORK/keygen2.out"; fail "no clear refusal"; }
[ "$(md5sum "$WORK/keys/listed.key")" = "$before" ] || fail "a refused keygen changed the secret"
"$BIN/tern-worker" keygen --out "$WORK/keys/spare" > /dev/null
"$BIN/tern-worker" keygen --out "$WORK/keys/spare" --force > /dev/null || fail "keygen --force failed"
[ "$(stat -c %a "$WORK/keys/spare.key")" = 600 ] || fail "a forced secret key is not 600"
cp "$WORK/keys/listed.pub" "$WORK/allow/"

# A bad key file is a clear start-up error, not a crash.
printf 'not a key\n' > "$WORK/keys/broken.key"
SECURITY="{mode: curve, secret_key_file: $WORK/keys/broken.key, allowlist: $WORK/allow}" \
  write_coordinator "$WORK/broken.yaml" 1 1
set +e
"$BIN/tern-coordinator" --config "$WORK/broken.yaml" > "$WORK/broken.out" 2>&1; rc=$?
set -e
[ $rc -eq 1 ] || { cat "$WORK/broken.out"; fail "a bad secret key file gave exit code $rc"; }
grep -q "broken.key:1: not a CURVE key" "$WORK/broken.out" || { cat "$WORK/broken.out"; fail "unclear bad-key message"; }

# start_capture PORT FILE / stop_capture: tcpdump on loopback for one port.
# --immediate-mode: each packet is handed over as it arrives; otherwise packets wait in the kernel's
# ring for up to a second, and a run shorter than that ends with them unread when tcpdump stops.
start_capture() {
  tcpdump -i lo --immediate-mode -U -n -w "$2" "tcp port $1" 2> "$2.log" &
  TCPDUMP=$!; PIDS+=($TCPDUMP)
  for _ in $(seq 1 100); do grep -q 'listening on' "$2.log" 2> /dev/null && return 0; sleep 0.1; done
  fail "tcpdump did not start: $(cat "$2.log")"
}
stop_capture() { kill -INT "$TCPDUMP"; wait "$TCPDUMP" || true; }
# wait_for COUNT_CMD: polls a condition for up to 60 s.
wait_for() {
  for _ in $(seq 1 600); do eval "$1" && return 0; sleep 0.1; done
  fail "timed out waiting for: $1"
}
rounds_with() {  # rounds in the metrics CSV with at least $1 participants
  python3 - "$WORK/metrics.csv" "$1" <<'PY'
import csv, sys
try:
    rows = list(csv.DictReader(open(sys.argv[1])))
except FileNotFoundError:
    rows = []
print(sum(1 for r in rows if int(r["participants"]) >= int(sys.argv[2])))
PY
}
counted() {  # counted NAME: true when the coordinator's /metrics has counter NAME above 0
  python3 - "$(cat "$WORK/http-url")" "$1" <<'PY'
import sys, urllib.request
text = urllib.request.urlopen(sys.argv[1] + "/metrics", timeout=5).read().decode()
values = [float(l.split()[-1]) for l in text.splitlines()
          if l.startswith(sys.argv[2] + " ") or l.startswith(sys.argv[2] + "{")]
sys.exit(0 if values and sum(values) > 0 else 1)
PY
}

# --- CURVE run ---------------------------------------------------------------------------------
SECURITY="{mode: curve, secret_key_file: $WORK/keys/coordinator.key, allowlist: $WORK/allow}" \
  write_coordinator "$WORK/coord.yaml" 100000 1
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" --metrics-csv "$WORK/metrics.csv" \
  --http 127.0.0.1:0 --http-url-file "$WORK/http-url" > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
wait_for_file "$WORK/http-url"
EP=$(cat "$WORK/endpoint")
PORT=${EP##*:}
grep -qF "CURVE on: public key $(sed -n 's/^\([^#][^ ]*\).*/\1/p' "$WORK/keys/coordinator.pub")" "$WORK/coord.out" \
  || { cat "$WORK/coord.out"; fail "coordinator did not report CURVE with its public key"; }
[ $CAPTURE = 1 ] && start_capture "$PORT" "$WORK/curve.pcap"

write_worker "$WORK/base-worker.yaml" "$EP" 2
worker_config() {  # worker_config NAME SECURITY
  sed "s|^security: .*|security: $2|" "$WORK/base-worker.yaml" > "$WORK/$1.yaml"
}
worker_config listed "{mode: curve, secret_key_file: $WORK/keys/listed.key, server_public_key_file: $WORK/keys/coordinator.pub}"
worker_config unlisted "{mode: curve, secret_key_file: $WORK/keys/unlisted.key, server_public_key_file: $WORK/keys/coordinator.pub}"
worker_config plain none
# A listed key, but the wrong coordinator key: the worker must not talk to whoever holds it.
worker_config wrongserver "{mode: curve, secret_key_file: $WORK/keys/listed.key, server_public_key_file: $WORK/keys/unlisted.pub}"
"$BIN/tern-worker" --config "$WORK/listed.yaml" --name "$MARKER" --shard-index 0 \
  > "$WORK/listed.out" 2> "$WORK/listed.err" &
LPID=$!; PIDS+=($LPID)
"$BIN/tern-worker" --config "$WORK/unlisted.yaml" --name unlisted --shard-index 1 \
  > "$WORK/unlisted.out" 2> "$WORK/unlisted.err" &
UPID=$!; PIDS+=($UPID)
"$BIN/tern-worker" --config "$WORK/plain.yaml" --name plain --shard-index 1 \
  > "$WORK/plain.out" 2> "$WORK/plain.err" &
PPID_=$!; PIDS+=($PPID_)
"$BIN/tern-worker" --config "$WORK/wrongserver.yaml" --name wrongserver --shard-index 1 \
  > "$WORK/wrongserver.out" 2> "$WORK/wrongserver.err" &
WSPID=$!; PIDS+=($WSPID)

# The listed worker trains alone while the other two are refused and counted.
wait_for '[ "$(rounds_with 1)" -ge 5 ]'
wait_for 'grep -q "refused this worker.s key" "$WORK/unlisted.out"'
wait_for 'grep -q "handshake with the coordinator .* failed" "$WORK/plain.out"'
wait_for 'grep -q "handshake with the coordinator .* failed" "$WORK/wrongserver.out"'
! grep -q "worker wrongserver joined" "$WORK/coord.out" || fail "a worker expecting another coordinator key joined"
wait_for 'counted tern_connections_auth_refused_total'
wait_for 'counted tern_connections_handshake_failed_total'
grep -q "refused .* connection(s) so far" "$WORK/coord.out" || { cat "$WORK/coord.out"; fail "no refusal log"; }
grep -q "admitted worker key .* (listed)" "$WORK/coord.out" || fail "the listed worker's admission was not logged"
[ "$(rounds_with 2)" -eq 0 ] || fail "a refused worker took part in a round"
kill -0 "$PPID_" && kill -TERM "$PPID_"
kill -0 "$WSPID" && kill -TERM "$WSPID"

# SIGHUP after adding the second key: the refused worker is admitted and joins the rounds.
cp "$WORK/keys/unlisted.pub" "$WORK/allow/"
kill -HUP "$CPID"
wait_for 'grep -q "allowlist .* reloaded: 2 worker key" "$WORK/coord.out"'
wait_for 'grep -q "admitted worker key .* (unlisted)" "$WORK/coord.out"'
wait_for '[ "$(rounds_with 2)" -ge 3 ]'
# A broken allowlist on reload keeps the previous one.
printf 'garbage\n' > "$WORK/allow/zz-bad.pub"
kill -HUP "$CPID"
wait_for 'grep -q "allowlist not reloaded, keeping the previous one: .*zz-bad.pub:1: not a CURVE key" "$WORK/coord.out"'
kill -0 "$CPID" || fail "the coordinator died on a bad allowlist"

kill -TERM "$CPID"
wait "$CPID" || fail "coordinator exited with $?"
wait "$LPID" || fail "the listed worker exited non-zero"
wait "$UPID" || fail "the once-unlisted worker exited non-zero"
wait "$PPID_" || true
grep '^connections:' "$WORK/coord.out"
grep -Eq '^connections: admitted=[1-9][0-9]* auth_refused=[1-9][0-9]* handshake_failed=[1-9]' "$WORK/coord.out" \
  || { cat "$WORK/coord.out"; fail "connection counters do not show the refusals"; }
ref=$(grep '^model:' "$WORK/coord.out" | sed 's/.*checksum=//')
for w in listed unlisted; do
  got=$(grep '^replica:' "$WORK/$w.out" | sed 's/.*checksum=//')
  [ "$got" = "$ref" ] || fail "$w replica $got != coordinator $ref"
done

# A finished run restarted with CURVE (its checkpoint at max_rounds): for its grace the coordinator
# serves the handshakes, so the listed worker gets in, hears that the run has finished and exits
# 0, and the wait sleeps. Before, the ZAP request went unread in that wait: nobody was admitted,
# the worker re-joined for ever, and every wait returned at once (a core at 100%).
rm -f "$WORK/allow/zz-bad.pub"
SECURITY="{mode: curve, secret_key_file: $WORK/keys/coordinator.key, allowlist: $WORK/allow}" \
  write_coordinator "$WORK/fin.yaml" 3 1 "checkpoint: {path: $WORK/fin.ckpt, every: 1}"
# A grace long enough for the worker to load its shard on a busy machine.
sed -i 's/^worker_patience_seconds: .*/worker_patience_seconds: 15/' "$WORK/fin.yaml"
# start_fin N: the coordinator of fin.yaml (output fin$N.out), and the listed worker once it has
# bound (fin-w$N.out); their pids in CPID and WPID.
start_fin() {
  rm -f "$WORK/endpoint"
  "$BIN/tern-coordinator" --config "$WORK/fin.yaml" > "$WORK/fin$1.out" 2>&1 &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  sed "s|^coordinator: .*|coordinator: $(cat "$WORK/endpoint")|" "$WORK/listed.yaml" > "$WORK/fin-w.yaml"
  "$BIN/tern-worker" --config "$WORK/fin-w.yaml" --name listed > "$WORK/fin-w$1.out" 2>&1 &
  WPID=$!; PIDS+=($WPID)
}
start_fin 1
wait "$CPID" || fail "the CURVE run to 3 rounds exited with $?"
wait "$WPID" || fail "its worker exited non-zero"
start_fin 2
sleep 2
# CPU ticks (1/100 s) the coordinator has used, most of them loading its test set: a busy wait
# would add about 100 a second.
ticks=$(awk '{print $14 + $15}' "/proc/$CPID/stat")
wait "$CPID" || fail "the finished CURVE coordinator exited with $?"
grep -q "training had already finished" "$WORK/fin2.out" || { cat "$WORK/fin2.out"; fail "the restart did not say the run had finished"; }
grep -q "admitted worker key .* (listed)" "$WORK/fin2.out" || { cat "$WORK/fin2.out"; fail "the finished coordinator admitted nobody"; }
for _ in $(seq 1 100); do kill -0 "$WPID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$WPID" 2>/dev/null && fail "the worker still re-joins a run that has finished"
wait "$WPID" || fail "the worker told the run had finished exited non-zero"
[ "$ticks" -lt 120 ] || fail "the finished coordinator's wait used $ticks CPU ticks in 2 s (busy)"
echo "finished CURVE run restarted: the worker was admitted and released; $ticks CPU ticks in 2 s"

if [ $CAPTURE = 1 ]; then
  stop_capture
  packets=$(tcpdump -r "$WORK/curve.pcap" 2> /dev/null | wc -l)
  [ "$packets" -gt 50 ] || fail "the capture holds only $packets packets"
  if grep -aq "$MARKER" "$WORK/curve.pcap"; then fail "the marker crossed the wire in plaintext with CURVE on"; fi
  # Control: the same check finds the marker when the run is plaintext.
  rm -f "$WORK/endpoint" "$WORK/metrics.csv"
  write_coordinator "$WORK/plain-coord.yaml" 5 1
  "$BIN/tern-coordinator" --config "$WORK/plain-coord.yaml" > "$WORK/pc.out" 2> "$WORK/pc.err" &
  CPID=$!; PIDS+=($CPID)
  wait_for_file "$WORK/endpoint"
  EP=$(cat "$WORK/endpoint")
  grep -q "security: none - connections are neither encrypted nor authenticated" "$WORK/pc.out" \
    || fail "no warning about running without encryption"
  start_capture "${EP##*:}" "$WORK/plain.pcap"
  write_worker "$WORK/pw.yaml" "$EP" 1
  "$BIN/tern-worker" --config "$WORK/pw.yaml" --name "$MARKER" > "$WORK/pw.out" 2> "$WORK/pw.err" &
  WPID=$!; PIDS+=($WPID)
  wait "$CPID" || fail "plaintext coordinator exited with $?"
  wait "$WPID" || fail "plaintext worker exited non-zero"
  stop_capture
  grep -aq "$MARKER" "$WORK/plain.pcap" || fail "control failed: the marker is not visible in a plaintext capture"
  echo "capture: $packets packets with CURVE, marker absent; marker present in the plaintext control"
fi
echo "PASS: CURVE admits the allowlisted worker, refuses others, admits a key added on SIGHUP, and a finished run restarted admits and releases its worker"
