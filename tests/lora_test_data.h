// Tiny LoRA adapters for the tiny DiT, written by the tests in every published key layout from one reference
// set of factors (rank 4 on every target: q/k/v/out/FFN of the DiT and refiner blocks, every AdaLN
// projection). Each layout spells the same delta W += B·A: alpha-carrying layouts store B scaled by a power
// of two that their alpha/rank undoes exactly, fused layouts stack q/k/v (block-diagonal B) and swap fc1's
// halves.
#pragma once

#include "io/safetensors.h"
#include "model/dit/dit_tensors.h"
#include "model/dit/random_weights.h"
#include "model/lora/lora_adapter.h"
#include "model/tiny/tiny_checkpoint.h"
#include "ops/random.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace h3::lora_test {

using model::LoraProjection;
using model::LoraTarget;
using Tensors = std::vector<io::NamedTensor>;

constexpr int64_t kRank = 4;

struct RefFactor {
    Tensor a, b; // bf16 [r, in], [out, r]; delta = B·A
};
using RefFactors = std::map<LoraTarget, RefFactor>;

inline RefFactors reference_factors(const model::DitConfig& c, uint64_t seed, float b_bound = 0.05f) {
    RefFactors out;
    const ops::Context cpu = ops::Context::cpu();
    for (const LoraTarget& t : model::all_lora_targets(c)) {
        const model::LoraShape s = model::lora_target_shape(c, t);
        RefFactor f{Tensor::host(Shape{kRank, s.in}, DType::kBF16),
                    Tensor::host(Shape{s.out, kRank}, DType::kBF16)};
        EXPECT_TRUE(ops::fill_uniform(cpu, {.seed = ++seed, .bound = 1.0f}, f.a).ok());
        EXPECT_TRUE(ops::fill_uniform(cpu, {.seed = ++seed, .bound = b_bound}, f.b).ok());
        out[t] = f;
    }
    return out;
}

// t · 2^e, exact in bf16 for the magnitudes used here.
inline Tensor scaled(const Tensor& t, float factor) {
    Tensor out = Tensor::host(t.shape(), t.dtype());
    auto v = *to_f32_vector(t);
    for (auto& x : v) x *= factor;
    Tensor f = host_tensor_from(v, t.shape(), t.dtype());
    std::memcpy(out.data(), f.data(), f.nbytes());
    return out;
}

inline Tensor scalar(float v, DType dt = DType::kF32) {
    return host_tensor_from({v}, Shape{}, dt);
}

inline std::string flat(std::string s) {
    for (char& ch : s)
        if (ch == '.') ch = '_';
    return s;
}

// Rows of the parts one below the other.
inline Tensor vstack(const std::vector<Tensor>& parts) {
    int64_t rows = 0;
    for (const auto& p : parts) rows += p.dim(0);
    Tensor out = Tensor::host(Shape{rows, parts[0].dim(1)}, parts[0].dtype());
    size_t off = 0;
    for (const auto& p : parts) {
        std::memcpy(static_cast<uint8_t*>(out.data()) + off, p.data(), p.nbytes());
        off += p.nbytes();
    }
    return out;
}

// [B_q 0 0; 0 B_k 0; 0 0 B_v] split into its three row blocks (each [inner, 3r]).
inline std::vector<Tensor> block_diagonal_rows(const Tensor& bq, const Tensor& bk, const Tensor& bv) {
    std::vector<Tensor> rows;
    const Tensor* parts[3] = {&bq, &bk, &bv};
    const int64_t r = bq.dim(1), n = bq.dim(0);
    for (int p = 0; p < 3; ++p) {
        Tensor t = Tensor::host(Shape{n, 3 * r}, bq.dtype());
        for (int64_t i = 0; i < n; ++i)
            for (int64_t j = 0; j < r; ++j) t.set({i, p * r + j}, parts[p]->get({i, j}));
        rows.push_back(t);
    }
    return rows;
}

