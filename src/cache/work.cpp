#include "cache/work.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace h3::cache {

double block_flops(const model::DitConfig& c, int64_t rows) {
    const double S = static_cast<double>(rows), D = c.hidden_size, I = c.inner_dim(), F = c.ffn_dim;
    const double params = 4.0 * D * I + 3.0 * D * F;
    return 2.0 * S * params + 4.0 * S * S * I;
}

int WorkReport::dit_calls() const {
    int n = 0;
    for (const auto& s : steps) n += s.dit_call;
    return n;
}
int WorkReport::cache_hits() const {
    int n = 0;
    for (const auto& s : steps) n += s.cache_hit;
    return n;
}
int64_t WorkReport::blocks_executed() const {
    int64_t n = 0;
    for (const auto& s : steps) n += s.blocks_executed;
    return n;
}
int64_t WorkReport::blocks_skipped() const {
    int64_t n = 0;
    for (const auto& s : steps) n += s.blocks_skipped;
    return n;
}
double WorkReport::useful_flops() const {
    double f = 0;
    for (const auto& s : steps) f += s.useful_flops;
    return f;
}
double WorkReport::seconds() const {
    double t = 0;
    for (const auto& s : steps) t += s.seconds;
    return t;
}
double WorkReport::useful_tflops_per_s() const {
    const double t = seconds();
    return t > 0 ? useful_flops() / t / 1e12 : 0.0;
}

nlohmann::json one_time_json(const OneTimeWork& w) {
    return {{"gemm_tunings", w.gemm_tunings},
            {"gemm_tuning_seconds", w.gemm_tuning_seconds},
            {"attention_plans", w.attention_plans},
            {"attention_plan_seconds", w.attention_plan_seconds},
            {"workspace_allocations", w.workspace_allocations},
            {"workspace_bytes", w.workspace_bytes},
            {"graph_recordings", w.graph_recordings},
            {"graph_recording_seconds", w.graph_recording_seconds}};
}

OneTimeWork WorkReport::one_time() const {
    OneTimeWork w;
    for (const StepRecord& s : steps) w += s.one_time;
    return w;
}

nlohmann::json WorkReport::to_json() const {
    nlohmann::json j;
    j["cache"] = cache;
    j["steps"] = steps.size();
    j["dit_calls"] = dit_calls();
    j["cache_hits"] = cache_hits();
    j["blocks_executed"] = blocks_executed();
    j["blocks_skipped"] = blocks_skipped();
    j["useful_flops"] = useful_flops();
    j["useful_tflops_per_s"] = useful_tflops_per_s();
    j["denoise_seconds"] = seconds();
    j["setup_seconds"] = setup_seconds;
    nlohmann::json list = nlohmann::json::array();
    for (const auto& s : steps) {
        list.push_back({{"step", s.step},
                        {"dit_call", s.dit_call},
                        {"cache_hit", s.cache_hit},
                        {"refreshed", s.refreshed},
                        {"blocks_executed", s.blocks_executed},
                        {"blocks_skipped", s.blocks_skipped},
                        {"probe_elements", s.probe_elements},
                        {"diff", s.diff},
                        {"reason", s.reason},
                        {"seconds", s.seconds},
                        {"useful_flops", s.useful_flops}});
        if (s.local_diff >= 0) list.back()["local_diff"] = s.local_diff;
        list.back()["one_time"] = one_time_json(s.one_time);
    }
    j["per_step"] = list;
    // the first forward's one-time work (the penalty a warm-up or a kept workspace removes) and the steps'
    if (!steps.empty()) j["first_forward"] = one_time_json(steps.front().one_time);
    j["one_time"] = one_time_json(one_time());
    if (ranks > 1) {
        j["ranks"] = ranks;
        j["rank_useful_flops"] = rank_useful_flops;
    }
    return j;
}

namespace {
std::string grouped(int64_t v) {
    std::string s = std::to_string(v), out;
    int n = 0;
    for (auto it = s.rbegin(); it != s.rend(); ++it) {
        if (n && n % 3 == 0 && *it != '-') out.insert(out.begin(), ',');
        out.insert(out.begin(), *it);
        ++n;
    }
    return out;
}
} // namespace

std::string format_flops_rate(double flops_per_second) {
    static const struct {
        double scale;
        const char* unit;
    } units[] = {{1e15, "PFLOP/s"}, {1e12, "TFLOP/s"}, {1e9, "GFLOP/s"}, {1e6, "MFLOP/s"}, {1e3, "kFLOP/s"}};
    const double v = std::isfinite(flops_per_second) ? std::max(flops_per_second, 0.0) : 0.0;
    double scale = 1;
    const char* unit = "FLOP/s";
    for (const auto& u : units)
        if (v >= u.scale) {
            scale = u.scale;
            unit = u.unit;
            break;
        }
    char buf[64];
    const double x = v / scale;
    std::snprintf(buf, sizeof buf, x >= 10 || x == 0 ? "%.0f %s" : "%.2f %s", x, unit);
    return buf;
}

std::string WorkReport::summary() const {
    const std::string tf = format_flops_rate(useful_tflops_per_s() * 1e12);
    return "steps " + std::to_string(steps.size()) + ", DiT calls " + std::to_string(dit_calls()) +
           ", cache hits " + std::to_string(cache_hits()) + ", blocks run " + grouped(blocks_executed()) +
           "/" + grouped(blocks_executed() + blocks_skipped()) + ", " + tf;
}

} // namespace h3::cache
