#include "model/video_vae/video_vae_cost.h"

#include "model/video_vae/video_vae_layout.h"

#include <algorithm>
#include <vector>

namespace h3::model {

namespace {

// The fp32 decoder tensors outside the block GEMMs (bytes), the block GEMM weight matrices (elements) and
// their output channels (one bias each; an fp8 weight also has one fp32 scale each).
struct WeightSizes {
    double f32_bytes = 0, gemm_elements = 0, gemm_channels = 0;
};
WeightSizes weight_sizes(const VideoVaeConfig& c) {
    const double d = c.dim(), f = c.ffn_dim(), lc = c.latent_channels, pd = c.patch_dim();
    WeightSizes w;
    // per block: q/k/v/out [D, D] + ff in [2F, D] + ff out [D, F], and their biases
    w.gemm_elements = c.num_layers * (4 * d * d + 2 * f * d + d * f);
    w.gemm_channels = c.num_layers * (4 * d + 2 * f + d);
    const double per_block_f32 = 4 * d; // norm1, norm2, scale1, scale2
    const double rest = lc * lc + lc + d * lc + d + c.num_register_tokens * d + 2 * d + pd * d + pd;
    w.f32_bytes = 4 * (c.num_layers * per_block_f32 + rest);
    return w;
}

} // namespace

VideoDecodeCost video_decode_cost(const VideoVaeConfig& c, int64_t latent_frames, int64_t lh, int64_t lw,
                                  const VideoDecodeOptions& opt, Device device, DType weight_dtype) {
    VideoDecodeCost cost;
    const ClipPlan plan = plan_clips(static_cast<int>(latent_frames), c.clip_length, c.patch_t, c.token_drop);
    const int64_t padded = latent_frames + plan.pad_tokens;
    const int p = c.patch;
    std::vector<int> tile_h = {static_cast<int>(lh)}, tile_w = {static_cast<int>(lw)}; // latents per tile
    if (opt.tiling) {
        tile_h.clear(), tile_w.clear();
        for (int len : split_tiles(static_cast<int>(lh * p), opt.tile, opt.min_overlap, p).lengths)
            tile_h.push_back(len / p);
        for (int len : split_tiles(static_cast<int>(lw * p), opt.tile, opt.min_overlap, p).lengths)
            tile_w.push_back(len / p);
    }
    const int tiles = static_cast<int>(tile_h.size() * tile_w.size());
    const int64_t max_batch = opt.tiling ? video_tile_batch(opt, device, tiles) : 1;
    const double d = c.dim(), f = c.ffn_dim(), lc = c.latent_channels, pd = c.patch_dim();
    const double block_params = 4 * d * d + 2 * f * d + d * f; // multiply-adds per row per block
    for (int start : plan.starts) {
        const int64_t t = std::min<int64_t>(plan.clip_latents, padded - start);
        // the decode's batching: consecutive tiles (row-major) of one shape, at most max_batch per call
        int64_t batch = 0, batch_h = -1, batch_w = -1;
        for (int th : tile_h)
            for (int tw : tile_w) {
                if (batch > 0 && (batch >= max_batch || th != batch_h || tw != batch_w)) batch = 0;
                if (batch == 0) ++cost.calls, batch_h = th, batch_w = tw;
                ++batch;
                const double n = static_cast<double>(t) * th * tw;
                const double s = n + c.num_register_tokens + 1;
                ++cost.tile_clips;
                cost.rows += static_cast<int64_t>(s);
                cost.block_gemm_flops += 2 * s * block_params * c.num_layers;
                cost.attention_flops += 4 * s * s * d * c.num_layers;
                cost.other_gemm_flops += 2 * n * (lc * lc + lc * d + d * pd);
                cost.activation_bytes += 4 * n * lc + 4 * n * pd; // latents in, pixels out (f32)
            }
    }
    const WeightSizes w = weight_sizes(c);
    // e4m3: one byte a weight, an fp32 scale and an fp32 bias per channel; else weights and biases in the
    // storage dtype
    const double gemm_bytes =
        weight_dtype == DType::kF8E4M3
            ? w.gemm_elements + 8 * w.gemm_channels
            : (w.gemm_elements + w.gemm_channels) * static_cast<double>(dtype_size(weight_dtype));
    cost.weight_bytes = static_cast<double>(cost.calls) * (gemm_bytes + w.f32_bytes);
    return cost;
}

} // namespace h3::model
