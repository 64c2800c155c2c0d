#include "pipeline/generator.h"

#include "pipeline/decode_group.h"
#include "pipeline/generate_group.h"

#include "core/cuda_api.h"
#include "core/torch_generator.h"
#include "io/safetensors.h"
#include "ops/cancel.h"
#include "ops/provenance.h"
#include "pipeline/fl2va.h"
#include "pipeline/generate.h"
#include "pipeline/mp4_stream.h"
#include "pipeline/provenance_json.h"
#include "pipeline/ref2va.h"
#include "runtime/component_sizes.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string_view>

namespace h3::pipeline {

namespace {

using runtime::Component;

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Chunks [n_i, H, W, 3] (host u8) as one tensor.
Result<Tensor> join_frames(const std::vector<Tensor>& chunks) {
    int64_t n = 0;
    for (const Tensor& c : chunks) n += c.dim(0);
    const Tensor& first = chunks.front();
    H3_ASSIGN_OR_RETURN(Tensor all, Tensor::empty(Shape{n, first.dim(1), first.dim(2), 3}, DType::kU8));
    uint8_t* d = all.data_as<uint8_t>();
    for (const Tensor& c : chunks) {
        std::memcpy(d, c.data(), c.nbytes());
        d += c.nbytes();
    }
    return all;
}

// Percent bands of the stages.
constexpr double kEncodeEnd = 5, kDenoiseEnd = 90, kVideoDecodeEnd = 97, kDecodeEnd = 99;

// `rows` seeded conditioner rows of the checkpoint's width (testing), rounded like a bf16 conditioner's.
Conditioning random_conditioning(int64_t rows, int text_dim, uint64_t seed) {
    Conditioning c;
    c.embeddings = Tensor::host(Shape{rows, text_dim}, DType::kF32);
    TorchGenerator g(seed ^ 0x9e3779b97f4a7c15ull);
    float* p = c.embeddings.data_as<float>();
    g.randn(p, static_cast<size_t>(c.embeddings.numel()));
    for (int64_t i = 0; i < c.embeddings.numel(); ++i) p[i] = round_bf16(p[i]);
    c.tags.assign(static_cast<size_t>(rows), kTagText);
    return c;
}

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
    case Stage::kLoad:
        return "load";
    }
    return "unknown";
}

nlohmann::json JobReport::metrics(Task task) const {
    if (!remote_metrics.is_null()) return remote_metrics;
    nlohmann::json j = work.to_json();
    j["task"] = task_name(task);
    if (task == Task::kFl2va) j["keyframe_seconds"] = condition_seconds;
    if (task == Task::kRef2va) j["reference_seconds"] = condition_seconds;
    j["encode_seconds"] = encode_seconds;
    j["denoise_seconds"] = denoise_seconds;
    j["setup_seconds"] = setup_seconds;
    j["denoise_parts"] = {{"noise_and_layout_seconds", denoise_parts.noise_and_layout},
                          {"setup_seconds", denoise_parts.setup},
                          {"steps_seconds", denoise_parts.steps},
                          {"loop_outside_steps_seconds", denoise_parts.loop_outside_steps},
                          {"to_host_seconds", denoise_parts.to_host},
                          {"unpatchify_seconds", denoise_parts.unpatchify},
                          {"around_seconds", denoise_parts.around(denoise_seconds)}};
    j["decode_seconds"] = decode_seconds;
    j["mux_seconds"] = mux_seconds;
    j["mux_encode_seconds"] = mux_encode_seconds;
    j["peak_device_memory_bytes"] = peak_device_bytes;
    j["component_loads"] = component_loads;
    j["device"] = device;
    j["dtype"] = dtype;
    j["placement"] = placement;
    j["encode_ranks"] = encode_ranks;
    if (!memory_plan.empty()) j["memory_plan"] = memory_plan;
    if (!dit_weights.empty()) j["dit_weights"] = dit_weights;
    j["kernels"] = kernels_json(kernels);
    j["fallbacks"] = fallbacks_json(fallbacks);
    return j;
}

