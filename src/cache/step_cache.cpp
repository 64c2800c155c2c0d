#include "cache/step_cache.h"

#include "cache/policies.h"
#include "cache/rules.h"

#include <atomic>

namespace h3::cache {

namespace {
std::atomic<int> g_live{0};
} // namespace

std::vector<double> teacache_coefficients_for(const model::DitConfig& c) {
    // Only the full-size transformer has a fitted set (vLLM-Omni, FL2VA, 50 steps).
    if (c.num_layers == 50 && c.hidden_size == 5376 && c.ffn_dim == 14336)
        return kH3Fl2vaTeaCacheCoefficients;
    return {};
}

StepCache::StepCache(std::string name, const StepCacheSetup& setup) : name_(std::move(name)), setup_(setup) {
    g_live.fetch_add(1);
}

StepCache::~StepCache() {
    g_live.fetch_sub(1);
}

int StepCache::live_count() {
    return g_live.load();
}

StepPlan StepCache::begin_step(int step) {
    const bool refreshed = refresh_.fires(step);
    if (refreshed) reset();
    record_ = StepRecord{};
    record_.step = step;
    record_.refreshed = refreshed;
    return plan(step, refreshed);
}

Status StepCache::end_step(int, const model::DitOutputs&) {
    return ok_status();
}

const model::DitOutputs& StepCache::reused_outputs() const {
    H3_CHECK(false, "policy " << name_ << " never reuses whole outputs");
    static model::DitOutputs none;
    return none;
}

Result<std::unique_ptr<StepCache>> make_step_cache(const CacheSpec& spec, const StepCacheSetup& setup) {
    H3_TRY(validate_for_steps(spec, setup.steps, setup.num_layers));
    std::unique_ptr<StepCache> c;
    switch (spec.kind) {
    case CacheKind::kNone:
        return std::unique_ptr<StepCache>();
    case CacheKind::kTeaCache: {
        std::vector<double> coeffs =
            spec.teacache.coefficients.empty() ? setup.teacache_coefficients : spec.teacache.coefficients;
        if (coeffs.empty())
            return invalid_argument(
                "cache teacache: this checkpoint has no TeaCache coefficient set; give one "
                "with teacache:coeffs=c4/c3/c2/c1/c0 (highest power first)");
        c = make_teacache(spec.teacache, std::move(coeffs), setup);
        break;
    }
    case CacheKind::kDbCache: {
        std::vector<int> mask = spec.dbcache.scm_mask;
        if (mask.empty() && !spec.dbcache.scm_preset.empty()) {
            H3_ASSIGN_OR_RETURN(mask, steps_mask(spec.dbcache.scm_preset, setup.steps));
        }
        c = make_dbcache(spec.dbcache, std::move(mask), setup);
        break;
    }
    case CacheKind::kVelocity:
        c = make_velocity(spec.velocity, setup);
        break;
    }
    c->refresh_ = spec.refresh;
    return c;
}

} // namespace h3::cache
