#!/usr/bin/env bash
# The observability kit in deploy/observability/ fits the daemons it watches: promtool accepts the
# scrape configuration and the alert rules (and their unit tests pass), the Grafana dashboard
# takes its Prometheus data source from a variable, a live coordinator's and a live worker's
# /metrics pass `promtool check metrics` without a single complaint, and every metric name the
# dashboard and the rules use is one of those the two daemons export.
source "$(dirname "$0")/lib.sh"
KIT="$SRC/deploy/observability"

command -v promtool > /dev/null \
  || fail "promtool not found: install Debian's prometheus package (deploy/install-deps.sh does)"

promtool check config "$KIT/prometheus.yml" > "$WORK/config.out" 2>&1 \
  || { cat "$WORK/config.out"; fail "promtool check config prometheus.yml"; }
promtool check rules "$KIT/alerts.yml" > "$WORK/rules.out" 2>&1 \
  || { cat "$WORK/rules.out"; fail "promtool check rules alerts.yml"; }
promtool test rules "$KIT/alerts_test.yml" > "$WORK/rules_test.out" 2>&1 \
  || { cat "$WORK/rules_test.out"; fail "promtool test rules alerts_test.yml"; }

# A loopback coordinator and one worker, both serving /metrics, until the coordinator has
# evaluated (so tern_test_accuracy exists) and the worker has trained.
write_coordinator "$WORK/coord.yaml" 100000 1
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" --http 127.0.0.1:0 \
  --http-url-file "$WORK/coord.url" > "$WORK/coord.out" 2> "$WORK/coord.err" &
PIDS+=($!)
wait_for_file "$WORK/endpoint"
wait_for_file "$WORK/coord.url"
write_worker "$WORK/worker.yaml" "$(cat "$WORK/endpoint")" 1
"$BIN/tern-worker" --config "$WORK/worker.yaml" --name w0 --http 127.0.0.1:0 \
  --http-url-file "$WORK/worker.url" > "$WORK/w0.out" 2> "$WORK/w0.err" &
PIDS+=($!)
wait_for_file "$WORK/worker.url"

python3 - "$(cat "$WORK/coord.url")" "$(cat "$WORK/worker.url")" "$WORK" <<'PY' \
  || { cat "$WORK/coord.err" "$WORK/w0.err"; fail "no scrape showed a trained cluster"; }
import re, sys, time, urllib.request
coord, worker, work = sys.argv[1:4]
def get(url):
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        return r.read().decode()
def has(text, name, positive=False):
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    return m is not None and (not positive or float(m.group(1)) > 0)
deadline = time.time() + 60  # slow under the sanitizers; seconds when healthy
while time.time() < deadline:
    c, w = get(coord), get(worker)
    if (has(c, "tern_test_accuracy") and has(c, "tern_last_round_completed_timestamp_seconds")
            and has(w, "tern_rounds_total", positive=True)):
        open(f"{work}/coord.metrics", "w").write(c)
        open(f"{work}/worker.metrics", "w").write(w)
        sys.exit(0)
    time.sleep(0.2)
sys.exit(1)
PY

for daemon in coord worker; do
  set +e
  promtool check metrics < "$WORK/$daemon.metrics" > "$WORK/$daemon.lint" 2>&1
  rc=$?
  set -e
  if [ "$rc" -ne 0 ] || [ -s "$WORK/$daemon.lint" ]; then
    cat "$WORK/$daemon.lint"
    fail "promtool check metrics complains about the $daemon's /metrics (exit $rc)"
  fi
done
echo "promtool check metrics: nothing to say about the coordinator's or the worker's /metrics"

python3 - "$KIT" "$WORK/coord.metrics" "$WORK/worker.metrics" <<'PY'
import json, re, sys
import yaml
kit, metrics_files = sys.argv[1], sys.argv[2:]

live = set()
for path in metrics_files:
    for line in open(path):
        if line.strip() and not line.startswith("#"):
            live.add(re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", line).group(0))
assert "process_resident_memory_bytes" in live and "tern_worker_cap" in live, sorted(live)

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
            "unless", "bool", "offset", "atan2", "inf", "nan"}

def metric_names(expr):
    """Metric names of a PromQL expression: not functions, keywords, labels or literals."""
    expr = re.sub(r"label_values\(\s*(.*?)\s*,\s*[a-zA-Z_]\w*\s*\)", r"\1", expr)  # Grafana's
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings, e.g. "$coordinator"
    expr = re.sub(r"\{[^}]*\}", " ", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # ranges, e.g. [$__rate_interval]
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", expr)
    expr = re.sub(r"\boffset\s+\S+", " ", expr)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[a-zA-Z_:][a-zA-Z0-9_:]*", expr):
        if expr[m.end():].lstrip().startswith("(") or m.group(0).lower() in KEYWORDS:
            continue  # a function or a keyword
        names.add(m.group(0))
    return names

# The dashboard: every panel's expressions and the variables' queries.
dash = json.load(open(f"{kit}/grafana-dashboard.json"))
def walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v)
variables = {v["name"]: v for v in dash["templating"]["list"]}
assert variables["datasource"]["type"] == "datasource"
assert variables["datasource"]["query"] == "prometheus"
exprs = {}
for node in walk(dash):
    ds = node.get("datasource")
    if isinstance(ds, dict):  # every data source is the variable: nothing hard-coded
        assert ds == {"type": "prometheus", "uid": "${datasource}"}, node.get("title", ds)
    if "expr" in node:
        exprs[f"dashboard {node['refId']}: {node['expr']}"] = node["expr"]
for v in variables.values():
    if v["type"] == "query":
        exprs[f"variable {v['name']}"] = v["query"]["query"]
panels = [p for p in dash["panels"] if p["type"] != "row"]
assert all(p.get("targets") for p in panels), "a panel without a query"
assert len(set(p["id"] for p in dash["panels"])) == len(dash["panels"]), "panel ids repeat"

rules = yaml.safe_load(open(f"{kit}/alerts.yml"))
for group in rules["groups"]:
    for rule in group["rules"]:
        exprs[f"alert {rule['alert']}"] = rule["expr"]
alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
for wanted in ("TernCoordinatorDown", "TernNoRoundClosed", "TernWorkerGone",
               "TernRejectionsRising", "TernAccuracyStalled"):
    assert wanted in alerts, f"no alert {wanted}"

used = set()
missing = []
for where, expr in exprs.items():
    names = metric_names(expr)
    assert names, f"{where}: no metric name found in {expr!r}"
    used |= names
    missing += [f"{where}: {n}" for n in sorted(names) if n not in live and n != "up"]
assert not missing, "not in a live /metrics:\n  " + "\n  ".join(missing)
# The extraction finds what the kit is about (a broken one would find nothing and pass).
for name in ("tern_test_accuracy", "tern_train_loss", "tern_worker_upload_bytes_total",
             "tern_worker_download_bytes_total", "tern_worker_cap", "tern_worker_link_r2",
             "tern_round_duration_seconds_bucket", "tern_rejected_messages_total",
             "tern_round_deadline_seconds", "up"):
    assert name in used, f"{name} not used by the dashboard or the rules"
print(f"{len(exprs)} expressions use {len(used)} metric names, each in a live /metrics")
PY
echo "PASS: the observability kit checks out against a live coordinator and worker"
