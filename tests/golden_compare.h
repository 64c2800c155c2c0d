// Comparing a tensor with a golden: max |Δ|, the golden's max |value| and the relative RMS error (shared by
// the model golden tests).
#pragma once

#include "core/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

namespace h3::testing_support {

struct Diff {
    double max_abs = 0, ref_max = 0, rel_rms = 0;
};

inline Diff compare(const Tensor& got, const Tensor& want) {
    auto g = to_f32_vector(got), w = to_f32_vector(want);
    EXPECT_EQ(g->size(), w->size());
    Diff d;
    double se = 0, sr = 0;
    for (size_t i = 0; i < std::min(g->size(), w->size()); ++i) {
        double e = std::fabs(double((*g)[i]) - (*w)[i]);
        if (!std::isfinite(double((*g)[i]))) e = INFINITY;
        d.max_abs = std::max(d.max_abs, e);
        d.ref_max = std::max(d.ref_max, std::fabs(double((*w)[i])));
        se += e * e;
        sr += double((*w)[i]) * (*w)[i];
    }
    d.rel_rms = sr > 0 ? std::sqrt(se / sr) : std::sqrt(se);
    return d;
}

} // namespace h3::testing_support
