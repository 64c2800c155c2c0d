// The work of a video decode, counted from the decoder config and the clip/tile layout the decode runs
// (spec §9.2–9.3, §14): FLOPs of the GEMMs and of the attention, and the bytes that must cross HBM at
// least (the weights once per decoder call, each call's latents in and pixels out). `bench vae` divides its
// time into these (achieved TFLOP/s, the roofline bound); docs/benchmarks.md states the formulas.
#pragma once

#include "core/dtype.h"
#include "model/video_vae/video_vae.h"

#include <cstdint>

namespace h3::model {

struct VideoDecodeCost {
    int64_t tile_clips = 0; // decoder tile-clips (tiles × clips)
    int64_t calls = 0;      // decoder calls (tiles of one clip batched per video_tile_batch)
    int64_t rows = 0;       // token rows through the blocks, summed over tile-clips (S = n + registers + 1)
    // 2·m·n·k per GEMM: the 6 block GEMMs (q/k/v/out, ff in/out) on every row, 36 blocks; and the fp32
    // ones outside the blocks (post_quant_conv, proj_in, proj_out on the n latent-voxel rows).
    double block_gemm_flops = 0, other_gemm_flops = 0;
    // QKᵀ and P·V per tile-clip and block: 2·S²·D each (4·S²·D), D = heads·head_dim.
    double attention_flops = 0;
    // Bytes read at least once per call: the block GEMM weights and biases in `weight_dtype` plus the fp32
    // rest (norms, scales, registers, post_quant/proj_in/norm_out/proj_out), times the calls.
    double weight_bytes = 0;
    // Each call's input latents (f32) and output pixels (f32), over all calls.
    double activation_bytes = 0;

    double gemm_flops() const { return block_gemm_flops + other_gemm_flops; }
    double flops() const { return gemm_flops() + attention_flops; }
    double bytes() const { return weight_bytes + activation_bytes; }
};

// The decode of latents [1, C, latent_frames, lh, lw] with `options` on `device` (its tile batching):
// the clips of plan_clips, the tiles of split_tiles (or one tile per clip untiled), batched as the decode
// batches them. `weight_dtype`: the block GEMM weights' storage (f16/bf16/f32 with biases alike; f8_e4m3
// counts one byte per weight plus a per-channel fp32 scale and fp32 bias).
VideoDecodeCost video_decode_cost(const VideoVaeConfig& config, int64_t latent_frames, int64_t lh, int64_t lw,
                                  const VideoDecodeOptions& options, Device device, DType weight_dtype);

} // namespace h3::model