// The run-time adapters the denoiser applies (null: none), after checking the job's adapters against the
// store's merged ones: a merged store serves only jobs that name exactly its adapters.
static Result<const model::LoraSet*> job_lora_set(const GenerationJob& job,
                                                  const runtime::ModelStore& store) {
    const JobAdapters& a = job.adapters;
    const bool merged = a.mode == LoraMode::kMerged && !a.empty();
    if ((merged ? a.names() : std::vector<std::string>()) != store.merged_adapters())
        return invalid_argument("lora: the job's merged adapters differ from those merged into the model "
                                "store's DiT (they are fixed when it loads)");
    if (merged || a.empty()) return static_cast<const model::LoraSet*>(nullptr);
    if (!a.set) return invalid_argument("lora: the job's run-time adapters were not resolved by the builder");
    return a.set.get();
}

void Generator::announce_load(Component c, double percent, const JobEvents& ev) const {
    if (ev.progress && !store_.loaded(c))
        ev.progress({.stage = Stage::kLoad, .percent = percent, .component = runtime::component_name(c)});
}

Result<std::unique_ptr<Generator>> Generator::create(runtime::ModelStore& store, GroupOptions group) {
    ProcessorConfigs processors;
    if (store.info().has(Component::kVisionTower)) {
        H3_ASSIGN_OR_RETURN(processors, load_processor_configs(store.info().root));
    }
    return std::unique_ptr<Generator>(new Generator(store, std::move(processors), std::move(group)));
}

// The encode stage: keyframe / reference encoders, then the conditioner (or the job's precomputed rows).
Result<EncodedInputs> Generator::encode(const GenerationJob& job, const JobEvents& ev, JobReport& r) {
    const auto report = [&](const JobProgress& p) {
        if (ev.progress) ev.progress(p);
    };
    const auto loading = [&](Component c) { announce_load(c, 0, ev); };
    const ops::Context& ctx = store_.context();
    const auto t0 = std::chrono::steady_clock::now();
    EncodedInputs in;
    std::vector<ConditionerImage> images;
    std::vector<ConditionerReference> references;
    if (job.task == Task::kFl2va) {
        loading(Component::kVideoEncoder);
        H3_ASSIGN_OR_RETURN(auto encoder, store_.video_encoder());
        report({.stage = Stage::kEncode, .percent = 0, .part = "keyframes"});
        H3_ASSIGN_OR_RETURN(Fl2vaInputs fl,
                            prepare_fl2va(ctx, *encoder, *job.keyframes, {.cancel = ev.cancel}));
        in.keyframes = std::move(fl.keyframes);
        images = std::move(fl.images);
    }
    if (job.task == Task::kRef2va) {
        const Ref2vaNeeds needs = ref2va_needs(*job.references);
        runtime::Lease<model::VideoVaeEncoder> video;
        runtime::Lease<model::AudioVaeEncoder> audio;
        if (needs.video_encoder) {
            loading(Component::kVideoEncoder);
            H3_ASSIGN_OR_RETURN(video, store_.video_encoder());
        }
        if (needs.audio_encoder) {
            loading(Component::kAudioEncoder);
            H3_ASSIGN_OR_RETURN(audio, store_.audio_encoder());
        }
        Ref2vaOptions ropt;
        ropt.spec = store_.spec();
        ropt.cancel = ev.cancel;
        ropt.started = [&](const char* encoder) {
            report({.stage = Stage::kEncode,
                    .percent = 0,
                    .part = std::string_view(encoder) == "audio" ? "reference audio" : "reference video"});
        };
        H3_ASSIGN_OR_RETURN(
            Ref2vaInputs ref,
            prepare_ref2va(ctx, {.video = video.get(), .audio = audio.get()}, *job.references, ropt));
        in.references = std::move(ref.references);
        references = std::move(ref.conditioner);
    }
    r.condition_seconds = seconds_since(t0);

    Conditioning& cond = in.conditioning;
    if (job.random_prompt_rows > 0) {
        cond = random_conditioning(job.random_prompt_rows, store_.spec().text_dim, job.seed);
    } else if (job.prompt_embeds) {
        cond = *job.prompt_embeds;
    } else {
        loading(Component::kTextEncoder);
        H3_ASSIGN_OR_RETURN(auto text, store_.text_encoder());
        runtime::Lease<model::VisionModel> vision;
        if (job.presents_images()) {
            loading(Component::kVisionTower);
            H3_ASSIGN_OR_RETURN(vision, store_.vision_tower());
        }
        H3_ASSIGN_OR_RETURN(auto conditioner, TextConditioner::over(*text, vision.get(), processors_));
        ConditionerRequest creq;
        creq.prompt = job.prompt;
        creq.images = std::move(images);
        creq.references = std::move(references);
        ConditionerOptions copt;
        copt.cancel = ev.cancel;
        if (ev.progress)
            copt.progress = [&](const ConditionerProgress& p) {
                const double f = p.total > 0 ? static_cast<double>(p.done) / p.total : 0.0;
                report({.stage = Stage::kEncode,
                        .percent = kEncodeEnd * std::min(f, 1.0),
                        .part = p.stage == "vision" ? "vision" : "text"});
            };
        H3_ASSIGN_OR_RETURN(cond, conditioner->encode(creq, copt));
    }
    return in;
}

