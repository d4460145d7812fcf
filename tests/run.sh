#!/usr/bin/env bash
# Installs dependencies, builds tern, and runs every test: unit suites, integration tests on
# loopback, network-namespace tests (as root), the unit suites again under ASan+UBSan, and the
# daemons' threaded integration tests under ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TERN_JOBS:-2}"

bash deploy/install-deps.sh

# Every build below treats warnings (-Wall -Wextra -Wpedantic -Wshadow) as errors; TERN_WERROR=0
# turns that off (a compiler newer than Debian 12's may warn where g++ 12 does not).
werror=ON
if [ "${TERN_WERROR:-1}" = "0" ]; then werror=OFF; fi

echo "== build (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTERN_WERROR="$werror" >/dev/null
cmake --build build -j"$jobs"

echo "== tests"
# The shaped-link tests (tests/netns, about half a minute) run as root and are skipped (exit
# code 77) elsewhere; TERN_SKIP_NETNS=1 leaves them out.
if [ "${TERN_SKIP_NETNS:-0}" = "1" ]; then
  ctest --test-dir build --output-on-failure --timeout 900 -LE netns
else
  ctest --test-dir build --output-on-failure --timeout 900
fi

if [ "${TERN_SKIP_FUZZ:-0}" != "1" ]; then
  echo "== fuzz targets under ASan+UBSan (clang, ${FUZZ_SECONDS:-60}s each)"
  FUZZ_JOBS="$jobs" bash tests/fuzz/run.sh
fi

if [ "${TERN_SKIP_SANITIZE:-0}" != "1" ]; then
  echo "== unit tests under ASan+UBSan"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON \
    -DTERN_BUILD_BENCH=OFF -DTERN_BUILD_DAEMONS=ON -DTERN_WERROR="$werror" >/dev/null
  # The unit suites only (each tests/unit/NAME builds unit_NAME), not the daemons' programs.
  unit_targets=()
  for d in tests/unit/*/; do
    if [ -f "$d/CMakeLists.txt" ]; then unit_targets+=("unit_$(basename "$d")"); fi
  done
  cmake --build build-asan -j"$jobs" --target "${unit_targets[@]}"
  # Every unit suite, the cores' included (they need the daemons' libraries).
  # (Listed to a file first: grep -q stopping early would fail the pipe under pipefail.)
  ctest --test-dir build-asan -N -L unit > build-asan/unit-tests.txt
  grep -q "unit/cores/" build-asan/unit-tests.txt ||
    { echo "the sanitizer build has no cores unit suite" >&2; exit 1; }
  ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan --output-on-failure -L unit --timeout 900
fi
if [ "${TERN_SKIP_TSAN:-0}" != "1" ]; then
  echo "== the daemons' threaded integration tests under ThreadSanitizer"
  bash tests/tsan.sh build-tsan "$jobs" "$werror"
fi
if [ "${TERN_ARM64:-0}" = "1" ]; then
  echo "== arm64 cross-build, unit tests under qemu"
  TERN_JOBS="$jobs" bash deploy/cross/build-arm64.sh
fi
echo "== all tests passed"
