// pipeline::Generator: the one generation flow every front end uses (h3-engine generate, the server's worker,
// bindings). run(job, events) takes a validated GenerationJob (pipeline/job_builder.h) through
//   encode   fl2va: keyframes → video VAE encoder; ref2va: references → video / audio VAE encoders;
//            conditioning: prompt (+ images) → text stack (+ vision tower), or the job's precomputed rows
//   denoise  the task's DiT (transformer/ or transformer_ref/): pipeline::generate_latents
//   decode   video VAE → frames, audio VAE → waveform (only what the outputs ask for)
//   write    latents safetensors, MP4 / WAV / PNG frames
// with models leased from a runtime::ModelStore for each stage only (a per-job component is released as soon
// as its stage ends; a resident one stays for the next job), progress events per stage and step, and a
// cancellation flag checked between stages, steps and DiT blocks. Everything a job allocates is released
// when run() returns, on success, failure and cancellation alike.
#pragma once

#include "cache/work.h"
#include "ops/provenance.h"
#include "pipeline/denoise.h"
#include "pipeline/generate_group.h"
#include "pipeline/job.h"
#include "pipeline/text_conditioner.h"
#include "runtime/model_store.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace h3::pipeline {

// kLoad: a component is about to be read from the checkpoint (its lease is the first since it was released;
// `component` names it); the stage it serves follows.
enum class Stage { kEncode, kDenoise, kDecode, kMux, kLoad };
const char* stage_name(Stage s); // encode, denoise, decode, mux, load

// Progress as a percentage: encode 0–5, denoise 5–90 (per step), decode 90–99, mux (writing) 99–100; a load
// keeps the percentage of the stage it serves.
struct JobProgress {
    Stage stage = Stage::kEncode;
    double percent = 0;
    int step = 0, total = 0;    // denoise: steps finished / forwards
    double step_seconds = 0;    // denoise: the step just finished
    double elapsed_seconds = 0; // denoise: since the first step
    double eta_seconds = 0;     // denoise: mean step time × steps left
    const char* component = ""; // load: runtime::component_name of what loads
    // The part of the stage starting or running: encode: "keyframes" (the fl2va video encoder), "reference
    // video" / "reference audio" (the ref2va encoders), "vision" (the vision tower), "text" (the language
    // stack); decode: "video", "audio"; "" otherwise.
    const char* part = "";
};

struct JobEvents {
    std::function<void(const JobProgress&)> progress; // optional; called from the running thread
    const std::atomic<bool>* cancel = nullptr;        // set by the owner to cancel; → kCancelled
};

struct JobReport {
    Geometry geometry;
    Tensor video_noise, video_latents;     // [1, C, T, h, w] f32 host
    Tensor audio_noise, audio_latents;     // [2, C_a, A] f32 host
    std::vector<std::string> written;      // the files written, in order
    Tensor decoded_frames, decoded_audio;  // outputs.return_media: [F, H, W, 3] u8 and [2, N] f32 (host)
    int frames = 0, width = 0, height = 0; // decoded video (0 when not decoded)
    int64_t audio_samples = 0;             // decoded audio per channel
    int sample_rate = 0;
    int keyframes = 0, references = 0; // conditions encoded
    // The ranks of this process that ran the encode stage (the conditioner, keyframe / reference encoders):
    // {0} on one rank and on rank 0 of a device group; empty on the group's other ranks, which receive its
    // outputs (pipeline/group_broadcast.h).
    std::vector<int> encode_ranks;
    int64_t conditioning_rows = 0, vision_rows = 0;
    cache::WorkReport work;
    std::vector<double> step_seconds;
    // Stage times (seconds): encode includes the keyframe / reference encoders (condition_seconds) and the
    // conditioner; denoise includes leasing the DiT; decode the video + audio decoders; mux the writers
    // after the audio decode (for an MP4: the frames still queued, the audio, the trailer — the part of the
    // mux on the critical path); mux_encode_seconds: the MP4 encoder thread's whole time, most of it
    // overlapped with the decode (pipeline/mp4_stream.h).
    double condition_seconds = 0, encode_seconds = 0, denoise_seconds = 0, setup_seconds = 0,
           decode_seconds = 0, mux_seconds = 0, mux_encode_seconds = 0;
    DenoiseParts denoise_parts; // the denoise stage's parts (generate_latents); the rest is around the call
    uint64_t peak_device_bytes = 0;                  // device buffers' high-water mark during the job
    std::map<std::string, uint64_t> component_loads; // the store's loads per component after the job
    std::string device, dtype;
    // Weight residency: the store's placement plan (and the budget planner's text), and the DiT's streamed
    // weights after the job (their placement and counters; empty when its blocks are plain resident).
    std::string placement, memory_plan, dit_weights;
    // Kernel provenance (ops/provenance.h): stage → op family → implementation → host calls, and the
    // fallbacks to slower paths than the job's settings asked for (each logged once as a warning).
    ops::ProvenanceRecord::Calls kernels;
    std::vector<ops::Fallback> fallbacks;
    // A job that ran in another process (a server's replica, engine/replica.h): the metrics as that process
    // computed them (metrics() returns them); null otherwise.
    nlohmann::json remote_metrics;

