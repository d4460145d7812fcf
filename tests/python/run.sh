#!/usr/bin/env bash
# The Python package's unit tests (python/tests) with Debian's interpreter and packages:
# python3-pytest, python3-zmq, python3-protobuf, python3-numpy (python3-torch optional: its
# tests skip without it; protobuf-compiler optional: the generated-module check skips).
# Exit 77 (skip) when pytest or a required module is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=/usr/bin/python3
[ -x "$PY" ] || { echo "skip: no $PY"; exit 77; }
for m in pytest zmq google.protobuf numpy; do
  "$PY" -c "import $m" 2>/dev/null || { echo "skip: $PY lacks $m"; exit 77; }
done
export PYTHONDONTWRITEBYTECODE=1
exec "$PY" -m pytest -q -p no:cacheprovider python/tests "$@"
