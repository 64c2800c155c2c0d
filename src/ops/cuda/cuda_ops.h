// The CUDA halves of the ops, one per public op, with exactly the public signatures (ops/<family>.h).
// Only the dispatchers (ops/<family>.cpp) call these, and only after validation, so an implementation may
// assume everything below and needs no checks of its own beyond launch/runtime errors.
//
// What the dispatcher guarantees on entry (same contract as cpu_impl, ops/cpu/cpu_ops.h):
//  - ctx.is_cuda(), ctx.cuda != nullptr, and every defined tensor argument lives on ctx.device.
//  - Shapes and dtypes are exactly as documented in the public header; float arguments are f32/bf16/f16
//    (cast also accepts every dtype), index arguments are i32 or i64, output tensors are not read-only.
//  - Activations (x, y, h, q, k, v, o, src, dst, weight, bias, cos, sin, index/row) are contiguous.
//    Table arguments (modulate shift/scale, gated_residual gate) are 2-D with stride(1) == 1 and
//    stride(0) >= cols: use t.stride(0) as the row pitch in elements.
//  - Parameters are resolved: AttentionParams::scale > 0 (0 was replaced by 1/sqrt(D));
//    RopeParams::rotary_dim is even, > 0 and <= Dh (0 was replaced by cos.dim(1)), and cos/sin are
//    [S, rotary_dim] in f32 or x's dtype.
//  - Row/index VALUES are NOT checked for device tensors (that would need a device->host copy and a sync):
//    kernels must never read or write out of bounds for an index outside [0, T) — skip that row (leave its
//    output unchanged). Host-side validation covers the CPU path only.
//  - Element counts fit in int64; any dimension may be 1 or odd (no alignment or multiple-of-N assumed).
//
// Semantics to match the CPU reference (tests compare the two, see tests/test_ops.cpp):
//  - gemm: fp32 accumulation, bias added in fp32, `accumulate` adds the old y (read in fp32) before the
//  single
//    rounding to y's dtype; alpha multiplies x·Wᵀ only (not bias, not old y).
//  - rms_norm: inv = 1/sqrt(mean(x²)+eps) in fp32; n = x·inv; with round_normed n is rounded to y's dtype;
//    then n·weight (weight read in fp32), one rounding at the store.
//  - modulate: t = x·(1+scale); with round_intermediate (1+scale) and t are rounded to y's dtype;
//    y = t + shift.
//  - rope with round_tables: tables rounded to x's dtype and each product rounded before the sum.
//  - gated_residual: g = gate·y; with round_intermediate g is rounded to h's dtype; h = h + g.
//  - rms_norm_modulate: == rms_norm into a temporary of x's dtype (x's dtype is what PyTorch's RMSNorm
//    returns), then modulate into y.
//  - head_norm_rope: == per-head rms_norm (rows of Dh, output in x's dtype, in place) then rope (if cos is
//    defined).
//  - gated_residual_rms_norm: == gated_residual, then rms_norm of the updated h (as stored in h's dtype)
//    into out; the sum of squares may be taken in another order. out may alias y.
//  - rms_norm_modulate_fp8 / rms_norm_fp8 / gated_residual_rms_norm_fp8 / swiglu_fp8: == the producer into a
//    bf16 temporary, then quantize_rows_fp8, the same bytes and scales (and the same h); a row
//    rms_norm_modulate or gated_residual_rms_norm would skip comes out as zeros with scale 1.
//  - attention: softmax in fp32 with max subtraction; o rounded once to o's dtype.
#pragma once

#include "ops/ops.h"
#include "ops/random.h"

#include <functional>

namespace h3::ops::cuda_impl {

Status gemm(const Context& ctx, const GemmParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
            Tensor& y);

Status rms_norm(const Context& ctx, const RmsNormParams& p, const Tensor& x, const Tensor& weight, Tensor& y);

Status silu(const Context& ctx, const Tensor& x, Tensor& y);
Status gelu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y);
Status swiglu(const Context& ctx, const Tensor& x, Tensor& y);
Status geglu(const Context& ctx, const GeluParams& p, const Tensor& x, Tensor& y);
Status cast(const Context& ctx, const Tensor& x, Tensor& y);
Status add(const Context& ctx, const Tensor& x, const Tensor& z, Tensor& y);
Status axpby(const Context& ctx, float alpha, const Tensor& x, float beta, const Tensor& z, Tensor& y);
Status l1_sums(const Context& ctx, const Tensor& cur, const Tensor& ref, L1Sums& out);

