#!/usr/bin/env bash
# h3-engine bench text: the conditioner's language stack with random weights at a config's width (here the
# tiny checkpoint's, on the CPU), placed by the flags or by the memory planner: a budget too small for the
# resident stack streams its layers (the plan's text-stack placement, not the DiT's, is what runs).
source "$(dirname "$0")/lib/common.sh" "$@"
"$H3" make-tiny "$WORK/tiny" --seed 1 > /dev/null || fail "make-tiny"
BENCH=("$H3" bench text --random-weights --config "$WORK/tiny/text_encoder/config.json" --device cpu --tokens 16 --json)
residency() { python3 -c "import json, sys; print(json.load(open(sys.argv[1]))['residency'])" "$1"; }
"${BENCH[@]}" > "$WORK/r.json" 2> "$WORK/r.err" || { cat "$WORK/r.err"; fail "resident"; }
[ "$(residency "$WORK/r.json")" = resident ] || fail "default residency: $(residency "$WORK/r.json")"
"${BENCH[@]}" --residency layerwise --resident-blocks 1 > "$WORK/l.json" 2> "$WORK/l.err" ||
  { cat "$WORK/l.err"; fail "layerwise"; }
residency "$WORK/l.json" | grep -q "^layerwise (first 1 resident" || fail "flags: $(residency "$WORK/l.json")"
# the resident stack needs ~243 KiB here: a 200 KiB budget makes the planner stream every layer
"${BENCH[@]}" --gpu-memory-budget 200KiB > "$WORK/b.json" 2> "$WORK/b.err" || { cat "$WORK/b.err"; fail "budget"; }
residency "$WORK/b.json" | grep -q "^layerwise (first 0 resident" || fail "budget: $(residency "$WORK/b.json")"
"${BENCH[@]}" --gpu-memory-budget 64KiB > /dev/null 2> "$WORK/c.err"; [ $? -ne 0 ] || fail "64 KiB budget fits?"
grep -q "cannot fit" "$WORK/c.err" || { cat "$WORK/c.err"; fail "too-small budget message"; }
echo "bench_text: all checks passed"
