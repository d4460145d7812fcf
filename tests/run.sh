#!/usr/bin/env bash
# Installs dependencies, builds tern, and runs every test: unit suites, integration tests on
# loopback, network-namespace tests (as root), the fuzz targets, the unit suites again under
# ASan+UBSan, the daemons' threaded integration tests under ThreadSanitizer, and the arm64
# cross-build with its unit suites under qemu and its .deb through lintian.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="${TERN_JOBS:-2}"

bash deploy/install-deps.sh
arm64=1
if [ "${TERN_SKIP_ARM64:-0}" = "1" ]; then arm64=0; fi
if [ "$arm64" = 1 ]; then bash deploy/cross/build-arm64.sh --deps-only; fi

# ccache (installed with the dependencies) keeps compiled objects between runs and clones: paths
# are taken relative to this checkout, so another clone of the same sources hits the cache.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi

# Every build below treats warnings (-Wall -Wextra -Wpedantic -Wshadow) as errors; TERN_WERROR=0
# turns that off (a compiler newer than Debian 12's may warn where g++ 12 does not).
werror=ON
if [ "${TERN_WERROR:-1}" = "0" ]; then werror=OFF; fi

echo "== build (Release)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DTERN_WERROR="$werror" "${launcher[@]}" >/dev/null
cmake --build build -j"$jobs"

# The arm64 cross-build runs beside the tests below at low priority, on the CPU they leave idle
# (most of the integration and netns tests wait on the network); its tests run at the end.
arm64_build=""
if [ "$arm64" = 1 ]; then
  echo "== arm64 cross-build started in the background (log: build-arm64.log)"
  nice -n 15 env TERN_JOBS="$jobs" bash deploy/cross/build-arm64.sh --no-deps --build-only \
    > build-arm64.log 2>&1 &
  arm64_build=$!
fi

echo "== tests"
# The shaped-link tests (tests/netns, about half a minute) run as root and are skipped (exit
# code 77) elsewhere; TERN_SKIP_NETNS=1 leaves them out.
if [ "${TERN_SKIP_NETNS:-0}" = "1" ]; then
  ctest --test-dir build --output-on-failure --timeout 900 -LE netns
else
  ctest --test-dir build --output-on-failure --timeout 900
fi

if [ "${TERN_SKIP_FUZZ:-0}" != "1" ]; then
  # 30 s a target here (tests/fuzz/run.sh alone: 60): the whole run stays within its budget.
  export FUZZ_SECONDS="${FUZZ_SECONDS:-30}"
  echo "== fuzz targets under ASan+UBSan (clang, ${FUZZ_SECONDS}s each)"
  FUZZ_JOBS="$jobs" bash tests/fuzz/run.sh
fi

if [ "${TERN_SKIP_SANITIZE:-0}" != "1" ]; then
  echo "== unit tests under ASan+UBSan"
  # -g1: line tables for the reports' stacks, at a fraction of full debug information's build
  # time (as tests/tsan.sh).
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" \
    -DTERN_BUILD_BENCH=OFF -DTERN_BUILD_DAEMONS=ON -DTERN_WERROR="$werror" "${launcher[@]}" \
    >/dev/null
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
if [ "$arm64" = 1 ]; then
  echo "== arm64: cross-build, unit tests under qemu, the arm64 .deb through lintian"
  wait "$arm64_build" || { tail -n 60 build-arm64.log; echo "the arm64 cross-build failed" >&2; exit 1; }
  TERN_JOBS="$jobs" bash deploy/cross/build-arm64.sh --no-deps
fi
echo "== all tests passed"