Status rope(const Context& ctx, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin);

Status gather_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst);
Status scatter_rows(const Context& ctx, const Tensor& src, const Tensor& index, Tensor& dst);

Status modulate(const Context& ctx, const ModulateParams& p, const Tensor& x, const Tensor& shift,
                const Tensor& scale, const Tensor& row, Tensor& y);
Status gated_residual(const Context& ctx, const GatedResidualParams& p, Tensor& h, const Tensor& gate,
                      const Tensor& y, const Tensor& row);

Status rms_norm_modulate(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                         const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                         const Tensor& row, Tensor& y);
Status head_norm_rope(const Context& ctx, const RmsNormParams& np, const RopeParams& rp, Tensor& x,
                      const Tensor& weight, const Tensor& cos, const Tensor& sin);
Status gated_residual_rms_norm(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                               Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                               const Tensor& norm_weight, Tensor& out);

Status attention(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                 const Tensor& v, Tensor& o);
// A batched call (p.batch > 1) as one cuDNN call when cuDNN's graph covers it (kAuto / kCudnn); `ran` false
// otherwise (the dispatcher then runs the items one by one); kCudnn that cannot run is an error.
Status attention_batched(const Context& ctx, const AttentionParams& p, const Tensor& q, const Tensor& k,
                         const Tensor& v, Tensor& o, bool& ran);
std::vector<std::string> attention_candidates(const Context& ctx, const AttentionParams& p, const Tensor& q,
                                              const Tensor& k, const Tensor& v, const Tensor& o);
Status attention_candidate(const Context& ctx, const std::string& name, const AttentionParams& p,
                           const Tensor& q, const Tensor& k, const Tensor& v, Tensor& o);
Status attention_merge(const Context& ctx, const Tensor& o_a, const Tensor& lse_a, const Tensor& o_b,
                       const Tensor& lse_b, Tensor& o, Tensor& lse);

Status fill_uniform(const Context& ctx, const FillUniformParams& p, Tensor& x);

// fp8 GEMM (ops/gemm_fp8.h): rows of x (any float dtype) to e4m3 with per-row power-of-two scales, and the
// scaled e4m3 product.
Status quantize_rows_fp8(const Context& ctx, const Tensor& x, Tensor& x8, Tensor& scale);
// The product on x already rounded (x8 [M, K] f8_e4m3, x_scale [M] f32).
Status gemm_fp8_quantized(const Context& ctx, const Fp8GemmParams& p, const Tensor& x8, const Tensor& x_scale,
                          const Fp8Weight& w, const Tensor& bias, Tensor& y);
Status gemm_fp8(const Context& ctx, const Fp8GemmParams& p, const Tensor& x, const Fp8Weight& w,
                const Tensor& bias, Tensor& y);
// The producers fused with quantize_rows_fp8 (ops/fp8_fused.h): one block per row.
Status rms_norm_modulate_fp8(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                             const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                             const Tensor& row, Fp8Activation& out);
Status rms_norm_fp8(const Context& ctx, const RmsNormParams& np, const Tensor& x, const Tensor& weight,
                    Fp8Activation& out);
Status gated_residual_rms_norm_fp8(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                                   Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                                   const Tensor& norm_weight, Fp8Activation& out);
Status swiglu_fp8(const Context& ctx, const Tensor& h, Fp8Activation& out);

// Convolutions, BigVGAN activations and LayerNorm (ops/conv.h, ops/audio_act.h, ops/layer_norm.h): all f32
// except layer_norm (any float dtypes).
Status conv1d(const Context& ctx, const Conv1dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y);
Status conv_transpose1d(const Context& ctx, const ConvTranspose1dParams& p, const Tensor& x, const Tensor& w,
                        const Tensor& bias, Tensor& y);
