#!/usr/bin/python3
"""Markdown tables of fleet CSVs (run.sh, sim.sh) for docs/fleet.md.

Usage: tables.py ratios CSV          per fleet and method, means over seeds: seconds and rounds to
                                     target, upload + download bytes; tern's ratios to fp32 and to
                                     the better top-k, against the goals (<= 0.5, <= 0.8, <= 0.1)
       tables.py sim REAL_CSV SIM_CSV   the simulator's mean seconds (and rounds) to target
                                        against the daemons', per fleet and method (goal:
                                        seconds within 25%)

A mean is over the seeds that reached the target; a method with a seed that missed is shown with
the count that did ("2/3 reached").
"""
import csv
import statistics
import sys


def read(path):
    """{(fleet, method): [row, ...]} in file order."""
    runs = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            runs.setdefault((r["fleet"], r["method"]), []).append(r)
    return runs


def mean_of(rows, key):
    """Mean of a column over the rows that reached the target, or None when none did."""
    vals = [float(r[key]) for r in rows if r["seconds_to_target"]]
    return statistics.mean(vals) if vals else None


def reached(rows):
    n = sum(1 for r in rows if r["seconds_to_target"])
    return "" if n == len(rows) else f" ({n}/{len(rows)} reached)"


def traffic(rows):
    return statistics.mean(int(r["upload_bytes"]) + int(r["download_bytes"]) for r in rows)


def fmt(x, spec=".1f"):
    return "-" if x is None else format(x, spec)


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def ratios(path):
    runs = read(path)
    print("| fleet | method | seconds to 0.80 | rounds | upload MB | download MB | up+down MB |")
    print("|---|---|---|---|---|---|---|")
    for (fleet, method), rows in runs.items():
        up = statistics.mean(int(r["upload_bytes"]) for r in rows) / 1e6
        down = statistics.mean(int(r["download_bytes"]) for r in rows) / 1e6
        print(f"| {fleet} | {method} | {fmt(mean_of(rows, 'seconds_to_target'))}{reached(rows)}"
              f" | {fmt(mean_of(rows, 'rounds_to_target'), '.0f')} | {up:.2f} | {down:.2f}"
              f" | {up + down:.2f} |")
    print()
    print("| fleet | tern / fp32 seconds (goal <= 0.5) | tern / better top-k seconds (goal <= 0.8)"
          " | tern / fp32 up+down bytes (goal <= 0.1) |")
    print("|---|---|---|---|")
    for fleet in dict.fromkeys(f for f, _ in runs):
        sec = {m: mean_of(runs.get((fleet, m), []), "seconds_to_target")
               for m in ("fp32", "topk1", "topk10", "tern")}
        topk = [s for s in (sec["topk1"], sec["topk10"]) if s is not None]
        tern_rows, fp32_rows = runs.get((fleet, "tern")), runs.get((fleet, "fp32"))
        byte_ratio = (ratio(traffic(tern_rows), traffic(fp32_rows))
                      if tern_rows and fp32_rows else None)
        print(f"| {fleet} | {fmt(ratio(sec['tern'], sec['fp32']), '.2f')}"
              f" | {fmt(ratio(sec['tern'], min(topk) if topk else None), '.2f')}"
              f" | {fmt(byte_ratio, '.2f')} |")


def sim(real_path, sim_path):
    real, simulated = read(real_path), read(sim_path)
    print("| fleet | method | real seconds | sim seconds | sim / real | within 25% | real rounds |"
          " sim rounds |")
    print("|---|---|---|---|---|---|---|---|")
    for key, rows in real.items():
        seeds = {r["seed"] for r in rows}
        sim_rows = [r for r in simulated.get(key, []) if r["seed"] in seeds]
        a, b = mean_of(rows, "seconds_to_target"), mean_of(sim_rows, "seconds_to_target")
        r = ratio(b, a)
        ok = "-" if r is None else ("yes" if abs(r - 1) <= 0.25 else "no")
        print(f"| {key[0]} | {key[1]} | {fmt(a)}{reached(rows)} | {fmt(b)}{reached(sim_rows)}"
              f" | {fmt(r, '.2f')} | {ok} | {fmt(mean_of(rows, 'rounds_to_target'), '.0f')}"
              f" | {fmt(mean_of(sim_rows, 'rounds_to_target'), '.0f')} |")


def main(argv):
    if len(argv) == 3 and argv[1] == "ratios":
        ratios(argv[2])
    elif len(argv) == 4 and argv[1] == "sim":
        sim(argv[2], argv[3])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
