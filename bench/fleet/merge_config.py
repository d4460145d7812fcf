#!/usr/bin/python3
"""Writes one daemon's configuration for a fleet run: a shipped file, a method's overrides, then
the harness's own settings.

Usage: merge_config.py BASE OUT [--method FILE SECTION] [--set PATH=YAML ...] [--drop PATH ...]

BASE is read as it is (deploy/config/*.yaml). The method file's SECTION (`coordinator` or
`worker`) replaces whole top-level sections of BASE (so that a baseline's `allocation` does not
inherit keys of the shipped method); a null value removes the section. Each --set puts one value
at a dotted path (`data.shard.index=3`), creating the sections on the way; the value is YAML.
Scalars are copied as written (read without type resolution), so the daemons parse them as in
the shipped file. Each --drop removes what is at a dotted path, if anything is.
"""
import sys

import yaml

NULLS = ("null", "Null", "NULL", "~", "")


class PlainDumper(yaml.emitter.Emitter, yaml.serializer.Serializer,
                  yaml.representer.SafeRepresenter, yaml.resolver.BaseResolver):
    """Writes every scalar as the string it was read as, unquoted where YAML allows."""

    def __init__(self, stream, **_):
        yaml.emitter.Emitter.__init__(self, stream)
        yaml.serializer.Serializer.__init__(self)
        yaml.representer.SafeRepresenter.__init__(self, sort_keys=False)
        yaml.resolver.BaseResolver.__init__(self)


def load(text):
    return yaml.load(text, Loader=yaml.BaseLoader)


def set_path(doc, path, value):
    """Puts value at the dotted path of doc, making the mappings on the way."""
    keys = path.split(".")
    for key in keys[:-1]:
        if not isinstance(doc.get(key), dict):
            doc[key] = {}
        doc = doc[key]
    doc[keys[-1]] = value


def drop_path(doc, path):
    """Removes what is at the dotted path of doc, if anything is."""
    keys = path.split(".")
    for key in keys[:-1]:
        doc = doc.get(key)
        if not isinstance(doc, dict):
            return
    doc.pop(keys[-1], None)


def apply_method(doc, method_file, section):
    """Replaces (or, for null, removes) the top-level sections the method's SECTION names."""
    with open(method_file) as f:
        method = load(f) or {}
    for key, value in (method.get(section) or {}).items():
        if isinstance(value, str) and value in NULLS:
            doc.pop(key, None)
        else:
            doc[key] = value


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    with open(argv[1]) as f:
        doc = load(f) or {}
    args = argv[3:]
    while args:
        if args[0] == "--method" and len(args) >= 3:
            apply_method(doc, args[1], args[2])
            args = args[3:]
        elif args[0] == "--set" and len(args) >= 2 and "=" in args[1]:
            path, value = args[1].split("=", 1)
            set_path(doc, path, load(value))
            args = args[2:]
        elif args[0] == "--drop" and len(args) >= 2:
            drop_path(doc, args[1])
            args = args[2:]
        else:
            sys.exit(f"merge_config.py: cannot read arguments {args}\n{__doc__}")
    with open(argv[2], "w") as f:
        yaml.dump(doc, f, Dumper=PlainDumper)


if __name__ == "__main__":
    main(sys.argv)
