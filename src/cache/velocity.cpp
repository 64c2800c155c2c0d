// Velocity reuse (caches.md §9.3): inside the window the previous step's raw video and audio velocities
// replace the DiT call; the denoise loop applies them with this step's per-stream Δσ.
#include "cache/policies.h"
#include "cache/rules.h"
#include "ops/reduce.h"

namespace h3::cache {

namespace {

class VelocityReuse final : public StepCache {
public:
    VelocityReuse(const VelocityConfig& config, const StepCacheSetup& setup)
        : StepCache("velocity", setup), rule_(config, setup.steps), threshold_(config.threshold.has_value()) {
    }

    size_t bytes_held() const override {
        return (static_cast<size_t>(prev_.sample.defined() ? prev_.sample.nbytes() : 0) +
                (prev_.audio_sample.defined() ? prev_.audio_sample.nbytes() : 0));
    }
    const model::DitOutputs& reused_outputs() const override { return prev_; }

    Status end_step(int, const model::DitOutputs& out) override {
        rule_.computed();
        if (threshold_ && prev_.sample.defined()) {
            // The velocities are host fp32 (the DiT's output heads), so this runs the CPU op.
            H3_ASSIGN_OR_RETURN(drift_, ops::rel_l1(ops::Context::cpu(), out.sample, prev_.sample));
            record_.diff = *drift_;
            record_.probe_elements = 2 * out.sample.numel();
        }
        // Own copies: the loop may reuse its output buffers.
        H3_ASSIGN_OR_RETURN(prev_.sample, out.sample.to_dtype(DType::kF32));
        H3_ASSIGN_OR_RETURN(prev_.audio_sample, out.audio_sample.to_dtype(DType::kF32));
        return ok_status();
    }

protected:
    StepPlan plan(int step, bool) override {
        const bool reuse = rule_.should_reuse(step, prev_.sample.defined(), drift_);
        if (reuse) {
            record_.dit_call = false;
            record_.cache_hit = true;
            record_.blocks_skipped = setup_.num_layers;
            record_.reason = "window";
            return {.reuse_output = true};
        }
        record_.blocks_executed = setup_.num_layers;
        record_.reason =
            step < rule_.window_start() || step >= rule_.window_end() ? "outside_window" : "refresh";
        return {};
    }
    void reset() override {
        rule_.reset();
        prev_ = {};
        drift_.reset();
    }

private:
    VelocityRule rule_;
    bool threshold_;
    model::DitOutputs prev_;
    std::optional<double> drift_;
};

} // namespace

std::unique_ptr<StepCache> make_velocity(const VelocityConfig& config, const StepCacheSetup& setup) {
    return std::make_unique<VelocityReuse>(config, setup);
}

} // namespace h3::cache
