#include "cache/rules.h"

#include <cmath>
#include <numeric>

namespace h3::cache {

namespace {

using Policy = std::pair<std::vector<int>, std::vector<int>>; // compute bins, cache bins

int policy_sum(const Policy& p) {
    return std::accumulate(p.first.begin(), p.first.end(), 0) +
           std::accumulate(p.second.begin(), p.second.end(), 0);
}

void truncate_policy(Policy& p, int target) {
    while (policy_sum(p) > target) {
        if (!p.second.empty() && --p.second.back() == 0) p.second.pop_back();
        if (policy_sum(p) <= target) break;
        if (!p.first.empty() && --p.first.back() == 0) p.first.pop_back();
        if (policy_sum(p) <= target) break;
    }
}

} // namespace

std::vector<int> expand_bins(const std::vector<int>& compute, const std::vector<int>& cache, int total) {
    std::vector<int> mask;
    size_t ci = 0, ki = 0;
    int step = 0;
    while (step < total) {
        if (ci < compute.size()) {
            mask.insert(mask.end(), static_cast<size_t>(compute[ci]), 1);
            step += compute[ci++];
        }
        if (ki < cache.size()) {
            mask.insert(mask.end(), static_cast<size_t>(cache[ki]), 0);
            step += cache[ki++];
        }
        if (ci >= compute.size() && ki >= cache.size()) break; // the library asserts enough bins
    }
    mask.resize(static_cast<size_t>(total), 0);
    return mask;
}

Result<std::vector<int>> steps_mask(const std::string& name, int N) {
    const char* names[] = {"slow", "medium", "fast", "ultra"};
    int which = -1;
    for (int i = 0; i < 4; ++i)
        if (name == names[i]) which = i;
    if (which < 0)
        return invalid_argument("scm policy must be slow, medium, fast or ultra, got '" + name + "'");
    std::vector<Policy> p = {{{8, 3, 3, 2, 1, 1}, {1, 2, 2, 2, 3}},
                             {{6, 2, 2, 2, 2, 1}, {1, 3, 3, 3, 3}},
                             {{6, 1, 1, 1, 1, 1}, {1, 3, 4, 5, 4}},
                             {{4, 1, 1, 1, 1}, {2, 5, 6, 7}}};
    if (N > 28) {
        for (Policy& pol : p) {
            const Policy orig = pol;
            const size_t min_len = std::min(pol.first.size(), pol.second.size());
            const double scale = (static_cast<double>(N) / 28.0) * 0.5;
            while (policy_sum(pol) < N) {
                for (size_t i = 0; i < min_len; ++i) {
                    pol.first[i] += std::max(static_cast<int>(orig.first[i] * scale), 1);
                    if (policy_sum(pol) >= N) break;
                    pol.second[i] += std::max(static_cast<int>(orig.second[i] * scale), 1);
                    if (policy_sum(pol) >= N) break;
                }
                if (policy_sum(pol) >= N) break;
                pol.first.back() += 1;
                if (policy_sum(pol) >= N) break;
            }
            truncate_policy(pol, N);
        }
    } else if (N >= 16 && N < 28) {
        for (Policy& pol : p) truncate_policy(pol, N);
    } else if (N >= 8 && N < 16) {
        if (N > 8) {
            p = {{{4, 2, 2, 2, 1}, {1, 1, 1, 1}},
                 {{4, 2, 1, 1, 1}, {1, 1, 2, 2}},
                 {{3, 1, 1, 1, 1}, {1, 2, 2, 3}},
                 {{2, 1, 1, 1, 1}, {1, 2, 3, 3}}};
            if (N == 9) p = {{{5, 2, 1}, {1}}, {{5, 1, 1}, {1, 1}}, {{4, 1, 1}, {1, 2}}, {{3, 1, 1}, {2, 2}}};
        } else {
            p = {{{5, 1, 1}, {1}}, {{4, 1, 1}, {1, 1}}, {{3, 1, 1}, {1, 2}}, {{2, 1, 1}, {2, 2}}};
        }
        for (Policy& pol : p) truncate_policy(pol, N);
    } else if (N < 8) {
        if (N != 4 && N != 6)
            return invalid_argument("the predefined scm masks support 4, 6 or at least 8 steps, got " +
                                    std::to_string(N));
        const Policy c = N == 4 ? Policy{{2, 1}, {1}} : Policy{{3, 1}, {2}};
        p.assign(4, c);
    }
    const Policy& pol = p[static_cast<size_t>(which)];
    std::vector<int> mask = expand_bins(pol.first, pol.second, N);
    mask.back() = 1;
    return mask;
}

// ---- TeaCache

TeaCacheRule::TeaCacheRule(std::vector<double> c, double thresh, int steps)
    : coefficients_(std::move(c)), thresh_(thresh), steps_(steps) {}

double TeaCacheRule::polynomial(const std::vector<double>& c, double x) {
    double r = 0;
    for (double v : c) r = r * x + v;
    return r;
}

bool TeaCacheRule::should_compute(int step, std::optional<double> d) {
    if (step == 0 || step == steps_ - 1 || !d) {
        acc_ = 0;
        return true;
    }
    acc_ += std::fabs(polynomial(coefficients_, *d));
    if (acc_ >= thresh_) {
        acc_ = 0;
        return true;
    }
    return false;
}

// ---- DBCache

DbCacheRule::DbCacheRule(const DbCacheConfig& c, std::vector<int> mask) : config_(c), mask_(std::move(mask)) {
    warmup_limit_ = c.max_warmup_steps;
    if (!mask_.empty()) {
        int lead = 0;
        while (lead < static_cast<int>(mask_.size()) && mask_[static_cast<size_t>(lead)] == 1) ++lead;
        warmup_limit_ = std::min(warmup_limit_, lead);
    }
}

void DbCacheRule::reset() {
    cached_steps_.clear();
    continuous_ = 0;
    accumulated_diff_ = 0;
    last_diff_ = -1;
}

void DbCacheRule::add_cached_step(int step) {
    if (!cached_steps_.empty()) {
        if (step - cached_steps_.back() == 1) continuous_ += continuous_ == 0 ? 2 : 1;
    } else {
        continuous_ += 1;
    }
    cached_steps_.push_back(step);
}

bool DbCacheRule::can_cache(int step, const std::function<std::optional<double>()>& diff) {
    last_diff_ = -1;
    auto answer = [&](bool v, const char* why) {
        reason_ = why;
        if (v) add_cached_step(step);
        return v;
    };
    if (step < warmup_limit_ && step % config_.warmup_interval == 0) return answer(false, "warmup");
    if (!mask_.empty()) {
        const int m = step < static_cast<int>(mask_.size()) ? mask_[static_cast<size_t>(step)] : 0;
        if (m == 1) return answer(false, "scm_compute");
        if (config_.scm_policy == ScmPolicy::kStatic) return answer(true, "scm_static");
    }
    if (config_.max_cached_steps >= 0 && static_cast<int>(cached_steps_.size()) >= config_.max_cached_steps)
        return answer(false, "max_cached");
    if (config_.max_continuous_cached_steps >= 0 && continuous_ >= config_.max_continuous_cached_steps) {
        continuous_ = 0;
        return answer(false, "max_continuous");
    }
    if (config_.max_accumulated_residual_diff_threshold > 0 &&
        accumulated_diff_ >= config_.max_accumulated_residual_diff_threshold)
        return answer(false, "max_accumulated");
    const double thr = config_.residual_diff_threshold;
    if (thr <= 0) return answer(false, "threshold_off");
    std::optional<double> d = diff();
    if (!d) return answer(false, "no_reference");
    if (thr >= 1) return answer(true, "similar");
    last_diff_ = *d;
    if (*d > 0) accumulated_diff_ += *d;
    return *d < thr ? answer(true, "similar") : answer(false, "different");
}

// ---- velocity reuse

VelocityRule::VelocityRule(const VelocityConfig& c, int steps) : config_(c) {
    // Guard the products against representation error (0.2·20 must give 4, not 5).
    start_ = static_cast<int>(std::ceil(c.start_ratio * steps - 1e-9));
    end_ = static_cast<int>(std::floor(c.end_ratio * steps + 1e-9));
}

bool VelocityRule::should_reuse(int step, bool have_previous, std::optional<double> drift) {
    const bool reuse = step >= start_ && step < end_ && have_previous &&
                       (step - start_) % config_.refresh_interval != 0 &&
                       consecutive_ < config_.max_consecutive_reuse &&
                       (!config_.threshold || (drift && *drift <= *config_.threshold));
    if (reuse) ++consecutive_;
    return reuse;
}

} // namespace h3::cache
