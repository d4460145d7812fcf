#!/usr/bin/env bash
# A quickstart worker fits a small board: the quickstart's coordinator and four workers
# (deploy/config, Fashion-MNIST, 4 shards) for 200 rounds, and each worker's peak resident memory
# (VmHWM) stays under 25 MiB and its private (anonymous) memory under 13 MiB, where a shard held
# as floats took 59 MiB and 48 MiB (measured with equal shards: about 21-22 and 9-10.5 MiB; with
# the shipped 2:1 volumes the largest shard's worker 24.2 and 12.5 MiB). The private part is
# what the worker itself allocates (its pixel bytes, buffers, stacks); the rest are shared library
# pages (docs/performance.md, "A Pi-sized worker").
source "$(dirname "$0")/lib.sh"

[ -f "$FMNIST/train-images-idx3-ubyte.gz" ] || { echo "SKIP: Fashion-MNIST not installed"; exit 77; }
# Sanitizer runtimes and their shadow memory are no small board.
if ldd "$BIN/tern-worker" | grep -Eq 'lib(asan|tsan|ubsan|lsan)'; then
  echo "SKIP: a sanitizer build"
  exit 77
fi

"$BIN/tern-coordinator" --config "$SRC/deploy/config/coordinator.yaml" --max-rounds 200 \
  --bind tcp://127.0.0.1:0 --endpoint-file "$WORK/endpoint" > "$WORK/coord.out" 2>&1 &
CPID=$!
PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
workers=()
for i in 0 1 2 3; do
  "$BIN/tern-worker" --config "$SRC/deploy/config/worker.yaml" --coordinator "$(cat "$WORK/endpoint")" \
    --name "worker-$i" --shard-index "$i" --log-level warn > "$WORK/w$i.out" 2>&1 &
  workers+=($!)
  PIDS+=($!)
done

# VmHWM only grows: the last reading before a worker exits is its peak so far. The first rounds
# touch everything a round needs, so a reading from the last rounds is the run's peak.
declare -A hwm anon
while kill -0 "$CPID" 2> /dev/null; do
  for i in 0 1 2 3; do
    status=$(cat "/proc/${workers[$i]}/status" 2> /dev/null) || continue
    h=$(awk '/^VmHWM:/ {print $2}' <<< "$status")
    a=$(awk '/^RssAnon:/ {print $2}' <<< "$status")
    [ -n "$h" ] && hwm[$i]=$h
    [ -n "$a" ] && [ "$a" -gt "${anon[$i]:-0}" ] && anon[$i]=$a
  done
  sleep 0.2
done
wait "$CPID" || fail "coordinator exited with $?"
for p in "${workers[@]}"; do wait "$p" || fail "a worker exited non-zero"; done
grep -q '^final: rounds=200 ' "$WORK/coord.out" || { cat "$WORK/coord.out"; fail "no final line"; }

for i in 0 1 2 3; do
  [ -n "${hwm[$i]:-}" ] || fail "worker $i: no /proc reading"
  echo "worker $i: VmHWM ${hwm[$i]} kB, RssAnon ${anon[$i]} kB"
  [ "${hwm[$i]}" -le $((25 * 1024)) ] || fail "worker $i: peak RSS ${hwm[$i]} kB > 25 MiB"
  [ "${anon[$i]}" -le $((13 * 1024)) ] || fail "worker $i: private RSS ${anon[$i]} kB > 13 MiB"
done
echo "PASS: every quickstart worker peaked under 25 MiB resident, 13 MiB private"
