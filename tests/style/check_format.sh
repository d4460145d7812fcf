#!/usr/bin/env bash
# Every C++ source in the tree is as .clang-format lays it out (clang-format --dry-run -Werror).
# Usage: check_format.sh SRC_DIR. Skipped (77) where clang-format is not installed.
set -euo pipefail
cd "$1"
command -v clang-format >/dev/null || { echo "SKIP: clang-format not installed"; exit 77; }
if [ -d .git ] && command -v git >/dev/null; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.h' '*.cc')
else
  mapfile -t files < <(find . -path ./build -prune -o -path './build-*' -prune -o \
    \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cc' \) -print)
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted (run clang-format -i): %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "PASS: ${#files[@]} files formatted"
