// Cache-DiT DBCache (caches.md §2.3–§2.8) over H3's single packed stream: the first Fn blocks always run
// and their residual is the probe; on a hit the middle blocks are skipped and their cached residual (or the
// TaylorSeer forecast of it) is added; the last Bn blocks always run. Every buffer is an fp32 tensor on the
// model's device; only the probe distance comes back to the host.
#include "cache/buffers.h"
#include "cache/policies.h"
#include "cache/rules.h"
#include "cache/taylorseer.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

#include <optional>

namespace h3::cache {

namespace {

class DbCache final : public StepCache, public model::BlockSchedule {
public:
    DbCache(const DbCacheConfig& config, std::vector<int> mask, const StepCacheSetup& setup)
        : StepCache("dbcache", setup), config_(config), rule_(config, std::move(mask)) {
        if (config.taylorseer_order > 0) taylor_.emplace(config.taylorseer_order);
    }

    size_t bytes_held() const override {
        return held_bytes(work_) + held_bytes(h_mid_) + held_bytes(fn_buffer_) + held_bytes(bn_buffer_) +
               held_bytes(forecast_) + (taylor_ ? taylor_->bytes() : 0);
    }

protected:
    StepPlan plan(int step, bool) override {
        step_ = step;
        hit_ = false;
        record_.blocks_executed = setup_.num_layers;
        return {.schedule = this};
    }
    void reset() override {
        rule_.reset();
        have_fn_ = have_bn_ = false;
        if (taylor_) taylor_->reset();
    }

public:
    Result<int> at_block(const model::BlockScheduleContext& ctx, int b, Tensor& h) override {
        const int L = setup_.num_layers, fn = config_.fn_compute_blocks, tail = L - config_.bn_compute_blocks;
        const ops::Context& c = ctx.model->context();
        if (b == 0) {
            H3_TRY(copy_as_f32(c, h, work_)); // the Fn input
            return 0;
        }
        if (b == fn) {
            H3_TRY(ops::axpby(c, 1.0f, h, -1.0f, work_, work_)); // work_ = Fn residual
            if (taylor_) taylor_->mark_step_begin();
            Status probe = ok_status();
            auto diff = [&]() -> std::optional<double> {
                if (!have_fn_ || !has_shape(fn_buffer_, h.shape())) return std::nullopt;
                record_.probe_elements = 2 * h.numel();
                double local = -1;
                auto d = ctx.distance(work_, fn_buffer_, &local); // reduced over a device group's ranks
                if (ctx.parallel) record_.local_diff = local;
                if (!d.ok()) {
                    probe = d.status();
                    return std::nullopt;
                }
                return *d;
            };
            const bool have_payload =
                taylor_ ? taylor_->ready() : have_bn_ && has_shape(bn_buffer_, h.shape());
            const bool cache = rule_.can_cache(step_, diff);
            H3_TRY(probe);
            record_.diff = rule_.last_diff();
            record_.reason = rule_.reason();
            if (cache && have_payload) {
                if (taylor_) {
                    H3_TRY(taylor_->approximate(c, forecast_));
                    H3_TRY(ops::axpby(c, 1.0f, h, 1.0f, forecast_, h));
                } else {
                    H3_TRY(ops::axpby(c, 1.0f, h, 1.0f, bn_buffer_, h));
                }
                hit_ = true;
                record_.cache_hit = true;
                record_.blocks_executed = L - (tail - fn);
                record_.blocks_skipped = tail - fn;
                return tail;
            }
            std::swap(fn_buffer_, work_); // the reference moves the Fn residual only on computed steps
            have_fn_ = true;
            H3_TRY(copy_as_f32(c, h, h_mid_));
            return fn;
        }
        if (b == tail && !hit_) {
            H3_TRY(ops::axpby(c, 1.0f, h, -1.0f, h_mid_, h_mid_)); // the middle blocks' residual
            if (taylor_) {
                H3_TRY(taylor_->update(c, h_mid_));
            } else {
                std::swap(bn_buffer_, h_mid_);
                have_bn_ = true;
            }
        }
        return b;
    }

private:
    DbCacheConfig config_;
    DbCacheRule rule_;
    std::optional<TaylorSeer> taylor_;
    int step_ = 0;
    bool hit_ = false, have_fn_ = false, have_bn_ = false;
    Tensor work_, h_mid_, fn_buffer_, bn_buffer_, forecast_;
};

} // namespace

std::unique_ptr<StepCache> make_dbcache(const DbCacheConfig& config, std::vector<int> mask,
                                        const StepCacheSetup& setup) {
    return std::make_unique<DbCache>(config, std::move(mask), setup);
}

} // namespace h3::cache
