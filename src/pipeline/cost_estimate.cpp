#include "pipeline/cost_estimate.h"

#include "cache/work.h"
#include "ops/gemm.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace h3::pipeline {

int64_t job_rows(const GenerationJob& job, int64_t prompt_rows) {
    const Geometry& g = job.geometry;
    int64_t rows = g.rows_per_frame() * g.latent_frames + 2LL * g.audio_latents;
    if (job.keyframes) rows += g.rows_per_frame() * static_cast<int64_t>(job.keyframes->images.size());
    if (job.references) rows += g.rows_per_frame() * static_cast<int64_t>(job.references->size());
    rows += job.random_prompt_rows > 0 ? job.random_prompt_rows
            : job.prompt_embeds        ? job.prompt_embeds->rows()
                                       : prompt_rows;
    return rows;
}

double job_dit_flops(const GenerationJob& job, const model::DitConfig& config) {
    const int forwards = job.rungs.empty() ? job.steps - 1 : static_cast<int>(job.rungs.size());
    return static_cast<double>(std::max(forwards, 0)) * config.num_layers *
           cache::block_flops(config, job_rows(job));
}

Result<double> measure_gemm_rate(const ops::Context& ctx, int64_t width, DType dtype) {
    static std::mutex mu;
    static std::map<std::tuple<std::string, int64_t, int>, double> measured;
    const auto key = std::tuple{ctx.device.to_string(), width, static_cast<int>(dtype)};
    {
        std::lock_guard<std::mutex> lock(mu);
        if (auto it = measured.find(key); it != measured.end()) return it->second;
    }
    if (width < 1) return invalid_argument("measure_gemm_rate: width " + std::to_string(width));
    // about 0.1 GFLOP a call (at least 64 rows, at most 4096): narrow widths are timed on enough rows that
    // the call overhead does not dominate, the release's width on few enough to stay quick
    const int64_t kRows = std::clamp<int64_t>(static_cast<int64_t>(1e8 / (2.0 * width * width)), 64, 4096);
    Tensor x = Tensor::host({kRows, width}, dtype), w = Tensor::host({width, width}, dtype);
    std::memset(x.data(), 0, x.nbytes());
    std::memset(w.data(), 0, w.nbytes());
    if (!ctx.device.is_cpu()) {
        H3_ASSIGN_OR_RETURN(x, x.to(ctx.device, ctx.stream()));
        H3_ASSIGN_OR_RETURN(w, w.to(ctx.device, ctx.stream()));
    }
    H3_ASSIGN_OR_RETURN(Tensor y, Tensor::empty({kRows, width}, dtype, ctx.device));
    H3_TRY(ops::gemm(ctx, {}, x, w, Tensor(), y)); // warm-up (packing, thread pool)
    H3_TRY(ops::synchronize(ctx));
    const auto t0 = std::chrono::steady_clock::now();
    double seconds = 0;
    int runs = 0;
    while (seconds < 0.05) {
        H3_TRY(ops::gemm(ctx, {}, x, w, Tensor(), y));
        H3_TRY(ops::synchronize(ctx));
        ++runs;
        seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double rate = 2.0 * kRows * width * width * runs / seconds;
    std::lock_guard<std::mutex> lock(mu);
    measured[key] = rate;
    return rate;
}

Result<double> cpu_flops_rate(const runtime::ModelStore& store) {
    const runtime::CheckpointInfo& info = store.info();
    if (!store.context().device.is_cpu() || !info.dit) return 0.0;
    return measure_gemm_rate(store.context(), info.dit->hidden_size,
                             info.dtype == "fp32" ? DType::kF32 : DType::kBF16);
}

std::string slow_job_warning(const GenerationJob& job, double flops_per_second) {
    if (!job.estimated_seconds || *job.estimated_seconds <= kSlowJobSeconds) return {};
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.3g", job.dit_flops);
    return "this job's denoise alone is estimated at " + format_duration(*job.estimated_seconds) +
           " on the CPU (" + buf + " FLOP at " + cache::format_flops_rate(flops_per_second) +
           ", measured here); for a first look ask for a smaller job (a smaller size, seconds 4, "
           "num_inference_steps 10: the cost grows with the frames, the square of the rows and the steps) or "
           "run it on a GPU";
}

std::string format_duration(double seconds) {
    char buf[64];
    if (!std::isfinite(seconds)) return "forever";
    if (seconds < 90) {
        std::snprintf(buf, sizeof buf, "%.0f s", seconds);
    } else if (seconds < 5400) {
        std::snprintf(buf, sizeof buf, "%.0f min", seconds / 60);
    } else if (seconds < 3 * 86400) {
        const double h = std::floor(seconds / 3600);
        std::snprintf(buf, sizeof buf, "%.0f h %.0f min", h, std::floor((seconds - h * 3600) / 60));
    } else {
        std::snprintf(buf, sizeof buf, "%.1f days", seconds / 86400);
    }
    return buf;
}

} // namespace h3::pipeline
