#!/usr/bin/env bash
# The docker-compose cluster file: every worker has a shaped uplink (NET_ADMIN and a rate), a
# healthcheck on /healthz, and the coordinator keeps its checkpoints in a volume; the configs it
# bakes into the image load with the real config reader; `docker compose config` accepts the
# file where docker with compose exists (skipped, exit 77, elsewhere).
source "$(dirname "$0")/lib.sh"

COMPOSE="$SRC/deploy/docker-compose.yml"
if python3 -c 'import yaml' 2> /dev/null; then
  python3 - "$COMPOSE" <<'PY'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
services = doc["services"]
coord = services["coordinator"]
assert any(v.endswith(":/var/lib/tern") for v in coord["volumes"]), coord["volumes"]
assert "tern-state" in doc["volumes"]
workers = {n: s for n, s in services.items() if n.startswith("worker-")}
assert len(workers) >= 2, workers.keys()
for name, w in workers.items():
    assert "NET_ADMIN" in w["cap_add"], name
    assert "TERN_UPLINK_RATE" in w["environment"], name
    assert "healthcheck" in w["healthcheck"]["test"], name
    assert w["depends_on"]["coordinator"]["condition"] == "service_healthy", name
    cmd = w["command"]
    assert cmd[cmd.index("--name") + 1] == name, (name, cmd)
shards = sorted(int(w["command"][w["command"].index("--shard-index") + 1]) for w in workers.values())
assert shards == list(range(len(workers))), shards
print(f"compose file: coordinator + {len(workers)} shaped workers, healthchecks, state volume")
PY
fi

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

if ! docker compose version > /dev/null 2>&1; then
  echo "SKIP: docker compose is not available to validate $COMPOSE"
  exit 77
fi
docker compose -f "$COMPOSE" config --quiet || fail "docker compose config rejected the file"
echo "PASS: docker compose config accepts the cluster file"
