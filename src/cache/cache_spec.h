// What a request asks of the step cache (spec caches.md §1, §2, §9; h3-model.md §13): one policy and its
// fields, parsed from the CLI form (`dbcache:Fn=1,Bn=0,rdt=0.04`), from JSON (the server) or from a quality
// preset. Every field is validated here, before any heavy work; the schedule-dependent checks (refresh
// hints, explicit masks) happen once the request's step count is known (validate_for_steps).
#pragma once

#include "core/status.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace h3::cache {

enum class CacheKind { kNone, kTeaCache, kDbCache, kVelocity };
const char* cache_kind_name(CacheKind kind);

// The vLLM-Omni FL2VA set (highest power first) and its threshold, as issue #8 pins them.
inline const std::vector<double> kH3Fl2vaTeaCacheCoefficients = {
    2283.7040658527776, -777.5977277886368, 94.0841474135949, -4.232669906169421, 0.2173782527946167};
constexpr double kH3Fl2vaTeaCacheThreshold = 0.17;

struct TeaCacheConfig {
    std::vector<double> coefficients; // empty: the checkpoint's own set (refused when it has none)
    double rel_l1_thresh = kH3Fl2vaTeaCacheThreshold;
};

enum class ScmPolicy { kDynamic, kStatic };

// Cache-DiT's DBCacheConfig with the library's defaults (§2.1).
struct DbCacheConfig {
    int fn_compute_blocks = 8;
    int bn_compute_blocks = 0;
    double residual_diff_threshold = 0.08;
    double max_accumulated_residual_diff_threshold = 0; // ≤ 0: off (the library's None)
    int max_warmup_steps = 8;
    int warmup_interval = 1;
    int max_cached_steps = -1;            // −1: unlimited
    int max_continuous_cached_steps = -1; // −1: unlimited
    int taylorseer_order = 0;             // 0: off, 1 or 2
    std::string scm_preset;               // "", fast, medium, slow, ultra
    std::vector<int> scm_mask;            // explicit mask (1 = compute); wins over the preset
    ScmPolicy scm_policy = ScmPolicy::kDynamic;
    bool has_scm() const { return !scm_preset.empty() || !scm_mask.empty(); }
};

// Velocity reuse (§9.3): the eligible window is [ceil(start·N), floor(end·N)) over N forwards.
struct VelocityConfig {
    double start_ratio = 0.2;
    double end_ratio = 0.8;
    int refresh_interval = 2;
    int max_consecutive_reuse = 1;
    std::optional<double> threshold; // relL1 drift of the video velocity between computed steps
};

enum class RefreshPolicy { kNone, kOnce, kRepeat };

// Reset the cache state at `step` (once) or at every multiple of `step` (repeat): the step is computed in
// full and every accumulator and buffer starts afresh.
struct RefreshHint {
    RefreshPolicy policy = RefreshPolicy::kNone;
    int step = 0;
    bool fires(int i) const;
};

struct CacheSpec {
    CacheKind kind = CacheKind::kNone;
    TeaCacheConfig teacache;
    DbCacheConfig dbcache;
    VelocityConfig velocity;
    RefreshHint refresh;
    // "none", "teacache(thresh=0.17)", "DBCache_F1B0_W4I1M-1MC1_R0.04", "velocity(...)".
    std::string describe() const;
    nlohmann::json to_json() const;
};

// `none`, `teacache[:thresh=..,coeffs=a/b/c/d/e]`, `dbcache[:Fn=..,Bn=..,rdt=..,warmup=..,interval=..,
// max_cached=..,mc=..,max_acc=..,taylorseer=0|1|2,scm=fast|medium|slow|ultra|1101..,scm_policy=..]`,
// `velocity[:start=..,end=..,refresh_interval=..,max_reuse=..,threshold=..]`; every kind also takes
// `refresh=K,refresh_policy=once|repeat`. Long Cache-DiT names are accepted too.
Result<CacheSpec> parse_cache_spec(const std::string& text);
// {"teacache": {...}} / {"dbcache": {...}} / {"velocity": {...}} / {"none": {}} with the same fields.
Result<CacheSpec> parse_cache_json(const nlohmann::json& j);
// lossless (= none) | high (DBCache F1B0, rdt 0.04, warmup 4, at most 1 consecutive cached step).
Result<CacheSpec> quality_preset(const std::string& name);
// The checks that need the request's number of DiT forwards.
Status validate_for_steps(const CacheSpec& spec, int forwards, int num_layers);

} // namespace h3::cache
