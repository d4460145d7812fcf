#!/usr/bin/python3
"""Test accuracy against wall-clock, one panel per fleet and a line per method and seed, drawn by
gnuplot (pngcairo).

Usage: plot.py CURVES_CSV TARGET OUT.png

CURVES_CSV has rows fleet,method,seed,time_s,test_accuracy (summarize.py appends them); a
method's seeds share its colour. The target is drawn as a dashed line.
"""
import csv
import os
import subprocess
import sys
import tempfile

METHODS = ["fp32", "topk1", "topk10", "tern"]
COLOURS = {"fp32": "#444444", "topk1": "#1f77b4", "topk10": "#2ca02c", "tern": "#d62728"}


def read(path):
    """{fleet: {(method, seed): [(t, acc), ...]}} in file order."""
    runs = {}
    with open(path, newline="") as f:
        for fleet, method, seed, t, acc in csv.reader(f):
            runs.setdefault(fleet, {}).setdefault((method, seed), []).append((t, acc))
    return runs


def panel(fleet, curves, target, tmp):
    """The gnuplot commands of one fleet's panel; its data go to files under tmp."""
    plots, titled = [], set()
    order = sorted(curves, key=lambda k: (METHODS.index(k[0]) if k[0] in METHODS else 99, k[1]))
    for method, seed in order:
        data = os.path.join(tmp, f"{fleet}-{method}-{seed}.dat")
        with open(data, "w") as f:
            f.writelines(f"{t} {a}\n" for t, a in curves[(method, seed)])
        title = f"title '{method}'" if method not in titled else "notitle"
        titled.add(method)
        colour = COLOURS.get(method, "#9467bd")
        plots.append(f"'{data}' using 1:2 with linespoints pt 7 ps 0.4 lw 1.5 "
                     f"lc rgb '{colour}' {title}")
    plots.append(f"{target} with lines dt 2 lc rgb '#888888' title 'target {target}'")
    return [f"set title 'fleet {fleet}'", "plot " + ", ".join(plots)]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    runs = read(argv[1])
    if not runs:
        sys.exit("plot.py: no evaluations to plot")
    target = float(argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        script = [
            f"set terminal pngcairo size {560 * len(runs)},440 font 'sans,10' noenhanced",
            f"set output '{argv[3]}'",
            f"set multiplot layout 1,{len(runs)}",
            "set xlabel 'wall-clock seconds (coordinator time_s)'",
            "set ylabel 'test accuracy'", "set yrange [0.5:0.9]", "set grid",
            "set key bottom right",
        ]
        for fleet in sorted(runs):
            script += panel(fleet, runs[fleet], target, tmp)
        script.append("unset multiplot")
        subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)


if __name__ == "__main__":
    main(sys.argv)
