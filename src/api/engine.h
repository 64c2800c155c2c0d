// The engine behind the server (and any other front end that runs whole jobs): owns the loaded DiT and,
// optionally, the text conditioner, and runs one validated VideoRequest at a time — [fl2va: keyframes →
// pipeline::prepare_fl2va (VAE encoder loaded for the job and released)] → conditioning (prompt + keyframe
// images) → pipeline::generate_latents → pipeline::decode_to_file — with a progress callback per stage and
// step and a cancel flag checked between steps and DiT blocks. Everything a job allocates lives in run()'s
// frame and is released on return, on success, error and cancellation alike; the next job starts clean.
#pragma once

#include "api/video_request.h"
#include "cache/work.h"
#include "core/status.h"
#include "model/dit/dit_model.h"
#include "ops/context.h"
#include "pipeline/conditioner.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace h3::api {

struct EngineParams {
    std::string model_dir;         // checkpoint root (either layout) with text encoder and VAEs
    ops::Context ctx;              // where everything runs (the caller owns the CUDA context)
    bool fp32 = false;             // fp32 reference mode instead of bf16
    bool keep_text_encoder = true; // false: load the text encoder per job (frees its memory between jobs)
};

enum class Stage { kEncode, kDenoise, kDecode, kMux };
const char* stage_name(Stage s); // encode, denoise, decode, mux

// Progress of one job as a percentage: encode 0–5, denoise 5–90 (per step), decode 90–99, mux 99–100.
struct JobProgress {
    Stage stage = Stage::kEncode;
    double percent = 0;
    int step = 0, total = 0; // denoise steps finished / forwards (denoise stage only)
};

struct JobOptions {
    std::function<void(const JobProgress&)> progress; // called from the running thread
    std::atomic<bool>* cancel = nullptr;              // set by the owner to cancel; → kCancelled
    // Testing: a job whose prompt equals this fails after its first denoise step with an injected
    // out-of-memory error (the failure path of a real OOM: state released, the next job runs).
    std::string fault_prompt;
};

// Where a job's outputs go. MP4 jobs write both (the WAV is the MP4's audio track); WAV jobs only audio.
struct JobOutputs {
    std::string video_path; // *.mp4, empty for WAV jobs
    std::string audio_path; // *.wav
};

struct JobResult {
    pipeline::Geometry geometry;
    cache::WorkReport work;
    double keyframe_seconds = 0; // fl2va / ref2va: encoders' load + keyframe / reference encode (inside
                                 // encode_seconds)
    double encode_seconds = 0, denoise_seconds = 0, decode_seconds = 0, mux_seconds = 0;
    // work.to_json() + the stage seconds, device and dtype.
    nlohmann::json metrics;
};

class Engine {
public:
    // Opens the checkpoint, loads the DiT (and the text conditioner when kept resident).
    static Result<std::unique_ptr<Engine>> load(const EngineParams& params);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // The request against this checkpoint (the step cache against the block count and schedule), before
    // anything is queued. Thread-safe.
    Status check(const VideoRequest& request) const;
    // Runs one job. Not reentrant: one caller (the worker) at a time.
    Result<JobResult> run(const VideoRequest& request, const JobOutputs& outputs, const JobOptions& options);

    const model::DitConfig& config() const;
    const std::string& device_name() const { return device_name_; }

private:
    Engine() = default;
    Result<pipeline::Conditioning> condition(const VideoRequest& request,
                                             std::vector<pipeline::ConditionerImage> images,
                                             std::vector<pipeline::ConditionerReference> references,
                                             const JobOptions& options);
    // The DiT a job runs on: "transformer" (t2va, fl2va) or "transformer_ref" (ref2va). One is resident at a
    // time; a job of the other family releases it and loads its own.
    Result<const model::DitModel*> dit_for(const std::string& component);

    EngineParams params_;
    std::string device_name_;
    double video_shift_ = 0, audio_shift_ = 0;
    std::unique_ptr<model::DitModel> dit_;
    std::string dit_component_; // which DiT dit_ holds
    model::DitConfig config_;   // both DiTs share it (checked when the other one loads); read by check()
    bool has_ref_dit_ = false;  // the checkpoint has transformer_ref/ (ref2va)
    std::unique_ptr<pipeline::Conditioner> conditioner_; // null when loaded per job
};

// The step cache against a checkpoint's config and the request's schedule (shared by the CLI).
Status check_cache(const cache::CacheSpec& spec, int steps, const model::DitConfig& config);

} // namespace h3::api
