// Pieces the audio VAE's decoder (audio_vae.cpp) and encoder (audio_vae_encoder.cpp) share: the weight-norm
// fold done at load, and the fp32 conv1d step of their forwards.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "model/audio_vae/audio_vae.h"
#include "ops/context.h"
#include "ops/conv.h"

namespace h3::model {

// W = g · v / ‖v‖ in place on host f32 `v` [rows, ...], the norm over every dim but 0 (accumulated in
// double); g holds one gain per row.
void fold_weight_norm(const Tensor& g, Tensor& v);

// An uninitialized f32 tensor on ctx's device.
Result<Tensor> alloc_f32(const ops::Context& ctx, const Shape& shape);

// y = conv1d(x, c.w, c.b) for x [B, Cin, L] on ctx's device.
Result<Tensor> run_conv1d(const ops::Context& ctx, const ops::Conv1dParams& p, const AudioConv& c,
                          const Tensor& x);

} // namespace h3::model
