#!/usr/bin/env bash
# deploy/plot.sh turns a metrics CSV into its four PNGs, including a worker that joined late
# (fewer ';' fields in early rows), rounds before any link fit, a run stopped before its first
# evaluation and rows without a worker; it refuses a file that is not
# a tern metrics CSV. Skipped (77) without gnuplot.
source "$(dirname "$0")/lib.sh"
command -v gnuplot > /dev/null || { echo "SKIP: gnuplot not installed"; exit 77; }

csv="$WORK/metrics.csv"
echo "round,time_s,train_loss,test_accuracy,upload_bytes,download_bytes,full_bytes,participants,evaluated,late_pushes,rejected,caps,shares,link_a,link_b,link_samples,levels,predicted_costs,predicted_improvements,predicted_steps" > "$csv"
for r in $(seq 0 49); do
  if [ "$r" -lt 10 ]; then
    caps="100;100"; shares="0.5;0.5"; a="0;0.001"; b="0;0.0001"; n="0;3"; lv="100;0"
    pc="1;0"; pi="0.1;0"; ps="0.004;0"
  else
    caps="80;70;50"; shares="0.4;0.4;0.2"; a="0.002;0.001;0.02"; b="0.0002;0.0001;0.005"; n="5;8;$r"
    lv="$((40 + r));0;50"; pc="1;0;1"; pi="0.1;0;0.1"; ps="0.004;0;0.1"
  fi
  eval=$(( r % 5 == 4 ? 1 : 0 ))
  echo "$r,$((r / 10)).5,$(python3 -c "print(2.3 / (1 + $r / 10))"),0.$((50 + r / 2)),$((1000 * (r + 1))),$((3000 * (r + 1))),$((20000 * (r + 1))),2,$eval,0,0,$caps,$shares,$a,$b,$n,$lv,$pc,$pi,$ps" >> "$csv"
done
# The same rounds as a tern before the levels columns wrote them.
cut -d, -f1-16 "$csv" > "$WORK/older.csv"
for run in metrics older; do
  bash "$SRC/deploy/plot.sh" "$WORK/$run.csv" "$WORK/$run-plots" > "$WORK/plot.out" 2>&1 || { cat "$WORK/plot.out"; fail "plot.sh failed on $run.csv"; }
  for png in accuracy_rounds accuracy_upload caps link_rates; do
    f="$WORK/$run-plots/$png.png"
    [ -s "$f" ] || fail "$run: $png.png missing"
    [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$run: $png.png is not a PNG"
  done
  grep -qi 'warning' "$WORK/plot.out" && { cat "$WORK/plot.out"; fail "gnuplot warned on $run.csv"; }
done
# With levels the caps plot carries more (the points): a larger file than without.
[ "$(stat -c %s "$WORK/metrics-plots/caps.png")" -gt "$(stat -c %s "$WORK/older-plots/caps.png")" ] || fail "the levels did not reach caps.png"

# Worker ids name each row's values: worker 1 is forgotten after round 4, and worker 2's values
# stay in worker 2's column (before, they moved into worker 1's).
ids="$WORK/ids.csv"
echo "round,time_s,train_loss,test_accuracy,upload_bytes,download_bytes,full_bytes,participants,evaluated,late_pushes,rejected,caps,shares,link_a,link_b,link_samples,levels,predicted_costs,predicted_improvements,predicted_steps,worker_ids" > "$ids"
for r in $(seq 0 9); do
  if [ "$r" -lt 5 ]; then
    echo "$r,$r.5,1,0.5,$((r + 1)),1,10,3,1,0,0,10;11;12,0.3;0.3;0.4,0.01;0.02;0.03,0.001;0.002;0.003,4;4;4,5;6;7,1;1;1,0.1;0.1;0.1,0.01;0.01;0.01,0;1;2" >> "$ids"
  else
    echo "$r,$r.5,1,0.5,$((r + 1)),1,10,2,1,0,0,10;12,0.5;0.5,0.01;0.03,0.001;0.003,4;4,5;7,1;1,0.1;0.1,0.01;0.01,0;2" >> "$ids"
  fi
done
PLOT_DATA="$WORK/ids-data" bash "$SRC/deploy/plot.sh" "$ids" "$WORK/ids-plots" > "$WORK/plot.out" 2>&1 ||
  { cat "$WORK/plot.out"; fail "plot.sh failed on a CSV with worker_ids"; }
[ "$(sed -n 3p "$WORK/ids-data/caps.dat")" = "2 10 11 12" ] || fail "caps before: $(sed -n 3p "$WORK/ids-data/caps.dat")"
[ "$(sed -n 8p "$WORK/ids-data/caps.dat")" = "7 10 ? 12" ] || fail "caps after worker 1 left: $(sed -n 8p "$WORK/ids-data/caps.dat")"
[ "$(sed -n 8p "$WORK/ids-data/levels.dat")" = "7 5 ? 7" ] || fail "levels after worker 1 left: $(sed -n 8p "$WORK/ids-data/levels.dat")"

# A run stopped before its first evaluation, and rows with no worker known: still four PNGs, the
# plots with nothing to draw saying so (before, gnuplot failed on an empty logarithmic range).
head -1 "$ids" > "$WORK/early.csv"
head -1 "$ids" > "$WORK/none.csv"
for r in $(seq 0 5); do
  echo "$r,$r.5,$((9 - r)),0,$((r + 1)),1,$((10 * r + 10)),1,0,0,0,10,1,0.01,0.001,$r,5,1,0.1,0.01,0" >> "$WORK/early.csv"
  echo "$r,$r.5,$((9 - r)),0,0,0,0,0,0,0,0,,,,,,,,,," >> "$WORK/none.csv"
done
for run in early none; do
  bash "$SRC/deploy/plot.sh" "$WORK/$run.csv" "$WORK/$run-plots" > "$WORK/plot.out" 2>&1 ||
    { cat "$WORK/plot.out"; fail "plot.sh failed on $run.csv"; }
  for png in accuracy_rounds accuracy_upload caps link_rates; do
    [ -s "$WORK/$run-plots/$png.png" ] || fail "$run: $png.png missing"
  done
done

echo "a,b" > "$WORK/other.csv"
if bash "$SRC/deploy/plot.sh" "$WORK/other.csv" "$WORK/x" 2> "$WORK/err"; then
  fail "plot.sh accepted a CSV that is not tern's"
fi
grep -q 'not a tern metrics CSV' "$WORK/err" || fail "unclear error: $(cat "$WORK/err")"
echo "PASS: plot.sh writes four PNGs, late joiners, runs without an evaluation or a worker included, and refuses foreign CSVs"
