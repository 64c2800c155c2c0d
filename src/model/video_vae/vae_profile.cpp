#include "model/video_vae/vae_profile.h"

#include "core/cuda_api.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace h3::model::vae_profile {

namespace {
struct State {
    bool on = std::getenv("H3_VAE_PROFILE") != nullptr;
    std::mutex mutex;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    std::map<std::string, double> seconds;
};

State& state() {
    static State s;
    return s;
}

void add(const ops::Context& ctx, const char* phase) {
    State& s = state();
    if (!ctx.device.is_cpu()) (void)cuda::stream_synchronize(ctx.stream());
    std::lock_guard<std::mutex> lock(s.mutex);
    const auto now = std::chrono::steady_clock::now();
    if (phase) s.seconds[phase] += std::chrono::duration<double>(now - s.last).count();
    s.last = now;
}
} // namespace

bool on() {
    return state().on;
}

void mark(const ops::Context& ctx, const char* phase) {
    if (on()) add(ctx, phase);
}

void mark(const ops::Context& ctx, const std::string& phase) {
    if (on()) add(ctx, phase.c_str());
}

void print(const char* label) {
    State& s = state();
    if (!s.on) return;
    std::lock_guard<std::mutex> lock(s.mutex);
    double total = 0.0;
    for (const auto& [k, v] : s.seconds) total += v;
    for (const auto& [k, v] : s.seconds)
        std::fprintf(stderr, "vae profile %s %-28s %8.3f s\n", label, k.c_str(), v);
    std::fprintf(stderr, "vae profile %s %-28s %8.3f s\n", label, "(sum)", total);
    s.seconds.clear();
}

} // namespace h3::model::vae_profile
