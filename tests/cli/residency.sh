#!/usr/bin/env bash
# h3-engine generate with the weight residency flags on the tiny model (CPU; the flags become the model
# store's placement plan): layerwise streaming (with resident blocks, with step-cache jumps) writes the same
# latents as resident, int8 and fp16 run, the memory planner prints its choice or refuses a budget that
# cannot be met before loading anything, and bad combinations are usage errors naming the flag; serve takes
# the same flags (tests/test_serve.cpp ServeResidency runs a layerwise server).
source "$(dirname "$0")/lib/common.sh" "$@"

expect_rc 0 "$H3" make-tiny "$WORK/tiny" --seed 2
GEN=("$H3" generate --model "$WORK/tiny" --prompt "a red fox" --size 64x32 --frames 107 --steps 6 --seed 4)
DB=(--cache dbcache:Fn=1,rdt=1,warmup=2,mc=1)

expect_rc 0 "${GEN[@]}" --save-latents "$WORK/base.st"
expect_err "weights: DiT resident; text encoder resident"
expect_rc 0 "${GEN[@]}" --residency layerwise --save-latents "$WORK/lw.st"
expect_err "DiT weights layerwise (first 0 resident"
cmp -s "$WORK/base.st" "$WORK/lw.st" || fail "layerwise latents differ from resident"
expect_rc 0 "${GEN[@]}" --residency layerwise --resident-blocks 1 --host-pinning off --save-latents "$WORK/lw1.st"
cmp -s "$WORK/base.st" "$WORK/lw1.st" || fail "layerwise K=1 latents differ from resident"
expect_rc 0 "${GEN[@]}" "${DB[@]}" --save-latents "$WORK/db.st"
expect_rc 0 "${GEN[@]}" "${DB[@]}" --residency layerwise --save-latents "$WORK/db_lw.st"
expect_err "sync loads"
cmp -s "$WORK/db.st" "$WORK/db_lw.st" || fail "layerwise latents with DBCache hits differ from resident"

expect_rc 0 "${GEN[@]}" --weight-dtype int8 --save-latents "$WORK/i8.st"
expect_err "int8 weights"
cmp -s "$WORK/base.st" "$WORK/i8.st" && fail "int8 latents are identical to bf16"
expect_rc 0 "${GEN[@]}" --weight-dtype int8 --residency layerwise --int8-cache "$WORK/i8cache" --save-latents "$WORK/i8lw.st"
ls "$WORK"/i8cache/int8-*.safetensors >/dev/null 2>&1 || fail "no int8 cache file written"
expect_rc 0 "${GEN[@]}" --dtype fp16 --save-latents "$WORK/f16.st"

expect_rc 0 "${GEN[@]}" --gpu-memory-budget 8GiB --save-latents "$WORK/plan.st"
expect_err "memory plan for a 8.00 GiB device budget"
expect_err "transformer"
cmp -s "$WORK/base.st" "$WORK/plan.st" || fail "a budget that fits everything changed the latents"
expect_rc 2 "${GEN[@]}" --gpu-memory-budget 64KiB --save-latents "$WORK/x.st"
expect_err "cannot fit the model in a 64.00 KiB device budget"
[ -e "$WORK/x.st" ] && fail "a refused plan still wrote latents"
expect_rc 2 "${GEN[@]}" --gpu-memory-budget lots --save-latents "$WORK/x.st"; expect_err "--gpu-memory-budget 'lots'"
expect_rc 2 "${GEN[@]}" --residency resident --resident-blocks 1 --save-latents "$WORK/x.st"
expect_err "applies to residency layerwise"
expect_rc 2 "${GEN[@]}" --weight-dtype auto --save-latents "$WORK/x.st"; expect_err "give gpu_memory_budget"

# the same flags on serve: a budget that cannot be met fails before the server loads anything
expect_rc 2 "$H3" serve --model "$WORK/tiny" --port 0 --output-dir "$WORK/srv" --gpu-memory-budget 64KiB
if ! grep -q "no HTTP server" "$WORK/err.txt"; then
  expect_err "cannot fit the model in a 64.00 KiB device budget"
  [ -e "$WORK/srv" ] && fail "a refused serve plan created its output directory"
fi
expect_rc 2 "$H3" serve --model "$WORK/tiny" --port 0 --residency resident --resident-blocks 1
grep -q "no HTTP server" "$WORK/err.txt" || expect_err "applies to residency layerwise"
echo OK
