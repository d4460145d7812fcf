#!/usr/bin/python3
"""Test accuracy against wall-clock, one panel per fleet and model and a line per method and
seed, drawn by gnuplot (pngcairo).

Usage: plot.py CURVES_CSV TARGETS OUT.png

CURVES_CSV has rows fleet,model,method,seed,time_s,test_accuracy (summarize.py appends them;
rows without the model, fleet,method,seed,time_s,test_accuracy, are the softmax's); a method's
seeds share its colour. TARGETS is one accuracy for every model or MODEL:ACC,... (softmax:0.80,
cnn:0.88); a panel's target is drawn as a dashed line.
"""
import csv
import os
import subprocess
import sys
import tempfile

METHODS = ["fp32", "topk1", "topk10", "tern"]
COLOURS = {"fp32": "#444444", "topk1": "#1f77b4", "topk10": "#2ca02c", "tern": "#d62728"}


def read(path):
    """{(fleet, model): {(method, seed): [(t, acc), ...]}} in file order."""
    runs = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) == 5:
                row = row[:1] + ["softmax"] + row[1:]
            fleet, model, method, seed, t, acc = row
            runs.setdefault((fleet, model), {}).setdefault((method, seed), []).append((t, acc))
    return runs


def targets(text):
    """{model: accuracy} from TARGETS; None keys the accuracy for models not named."""
    if ":" not in text:
        return {None: float(text)}
    return {m: float(a) for m, a in (item.split(":", 1) for item in text.split(","))}


def panel(fleet, model, curves, target, tmp):
    """The gnuplot commands of one fleet's and model's panel; its data go to files under tmp."""
    plots, titled = [], set()
    order = sorted(curves, key=lambda k: (METHODS.index(k[0]) if k[0] in METHODS else 99, k[1]))
    for method, seed in order:
        data = os.path.join(tmp, f"{fleet}-{model}-{method}-{seed}.dat")
        with open(data, "w") as f:
            f.writelines(f"{t} {a}\n" for t, a in curves[(method, seed)])
        title = f"title '{method}'" if method not in titled else "notitle"
        titled.add(method)
        colour = COLOURS.get(method, "#9467bd")
        plots.append(f"'{data}' using 1:2 with linespoints pt 7 ps 0.4 lw 1.5 "
                     f"lc rgb '{colour}' {title}")
    plots.append(f"{target} with lines dt 2 lc rgb '#888888' title 'target {target}'")
    return [f"set title 'fleet {fleet}, {model}'", "plot " + ", ".join(plots)]


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    runs = read(argv[1])
    if not runs:
        sys.exit("plot.py: no evaluations to plot")
    try:
        goal = targets(argv[2])
    except ValueError:
        sys.exit(f"plot.py: cannot read targets '{argv[2]}' (ACC or MODEL:ACC,...)")
    fleets = sorted({f for f, _ in runs})
    models = sorted({m for _, m in runs}, key=lambda m: (m != "softmax", m))
    with tempfile.TemporaryDirectory() as tmp:
        script = [
            f"set terminal pngcairo size {560 * len(fleets)},{440 * len(models)} font 'sans,10' "
            "noenhanced",
            f"set output '{argv[3]}'",
            f"set multiplot layout {len(models)},{len(fleets)}",
            "set xlabel 'wall-clock seconds (coordinator time_s)'",
            "set ylabel 'test accuracy'", "set yrange [0.5:0.95]", "set grid",
            "set key bottom right",
        ]
        for model, fleet in ((m, f) for m in models for f in fleets):
            if (fleet, model) not in runs:
                script.append("set multiplot next")
                continue
            target = goal.get(model, goal.get(None))
            if target is None:
                sys.exit(f"plot.py: no target for model {model}")
            script += panel(fleet, model, runs[(fleet, model)], target, tmp)
        script.append("unset multiplot")
        subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True, check=True)


if __name__ == "__main__":
    main(sys.argv)
