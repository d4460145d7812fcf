#!/usr/bin/env bash
# `cmake --install` lays out the daemons, the systemd units (ExecStart pointing at the installed
# binaries, so the installed units verify), the configurations, the example configs and the man
# pages; `cpack -G DEB` packages the same for /usr with its shared-library dependencies, and
# lintian passes it with no error nor warning (beyond the overrides, each with its reason, in
# deploy/packaging/lintian-overrides). The .deb part needs dpkg-deb and lintian.
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
         share/doc/tern/docs/reliability.md share/doc/tern/copyright \
         share/doc/tern/changelog.Debian.gz etc/tern/coordinator.yaml etc/tern/worker.yaml \
         share/tern/observability/grafana-dashboard.json share/tern/observability/alerts.yml; do
  [ -e "$ROOT/$f" ] || fail "not installed: $f"
done
# The man pages (help2man, at build time) of every program and subcommand.
MAN_PAGES="man8/tern-coordinator.8.gz man8/tern-coordinator-status.8.gz
  man8/tern-coordinator-allocate.8.gz man8/tern-coordinator-keygen.8.gz man8/tern-worker.8.gz
  man8/tern-worker-keygen.8.gz man1/tern-sim.1.gz"
[ -e "$BUILD/man/tern-worker.8.gz" ] \
  || fail "no man pages in $BUILD/man: help2man was missing when cmake configured (deploy/install-deps.sh installs it; configure again)"
for page in $MAN_PAGES; do
  f="$ROOT/share/man/$page"
  [ -e "$f" ] || fail "man page not installed: share/man/$page"
  # The NAME line is the page's own (deploy/packaging/man), not help2man's placeholder.
  gzip -dc "$f" > "$WORK/page"
  grep -A1 '^\.SH NAME' "$WORK/page" | grep -q ' \\- ' || fail "$page has no NAME line"
  ! grep -q 'manual page for' "$WORK/page" || fail "$page has help2man's placeholder NAME"
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
command -v lintian > /dev/null \
  || fail "lintian not installed (deploy/install-deps.sh installs it): the .deb cannot be checked"
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
grep -q '^ExecReload=/bin/kill -HUP \$MAINPID$' "$WORK/deb/usr/lib/systemd/system/tern-coordinator.service" \
  || fail "packaged coordinator unit has no ExecReload sending SIGHUP"
for page in $MAN_PAGES; do
  [ -e "$WORK/deb/usr/share/man/$page" ] || fail "man page not in the package: $page"
done

# Debian's documents: a DEP-5 copyright with the licence and the copyright line, a changelog
# whose newest entry is the package's version, a maintainer that is not a placeholder.
copyright="$WORK/deb/usr/share/doc/tern/copyright"
[ -f "$copyright" ] || fail "no /usr/share/doc/tern/copyright"
grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' "$copyright" \
  || fail "copyright is not machine-readable (DEP-5)"
grep -q '^License: Apache-2.0$' "$copyright" || fail "copyright does not name Apache-2.0"
grep -q '^Copyright: 2026 The tern authors$' "$copyright" || fail "copyright lacks the copyright line"
version=$(dpkg-deb -f "$deb" Version)
gzip -dc "$WORK/deb/usr/share/doc/tern/changelog.Debian.gz" | head -n1 > "$WORK/changelog.top"
grep -q "^tern ($version) " "$WORK/changelog.top" \
  || fail "changelog's newest entry is not for $version: $(cat "$WORK/changelog.top")"
maintainer=$(dpkg-deb -f "$deb" Maintainer)
[[ "$maintainer" == *@*.* && "$maintainer" != *localhost* ]] || fail "placeholder maintainer: $maintainer"
dpkg-deb -f "$deb" Description | sed -n '2,$p' | grep -q '[a-z]' || fail "empty extended description"

# Maintainer scripts and conffiles: prerm stops and disables the units on removal; every file
# under /etc is a conffile and every conffile is in the package.
dpkg-deb --ctrl-tarfile "$deb" | tar t > "$WORK/control.list"
for f in postinst prerm postrm conffiles; do
  grep -qx "\./$f\|$f" "$WORK/control.list" || fail "no $f in the control archive"
done
dpkg-deb -e "$deb" "$WORK/control"
grep -q "deb-systemd-invoke stop tern-coordinator.service 'tern-worker@\*.service'" "$WORK/control/prerm" \
  || fail "prerm does not stop the coordinator and the worker instances"
grep -q 'disable tern-coordinator.service tern-worker@.service' "$WORK/control/prerm" \
  || fail "prerm does not disable the units"
(cd "$WORK/deb" && find etc -type f | sed 's|^|/|' | sort) > "$WORK/etc.list"
sort "$WORK/control/conffiles" > "$WORK/conffiles.list"
[ -s "$WORK/etc.list" ] || fail "the package installs nothing under /etc/tern"
diff -u "$WORK/etc.list" "$WORK/conffiles.list" || fail "conffiles differ from the files under /etc"

# lintian: no error, no warning; an override no longer needed (unused) fails too, so that the
# list with its reasons stays true.
lintian --fail-on error,warning --display-info "$deb" > "$WORK/lintian.out" 2>&1 \
  || { cat "$WORK/lintian.out"; fail "lintian reports errors or warnings"; }
if grep -E 'unused-override|mismatched-override' "$WORK/lintian.out"; then
  fail "deploy/packaging/lintian-overrides has an override lintian no longer needs"
fi
echo "PASS: cmake --install and the .deb carry binaries, units, configurations, man pages and Debian's documents; lintian passes"
