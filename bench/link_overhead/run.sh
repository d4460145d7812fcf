#!/usr/bin/env bash
# What link measurement costs a round on loopback: the real coordinator and workers train the same
# job (same seed, same rounds) with link.measure true and false, each repetition's two runs side by
# side (at the same time by default, so that the load of a shared machine falls on both alike;
# MODE=alternate runs them one after the other), and the median round time of each
# run (after warm-up) and the mean over all rounds are printed per run and per setting, with the
# paired on/off ratios, next to the CPU time all processes of a run used (start-up
# included, so only the difference between the two settings means something). Measuring adds the
# calibration train at join, exploration probes (within their bytes-per-minute cap), one
# estimator update per ack and the model in every push.
#
# Usage: bench/link_overhead/run.sh BIN_DIR [REPS] [ROUNDS]
#   env: WORKERS (3), FEATURES (784), WARMUP rounds left out of the steady median (10),
#        MODE: together (default: the on and off run of a repetition run at the same time, so
#        both see the same load from the rest of a shared machine) or alternate (one after the
#        other, the order alternating), CSV=FILE also writes one line per run there,
#        PIN=1 pins the coordinator to CPU 0 and the workers to CPUs 1.. (round robin; all on
#        CPU 1 on a two-core machine) with taskset, so that no run depends on where the
#        scheduler happened to place its processes.
#        MODE=blocks: one run per repetition with measurement on, paused on every other block
#        of BLOCK rounds (link.alternate_rounds, default BLOCK=10): the rounds with and without
#        it come from the same processes at the same time, so nothing that differs from run to
#        run (process placement, the rest of the machine) enters the comparison. It measures
#        the per-round part (timing, estimator updates, exploration probes), not the one-off
#        calibration at join. CONTROL=1 turns measurement off in every block (an A/A run:
#        the two halves should agree, which checks the block comparison itself).
#        Prints; asserts nothing.
set -euo pipefail
BIN="${1:?usage: run.sh BIN_DIR [REPS] [ROUNDS]}"
REPS="${2:-5}"
ROUNDS="${3:-300}"
WORKERS="${WORKERS:-3}"
FEATURES="${FEATURES:-784}"
WARMUP="${WARMUP:-10}"
MODE="${MODE:-together}"
PIN="${PIN:-0}"
NCPU="$(nproc)"
# pinned CPU: prefix for the coordinator (role c) or worker i.
pinned() {
  [ "$PIN" = 1 ] || return 0
  if [ "$1" = c ] || [ "$NCPU" -lt 2 ]; then
    echo "taskset -c 0"
  else
    echo "taskset -c $((1 + $1 % (NCPU - 1)))"
  fi
}
BLOCK="${BLOCK:-10}"
case "$MODE" in together | alternate | blocks) ;; *) echo "MODE: together|alternate|blocks" >&2; exit 1 ;; esac
for b in tern-coordinator tern-worker; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b not built" >&2; exit 1; }
done
[ "$ROUNDS" -gt $((WARMUP + 1)) ] || { echo "ROUNDS must exceed WARMUP+1" >&2; exit 1; }

WORK="$(mktemp -d /tmp/tern-link-overhead.XXXXXX)"
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2> /dev/null || true; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