// The DiT's kept workspace (keep_dit_workspace) is a cache for the next job's first forward: where the device
// has less free memory than the video decode needs (the planner's estimate for this canvas, with a quarter
// more), it gives way before the decoder allocates. Per-job placements released it with the DiT already.
Status Generator::make_room_for_decode(Component variant, const model::VideoVaeConfig& vae, const Geometry& g,
                                       const Tensor& video_latents) {
    const ops::Context& ctx = store_.context();
    if (!keep_dit_workspace_ || !ctx.device.is_cuda() || !store_.loaded(variant)) return ok_status();
    auto info = cuda::memory_info(ctx.device.index);
    if (!info.ok()) return ok_status(); // no figure: leave it (the decode reports a failed allocation)
    const uint64_t need =
        runtime::video_decoder_working_bytes(vae, g.width, g.height, video_latents.dim(2)) / 4 * 5;
    if (info->free_bytes >= need) return ok_status();
    H3_ASSIGN_OR_RETURN(auto dit, store_.dit(variant));
    dit->workspace_keeper().release();
    return ok_status();
}

Result<JobReport> Generator::run(const GenerationJob& job, const JobEvents& ev) {
    return run_job(job, ev, false);
}

Result<JobReport> Generator::warm_up(const GenerationJob& job, const JobEvents& ev) {
    if (!job.outputs.latents.empty() || !job.outputs.media.empty())
        return invalid_argument("warm-up: the job names files to write; a warm-up writes none (clear "
                                "outputs; return_media asks for the decode)");
    return run_job(job, ev, true);
}

