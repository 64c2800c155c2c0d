#include "api/engine.h"

#include "cache/step_cache.h"
#include "core/cuda_api.h"
#include "io/checkpoint.h"
#include "pipeline/decode.h"
#include "pipeline/fl2va.h"
#include "pipeline/generate.h"
#include "pipeline/ref2va.h"
#include "pipeline/text_conditioner.h"

#include <chrono>

namespace h3::api {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Percent bands of the stages.
constexpr double kEncodeEnd = 5, kDenoiseEnd = 90, kVideoDecodeEnd = 97, kDecodeEnd = 99;

} // namespace

const char* stage_name(Stage s) {
    switch (s) {
    case Stage::kEncode:
        return "encode";
    case Stage::kDenoise:
        return "denoise";
    case Stage::kDecode:
        return "decode";
    case Stage::kMux:
        return "mux";
    }
    return "unknown";
}

Status check_cache(const cache::CacheSpec& spec, int steps, const model::DitConfig& config) {
    cache::StepCacheSetup cs{.steps = steps - 1,
                             .num_layers = config.num_layers,
                             .teacache_coefficients = cache::teacache_coefficients_for(config)};
    auto probe = cache::make_step_cache(spec, cs);
    return probe.ok() ? ok_status() : probe.status();
}

Result<std::unique_ptr<Engine>> Engine::load(const EngineParams& params) {
    std::unique_ptr<Engine> e(new Engine());
    e->params_ = params;
    e->device_name_ = params.ctx.device.to_string();
    H3_ASSIGN_OR_RETURN(auto dir, io::discover_checkpoint(params.model_dir));
    e->video_shift_ = dir.video_shift.value_or(pipeline::kDefaultVideoShift);
    e->audio_shift_ = dir.audio_shift.value_or(pipeline::kDefaultAudioShift);
    if (!dir.find("vae") || !dir.find("audio_vae"))
        return bad_input("checkpoint " + params.model_dir + " lacks the vae/ and audio_vae/ decoders");
    H3_ASSIGN_OR_RETURN(auto ckpt, model::open_dit_checkpoint(params.model_dir));
    if (params.keep_text_encoder) {
        H3_ASSIGN_OR_RETURN(
            e->conditioner_,
            pipeline::make_prompt_conditioner(
                {.checkpoint_dir = params.model_dir, .ctx = params.ctx, .fp32 = params.fp32}));
    } else if (!pipeline::has_text_conditioner(params.model_dir)) {
        return bad_input("checkpoint " + params.model_dir + " has no text encoder + tokenizer");
    }
    model::DitLoadOptions lo{.device = params.ctx.device,
                             .precision =
                                 params.fp32 ? model::DitPrecision::kFp32 : model::DitPrecision::kBf16};
    H3_ASSIGN_OR_RETURN(e->dit_, model::DitModel::load(ckpt, lo, params.ctx));
    e->dit_component_ = "transformer";
    e->config_ = e->dit_->config();
    const io::Component* ref = dir.find("transformer_ref");
    e->has_ref_dit_ = ref && ref->has_weights;
    return e;
}

Result<const model::DitModel*> Engine::dit_for(const std::string& component) {
    if (dit_ && dit_component_ == component) return dit_.get();
    dit_.reset(); // never two DiTs resident
    dit_component_.clear();
    H3_ASSIGN_OR_RETURN(auto ckpt, model::open_dit_checkpoint(params_.model_dir, component));
    model::DitLoadOptions lo{.device = params_.ctx.device,
                             .precision =
                                 params_.fp32 ? model::DitPrecision::kFp32 : model::DitPrecision::kBf16};
    if (ckpt.config.num_layers != config_.num_layers || ckpt.config.inner_dim() != config_.inner_dim() ||
        ckpt.config.text_dim != config_.text_dim)
        return bad_input("checkpoint " + params_.model_dir + ": " + component +
                         "/ has a different config from transformer/ (they must be identical)");
    H3_ASSIGN_OR_RETURN(dit_, model::DitModel::load(ckpt, lo, params_.ctx));
    dit_component_ = component;
    return dit_.get();
}

Engine::~Engine() = default;

const model::DitConfig& Engine::config() const {
    return config_;
}

Status Engine::check(const VideoRequest& request) const {
    if (request.references && !has_ref_dit_)
        return invalid_argument("reference: checkpoint " + params_.model_dir +
                                " has no transformer_ref/ (the Ref2VA DiT that ref2va requests run on)");
    Status s = check_cache(request.generation.cache, request.generation.steps, config_);
    if (s.ok() || s.message().rfind("cache", 0) == 0) return s;
    return Status(s.code(), "cache: " + s.message());
}

Result<pipeline::Conditioning> Engine::condition(const VideoRequest& request,
                                                 std::vector<pipeline::ConditionerImage> images,
                                                 std::vector<pipeline::ConditionerReference> references,
                                                 const JobOptions& options) {
    std::unique_ptr<pipeline::Conditioner> per_job;
    pipeline::Conditioner* c = conditioner_.get();
    if (!c) {
        H3_ASSIGN_OR_RETURN(
            per_job, pipeline::make_prompt_conditioner(
                         {.checkpoint_dir = params_.model_dir, .ctx = params_.ctx, .fp32 = params_.fp32}));
        c = per_job.get();
    }
    pipeline::ConditionerRequest creq;
    creq.prompt = request.prompt;
    creq.images = std::move(images);
    creq.references = std::move(references);
    pipeline::ConditionerOptions copt;
    copt.cancel = options.cancel;
    if (options.progress)
        copt.progress = [&](const pipeline::ConditionerProgress& p) {
            const double f = p.total > 0 ? static_cast<double>(p.done) / p.total : 0.0;
            options.progress({.stage = Stage::kEncode, .percent = kEncodeEnd * std::min(f, 1.0)});
        };
    return c->encode(creq, copt);
}