enum class Layout { kDiffusers, kPeft, kKohya, kMusubi, kOriginal, kDiffSynth };
inline const char* layout_name(Layout l) {
    switch (l) {
    case Layout::kDiffusers:
        return "diffusers";
    case Layout::kPeft:
        return "peft";
    case Layout::kKohya:
        return "kohya";
    case Layout::kMusubi:
        return "musubi";
    case Layout::kOriginal:
        return "original";
    case Layout::kDiffSynth:
        return "diffsynth";
    }
    return "?";
}
inline const std::vector<Layout>& all_layouts() {
    static const std::vector<Layout> l = {Layout::kDiffusers, Layout::kPeft,     Layout::kKohya,
                                          Layout::kMusubi,    Layout::kOriginal, Layout::kDiffSynth};
    return l;
}

// The reference factors in one layout.
inline Tensors write_layout(const model::DitConfig& c, const RefFactors& ref, Layout layout) {
    Tensors out;
    const bool diffusers_names =
        layout == Layout::kDiffusers || layout == Layout::kPeft || layout == Layout::kKohya;
    // alpha/rank of the layout and the factor B is stored with (so that alpha/rank·B_file = B).
    const float scale = layout == Layout::kPeft                                   ? 2.0f
                        : (layout == Layout::kKohya || layout == Layout::kMusubi) ? 0.5f
                                                                                  : 1.0f;
    auto key = [&](const std::string& module, const char* part) {
        switch (layout) {
        case Layout::kDiffusers:
            return "transformer." + module + (part[0] == 'A' ? ".lora_A.weight" : ".lora_B.weight");
        case Layout::kPeft:
            return part[0] == 'a' ? "base_model.model." + module + ".alpha"
                                  : "base_model.model." + module +
                                        (part[0] == 'A' ? ".lora_A.weight" : ".lora_B.weight");
        case Layout::kKohya:
        case Layout::kMusubi:
            return "lora_unet_" + flat(module) +
                   (part[0] == 'A'   ? ".lora_down.weight"
                    : part[0] == 'B' ? ".lora_up.weight"
                                     : ".alpha");
        case Layout::kOriginal:
            return "diffusion_model." + module + (part[0] == 'A' ? ".lora_A.weight" : ".lora_B.weight");
        case Layout::kDiffSynth:
            return module + (part[0] == 'A' ? ".lora_A.default.weight" : ".lora_B.default.weight");
        }
        return std::string();
    };
    auto emit = [&](const std::string& module, const Tensor& a, const Tensor& b) {
        out.push_back({key(module, "A"), a});
        out.push_back({key(module, "B"), scaled(b, 1.0f / scale)});
        if (scale != 1.0f)
            out.push_back({key(module, "alpha"), scalar(scale * static_cast<float>(a.dim(0)))});
    };
    if (diffusers_names) {
        for (const auto& [t, f] : ref) emit(model::lora_target_name(t), f.a, f.b);
        return out;
    }
    for (const auto& [t, f] : ref) {
        const std::string orig = *model::original_name_of(model::lora_target_name(t) + ".weight");
        const std::string module = orig.substr(0, orig.size() - 7);
        if (t.proj == LoraProjection::kToK || t.proj == LoraProjection::kToV) continue; // with q below
        if (t.proj == LoraProjection::kToQ) {
            LoraTarget tk = t, tv = t;
            tk.proj = LoraProjection::kToK;
            tv.proj = LoraProjection::kToV;
            const RefFactor &q = f, &k = ref.at(tk), &v = ref.at(tv);
            Tensor a = vstack({q.a, k.a, v.a});
            auto rows = block_diagonal_rows(q.b, k.b, v.b);
            Tensor b = layout == Layout::kDiffSynth
                           ? model::interleave_qkv(rows[0], rows[1], rows[2], c.num_attention_heads,
                                                   c.attention_head_dim)
                           : vstack(rows);
            emit(module, a, b);
        } else if (t.proj == LoraProjection::kFfIn) {
            emit(module, f.a, model::swap_row_halves(f.b)); // original fc1 rows are [gate; value]
        } else {
            emit(module, f.a, f.b);
        }
    }
    return out;
}

} // namespace h3::lora_test