Result<JobReport> Generator::run_job(const GenerationJob& job, const JobEvents& ev, bool warm_up) {
    const auto report = [&](const JobProgress& p) {
        if (ev.progress) ev.progress(p);
    };
    const auto cancel_requested = [&] { return ev.cancel && ev.cancel->load(); };
    // every op of the job reads the flag between its blocks of work (ops/cancel.h), not only the stages
    const ops::CancelScope cancel_scope(ev.cancel);
    // and every op notes the implementation it ran into the job's record (ops/provenance.h)
    ops::ProvenanceRecord provenance;
    const ops::ProvenanceScope provenance_scope(&provenance);
    const auto take_provenance = [&](JobReport& rep) {
        rep.kernels = provenance.calls();
        rep.fallbacks = provenance.fallbacks();
    };
    if (job.outputs.empty() && !warm_up)
        return invalid_argument("outputs: the job writes neither latents nor media");
    if (!(job.geometry.spec == store_.spec()))
        return invalid_argument("the job was built for another latent spec (" + job.geometry.spec.describe() +
                                ") than the checkpoint's (" + store_.spec().describe() + ")");
    H3_TRY(
        store_.session().make_current()); // the caller's thread (a server's worker) did not open the device
    const ops::Context& ctx = store_.context();
    reset_device_memory_peak();
    JobReport r;
    r.geometry = job.geometry;
    r.device = store_.info().device;
    r.dtype = store_.info().dtype;
    r.placement = store_.plan().describe();
    r.memory_plan = store_.plan().memory_plan;

    // ---- encode: the keyframes / references, then the conditioning (on a device group: rank 0 only, the
    // others receive what the denoise needs through the world communicator)
    report({.stage = Stage::kEncode, .percent = 0});
    provenance.set_stage("encode");
    auto t0 = std::chrono::steady_clock::now();
    GenerationRequest rq;
    rq.geometry = job.geometry;
    rq.steps = job.steps;
    rq.seed = job.seed;
    rq.video_shift = job.video_shift;
    rq.audio_shift = job.audio_shift;
    rq.cache = job.cache;
    rq.rungs = job.rungs;         // FastH3: the sidecar's rung schedule (empty: the steps grid)
    rq.attention = job.attention; // dense or FastH3's video sparse attention
    const runtime::ParallelPlan& parallel = store_.plan().parallel;
    std::unique_ptr<runtime::DeviceGroup> group; // the job's ranks, for every stage; aborted ones die with it
    std::vector<EncodedInputs> inputs(1);
    if (parallel.active()) {
        H3_TRY(check_group_device(parallel, ctx.device)); // before any rank or communicator exists
        H3_ASSIGN_OR_RETURN(group, runtime::DeviceGroup::create(parallel, ctx, group_options_.comm));
        inputs.assign(static_cast<size_t>(group->size()), EncodedInputs{});
        std::mutex m;
        H3_TRY(group->run_spmd([&](runtime::DeviceGroup::Rank& rank) -> Status {
            EncodedInputs& in = inputs[static_cast<size_t>(rank.local)];
            if (rank.rank == 0) {
                H3_TRY(store_.session().make_current());
                H3_ASSIGN_OR_RETURN(in, encode(job, ev, r));
                std::lock_guard<std::mutex> lk(m);
                r.encode_ranks.push_back(rank.rank);
            }
            return broadcast_encoded_inputs(rank.ctx, *rank.world, in);
        }));
    } else {
        H3_ASSIGN_OR_RETURN(inputs[0], encode(job, ev, r));
        r.encode_ranks.push_back(0);
    }
    const EncodedInputs& mine = inputs[0];
    r.keyframes = static_cast<int>(mine.keyframes.size());
    r.references = static_cast<int>(mine.references.size());
    r.conditioning_rows = mine.conditioning.rows();
    for (int32_t t : mine.conditioning.tags) r.vision_rows += t == kTagVideo;
    r.encode_seconds = seconds_since(t0);
    if (cancel_requested()) return cancelled("cancelled before denoising");

    // ---- denoise on the task's DiT
    const Component variant =
        job.task == Task::kRef2va ? Component::kTransformerRef : Component::kTransformer;
    announce_load(variant, kEncodeEnd, ev);
    report({.stage = Stage::kDenoise, .percent = kEncodeEnd, .step = 0, .total = job.steps - 1});
    provenance.set_stage("denoise");
    t0 = std::chrono::steady_clock::now();
    GenerationOutput out;
    {
        H3_ASSIGN_OR_RETURN(auto dit, store_.dit(variant));
        DenoiseOptions dopt;
        dopt.cancel = ev.cancel;
        dopt.keep_workspace = keep_dit_workspace_;
        dopt.warm_up = warm_up;
        H3_ASSIGN_OR_RETURN(dopt.lora, job_lora_set(job, store_));
        dopt.progress = [&](const StepProgress& p) {
            const double f = p.total > 0 ? static_cast<double>(p.step) / p.total : 1.0;
            report({.stage = Stage::kDenoise,
                    .percent = kEncodeEnd + (kDenoiseEnd - kEncodeEnd) * f,
                    .step = p.step,
                    .total = p.total,
                    .step_seconds = p.step_seconds,
                    .elapsed_seconds = p.elapsed_seconds,
                    .eta_seconds = p.eta_seconds});
        };
        // One rank, or the plan's device group (every rank runs the loop; rank 0 reports progress).
        if (group) {
            H3_ASSIGN_OR_RETURN(out,
                                generate_latents_on_group(*group, *dit, inputs, rq, dopt, group_options_));
        } else {
            rq.keyframes = mine.keyframes;
            rq.references = mine.references;
            H3_ASSIGN_OR_RETURN(out, generate_latents(*dit, mine.conditioning, rq, dopt));
        }
        if (const model::LayerWeightSource* src = dit->block_source())
            r.dit_weights = src->options().describe() + ": " + src->stats().summary();
    }
    r.denoise_seconds = seconds_since(t0);
    r.setup_seconds = out.setup_seconds;
    r.denoise_parts = out.parts;
    r.step_seconds = out.step_seconds;
    r.work = out.work;
    r.video_noise = out.video_noise;
    r.video_latents = out.video_latents;
    r.audio_noise = out.audio_noise;
    r.audio_latents = out.audio_latents;
    if (warm_up && !job.outputs.return_media) { // a warm-up of latents-only jobs: no decode
        r.peak_device_bytes = static_cast<uint64_t>(device_memory_stats().peak);
        r.component_loads = store_.load_counts();
        take_provenance(r);
        return r;
    }

    // ---- latents
    double write_seconds = 0;
    // A launched group (RANK / WORLD_SIZE): every process holds the same latents; rank 0 writes and decodes.
    const bool writes = store_.plan().parallel.process.rank == 0;
    if (!job.outputs.latents.empty() && writes) {
        t0 = std::chrono::steady_clock::now();
        const Geometry& g = job.geometry;
        std::map<std::string, std::string> meta = {{"seed", std::to_string(job.seed)},
                                                   {"steps", std::to_string(job.steps)},
                                                   {"width", std::to_string(g.width)},
                                                   {"height", std::to_string(g.height)},
                                                   {"frames", std::to_string(g.frames)},
                                                   {"video_shift", std::to_string(job.video_shift)},
                                                   {"audio_shift", std::to_string(job.audio_shift)},
                                                   {"dtype", r.dtype},
                                                   {"device", r.device}};
        if (job.attention.is_vsa()) meta["attention"] = job.attention.describe();
        H3_TRY(io::write_safetensors(job.outputs.latents,
                                     {{"video_noise", r.video_noise},
                                      {"video_latents", r.video_latents},
                                      {"audio_noise", r.audio_noise},
                                      {"audio_latents", r.audio_latents}},
                                     meta));
        r.written.push_back(job.outputs.latents);
        write_seconds += seconds_since(t0);
    }

    // ---- decode what the media outputs need, each decoder leased for its part only
    // On a device group every rank decodes a share of the video tiles (rank 0 blends them); the audio
    // decode and the writers stay on rank 0.
    const MediaTargets& media = job.outputs.media;
    if ((!media.empty() || job.outputs.return_media) && (writes || group)) {
        if (cancel_requested()) return cancelled("cancelled before decoding");
        provenance.set_stage("decode");
        Tensor frames, wave;
        const bool video = media.needs_video() || job.outputs.return_media;
        // The MP4 is encoded while the decoder works (issue #45): each clip's frames go to an encoder
        // thread as they are final, the audio is muxed at the end. A failed or cancelled job leaves no
        // half-written file (the stream removes it).
        std::unique_ptr<Mp4Stream> mux;
        std::vector<Tensor> chunks; // the frames whole as well, where another output or the caller wants them
        const bool keep_frames = job.outputs.return_media || !media.png_dir.empty();
        if (video) {
            report({.stage = Stage::kDecode, .percent = kDenoiseEnd, .part = "video"});
            t0 = std::chrono::steady_clock::now();
            announce_load(Component::kVideoDecoder, kDenoiseEnd, ev);
            H3_ASSIGN_OR_RETURN(auto vae, store_.video_decoder());
            std::function<Status(Tensor)> sink;
            if (!media.mp4.empty() && writes && io::media_available()) {
                Mp4StreamOptions mopt;
                mopt.mp4.cancel = ev.cancel; // the encoder checks it before every batch of frames
                mux = std::make_unique<Mp4Stream>(
                    media.mp4,
                    io::Mp4Streams{.audio_channels = store_.spec().audio_channels,
                                   .sample_rate = store_.spec().audio_sample_rate},
                    mopt);
                sink = [&](Tensor part) -> Status {
                    r.frames += static_cast<int>(part.dim(0));
                    r.height = static_cast<int>(part.dim(1));
                    r.width = static_cast<int>(part.dim(2));
                    if (keep_frames) chunks.push_back(part);
                    return mux->push(std::move(part));
                };
            }
            // per decoded clip: the decode's share of the percentage (90–97), clips as step / total
            auto on_clip = [&](int done, int clips) {
                report({.stage = Stage::kDecode,
                        .percent = kDenoiseEnd + (kVideoDecodeEnd - kDenoiseEnd) * done / std::max(clips, 1),
                        .step = done,
                        .total = clips,
                        .part = "video"});
            };
            // the decoder checks the flag between its calls
            if (group) {
                H3_ASSIGN_OR_RETURN(
                    frames, decode_video_on_group(*group, *vae, r.video_latents, ev.cancel, on_clip, sink));
            } else {
                model::VideoDecodeOptions vopt;
                vopt.cancel = ev.cancel;
                vopt.on_clip = on_clip;
                vopt.frames_sink = sink;
                H3_ASSIGN_OR_RETURN(frames, decode_video_frames(ctx, *vae, r.video_latents, vopt));
            }
            if (keep_frames && !chunks.empty()) {
                H3_ASSIGN_OR_RETURN(frames, join_frames(chunks));
                chunks.clear();
            }
            r.decode_seconds += seconds_since(t0);
            if (frames.defined()) {
                r.frames = static_cast<int>(frames.dim(0));
                r.height = static_cast<int>(frames.dim(1));
                r.width = static_cast<int>(frames.dim(2));
            }
        }
        if (!writes) { // a launched rank > 0: its share of the decode is done
            r.peak_device_bytes = static_cast<uint64_t>(device_memory_stats().peak);
            r.component_loads = store_.load_counts();
            take_provenance(r);
            return r;
        }
        if (cancel_requested()) return cancelled("cancelled before decoding the audio");
        report({.stage = Stage::kDecode, .percent = video ? kVideoDecodeEnd : kDenoiseEnd, .part = "audio"});
        t0 = std::chrono::steady_clock::now();
        {
            announce_load(Component::kAudioDecoder, video ? kVideoDecodeEnd : kDenoiseEnd, ev);
            H3_ASSIGN_OR_RETURN(auto vae, store_.audio_decoder());
            H3_ASSIGN_OR_RETURN(wave, decode_audio_wave(ctx, *vae, r.audio_latents, {.cancel = ev.cancel}));
            r.sample_rate = vae->config.sampling_rate;
        }
        r.decode_seconds += seconds_since(t0);
        r.audio_samples = wave.dim(1);
        if (cancel_requested()) return cancelled("cancelled before writing");
        report({.stage = Stage::kMux, .percent = kDecodeEnd});
        t0 = std::chrono::steady_clock::now();
        MediaTargets rest = media; // what the stream does not write
        if (mux) {
            if (r.sample_rate != store_.spec().audio_sample_rate ||
                wave.dim(0) != store_.spec().audio_channels)
                return internal_error("write_mp4 '" + media.mp4 + "': the audio decoder gave " +
                                      std::to_string(wave.dim(0)) + " channels at " +
                                      std::to_string(r.sample_rate) + " Hz, the stream was opened for " +
                                      std::to_string(store_.spec().audio_channels) + " at " +
                                      std::to_string(store_.spec().audio_sample_rate));
            H3_TRY(mux->finish(wave)); // the frames still queued, the audio, the trailer
            r.mux_encode_seconds = mux->encode_seconds();
            rest.mp4.clear();
        }
        DecodeOptions wopt;
        wopt.cancel = ev.cancel; // the muxer checks it before every frame
        if (Status w = write_media(rest, frames, wave, r.sample_rate, wopt); !w.ok()) {
            if (w.code() == ErrorCode::kCancelled) { // a cancelled mux leaves no half-written file behind
                std::error_code ec;
                if (!rest.mp4.empty() && std::filesystem::is_regular_file(rest.mp4, ec))
                    std::filesystem::remove(rest.mp4, ec);
            }
            return w;
        }
        write_seconds += seconds_since(t0);
        for (const std::string* p : {&media.mp4, &media.wav, &media.png_dir})
            if (!p->empty()) r.written.push_back(*p);
        if (job.outputs.return_media) {
            r.decoded_frames = std::move(frames);
            r.decoded_audio = std::move(wave);
        }
    }
    r.mux_seconds = write_seconds;
    report({.stage = Stage::kMux, .percent = 100});
    r.peak_device_bytes = static_cast<uint64_t>(device_memory_stats().peak);
    r.component_loads = store_.load_counts();
    take_provenance(r);
    return r;
}

} // namespace h3::pipeline
