#!/usr/bin/env bash
# Fails when a C++/CUDA source differs from .clang-format's output.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "check_format: clang-format not installed" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.h' '*.hpp' '*.cpp' '*.cu' '*.cuh')
bad=0
for f in "${files[@]}"; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "check_format: $f is not clang-formatted (run: clang-format -i $f)"
    bad=1
  fi
done
[ $bad -eq 0 ] && echo "check_format: ${#files[@]} files formatted"
exit $bad
