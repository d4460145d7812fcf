#!/usr/bin/env bash
# Installs every package tern needs to build, test and run, from Debian 12's archive.
# Idempotent: it only calls apt-get when something is missing.
#   --build-only   what building the daemons and their package needs, no test, fuzzing, plotting
#                  or container tools and no data set (a Pi on a slow link: build with
#                  -DTERN_BUILD_TESTS=OFF -DTERN_BUILD_BENCH=OFF)
set -euo pipefail

build_only=0
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    *) echo "install-deps: unknown option $arg (--build-only)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake pkg-config
  libzmq3-dev cppzmq-dev libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libboost-dev nlohmann-json3-dev libeigen3-dev libspdlog-dev libfmt-dev
  libcli11-dev zlib1g-dev prometheus-cpp-dev libsystemd-dev dpkg-dev
  help2man
)
if [ "$build_only" = 0 ]; then
  packages+=(
    git doctest-dev ccache
    clang-14 libclang-rt-14-dev clang-format
    systemd python3
    dataset-fashion-mnist
    gnuplot-nox
    iproute2 procps tcpdump strace
    docker-compose python3-yaml
    lintian
    prometheus  # promtool, for the observability kit's checks
    jq          # reads the daemons' JSON log lines in the tests
    # The Python package (python/) and its trainers: docs/python.md
    python3-zmq python3-protobuf python3-numpy python3-pytest python3-torch python3-setuptools
  )
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo > /dev/null || {
      echo "install-deps: installing packages needs root: run this as root, or install sudo" >&2
      exit 1
    }
    SUDO="sudo"
  fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi
