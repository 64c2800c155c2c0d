// The one job builder: a plain struct of optional fields (what a front end received: CLI flags, an HTTP JSON
// body or multipart form, a binding's keyword arguments) → a validated GenerationJob. Field names are the
// video API's (prompt, size, seconds, num_inference_steps, seed, cache, quality, first_frame, last_frame,
// reference, attention, plus frames, aspect, prompt_embeds, random_prompt_embeds for the CLI). Every error is
// an invalid_argument whose message starts with the field name, and `field` receives that name; no front
// end's spelling (a CLI flag) appears in them — a front end maps field names to its own when it prints.
//
// check() is the part that needs no checkpoint (field syntax and ranges, exclusive fields, the prompt, the
// reference rules), for front ends that validate a request before opening the model; build() does all of it
// against a checkpoint's runtime::CheckpointInfo (geometry from its LatentSpec, the step cache against its
// DiT, the DiT a task needs, the conditioning width). A field the request leaves out takes the checkpoint's
// declared default (its h3_defaults.json: size, frames, num_inference_steps; runtime/checkpoint_defaults.h)
// before the release defaults; a prompt with words outside the checkpoint's declared caption vocabulary gets
// a warning in the job (it still runs).
#pragma once

#include "io/image_reader.h"
#include "pipeline/job.h"
#include "runtime/model_store.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace h3::pipeline {

struct JobInput {
    std::optional<std::string> task =
        {}; // t2va | fl2va | ref2va; by default from the keyframes / references given
    std::optional<std::string> prompt = {};
    std::optional<Conditioning> prompt_embeds = {};   // precomputed conditioner rows [L, text_dim] (+ tags)
    std::string prompt_embeds_source = {};            // where they came from (messages)
    std::optional<int64_t> random_prompt_embeds = {}; // testing: L seeded rows instead of a prompt
    std::optional<std::string> size = {};             // "WxH"
    std::optional<std::string> aspect = {};           // "W:H"
    std::optional<double> seconds = {};
    std::optional<int64_t> frames = {};
    std::optional<int64_t> num_inference_steps = {};
    std::optional<uint64_t> seed = {};                // absent: drawn from std::random_device
    std::optional<nlohmann::json> cache = {};         // a spec string or {"kind": {...}}
    std::optional<std::string> quality = {};          // lossless | high
    std::optional<io::DecodedImage> first_frame = {}; // fl2va keyframes, decoded
    std::optional<io::DecodedImage> last_frame = {};
    std::vector<ReferenceMedia> references = {}; // ref2va, request order, decoded
    OutputRequest outputs = {};                  // may be left empty and filled in before the run
    LoraJobInput adapters = {}; // lora, lora_mode, lora_strict, preset, video_shift, audio_shift (job_lora.h)
    // FastH3: dense | vsa[:sparsity=0.9,mode=exempt|compete,dense_layers=0/1,dense_first_n_steps=N];
    // absent: the checkpoint's fastvideo_inference.json for t2va / fl2va, else dense
    // (pipeline/job_attention.h)
    std::optional<std::string> attention = {};
};

// Documented aliases of the field names (what another front end calls a field: Python's and the CLI's
// `steps`): a wire front end accepts them and reports the canonical name in its errors and objects.
struct FieldAlias {
    const char* alias;
    const char* field;
};
inline constexpr FieldAlias kFieldAliases[] = {{"steps", "num_inference_steps"}};

// num_inference_steps when neither the request, a preset, a FastH3 contract nor h3_defaults.json gives it.
inline constexpr int kDefaultInferenceSteps = 50;

struct JobBuilderOptions {
    size_t max_prompt_bytes = 0;                 // 0: no limit
    int max_steps = runtime::kMaxInferenceSteps; // the one limit of every front end (benches may raise it)
    GeometryLimits geometry = {};
    // The reference resolutions (NormalizeOptions): the released model's 2048-px image short edge and 768-px
    // video canvas; smaller values are the reduced-cost mode.
    int reference_image_edge = kReferenceImageEdge;
    int reference_video_edge = kCanvasShortEdge;
    LoraResolver lora = {}; // where the lora field's adapters are resolved (pipeline/job_lora.h)
    // The device's measured arithmetic rate (pipeline::measure_gemm_rate); > 0: build() estimates each job's
    // seconds from its DiT FLOPs (GenerationJob::estimated_seconds).
    double flops_per_second = 0;
    // Whether build() checks the output paths and creates their folders (prepare_outputs); false where this
    // process writes nothing (a launched rank other than 0: rank 0 writes the group's outputs).
    bool prepare_outputs = true;
    // Whether build() keeps a copy of the input in GenerationJob::source (its seed resolved): a server
    // whose jobs run in other processes sends them the input (pipeline/job_input_bytes.h).
    bool keep_source = false;
};

class JobBuilder {
public:
    JobBuilder(runtime::CheckpointInfo info, JobBuilderOptions options = {});

    // The checks that need no checkpoint. An error names its field in Status::field (and in `field`).
    static Status check(const JobInput& input, const JobBuilderOptions& options,
                        std::string* field = nullptr);
    // The whole request against the checkpoint (errors as check()'s).
    Result<GenerationJob> build(JobInput input, std::string* field = nullptr) const;

    const runtime::CheckpointInfo& info() const { return info_; }
    const JobBuilderOptions& options() const { return options_; }

private:
    static Status check_fields(const JobInput& input, const JobBuilderOptions& options, std::string* field);
    Result<GenerationJob> build_job(JobInput input, std::string* field) const;
    runtime::CheckpointInfo info_;
    JobBuilderOptions options_;
};

// Every path `outputs` names, checked and made ready before any model loads (io/output_path.h: extension,
// not a folder where a file goes, missing parent folders created, writable): field "output" (the media
// target: .mp4, .wav or a PNG folder) and "save_latents" (the latents safetensors). build() calls it last, so
// a request that passes the builder can write what it asks for.
Status prepare_outputs(const OutputRequest& outputs, std::string* field = nullptr);

// "WxH" with whole positive pixel counts (field "size").
Status parse_size(const std::string& text, int& width, int& height);
// `cache` (a spec string or {"kind": {...}} JSON; null when absent) or `quality`, never both; neither gives
// the lossless default. Errors name the field.
Result<cache::CacheSpec> resolve_cache_choice(const nlohmann::json& cache, const std::string& quality,
                                              std::string* field = nullptr);
// The step cache against a DiT config and a schedule of `steps` grid points (field "cache").
Status check_cache(const cache::CacheSpec& spec, int steps, const model::DitConfig& config);

} // namespace h3::pipeline
