// TeaCache (caches.md §1): the probe is block 0's modulated input; on a skip the cached residual of the
// whole block stack is added and no block runs. Buffers are fp32 tensors on the model's device; only the
// probe distance comes back to the host.
#include "cache/buffers.h"
#include "cache/policies.h"
#include "cache/rules.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace h3::cache {

namespace {

class TeaCache final : public StepCache, public model::BlockSchedule {
public:
    TeaCache(const TeaCacheConfig& config, std::vector<double> coefficients, const StepCacheSetup& setup)
        : StepCache("teacache", setup), rule_(std::move(coefficients), config.rel_l1_thresh, setup.steps) {}

    size_t bytes_held() const override {
        return held_bytes(prev_probe_) + held_bytes(residual_) + held_bytes(h_in_);
    }

protected:
    StepPlan plan(int step, bool) override {
        step_ = step;
        record_.blocks_executed = setup_.num_layers; // until at_block(0) decides otherwise
        return {.schedule = this};
    }
    void reset() override {
        rule_.reset();
        have_probe_ = have_residual_ = false;
    }

public:
    Result<int> at_block(const model::BlockScheduleContext& ctx, int b, Tensor& h) override {
        const int L = setup_.num_layers;
        const ops::Context& c = ctx.model->context();
        if (b == 0) {
            Tensor m = ctx.scratch->x.slice(0, 0, h.dim(0));
            H3_TRY(ctx.model->modulated_input(0, h, ctx.tables->blocks[0], *ctx.rows, m));
            std::optional<double> d;
            if (have_probe_ && has_shape(prev_probe_, m.shape())) {
                double local = -1;
                H3_ASSIGN_OR_RETURN(d, ctx.distance(m, prev_probe_, &local)); // reduced over a group's ranks
                if (ctx.parallel) record_.local_diff = local;
            }
            record_.probe_elements = 2 * m.numel();
            record_.diff = d.value_or(-1);
            H3_TRY(copy_as_f32(c, m, prev_probe_)); // updated on every call, skipped or not
            have_probe_ = true;
            const bool compute =
                rule_.should_compute(step_, d) || !have_residual_ || !has_shape(residual_, h.shape());
            if (compute) {
                record_.reason = d ? "accumulated" : "forced";
                H3_TRY(copy_as_f32(c, h, h_in_));
                return 0;
            }
            H3_TRY(ops::axpby(c, 1.0f, h, 1.0f, residual_, h));
            record_.cache_hit = true;
            record_.reason = "below_threshold";
            record_.blocks_executed = 0;
            record_.blocks_skipped = L;
            return L;
        }
        if (b == L) {
            H3_TRY(ops::axpby(c, 1.0f, h, -1.0f, h_in_, h_in_)); // the whole stack's residual
            std::swap(residual_, h_in_);
            have_residual_ = true;
        }
        return b;
    }

private:
    TeaCacheRule rule_;
    int step_ = 0;
    bool have_probe_ = false, have_residual_ = false;
    Tensor prev_probe_, residual_, h_in_;
};

} // namespace

std::unique_ptr<StepCache> make_teacache(const TeaCacheConfig& config, std::vector<double> coefficients,
                                         const StepCacheSetup& setup) {
    return std::make_unique<TeaCache>(config, std::move(coefficients), setup);
}

} // namespace h3::cache
