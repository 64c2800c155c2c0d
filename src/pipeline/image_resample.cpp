#include "pipeline/image_resample.h"

#include "core/check.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace h3::pipeline {

namespace {

// ---- filters (PIL's libImaging/Resample.c definitions, in double)
// -------------------------------------------
double box_filter(double x) {
    return (x > -0.5 && x <= 0.5) ? 1.0 : 0.0;
}
double bilinear_filter(double x) {
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}
double hamming_filter(double x) {
    if (x < 0.0) x = -x;
    if (x == 0.0) return 1.0;
    if (x >= 1.0) return 0.0;
    x = x * M_PI;
    return std::sin(x) / x * (0.54f + 0.46f * std::cos(x)); // PIL's float constants
}
double pil_bicubic_filter(double x) {
    constexpr double a = -0.5;
    if (x < 0.0) x = -x;
    if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1;
    if (x < 2.0) return (((x - 5) * x + 8) * x - 4) * a;
    return 0.0;
}
double sinc_filter(double x) {
    if (x == 0.0) return 1.0;
    x = x * M_PI;
    return std::sin(x) / x;
}
double lanczos_filter(double x) {
    if (-3.0 <= x && x < 3.0) return sinc_filter(x) * sinc_filter(x / 3);
    return 0.0;
}
// torch's HelperInterpCubic::aa_filter (Keys a = −0.5), with its own operation order.
double torch_bicubic_filter(double x) {
    constexpr double A = -0.5;
    x = std::abs(x);
    if (x < 1.0) return ((A + 2) * x - (A + 3)) * x * x + 1;
    if (x < 2.0) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
    return 0.0;
}

struct Filter {
    double (*fn)(double);
    double support;
};

Filter pil_filter(ResampleFilter f) {
    switch (f) {
    case ResampleFilter::kBox:
        return {box_filter, 0.5};
    case ResampleFilter::kBilinear:
        return {bilinear_filter, 1.0};
    case ResampleFilter::kHamming:
        return {hamming_filter, 1.0};
    case ResampleFilter::kBicubic:
        return {pil_bicubic_filter, 2.0};
    case ResampleFilter::kLanczos:
        return {lanczos_filter, 3.0};
    }
    H3_CHECK(false, "unknown resample filter");
    return {};
}

// One axis: for every output index, the first input index, the count and ksize fixed-point weights.
struct AxisWeights {
    int ksize = 0;
    std::vector<int> first, count;
    std::vector<int32_t> w; // [out, ksize]
    int precision = 0;
};

// PIL's precompute_coeffs (and torch's _compute_indices_min_size_weights_aa, which mirrors it), in double.
// Returns the largest normalised weight.
double coefficients(int in_size, int out_size, const Filter& f, bool clamp_count, AxisWeights& aw,
                    std::vector<double>& k) {
    const double scale = static_cast<double>(in_size) / out_size;
    const double filterscale = scale < 1.0 ? 1.0 : scale;
    const double support = f.support * filterscale;
    aw.ksize = static_cast<int>(std::ceil(support)) * 2 + 1;
    aw.first.assign(out_size, 0);
    aw.count.assign(out_size, 0);
    k.assign(static_cast<size_t>(out_size) * aw.ksize, 0.0);
    double wmax = 0.0;
    for (int xx = 0; xx < out_size; ++xx) {
        const double center = (xx + 0.5) * scale;
        const double ss = 1.0 / filterscale;
        int xmin = static_cast<int>(center - support + 0.5);
        if (xmin < 0) xmin = 0;
        int xmax = static_cast<int>(center + support + 0.5);
        if (xmax > in_size) xmax = in_size;
        xmax -= xmin;
        if (clamp_count) xmax = std::clamp(xmax, 0, aw.ksize);
        H3_CHECK(xmax <= aw.ksize, "resample: filter window larger than its buffer");
        double* kk = &k[static_cast<size_t>(xx) * aw.ksize];
        double ww = 0.0;
        for (int x = 0; x < xmax; ++x) {
            const double w = f.fn((x + xmin - center + 0.5) * ss);
            kk[x] = w;
            ww += w;
        }
        for (int x = 0; x < xmax; ++x) {
            if (ww != 0.0) kk[x] /= ww;
            wmax = std::max(wmax, kk[x]);
        }
        aw.first[xx] = xmin;
        aw.count[xx] = xmax;
    }
    return wmax;
}

AxisWeights pil_axis(int in_size, int out_size, ResampleFilter filter) {
    constexpr int kPrecisionBits = 32 - 8 - 2;
    AxisWeights aw;
    std::vector<double> k;
    coefficients(in_size, out_size, pil_filter(filter), false, aw, k);
    aw.precision = kPrecisionBits;
    aw.w.resize(k.size());
    for (size_t i = 0; i < k.size(); ++i)
        aw.w[i] = k[i] < 0 ? static_cast<int32_t>(-0.5 + k[i] * (1 << kPrecisionBits))
                           : static_cast<int32_t>(0.5 + k[i] * (1 << kPrecisionBits));
    return aw;
}

AxisWeights torch_axis(int in_size, int out_size, ResampleFilter filter) {
    const Filter f =
        filter == ResampleFilter::kBicubic ? Filter{torch_bicubic_filter, 2.0} : Filter{bilinear_filter, 1.0};
    AxisWeights aw;
    std::vector<double> k;
    const double wmax = coefficients(in_size, out_size, f, true, aw, k);
    unsigned p = 0;
    for (p = 0; p < 22; ++p) {
        const int next = static_cast<int>(0.5 + wmax * (1 << (p + 1)));
        if (next >= (1 << 15)) break;
    }
    aw.precision = static_cast<int>(p);
    H3_CHECK(aw.precision > 0, "resample: int16 weight precision is 0");
    aw.w.resize(k.size());
    for (size_t i = 0; i < k.size(); ++i) {
        const double v = k[i] * (1 << p);
        aw.w[i] = static_cast<int16_t>(v < 0 ? static_cast<int>(-0.5 + v) : static_cast<int>(0.5 + v));
    }
    return aw;
}

inline uint8_t clip_shift(int64_t acc, int precision) {
    return static_cast<uint8_t>(std::clamp<int64_t>(acc >> precision, 0, 255));
}

io::RgbImage horizontal(const io::RgbImage& in, int out_w, const AxisWeights& aw) {
    io::RgbImage out(out_w, in.height);
    const int64_t half = int64_t(1) << (aw.precision - 1);
    for (int y = 0; y < in.height; ++y) {
        const uint8_t* src = in.row(y);
        uint8_t* dst = out.row(y);
        for (int xx = 0; xx < out_w; ++xx) {
            const int32_t* k = &aw.w[static_cast<size_t>(xx) * aw.ksize];
            const uint8_t* s = src + 3 * aw.first[xx];
            int64_t a0 = half, a1 = half, a2 = half;
            for (int x = 0; x < aw.count[xx]; ++x) {
                a0 += int64_t(s[3 * x]) * k[x];
                a1 += int64_t(s[3 * x + 1]) * k[x];
                a2 += int64_t(s[3 * x + 2]) * k[x];
            }
            dst[3 * xx] = clip_shift(a0, aw.precision);
            dst[3 * xx + 1] = clip_shift(a1, aw.precision);
            dst[3 * xx + 2] = clip_shift(a2, aw.precision);
        }
    }
    return out;
}

io::RgbImage vertical(const io::RgbImage& in, int out_h, const AxisWeights& aw) {
    io::RgbImage out(in.width, out_h);
    const int64_t half = int64_t(1) << (aw.precision - 1);
    const size_t n = static_cast<size_t>(in.width) * 3;
    std::vector<int64_t> acc(n);
    for (int yy = 0; yy < out_h; ++yy) {
        const int32_t* k = &aw.w[static_cast<size_t>(yy) * aw.ksize];
        std::fill(acc.begin(), acc.end(), half);
        for (int y = 0; y < aw.count[yy]; ++y) {
            const uint8_t* s = in.row(aw.first[yy] + y);
            const int64_t w = k[y];
            for (size_t i = 0; i < n; ++i) acc[i] += int64_t(s[i]) * w;
        }
        uint8_t* dst = out.row(yy);
        for (size_t i = 0; i < n; ++i) dst[i] = clip_shift(acc[i], aw.precision);
    }
    return out;
}

template <typename AxisFn>
io::RgbImage separable(const io::RgbImage& in, int width, int height, ResampleFilter filter, AxisFn axis) {
    H3_CHECK(width >= 1 && height >= 1 && !in.empty(), "resample: empty source or target size");
    io::RgbImage cur = in;
    if (width != in.width) cur = horizontal(cur, width, axis(in.width, width, filter));
    if (height != in.height) cur = vertical(cur, height, axis(in.height, height, filter));
    return cur;
}

} // namespace

