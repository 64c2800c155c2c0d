#include "pipeline/generate.h"

#include <algorithm>
#include <chrono>

namespace h3::pipeline {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace

Result<GenerationOutput> generate_latents(const model::DitModel& model, const Conditioning& cond,
                                          const GenerationRequest& rq, const DenoiseOptions& options) {
    const model::DitConfig& cfg = model.config();
    const Geometry& geometry = rq.geometry;
    const model::LatentSpec& spec = geometry.spec;
    if (spec.latent_channels != cfg.in_channels || spec.audio_latent_channels != cfg.audio_in_channels ||
        spec.patch_h != cfg.patch_h || spec.patch_w != cfg.patch_w || spec.text_dim != cfg.text_dim)
        return invalid_argument("the request's latent spec (" + spec.describe() +
                                ") is not the DiT's (in_channels " + std::to_string(cfg.in_channels) +
                                ", audio_in_channels " + std::to_string(cfg.audio_in_channels) + ", patch " +
                                std::to_string(cfg.patch_h) + "x" + std::to_string(cfg.patch_w) +
                                ", text_dim " + std::to_string(cfg.text_dim) + ")");
    if (geometry.frames < 1 || geometry.latent_frames < 1 || geometry.latent_h % spec.patch_h ||
        geometry.latent_w % spec.patch_w || geometry.audio_latents < 1)
        return invalid_argument("the request's geometry is not resolved: " + geometry.describe());
    H3_ASSIGN_OR_RETURN(DualSchedule schedule,
                        rq.rungs.empty() ? make_dual_schedule(rq.steps, rq.video_shift, rq.audio_shift)
                                         : make_dual_rung_schedule(rq.rungs, rq.video_shift, rq.audio_shift));
    H3_TRY(check_attention_task(rq.attention, !rq.references.empty()));
    if (!cond.embeddings.defined() || cond.embeddings.rank() != 2 || cond.embeddings.dim(0) < 1 ||
        cond.embeddings.dim(1) != cfg.text_dim)
        return invalid_argument(
            "prompt embeddings must be [L, " + std::to_string(cfg.text_dim) + "] with L ≥ 1, got " +
            (cond.embeddings.defined() ? cond.embeddings.describe() : std::string("none")));
    if (static_cast<int64_t>(cond.tags.size()) != cond.embeddings.dim(0))
        return invalid_argument("prompt tags: " + std::to_string(cond.tags.size()) + " tags for " +
                                std::to_string(cond.embeddings.dim(0)) + " embedding rows");
    for (int32_t t : cond.tags)
        if (t != kTagText && t != kTagVideo)
            return invalid_argument("prompt tags must be 1 (text) or 0 (vision rows), got " +
                                    std::to_string(t));

    if (!rq.keyframes.empty() && !rq.references.empty())
        return invalid_argument("a request has keyframes (fl2va) or references (ref2va), not both");

    const auto t_noise = std::chrono::steady_clock::now();
    // The noise first: it also checks the conditions' shapes the layout is built from.
    NoiseRequest nr;
    nr.seed = rq.seed;
    nr.kernel = rq.noise_kernel;
    nr.keyframes = rq.keyframes;
    nr.references = rq.references;
    nr.video_noise = rq.video_noise;
    nr.audio_noise = rq.audio_noise;
    H3_ASSIGN_OR_RETURN(InitialLatents init, prepare_latents(geometry, nr));

    LayoutParams lp;
    lp.geometry = geometry;
    lp.text_tags = cond.tags;
    for (const auto& k : rq.keyframes) lp.keyframes.push_back(k.anchor);
    for (const auto& r : rq.references) lp.references.push_back(reference_block(r, spec));
    const PackedLayout layout = build_layout(lp);

    DenoiseInputs di;
    di.layout = &layout;
    di.text = cond.embeddings;
    if (init.condition_rows.defined()) {
        const int64_t cols = init.video_rows.dim(1);
        di.video_rows =
            Tensor::host(Shape{init.condition_rows.dim(0) + init.video_rows.dim(0), cols}, DType::kF32);
        std::copy_n(init.condition_rows.data_as<float>(), init.condition_rows.numel(),
                    di.video_rows.data_as<float>());
        std::copy_n(init.video_rows.data_as<float>(), init.video_rows.numel(),
                    di.video_rows.data_as<float>() + init.condition_rows.numel());
    } else {
        di.video_rows = init.video_rows;
    }
    if (init.condition_audio_rows.defined()) {
        const int64_t cols = init.audio_rows.dim(1);
        di.audio_rows =
            Tensor::host(Shape{init.condition_audio_rows.dim(0) + init.audio_rows.dim(0), cols}, DType::kF32);
        std::copy_n(init.condition_audio_rows.data_as<float>(), init.condition_audio_rows.numel(),
                    di.audio_rows.data_as<float>());
        std::copy_n(init.audio_rows.data_as<float>(), init.audio_rows.numel(),
                    di.audio_rows.data_as<float>() + init.condition_audio_rows.numel());
    } else {
        di.audio_rows = init.audio_rows;
    }
    DenoiseOptions dopt = options;
    if (rq.cache.kind != cache::CacheKind::kNone) dopt.cache = rq.cache; // the request's cache wins
    if (rq.attention.is_vsa()) dopt.attention = rq.attention;
    const double noise_and_layout_seconds = seconds_since(t_noise);
    H3_ASSIGN_OR_RETURN(DenoiseResult dr, run_denoise(model, di, schedule, dopt));

    const auto t_unpatchify = std::chrono::steady_clock::now();
    GenerationOutput out;
    out.geometry = geometry;
    out.video_noise = init.video_noise;
    out.audio_noise = init.audio_noise;
    out.video_latents = unpatchify_video(dr.video_rows, cfg.in_channels, geometry.latent_frames,
                                         geometry.latent_h, geometry.latent_w, cfg.patch_h, cfg.patch_w);
    out.audio_latents = rows_to_audio(dr.audio_rows, geometry.audio_latents);
    double steps_seconds = 0;
    for (double s : dr.step_seconds) steps_seconds += s;
    out.parts = {.noise_and_layout = noise_and_layout_seconds,
                 .setup = dr.setup_seconds,
                 .steps = steps_seconds,
                 .loop_outside_steps = std::max(0.0, dr.loop_seconds - steps_seconds),
                 .to_host = dr.to_host_seconds,
                 .unpatchify = seconds_since(t_unpatchify)};
    out.step_seconds = std::move(dr.step_seconds);
    out.setup_seconds = dr.setup_seconds;
    out.work = std::move(dr.work);
    return out;
}

} // namespace h3::pipeline
