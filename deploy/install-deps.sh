#!/usr/bin/env bash
# Installs every package tern needs to build, test and run, from Debian 12's archive.
# Idempotent: it only calls apt-get when something is missing.
set -euo pipefail

packages=(
  build-essential cmake pkg-config git
  libzmq3-dev cppzmq-dev libprotobuf-dev protobuf-compiler
  libyaml-cpp-dev libboost-dev libeigen3-dev libspdlog-dev libfmt-dev libcli11-dev
  zlib1g-dev doctest-dev
  clang-14 libclang-rt-14-dev clang-format
  prometheus-cpp-dev libsystemd-dev systemd python3 dpkg-dev
  dataset-fashion-mnist
  gnuplot-nox
  iproute2 procps tcpdump strace
  docker-compose python3-yaml
)

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