Result<JobResult> Engine::run(const VideoRequest& request, const JobOutputs& outputs,
                              const JobOptions& options) {
    const auto report = [&](const JobProgress& p) {
        if (options.progress) options.progress(p);
    };
    if (request.output_format == OutputFormat::kMp4 && outputs.video_path.empty())
        return invalid_argument("engine: an mp4 job needs a video path");
    if (outputs.audio_path.empty()) return invalid_argument("engine: a job needs an audio path");
    H3_TRY(check(request));
    // the caller's thread (the server's worker) is not the one that made the context
    if (params_.ctx.device.is_cuda()) H3_TRY(cuda::set_device(params_.ctx.device.index));
    JobResult r;

    // ---- encode
    report({.stage = Stage::kEncode, .percent = 0});
    auto t0 = std::chrono::steady_clock::now();
    pipeline::GenerationRequest rq = request.generation;
    std::vector<pipeline::ConditionerImage> images;
    if (request.keyframes) {
        H3_ASSIGN_OR_RETURN(pipeline::Fl2vaInputs fl2va,
                            pipeline::prepare_fl2va(params_.ctx, params_.model_dir, *request.keyframes,
                                                    {.cancel = options.cancel}));
        rq.keyframes = std::move(fl2va.keyframes);
        images = std::move(fl2va.images);
        r.keyframe_seconds = fl2va.encode_seconds;
    }
    std::vector<pipeline::ConditionerReference> refs;
    if (request.references) {
        H3_ASSIGN_OR_RETURN(pipeline::Ref2vaInputs ref2va,
                            pipeline::prepare_ref2va(params_.ctx, params_.model_dir, *request.references,
                                                     {.cancel = options.cancel}));
        rq.references = std::move(ref2va.references);
        refs = std::move(ref2va.conditioner);
        r.keyframe_seconds = ref2va.encode_seconds;
    }
    H3_ASSIGN_OR_RETURN(pipeline::Conditioning cond,
                        condition(request, std::move(images), std::move(refs), options));
    r.encode_seconds = seconds_since(t0);

    // ---- denoise
    rq.video_shift = video_shift_;
    rq.audio_shift = audio_shift_;
    pipeline::DenoiseOptions dopt;
    dopt.cancel = options.cancel;
    bool fault_fired = false;
    const bool inject = !options.fault_prompt.empty() && request.prompt == options.fault_prompt;
    dopt.progress = [&](const pipeline::StepProgress& p) {
        if (inject && !fault_fired) {
            fault_fired = true;
            if (options.cancel) options.cancel->store(true); // stop the loop like a failing allocation would
        }
        const double f = p.total > 0 ? static_cast<double>(p.step) / p.total : 1.0;
        report({.stage = Stage::kDenoise,
                .percent = kEncodeEnd + (kDenoiseEnd - kEncodeEnd) * f,
                .step = p.step,
                .total = p.total});
    };
    report({.stage = Stage::kDenoise, .percent = kEncodeEnd, .step = 0, .total = rq.steps - 1});
    t0 = std::chrono::steady_clock::now();
    H3_ASSIGN_OR_RETURN(const model::DitModel* dit,
                        dit_for(request.references ? "transformer_ref" : "transformer"));
    Result<pipeline::GenerationOutput> out = pipeline::generate_latents(*dit, cond, rq, dopt);
    if (fault_fired)
        return out_of_memory("injected fault: simulated out of device memory after denoise step 1");
    if (!out.ok()) return out.status();
    r.denoise_seconds = seconds_since(t0);
    r.geometry = out->geometry;
    r.work = out->work;

    // ---- decode + mux
    if (options.cancel && options.cancel->load()) return cancelled("cancelled before decoding");
    pipeline::DecodeOptions decode;
    decode.cancel = options.cancel; // checked inside the decoders and the muxer
    decode.on_stage = [&](pipeline::DecodeStage s) {
        if (s == pipeline::DecodeStage::kVideo) report({.stage = Stage::kDecode, .percent = kDenoiseEnd});
        if (s == pipeline::DecodeStage::kAudio)
            report({.stage = Stage::kDecode,
                    .percent = request.output_format == OutputFormat::kMp4 ? kVideoDecodeEnd : kDenoiseEnd});
        if (s == pipeline::DecodeStage::kWrite) report({.stage = Stage::kMux, .percent = kDecodeEnd});
    };
    Tensor no_video;
    const bool mp4 = request.output_format == OutputFormat::kMp4;
    if (mp4) decode.audio_wav = outputs.audio_path;
    H3_ASSIGN_OR_RETURN(pipeline::DecodeReport d,
                        pipeline::decode_to_file(params_.ctx, params_.model_dir,
                                                 mp4 ? out->video_latents : no_video, out->audio_latents,
                                                 mp4 ? outputs.video_path : outputs.audio_path, decode));
    r.decode_seconds = d.video_decode_seconds + d.audio_decode_seconds;
    r.mux_seconds = d.write_seconds;
    report({.stage = Stage::kMux, .percent = 100});

    r.metrics = r.work.to_json();
    r.metrics["encode_seconds"] = r.encode_seconds;
    if (request.keyframes) r.metrics["keyframe_seconds"] = r.keyframe_seconds;
    if (request.references) r.metrics["reference_seconds"] = r.keyframe_seconds;
    r.metrics["decode_seconds"] = r.decode_seconds;
    r.metrics["mux_seconds"] = r.mux_seconds;
    r.metrics["device"] = device_name_;
    r.metrics["dtype"] = params_.fp32 ? "fp32" : "bf16";
    return r;
}

} // namespace h3::api
