#!/usr/bin/env bash
# Builds deploy/docker/Dockerfile and smoke-tests the image on a machine without a Docker
# engine, with Debian's buildah (vfs storage, chroot isolation) and, where no registry is
# reachable, a debian:12 base made by debootstrap from the Debian mirror. Root only; about 15
# minutes on 2 cores. Not part of tests/run.sh.
#
# The smoke test runs in the image: both binaries answer --version; the entrypoint starts a
# coordinator (dropping to the unprivileged 'tern' user) and its healthcheck passes; a worker with
# the baked configuration trains 30 rounds with it; the worker's replica equals the coordinator's
# model; the checkpoint and metrics CSV land in /var/lib/tern owned by 'tern'. Uplink shaping
# (TERN_UPLINK_RATE) is not exercised: chroot isolation shares the host's network.
#
# Usage: deploy/docker/check-image.sh [WORKDIR]   (default /tmp/tern-image)
set -euo pipefail
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
WORK="${1:-/tmp/tern-image}"
export STORAGE_DRIVER=vfs BUILDAH_ISOLATION=chroot
[ "$(id -u)" = 0 ] || { echo "check-image: needs root" >&2; exit 2; }
for p in buildah debootstrap; do
  command -v "$p" > /dev/null || apt-get install -y -q --no-install-recommends "$p"
done
mkdir -p "$WORK"
ba() { buildah --storage-driver vfs "$@"; }

# The base images: pulled if a registry answers, else made from the Debian mirror.
if ! ba inspect --type image docker.io/library/debian:12 > /dev/null 2>&1; then
  if ! ba pull -q docker.io/library/debian:12 > /dev/null 2>&1; then
    echo "check-image: no registry; making debian:12 with debootstrap"
    rm -rf "$WORK/rootfs"
    debootstrap --variant=minbase bookworm "$WORK/rootfs" http://deb.debian.org/debian \
      > "$WORK/debootstrap.log"
    ctr=$(ba from scratch)
    cp -a "$WORK/rootfs/." "$(ba mount "$ctr")/"
    ba umount "$ctr" > /dev/null
    ba commit -q "$ctr" docker.io/library/debian:12 > /dev/null
    ba rm "$ctr" > /dev/null
  fi
fi
if ! ba inspect --type image docker.io/library/debian:12-slim > /dev/null 2>&1; then
  ba pull -q docker.io/library/debian:12-slim > /dev/null 2>&1 ||
    ba tag docker.io/library/debian:12 docker.io/library/debian:12-slim
fi

# The committed tree only, as a clean checkout would build it.
rm -rf "$WORK/context"
mkdir -p "$WORK/context"
git -C "$SRC" archive HEAD | tar -x -C "$WORK/context"
echo "check-image: building (log: $WORK/build.log)"
ba bud --pull=false --isolation chroot -f deploy/docker/Dockerfile -t tern:check \
  "$WORK/context" > "$WORK/build.log" 2>&1 || { tail -n 30 "$WORK/build.log"; exit 1; }

cat > "$WORK/smoke.sh" <<'SMOKE'
set -euo pipefail
tern-coordinator --version
tern-worker --version
tern-entrypoint tern-coordinator --config /etc/tern/coordinator.yaml --http 127.0.0.1:9464 \
  --bind tcp://127.0.0.1:5555 --min-workers 1 --max-rounds 30 > /tmp/c.out 2>&1 &
C=$!
for _ in $(seq 1 50); do tern-entrypoint healthcheck 2> /dev/null && break; sleep 0.2; done
tern-entrypoint healthcheck && echo "healthcheck: ok"
tern-entrypoint tern-worker --config /etc/tern/worker.yaml --coordinator tcp://127.0.0.1:5555 \
  --name smoke > /tmp/w.out 2>&1
wait "$C"
grep '^final: rounds=30 ' /tmp/c.out
model=$(sed -n 's/^model: .*checksum=//p' /tmp/c.out)
replica=$(sed -n 's/^replica: .*checksum=//p' /tmp/w.out)
[ -n "$model" ] && [ "$model" = "$replica" ] && echo "replica matches the model: $model"
[ "$(stat -c %U /var/lib/tern/coordinator.ckpt)" = tern ] && echo "checkpoint written by 'tern'"
[ -s /var/lib/tern/metrics.csv ] && echo "metrics CSV written"
SMOKE
ctr=$(ba from tern:check)
trap 'ba rm "$ctr" > /dev/null 2>&1 || true' EXIT
ba copy "$ctr" "$WORK/smoke.sh" /smoke.sh > /dev/null
ba run --isolation chroot "$ctr" -- bash /smoke.sh
echo "check-image: PASS (image tern:check in buildah's vfs storage)"