    // One schema for the CLI's --metrics file and the server's records: work.to_json() + task, stage seconds
    // (keyframe_seconds for fl2va, reference_seconds for ref2va), peak_device_memory_bytes, component_loads,
    // device, dtype, placement (+ memory_plan, dit_weights when set), encode_ranks, kernels, fallbacks.
    nlohmann::json metrics(Task task) const;
};

// What runs jobs: the Generator, or a stand-in in tests.
class JobRunner {
public:
    virtual ~JobRunner() = default;
    virtual Result<JobReport> run(const GenerationJob& job, const JobEvents& events) = 0;
    // Loads per component since start (what the runner's store counted).
    virtual std::map<std::string, uint64_t> component_loads() const = 0;
    // Called by a server's worker before it takes the next job: a runner over other processes (a replica)
    // restarts them here when one has ended, giving up (kCancelled) once `stop` says so (a shutdown).
    virtual Status prepare(const std::function<bool()>& stop) {
        (void)stop;
        return ok_status();
    }
    // What a server's /health reports of this runner (a replica's processes); null for the generator.
    virtual nlohmann::json status() const { return nullptr; }
};

class Generator final : public JobRunner {
public:
    // The store must outlive the generator. Reads the checkpoint's processor configs (small JSON files).
    // `group`: the communicators' options and the per-rank hook of jobs on the plan's device group.
    static Result<std::unique_ptr<Generator>> create(runtime::ModelStore& store, GroupOptions group = {});

    // Not reentrant: one job at a time.
    Result<JobReport> run(const GenerationJob& job, const JobEvents& events) override;
    // A warm-up (issue #45, no first-step penalty): the job's encode stage and the forwards of its denoise
    // that meet one-time work (DenoiseOptions::warm_up: the first, and VSA's first sparse one), at the job's
    // geometry, attention and precision; then, when job.outputs.return_media is set, the video and audio
    // decode of those latents (the decoders' GEMMs are timed on first use too), their frames only returned;
    // nothing is written (media targets and latents files are not allowed: the engine clears them). GEMM
    // algorithm choices, attention plans and (with keep_dit_workspace) the DiT's workspace then exist for
    // the jobs that follow. The report holds the forwards' step_seconds, work (one-time work per forward),
    // kernels and stage seconds.
    Result<JobReport> warm_up(const GenerationJob& job, const JobEvents& events);
    // true: the DiT keeps its workspace between jobs (DitForwardOptions::keep_workspace), so a job of the
    // last one's shape allocates nothing in its first forward; false (default): each job's is released.
    void set_keep_dit_workspace(bool on) { keep_dit_workspace_ = on; }
    std::map<std::string, uint64_t> component_loads() const override { return store_.load_counts(); }
    runtime::ModelStore& store() const { return store_; }

private:
    Generator(runtime::ModelStore& store, ProcessorConfigs processors, GroupOptions group)
        : store_(store), processors_(std::move(processors)), group_options_(std::move(group)) {}
    // The encode stage (rank 0's on a device group): what the denoise needs.
    Result<EncodedInputs> encode(const GenerationJob& job, const JobEvents& events, JobReport& report);
    // A kLoad event when `c` is not loaded (its lease is about to read it).
    void announce_load(runtime::Component c, double percent, const JobEvents& events) const;
    Result<JobReport> run_job(const GenerationJob& job, const JobEvents& events, bool warm_up);
    // Releases the DiT's kept workspace where the device lacks the room the video decode needs.
    Status make_room_for_decode(runtime::Component variant, const model::VideoVaeConfig& vae,
                                const Geometry& g, const Tensor& video_latents);
    runtime::ModelStore& store_;
    bool keep_dit_workspace_ = false;
    ProcessorConfigs processors_;
    GroupOptions group_options_;
};

} // namespace h3::pipeline
