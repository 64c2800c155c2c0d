#!/usr/bin/env bash
# h3-engine generate --cache / --quality / --metrics on the tiny model (CPU): bad specs are usage errors
# that name the field, the metrics JSON holds the counters, a cache that skips nothing reproduces the
# lossless latents bit for bit.
source "$(dirname "$0")/lib/common.sh" "$@"

make_tiny "$WORK/tiny" --seed 1
GEN=("$H3" generate --model "$WORK/tiny" --random-prompt-embeds 5 --size 64x32 --frames 107 --steps 9)

expect_rc 2 "${GEN[@]}" --cache dbcache:foo=1 --save-latents "$WORK/x.st"; expect_err "unknown field 'foo'"
expect_rc 2 "${GEN[@]}" --cache "dbcache:Fn=1+teacache" --save-latents "$WORK/x.st"; expect_err "one cache"
expect_rc 2 "${GEN[@]}" --cache dbcache:rdt=-1 --save-latents "$WORK/x.st"; expect_err "out of range"
expect_rc 2 "${GEN[@]}" --cache dbcache --quality high --save-latents "$WORK/x.st"; expect_err "not both"
expect_rc 2 "${GEN[@]}" --quality ultra --save-latents "$WORK/x.st"; expect_err "lossless or high"
expect_rc 2 "${GEN[@]}" --cache teacache --save-latents "$WORK/x.st"; expect_err "no TeaCache coefficient set"
expect_rc 2 "${GEN[@]}" --cache dbcache:Fn=1,refresh=8 --save-latents "$WORK/x.st"; expect_err "outside the request's schedule"

expect_rc 0 "${GEN[@]}" --save-latents "$WORK/base.st" --metrics "$WORK/base.json"
expect_err "generate: steps 8, DiT calls 8, cache hits 0"
for k in steps dit_calls cache_hits blocks_executed blocks_skipped useful_flops useful_tflops_per_s per_step; do
  grep -q "\"$k\"" "$WORK/base.json" || fail "metrics lack $k"
done
expect_rc 0 "${GEN[@]}" --cache dbcache:Fn=1,rdt=0 --save-latents "$WORK/nohit.st"
cmp -s "$WORK/base.st" "$WORK/nohit.st" || fail "a cache that skips nothing changed the latents"
expect_rc 0 "${GEN[@]}" --cache velocity --save-latents "$WORK/vel.st" --metrics "$WORK/vel.json"
expect_err "DiT calls 6, cache hits 2"
grep -q '"dit_calls": *6' "$WORK/vel.json" || fail "velocity metrics: dit_calls"
expect_rc 0 "${GEN[@]}" --quality high --save-latents "$WORK/high.st"
expect_err "cache DBCache_F1B0_W4I1M-1MC1_R0.04"
echo OK
