# Sourced by scripts/device_check.sh (H3_STAGE=custom H3_CUSTOM=scripts/device_lane_test.sh
# H3_TARGETS=test_parallel): issue #46's communication lane on CUDA — the forced Ulysses / ring paths at NCCL
# world size 1 with and without the lane against the plain path (GroupNccl.*), and the CPU grouping test.
echo "== test_parallel GroupNccl.*:GroupOverlap.* ($SECONDS s)"
timeout 150 $T/test_parallel --gtest_filter='GroupNccl.*:GroupOverlap.*' > "$OUT/lane.log" 2>&1; echo "rc=$?"
grep -E "^\[ +(OK|FAILED|SKIPPED|PASSED) |Failure|rel_err|Expected|Which is" "$OUT/lane.log" | head -30
