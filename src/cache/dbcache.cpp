// Cache-DiT DBCache (caches.md §2.3–§2.8) over H3's single packed stream: the first Fn blocks always run
// and their residual is the probe; on a hit the middle blocks are skipped and their cached residual (or the
// TaylorSeer forecast of it) is added; the last Bn blocks always run.
#include "cache/policies.h"
#include "cache/rules.h"

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
        return (h_in_.size() + h_mid_.size() + fn_buffer_.size() + bn_buffer_.size()) * sizeof(float) +
               (taylor_ ? taylor_->bytes() : 0);
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
        h_in_.clear();
        h_mid_.clear();
        fn_buffer_.clear();
        bn_buffer_.clear();
        if (taylor_) taylor_->reset();
    }

public:
    Result<int> at_block(const model::BlockScheduleContext& ctx, int b, Tensor& h) override {
        const int L = setup_.num_layers, fn = config_.fn_compute_blocks, tail = L - config_.bn_compute_blocks;
        void* stream = ctx.model->context().stream();
        if (b == 0) {
            H3_ASSIGN_OR_RETURN(h_in_, read_f32(h, stream)); // the Fn input is kept, never overwritten
            return 0;
        }
        if (b == fn) {
            H3_ASSIGN_OR_RETURN(std::vector<float> cur, read_f32(h, stream));
            std::vector<float> r_fn(cur.size());
            for (size_t i = 0; i < cur.size(); ++i) r_fn[i] = cur[i] - h_in_[i];
            h_in_.clear();
            if (taylor_) taylor_->mark_step_begin();
            auto diff = [&]() -> std::optional<double> {
                if (fn_buffer_.size() != r_fn.size()) return std::nullopt;
                record_.probe_elements = 2 * static_cast<int64_t>(r_fn.size());
                return rel_l1(r_fn, fn_buffer_);
            };
            const bool have_payload = taylor_ ? taylor_->ready() : bn_buffer_.size() == cur.size();
            const bool cache = rule_.can_cache(step_, diff);
            record_.diff = rule_.last_diff();
            record_.reason = rule_.reason();
            if (cache && have_payload) {
                const std::vector<float> add = taylor_ ? taylor_->approximate() : std::vector<float>();
                const std::vector<float>& r = taylor_ ? add : bn_buffer_;
                for (size_t i = 0; i < cur.size(); ++i) cur[i] += r[i];
                H3_TRY(write_f32(h, cur, stream));
                hit_ = true;
                record_.cache_hit = true;
                record_.blocks_executed = L - (tail - fn);
                record_.blocks_skipped = tail - fn;
                return tail;
            }
            fn_buffer_ = std::move(r_fn); // the reference moves only on computed steps
            h_mid_ = std::move(cur);
            return fn;
        }
        if (b == tail && !hit_) {
            H3_ASSIGN_OR_RETURN(std::vector<float> out, read_f32(h, stream));
            for (size_t i = 0; i < out.size(); ++i) out[i] -= h_mid_[i];
            h_mid_.clear();
            if (taylor_)
                taylor_->update(std::move(out));
            else
                bn_buffer_ = std::move(out);
        }
        return b;
    }

private:
    DbCacheConfig config_;
    DbCacheRule rule_;
    std::optional<TaylorSeer> taylor_;
    int step_ = 0;
    bool hit_ = false;
    std::vector<float> h_in_, h_mid_, fn_buffer_, bn_buffer_;
};

} // namespace

std::unique_ptr<StepCache> make_dbcache(const DbCacheConfig& config, std::vector<int> mask,
                                        const StepCacheSetup& setup) {
    return std::make_unique<DbCache>(config, std::move(mask), setup);
}

} // namespace h3::cache