# run_once MEASURE TAG [ALTERNATE]: one training run; leaves $WORK/TAG/metrics.csv.
run_once() {
  local measure=$1 dir="$WORK/$2" alternate="${3:-0}"
  mkdir -p "$dir"
  cat > "$dir/coord.yaml" <<YAML
bind: tcp://127.0.0.1:0
endpoint_file: $dir/endpoint
min_workers: $WORKERS
max_rounds: $ROUNDS
round_deadline_seconds: 10
heartbeat_seconds: 0.5
worker_patience_seconds: 10
eval_every: 1000000000
model: {kind: softmax, classes: 10, features: $FEATURES}
optimizer: {lr: 0.5}
training: {batch_size: 64, seed: 11}
allocation: {method: uniform, mean_ratio: 0.05}
logging: {level: warn}
security: none
YAML
  $(pinned c) "$BIN/tern-coordinator" --config "$dir/coord.yaml" --metrics-csv "$dir/metrics.csv" \
    > "$dir/coord.out" 2> "$dir/coord.err" &
  local cpid=$!
  PIDS=("$cpid")
  for _ in $(seq 1 200); do [ -s "$dir/endpoint" ] && break; sleep 0.05; done
  [ -s "$dir/endpoint" ] || { cat "$dir/coord.err" >&2; exit 1; }
  cat > "$dir/worker.yaml" <<YAML
name: w
coordinator: $(cat "$dir/endpoint")
data:
  format: synthetic
  rows: 3000
  features: $FEATURES
  classes: 10
  seed: 11
  shard: {index: 0, total: $WORKERS}
  partition: {dirichlet_alpha: 0.5, seed: 11}
compression: {name: topk, error_feedback: true}
link: {measure: $measure, alternate_rounds: $alternate}
heartbeat_seconds: 0.5
coordinator_patience_seconds: 10
logging: {level: warn}
security: none
YAML
  local i
  for i in $(seq 0 $((WORKERS - 1))); do
    $(pinned "$i") "$BIN/tern-worker" --config "$dir/worker.yaml" --name "w$i" --shard-index "$i" \
      > "$dir/w$i.out" 2> "$dir/w$i.err" &
    PIDS+=($!)
  done
  local p
  for p in "${PIDS[@]}"; do
    wait "$p" || { echo "a process of run $2 failed; see below" >&2; tail -3 "$dir"/*.err >&2; exit 1; }
  done
  PIDS=()
}

echo "link measurement overhead on loopback: $WORKERS workers, softmax ${FEATURES}x10, top-k 5%," \
  "$ROUNDS rounds, $REPS repetitions, mode $MODE$([ "$PIN" = 1 ] && echo ", pinned")"
if [ "$MODE" = blocks ]; then
  measure=true
  [ "${CONTROL:-0}" = 1 ] && measure=false
  note="measurement paused on every other block of $BLOCK rounds"
  [ "$measure" = false ] && note="control: measurement off in every block of $BLOCK rounds"
  echo "(one run per repetition, $note)"
  for rep in $(seq 1 "$REPS"); do
    run_once "$measure" "rep$rep" "$BLOCK"
    printf '.'
  done
  echo
  python3 - "$WORK" "$REPS" "$WARMUP" "$BLOCK" "${CSV:-}" <<'PY'
import csv, math, random, statistics as st, sys

work, reps, warmup, block, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
# Round r (its CSV row) lasts from the close of r-1 to the close of r, which covers the worker's
# push of round r and its ack: it is measured when the worker measured round r, i.e. when
# (r // block) is even. The first round of a block is left out (the switch), and so is warm-up:
# every block before the one that holds round WARMUP, and at least the first two.
rows_out, pair_logs, run_ratios = [], [], []
for rep in range(1, reps + 1):
    rows = list(csv.DictReader(open(f"{work}/rep{rep}/metrics.csv")))
    t = {int(r["round"]): float(r["time_s"]) for r in rows}
    first_block = max(2, (warmup + block - 1) // block)
    blocks = {}
    for r in sorted(t):
        if r - 1 not in t or r % block == 0 or r // block < first_block:
            continue
        blocks.setdefault(r // block, []).append(t[r] - t[r - 1])
    on = [x for b, v in blocks.items() if b % 2 == 0 for x in v]
    off = [x for b, v in blocks.items() if b % 2 == 1 for x in v]
    if not on or not off:
        sys.exit(f"rep {rep}: too few rounds for blocks of {block}")
    # Each measured block against the paused block right after it.
    for b in sorted(blocks):
        if b % 2 == 0 and b + 1 in blocks:
            pair_logs.append(math.log(st.median(blocks[b]) / st.median(blocks[b + 1])))
    run_ratios.append(st.median(on) / st.median(off))
    rows_out.append((rep, st.median(on), st.median(off), st.mean(on), st.mean(off), len(on), len(off)))

print(f"{'rep':>3} {'on ms/round':>12} {'off ms/round':>13} {'on/off':>7} {'mean on/off':>12} {'rounds on/off':>14}")
for rep, mon, moff, aon, aoff, non, noff in rows_out:
    print(f"{rep:>3} {mon*1e3:>12.4f} {moff*1e3:>13.4f} {mon/moff:>7.4f} {aon/aoff:>12.4f} {non:>7}/{noff}")

def boot_median(values, seed=1, draws=5000):
    rng = random.Random(seed)
    n = len(values)
    b = sorted(st.median(rng.choice(values) for _ in range(n)) for _ in range(draws))
    return b[int(0.025 * draws)], b[int(0.975 * draws) - 1]

logs = [math.log(x) for x in run_ratios]
print()
print(f"on/off per run (median round time of measured blocks / paused blocks), {len(logs)} runs: "
      f"median {math.exp(st.median(logs)):.4f}, mean {math.exp(st.mean(logs)):.4f}")
if len(logs) >= 5:
    lo, hi = boot_median(logs)
    print(f"  bootstrap 95% of the median over runs [{math.exp(lo):.4f}, {math.exp(hi):.4f}]")
    se = st.stdev(logs) / math.sqrt(len(logs))
    print(f"  mean of the log-ratios, 95% (t~2) [{math.exp(st.mean(logs) - 2 * se):.4f}, "
          f"{math.exp(st.mean(logs) + 2 * se):.4f}]")
n = len(pair_logs)
if n >= 10:
    lo, hi = boot_median(pair_logs)
    print(f"adjacent block pairs (measured block / the paused block after it), {n} pairs: median "
          f"{math.exp(st.median(pair_logs)):.4f}, bootstrap 95% [{math.exp(lo):.4f}, {math.exp(hi):.4f}]")
if out:
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rep", "on_median_s", "off_median_s", "on_mean_s", "off_mean_s", "rounds_on", "rounds_off"])
        for r in rows_out:
            w.writerow([r[0]] + [f"{x:.7f}" for x in r[1:5]] + list(r[5:]))
    print(f"per-run results: {out}")
PY
  exit 0
fi

for rep in $(seq 1 "$REPS"); do
  if [ $((rep % 2)) = 1 ]; then order="true false"; else order="false true"; fi
  pair=()
  for m in $order; do
    # In a subshell so that `times` reports the CPU time of this run's processes alone.
    (
      trap 'for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2> /dev/null || true; done' EXIT
      run_once "$m" "rep$rep-$m"
      times > "$WORK/rep$rep-$m/times"
    ) &
    pair+=($!)
    [ "$MODE" = together ] || wait "${pair[-1]}" || exit 1
    printf '.'
  done
  for p in "${pair[@]}"; do wait "$p" || exit 1; done
done
echo

python3 - "$WORK" "$REPS" "$WARMUP" "${CSV:-}" <<'PY'
import csv, math, statistics as st, sys

work, reps, warmup, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def run(rep, measure):
    rows = list(csv.DictReader(open(f"{work}/rep{rep}-{measure}/metrics.csv")))
    t = [float(r["time_s"]) for r in rows]
    # Median round time after warm-up: the machine is shared, and a round that lost the CPU
    # for 10 ms to another process says nothing about link measurement.
    steady = st.median(t[i] - t[i - 1] for i in range(warmup + 1, len(t)))
    total = t[-1] / len(t)                                 # s per round, join and calibration included
    samples = rows[-1]["link_samples"]
    # `times`, second line: user and system CPU time of the coordinator and workers together.
    children = open(f"{work}/rep{rep}-{measure}/times").read().split("\n")[1].split()
    cpu = sum(float(m) * 60 + float(s.rstrip("s")) for m, s in (c.split("m") for c in children))
    return steady, total, samples, len(rows), cpu

res = {m: [run(r, m) for r in range(1, reps + 1)] for m in ("true", "false")}

def summary(values):
    m = st.mean(values)
    s = st.stdev(values) if len(values) > 1 else 0.0
    return m, s, st.median(values)

print(f"{'link.measure':<13} {'median ms/round':>16} {'+-sd':>7} {'median':>7} "
      f"{'all ms/round':>13} {'+-sd':>7} {'median':>7} {'cpu s/run':>10} {'+-sd':>6}"
      f"  samples (last run)")
for m in ("true", "false"):
    s_mean, s_sd, s_med = summary([r[0] for r in res[m]])
    a_mean, a_sd, a_med = summary([r[1] for r in res[m]])
    c_mean, c_sd, _ = summary([r[4] for r in res[m]])
    print(f"{m:<13} {s_mean*1e3:>16.3f} {s_sd*1e3:>7.3f} {s_med*1e3:>7.3f} "
          f"{a_mean*1e3:>13.3f} {a_sd*1e3:>7.3f} {a_med*1e3:>7.3f} {c_mean:>10.3f} {c_sd:>6.3f}"
          f"  {res[m][-1][2]}")

# Paired by repetition (the two runs of a repetition ran back to back): on a shared machine the
# load drifts, and a pair sees about the same load on both sides.
print()
print(f"{'rep':>3} {'on ms/round':>12} {'off ms/round':>13} {'on/off':>7}   (steady rounds)")
for rep, (on, off) in enumerate(zip(res["true"], res["false"]), 1):
    print(f"{rep:>3} {on[0]*1e3:>12.3f} {off[0]*1e3:>13.3f} {on[0]/off[0]:>7.4f}")
paired = [on[0] / off[0] for on, off in zip(res["true"], res["false"])]
print(f"{'med':>3} {'':>12} {'':>13} {st.median(paired):>7.4f}   (median of the paired ratios)")
print()
# The mean of the paired ratios with its spread, and the ratio of the medians, which a few runs
# slowed by the rest of the machine do not move.
for idx, label in ((0, "steady"), (1, "all")):
    ratios = [on[idx] / off[idx] for on, off in zip(res["true"], res["false"])]
    m, s, _ = summary(ratios)
    half = 2 * s / math.sqrt(len(ratios)) if len(ratios) > 1 else float("nan")
    med = summary([r[idx] for r in res["true"]])[2] / summary([r[idx] for r in res["false"]])[2]
    print(f"on/off ({label:<6}): mean of {len(ratios)} paired ratios {m:.4f} +-{half:.4f} (~95%), "
          f"ratio of medians {med:.4f} ({100*(med-1):+.2f}%)")

# Robust to the skew of single slow runs: the median paired ratio with a percentile bootstrap
# interval (seeded resampling of the pairs), and the Hodges-Lehmann estimate of the paired
# log-ratios with its Wilcoxon signed-rank interval (normal approximation).
import random
logs = [math.log(on[0] / off[0]) for on, off in zip(res["true"], res["false"])]
n = len(logs)
if n >= 10:
    rng = random.Random(1)
    boots = sorted(math.exp(st.median(rng.choice(logs) for _ in range(n))) for _ in range(5000))
    print(f"on/off (steady): median paired ratio {math.exp(st.median(logs)):.4f}, bootstrap 95% "
          f"[{boots[int(0.025 * len(boots))]:.4f}, {boots[int(0.975 * len(boots)) - 1]:.4f}]")
    walsh = sorted((logs[i] + logs[j]) / 2 for i in range(n) for j in range(i, n))
    k = int(n * (n + 1) / 4 - 1.96 * math.sqrt(n * (n + 1) * (2 * n + 1) / 24))
    print(f"on/off (steady): Hodges-Lehmann {math.exp(st.median(walsh)):.4f}, Wilcoxon 95% "
          f"[{math.exp(walsh[k]):.4f}, {math.exp(walsh[len(walsh) - k - 1]):.4f}]")

cpu = [(on[4] - off[4]) / on[3] for on, off in zip(res["true"], res["false"])]
m, s, _ = summary(cpu)
half = 2 * s / math.sqrt(len(cpu)) if len(cpu) > 1 else float("nan")
print(f"CPU time on - off, all processes: {m*1e3:+.3f} +-{half*1e3:.3f} ms per round (~95%)")

if out:
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["rep", "measure", "steady_s_per_round", "all_s_per_round", "rounds",
                    "link_samples", "cpu_s"])
        for m in ("true", "false"):
            for rep, (steady, total, samples, n, cpu) in enumerate(res[m], 1):
                w.writerow([rep, m, f"{steady:.6f}", f"{total:.6f}", n, samples, f"{cpu:.3f}"])
    print(f"per-run results: {out}")
PY
