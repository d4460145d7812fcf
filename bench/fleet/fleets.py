#!/usr/bin/python3
"""The benchmark's fleets, for run.sh (tc rates, partitions) and sim.sh (tern-sim links).

Usage: fleets.py links FLEET            "UP DOWN" tc rates per worker, on one line
       fleets.py partition FLEET SEED   the shards' partition, a YAML flow mapping
       fleets.py prep FLEET             the same partition as examples/pytorch/prep.py's options

A: uplinks 1-100 Mbit/s with downlinks 4x each, data volumes 10:1 (shard 0, the largest, on the
slowest link), IID labels. B: seven workers at 2 Mbit/s up / 8 down and one at 100 / 100, equal
volumes, Dirichlet(0.3) labels. Worker k holds shard k.
"""
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


def fleet(name):
    if name not in FLEETS:
        sys.exit(f"fleets.py: unknown fleet '{name}' (known: {' '.join(FLEETS)})")
    return FLEETS[name]


def partition(name, seed):
    """The partition section of fleet `name` for a run seeded `seed`, as a YAML flow mapping."""
    p = dict(fleet(name)["partition"], seed=seed)
    return "{" + ", ".join(f"{k}: {v}" for k, v in p.items()) + "}"


def main(argv):
    if len(argv) == 3 and argv[1] == "links":
        print(" ".join(f"{up}mbit {down}mbit" for up, down in fleet(argv[2])["links"]))
    elif len(argv) == 3 and argv[1] == "prep":
        p = fleet(argv[2])["partition"]
        print(f"--alpha {p['dirichlet_alpha']} --volume-ratio {p['volume_ratio']}")
    elif len(argv) == 4 and argv[1] == "partition":
        print(partition(argv[2], argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
