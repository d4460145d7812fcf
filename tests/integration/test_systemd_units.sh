#!/usr/bin/env bash
# The systemd units pass `systemd-analyze verify` without a single warning, and they keep the
# promises the deploy docs make: Type=notify with a watchdog, restart on failure, hardening.
# The ExecStart binaries are pointed at this build (verify checks that they are executable).
source "$(dirname "$0")/lib.sh"

command -v systemd-analyze > /dev/null || { echo "SKIP: systemd-analyze not installed"; exit 77; }
UNITS="$(cd "$SRC/deploy/systemd" && pwd)"
mkdir -p "$WORK/units"
for f in "$UNITS"/*.service; do
  sed "s|/usr/bin/tern-|$(cd "$BIN" && pwd)/tern-|g" "$f" > "$WORK/units/$(basename "$f")"
done
cd "$WORK/units"
# A unit with an error must fail verify here, or this container cannot judge units at all.
printf '[Service]\nType=bogus\nExecStart=/nonexistent\n' > broken.service
if systemd-analyze verify --man=no ./broken.service > /dev/null 2>&1; then
  echo "SKIP: systemd-analyze verify does not work in this environment"; exit 77
fi
rm broken.service

if ! systemd-analyze verify --man=no ./tern-coordinator.service ./tern-worker@.service \
     > verify.out 2>&1; then
  cat verify.out; fail "systemd-analyze verify failed"
fi
# Warnings (unknown keys, bad values) do not change the exit code: refuse them too.
if [ -s verify.out ]; then cat verify.out; fail "systemd-analyze verify printed warnings"; fi

for unit in tern-coordinator.service tern-worker@.service; do
  for directive in 'Type=notify' 'WatchdogSec=[1-9]' 'Restart=on-failure' 'DynamicUser=yes' \
                   'StateDirectory=tern' 'ProtectSystem=strict' 'ProtectHome=yes' \
                   'PrivateTmp=yes' 'NoNewPrivileges=yes' 'RestrictAddressFamilies=' \
                   '^CapabilityBoundingSet=$'; do
    grep -Eq "^${directive#^}" "$UNITS/$unit" || fail "$unit lacks $directive"
  done
done
grep -q -- '--config /etc/tern/%i.yaml' "$UNITS/tern-worker@.service" \
  || fail "the worker instance name must select /etc/tern/<instance>.yaml"
echo "PASS: systemd units verify cleanly and carry notify, watchdog, restart and hardening"
