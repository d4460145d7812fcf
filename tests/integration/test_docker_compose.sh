#!/usr/bin/env bash
# The docker-compose cluster file: Compose itself (the `docker compose` plugin, or Debian's
# docker-compose; neither needs a running engine for `config`) accepts it, and in the
# configuration Compose resolves from it every worker has a shaped uplink (NET_ADMIN and a
# rate), a healthcheck on /healthz, its own shard, and the coordinator keeps its checkpoints in a
# volume, and stops get the units' TimeoutStopSec; the configs it bakes into the image load with
# the real config reader and train.
source "$(dirname "$0")/lib.sh"

COMPOSE="$SRC/deploy/docker-compose.yml"
if docker compose version > /dev/null 2>&1; then
  compose=(docker compose)
elif command -v docker-compose > /dev/null; then
  compose=(docker-compose)
else
  echo "SKIP: neither docker compose nor docker-compose is installed to validate $COMPOSE"
  exit 77
fi
"${compose[@]}" -p tern -f "$COMPOSE" config --quiet || fail "${compose[*]} config rejected the file"
"${compose[@]}" -p tern -f "$COMPOSE" config > "$WORK/resolved.yml" || fail "compose config"
echo "PASS: ${compose[*]} config accepts the cluster file"

python3 - "$WORK/resolved.yml" <<'PY' || fail "the resolved compose file lacks what the cluster needs"
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
services = doc["services"]
coord = services["coordinator"]
vols = coord["volumes"]
assert any((v.get("target") if isinstance(v, dict) else v.split(":")[1]) == "/var/lib/tern"
           for v in vols), vols
assert "tern-state" in doc["volumes"]
def seconds(period):  # Compose durations: "15s", "1m30s", "1m"
    import re
    parts = re.fullmatch(r"(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", str(period))
    assert parts and any(parts.groups()), period
    return 60 * int(parts.group(1) or 0) + float(parts.group(2) or 0)
# Stops get the time the systemd units give them (TimeoutStopSec), not Compose's 10 s: a
# worker waits up to 8 s for its Leave to be had, the coordinator for its workers' Finish acks.
assert seconds(coord.get("stop_grace_period", "10s")) >= 30, coord.get("stop_grace_period")
workers = {n: s for n, s in services.items() if n.startswith("worker-")}
assert len(workers) >= 2, workers.keys()
rates = set()
for name, w in workers.items():
    assert "NET_ADMIN" in w["cap_add"], name
    assert seconds(w.get("stop_grace_period", "10s")) >= 15, (name, w.get("stop_grace_period"))
    env = w["environment"]
    assert env.get("TERN_UPLINK_RATE"), name
    rates.add(env["TERN_UPLINK_RATE"])
    assert "healthcheck" in w["healthcheck"]["test"], name
    assert w["depends_on"]["coordinator"]["condition"] == "service_healthy", name
    cmd = w["command"]
    assert cmd[cmd.index("--name") + 1] == name, (name, cmd)
assert len(rates) > 1, f"every worker has the same uplink {rates}: not heterogeneous"
shards = sorted(int(w["command"][w["command"].index("--shard-index") + 1]) for w in workers.values())
assert shards == list(range(len(workers))), shards
print(f"compose file: coordinator + {len(workers)} shaped workers ({sorted(rates)}), "
      "healthchecks, state volume")
PY

# The configs baked into the image load with the strict reader and train: a 2-round run of one
# worker on loopback, with the volume paths moved into the test directory.
sed "s|/var/lib/tern/|$WORK/|" "$SRC/deploy/docker/coordinator.yaml" > "$WORK/coordinator.yaml"
"$BIN/tern-coordinator" --config "$WORK/coordinator.yaml" --bind tcp://127.0.0.1:0 \
  --endpoint-file "$WORK/endpoint" --max-rounds 2 --min-workers 1 > "$WORK/c.out" 2>&1 &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
"$BIN/tern-worker" --config "$SRC/deploy/docker/worker.yaml" --coordinator "$(cat "$WORK/endpoint")" \
  --name docker-config-check --shard-index 0 > "$WORK/w.out" 2>&1 || { cat "$WORK/w.out"; fail "worker config"; }
wait "$CPID" || { cat "$WORK/c.out"; fail "coordinator config"; }
grep -q '^final: rounds=2 ' "$WORK/c.out" || fail "the docker configs did not train"
[ -s "$WORK/metrics.csv" ] || fail "no metrics CSV where the docker config puts it"
echo "docker configs load and train"

