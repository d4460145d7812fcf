#!/usr/bin/env bash
# Cross-builds tern for 64-bit ARM (Raspberry Pi OS 64-bit = Debian 12 arm64) on a Debian 12 amd64
# machine and runs the unit tests under qemu-user.
#
#   bash deploy/cross/build-arm64.sh [--deps-only | --no-deps] [--build-only]
#
# Installs what it needs (idempotent: apt-get runs only when something is missing), configures
# BUILD (default build-arm64) with deploy/cross/aarch64-linux-gnu.cmake, builds with TERN_JOBS jobs
# (default 2), checks that tern-worker is an AArch64 program, runs `ctest -L unit` under qemu,
# and packs the arm64 .deb, which lintian must pass (errors and warnings fail the run).
# --build-only stops after the build. CCACHE_* settings apply when ccache is installed.
set -euo pipefail
cd "$(dirname "$0")/../.."

deps=1
build=1
test=1
for arg in "$@"; do
  case "$arg" in
    --deps-only) build=0 ;;
    --no-deps) deps=0 ;;
    --build-only) test=0 ;;
    -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build-arm64: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done

build_dir="${TERN_ARM64_BUILD:-build-arm64}"
jobs="${TERN_JOBS:-2}"
triplet=aarch64-linux-gnu
overlay="${TERN_CROSS_OVERLAY:-/opt/tern-cross/$triplet}"

# Build-machine packages (protoc runs here; Eigen, doctest and CLI11 are architecture-independent
# headers; civetweb's CMake package checks that a civetweb program exists, any architecture).
host_packages=(
  crossbuild-essential-arm64 qemu-user-static cmake pkg-config file dpkg-dev help2man lintian
  protobuf-compiler libeigen3-dev doctest-dev libcli11-dev civetweb nlohmann-json3-dev
)
# arm64 packages that are Multi-Arch: same, installed beside the native ones.
arm64_packages=(
  libzmq3-dev cppzmq-dev libprotobuf-dev libboost-dev libspdlog-dev libfmt-dev
  libsystemd-dev zlib1g-dev libcivetweb-dev libcurl4-openssl-dev
  libyaml-cpp0.7 libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
)
# libyaml-cpp-dev is not Multi-Arch: same, and prometheus-cpp-dev depends on the civetweb program:
# installing either for arm64 would remove the native package. Their arm64 builds are unpacked
# into $overlay instead, with the shared libraries their CMake files name (the same versions as
# the installed runtime packages above).
overlay_packages=(
  libyaml-cpp-dev libyaml-cpp0.7
  prometheus-cpp-dev libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libprometheus-cpp-push1.0
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"
}

install_deps() {
  local updated=0
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    echo "build-arm64: enabling the arm64 architecture"
    $SUDO dpkg --add-architecture arm64
    $SUDO apt-get update -q
    updated=1
  fi
  local missing=()
  for p in "${host_packages[@]}"; do installed "$p" || missing+=("$p"); done
  for p in "${arm64_packages[@]}"; do installed "$p:arm64" || missing+=("$p:arm64"); done
  if [ "${#missing[@]}" -gt 0 ]; then
    echo "build-arm64: installing ${missing[*]}"
    [ "$updated" = 1 ] || $SUDO apt-get update -q
    # --no-remove: never trade a native package for its arm64 twin.
    $SUDO apt-get install -y -q --no-install-recommends --no-remove "${missing[@]}"
  else
    echo "build-arm64: packages present"
  fi

  # The overlay is unpacked again whenever an installed version changes.
  local wanted=() p v
  for p in "${overlay_packages[@]}"; do
    if installed "$p:arm64"; then
      v="$(dpkg-query -W -f='${Version}' "$p:arm64")"
    else
      v="$(apt-cache show --no-all-versions "$p:arm64" | sed -n 's/^Version: //p' | head -n1)"
    fi
    [ -n "$v" ] || { echo "build-arm64: no arm64 version of $p" >&2; exit 1; }
    wanted+=("$p:arm64=$v")
  done
  if [ "$(cat "$overlay/.packages" 2>/dev/null)" != "${wanted[*]}" ]; then
    echo "build-arm64: unpacking ${overlay_packages[*]} (arm64) into $overlay"
    local tmp
    tmp="$(mktemp -d)"
    (cd "$tmp" && apt-get download -q "${wanted[@]}")
    $SUDO rm -rf "$overlay"
    $SUDO mkdir -p "$overlay"
    for deb in "$tmp"/*.deb; do $SUDO dpkg-deb -x "$deb" "$overlay"; done
    echo "${wanted[*]}" | $SUDO tee "$overlay/.packages" >/dev/null
    rm -rf "$tmp"
  fi
}

if [ "$deps" = 1 ]; then install_deps; fi
[ "$build" = 1 ] || exit 0

start=$(date +%s)
echo "== configure $build_dir (aarch64, Release)"
launcher=()
if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build_dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/deploy/cross/$triplet.cmake" "${launcher[@]}" \
  -DTERN_CROSS_OVERLAY="$overlay" -DCMAKE_BUILD_TYPE=Release \
  -DTERN_BUILD_BENCH=OFF -DTERN_BUILD_DAEMONS=ON -DTERN_BUILD_TESTS=ON >/dev/null
echo "== build ($jobs jobs)"
cmake --build "$build_dir" -j"$jobs"
built=$(date +%s)

for exe in tern-worker tern-coordinator tern-sim; do
  kind="$(file -b "$build_dir/bin/$exe")"
  case "$kind" in
    *"ARM aarch64"*) ;;
    *) echo "build-arm64: $build_dir/bin/$exe is not an AArch64 program: $kind" >&2; exit 1 ;;
  esac
done
echo "build-arm64: $(file "$build_dir/bin/tern-worker" | cut -d, -f1-2)"
[ "$test" = 1 ] || exit 0

echo "== unit tests under qemu"
log="$build_dir/ctest-unit.log"
set +e
# Every unit suite but those that start threads (the daemon kit's poll loop, the transport, the
# telemetry endpoint, the external trainer's socket: libzmq's and Asio's threads; the buffer
# pool's case of a buffer let go on another thread). qemu-aarch64 7.2 here cannot start a thread:
# pthread_create spins at full CPU and never returns, in a three-line std::thread program too.
# They run natively, under ASan+UBSan and under TSan. So does the one case that reads each
# non-regular checkpoint path in a forked child given 5 s: under qemu-user the child never
# answered within them (25.9 s for its five paths when measured).
ctest --test-dir "$build_dir" -L unit \
  -E '^unit/(daemon|transport|telemetry|external_trainer)/|^unit/coordinator/a checkpoint path that is no regular file|^unit/compression/a buffer let go on another thread' \
  --output-on-failure -j"$jobs" --timeout 900 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
set -e
tested=$(date +%s)

echo "== arm64 package"
(cd "$build_dir" && cpack -G DEB > cpack.log) || { cat "$build_dir/cpack.log"; exit 1; }
deb="$(ls "$build_dir"/tern_*_arm64.deb)"
lintian --fail-on error,warning "$deb" || { echo "build-arm64: lintian refused $deb" >&2; exit 1; }
echo "build-arm64: $deb passes lintian"

echo "== summary"
echo "compiler:   $($triplet-g++ --version | head -n1)"
echo "binaries:   $build_dir/bin/tern-worker tern-coordinator tern-sim (aarch64)"
echo "unit tests: $(grep -E 'tests passed' "$log" | tail -n1)"
echo "package:    $deb"
echo "time:       build $((built - start)) s, unit tests under qemu $((tested - built)) s"
exit "$rc"
