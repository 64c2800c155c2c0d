// PSNR / SSIM of RGB frames and signal statistics; conventions in quality_metrics.h.
#include "pipeline/quality_metrics.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

namespace h3::pipeline {

namespace {

constexpr int kRadius = kSsimWindow / 2;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// scipy.ndimage's 1-D Gaussian: exp(−x²/2σ²) for x in [−r, r], normalized to sum 1.
std::array<double, kSsimWindow> gaussian_taps() {
    std::array<double, kSsimWindow> g{};
    double sum = 0.0;
    for (int i = 0; i < kSsimWindow; ++i) {
        const double x = i - kRadius;
        g[i] = std::exp(-0.5 * x * x / (kSsimSigma * kSsimSigma));
        sum += g[i];
    }
    for (double& v : g) v /= sum;
    return g;
}

// Mean SSIM of channel `c` of two interleaved RGB frames. The separable window runs along rows into a ring
// of kSsimWindow filtered rows (five moments each), then down the columns for every valid output row.
double ssim_channel(const uint8_t* a, const uint8_t* b, int h, int w, int c) {
    static const std::array<double, kSsimWindow> g = gaussian_taps();
    const double c1 = (kSsimK1 * kPixelRange) * (kSsimK1 * kPixelRange);
    const double c2 = (kSsimK2 * kPixelRange) * (kSsimK2 * kPixelRange);
    const int ow = w - 2 * kRadius, oh = h - 2 * kRadius;
    // ring[row % 11][moment][x]: moments x, y, x², y², xy
    std::vector<double> ring(static_cast<size_t>(kSsimWindow) * 5 * ow);
    std::vector<double> rx(w), ry(w);
    double sum = 0.0;
    for (int y = 0; y < h; ++y) {
        for (int x = 0; x < w; ++x) {
            rx[x] = a[(static_cast<int64_t>(y) * w + x) * 3 + c];
            ry[x] = b[(static_cast<int64_t>(y) * w + x) * 3 + c];
        }
        double* r = ring.data() + static_cast<size_t>(y % kSsimWindow) * 5 * ow;
        for (int x = 0; x < ow; ++x) {
            double m[5] = {0, 0, 0, 0, 0};
            for (int k = 0; k < kSsimWindow; ++k) {
                const double u = rx[x + k], v = ry[x + k], gk = g[k];
                m[0] += gk * u;
                m[1] += gk * v;
                m[2] += gk * (u * u);
                m[3] += gk * (v * v);
                m[4] += gk * (u * v);
            }
            for (int q = 0; q < 5; ++q) r[q * ow + x] = m[q];
        }
        if (y < kSsimWindow - 1) continue;
        const int oy = y - (kSsimWindow - 1);
        for (int x = 0; x < ow; ++x) {
            double m[5] = {0, 0, 0, 0, 0};
            for (int k = 0; k < kSsimWindow; ++k) {
                const double* rk = ring.data() + static_cast<size_t>((oy + k) % kSsimWindow) * 5 * ow;
                for (int q = 0; q < 5; ++q) m[q] += g[k] * rk[q * ow + x];
            }
            const double ux = m[0], uy = m[1];
            const double vx = m[2] - ux * ux, vy = m[3] - uy * uy, vxy = m[4] - ux * uy;
            sum += ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2));
        }
    }
    return sum / (static_cast<double>(oh) * ow);
}

} // namespace

double mse_u8(const uint8_t* a, const uint8_t* b, int64_t n) {
    if (n <= 0) return 0.0;
    uint64_t s = 0;
    for (int64_t i = 0; i < n; ++i) {
        const int d = static_cast<int>(a[i]) - static_cast<int>(b[i]);
        s += static_cast<uint64_t>(d * d);
    }
    return static_cast<double>(s) / static_cast<double>(n);
}

double psnr_from_mse(double mse, double range) {
    if (mse <= 0.0) return kInf;
    return 10.0 * std::log10(range * range / mse);
}

