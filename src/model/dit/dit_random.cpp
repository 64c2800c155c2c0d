#include "model/dit/dit_random.h"

#include "model/weights/weight_master.h"
#include "ops/random.h"

#include <cmath>

namespace h3::model {

namespace {

Result<Tensor> make(const ops::Context& ctx, std::vector<int64_t> shape, DType dt, uint64_t seed, float bound,
                    float offset = 0.0f) {
    H3_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(Shape(shape), dt, ctx.device));
    H3_TRY(ops::fill_uniform(ctx, {.seed = seed, .bound = bound, .offset = offset}, t));
    return t;
}

// Uniform with the variance of N(0, 1/fan_in): bound = sqrt(3/fan_in).
float linear_bound(int64_t fan_in) {
    return std::sqrt(3.0f / static_cast<float>(fan_in));
}

} // namespace

Result<DitWeights> random_dit_weights(const DitConfig& c, const ops::Context& ctx, DitPrecision prec,
                                      const RandomDitParams& p) {
    const DType bf = precision_dtype(prec), f32 = DType::kF32;
    const int64_t D = c.hidden_size, inner = c.inner_dim(), F = c.ffn_dim, hd = c.attention_head_dim;
    uint64_t seed = p.seed * 1000003ull;
    auto next = [&]() { return ++seed; };
    DitWeights w;
    auto lin = [&](Tensor& t, int64_t out, int64_t in, DType dt) -> Status {
        H3_ASSIGN_OR_RETURN(t, make(ctx, {out, in}, dt, next(), linear_bound(in)));
        return ok_status();
    };
    auto vec = [&](Tensor& t, int64_t n, DType dt, float bound, float offset) -> Status {
        H3_ASSIGN_OR_RETURN(t, make(ctx, {n}, dt, next(), bound, offset));
        return ok_status();
    };
    H3_TRY(lin(w.proj_in_w, D, c.video_patch_dim(), f32));
    H3_TRY(vec(w.proj_in_b, D, f32, 0.02f, 0.0f));
    H3_TRY(lin(w.audio_proj_in_w, D, c.audio_in_channels, f32));
    H3_TRY(vec(w.audio_proj_in_b, D, f32, 0.02f, 0.0f));
    H3_TRY(lin(w.context_w, D, c.text_dim, bf));
    H3_TRY(vec(w.context_b, D, bf, 0.02f, 0.0f));
    H3_TRY(lin(w.time_w1, c.time_embed_hidden_dim, c.freq_dim, f32));
    H3_TRY(vec(w.time_b1, c.time_embed_hidden_dim, f32, 0.02f, 0.0f));
    H3_TRY(lin(w.time_w2, c.time_embed_dim, c.time_embed_hidden_dim, f32));
    H3_TRY(vec(w.time_b2, c.time_embed_dim, f32, 0.02f, 0.0f));
    H3_TRY(vec(w.refiner_final_norm, D, bf, 0.1f, 1.0f));
    H3_TRY(vec(w.norm_out, D, bf, 0.1f, 1.0f));
    H3_TRY(lin(w.norm_out_w, c.final_adaln_out_features(), c.time_embed_dim, bf));
    H3_TRY(vec(w.norm_out_b, c.final_adaln_out_features(), bf, 0.02f, 0.0f));
    H3_TRY(lin(w.proj_out_w, c.video_patch_dim(), D, f32));
    H3_TRY(vec(w.proj_out_b, c.video_patch_dim(), f32, 0.02f, 0.0f));
    H3_TRY(lin(w.audio_proj_out_w, c.audio_in_channels, D, f32));
    H3_TRY(vec(w.audio_proj_out_b, c.audio_in_channels, f32, 0.02f, 0.0f));
    auto block = [&](DitBlockWeights& b, bool adaln) -> Status {
        H3_TRY(vec(b.norm1, D, bf, 0.1f, 1.0f));
        H3_TRY(lin(b.to_q, inner, D, bf));
        H3_TRY(lin(b.to_k, inner, D, bf));
        H3_TRY(lin(b.to_v, inner, D, bf));
        H3_TRY(vec(b.norm_q, hd, bf, 0.1f, 1.0f));
        H3_TRY(vec(b.norm_k, hd, bf, 0.1f, 1.0f));
        H3_TRY(lin(b.to_out, D, inner, bf));
        H3_TRY(vec(b.norm2, D, bf, 0.1f, 1.0f));
        H3_TRY(lin(b.ff_in, 2 * F, D, bf));
        H3_TRY(lin(b.ff_out, D, F, bf));
        if (adaln) {
            H3_TRY(lin(b.adaln_weight, c.adaln_out_features(), c.time_embed_dim, bf));
            H3_TRY(vec(b.adaln_bias, c.adaln_out_features(), bf, 0.02f, 0.0f));
        }
        return ok_status();
    };
    w.refiner.resize(static_cast<size_t>(c.num_refiner_layers));
    for (auto& b : w.refiner) H3_TRY(block(b, false));
    w.blocks.resize(static_cast<size_t>(p.blocks > 0 ? p.blocks : c.num_layers));
    for (auto& b : w.blocks) {
        H3_TRY(block(b, p.adaln));
        if (!p.host_blocks) continue;
        for (Tensor* t :
             {&b.to_q, &b.to_k, &b.to_v, &b.to_out, &b.ff_in, &b.ff_out, &b.adaln_weight, &b.adaln_bias}) {
            if (!t->defined()) continue;
            H3_ASSIGN_OR_RETURN(Tensor h,
                                host_buffer(t->shape(), t->dtype(), p.pinned && ctx.device.is_cuda()));
            H3_TRY(h.copy_from(*t));
            *t = std::move(h); // the device copy is freed before the next block is made
        }
    }
    // After every other tensor, so the rest of the weights do not depend on whether the gates exist.
    if (p.gate_compress)
        for (auto& b : w.blocks) H3_TRY(lin(b.gate_compress, inner, D, bf));
    return w;
}

