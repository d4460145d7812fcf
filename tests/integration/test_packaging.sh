#!/usr/bin/env bash
# `cmake --install` lays out the daemons, the systemd units (ExecStart pointing at the installed
# binaries, so the installed units verify) and the example configs; `cpack -G DEB` packages the
# same for /usr with its shared-library dependencies. The .deb part needs dpkg-deb.
source "$(dirname "$0")/lib.sh"

BUILD="$(cd "$BIN/.." && pwd)"
[ -f "$BUILD/cmake_install.cmake" ] || { echo "SKIP: $BUILD is not a CMake build tree"; exit 77; }
ROOT="$WORK/root"
cmake --install "$BUILD" --prefix "$ROOT" > "$WORK/install.out" 2>&1 \
  || { cat "$WORK/install.out"; fail "cmake --install failed"; }
for f in bin/tern-coordinator bin/tern-worker bin/tern-sim \
         lib/systemd/system/tern-coordinator.service lib/systemd/system/tern-worker@.service \
         share/tern/examples/coordinator.yaml share/tern/examples/worker.yaml \
         share/tern/examples/coordinator.env share/tern/tern-plot.sh share/doc/tern/README.md \
         share/doc/tern/docs/security.md share/doc/tern/docs/configuration.md \
         share/doc/tern/docs/reliability.md; do
  [ -e "$ROOT/$f" ] || fail "not installed: $f"
done
grep -q "^ExecStart=$ROOT/bin/tern-coordinator " "$ROOT/lib/systemd/system/tern-coordinator.service" \
  || fail "installed coordinator unit does not run the installed binary"
grep -q "^ExecStart=$ROOT/bin/tern-worker " "$ROOT/lib/systemd/system/tern-worker@.service" \
  || fail "installed worker unit does not run the installed binary"
# Outputs go through files: with pipefail, a `grep -q` that stops reading early can make the
# writer die of SIGPIPE and fail the pipeline although the match was found.
"$ROOT/bin/tern-coordinator" --version > "$WORK/version.out" || fail "installed binary does not run"
grep -q '^tern-coordinator ' "$WORK/version.out" || fail "installed binary does not report its version"
if command -v systemd-analyze > /dev/null; then
  systemd-analyze verify --man=no "$ROOT/lib/systemd/system/tern-coordinator.service" \
    "$ROOT/lib/systemd/system/tern-worker@.service" > "$WORK/verify.out" 2>&1 \
    || { cat "$WORK/verify.out"; fail "installed units do not verify"; }
else
  fail "systemd-analyze not installed (deploy/install-deps.sh installs systemd): the units cannot be verified"
fi
echo "cmake --install: binaries, units and examples in place"

command -v cpack > /dev/null && command -v dpkg-deb > /dev/null && command -v dpkg-shlibdeps > /dev/null \
  || { echo "SKIP: cpack, dpkg-deb or dpkg-shlibdeps missing for the .deb part"; exit 77; }
(cd "$BUILD" && cpack -G DEB -B "$WORK/pkg") > "$WORK/cpack.out" 2>&1 \
  || { cat "$WORK/cpack.out"; fail "cpack -G DEB failed"; }
deb=$(ls "$WORK"/pkg/tern_*.deb)
[ "$(dpkg-deb -f "$deb" Package)" = tern ] || fail "package name"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libzmq5 libprotobuf libsystemd0 libprometheus-cpp-core; do
  [[ "$depends" == *"$lib"* ]] || fail "Depends lacks $lib: $depends"
done
dpkg-deb -x "$deb" "$WORK/deb"
for f in usr/bin/tern-coordinator usr/bin/tern-worker usr/lib/systemd/system/tern-coordinator.service \
         usr/lib/systemd/system/tern-worker@.service usr/share/tern/examples/worker.yaml; do
  [ -e "$WORK/deb/$f" ] || fail "not in the package: $f"
done
grep -q '^ExecStart=/usr/bin/tern-coordinator ' "$WORK/deb/usr/lib/systemd/system/tern-coordinator.service" \
  || fail "packaged unit does not run /usr/bin/tern-coordinator"
dpkg-deb --ctrl-tarfile "$deb" | tar t > "$WORK/control.list"
grep -q postinst "$WORK/control.list" || fail "no postinst (daemon-reload)"
echo "PASS: cmake --install and the .deb carry binaries, units and example configs"
