// The small denoise setup the generate-level tests share (test_generate, test_parallel): the 64x32,
// 107-frame geometry on a DiT's latent spec, seeded normal tensors, and the relative error the loop's
// parity checks use.
#pragma once

#include "core/tensor.h"
#include "model/dit/dit_model.h"
#include "model/latent_spec.h"
#include "pipeline/geometry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace h3::test {

// The 64x32, 107-frame geometry on the latent spec of `m`'s config (the released VAEs, the model's widths).
inline pipeline::Geometry geometry_64x32(const model::DitModel& m) {
    auto spec = model::derive_latent_spec({.dit = &m.config(), .dit_file = "the test DiT"});
    EXPECT_TRUE(spec.ok()) << spec.status().to_string();
    auto g = pipeline::resolve_geometry({.width = 64, .height = 32, .frames = 107}, *spec);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    return *g;
}

// A host f32 tensor of standard normal draws (std::mt19937 seeded with `seed`).
inline Tensor random_normal(const Shape& s, uint32_t seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> n;
    Tensor t = Tensor::host(s, DType::kF32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = n(g);
    return t;
}

// max |a − b| / max |b|: the loop is chaotic only over many steps (spec §15.11); 3–4 fp32 steps stay close.
inline double rel_err(const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.shape(), b.shape());
    auto x = *to_f32_vector(a), y = *to_f32_vector(b);
    double num = 0, den = 0;
    for (size_t i = 0; i < x.size(); ++i) {
        num = std::max(num, std::fabs(double(x[i]) - y[i]));
        den = std::max(den, std::fabs(double(y[i])));
    }
    return num / den;
}

} // namespace h3::test
