#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: installs dependencies, builds tern, and trains
# softmax regression on non-IID Fashion-MNIST with one coordinator and 4 workers on loopback.
# Prints the coordinator's progress and ends with its summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TERN_JOBS:-2}"
out="${TERN_OUT:-out/quickstart}"

bash deploy/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target tern-coordinator tern-worker

mkdir -p "$out"
rm -f "$out/endpoint"
pids=()
cleanup() { for p in "${pids[@]:-}"; do kill "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
# Ctrl-C reaches the daemons too (the terminal signals the whole group), and each stops on its
# own: the coordinator with its final line, the workers with a Leave. The script waits for that
# rather than exiting at once, whose cleanup's SIGTERM, a second signal, would end every daemon
# at once. A SIGTERM to the script alone is passed on to them.
trap 'echo "quickstart: interrupted, the daemons are stopping" >&2' INT
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' TERM
# Waits for a daemon to end (a trapped signal interrupts wait); its exit status.
wait_for() {
  local rc=0
  while :; do
    rc=0
    wait "$1" || rc=$?
    kill -0 "$1" 2>/dev/null || return "$rc"
  done
}

# Port 0: the coordinator picks a free port and writes the endpoint it bound. Its output goes to
# the terminal and the log through a process substitution, so that $! is the coordinator itself
# (the one cleanup must stop), not tee; tee ignores Ctrl-C, which would end it before the
# coordinator's last lines.
build/bin/tern-coordinator --config deploy/config/coordinator.yaml \
  --bind tcp://127.0.0.1:0 --endpoint-file "$out/endpoint" \
  --metrics-csv "$out/metrics.csv" > >(trap '' INT; exec tee "$out/coordinator.log") 2>&1 &
pids+=($!)
for _ in $(seq 1 300); do [ -s "$out/endpoint" ] && break; sleep 0.1; done
[ -s "$out/endpoint" ] || { echo "quickstart: the coordinator did not start" >&2; exit 1; }
endpoint=$(cat "$out/endpoint")

for i in 0 1 2 3; do
  build/bin/tern-worker --config deploy/config/worker.yaml --coordinator "$endpoint" \
    --name "worker-$i" --shard-index "$i" --log-level warn > "$out/worker-$i.log" 2>&1 &
  pids+=($!)
done
coordinator_rc=0
wait_for "${pids[0]}" || coordinator_rc=$?
for p in "${pids[@]:1}"; do wait_for "$p" || true; done
# tee writes the coordinator's last lines after it has exited.
for _ in $(seq 1 50); do grep -q '^final:' "$out/coordinator.log" && break; sleep 0.1; done
echo "metrics: $out/metrics.csv"
grep '^final:' "$out/coordinator.log" | tail -1
exit "$coordinator_rc"
