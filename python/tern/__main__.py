"""python3 -m tern model-file PATH: prints a model file's layout and parameter count."""
import argparse
import sys

import numpy as np

from tern.model_file import load_model_file


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tern")
    sub = parser.add_subparsers(dest="command", required=True)
    show = sub.add_parser("model-file", help="print a model file's tensors")
    show.add_argument("path")
    args = parser.parse_args(argv)
    try:
        named = load_model_file(args.path)
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name, a in named:
        print(f"{name} {list(a.shape)}")
    total = sum(a.size for _, a in named)
    finite = all(np.isfinite(a).all() for _, a in named)
    print(f"{len(named)} tensors, {total} parameters{'' if finite else ', NOT all finite'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
