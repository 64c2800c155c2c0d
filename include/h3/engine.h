// h3::Engine — the public C++ API of h3-engine (MiniMax-H3 video+audio generation). Every front end (the
// `h3-engine generate` and `serve` commands, the benches that run requests, the h3engine Python module) is a
// translator onto it: its options become an EngineOptions, its request a JobRequest (or, for front ends that
// hold decoded uploads, the internal job input), and it prints what run() reports.
//
//   auto engine = h3::Engine::open({.checkpoint = "H3-tiny", .device = "cpu"});   // reads configs only
//   auto job = (*engine)->build({.prompt = "a fox", .size = "64x32", .frames = 22, .output = "a.mp4"});
//   auto report = (*engine)->run(*job);                                             // loads, runs, writes
//
// Errors are h3::Status (h3/status.h) with Status::field() the option or request field they are about
// (the same names as the HTTP API's fields and these structs' members). This header and h3/status.h are all
// a program needs; link libh3_engine (installed with `cmake --install`).
#pragma once

#include <h3/defaults.h>
#include <h3/status.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace h3 {

// One LoRA adapter: a file (or, with EngineOptions::lora_dir, a name inside that folder) and its strength
// (0 leaves it out).
struct LoraOption {
    std::string path;
    double scale = 1.0;
};

// Everything about how a checkpoint runs: the one place the engine's defaults live.
struct EngineOptions {
    // ---- model & device
    std::string checkpoint;         // checkpoint root (either layout) or a transformer folder
    std::string device = "cpu";     // cpu | cuda | cuda:N
    std::string dtype = "bf16";     // bf16 | fp32 | fp16 (GPUs without bf16: fp32 residual stream)
    std::string precision = "bf16"; // bf16 | fp8 (DiT GEMMs and attention in e4m3; with dtype bf16)
    // auto | exact | bf16 | fp8: the video decoder's blocks as the reference (f16 blocks on CUDA), in bf16
    // (GEMMs and attention), or with their GEMMs in e4m3 (bf16 and fp8: lossy, faster); auto follows the
    // DiT: fp8 under precision fp8, exact otherwise
    std::string vae_precision = "auto";

    // ---- memory
    std::string residency;         // "" (resident, or the planner's) | resident | layerwise
    int resident_blocks = -1;      // layerwise: DiT blocks kept on the device (-1: 0, or the planner's)
    std::string weight_dtype;      // "" (bf16) | bf16 | int8 (W8A16) | auto (int8 where the budget needs it)
    bool host_pinning = true;      // page-lock the host masters of streamed weights
    std::string gpu_memory_budget; // "" | "24GiB": the planner picks resident / layerwise(K) / int8 to fit
    std::string int8_cache;        // folder for quantized int8 masters ("": quantize at every load)
    // false: every component is loaded for the job that needs it and released after (the weights' placement
    // is re-planned per job under a budget); true (a server): the DiT and decoders stay loaded between jobs.
    bool keep_loaded = false;
    bool keep_text_encoder = false; // with keep_loaded: the text stack stays loaded too
    // The DiT keeps its workspace (residual stream, block scratch, staging) between jobs while it stays
    // loaded, so a job of the last one's shape allocates nothing in its first forward; false: each job's is
    // released when its denoise ends (less memory held between jobs).
    bool keep_dit_workspace = true;

    // ---- multi-GPU: the DiT's device group (sp Ulysses x ring x tp ranks; threads of this process)
    int sp = 1, tp = 1, ring = 1;
    std::vector<int> gpus; // one CUDA device per rank (empty: every rank on `device`)

    // ---- LoRA
    std::vector<LoraOption> lora;       // adapters every job applies unless it names its own
    std::string lora_mode = "runtime";  // runtime (added after each projection) | merged (folded in at load)
    std::string lora_dir;               // folder jobs may name adapters in ("": jobs name files)
    bool lora_strict = false;           // adapter keys that name no adapted projection are an error
    std::string lora_qkv_rows = "auto"; // fused qkv rows: auto | stacked | per-head
    uint64_t lora_cache_bytes = uint64_t{8192} << 20; // device bytes of cached adapter sets (LRU)

    // ---- acceleration: the jobs' defaults (a job's own field wins)
    std::string attention; // "": the checkpoint's fastvideo_inference.json, else dense
    std::string cache;     // "": none (lossless)

    // ---- limits and the reference resolutions
    size_t max_prompt_bytes = 0;  // 0: no limit
    int max_steps = 1000;         // num_inference_steps at most (runtime::kMaxInferenceSteps)
    int reference_image_edge = 0; // ref2va image short edge (0: the checkpoint's h3_defaults.json, else
                                  // kReferenceImageEdge, the model's; smaller: reduced cost)
    int reference_video_edge = kCanvasShortEdge; // ref2va video canvas short edge (the model's)
};

// One generation request. Absent fields take the engine's or the checkpoint's defaults. Names are the HTTP
// API's (num_inference_steps, first_frame, reference, ...).
struct JobRequest {
    std::optional<std::string> task; // t2va | fl2va | ref2va (default: from the inputs)
    std::optional<std::string> prompt;
    std::optional<std::string> prompt_embeds;    // safetensors of precomputed conditioner rows
    std::optional<int64_t> random_prompt_embeds; // testing: L seeded rows instead of a prompt
    std::optional<std::string> size;             // "WxH"
    std::optional<std::string> aspect;           // "W:H"
    std::optional<double> seconds;
    std::optional<int64_t> frames;
    std::optional<int64_t> num_inference_steps;
    std::optional<uint64_t> seed;         // absent: drawn (reported)
    std::optional<std::string> cache;     // step cache spec (teacache, dbcache:..., velocity:...)
    std::optional<std::string> quality;   // lossless | high
    std::optional<std::string> attention; // dense | vsa[:...]
    std::optional<std::string> first_frame, last_frame; // fl2va keyframe image files
    std::vector<std::string> reference;                 // ref2va: [image:|video:|audio:]FILE, in order
    std::optional<std::vector<LoraOption>> lora;        // absent: the engine's adapters
    std::optional<bool> lora_strict;
    std::optional<std::string> preset; // few-step schedule of a Turbo LoRA
    std::optional<double> video_shift, audio_shift;
    std::string output;        // media file to write (.mp4, .wav, or a folder for PNG frames)
    std::string save_latents;  // safetensors of the noise and the final latents
    bool return_media = false; // the decoded frames and waveform in the JobReport
};

// A validated request (Engine::build): the geometry and schedule it resolved to. Cheap to copy.
class Job {
public:
    std::string task() const;
    int width() const;
    int height() const;
    int frames() const;
    double fps() const;
    int steps() const;
    uint64_t seed() const;
    std::string describe() const; // "64x32, 22 frames (...), 2 steps, seed 7, cache none, attention dense"

