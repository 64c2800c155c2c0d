// h3::Engine (include/h3/engine.h): options → placement → model store → adapters → job builder → generator.
#include "engine/engine_impl.h"

#include "core/device.h"
#include "model/dit/dit_parallel.h"
#include "model/lora/lora_file.h"
#include "model/video_vae/video_vae.h"
#include "pipeline/cost_estimate.h"
#include "runtime/checkpoint_defaults.h"
#include "runtime/launcher.h"

#include <chrono>
#include <cmath>
#include <cstdio>

namespace h3 {

namespace {

runtime::WeightPolicy weight_policy(const EngineOptions& o) {
    return {.residency = o.residency,
            .resident_blocks = o.resident_blocks,
            .weight_dtype = o.weight_dtype,
            .host_pinning = o.host_pinning,
            .gpu_memory_budget = o.gpu_memory_budget,
            .int8_cache = o.int8_cache};
}

Status check_range(const char* field, int64_t v, int64_t lo, int64_t hi) {
    if (v >= lo && v <= hi) return ok_status();
    return invalid_field(field, std::string(field) + " " + std::to_string(v) + " must lie in [" +
                                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

Status check_member(const char* field, const std::string& v, std::initializer_list<const char*> allowed) {
    std::string list;
    for (const char* a : allowed) {
        if (v == a) return ok_status();
        list += (list.empty() ? "" : ", ") + std::string(a);
    }
    return invalid_field(field, std::string(field) + " '" + v + "' must be one of " + list);
}

model::LoraReadOptions lora_read_options(const EngineOptions& o) {
    model::LoraReadOptions ro{.strict = o.lora_strict};
    ro.qkv_rows = o.lora_qkv_rows == "stacked"    ? model::LoraQkvRows::kStacked
                  : o.lora_qkv_rows == "per-head" ? model::LoraQkvRows::kPerHead
                                                  : model::LoraQkvRows::kAuto;
    return ro;
}

static_assert(EngineOptions{}.max_steps == runtime::kMaxInferenceSteps,
              "EngineOptions::max_steps defaults to the one limit of every front end");

pipeline::JobBuilderOptions builder_options(const EngineOptions& o) {
    pipeline::JobBuilderOptions bo;
    bo.max_prompt_bytes = o.max_prompt_bytes;
    bo.max_steps = o.max_steps;
    if (o.reference_image_edge > 0) bo.reference_image_edge = o.reference_image_edge; // 0: the model's
    bo.reference_video_edge = o.reference_video_edge;
    return bo;
}

} // namespace

// ---- Job

std::string Job::task() const {
    return pipeline::task_name(impl_->job.task);
}
int Job::width() const {
    return impl_->job.geometry.width;
}
int Job::height() const {
    return impl_->job.geometry.height;
}
int Job::frames() const {
    return impl_->job.geometry.frames;
}
double Job::fps() const {
    return impl_->job.geometry.spec.fps;
}
int Job::steps() const {
    return impl_->job.steps;
}
uint64_t Job::seed() const {
    return impl_->job.seed;
}
std::string Job::describe() const {
    const pipeline::GenerationJob& j = impl_->job;
    return j.geometry.describe() + ", " + std::to_string(j.steps) + " steps, seed " + std::to_string(j.seed) +
           ", cache " + j.cache.describe() + ", attention " + j.attention.describe();
}

// ---- reports

Progress public_progress(const pipeline::JobProgress& p) {
    return {.stage = pipeline::stage_name(p.stage),
            .percent = p.percent,
            .step = p.step,
            .total = p.total,
            .step_seconds = p.step_seconds,
            .elapsed_seconds = p.elapsed_seconds,
            .eta_seconds = p.eta_seconds};
}

JobReport public_report(const pipeline::GenerationJob& job, const pipeline::JobReport& r) {
    JobReport o;
    o.task = pipeline::task_name(job.task);
    o.width = job.geometry.width;
    o.height = job.geometry.height;
    o.frames = job.geometry.frames;
    o.fps = job.geometry.spec.fps;
    o.steps = job.steps;
    o.seed = job.seed;
    o.written = r.written;
    if (r.decoded_frames.defined()) {
        const auto* p = r.decoded_frames.data_as<const uint8_t>();
        o.video.assign(p, p + r.decoded_frames.nbytes());
    }
    if (r.decoded_audio.defined()) {
        const auto* p = r.decoded_audio.data_as<const float>();
        o.audio.assign(p, p + r.decoded_audio.numel());
    }
    o.audio_samples = r.audio_samples;
    o.sample_rate = r.sample_rate;
    o.step_seconds = r.step_seconds;
    o.setup_seconds = r.setup_seconds;
    o.encode_seconds = r.encode_seconds;
    o.denoise_seconds = r.denoise_seconds;
    o.decode_seconds = r.decode_seconds;
    o.mux_seconds = r.mux_seconds;
    o.peak_device_bytes = r.peak_device_bytes;
    o.placement = r.placement;
    o.memory_plan = r.memory_plan;
    o.metrics_json = r.metrics(job.task).dump();
    return o;
}

// ---- checks (no I/O)

Result<model::VideoVaePrecision> video_vae_precision_of(const EngineOptions& o) {
    if (o.vae_precision == "auto") // the decoder follows the DiT: fp8 end to end, else the reference's
        return o.precision == "fp8" ? model::VideoVaePrecision::kFp8 : model::VideoVaePrecision::kExact;
    if (auto p = model::parse_video_vae_precision(o.vae_precision); p.ok()) return p;
    return invalid_field("vae_precision",
                         "vae_precision '" + o.vae_precision + "' must be auto, exact, bf16 or fp8");
}

Status Engine::check(const EngineOptions& o) {
    if (o.checkpoint.empty()) return invalid_field("checkpoint", "checkpoint: give a checkpoint folder");
    if (auto d = parse_device(o.device); !d.ok())
        return d.status().with_context("device").with_field("device");
    H3_TRY(runtime::compute_precision(o.dtype, o.precision).status());
    H3_ASSIGN_OR_RETURN(const model::VideoVaePrecision vae_precision, video_vae_precision_of(o));
    if (vae_precision != model::VideoVaePrecision::kExact && o.dtype == "fp16")
        return invalid_field("vae_precision", std::string("vae_precision ") +
                                                  model::video_vae_precision_name(vae_precision) +
                                                  " runs bf16 blocks; dtype fp16 is for GPUs without bf16");
    H3_TRY(check_member("residency", o.residency, {"", "resident", "layerwise"}));
    H3_TRY(check_member("weight_dtype", o.weight_dtype, {"", "bf16", "int8", "auto"}));
    if (o.resident_blocks < -1) H3_TRY(check_range("resident_blocks", o.resident_blocks, 0, 1 << 20));
    if (o.resident_blocks >= 0 && o.residency == "resident")
        return invalid_field("resident_blocks",
                             "resident_blocks applies to residency layerwise, not resident");
    if (!o.gpu_memory_budget.empty())
        H3_TRY(runtime::parse_byte_size(o.gpu_memory_budget, "gpu_memory_budget").status());
    else if (o.weight_dtype == "auto")
        return invalid_field("weight_dtype",
                             "weight_dtype auto lets the planner choose: give gpu_memory_budget too");
    H3_TRY(check_range("sp", o.sp, 1, 1024));
    H3_TRY(check_range("tp", o.tp, 1, 1024));
    H3_TRY(check_range("ring", o.ring, 1, 1024));
    for (int g : o.gpus) H3_TRY(check_range("gpus", g, 0, 1023));
    if (!o.gpus.empty() && static_cast<int64_t>(o.gpus.size()) != int64_t{o.sp} * o.ring * o.tp)
        return invalid_field("gpus",
                             "gpus names " + std::to_string(o.gpus.size()) + " device(s) for sp·ring·tp = " +
                                 std::to_string(o.sp * o.ring * o.tp) + " ranks; give one GPU per rank");
    H3_TRY(check_member("lora_mode", o.lora_mode, {"runtime", "merged"}));
    H3_TRY(check_member("lora_qkv_rows", o.lora_qkv_rows, {"auto", "stacked", "per-head"}));
    for (const LoraOption& l : o.lora) {
        if (l.path.empty()) return invalid_field("lora", "lora: an adapter names no file");
        if (!std::isfinite(l.scale))
            return invalid_field("lora", "lora " + l.path + ": the scale must be a finite number");
    }
    if (o.lora_mode == "merged" && !o.lora_dir.empty())
        return invalid_field("lora_mode", "lora_mode merged folds the engine's lora files in at load; "
                                          "lora_dir serves run-time adapters (lora_mode runtime)");
    if (o.keep_text_encoder && !o.keep_loaded)
        return invalid_field("keep_text_encoder", "keep_text_encoder applies with keep_loaded");
    H3_TRY(check_range("max_steps", o.max_steps, 2, 1 << 20));
    if (o.reference_image_edge != 0)
        H3_TRY(check_range("reference_image_edge", o.reference_image_edge, kReferenceEdgeMin,
                           kReferenceImageEdgeMax));
    H3_TRY(check_range("reference_video_edge", o.reference_video_edge, kReferenceEdgeMin,
                       kReferenceVideoEdgeMax));
    return ok_status();
}

Status Engine::check_files(const JobRequest& r, const EngineOptions& o) {
    auto in = job_input(r);
    if (!in.ok()) return in.status();
    return pipeline::JobBuilder::check(*in, builder_options(o));
}

Status Engine::check(const JobRequest& r, const EngineOptions& o) {
    pipeline::JobInput in = job_input_fields(r);
    // the files are not read: keyframes stand in as 1x1 images, references are left to build()
    io::DecodedImage stand_in;
    stand_in.image = io::RgbImage(1, 1);
    if (r.first_frame) in.first_frame = stand_in;
    if (r.last_frame) in.last_frame = stand_in;
    if (!r.reference.empty()) {
        if (!r.prompt)
            return invalid_field("prompt", "prompt is required with references (ref2va): they are presented "
                                           "to the text encoder with it");
        in.task.reset();
    }
    if (r.prompt_embeds && (r.prompt || r.random_prompt_embeds))
        return invalid_field("prompt_embeds", "give one of prompt, prompt_embeds and random_prompt_embeds");
    if (r.prompt_embeds) in.random_prompt_embeds = 1; // stands in for the rows the file holds
    if (r.output.empty() && r.save_latents.empty() && !r.return_media)
        return invalid_field("output",
                             "output: nothing to produce: give output, save_latents or return_media");
    if (!r.output.empty())
        if (auto k = pipeline::checked_output_kind(r.output); !k.ok()) return k.status().with_field("output");
    return pipeline::JobBuilder::check(in, builder_options(o));
}

// ---- open

Result<std::unique_ptr<Engine>> Engine::open(EngineOptions options) {
    return Impl::open(std::move(options), {});
}

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Impl::open(EngineOptions o, EngineExtras extras) {
    H3_TRY(Engine::check(o));
    auto impl = std::make_unique<Impl>();
    impl->options = o;
    H3_ASSIGN_OR_RETURN(impl->precision, runtime::compute_precision(o.dtype, o.precision));
    impl->weights = weight_policy(o);
    H3_ASSIGN_OR_RETURN(Device device, parse_device(o.device));
    // one process of a launched group (RANK / WORLD_SIZE): CUDA ranks run on cuda:LOCAL_RANK
    H3_ASSIGN_OR_RETURN(impl->launched, runtime::process_rank_from_env());
    if (impl->launched && device.is_cuda()) device = Device::cuda(impl->launched->local_rank);

    // ---- placement: per job (every component loaded by the job that needs it), or a server's (the DiT and
    // the decoders kept); the weights as the options say, or planned under the budget — for the release
    // shape when components stay loaded, per job (in run()) otherwise
    runtime::PlacementPlan& plan = impl->plan;
    plan = o.keep_loaded ? runtime::PlacementPlan::serving(device, impl->precision,
                                                           o.keep_text_encoder ? runtime::Residency::kResident
                                                                               : runtime::Residency::kPerJob)
                         : runtime::PlacementPlan::per_job(device, impl->precision);
    H3_ASSIGN_OR_RETURN(const model::VideoVaePrecision vae_precision, video_vae_precision_of(o));
    plan[runtime::Component::kVideoDecoder].precision = runtime::placement_precision(vae_precision);
    if (impl->launched) plan.parallel.process = *impl->launched;
    plan.parallel.sp = o.sp;
    plan.parallel.tp = o.tp;
    plan.parallel.ring = o.ring;
    plan.parallel.gpus = o.gpus;
    // one rank on one named GPU is no group: the components run on that device
    if (plan.parallel.world() == 1 && plan.parallel.gpus.size() == 1 && !plan.parallel.process.active()) {
        for (auto& c : plan.components)
            if (c.device.is_cuda()) c.device = Device::cuda(plan.parallel.gpus[0]);
        if (plan.components[0].device.is_cuda()) plan.parallel.gpus.clear();
    }
    H3_TRY(plan.validate());
    if (o.keep_loaded || !impl->weights.budgeted()) {
        H3_ASSIGN_OR_RETURN(runtime::ResidencyChoice choice, runtime::resolve_checkpoint_residency(
                                                                 impl->weights, o.checkpoint, impl->precision,
                                                                 runtime::Workload{}, false, o.keep_loaded));
        runtime::apply_residency(choice, plan, o.keep_loaded);
        impl->weights_text = choice.describe();
    }

    // ---- the checkpoint's configs (and what the plan keeps loaded)
    H3_ASSIGN_OR_RETURN(impl->store,
                        runtime::ModelStore::open(o.checkpoint, plan, std::move(extras.supplier)));
    const runtime::CheckpointInfo& ci = impl->store->info();
    if (plan.parallel.active() && ci.dit)
        if (Status s = model::check_parallel_degrees(*ci.dit, o.sp, o.tp, o.ring); !s.ok())
            return s.with_field("sp");
    for (runtime::Component c : extras.require) H3_TRY(impl->store->require({c}));

    // ---- LoRA: merged into the DiT as it loads (read now, before any weight), or a library the builder
    // resolves the jobs' adapters through (the engine's files as given, or names inside lora_dir)
    if ((!o.lora.empty() || !o.lora_dir.empty()) && ci.dit) {
        const model::LoraReadOptions ro = lora_read_options(o);
        if (o.lora_mode == "merged") {
            std::vector<model::LoraUse> uses;
            for (const LoraOption& l : o.lora) {
                auto adapter = model::read_lora_file(l.path, *ci.dit, ro);
                if (!adapter.ok()) return adapter.status().with_context("lora " + l.path).with_field("lora");
                std::fprintf(stderr, "engine: LoRA %s, scale %g, %.1f MiB, merged into the weights\n",
                             adapter->summary().c_str(), l.scale,
                             static_cast<double>(adapter->host_bytes()) / (1 << 20));
                uses.push_back({std::make_shared<const model::LoraAdapter>(std::move(adapter).value()),
                                static_cast<float>(l.scale)});
                impl->merged.push_back(pipeline::lora_use_name(l.path, l.scale));
            }
            H3_TRY(impl->store->set_merged_adapters(std::move(uses), impl->merged));
        } else {
            auto lib =
                runtime::AdapterLibrary::open({.dir = o.lora_dir,
                                               .config = *ci.dit,
                                               .ctx = impl->store->context(),
                                               .dtype = ci.dtype == "fp32" ? DType::kF32 : DType::kBF16,
                                               .budget_bytes = o.lora_cache_bytes,
                                               .read = ro,
                                               .any_path = o.lora_dir.empty()});
            if (!lib.ok()) return lib.status().with_context("lora_dir").with_field("lora_dir");
            impl->adapters = std::move(lib).value();
        }
    }

    // ---- the job builder (the engine's limits and adapters) and the generator
    pipeline::JobBuilderOptions bo = builder_options(o);
    bo.lora = {.library = impl->adapters.get(), .merged = impl->merged};
    bo.prepare_outputs = !impl->launched || impl->launched->rank == 0; // rank 0 writes a group's outputs
    bo.keep_source = extras.keep_job_source;
    if (o.reference_image_edge == 0 && ci.defaults && ci.defaults->reference_image_edge)
        bo.reference_image_edge = static_cast<int>(*ci.defaults->reference_image_edge); // h3_defaults.json
    // a CPU job's cost estimate (0 on a GPU): the slow-job warning and the video object's estimate
    H3_ASSIGN_OR_RETURN(impl->flops_per_second, pipeline::cpu_flops_rate(*impl->store));
    bo.flops_per_second = impl->flops_per_second;
    impl->builder = std::make_unique<pipeline::JobBuilder>(ci, bo);
    H3_ASSIGN_OR_RETURN(impl->generator, pipeline::Generator::create(*impl->store));
    impl->generator->set_keep_dit_workspace(o.keep_dit_workspace);
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
}

// ---- jobs

void Engine::Impl::fill_defaults(pipeline::JobInput& in) const {
    if (in.adapters.lora.empty())
        for (const LoraOption& l : options.lora) in.adapters.lora.push_back({l.path, l.scale});
    if (!in.adapters.lora_mode) in.adapters.lora_mode = options.lora_mode;
    if (!in.attention && !options.attention.empty()) in.attention = options.attention;
    if (!in.cache && !in.quality && !options.cache.empty()) in.cache = nlohmann::json(options.cache);
}

Result<pipeline::GenerationJob> Engine::Impl::build(pipeline::JobInput in) const {
    fill_defaults(in);
    return builder->build(std::move(in));
}

Status Engine::Impl::plan_for_job(const pipeline::GenerationJob& job) {
    if (options.keep_loaded || !weights.budgeted()) return ok_status();
    // the planner sizes this job under the budget before any weight moves; the plan is per job, so the DiT
    // leaves the device before the decoders load
    const pipeline::Geometry& g = job.geometry;
    const int64_t text_rows = job.random_prompt_rows > 0 ? job.random_prompt_rows
                              : job.prompt_embeds        ? job.prompt_embeds->rows()
                                                         : runtime::Workload{}.text_rows;
    const int cache_buffers = job.cache.kind == cache::CacheKind::kNone ? 0 : 4;
    H3_ASSIGN_OR_RETURN(runtime::ResidencyChoice choice,
                        runtime::resolve_checkpoint_residency(
                            weights, options.checkpoint, precision,
                            runtime::workload_for(g.rows_per_frame() * g.latent_frames, 2LL * g.audio_latents,
                                                  text_rows, job.steps, cache_buffers, g.width, g.height),
                            job.task == pipeline::Task::kRef2va, false));
    runtime::apply_residency(choice, plan, false);
    weights_text = choice.describe();
    return store->replan(plan);
}

Result<pipeline::JobReport> Engine::Impl::run(const pipeline::GenerationJob& job,
                                              const pipeline::JobEvents& events) {
    std::lock_guard<std::mutex> lock(run_mu);
    H3_TRY(plan_for_job(job));
    return generator->run(job, events);
}

Result<pipeline::JobReport> Engine::Impl::warm_up(const pipeline::GenerationJob& job,
                                                  const pipeline::JobEvents& events) {
    std::lock_guard<std::mutex> lock(run_mu);
    H3_TRY(plan_for_job(job));
    return generator->warm_up(job, events);
}

Result<pipeline::GenerationJob> Engine::Impl::build_warm_up(pipeline::JobInput in) const {
    const bool decode = !in.outputs.media.empty() || in.outputs.return_media;
    in.outputs = pipeline::OutputRequest{}; // a warm-up writes nothing; no output path is checked
    H3_ASSIGN_OR_RETURN(pipeline::GenerationJob job, build(std::move(in)));
    job.outputs.return_media = decode; // the decoders' one-time work too
    return job;
}

Result<WarmUpReport> Engine::warm_up(const JobRequest& request, const JobEvents& events) {
    const auto t0 = std::chrono::steady_clock::now();
    // Nothing is written: the request's files are not needed. It decodes unless it asks for latents only.
    const bool latents_only =
        request.output.empty() && !request.return_media && !request.save_latents.empty();
    JobRequest req = request;
    req.output.clear();
    req.save_latents.clear();
    req.return_media = true;
    H3_ASSIGN_OR_RETURN(pipeline::JobInput in, job_input(req));
    in.outputs.return_media = !latents_only;
    H3_ASSIGN_OR_RETURN(pipeline::GenerationJob job, impl_->build_warm_up(std::move(in)));
    pipeline::JobEvents pe;
    pe.cancel = events.cancel;
    if (events.progress)
        pe.progress = [&](const pipeline::JobProgress& p) { events.progress(public_progress(p)); };
    H3_ASSIGN_OR_RETURN(pipeline::JobReport r, impl_->warm_up(job, pe));
    WarmUpReport w;
    w.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    w.encode_seconds = r.encode_seconds;
    w.step_seconds = r.step_seconds;
    w.metrics_json = r.metrics(job.task).dump();
    return w;
}

Result<Job> Engine::build(const JobRequest& request) const {
    H3_ASSIGN_OR_RETURN(pipeline::JobInput in, job_input(request));
    H3_ASSIGN_OR_RETURN(pipeline::GenerationJob job, impl_->build(std::move(in)));
    return Job(std::make_shared<const Job::Impl>(Job::Impl{std::move(job)}));
}

Result<JobReport> Engine::run(const Job& job, const JobEvents& events) {
    pipeline::JobEvents pe;
    pe.cancel = events.cancel;
    if (events.progress)
        pe.progress = [&](const pipeline::JobProgress& p) { events.progress(public_progress(p)); };
    H3_ASSIGN_OR_RETURN(pipeline::JobReport r, impl_->run(job.impl().job, pe));
    return public_report(job.impl().job, r);
}

EngineInfo Engine::info() const {
    const runtime::CheckpointInfo& ci = impl_->checkpoint();
    EngineInfo i;
    i.checkpoint = ci.root;
    i.device = ci.device;
    i.dtype = ci.dtype;
    i.placement = impl_->store->plan().describe();
    i.memory_plan = impl_->store->plan().memory_plan;
    i.fasth3 = ci.fasth3.has_value();
    i.parallel_world = impl_->plan.parallel.world();
    for (runtime::Component c : runtime::kAllComponents)
        if (ci.has(c)) i.components.push_back(runtime::component_name(c));
    i.component_loads = impl_->store->load_counts();
    return i;
}

const EngineOptions& Engine::options() const {
    return impl_->options;
}

} // namespace h3