const char* resample_filter_name(ResampleFilter filter) {
    switch (filter) {
    case ResampleFilter::kBox:
        return "box";
    case ResampleFilter::kBilinear:
        return "bilinear";
    case ResampleFilter::kHamming:
        return "hamming";
    case ResampleFilter::kBicubic:
        return "bicubic";
    case ResampleFilter::kLanczos:
        return "lanczos";
    }
    return "?";
}

io::RgbImage pil_resize(const io::RgbImage& image, int width, int height, ResampleFilter filter) {
    return separable(image, width, height, filter, pil_axis);
}

io::RgbImage torch_resize_aa_u8(const io::RgbImage& image, int width, int height, ResampleFilter filter) {
    H3_CHECK(filter == ResampleFilter::kBilinear || filter == ResampleFilter::kBicubic,
             "torch uint8 antialiased resize supports bilinear and bicubic only");
    return separable(image, width, height, filter, torch_axis);
}

io::RgbImage crop_image(const io::RgbImage& image, int left, int top, int width, int height) {
    H3_CHECK(left >= 0 && top >= 0 && width >= 0 && height >= 0 && left + width <= image.width &&
                 top + height <= image.height,
             "crop box outside the image");
    io::RgbImage out(width, height);
    for (int y = 0; y < height; ++y)
        std::memcpy(out.row(y), image.row(top + y) + 3 * left, static_cast<size_t>(width) * 3);
    return out;
}

} // namespace h3::pipeline