Result<AdalnTables> random_adaln_tables(const DitConfig& c, const ops::Context& ctx, DType act,
                                        const std::vector<float>& timesteps, int blocks, uint64_t seed) {
    AdalnTables t;
    t.timesteps = timesteps;
    const int64_t M = static_cast<int64_t>(timesteps.size());
    for (int b = 0; b < blocks; ++b) {
        H3_ASSIGN_OR_RETURN(
            Tensor tab, make(ctx, {M * 3, 6LL * c.hidden_size}, act, seed + static_cast<uint64_t>(b), 0.1f));
        t.blocks.push_back(tab);
    }
    H3_ASSIGN_OR_RETURN(t.final_layer, make(ctx, {M, c.final_adaln_out_features()}, act, seed + 7777, 0.1f));
    return t;
}

DitPackedInputs synthetic_inputs(const DitConfig& c, const SyntheticLayout& l, float t_video, float t_audio,
                                 uint64_t seed) {
    DitPackedInputs in;
    const int64_t S = l.rows(c), L = l.text, A = l.audio, Nv = l.video_rows(c);
    const int64_t gh = l.latent_h / c.patch_h, gw = l.latent_w / c.patch_w;
    in.rows = S;
    in.timesteps = {t_video, t_audio};
    in.positions.assign(static_cast<size_t>(S * 3), 0.0);
    auto set_row = [&](int64_t r, int32_t tag, int32_t ti, double pt, double ph, double pw) {
        in.token_tags.push_back(tag);
        in.timestep_indices.push_back(ti);
        in.positions[static_cast<size_t>(r * 3)] = pt;
        in.positions[static_cast<size_t>(r * 3 + 1)] = ph;
        in.positions[static_cast<size_t>(r * 3 + 2)] = pw;
    };
    // Spatial grid per spec §5.3: 32·(left + k·ratio/(d/2)), s = sqrt(h·w).
    const double s = std::sqrt(static_cast<double>(l.latent_h * l.latent_w));
    auto axis = [&](int64_t d, int64_t k) {
        double ratio = static_cast<double>(d) / s, left = (1.0 - ratio) / 2.0;
        return 32.0 * (left + static_cast<double>(k) * ratio / static_cast<double>(d / 2));
    };
    int64_t r = 0;
    for (int64_t i = 0; i < L; ++i, ++r) {
        in.text_indices.push_back(static_cast<int32_t>(r));
        set_row(r, 1, 0, static_cast<double>(i), 0, 0);
    }
    for (int ch = 0; ch < 2; ++ch)
        for (int64_t a = 0; a < A; ++a, ++r) {
            in.audio_indices.push_back(static_cast<int32_t>(r));
            set_row(r, 2, 1, static_cast<double>(L + a), 0,
                    ch == 0 ? axis(l.latent_w, 0) : axis(l.latent_w, gw - 1));
        }
    for (int64_t f = 0; f < l.latent_frames; ++f) {
        // latent 0 of each 5-latent chunk covers 1 pixel frame, the others 4 (spec §5.3).
        int64_t chunk = f / 5, within = f % 5;
        double first_pixel = static_cast<double>(chunk * 17 + (within == 0 ? 0 : 1 + (within - 1) * 4));
        for (int64_t y = 0; y < gh; ++y)
            for (int64_t x = 0; x < gw; ++x, ++r) {
                in.video_indices.push_back(static_cast<int32_t>(r));
                set_row(r, 0, 0, static_cast<double>(L) + 5.0 / 3.0 * first_pixel, axis(l.latent_h, y),
                        axis(l.latent_w, x));
            }
    }
    auto fill = [&](int64_t rows, int64_t cols, uint64_t sd) {
        Tensor t = Tensor::host(Shape{rows, cols}, DType::kF32);
        for (int64_t i = 0; i < rows * cols; ++i)
            t.data_as<float>()[i] = ops::uniform_value(sd, static_cast<uint64_t>(i), 1.7f, 0.0f);
        return t;
    };
    in.video = fill(Nv, c.video_patch_dim(), seed + 1);
    in.audio = fill(2 * A, c.audio_in_channels, seed + 2);
    in.text = fill(L, c.text_dim, seed + 3);
    in.segments = {.prefix = {L, 0, 2 * A}, .video_t = l.latent_frames, .video_h = gh, .video_w = gw};
    return in;
}

} // namespace h3::model
