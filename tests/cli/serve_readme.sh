#!/usr/bin/env bash
# Runs the curl examples of docs/serving.md (the example at its top) exactly as written (between the serve-readme
# markers), with `h3-engine` pointing at the built binary and port 8080 replaced by a free one, then checks
# what they produced: the MP4, the WAV, the sync MP4, the events stream ending in `done`, a clean exit.
set -uo pipefail
H3="$1"; WORK="$2"
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
rm -rf "$WORK"; mkdir -p "$WORK"
fail() { echo "FAIL: $*"; exit 1; }

if "$H3" serve --model "$WORK/none" 2>&1 | grep -q "no HTTP server"; then
  echo "SKIP: this build has no HTTP server"; exit 0
fi
for tool in curl jq; do command -v $tool > /dev/null || fail "$tool is missing (scripts/install_deps.sh installs it)"; done

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
{
  echo 'trap "rc=\$?; kill \$(jobs -p) 2>/dev/null || true; exit \$rc" EXIT; trap "exit 1" TERM'
  echo 'set -eo pipefail'
  sed -n '/<!-- serve-readme:begin -->/,/<!-- serve-readme:end -->/p' "$ROOT/docs/serving.md" |
    grep -v -e '^<!--' -e '^```' |
    sed -e "s#^h3-engine #\"$H3\" #" -e "s#8080#$PORT#g"
} > "$WORK/readme.sh"
grep -q "curl" "$WORK/readme.sh" || fail "no curl lines between the serve-readme markers of docs/serving.md"

cd "$WORK"
timeout 300 bash "$WORK/readme.sh" > "$WORK/out.txt" 2> "$WORK/err.txt"
rc=$?
[ $rc -eq 0 ] || { cat "$WORK/readme.sh" "$WORK/out.txt" "$WORK/err.txt"; fail "the README lines exited $rc"; }

head -c 12 out.mp4 | grep -q ftyp || fail "out.mp4 is not an MP4"
head -c 4 out.wav | grep -q RIFF || fail "out.wav is not a WAV"
head -c 12 sync.mp4 | grep -q ftyp || fail "sync.mp4 is not an MP4"
grep -q '"status": "' out.txt || { cat out.txt; fail "no video object status in the output"; }
grep -q '^event: progress' out.txt || { cat out.txt; fail "no progress events"; }
grep -q '^event: done' out.txt || { cat out.txt; fail "the events did not end with done"; }
grep -q '^h3_requests_total{status="completed"} 1' out.txt || { cat out.txt; fail "metrics line missing"; }
grep -q '"deleted":true' out.txt || { cat out.txt; fail "delete did not answer deleted"; }
grep -q "serve: stopped" err.txt || { cat err.txt; fail "the server did not stop cleanly"; }
[ "$(ls videos | grep -c '^video_')" -eq 1 ] || fail "expected one job directory left (the sync job)"
echo "serve_readme: ok"
