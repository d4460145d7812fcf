#!/bin/bash
# Container entrypoint. As root (the container needs NET_ADMIN for this): shape this
# container's uplink with a token bucket when TERN_UPLINK_RATE is set (tc syntax: 2mbit,
# 500kbit), then drop to the unprivileged 'tern' user with no capabilities and run the daemon.
# `tern-entrypoint healthcheck` asks the daemon's /healthz on TERN_HTTP_PORT (default 9464).
set -euo pipefail

if [ "${1:-}" = "healthcheck" ]; then
  exec 3<> "/dev/tcp/127.0.0.1/${TERN_HTTP_PORT:-9464}"
  printf 'GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n' >&3
  read -r -t 3 status_line <&3
  [[ "$status_line" == "HTTP/1.1 200 "* ]]
  exit
fi

if [ -n "${TERN_UPLINK_RATE:-}" ]; then
  dev="${TERN_UPLINK_DEV:-eth0}"
  # burst: at least one full-size packet per timer tick; latency bounds the queue.
  tc qdisc replace dev "$dev" root handle 1: tbf rate "$TERN_UPLINK_RATE" \
    burst "${TERN_UPLINK_BURST:-32kbit}" latency "${TERN_UPLINK_LATENCY:-400ms}"
  if [ -n "${TERN_UPLINK_DELAY:-}" ]; then
    # Propagation delay below the rate limit: netem as the tbf's child qdisc.
    tc qdisc replace dev "$dev" parent 1:1 handle 10: netem delay "$TERN_UPLINK_DELAY" 2>/dev/null \
      || echo "tern-entrypoint: netem unavailable, no delay added" >&2
  fi
  echo "tern-entrypoint: $dev uplink shaped to $TERN_UPLINK_RATE" >&2
fi

if [ "$(id -u)" = 0 ]; then
  chown tern:tern /var/lib/tern
  exec setpriv --reuid=tern --regid=tern --init-groups --no-new-privs \
    --inh-caps=-all --bounding-set=-all -- "$@"
fi
exec "$@"
