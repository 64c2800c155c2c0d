#include "pipeline/denoise.h"

#include "cache/step_cache.h"
#include "ops/sampling.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace h3::pipeline {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool cancelled_now(const DenoiseOptions& o) {
    return o.cancel && o.cancel->load(std::memory_order_relaxed);
}

} // namespace

Status check_attention_task(const model::AttentionChoice& attention, bool ref2va) {
    if (attention.is_vsa() && ref2va)
        return invalid_argument(
            "attention vsa: ref2va is not supported (FastH3's VSA is trained on the "
            "[text | keyframes | audio | video] layout of t2va / fl2va; the reference blocks "
            "have no tiling); use attention dense");
    return ok_status();
}

std::vector<int> warm_up_steps(const model::AttentionChoice& attention, int steps) {
    std::vector<int> run;
    if (steps < 1) return run;
    run.push_back(0);
    const int sparse_from = attention.is_vsa() ? attention.vsa.dense_first_n_steps : 0;
    if (sparse_from > 0 && sparse_from < steps) run.push_back(sparse_from);
    return run;
}

Result<DenoiseResult> run_denoise(const model::DitModel& model, const DenoiseInputs& in,
                                  const DualSchedule& sched, const DenoiseOptions& o) {
    if (!in.layout) return invalid_argument("denoise: no layout");
    const PackedLayout& L = *in.layout;
    const model::DitConfig& cfg = model.config();
    if (in.text.rank() != 2 || in.text.dim(0) != L.text_rows || in.text.dim(1) != cfg.text_dim)
        return invalid_argument("denoise: conditioning is " + in.text.shape().to_string() +
                                ", the layout needs [" + std::to_string(L.text_rows) + ", " +
                                std::to_string(cfg.text_dim) + "]");
    const int64_t nv = L.condition_rows + L.video_rows;
    if (in.video_rows.shape() != Shape{nv, cfg.video_patch_dim()} || in.video_rows.dtype() != DType::kF32)
        return invalid_argument("denoise: video rows are " + in.video_rows.describe() + ", expected f32[" +
                                std::to_string(nv) + ", " + std::to_string(cfg.video_patch_dim()) + "]");
    const int64_t na = L.condition_audio_rows + L.audio_rows;
    if (in.audio_rows.shape() != Shape{na, cfg.audio_in_channels} || in.audio_rows.dtype() != DType::kF32)
        return invalid_argument("denoise: audio rows are " + in.audio_rows.describe() + ", expected f32[" +
                                std::to_string(na) + ", " + std::to_string(cfg.audio_in_channels) + "]");
    if (sched.video.sigmas.size() != sched.audio.sigmas.size() || sched.forwards() < 1)
        return invalid_argument("denoise: the video and audio schedules differ in length or are empty");

    const auto t_setup = Clock::now();
    // The forward reads these; only the rows, timesteps and timestep_indices change per step.
    model::DitPackedInputs packed;
    packed.rows = L.rows;
    packed.positions = L.positions;
    packed.token_tags = L.tags;
    packed.video_indices = L.video_indices;
    packed.audio_indices = L.audio_indices;
    packed.text_indices = L.text_indices;
    H3_ASSIGN_OR_RETURN(packed.text, in.text.to_dtype(DType::kF32));
    H3_ASSIGN_OR_RETURN(packed.video, in.video_rows.to_dtype(DType::kF32)); // our own copy, updated in place
    H3_ASSIGN_OR_RETURN(packed.audio, in.audio_rows.to_dtype(DType::kF32));
    H3_TRY(check_attention_task(o.attention, L.ref2va));
    packed.segments = packed_segments(L); // what VSA tiles

    const int steps = sched.forwards();
    std::vector<RowTimesteps> plan;
    std::set<float> all_t;
    for (int i = 0; i < steps; ++i) {
        plan.push_back(row_timesteps(L, sched.video.timesteps[static_cast<size_t>(i)],
                                     sched.audio.timesteps[static_cast<size_t>(i)]));
        all_t.insert(plan.back().timesteps.begin(), plan.back().timesteps.end());
    }
    // The request's cache state lives in this frame: released on every return path.
    cache::StepCacheSetup cs{.steps = steps,
                             .num_layers = cfg.num_layers,
                             .rows = L.rows,
                             .teacache_coefficients = cache::teacache_coefficients_for(cfg)};
    H3_ASSIGN_OR_RETURN(std::unique_ptr<cache::StepCache> step_cache, cache::make_step_cache(o.cache, cs));
    const int ranks = o.parallel ? o.parallel->seq_size() * o.parallel->tp_size() : 1;
    const double flops_per_block = cache::block_flops(cfg, L.rows) / ranks; // this rank's share
    // Without a step cache (which reads host outputs) the latents stay where the model runs: the forwards
    // leave their outputs on the device and the Euler step runs there, so no step crosses to the host.
    const bool resident = !step_cache;
    const ops::Context step_ctx = resident ? model.context() : ops::Context::cpu();
    if (resident && !step_ctx.device.is_cpu()) {
        H3_ASSIGN_OR_RETURN(packed.video, packed.video.to(step_ctx.device, step_ctx.stream()));
        H3_ASSIGN_OR_RETURN(packed.audio, packed.audio.to(step_ctx.device, step_ctx.stream()));
    }
    model::DitForwardOptions fo;
    fo.cancel = o.cancel;
    fo.ffn_chunk_bytes = o.ffn_chunk_bytes;
    fo.hook = o.hook;
    fo.lora = o.lora;
    fo.outputs_on_device = resident;
    fo.attention = o.attention;
    fo.parallel = o.parallel;
    fo.keep_workspace = o.keep_workspace;
    if (cancelled_now(o)) return cancelled("generation cancelled before denoising");
    H3_ASSIGN_OR_RETURN(
        model::AdalnTables tables,
        model.compute_adaln_tables(std::vector<float>(all_t.begin(), all_t.end()), nullptr, nullptr, o.lora));
    packed.timesteps = plan[0].timesteps;
    packed.timestep_indices = plan[0].indices;
    H3_ASSIGN_OR_RETURN(model::DitRequestState state, model.prepare_request(packed, fo));

    DenoiseResult res;
    res.setup_seconds = since(t_setup);
    res.work.cache = o.cache.describe();
    res.work.setup_seconds = res.setup_seconds;
    const auto t_loop = Clock::now();
    Tensor video = packed.video.slice(0, L.condition_rows, L.condition_rows + L.video_rows); // generated rows
    Tensor audio = packed.audio.slice(0, L.condition_audio_rows, L.condition_audio_rows + L.audio_rows);
    const std::vector<int> warm_up = o.warm_up ? warm_up_steps(o.attention, steps) : std::vector<int>{};
    for (int i = 0; i < steps; ++i) {
        if (o.warm_up) { // a step cache decides step by step: it runs every step up to the last one wanted
            if (i > warm_up.back()) break;
            if (!step_cache && std::find(warm_up.begin(), warm_up.end(), i) == warm_up.end()) continue;
        }
        if (cancelled_now(o))
            return cancelled("generation cancelled after " + std::to_string(i) + " of " +
                             std::to_string(steps) + " steps");
        const auto t_step = Clock::now();
        const OneTimeCounter* one_time = one_time_counter(); // the job's (ops::ProvenanceScope)
        const OneTimeWork one_time_before = one_time ? one_time->total() : OneTimeWork{};
        packed.timesteps = plan[static_cast<size_t>(i)].timesteps;
        packed.timestep_indices = plan[static_cast<size_t>(i)].indices;
        const cache::StepPlan plan_i = step_cache ? step_cache->begin_step(i) : cache::StepPlan{};
        model::DitOutputs fresh;
        const model::DitOutputs* out = &fresh;
        if (plan_i.reuse_output) {
            out = &step_cache->reused_outputs(); // velocity reuse: no DiT call
        } else {
            fo.schedule = plan_i.schedule;
            fo.step = i;
            auto r = model.forward(packed, &tables, fo, &state);
            if (!r.ok())
                return r.status().with_context("step " + std::to_string(i + 1) + "/" + std::to_string(steps));
            fresh = std::move(r).value();
            if (step_cache) H3_TRY(step_cache->end_step(i, fresh));
        }
        // Each stream moves with its own Δσ, reused velocities included (ops::euler_update is
        // pipeline::euler_update on tensors, bit for bit).
        const size_t vi = static_cast<size_t>(i);
        const Tensor v = out->sample.slice(0, L.condition_rows, L.condition_rows + L.video_rows);
        const Tensor va =
            out->audio_sample.slice(0, L.condition_audio_rows, L.condition_audio_rows + L.audio_rows);
        H3_TRY(ops::euler_update(step_ctx,
                                 {.timestep = sched.video.timesteps[vi],
                                  .sigma = sched.video.sigmas[vi],
                                  .sigma_next = sched.video.sigmas[vi + 1]},
                                 video, v));
        H3_TRY(ops::euler_update(step_ctx,
                                 {.timestep = sched.audio.timesteps[vi],
                                  .sigma = sched.audio.sigmas[vi],
                                  .sigma_next = sched.audio.sigmas[vi + 1]},
                                 audio, va));
        H3_TRY(ops::synchronize(step_ctx)); // the step's time is its device time; cancellation is per step
        res.step_seconds.push_back(since(t_step));
        cache::StepRecord rec;
        if (step_cache) {
            rec = step_cache->record();
        } else {
            rec.step = i;
            rec.blocks_executed = cfg.num_layers;
        }
        rec.seconds = res.step_seconds.back();
        if (one_time) rec.one_time = one_time->total() - one_time_before;
        rec.useful_flops = rec.blocks_executed * flops_per_block;
        res.work.steps.push_back(rec);
        if (o.progress) {
            StepProgress p;
            p.step = i + 1;
            p.total = steps;
            p.step_seconds = res.step_seconds.back();
            p.elapsed_seconds = since(t_loop);
            p.eta_seconds = p.elapsed_seconds / p.step * (steps - p.step);
            o.progress(p);
        }
    }
    res.loop_seconds = since(t_loop);
    const auto t_to_host = Clock::now();
    H3_ASSIGN_OR_RETURN(res.video_rows, video.to(Device::cpu(), step_ctx.stream()));
    H3_ASSIGN_OR_RETURN(res.audio_rows, audio.to(Device::cpu(), step_ctx.stream()));
    res.to_host_seconds = since(t_to_host);
    return res;
}

} // namespace h3::pipeline