    struct Impl;
    explicit Job(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
    const Impl& impl() const { return *impl_; }

private:
    std::shared_ptr<const Impl> impl_;
};

struct Progress {
    std::string stage;       // encode | denoise | decode | mux
    double percent = 0;      // encode 0-5, denoise 5-90, decode 90-99, mux 99-100
    int step = 0, total = 0; // denoise: steps finished / forwards
    double step_seconds = 0, elapsed_seconds = 0, eta_seconds = 0;
};

struct JobEvents {
    std::function<void(const Progress&)> progress; // called from the running thread
    const std::atomic<bool>* cancel = nullptr;     // set to cancel: run() returns ErrorCode::kCancelled
};

struct JobReport {
    std::string task;
    int width = 0, height = 0, frames = 0; // the job's geometry
    double fps = 0;
    int steps = 0;
    uint64_t seed = 0;
    std::vector<std::string> written; // files written, in order
    std::vector<uint8_t> video;       // return_media: RGB [frames, height, width, 3]
    std::vector<float> audio;         // return_media: planar stereo [2, audio_samples]
    int64_t audio_samples = 0;        // decoded audio per channel (0: not decoded)
    int sample_rate = 0;
    std::vector<double> step_seconds; // per forward
    double setup_seconds = 0, encode_seconds = 0, denoise_seconds = 0, decode_seconds = 0, mux_seconds = 0;
    uint64_t peak_device_bytes = 0;
    std::string placement, memory_plan; // where the weights were (and the budget planner's text)
    std::string metrics_json;           // generate --metrics / the server's metrics (one schema)
};

// What Engine::warm_up did: its seconds, the forwards it ran and their one-time work (metrics_json: the job
// metrics' schema; "work.first_forward" / "work.per_step[i].one_time" hold the GEMM tunings, attention
// plans, workspace allocations and graph recordings).
struct WarmUpReport {
    double seconds = 0;               // the whole warm-up
    double encode_seconds = 0;        // the request's conditioning (the text encoder, unless random rows)
    std::vector<double> step_seconds; // per forward run
    std::string metrics_json;
};

struct EngineInfo {
    std::string checkpoint, device, dtype; // dtype: the DiTs' arithmetic (bf16, fp32, fp8, fp16)
    std::string placement, memory_plan;    // the current plan
    bool fasth3 = false;                   // a FastH3 checkpoint (its sidecar sets the jobs' defaults)
    int parallel_world = 1;                // DiT ranks
    std::vector<std::string> components;   // present: transformer, transformer_ref, text_encoder, ...
    std::map<std::string, uint64_t> component_loads;
};

class Engine {
public:
    // The options alone, without reading anything (values, ranges, combinations). Errors name the option.
    static Status check(const EngineOptions& options);
    // A request's fields without a checkpoint and without reading the files it names.
    static Status check(const JobRequest& request, const EngineOptions& options = {});
    // Reads and checks the files a request names (keyframes, references, prompt embeddings) without a
    // checkpoint, with the rules that need their contents (references), so a bad file is reported before any
    // model work; build() reads them again.
    static Status check_files(const JobRequest& request, const EngineOptions& options = {});
    // Checks the options, reads the checkpoint's configs and prepares the placement; loads weights only
    // for what keep_loaded keeps.
    static Result<std::unique_ptr<Engine>> open(EngineOptions options);
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    // The request against the checkpoint (reads the images and references it names).
    Result<Job> build(const JobRequest& request) const;
    // Runs one job (one at a time per engine): encode, denoise, decode, write. Under a memory budget with
    // keep_loaded off, the weights' placement is re-planned for this job before any weight moves.
    Result<JobReport> run(const Job& job, const JobEvents& events = {});
    // Runs the one-time work of jobs like `request` once, so that the first forward of the next such job
    // costs what its others do (issue #45): the request's conditioning and the DiT forwards that meet new
    // work (the first; with VSA after dense steps, also the first sparse one) at its geometry, attention and
    // precision — GEMM algorithms timed, attention plans built, the DiT's workspace allocated and kept
    // (keep_dit_workspace) —, then the video and audio decode of those latents (the decoders' GEMMs are timed
    // on first use too) unless the request asks for latents only (save_latents alone). Nothing is written:
    // the request's output and save_latents are not needed and ignored.
    // The conditioning rows must match the later jobs' for their GEMM shapes to match: give the same prompt
    // (or random_prompt_embeds of its row count).
    Result<WarmUpReport> warm_up(const JobRequest& request, const JobEvents& events = {});

    EngineInfo info() const;
    const EngineOptions& options() const;

    struct Impl;
    Impl& impl() { return *impl_; }
    const Impl& impl() const { return *impl_; }

private:
    explicit Engine(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

} // namespace h3