Status snake_beta(const Context& ctx, const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y);
Status snake(const Context& ctx, const Tensor& x, const Tensor& alpha, Tensor& y);
Status alias_free_snake_beta(const Context& ctx, const AliasFreeParams& p, const Tensor& x,
                             const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                             const Tensor& down_filter, Tensor& y);
Status scale(const Context& ctx, float alpha, const Tensor& x, Tensor& y);
Status clamp(const Context& ctx, float lo, float hi, const Tensor& x, Tensor& y);
Status layer_norm(const Context& ctx, const LayerNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y);

// int8 weights and the non-finite flag (ops/quant.h).
Status dequantize_rows(const Context& ctx, const Tensor& q, const Tensor& scale, Tensor& w);
Status mark_nonfinite(const Context& ctx, const Tensor& x, Tensor& flag);

// Batched transpose (ops/transpose.h): any dtype, raw bits.
Status transpose(const Context& ctx, const Tensor& x, Tensor& y);

// Video VAE encoder ops (ops/conv3d.h, ops/group_norm.h): f32 only.
Status conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y);
Status group_norm(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                  const Tensor& bias, Tensor& y);
Status group_norm_stats(const Context& ctx, const GroupNormParams& p, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Tensor& scale, Tensor& shift);
Status group_norm_apply(const Context& ctx, const GroupNormApplyParams& p, const Tensor& x,
                        const Tensor& scale, const Tensor& shift, Tensor& y);

// The sampling loop's Euler step and the tiled VAE's assembly (ops/sampling.h, ops/tiles.h): f32 only.
Status euler_update(const Context& ctx, const EulerParams& p, Tensor& x, const Tensor& v);
Status blend_tile(const Context& ctx, const BlendTileParams& p, const Tensor& cur, const Tensor& up,
                  const Tensor& left, Tensor& out);
Status crossfade_frames(const Context& ctx, const CrossfadeParams& p, const Tensor& src, const Tensor& prev,
                        Tensor& out);
Status crop_tile(const Context& ctx, const CropTileParams& p, const Tensor& src, Tensor& out);
// Video sparse attention (ops/vsa.h).
Status vsa_pool(const Context& ctx, const VsaTiles& tiles, const Tensor& x, Tensor& out);
Status vsa_pool_qkv(const Context& ctx, const VsaTiles& tiles, const Tensor& q, const Tensor& k,
                    const Tensor& v, Tensor& out);
Status vsa_tile_scores(const Context& ctx, const Tensor& q_pooled, const Tensor& k_pooled, Tensor& scores);
Status vsa_select(const Context& ctx, const VsaSelectParams& p, const VsaTiles& tiles, const Tensor& scores,
                  Tensor& lists);
Status block_sparse_attention(const Context& ctx, const BlockSparseAttentionParams& p, const VsaTiles& tiles,
                              const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lists,
                              Tensor& o);
Status vsa_compress_tiles(const Context& ctx, const Tensor& scores, const Tensor& v_pooled, Tensor& oc);
Status vsa_gate_add(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles, const Tensor& oc,
                    const Tensor& gate, Tensor& o);
Status vsa_gate_add_fp8(const Context& ctx, const VsaGateAddParams& p, const VsaTiles& tiles,
                        const Tensor& oc, const Tensor& gate, const Tensor& o, Fp8Activation& out);
// The video decoder's sample to RGB24 frames (ops/frames.h).
Status sample_to_rgb8(const Context& ctx, const SampleToRgb8Params& p, const Tensor& sample, Tensor& frames);

// Recorded work (ops/graph.h): `exec` receives the cudaGraphExec_t, `nodes` its node count.
Status graph_record(const Context& ctx, const std::function<Status()>& work, void*& exec, size_t& nodes);
Status graph_launch(const Context& ctx, void* exec);
void graph_destroy(void* exec);
uint64_t graph_epoch(const Context& ctx);
bool stream_recording(const Context& ctx);

} // namespace h3::ops::cuda_impl
