// Deterministic random DiT weights (same seed → same values on every platform), for tiny checkpoints,
// tests and benches. Values come from splitmix64 + Box–Muller, seeded per tensor by (seed, diffusers name),
// so the diffusers and original layouts hold the same numbers.
#pragma once

#include "core/tensor.h"
#include "model/dit/dit_tensors.h"

#include <cstdint>
#include <string>

namespace h3::model {

// A host tensor for one diffusers-named spec: weights ~ N(0, 1/fan_in), norm weights 1 + 0.05·N,
// biases 0.02·N, AdaLN projections scaled down so that (1 + scale) stays near 1.
Tensor random_dit_tensor(const TensorSpec& diffusers_spec, uint64_t seed);

// Rearranges diffusers tensors into the original format's fused/permuted forms.
// q, k, v [inner, D] → per-head interleaved qkv [3·inner, D].
Tensor interleave_qkv(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim);
// [a; b] → [b; a] along rows (mlp.fc1 ↔ ff.net.0.proj).
Tensor swap_row_halves(const Tensor& w);
// Inverse of interleave_qkv: row range of head h's q/k/v in the fused tensor.
void split_qkv(const Tensor& qkv, int heads, int head_dim, Tensor& q, Tensor& k, Tensor& v);

// rope.inv_freq of the original checkpoint: theta^(−2k/(2·rope_freq_dim)), k < rope_freq_dim.
Tensor rope_inv_freq(const DitConfig& config);

} // namespace h3::model
