#!/usr/bin/env bash
# `pip install --no-build-isolation .` into a fresh venv (--system-site-packages: Debian's numpy and
# setuptools), offline (--no-index), building the module target of an existing build tree (H3_BUILD_DIR, so
# the test compiles nothing new), then `import h3engine` from outside the tree and a tiny generate.
# Usage: pip_install.sh SOURCE_DIR BUILD_DIR H3_ENGINE WORK
set -euo pipefail
SRC="$1"; BUILD="$2"; H3="$3"; WORK="$4"
rm -rf "$WORK"; mkdir -p "$WORK"
/usr/bin/python3 -m venv --system-site-packages "$WORK/venv"
H3_BUILD_DIR="$BUILD" "$WORK/venv/bin/pip" install --no-build-isolation --no-index --no-deps -q "$SRC" \
  > "$WORK/pip.txt" 2>&1 || { cat "$WORK/pip.txt"; echo "FAIL: pip install"; exit 1; }
"$H3" make-tiny "$WORK/tiny" --seed 1 > /dev/null
cd "$WORK"
"$WORK/venv/bin/python" - "$WORK/tiny" <<'PY'
import os, sys
import h3engine
assert os.path.dirname(h3engine.__file__).startswith(os.path.join(os.getcwd(), "venv")), h3engine.__file__
e = h3engine.Engine(sys.argv[1], device="cpu", weight_dtype="int8")
r = e.generate(prompt="a fox", size="64x32", seconds=4, steps=2, seed=3)
assert r.frames.shape == (107, 32, 64, 3) and r.audio.shape[0] == 2, (r.frames.shape, r.audio.shape)
try:
    h3engine.Engine(sys.argv[1], residency="sideways")
    raise SystemExit("FAIL: residency 'sideways' accepted")
except ValueError as err:
    assert err.field == "residency", err.field
print("pip install: ok,", h3engine.__file__)
PY
