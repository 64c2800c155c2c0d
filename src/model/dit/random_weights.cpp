#include "model/dit/random_weights.h"

#include <cmath>
#include <cstring>

namespace h3::model {

namespace {

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

uint64_t fnv1a(const std::string& s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
    return h;
}

bool ends_with(const std::string& s, const char* suffix) {
    size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

} // namespace

Tensor random_dit_tensor(const TensorSpec& spec, uint64_t seed) {
    Tensor t = Tensor::host(Shape(spec.shape), spec.dtype);
    uint64_t state = seed ^ fnv1a(spec.name);
    const int64_t n = t.numel();
    const bool is_norm = spec.shape.size() == 1 && spec.name.find("norm") != std::string::npos &&
                         !ends_with(spec.name, ".bias");
    const bool is_bias = ends_with(spec.name, ".bias");
    const bool is_adaln = spec.name.find("adaln_proj") != std::string::npos ||
                          spec.name.find("norm_out.linear") != std::string::npos;
    double std_dev = 1.0;
    if (spec.shape.size() == 2) std_dev = 1.0 / std::sqrt(static_cast<double>(spec.shape[1]));
    if (is_adaln) std_dev *= 0.5;
    for (int64_t i = 0; i < n; i += 2) {
        // Box–Muller: two normals per pair of uniforms in (0, 1].
        double u1 = (static_cast<double>(splitmix64(state) >> 11) + 1.0) * 0x1.0p-53;
        double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
        double r = std::sqrt(-2.0 * std::log(u1));
        double z[2] = {r * std::cos(2.0 * M_PI * u2), r * std::sin(2.0 * M_PI * u2)};
        for (int k = 0; k < 2 && i + k < n; ++k) {
            double v;
            if (is_norm)
                v = 1.0 + 0.05 * z[k];
            else if (is_bias)
                v = 0.02 * z[k];
            else
                v = std_dev * z[k];
            store_from_f64(t.data(), spec.dtype, static_cast<size_t>(i + k), v);
        }
    }
    return t;
}

Tensor interleave_qkv(const Tensor& q, const Tensor& k, const Tensor& v, int heads, int head_dim) {
    const int64_t cols = q.dim(1);
    const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(q.dtype());
    Tensor out = Tensor::host(Shape{3 * q.dim(0), cols}, q.dtype());
    auto* dst = static_cast<uint8_t*>(out.data());
    const Tensor* parts[3] = {&q, &k, &v};
    for (int h = 0; h < heads; ++h)
        for (int p = 0; p < 3; ++p)
            for (int r = 0; r < head_dim; ++r) {
                int64_t src_row = static_cast<int64_t>(h) * head_dim + r;
                int64_t dst_row = (static_cast<int64_t>(h) * 3 + p) * head_dim + r;
                std::memcpy(dst + static_cast<size_t>(dst_row) * row_bytes,
                            static_cast<const uint8_t*>(parts[p]->data()) +
                                static_cast<size_t>(src_row) * row_bytes,
                            row_bytes);
            }
    return out;
}

void split_qkv(const Tensor& qkv, int heads, int head_dim, Tensor& q, Tensor& k, Tensor& v) {
    const int64_t cols = qkv.dim(1);
    const int64_t inner = static_cast<int64_t>(heads) * head_dim;
    const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(qkv.dtype());
    q = Tensor::host(Shape{inner, cols}, qkv.dtype());
    k = Tensor::host(Shape{inner, cols}, qkv.dtype());
    v = Tensor::host(Shape{inner, cols}, qkv.dtype());
    Tensor* parts[3] = {&q, &k, &v};
    const auto* src = static_cast<const uint8_t*>(qkv.data());
    for (int h = 0; h < heads; ++h)
        for (int p = 0; p < 3; ++p)
            for (int r = 0; r < head_dim; ++r) {
                int64_t dst_row = static_cast<int64_t>(h) * head_dim + r;
                int64_t src_row = (static_cast<int64_t>(h) * 3 + p) * head_dim + r;
                std::memcpy(static_cast<uint8_t*>(parts[p]->data()) +
                                static_cast<size_t>(dst_row) * row_bytes,
                            src + static_cast<size_t>(src_row) * row_bytes, row_bytes);
            }
}

Tensor swap_row_halves(const Tensor& w) {
    const int64_t rows = w.dim(0), half = rows / 2;
    const size_t half_bytes = static_cast<size_t>(half * w.dim(1)) * dtype_size(w.dtype());
    Tensor out = Tensor::host(w.shape(), w.dtype());
    auto* dst = static_cast<uint8_t*>(out.data());
    const auto* src = static_cast<const uint8_t*>(w.data());
    std::memcpy(dst, src + half_bytes, half_bytes);
    std::memcpy(dst + half_bytes, src, half_bytes);
    return out;
}

Tensor rope_inv_freq(const DitConfig& c) {
    Tensor t = Tensor::host(Shape{c.rope_freq_dim}, DType::kF32);
    for (int k = 0; k < c.rope_freq_dim; ++k)
        t.data_as<float>()[k] =
            static_cast<float>(std::pow(c.rope_theta, -2.0 * k / (2.0 * c.rope_freq_dim)));
    return t;
}

} // namespace h3::model
