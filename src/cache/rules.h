// The decision rules of the step caches, free of tensors so that unit tests can drive them with
// hand-computed sequences (spec caches.md §1.2 TeaCache, §2.4 DBCache can_cache, §2.8 SCM, §9.3 velocity
// reuse). The TaylorSeer calibrator, which does tensor arithmetic, is in taylorseer.h.
#pragma once

#include "cache/cache_spec.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace h3::cache {

// Cache-DiT's steps_mask for a predefined policy (fast | medium | slow | ultra) and `total_steps` forwards,
// generated exactly as the library does (1 = compute). Fails for N < 8 other than 4 and 6.
Result<std::vector<int>> steps_mask(const std::string& policy, int total_steps);
// The library's _steps_mask: alternate compute/cache run lengths, cut to total_steps.
std::vector<int> expand_bins(const std::vector<int>& compute_bins, const std::vector<int>& cache_bins,
                             int total_steps);

// TeaCache as vLLM-Omni runs it for H3: acc += |P(relL1)|; compute when acc ≥ thresh (then acc = 0);
// first and last steps, and any step without a previous probe, are computed.
class TeaCacheRule {
public:
    TeaCacheRule(std::vector<double> coefficients, double thresh, int steps);
    static double polynomial(const std::vector<double>& c, double x); // highest power first
    // `rel_l1`: relL1(probe, previous step's probe), nullopt when there is none. True: compute.
    bool should_compute(int step, std::optional<double> rel_l1);
    double accumulated() const { return acc_; }
    void reset() { acc_ = 0; }

private:
    std::vector<double> coefficients_;
    double thresh_;
    int steps_;
    double acc_ = 0;
};

// Cache-DiT's can_cache with its counters (one branch: H3 is CFG-distilled). `diff` is evaluated only when
// every earlier test passed; it returns nullopt when no Fn residual has been stored yet.
class DbCacheRule {
public:
    DbCacheRule(const DbCacheConfig& config, std::vector<int> mask);
    bool can_cache(int step, const std::function<std::optional<double>()>& diff);
    // Why the last can_cache answered as it did: warmup, scm_compute, scm_static, max_cached, max_continuous,
    // max_accumulated, threshold_off, no_reference, similar, different.
    const std::string& reason() const { return reason_; }
    double last_diff() const { return last_diff_; }
    int continuous() const { return continuous_; }
    int cached_count() const { return static_cast<int>(cached_steps_.size()); }
    void reset();

private:
    void add_cached_step(int step);
    DbCacheConfig config_;
    std::vector<int> mask_;
    int warmup_limit_ = 0;
    std::vector<int> cached_steps_;
    int continuous_ = 0;
    double accumulated_diff_ = 0;
    double last_diff_ = -1;
    std::string reason_;
};

// Velocity reuse window over N forwards: [ceil(start·N), floor(end·N)).
class VelocityRule {
public:
    VelocityRule(const VelocityConfig& config, int steps);
    int window_start() const { return start_; }
    int window_end() const { return end_; }
    // True: reuse the previous velocities (no DiT call). `drift`: relL1 of the last two computed video
    // velocities (only consulted with a threshold).
    bool should_reuse(int step, bool have_previous, std::optional<double> drift);
    void computed() { consecutive_ = 0; }
    void reset() { consecutive_ = 0; }

private:
    VelocityConfig config_;
    int start_ = 0, end_ = 0, consecutive_ = 0;
};

} // namespace h3::cache
