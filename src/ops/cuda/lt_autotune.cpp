#include "ops/cuda/lt_autotune.h"

#include "core/one_time_work.h"
#include "ops/cuda/cuda_common.h"

#include <chrono>

#include <vector>

namespace h3::ops::cuda_detail {

namespace {

constexpr int kTimedRuns = 3; // per candidate and round
constexpr int kRounds = 2;    // the second round in reverse order
// A candidate replaces the heuristic's first only when it is this much faster: the first H200 run of this
// tuner (one timing round, no margin) picked no faster kernel for the DiT's GEMMs, and a clock ramp or one
// noisy timing must not swap a good choice for a worse one.
constexpr float kMargin = 0.97f;

// The two events of the timing loop, destroyed on every path.
struct EventPair {
    cudaEvent_t start = nullptr, stop = nullptr;
    bool create() {
        if (cudaEventCreate(&start) == cudaSuccess && cudaEventCreate(&stop) == cudaSuccess) return true;
        cudaGetLastError();
        return false;
    }
    ~EventPair() {
        if (start) cudaEventDestroy(start);
        if (stop) cudaEventDestroy(stop);
    }
};

} // namespace

std::optional<int> kept_lt_choice(const Context& ctx, const char* family, const GemmTuningTable::Key& key,
                                  int candidates) {
    const GemmTuningTable* table = ctx.cuda ? ctx.cuda->gemm_tuning_table() : nullptr;
    if (!table || candidates <= 1) return std::nullopt;
    const auto kept = table->find_near(family, key); // this problem's, or one of nearly as many rows
    if (!kept || kept->candidates != candidates || kept->chosen >= candidates) return std::nullopt;
    return kept->chosen;
}

void keep_lt_choice(const Context& ctx, const char* family, const GemmTuningTable::Key& key, int candidates,
                    const LtChoice& choice) {
    GemmTuningTable* table = ctx.cuda ? ctx.cuda->gemm_tuning_table() : nullptr;
    if (!table || candidates <= 1 || choice.best_ms <= 0.0f) return; // nothing was timed
    table->record(family, key, {.chosen = choice.chosen, .candidates = candidates});
}

bool lt_timing_possible(const Context& ctx) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(stream_of(ctx), &capture) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return capture == cudaStreamCaptureStatusNone;
}

Result<LtChoice> fastest_lt_candidate(const Context& ctx, int candidates,
                                      const std::function<cublasStatus_t(int)>& run) {
    LtChoice choice;
    if (candidates <= 1 || !lt_timing_possible(ctx)) return choice;
    const cudaStream_t stream = stream_of(ctx);
    EventPair ev;
    if (!ev.create()) return choice;
    // one-time work of the forward that meets this problem first (core/one_time_work.h)
    struct Noted {
        std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
        ~Noted() {
            note_one_time({.gemm_tunings = 1,
                           .gemm_tuning_seconds =
                               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()});
        }
    } noted;
    constexpr float kRefused = -2.0f, kUntimed = -1.0f;
    std::vector<float> times(static_cast<size_t>(candidates), kUntimed); // best per candidate over the rounds
    // Warm-up: the heuristic's first a few times, so the clocks are up before anything is timed.
    for (int r = 0; r < kTimedRuns; ++r) (void)run(0);
    for (int round = 0; round < kRounds; ++round)
        for (int n = 0; n < candidates; ++n) {
            const int i = round % 2 == 0 ? n : candidates - 1 - n;
            float& t = times[static_cast<size_t>(i)];
            if (t == kRefused) continue;
            if (round == 0 && run(i) != CUBLAS_STATUS_SUCCESS) { // refuses these operands: never timed
                t = kRefused;
                continue;
            }
            bool ok = cudaEventRecord(ev.start, stream) == cudaSuccess;
            for (int r = 0; r < kTimedRuns && ok; ++r) ok = run(i) == CUBLAS_STATUS_SUCCESS;
            ok = ok && cudaEventRecord(ev.stop, stream) == cudaSuccess;
            float ms = 0.0f;
            if (ok) {
                const cudaError_t fault = cudaEventSynchronize(ev.stop); // a fault in a trial run is real
                if (fault != cudaSuccess) return cuda_status(fault, "cuBLASLt algorithm timing");
                ok = cudaEventElapsedTime(&ms, ev.start, ev.stop) == cudaSuccess;
            }
            if (!ok) {
                cudaGetLastError();
                continue;
            }
            if (t < 0.0f || ms < t) t = ms;
        }
    int best = 0;
    float best_time = times[0] > 0.0f ? times[0] : -1.0f;
    for (int i = 1; i < candidates; ++i) {
        const float t = times[static_cast<size_t>(i)];
        if (t <= 0.0f) continue;
        if (best_time < 0.0f || (best == 0 ? t < kMargin * best_time : t < best_time))
            best_time = t, best = i;
    }
    if (best != 0 && times[0] > 0.0f && !(best_time < kMargin * times[0])) best = 0, best_time = times[0];
    choice.chosen = best;
    choice.best_ms = best_time > 0.0f ? best_time / kTimedRuns : 0.0f;
    return choice;
}

} // namespace h3::ops::cuda_detail
