// BigVGAN activations over [B, C, L] signals. See ops.h for the shared conventions.
#pragma once

#include "core/tensor.h"
#include "ops/context.h"

namespace h3::ops {

// SnakeBeta with log-space parameters: y = x + 1/(exp(beta[c]) + 1e-9) · sin²(exp(alpha[c]) · x).
// x, y [B, C, L] f32 (may alias); alpha, beta [C] f32.
Status snake_beta(const Context& ctx, const Tensor& x, const Tensor& alpha, const Tensor& beta, Tensor& y);

// DAC's Snake (the audio VAE encoder), alpha in linear space: y = x + 1/(alpha[c] + 1e-9) · sin²(alpha[c] ·
// x). x, y [B, C, L] f32 (may alias); alpha [C] f32.
Status snake(const Context& ctx, const Tensor& x, const Tensor& alpha, Tensor& y);

// The alias-free ("anti-aliased") SnakeBeta of BigVGAN / alias-free-torch, fused:
//   up:   replicate-pad x by P = K/r − 1 on both sides, depthwise transposed conv (stride r) with
//         `up_filter`, times r, crop P·r + (K−r)/2 left and P·r + (K−r+1)/2 right  -> length r·L
//   act:  snake_beta (as above)
//   down: replicate-pad K/2 − 1 left and K/2 right, depthwise conv (stride r) with `down_filter` -> length L
// x, y [B, C, L] f32 (must not alias); alpha, beta [C]; up_filter, down_filter [K] f32 with K even, K >= r.
struct AliasFreeParams {
    int ratio = 2;
};
Status alias_free_snake_beta(const Context& ctx, const AliasFreeParams& p, const Tensor& x,
                             const Tensor& alpha, const Tensor& beta, const Tensor& up_filter,
                             const Tensor& down_filter, Tensor& y);

// y = alpha · x, x and y f32 of the same shape (may alias).
Status scale(const Context& ctx, float alpha, const Tensor& x, Tensor& y);

// y = clamp(x, lo, hi), x and y f32 of the same shape (may alias).
Status clamp(const Context& ctx, float lo, float hi, const Tensor& x, Tensor& y);

} // namespace h3::ops
