#!/usr/bin/env bash
# The daemons under ThreadSanitizer: builds tern-coordinator, tern-worker and tern-sim with
# -DTERN_TSAN=ON and runs the integration tests that exercise their threads (the compute thread,
# the HTTP endpoint's thread). Any report fails the run, whether or
# not the test around it noticed the daemon's exit status. The daemon kit's unit suite (its
# background jobs) runs under it too, and so do the frame guard's tests (its relay thread).
# Usage: tests/tsan.sh [BUILD_DIR [JOBS [WERROR]]]
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build-tsan}"
jobs="${2:-2}"
werror="${3:-OFF}"
# test_cluster_trains computes every round's gradient on the worker's second thread beside its
# heartbeats. test_slow_compute and test_stop_while_computing are left out: their MLP rounds on
# 60,000 rows take about a minute each under TSan on 2 cores, past those tests' own time limits.
# test_trainer_faults hands the external trainer's socket from the main thread to the compute
# thread and reads its counters from the HTTP thread.
tests=(test_cluster_trains test_telemetry_endpoints test_trainer_faults)

# -g1: line tables for the reports' stacks, at a fraction of full debug information's build time.
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DTERN_TSAN=ON -DTERN_BUILD_BENCH=OFF \
  -DTERN_BUILD_DAEMONS=ON -DTERN_BUILD_TESTS=ON -DTERN_WERROR="$werror" >/dev/null
cmake --build "$dir" -j"$jobs" --target tern-coordinator tern-worker tern-sim unit_daemon unit_transport

reports="$PWD/$dir/tsan-reports"
rm -rf "$reports"
mkdir -p "$reports"
filter="^(unit/daemon/.*|unit/transport/.*guard.*|integration/($(IFS='|'; echo "${tests[*]}")))\$"
rc=0
TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1 log_path=$reports/report \
suppressions=$PWD/tests/tsan.supp" \
  ctest --test-dir "$dir" --output-on-failure --timeout 900 -R "$filter" || rc=$?
if compgen -G "$reports/report*" > /dev/null; then
  cat "$reports"/report* >&2
  echo "ThreadSanitizer reported the races above" >&2
  exit 1
fi
# Every test ran: a filter that matched fewer would pass without checking them.
ran=$(ctest --test-dir "$dir" -N -R "$filter" | grep -c " integration/" || true)
[ "$ran" -eq "${#tests[@]}" ] || { echo "tsan: $ran of ${#tests[@]} tests found" >&2; exit 1; }
exit "$rc"
