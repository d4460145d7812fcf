#!/usr/bin/python3
"""The benchmark's fleets, for run.sh (tc rates, partitions) and sim.sh (tern-sim links).

Usage: fleets.py links FLEET            "UP DOWN" tc rates per worker, on one line
       fleets.py workers FLEET          how many workers the fleet has
       fleets.py name FLEET             the fleet's name in the CSVs
       fleets.py partition FLEET SEED   the shards' partition, a YAML flow mapping
       fleets.py prep FLEET             the same partition as examples/pytorch/prep.py's options
       fleets.py check FLEET...         exit 0 if every fleet can be read, else say why (status 2)

FLEET is A or B, or the path of a fleet file (YAML, docs/fleet.md#your-own-fleet):

    name: C                      # optional: the CSVs' fleet column (default: the file's stem)
    links:                       # worker k takes the k-th link (after counts are expanded)
      - {up: 2, down: 8, count: 7}     # Mbit/s; count (default 1) repeats the entry
      - {up: 0.5, down: 2}
    partition: {dirichlet_alpha: 0.3, volume_ratio: 10}   # as a worker's data.partition

A: uplinks 1-100 Mbit/s with downlinks 4x each, data volumes 10:1 (shard 0, the largest, on the
slowest link), IID labels. B: seven workers at 2 Mbit/s up / 8 down and one at 100 / 100, equal
volumes, Dirichlet(0.3) labels. Worker k holds shard k.
"""
import math
import os
import re
import sys

FLEETS = {
    "A": {
        "links": [(1, 4), (2, 8), (5, 20), (10, 40), (20, 80), (50, 200), (50, 200), (100, 400)],
        "partition": {"dirichlet_alpha": 0, "volume_ratio": 10},
    },
    "B": {
        "links": [(2, 8)] * 7 + [(100, 100)],
        "partition": {"dirichlet_alpha": 0.3, "volume_ratio": 1},
    },
}
MAX_WORKERS = 250  # worker k's link is 10.78.k.0/30 (run.sh's namespaces)
RATE_MBPS = (0.064, 10000.0)  # tbf's useful range here: 64 kbit/s to 10 Gbit/s
PARTITION_KEYS = {"dirichlet_alpha": (0.0, 1e6), "volume_ratio": (1.0, 1e6)}
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


class FleetError(Exception):
    """A fleet that cannot be used, with the reason."""


def number(where, value, low, high):
    """value as a finite float in [low, high], else a FleetError naming where it was."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FleetError(f"{where}: expected a number, got {value!r}")
    if not math.isfinite(value) or not low <= value <= high:
        raise FleetError(f"{where}: {value} is outside {low}-{high}")
    return float(value)


def expand_links(path, links):
    """The file's link entries as one (up, down) pair in Mbit/s per worker."""
    if not isinstance(links, list) or not links:
        raise FleetError(f"{path}: 'links' must be a non-empty list of {{up, down[, count]}}")
    out = []
    for i, entry in enumerate(links):
        where = f"{path}: links[{i}]"
        if not isinstance(entry, dict) or not {"up", "down"} <= set(entry):
            raise FleetError(f"{where}: expected {{up: MBIT, down: MBIT[, count: N]}}")
        unknown = set(entry) - {"up", "down", "count"}
        if unknown:
            raise FleetError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
        up = number(f"{where}.up", entry["up"], *RATE_MBPS)
        down = number(f"{where}.down", entry["down"], *RATE_MBPS)
        count = entry.get("count", 1)
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise FleetError(f"{where}.count: expected a whole number >= 1, got {count!r}")
        if len(out) + count > MAX_WORKERS:
            raise FleetError(f"{path}: more than {MAX_WORKERS} workers")
        out += [(up, down)] * count
    return out


def partition_of(path, part):
    """The file's partition mapping, checked against what a worker's data.partition takes."""
    if part is None:
        return {"dirichlet_alpha": 0, "volume_ratio": 1}
    if not isinstance(part, dict):
        raise FleetError(f"{path}: 'partition' must be a mapping")
    unknown = set(part) - set(PARTITION_KEYS)
    if unknown:
        raise FleetError(f"{path}: partition: unknown key(s) {', '.join(sorted(map(str, unknown)))}"
                         f" (known: {', '.join(PARTITION_KEYS)})")
    out = {"dirichlet_alpha": 0, "volume_ratio": 1}
    for key, value in part.items():
        out[key] = number(f"{path}: partition.{key}", value, *PARTITION_KEYS[key])
    return out


def from_file(path):
    """The fleet a file describes (module docstring), or a FleetError saying what is wrong."""
    import yaml  # only fleet files need it (python3-yaml)

    if not os.path.isfile(path):
        raise FleetError(f"{path}: not a fleet name ({' '.join(FLEETS)}) nor a regular file")
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise FleetError(f"{path}: cannot be read as YAML: {e}") from None
    if not isinstance(doc, dict):
        raise FleetError(f"{path}: expected a mapping with 'links' (and 'name', 'partition')")
    unknown = set(doc) - {"name", "links", "partition"}
    if unknown:
        raise FleetError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    name = str(doc.get("name", os.path.splitext(os.path.basename(path))[0]))
    if not NAME.match(name):
        raise FleetError(f"{path}: name '{name}' must be 1-40 letters, digits, '_', '.', '-'")
    return {"name": name, "links": expand_links(path, doc.get("links")),
            "partition": partition_of(path, doc.get("partition"))}


def fleet(spec):
    """The fleet named A or B, or described by the file at spec."""
    if spec in FLEETS:
        return dict(FLEETS[spec], name=spec)
    return from_file(spec)


def rate(mbps):
    """A tc rate: whole Mbit/s as such, others in kbit/s."""
    return f"{int(mbps)}mbit" if float(mbps).is_integer() else f"{round(mbps * 1000)}kbit"


def partition(spec, seed):
    """The partition section of fleet `spec` for a run seeded `seed`, as a YAML flow mapping."""
    p = dict(fleet(spec)["partition"], seed=seed)
    return "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}"
                           for k, v in p.items()) + "}"


def run(argv):
    """The command of argv (module docstring); raises FleetError."""
    if len(argv) >= 3 and argv[1] == "check":
        for spec in argv[2:]:
            fleet(spec)
    elif len(argv) == 3 and argv[1] == "links":
        print(" ".join(f"{rate(up)} {rate(down)}" for up, down in fleet(argv[2])["links"]))
    elif len(argv) == 3 and argv[1] == "workers":
        print(len(fleet(argv[2])["links"]))
    elif len(argv) == 3 and argv[1] == "name":
        print(fleet(argv[2])["name"])
    elif len(argv) == 3 and argv[1] == "prep":
        p = fleet(argv[2])["partition"]
        print(f"--alpha {p['dirichlet_alpha']:g} --volume-ratio {p['volume_ratio']:g}")
    elif len(argv) == 4 and argv[1] == "partition":
        print(partition(argv[2], argv[3]))
    else:
        sys.exit(__doc__)


def main(argv):
    try:
        run(argv)
    except FleetError as e:
        print(f"fleets.py: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv)
