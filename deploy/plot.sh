#!/usr/bin/env bash
# Plots a tern metrics CSV (coordinator or simulator) into PNGs with gnuplot:
#   accuracy_rounds.png   test accuracy (evaluated rounds) and train loss against rounds
#   accuracy_upload.png   test accuracy against uploaded bytes, with what uncompressed fp32
#                         gradients would have cost for the same rounds
#   caps.png              each worker's compression cap k_i over rounds, and the level T its
#                         tuner sent in each round (points; CSVs with a levels column)
#   link_rates.png        each worker's fitted link: packet rate 1/b as Mbit/s, and fixed cost a
# Usage: deploy/plot.sh METRICS.csv OUTDIR   (PACKET_BYTES=1448 converts b to a bit rate;
#        PLOT_DATA=DIR keeps the per-worker tables plotted, one column per worker id after the round)
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 METRICS.csv OUTDIR" >&2
  exit 2
fi
csv="$1"
out="$2"
packet_bytes="${PACKET_BYTES:-1448}"
command -v gnuplot > /dev/null || { echo "plot.sh: gnuplot is not installed (apt install gnuplot-nox)" >&2; exit 1; }
[ -r "$csv" ] || { echo "plot.sh: cannot read $csv" >&2; exit 1; }
expected="round,time_s,train_loss,test_accuracy,upload_bytes,download_bytes,full_bytes"
head -1 "$csv" | grep -q "^$expected," || { echo "plot.sh: $csv is not a tern metrics CSV" >&2; exit 1; }
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Columns are found by name, so added columns do not break the plots. Per-worker columns are
# ';'-joined over the workers known that round, whose ids worker_ids gives (a CSV without it:
# positions taken as ids); a worker absent from a row is shown as a gap ('?').
awk -F, -v dir="$tmp" -v pb="$packet_bytes" '
  # slot[k]: column (1 + worker id) of the k-th per-worker value in this row.
  function spread(field, vals,    n, parts, k) {
    delete vals
    n = split(field, parts, ";")
    for (k = 1; k <= n && k <= nslots; k++) vals[slot[k]] = parts[k]
  }
  NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
  {
    r = $col["round"]
    print r, $col["train_loss"], $col["upload_bytes"], $col["full_bytes"] > (dir "/loss.dat")
    if ($col["evaluated"] == 1)
      print r, $col["test_accuracy"], $col["upload_bytes"], $col["full_bytes"] > (dir "/acc.dat")
    delete slot
    if ("worker_ids" in col && $col["worker_ids"] != "") {
      nslots = split($col["worker_ids"], ids, ";")
      for (k = 1; k <= nslots; k++) slot[k] = ids[k] + 1
    } else {
      nslots = split($col["caps"], ids, ";")
      for (k = 1; k <= nslots; k++) slot[k] = k
    }
    for (k = 1; k <= nslots; k++) {
      if (slot[k] > workers) workers = slot[k]
      known[slot[k]] = 1
    }
    spread($col["caps"], caps)
    spread($col["link_a"], la)
    spread($col["link_b"], lb)
    spread($col["link_samples"], ls)
    line = r
    for (w = 1; w <= workers; w++) line = line " " (w in caps ? caps[w] : "?")
    print line > (dir "/caps.dat")
    if ("levels" in col) {
      spread($col["levels"], lv)
      line = r
      for (w = 1; w <= workers; w++) {
        line = line " " (w in lv && lv[w] > 0 ? lv[w] : "?")
        if (w in lv && lv[w] > 0) sent[w] = 1
      }
      print line > (dir "/levels.dat")
    }
    rate = r; fixed = r
    for (w = 1; w <= workers; w++) {
      ok = (w in lb) && (w in ls) && ls[w] > 0 && lb[w] > 0
      rate = rate " " (ok ? pb * 8 / lb[w] / 1e6 : "?")
      fixed = fixed " " ((w in la) && (w in ls) && ls[w] > 0 && la[w] > 0 ? la[w] * 1e3 : "?")
    }
    print rate > (dir "/rate.dat")
    print fixed > (dir "/fixed.dat")
  }
  END {
    print workers > (dir "/workers")
    # The workers with at least one level reported (gnuplot warns about a column with none).
    list = ""
    for (w = 1; w <= workers; w++) if (w in sent) list = list (list == "" ? "" : " ") w
    print list > (dir "/sent")
    # The worker ids that appear in some row (a CSV with worker_ids can skip some).
    list = ""
    for (w = 1; w <= workers; w++) if (w in known) list = list (list == "" ? "" : " ") w
    print list > (dir "/known")
  }
