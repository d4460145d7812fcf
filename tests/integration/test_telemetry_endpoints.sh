#!/usr/bin/env bash
# Both daemons serve /metrics, /status and /healthz on loopback (port 0) during a run. Every
# /metrics scrape parses as Prometheus text and its counters equal the metrics CSV row of the
# round it reports; /status is valid JSON naming every worker; `tern-coordinator status` prints
# the cluster table; per-worker upload counters add up to the total.
source "$(dirname "$0")/lib.sh"

write_coordinator "$WORK/coord.yaml" 400 2
"$BIN/tern-coordinator" --config "$WORK/coord.yaml" --metrics-csv "$WORK/metrics.csv" \
  --http 127.0.0.1:0 --http-url-file "$WORK/coord.url" \
  > "$WORK/coord.out" 2> "$WORK/coord.err" &
CPID=$!; PIDS+=($CPID)
wait_for_file "$WORK/endpoint"
wait_for_file "$WORK/coord.url"
CURL=$(cat "$WORK/coord.url")
case "$CURL" in http://127.0.0.1:[0-9]*) ;; *) fail "unexpected URL '$CURL'";; esac
# Scrape everything repeatedly while the coordinator runs (from before the workers join).
mkdir -p "$WORK/scrapes"
python3 - "$WORK/scrapes" "$CPID" "$CURL" "$WORK/w0.url" > "$WORK/scraper.out" 2>&1 <<'PY' &
import os, sys, time, urllib.request, urllib.error
out, pid, coord, worker_url_file = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def alive():
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False
def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", ""
n = 0
deadline = time.time() + 300
while alive() and time.time() < deadline:
    try:
        worker = open(worker_url_file).read().strip()  # written once the worker loaded its shard
    except OSError:
        worker = coord
    try:
        for name, url in (("coord.metrics", coord + "/metrics"), ("coord.status", coord + "/status"),
                          ("coord.healthz", coord + "/healthz"), ("worker.metrics", worker + "/metrics"),
                          ("worker.status", worker + "/status"), ("coord.missing", coord + "/nope")):
            status, ctype, body = get(url)
            with open(f"{out}/{n:04d}.{name}", "w") as f:
                f.write(f"{status}\n{ctype}\n{body}")
        n += 1
    except (urllib.error.URLError, ConnectionError, TimeoutError) as e:
        print("scrape failed:", e)  # fine once the run ended between check and request
    time.sleep(0.05)
print(f"{n} scrape rounds")
PY
SCRAPER=$!; PIDS+=($SCRAPER)

EP=$(cat "$WORK/endpoint")
write_worker "$WORK/worker.yaml" "$EP" 2
# w0 takes its endpoint from the configuration's http section, w1 from the flags.
cp "$WORK/worker.yaml" "$WORK/worker0.yaml"
printf 'http:\n  bind: "127.0.0.1:0"\n  url_file: %s\n' "$WORK/w0.url" >> "$WORK/worker0.yaml"
"$BIN/tern-worker" --config "$WORK/worker0.yaml" --name w0 --shard-index 0 \
  > "$WORK/w0.out" 2> "$WORK/w0.err" &
WPIDS+=($!); PIDS+=($!)
"$BIN/tern-worker" --config "$WORK/worker.yaml" --name w1 --shard-index 1 \
  --http 127.0.0.1:0 --http-url-file "$WORK/w1.url" > "$WORK/w1.out" 2> "$WORK/w1.err" &
WPIDS+=($!); PIDS+=($!)
wait_for_file "$WORK/w0.url"
wait $CPID || fail "coordinator exited with $?"
for p in "${WPIDS[@]}"; do wait "$p" || fail "a worker exited non-zero"; done
wait $SCRAPER || true
cat "$WORK/scraper.out"
grep -q '^final: rounds=400 ' "$WORK/coord.out" || { cat "$WORK/coord.err"; fail "no final line"; }

python3 - "$WORK/scrapes" "$WORK/metrics.csv" <<'PY'
import csv, glob, json, math, re, sys
scrapes, csv_path = sys.argv[1], sys.argv[2]
rows = {int(r["round"]): r for r in csv.DictReader(open(csv_path))}

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*"'
SAMPLE = re.compile(rf"^({NAME})(\{{(?:{LABEL})(?:,{LABEL})*,?\}}|\{{\}})? (\S+)(?: -?\d+)?$")

