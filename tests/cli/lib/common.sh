# The setup every tests/cli/*.sh shares (source it first: `source "$(dirname "$0")/lib/common.sh" "$@"`):
# H3 (the h3-engine binary) and WORK (a fresh work folder) from the script's arguments, and the helpers
#   fail MSG                 print FAIL: MSG and exit 1
#   expect_rc RC CMD...      run CMD (stdout/stderr to $WORK/out.txt / err.txt), fail unless it exits RC
#   expect_err TEXT          fail unless the last expect_rc's stderr holds TEXT
#   make_tiny DIR ARGS...    `h3-engine make-tiny DIR ARGS...` (fails the test on error)
#   latents_close A B        the *latents tensors of latents files A and B within 1e-5 relative RMS
#                            (`h3-engine compare --json`; the report stays in $WORK/cmp.json)
# Kept out of the tests/cli/*.sh glob (lib/), so it is not a test itself.
set -uo pipefail
H3="$1"; WORK="$2"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "FAIL: $*"; exit 1; }
expect_rc() { local want=$1; shift; "$@" >"$WORK/out.txt" 2>"$WORK/err.txt"; local rc=$?;
  [ $rc -eq "$want" ] || { cat "$WORK/out.txt" "$WORK/err.txt"; fail "'$*' exited $rc, expected $want"; }; }
expect_err() { grep -q -- "$1" "$WORK/err.txt" || { cat "$WORK/err.txt"; fail "stderr lacks '$1'"; }; }
make_tiny() { expect_rc 0 "$H3" make-tiny "$@"; }
latents_close() {
  "$H3" compare --json "$1" "$2" > "$WORK/cmp.json" || return 1
  python3 - "$WORK/cmp.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [t["name"] for t in r["latents"]["tensors"] if t["name"].endswith("latents")
       and not t["rel_rms"] <= 1e-5]
sys.exit(1 if bad else 0)
PY
}