' "$csv"
workers=$(cat "$tmp/workers")
# Levels as points in the caps plot, when the CSV has them (a tern from before has not).
sent=$(cat "$tmp/sent")
known=$(cat "$tmp/known")
levels_plot=""
if [ -n "$sent" ]; then
  levels_plot=", for [s in \"$sent\"] \"$tmp/levels.dat\" using 1:(column(int(s)+1)) with points pt 7 ps 0.4 lc int(s) title sprintf(\"worker %d: level sent\", int(s)-1)"
fi
[ -s "$tmp/loss.dat" ] || { echo "plot.sh: $csv has no rounds" >&2; exit 1; }
# A run stopped before its first evaluation, or with no worker known in any row, still gets its
# four files: the plots with nothing to draw say so.
empty() { echo "set label 1 \"$1\" at graph 0.5, 0.5 center; set xrange [0:1]; set yrange [0:1]; plot NaN notitle; unset label 1; set autoscale x"; }
acc_curve="\"$tmp/acc.dat\" using 1:2 with linespoints ls 1 pt 7 ps 0.5 title \"test accuracy\", "
acc_upload="set logscale x; plot \"$tmp/acc.dat\" using (\$3/1e6):2 with linespoints ls 1 pt 7 ps 0.5 title \"tern (compressed, measured)\", \"$tmp/acc.dat\" using (\$4/1e6):2 with lines ls 3 title \"same rounds, uncompressed fp32\"; unset logscale x"
if [ ! -s "$tmp/acc.dat" ]; then
  acc_curve=""
  acc_upload=$(empty "no evaluated round yet")
fi
caps_plot="plot for [s in \"$known\"] \"$tmp/caps.dat\" using 1:(column(int(s)+1)) with steps lw 2 lc int(s) title sprintf(\"worker %d: cap\", int(s)-1)$levels_plot"
rate_plot="plot for [s in \"$known\"] \"$tmp/rate.dat\" using 1:(column(int(s)+1)) with lines lw 2 lc int(s) title sprintf(\"worker %d\", int(s)-1)"
fixed_plot="plot for [s in \"$known\"] \"$tmp/fixed.dat\" using 1:(column(int(s)+1)) with lines lw 2 lc int(s) title sprintf(\"worker %d\", int(s)-1)"
if [ -z "$known" ]; then
  caps_plot=$(empty "no worker in any round")
  rate_plot="unset logscale y; $(empty "no worker in any round")"
  fixed_plot=$rate_plot
fi

gnuplot <<GP
set terminal pngcairo size 900,540 enhanced font "sans,11"
set datafile missing "?"
set grid lc rgb "#dddddd"
set key outside right top
set style line 1 lw 2 lc rgb "#1f77b4"
set style line 2 lw 1.5 lc rgb "#d62728"
set style line 3 lw 2 lc rgb "#7f7f7f" dt 2

set output "$out/accuracy_rounds.png"
set key inside right center
set title "Test accuracy and training loss"
set xlabel "round"
set ylabel "test accuracy"
set y2label "train loss"
set ytics nomirror
set y2tics
set yrange [0:1]
plot $acc_curve"$tmp/loss.dat" using 1:2 axes x1y2 with lines ls 2 title "train loss"
unset y2label
unset y2tics
set ytics mirror

set output "$out/accuracy_upload.png"
set key inside right bottom
set title "Test accuracy against uploaded bytes"
set xlabel "cumulative upload (MB)"
set ylabel "test accuracy"
$acc_upload

set output "$out/caps.png"
set key outside right top
set title "Compression cap k_i per worker (lines) and level sent (points)"
set xlabel "round"
set ylabel "coordinates per push"
set autoscale y
set yrange [0:*]
$caps_plot

set output "$out/link_rates.png"
set multiplot layout 2,1 title "Fitted link models (t = a + b * packets)"
set title "packet rate: 8 * $packet_bytes bytes / b"
set xlabel ""
set ylabel "Mbit/s"
set logscale y
set autoscale y
$rate_plot
set title "fixed cost per transfer: a"
set xlabel "round"
set ylabel "ms"
$fixed_plot
unset multiplot
GP
if [ -n "${PLOT_DATA:-}" ]; then mkdir -p "$PLOT_DATA" && cp "$tmp"/*.dat "$PLOT_DATA"/; fi
echo "plot.sh: wrote $out/accuracy_rounds.png $out/accuracy_upload.png $out/caps.png $out/link_rates.png"