Result<double> ssim_rgb(const uint8_t* a, const uint8_t* b, int height, int width,
                        std::array<double, 3>* channels) {
    if (height < kSsimWindow || width < kSsimWindow)
        return invalid_argument("SSIM needs frames of at least " + std::to_string(kSsimWindow) + "x" +
                                std::to_string(kSsimWindow) + " pixels, got " + std::to_string(width) + "x" +
                                std::to_string(height));
    std::array<double, 3> ch{};
    for (int c = 0; c < 3; ++c) ch[c] = ssim_channel(a, b, height, width, c);
    if (channels) *channels = ch;
    return (ch[0] + ch[1] + ch[2]) / 3.0;
}

Result<FrameMetrics> frame_metrics(const Tensor& a, const Tensor& b, int threads) {
    auto ok_frames = [](const Tensor& t) {
        return t.defined() && t.rank() == 4 && t.dim(3) == 3 && t.dtype() == DType::kU8 &&
               t.device().is_cpu() && t.is_contiguous();
    };
    if (!ok_frames(a) || !ok_frames(b))
        return invalid_argument("frame_metrics: frames must be contiguous host u8 [F, H, W, 3] tensors");
    if (!(a.shape() == b.shape()))
        return invalid_argument("frame_metrics: frame tensors differ in shape: " + a.describe() + " vs " +
                                b.describe());
    const int64_t nf = a.dim(0);
    const int h = static_cast<int>(a.dim(1)), w = static_cast<int>(a.dim(2));
    if (h < kSsimWindow || w < kSsimWindow) return ssim_rgb(nullptr, nullptr, h, w).status();
    const int64_t frame_bytes = static_cast<int64_t>(h) * w * 3;
    FrameMetrics m;
    m.psnr.resize(static_cast<size_t>(nf));
    m.ssim.resize(static_cast<size_t>(nf));
    m.mse.resize(static_cast<size_t>(nf));
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = static_cast<int>(std::min<int64_t>(threads, std::max<int64_t>(nf, 1)));
    std::atomic<int64_t> next{0};
    auto work = [&] {
        for (int64_t f = next++; f < nf; f = next++) {
            const uint8_t* pa = a.data_as<const uint8_t>() + f * frame_bytes;
            const uint8_t* pb = b.data_as<const uint8_t>() + f * frame_bytes;
            m.mse[f] = mse_u8(pa, pb, frame_bytes);
            m.psnr[f] = psnr_from_mse(m.mse[f]);
            m.ssim[f] = *ssim_rgb(pa, pb, h, w);
        }
    };
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    return m;
}

void SignalAccumulator::add(const float* a, const float* b, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        const double x = a[i], y = b[i], d = x - y;
        aa_ += x * x;
        bb_ += y * y;
        ab_ += x * y;
        dd_ += d * d;
        max_abs_ = std::max(max_abs_, std::fabs(d));
    }
    n_ += n;
}

void SignalAccumulator::merge(const SignalAccumulator& o) {
    n_ += o.n_;
    aa_ += o.aa_;
    bb_ += o.bb_;
    ab_ += o.ab_;
    dd_ += o.dd_;
    max_abs_ = std::max(max_abs_, o.max_abs_);
}

SignalMetrics SignalAccumulator::finish() const {
    SignalMetrics m;
    m.count = n_;
    m.max_abs_diff = max_abs_;
    if (n_ == 0) {
        m.snr_db = m.rms_ratio = kNaN;
        return m;
    }
    const double n = static_cast<double>(n_);
    m.rms_a = std::sqrt(aa_ / n);
    m.rms_b = std::sqrt(bb_ / n);
    m.rmse = std::sqrt(dd_ / n);
    m.cosine = aa_ > 0.0 && bb_ > 0.0 ? ab_ / std::sqrt(aa_ * bb_) : kNaN;
    m.snr_db = dd_ == 0.0 ? kInf : aa_ == 0.0 ? -kInf : 10.0 * std::log10(aa_ / dd_);
    m.rms_ratio = aa_ > 0.0 ? m.rms_b / m.rms_a : bb_ > 0.0 ? kInf : kNaN;
    m.rel_rms = dd_ == 0.0 ? 0.0 : aa_ > 0.0 ? std::sqrt(dd_ / aa_) : kInf;
    return m;
}

SignalMetrics signal_metrics(const float* a, const float* b, int64_t n) {
    SignalAccumulator acc;
    acc.add(a, b, n);
    return acc.finish();
}

} // namespace h3::pipeline
