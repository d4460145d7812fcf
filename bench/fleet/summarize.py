#!/usr/bin/python3
"""One fleet run's result from the coordinator's metrics CSV.

Usage: summarize.py METRICS_CSV TARGET FLEET MODEL METHOD SEED CURVES_CSV
       summarize.py --header     the fleet CSV's header line

Prints the run's row of the fleet CSV (fleet,model,method,seed,seconds_to_target,
rounds_to_target,upload_bytes,download_bytes,final_accuracy): time_s of the first evaluated row
at or above TARGET and the rounds done by then (its round + 1; both empty when none is), the
cumulative upload and download bytes at that row (at the last row when the target was missed),
and the last evaluation's accuracy. Appends the run's evaluations
(fleet,model,method,seed,time_s,test_accuracy) to CURVES_CSV.
"""
import csv
import sys

HEADER = ("fleet,model,method,seed,seconds_to_target,rounds_to_target,upload_bytes,"
          "download_bytes,final_accuracy")


def main(argv):
    if argv[1:] == ["--header"]:
        print(HEADER)
        return
    if len(argv) != 8:
        sys.exit(__doc__)
    path, target, fleet, model, method, seed, curves = argv[1:]
    target = float(target)
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except FileNotFoundError:
        rows = []
    evaluated = [r for r in rows if r["evaluated"] == "1"]
    hit = next((r for r in evaluated if float(r["test_accuracy"]) >= target), None)
    end = hit or (rows[-1] if rows else None)
    seconds = f"{float(hit['time_s']):.3f}" if hit else ""
    rounds = str(int(hit["round"]) + 1) if hit else ""
    upload = end["upload_bytes"] if end else ""
    download = end["download_bytes"] if end else ""
    final = f"{float(evaluated[-1]['test_accuracy']):.4f}" if evaluated else ""
    print(",".join([fleet, model, method, seed, seconds, rounds, upload, download, final]))
    with open(curves, "a") as f:
        for r in evaluated:
            f.write(f"{fleet},{model},{method},{seed},{r['time_s']},{r['test_accuracy']}\n")


if __name__ == "__main__":
    main(sys.argv)