def parse(text):
    """Prometheus text format 0.0.4: returns {(name, labels): value}; asserts the grammar."""
    types, helps, samples = {}, set(), {}
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("# HELP "):
            helps.add(line.split(" ")[2])
            continue
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ")
            assert kind in ("counter", "gauge", "histogram", "summary", "untyped"), line
            assert name not in types, f"second TYPE for {name}"
            types[name] = kind
            continue
        assert not line.startswith("#"), line
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        name, labels, value = m.group(1), m.group(2) or "", m.group(3)
        v = float(value)  # accepts NaN/+Inf spellings like Prometheus does
        family = name
        if name not in types:
            for suffix in ("_bucket", "_sum", "_count", "_total"):
                if name.endswith(suffix) and name[: -len(suffix)] in types:
                    family = name[: -len(suffix)]
        assert family in types, f"sample {name} before its TYPE line"
        if types[family] == "counter":
            assert v >= 0, line
        key = (name, labels)
        assert key not in samples, f"duplicate series {key}"
        samples[key] = v
    for name, kind in types.items():
        if kind == "histogram":
            buckets = sorted(((float(re.search(r'le="([^"]+)"', l).group(1)), v)
                              for (n, l), v in samples.items() if n == name + "_bucket"))
            counts = [v for _, v in buckets]
            assert counts == sorted(counts), f"{name} buckets not cumulative"
            assert buckets[-1][0] == math.inf and buckets[-1][1] == samples[(name + "_count", "")]
    return samples

checked = 0
for path in sorted(glob.glob(f"{scrapes}/*.coord.metrics")):
    status, ctype, body = open(path).read().split("\n", 2)
    assert status == "200", path
    assert ctype.startswith("text/plain; version=0.0.4"), ctype
    m = parse(body)
    done = m[("tern_rounds_total", "")]
    if done == 0:
        continue
    r = int(m[("tern_round", "")])
    assert done == r + 1, (path, done, r)
    row = rows[r]
    for metric, column in (("tern_upload_bytes_total", "upload_bytes"),
                           ("tern_download_bytes_total", "download_bytes"),
                           ("tern_full_bytes_total", "full_bytes"),
                           ("tern_late_pushes_total", "late_pushes")):
        assert m[(metric, "")] == int(row[column]), (path, metric, m[(metric, "")], row[column])
    assert m[("tern_participants", "")] == int(row["participants"])
    assert abs(m[("tern_train_loss", "")] - float(row["train_loss"])) <= 1e-6
    # The accuracy gauge appears with the first evaluation (every eval_every rounds).
    if any(int(rows[k]["evaluated"]) for k in rows if k <= r):
        assert abs(m[("tern_test_accuracy", "")] - float(row["test_accuracy"])) <= 1e-6
    else:
        assert ("tern_test_accuracy", "") not in m, (path, "accuracy before any evaluation")
    rejected = sum(v for (n, _), v in m.items() if n == "tern_rejected_messages_total")
    assert rejected >= int(row["rejected"])  # rejections may be newer than the round
    per_worker = sum(v for (n, _), v in m.items() if n == "tern_worker_upload_bytes_total")
    assert per_worker == m[("tern_upload_bytes_total", "")], (per_worker, m)
    caps = sorted(int(v) for (n, _), v in m.items() if n == "tern_worker_cap")
    assert caps == sorted(int(c) for c in row["caps"].split(";")), (caps, row["caps"])
    assert m[("tern_round_duration_seconds_count", "")] == done
    checked += 1
print(f"{checked} coordinator scrapes matched their CSV rows")
assert checked >= 2, "too few scrapes during the run"

