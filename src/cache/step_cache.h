// Request-scoped step caches (issue #8). A StepCache is created for one request by make_step_cache, asked
// for a StepPlan before every step, and destroyed with the request (RAII) on success, failure and
// cancellation alike; nothing of it outlives the request. `none` creates no object at all: the denoise
// loop then installs no block schedule and runs no probe.
//
// Residual and probe buffers are fp32 tensors on the model's device (cache/buffers.h); the arithmetic runs
// as ops (axpby, rel_l1), so on CUDA only the probe's scalar distance crosses to the host.
#pragma once

#include "cache/cache_spec.h"
#include "cache/work.h"
#include "model/dit/dit_inputs.h"
#include "model/dit/dit_model.h"

#include <memory>
#include <vector>

namespace h3::cache {

struct StepPlan {
    bool reuse_output = false;                // skip the whole DiT call (use reused_outputs())
    model::BlockSchedule* schedule = nullptr; // steer the forward's block loop (TeaCache, DBCache)
};

struct StepCacheSetup {
    int steps = 0;      // DiT forwards of the request
    int num_layers = 0; // DiT blocks
    int64_t rows = 0;   // packed rows (only for the accounting)
    // The checkpoint's TeaCache coefficients; empty when it has none (teacache then needs the request's).
    std::vector<double> teacache_coefficients;
};

// The checkpoint's TeaCache coefficient set: the FL2VA set for the full-size H3 transformer, none otherwise.
std::vector<double> teacache_coefficients_for(const model::DitConfig& config);

class StepCache {
public:
    virtual ~StepCache();
    StepCache(const StepCache&) = delete;
    StepCache& operator=(const StepCache&) = delete;

    // Applies the refresh hint (a reset forces this step to compute), then the policy's plan.
    StepPlan begin_step(int step);
    // After the step's forward ran (not called on reuse_output steps).
    virtual Status end_step(int step, const model::DitOutputs& outputs);
    virtual const model::DitOutputs& reused_outputs() const;
    // What the step did (blocks executed/skipped, hit, probe work); valid after the step.
    const StepRecord& record() const { return record_; }
    virtual size_t bytes_held() const = 0;
    const std::string& name() const { return name_; }

    // Live StepCache objects and the bytes they hold, process-wide (lifecycle tests).
    static int live_count();

protected:
    StepCache(std::string name, const StepCacheSetup& setup);
    virtual StepPlan plan(int step, bool refreshed) = 0;
    virtual void reset() = 0;

    std::string name_;
    StepCacheSetup setup_;
    RefreshHint refresh_;
    StepRecord record_;

    friend Result<std::unique_ptr<StepCache>> make_step_cache(const CacheSpec&, const StepCacheSetup&);
};

// nullptr for `none`. Checks the spec against the setup (refresh hints within the schedule, Fn + Bn below
// the block count, explicit mask length, TeaCache coefficients available).
Result<std::unique_ptr<StepCache>> make_step_cache(const CacheSpec& spec, const StepCacheSetup& setup);

} // namespace h3::cache
