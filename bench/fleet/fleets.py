#!/usr/bin/python3
"""The benchmark's fleets, for run.sh (tc rates, partitions) and sim.sh (tern-sim links).

Usage: fleets.py links FLEET            "UP DOWN" tc rates per worker, on one line
       fleets.py workers FLEET          how many workers the fleet has
       fleets.py name FLEET             the fleet's name in the CSVs
       fleets.py partition FLEET SEED   the shards' partition, a YAML flow mapping
       fleets.py prep FLEET             the same partition as examples/pytorch/prep.py's options
       fleets.py check [--cnn] FLEET... exit 0 if every fleet can be read (and, with --cnn, trained
                                        by the CNN's trainers), else say why (status 2)
       fleets.py resolve [--cnn] DIR FLEET...  check, copy each fleet file to DIR/NAME.yaml and
                                        check the copy; prints the fleets to run, one a line

FLEET is A or B, or the path of a fleet file (YAML, docs/fleet.md#your-own-fleet):

    name: C                      # optional: the CSVs' fleet column (default: the file's stem;
                                 # not A or B, the built-in fleets' names)
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
import reprlib
import shutil
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
MAX_CNN_WORKERS = 32  # the CNN runs a PyTorch trainer per worker on this machine
MAX_FILE_BYTES = 64 << 10
RATE_MBPS = (0.064, 10000.0)  # tbf's useful range here: 64 kbit/s to 10 Gbit/s
PARTITION_KEYS = {"dirichlet_alpha": (0.0, 1e6), "volume_ratio": (1.0, 1e6)}
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,39}")
SHORT = reprlib.Repr()
SHORT.maxstring = SHORT.maxother = 40


class FleetError(Exception):
    """A fleet that cannot be used, with the reason."""


def number(where, value, low, high):
    """value as a finite float in [low, high], else a FleetError naming where it was."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise FleetError(f"{where}: expected a number, got {SHORT.repr(value)}")
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
            raise FleetError(f"{where}.count: expected a whole number >= 1, got {SHORT.repr(count)}")
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


def read_yaml(path):
    """The YAML document at path: at most MAX_FILE_BYTES, no aliases (a few bytes of nested
    aliases can stand for gigabytes)."""
    import yaml  # only fleet files need it (python3-yaml)

    class Loader(yaml.SafeLoader):
        def compose_node(self, parent, index):
            if self.check_event(yaml.events.AliasEvent):
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)

    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            raise FleetError(f"{path}: larger than {MAX_FILE_BYTES} bytes")
        return yaml.load(raw.decode("utf-8"), Loader=Loader)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise FleetError(f"{path}: cannot be read as YAML: {e}") from None


def from_file(path):
    """The fleet a file describes (module docstring), or a FleetError saying what is wrong."""
    if not os.path.isfile(path):
        raise FleetError(f"{path}: not a fleet name ({' '.join(FLEETS)}) nor a regular file")
    doc = read_yaml(path)
    if not isinstance(doc, dict):
        raise FleetError(f"{path}: expected a mapping with 'links' (and 'name', 'partition')")
    unknown = set(doc) - {"name", "links", "partition"}
    if unknown:
        raise FleetError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    name = doc.get("name", os.path.splitext(os.path.basename(path))[0])
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise FleetError(f"{path}: name {SHORT.repr(name)} must be 1-40 letters, digits, '_', '.', "
                         "'-', starting with a letter or digit")
    if name in FLEETS:
        raise FleetError(f"{path}: name '{name}' is a built-in fleet's (name the file's fleet)")
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


def check_cnn(spec):
    """What the CNN's data preparation (examples/pytorch/prep.py) and trainers can take."""
    f = fleet(spec)
    p = f["partition"]
    if p["dirichlet_alpha"] > 0 and p["volume_ratio"] != 1:
        raise FleetError(f"{spec}: the CNN's shards take a Dirichlet label skew or a volume ratio, "
                         "not both (examples/pytorch/prep.py)")
    if len(f["links"]) > MAX_CNN_WORKERS:
        raise FleetError(f"{spec}: the CNN runs a PyTorch trainer per worker on this machine: at "
                         f"most {MAX_CNN_WORKERS} workers")


def check(specs, cnn):
    """Raises FleetError for the first fleet that cannot be used, or for two of one name."""
    names = set()
    for spec in specs:
        name = fleet(spec)["name"]
        if name in names:
            raise FleetError(f"two fleets named '{name}'")
        names.add(name)
        if cnn:
            check_cnn(spec)


def resolve(directory, specs, cnn):
    """The fleets to run: A and B as they are, each file copied to directory/NAME.yaml once
    checked and checked again there (so that every run reads what was checked)."""
    check(specs, cnn)
    out = []
    for spec in specs:
        if spec in FLEETS:
            out.append(spec)
            continue
        copy = os.path.join(directory, fleet(spec)["name"] + ".yaml")
        shutil.copyfile(spec, copy)
        check([copy], cnn)
        out.append(copy)
    return out


def run(argv):
    """The command of argv (module docstring); raises FleetError."""
    cnn = len(argv) >= 3 and argv[2] == "--cnn"
    args = [a for a in argv[2:] if a != "--cnn"] if cnn else argv[2:]
    if len(argv) >= 3 and argv[1] == "check":
        check(args, cnn)
    elif len(argv) >= 4 and argv[1] == "resolve":
        print("\n".join(resolve(args[0], args[1:], cnn)))
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
