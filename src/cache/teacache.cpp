// TeaCache (caches.md §1): the probe is block 0's modulated input; on a skip the cached residual of the
// whole block stack is added and no block runs.
#include "cache/policies.h"
#include "cache/rules.h"

namespace h3::cache {

namespace {

class TeaCache final : public StepCache, public model::BlockSchedule {
public:
    TeaCache(const TeaCacheConfig& config, std::vector<double> coefficients, const StepCacheSetup& setup)
        : StepCache("teacache", setup), rule_(std::move(coefficients), config.rel_l1_thresh, setup.steps) {}

    size_t bytes_held() const override {
        return (prev_probe_.size() + residual_.size() + h_in_.size()) * sizeof(float);
    }

protected:
    StepPlan plan(int step, bool) override {
        step_ = step;
        record_.blocks_executed = setup_.num_layers; // until at_block(0) decides otherwise
        return {.schedule = this};
    }
    void reset() override {
        rule_.reset();
        prev_probe_.clear();
        residual_.clear();
        h_in_.clear();
    }

public:
    Result<int> at_block(const model::BlockScheduleContext& ctx, int b, Tensor& h) override {
        const int L = setup_.num_layers;
        void* stream = ctx.model->context().stream();
        if (b == 0) {
            Tensor m = ctx.scratch->x.slice(0, 0, h.dim(0));
            H3_TRY(ctx.model->modulated_input(0, h, ctx.tables->blocks[0], *ctx.rows, m));
            H3_ASSIGN_OR_RETURN(std::vector<float> probe, read_f32(m, stream));
            std::optional<double> d;
            if (!prev_probe_.empty() && prev_probe_.size() == probe.size()) d = rel_l1(probe, prev_probe_);
            record_.probe_elements = 2 * static_cast<int64_t>(probe.size());
            record_.diff = d.value_or(-1);
            prev_probe_ = std::move(probe); // updated on every call, skipped or not
            const bool compute = rule_.should_compute(step_, d) || residual_.size() != prev_probe_.size();
            if (compute) {
                record_.reason = d ? "accumulated" : "forced";
                H3_ASSIGN_OR_RETURN(h_in_, read_f32(h, stream));
                return 0;
            }
            H3_ASSIGN_OR_RETURN(std::vector<float> x, read_f32(h, stream));
            for (size_t i = 0; i < x.size(); ++i) x[i] += residual_[i];
            H3_TRY(write_f32(h, x, stream));
            record_.cache_hit = true;
            record_.reason = "below_threshold";
            record_.blocks_executed = 0;
            record_.blocks_skipped = L;
            return L;
        }
        if (b == L) {
            H3_ASSIGN_OR_RETURN(residual_, read_f32(h, stream));
            for (size_t i = 0; i < residual_.size(); ++i) residual_[i] -= h_in_[i];
            h_in_.clear();
        }
        return b;
    }

private:
    TeaCacheRule rule_;
    int step_ = 0;
    std::vector<float> prev_probe_, residual_, h_in_;
};

} // namespace

std::unique_ptr<StepCache> make_teacache(const TeaCacheConfig& config, std::vector<double> coefficients,
                                         const StepCacheSetup& setup) {
    return std::make_unique<TeaCache>(config, std::move(coefficients), setup);
}

} // namespace h3::cache
