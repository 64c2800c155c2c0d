#include "pipeline/audio_resample.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>

namespace h3::pipeline {

namespace {

// One kernel value, float32 throughout, in the order torch evaluates the tensor expressions of
// `_get_sinc_resample_kernel` with dtype=float32 (each binary op with a Python scalar casts the scalar to
// float32 first). The build is ISO C++ (no FMA contraction), so every product and sum rounds on its own.
float kernel_value_f32(int64_t i, int64_t j, const SincKernel& k, float base, float scale, int lw) {
    const float idx = static_cast<float>(i - k.width) / static_cast<float>(k.orig);
    float t = static_cast<float>(-j) / static_cast<float>(k.next) + idx;
    t = t * base;
    t = std::clamp(t, static_cast<float>(-lw), static_cast<float>(lw));
    const float pi = static_cast<float>(M_PI);
    float u = t * pi;
    u = u / static_cast<float>(lw);
    u = u / 2.0f;
    const float c = std::cos(u);
    const float window = c * c;
    t = t * pi;
    const float sinc = t == 0.0f ? 1.0f : std::sin(t) / t;
    return sinc * (window * scale);
}

// dtype=None (transforms.Resample): the index grid in float64, −j/new in float32 (an int64 arange divided by
// an int is promoted to the default float32), the rest in float64, the value cast to float32 at the end.
float kernel_value_f64(int64_t i, int64_t j, const SincKernel& k, double base, double scale, int lw) {
    const double idx = static_cast<double>(i - k.width) / static_cast<double>(k.orig);
    const float tj = static_cast<float>(-j) / static_cast<float>(k.next);
    double t = static_cast<double>(tj) + idx;
    t = t * base;
    t = std::clamp(t, static_cast<double>(-lw), static_cast<double>(lw));
    double u = t * M_PI;
    u = u / lw;
    u = u / 2.0;
    const double c = std::cos(u);
    const double window = c * c;
    t = t * M_PI;
    const double sinc = t == 0.0 ? 1.0 : std::sin(t) / t;
    return static_cast<float>(sinc * (window * scale));
}

Status check_rate(const char* which, int rate) {
    if (rate <= 0)
        return invalid_argument(std::string("resample_audio: ") + which + " sample rate " +
                                std::to_string(rate) + " Hz must be positive");
    return ok_status();
}

} // namespace

Result<SincKernel> sinc_resample_kernel(int orig_rate, int new_rate, const ResampleOptions& o) {
    H3_TRY(check_rate("original", orig_rate));
    H3_TRY(check_rate("target", new_rate));
    if (o.lowpass_filter_width <= 0)
        return invalid_argument("resample_audio: lowpass_filter_width " +
                                std::to_string(o.lowpass_filter_width) + " must be positive");
    if (!(o.rolloff > 0.0 && o.rolloff <= 1.0))
        return invalid_argument("resample_audio: rolloff " + std::to_string(o.rolloff) +
                                " must be in (0, 1]");
    const int64_t g = std::gcd(static_cast<int64_t>(orig_rate), static_cast<int64_t>(new_rate));
    SincKernel k;
    k.orig = orig_rate / g;
    k.next = new_rate / g;
    const double base = static_cast<double>(std::min(k.orig, k.next)) * o.rolloff;
    k.width = static_cast<int64_t>(std::ceil(static_cast<double>(o.lowpass_filter_width * k.orig) / base));
    k.taps = 2 * k.width + k.orig;
    if (k.taps > o.max_kernel_values / k.next)
        return invalid_argument("resample_audio: " + std::to_string(orig_rate) + " Hz -> " +
                                std::to_string(new_rate) + " Hz reduces to " + std::to_string(k.orig) + "/" +
                                std::to_string(k.next) + ", whose sinc kernel (" + std::to_string(k.next) +
                                " phases x " + std::to_string(k.taps) + " taps) is too large");
    const double scale = base / static_cast<double>(k.orig);
    k.values.resize(static_cast<size_t>(k.next * k.taps));
    for (int64_t j = 0; j < k.next; ++j)
        for (int64_t i = 0; i < k.taps; ++i)
            k.values[static_cast<size_t>(j * k.taps + i)] =
                o.kernel == ResampleKernel::kTransform
                    ? kernel_value_f64(i, j, k, base, scale, o.lowpass_filter_width)
                    : kernel_value_f32(i, j, k, static_cast<float>(base), static_cast<float>(scale),
                                       o.lowpass_filter_width);
    return k;
}

Result<Tensor> resample_audio(const Tensor& waveform, int orig_rate, int new_rate, const ResampleOptions& o) {
    H3_TRY(check_rate("original", orig_rate));
    H3_TRY(check_rate("target", new_rate));
    if (!waveform.defined() || waveform.rank() != 2 || waveform.dim(0) < 1)
        return invalid_argument(
            "resample_audio: waveform must be [channels >= 1, samples], got " +
            (waveform.defined() ? waveform.describe() : std::string("an undefined tensor")));
    if (waveform.dtype() != DType::kF32 || !waveform.device().is_cpu())
        return invalid_argument("resample_audio: waveform must be f32 on the host, got " +
                                waveform.describe());
    H3_ASSIGN_OR_RETURN(Tensor x, waveform.contiguous());
    const int64_t channels = x.dim(0), n = x.dim(1);
    if (orig_rate == new_rate) {
        Tensor copy = Tensor::host(x.shape(), DType::kF32);
        if (x.numel() > 0) std::memcpy(copy.data(), x.data(), x.nbytes());
        return copy;
    }
    H3_ASSIGN_OR_RETURN(SincKernel k, sinc_resample_kernel(orig_rate, new_rate, o));
    // ceil(new'·N / orig'): torch evaluates new·N/orig in double, exact enough for any N that fits memory.
    const int64_t out_len = (k.next * n + k.orig - 1) / k.orig;
    Tensor out = Tensor::host(Shape{channels, out_len}, DType::kF32);
    const float* xp = x.data_as<const float>();
    float* yp = out.data_as<float>();
    for (int64_t c = 0; c < channels; ++c) {
        const float* xc = xp + c * n;
        float* yc = yp + c * out_len;
        for (int64_t m = 0; m < out_len; ++m) {
            // Output m is phase j of block l: Σ_i kernel[j][i] · xpad[l·orig' + i], xpad[s] = x[s − width].
            const int64_t l = m / k.next, j = m % k.next;
            const float* kr = k.values.data() + j * k.taps;
            const int64_t s0 = l * k.orig - k.width;
            const int64_t i0 = std::max<int64_t>(0, -s0), i1 = std::min<int64_t>(k.taps, n - s0);
            double acc = 0.0;
            for (int64_t i = i0; i < i1; ++i) acc += static_cast<double>(kr[i]) * xc[s0 + i];
            yc[m] = static_cast<float>(acc);
        }
    }
    return out;
}

} // namespace h3::pipeline
