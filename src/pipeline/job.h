// GenerationJob: one validated request, whatever front end it came from (h3-engine generate, the HTTP API, a
// binding). pipeline::JobBuilder (pipeline/job_builder.h) makes it from a plain struct of optional fields and
// checks it against the checkpoint; pipeline::Generator (pipeline/generator.h) runs it.
#pragma once

#include "cache/cache_spec.h"
#include "model/dit/dit_attention.h"
#include "pipeline/conditioner.h"
#include "pipeline/decode.h"
#include "pipeline/geometry.h"
#include "pipeline/job_lora.h"
#include "pipeline/keyframe_image.h"
#include "pipeline/references.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace h3::pipeline {

enum class Task { kT2va, kFl2va, kRef2va };
const char* task_name(Task t); // "t2va", "fl2va", "ref2va"
Result<Task> parse_task(const std::string& name);

// What a job writes. Empty paths are not written; a job writes at least one thing.
struct JobInput; // pipeline/job_builder.h

struct OutputRequest {
    std::string latents =
        {}; // safetensors: video_noise, video_latents [1,C,T,h,w], audio_noise, audio_latents
            // [2,C_a,A] (f32) with the request in its metadata (generate --save-latents)
    MediaTargets media = {};   // mp4 / wav / png_dir (the decoders run only for what is asked)
    bool return_media = false; // the decoded frames and waveform in the JobReport too (bindings)
    bool empty() const { return latents.empty() && media.empty() && !return_media; }
};

struct GenerationJob {
    Task task = Task::kT2va;
    // Conditioning: a prompt for the text encoder, or precomputed rows (prompt_embeds), or — testing only —
    // `random_prompt_rows` seeded rows of the checkpoint's text width.
    std::string prompt;
    std::optional<Conditioning> prompt_embeds;
    std::string prompt_embeds_source; // for messages and records
    int random_prompt_rows = 0;

    Geometry geometry; // resolved against the checkpoint's LatentSpec
    // fl2va: the keyframes on the canvas in packed order; ref2va: the normalized references in request order.
    // Shared (not copied) with the records of a queued job; the pixels are dropped once the job ran.
    std::shared_ptr<const PreparedKeyframes> keyframes;
    std::shared_ptr<const std::vector<NormalizedReference>> references;
    std::vector<std::string> keyframe_sources; // per keyframe: "first_frame: 640x480 png"
    std::vector<std::string>
        reference_sources; // per reference: "reference 1: video 640x360, 3.00 s, with audio"

    int steps = 50; // sigma grid points (terminal 0 included): steps − 1 forwards
    uint64_t seed = 0;
    bool seed_given = false; // false: the builder drew it (it is still reported)
    double video_shift = 0, audio_shift = 0;
    cache::CacheSpec cache; // none = lossless
    std::string quality;    // "" (not given), lossless or high: the preset `cache` came from

    OutputRequest outputs;

    JobAdapters adapters; // LoRA (run-time set or the store's merged one) and the few-step preset used
    // FastH3 (pipeline/job_attention.h): the 50 blocks' attention (dense or video sparse attention) and the
    // rung schedule of the checkpoint's fastvideo_inference.json (empty: the `steps` grid).
    model::AttentionChoice attention;
    std::vector<int> rungs;

    // What the checkpoint's h3_defaults.json filled in ("size 128x64, frames 107, num_inference_steps 30";
    // empty: nothing), and warnings for the user (a prompt outside the checkpoint's caption vocabulary).
    std::string checkpoint_defaults;
    std::vector<std::string> warnings;
    // The denoise's DiT FLOPs, and with a measured device rate (JobBuilderOptions::flops_per_second) the
    // seconds they take (pipeline/cost_estimate.h).
    double dit_flops = 0;
    std::optional<double> estimated_seconds;

    // The input the job was built from, its seed resolved (JobBuilderOptions::keep_source; else null): what
    // is sent to another process to build the same job there.
    std::shared_ptr<const JobInput> source;

    bool
    presents_images() const; // the conditioner sees keyframe or reference images (needs the vision tower)
};

} // namespace h3::pipeline
