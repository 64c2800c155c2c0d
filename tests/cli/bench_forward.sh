#!/usr/bin/env bash
# The benchmarks are their own program, h3-bench, beside h3-engine: `h3-engine [--log-level L] bench ARGS`
# runs `h3-bench [--log-level L] ARGS` (same report, same exit codes, h3-bench's --help), and without an
# h3-bench beside it the command says so. `h3-engine --help` lists the user's commands (generate first) before
# the developer tools. Tiny shapes on the CPU.
source "$(dirname "$0")/lib/common.sh" "$@"
BENCH_BIN="$(dirname "$H3")/h3-bench"
[ -x "$BENCH_BIN" ] || fail "no h3-bench beside $H3"
make_tiny "$WORK/tiny" --seed 1
DIT=(dit --config "$WORK/tiny/transformer/config.json" --random-weights --device cpu --size 64x32 --frames 22
     --text 8 --blocks 1 --iters 1 --json)
# the same tiny bench through both programs: the same report (its shape; the timings differ)
expect_rc 0 "$H3" bench "${DIT[@]}"; cp "$WORK/out.txt" "$WORK/engine.json"
expect_rc 0 "$BENCH_BIN" "${DIT[@]}"; cp "$WORK/out.txt" "$WORK/bench.json"
python3 - "$WORK/engine.json" "$WORK/bench.json" <<'PY' || fail "the two reports differ"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert sorted(a) == sorted(b), set(a) ^ set(b)
for k in ("device", "rows", "text_rows", "video_rows", "audio_rows", "blocks_timed", "forward_path", "residency"):
    assert a[k] == b[k], (k, a[k], b[k])
assert a["text_rows"] == 8 and a["blocks_timed"] == 1 and a["seconds_per_block"] > 0, a
PY
# the global --log-level goes along (a bad one is refused before anything runs)
expect_rc 0 "$H3" --log-level error bench "${DIT[@]}"
expect_rc 2 "$H3" --log-level loud bench "${DIT[@]}"; expect_err "--log-level 'loud'"
# usage errors keep their exit codes: --random-weights is required, a bad --size names the flag
expect_rc 2 "$H3" bench dit --config "$WORK/tiny/transformer/config.json" --device cpu
expect_rc 2 "$H3" bench "${DIT[@]/64x32/60x32}"; expect_err "size"
expect_rc 2 "$H3" bench no-such-bench; expect_err "unknown command 'no-such-bench'"
# --help is h3-bench's: every bench, and a bench's flags
expect_rc 0 "$H3" bench --help
for b in dit vae text attention fp8 generate request quality; do
  grep -q "^  $b " "$WORK/out.txt" || fail "bench --help lacks $b"; done
expect_rc 0 "$H3" bench quality --help; grep -q -- "--settings" "$WORK/out.txt" || fail "bench quality --help"
# without h3-bench beside it, h3-engine says where it looked
mkdir -p "$WORK/alone"; cp "$H3" "$WORK/alone/h3-engine"
expect_rc 4 "$WORK/alone/h3-engine" bench "${DIT[@]}"; expect_err "cannot run $WORK/alone/h3-bench"
# h3-engine --help: the user's commands first (generate first of all), then the developer tools (bench)
expect_rc 0 "$H3" --help
python3 - "$WORK/out.txt" <<'PY' || fail "h3-engine --help order"
import re, sys
lines = open(sys.argv[1]).read().split("\n")
names = [m.group(1) for l in lines for m in [re.match(r"^  ([a-z][\w-]*)\s", l)] if m]
groups = [l for l in lines if l in ("Commands:", "Developer tools:")]
assert groups == ["Commands:", "Developer tools:"], groups
assert names[0] == "generate", names
user, dev = lines.index("Commands:"), lines.index("Developer tools:")
for n in ("generate", "serve", "encode", "decode", "compare", "inspect"):
    assert user < next(i for i, l in enumerate(lines) if l.startswith("  " + n + " ")) < dev, n
for n in ("make-tiny", "dit", "bench"):
    assert next(i for i, l in enumerate(lines) if l.startswith("  " + n + " ")) > dev, n
PY
echo "bench_forward: all checks passed"
