#!/usr/bin/env bash
# The docs check (scripts/test.sh runs it): every h3-engine command in README.md and docs/*.md against the
# binary's option parser, the runnable examples (marked <!-- docs-check: run -->) executed on the CPU, the
# links and the line widths. See scripts/check_docs.py.
#   check_docs.sh [BUILD_DIR] [--no-run] [--only PAGE.md]      (BUILD_DIR: build-test, else build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR="${1:-}"
[ $# -gt 0 ] && shift
if [ -z "$BUILD_DIR" ]; then
  BUILD_DIR=build-test
  [ -x "$BUILD_DIR/src/cli/h3-engine" ] || BUILD_DIR=build
fi
H3="$BUILD_DIR/src/cli/h3-engine"
[ -x "$H3" ] || { echo "check_docs: no binary at $H3 (build the h3-engine target first)" >&2; exit 2; }
exec python3 scripts/check_docs.py "$H3" "$BUILD_DIR/docs_check" "$@"
