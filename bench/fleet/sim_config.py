#!/usr/bin/python3
"""Writes a tern-sim configuration of one fleet run: the same shipped files, method sections and
run settings as run.sh gives the daemons, the fleet's links as the simulator's.

Usage: sim_config.py SRC METHOD_FILE FLEET SEED OUT
Environment: DATA, TARGET, MAX_ROUNDS (as run.sh), LATENCY_MS (0.1), COMPUTE_SECONDS (0.003),
BURST_BYTES (2896: the two 1514-byte frames of the fleet's tbf buckets, as TCP payload),
EVAL_SECONDS (0.02: the coordinator's evaluation of the test set; docs/fleet.md),
METRICS_CSV (the simulator's metrics CSV), WORKERS (empty: one per link of the fleet; more
stretch the fleet: worker i of n has link i x L / n, so each of its L links is held by n / L
workers). FLEET is as fleets.py takes it (A, B or a fleet file).

Each simulated link has the fleet's uplink and downlink rates of its worker.
"""
import os
import sys

import yaml

import fleets
import merge_config

DAEMON_ONLY_COORDINATOR = ("bind", "endpoint_file", "min_workers", "max_workers", "metrics_csv",
                           "checkpoint", "security", "http")
DAEMON_ONLY_WORKER = ("name", "coordinator", "data", "security", "http")


def section(path, method_file, which, drop):
    """A shipped daemon file with the method's sections, less the keys only a daemon reads."""
    with open(path) as f:
        doc = merge_config.load(f) or {}
    merge_config.apply_method(doc, method_file, which)
    for key in drop:
        doc.pop(key, None)
    return doc


def main(argv):
    if len(argv) != 6:
        sys.exit(__doc__)
    src, method_file, fleet_name, seed, out = argv[1:]
    env = os.environ
    data = env.get("DATA", "/usr/share/datasets/fashion-mnist")
    coordinator = section(f"{src}/deploy/config/coordinator.yaml", method_file, "coordinator",
                          DAEMON_ONLY_COORDINATOR)
    merge_config.set_path(coordinator, "target_accuracy", env.get("TARGET", "0.80"))
    merge_config.set_path(coordinator, "max_rounds", env.get("MAX_ROUNDS", "2000"))
    merge_config.set_path(coordinator, "training.seed", seed)
    merge_config.set_path(coordinator, "test_data", {
        "format": "idx", "images": f"{data}/t10k-images-idx3-ubyte.gz",
        "labels": f"{data}/t10k-labels-idx1-ubyte.gz"})
    worker = section(f"{src}/deploy/config/worker.yaml", method_file, "worker", DAEMON_ONLY_WORKER)
    try:
        worker["partition"] = merge_config.load(fleets.partition(fleet_name, seed))
        links = fleets.fleet(fleet_name)["links"]
    except fleets.FleetError as e:
        sys.exit(f"sim_config.py: {e}")
    n = int(env.get("WORKERS") or len(links))
    links = [links[i * len(links) // n] for i in range(n)]
    doc = {
        "workers": str(n),
        "train_data": {"format": "idx", "images": f"{data}/train-images-idx3-ubyte.gz",
                       "labels": f"{data}/train-labels-idx1-ubyte.gz"},
        "coordinator": coordinator,
        "worker": worker,
        "links": [{"rate_mbps": str(up), "download_rate_mbps": str(down),
                   "burst_bytes": env.get("BURST_BYTES", "2896"),
                   "latency_ms": env.get("LATENCY_MS", "0.1"),
                   "compute_seconds": env.get("COMPUTE_SECONDS", "0.003")}
                  for up, down in links],
        "evaluation_seconds": env.get("EVAL_SECONDS", "0.02"),
        "metrics_csv": env.get("METRICS_CSV", "sim-metrics.csv"),
    }
    with open(out, "w") as f:
        yaml.dump(doc, f, Dumper=merge_config.PlainDumper)


if __name__ == "__main__":
    main(sys.argv)