n_status = 0
n_worker_status = 0
n_coordinator_status = 0
all_caps = {int(c) for row in rows.values() for c in row["caps"].split(";") if c}
for path in sorted(glob.glob(f"{scrapes}/*.status")):
    status, ctype, body = open(path).read().split("\n", 2)
    assert status == "200" and ctype == "application/json", path
    doc = json.loads(body)
    assert doc["role"] in ("coordinator", "worker")
    if doc["role"] == "coordinator" and doc["rounds_completed"] > 0:
        assert sorted(w["name"] for w in doc["workers"]) == ["w0", "w1"], doc["workers"]
        row = rows[doc["round"]]
        assert doc["upload_bytes"] == int(row["upload_bytes"])
        n_coordinator_status += 1
    if doc["role"] == "worker" and doc["rounds_completed"] > 0:
        # A worker that trained has received the model and updates, and knows its data share.
        assert doc["download_bytes"] > 0, doc
        me = doc["workers"][0]
        assert me["download_bytes"] == doc["download_bytes"], doc
        assert 0.0 < me["share"] <= 1.0, doc
        # Its cap is one the coordinator set, and the level it sent is within it.
        assert me["cap"] in all_caps, (me["cap"], all_caps)
        assert 1 <= me["level"] <= me["cap"], doc
        # The round deadline its welcome said: the coordinator's (write_coordinator's 2 s).
        assert doc["round_deadline_seconds"] == 2.0, doc["round_deadline_seconds"]
        n_worker_status += 1
    n_status += 1
assert n_worker_status > 0, "no /status from a worker that had trained"
assert n_coordinator_status >= 2, "too few coordinator /status documents after a round"
print(f"{n_status} /status documents are valid JSON")

for path in sorted(glob.glob(f"{scrapes}/*.coord.healthz")):
    assert open(path).read().startswith("200\n"), path
for path in sorted(glob.glob(f"{scrapes}/*.coord.missing")):
    assert open(path).read().startswith("404\n"), path
last_worker = sorted(glob.glob(f"{scrapes}/*.worker.metrics"))[-1]
wm = parse(open(last_worker).read().split("\n", 2)[2])
assert wm[("tern_upload_bytes_total", "")] > 0
assert wm[("tern_download_bytes_total", "")] > 0
assert any(n == "tern_worker_link_samples" for n, _ in wm)
print("worker /metrics parses and counts its uploads")
PY

# The status table of a live coordinator: a short second run to have one to ask.
write_coordinator "$WORK/coord2.yaml" 100000 1
sed -i "s|$WORK/endpoint|$WORK/endpoint2|" "$WORK/coord2.yaml"
"$BIN/tern-coordinator" --config "$WORK/coord2.yaml" --http 127.0.0.1:0 \
  --http-url-file "$WORK/coord2.url" > "$WORK/coord2.out" 2> "$WORK/coord2.err" &
C2=$!; PIDS+=($C2)
wait_for_file "$WORK/coord2.url"
wait_for_file "$WORK/endpoint2"
"$BIN/tern-worker" --config "$WORK/worker.yaml" --coordinator "$(cat "$WORK/endpoint2")" \
  --name solo-worker --shard-index 0 > "$WORK/solo.out" 2> "$WORK/solo.err" &
PIDS+=($!)
for _ in $(seq 1 300); do
  "$BIN/tern-coordinator" status --url "$(cat "$WORK/coord2.url")" > "$WORK/table.txt" 2>&1 || true
  grep -q 'solo-worker' "$WORK/table.txt" && ! grep -q 'round 0 (0 completed)' "$WORK/table.txt" && break
  sleep 0.2
done
cat "$WORK/table.txt"
grep -q '^coordinator tern-coordinator' "$WORK/table.txt" || fail "no header in the status table"
grep -Eq '^ +0  solo-worker +yes ' "$WORK/table.txt" || fail "no row for the worker"
"$BIN/tern-coordinator" status --json --url "$(cat "$WORK/coord2.url")/status" \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["workers"][0]["name"]=="solo-worker"'
kill -TERM "$C2"
wait "$C2" || true  # the exit status on a signal is not what this test is about
if "$BIN/tern-coordinator" status --url "$(cat "$WORK/coord2.url")" > /dev/null 2>&1; then
  fail "status of a stopped coordinator should fail"
fi
echo "PASS: /metrics, /status, /healthz and the status table agree with the metrics CSV"
