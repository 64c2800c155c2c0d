#include "model/audio_vae/audio_vae.h"

#include "core/cuda_api.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "model/audio_vae/audio_vae_common.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <cmath>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

// Modified Bessel function of the first kind, order 0 (power series; converges fast for the β ≈ 5 used).
double bessel_i0(double x) {
    double sum = 1.0, term = 1.0;
    for (int k = 1; k < 200; ++k) {
        term *= (x / (2.0 * k)) * (x / (2.0 * k));
        sum += term;
        if (term < 1e-17 * sum) break;
    }
    return sum;
}

} // namespace

std::vector<float> kaiser_sinc_filter(double cutoff, double half_width, int kernel_size) {
    const int half = kernel_size / 2;
    const double att = 2.285 * (half - 1) * M_PI * (4 * half_width) + 7.95;
    double beta = 0.0;
    if (att > 50.0)
        beta = 0.1102 * (att - 8.7);
    else if (att >= 21.0)
        beta = 0.5842 * std::pow(att - 21.0, 0.4) + 0.07886 * (att - 21.0);
    std::vector<double> f(static_cast<size_t>(kernel_size));
    double sum = 0.0;
    for (int n = 0; n < kernel_size; ++n) {
        const double r = kernel_size > 1 ? 2.0 * n / (kernel_size - 1) - 1.0 : 0.0;
        const double window = bessel_i0(beta * std::sqrt(std::max(0.0, 1.0 - r * r))) / bessel_i0(beta);
        const double t = (kernel_size % 2 == 0) ? (n - half) + 0.5 : n - half;
        const double a = 2.0 * cutoff * t;
        const double sinc = a == 0.0 ? 1.0 : std::sin(M_PI * a) / (M_PI * a);
        f[static_cast<size_t>(n)] = 2.0 * cutoff * window * sinc;
        sum += f[static_cast<size_t>(n)];
    }
    std::vector<float> out(f.size());
    for (size_t i = 0; i < f.size(); ++i) out[i] = static_cast<float>(f[i] / sum);
    return out;
}

namespace {

class AudioLoader {
public:
    AudioLoader(const io::TensorSet& ts, const std::string& dir, Device dev)
        : ts_(ts), dir_(dir), dev_(dev) {}

    Result<Tensor> host(const std::string& name, const Shape& shape) {
        if (!ts_.contains(name)) return bad_input("audio VAE " + dir_ + " lacks tensor '" + name + "'");
        H3_ASSIGN_OR_RETURN(Tensor t, ts_.tensor(name));
        if (!(t.shape() == shape))
            return bad_input("audio VAE " + dir_ + ": tensor '" + name + "' has shape " +
                             t.shape().to_string() + ", the config implies " + shape.to_string());
        if (!dtype_is_float(t.dtype()))
            return bad_input("audio VAE " + dir_ + ": tensor '" + name + "' is not a float tensor");
        return t.to_dtype(DType::kF32);
    }
    Result<Tensor> get(const std::string& name, const Shape& shape) {
        H3_ASSIGN_OR_RETURN(Tensor t, host(name, shape));
        return place(t);
    }
    Result<Tensor> place(const Tensor& t) { return dev_.is_cpu() ? Result<Tensor>(t) : t.to(dev_); }

    // W = g · v / ‖v‖ (norm over every dim but 0); `shape` is v's shape.
    Result<Tensor> weight_norm(const std::string& name, const Shape& shape) {
        H3_ASSIGN_OR_RETURN(Tensor g, host(name + ".weight_g", Shape{shape[0], 1, 1}));
        H3_ASSIGN_OR_RETURN(Tensor v, host(name + ".weight_v", shape));
        fold_weight_norm(g, v);
        return place(v);
    }
    Result<AudioConv> conv(const std::string& name, int64_t a, int64_t b, int64_t k, int64_t bias_n) {
        AudioConv c;
        H3_ASSIGN_OR_RETURN(c.w, weight_norm(name, Shape{a, b, k}));
        if (bias_n > 0) {
            H3_ASSIGN_OR_RETURN(c.b, get(name + ".bias", Shape{bias_n}));
        }
        return c;
    }
    Result<AudioAct> act(const std::string& prefix, int64_t ch, const std::vector<float>& filter) {
        AudioAct a;
        H3_ASSIGN_OR_RETURN(a.alpha, get(prefix + ".act.alpha", Shape{ch}));
        H3_ASSIGN_OR_RETURN(a.beta, get(prefix + ".act.beta", Shape{ch}));
        // The checkpoint stores the resampling filters as buffers: they must be the ones computed here.
        for (const char* buf : {".upsample.filter", ".downsample.lowpass.filter"}) {
            const std::string n = prefix + buf;
            if (!ts_.contains(n)) continue;
            const int64_t k = static_cast<int64_t>(filter.size());
            H3_ASSIGN_OR_RETURN(Tensor f, host(n, Shape{1, 1, k}));
            for (int64_t i = 0; i < k; ++i)
                if (std::fabs(f.data_as<const float>()[i] - filter[static_cast<size_t>(i)]) > 1e-6f)
                    return bad_input("audio VAE " + dir_ + ": buffer '" + n +
                                     "' differs from the Kaiser sinc filter (cutoff 0.25, half-width 0.3)");
        }
        return a;
    }

private:
    const io::TensorSet& ts_;
    std::string dir_;
    Device dev_;
};

} // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> audio_vae_decoder_tensors(const AudioVaeConfig& c) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    auto conv = [&](const std::string& n, int64_t a, int64_t b, int64_t k, int64_t bias_n) {
        if (bias_n > 0) t.push_back({n + ".bias", {bias_n}});
        t.push_back({n + ".weight_g", {a, 1, 1}});
        t.push_back({n + ".weight_v", {a, b, k}});
    };
    auto act = [&](const std::string& n, int64_t ch) {
        t.push_back({n + ".act.alpha", {ch}});
        t.push_back({n + ".act.beta", {ch}});
        t.push_back({n + ".downsample.lowpass.filter", {1, 1, 12}});
        t.push_back({n + ".upsample.filter", {1, 1, 12}});
    };
    t.push_back({"dec_in_proj.weight", {c.latent_dim, c.latent_channels, 1}});
    t.push_back({"dec_in_proj.bias", {c.latent_dim}});
    conv("decoder.conv_pre", c.decoder_dim, c.latent_dim, 7, c.decoder_dim);
    int64_t ch = c.decoder_dim;
    const size_t nk = c.resblock_kernel_sizes.size();
    for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
        conv("decoder.ups." + std::to_string(i) + ".0", ch, ch / 2, c.decoder_kernel_sizes[i], ch / 2);
        ch /= 2;
        for (size_t j = 0; j < nk; ++j) {
            const std::string pre = "decoder.resblocks." + std::to_string(i * nk + j) + ".";
            const int k = c.resblock_kernel_sizes[j];
            for (size_t m = 0; m < c.resblock_dilation_sizes[j].size(); ++m) {
                conv(pre + "convs1." + std::to_string(m), ch, ch, k, ch);
                conv(pre + "convs2." + std::to_string(m), ch, ch, k, ch);
            }
            for (size_t a = 0; a < 2 * c.resblock_dilation_sizes[j].size(); ++a)
                act(pre + "activations." + std::to_string(a), ch);
        }
    }
    act("decoder.activation_post", ch);
    conv("decoder.conv_post", 1, ch, 7, 0);
    return t;
}

Result<AudioVae> load_audio_vae(const std::string& dir, Device device) {
    AudioVae vae;
    vae.device = device;
    H3_ASSIGN_OR_RETURN(vae.config, AudioVaeConfig::from_file((fs::path(dir) / "config.json").string()));
    H3_ASSIGN_OR_RETURN(auto ts, io::TensorSet::open(dir));
    const AudioVaeConfig& c = vae.config;
    AudioLoader l(ts, dir, device);
    AudioVaeWeights& w = vae.weights;
    const std::vector<float> filter = kaiser_sinc_filter(0.25, 0.3, 12);
    H3_ASSIGN_OR_RETURN(w.filter, l.place(host_tensor_from(filter, Shape{12})));
    H3_ASSIGN_OR_RETURN(w.in_proj.w, l.get("dec_in_proj.weight", Shape{c.latent_dim, c.latent_channels, 1}));
    H3_ASSIGN_OR_RETURN(w.in_proj.b, l.get("dec_in_proj.bias", Shape{c.latent_dim}));
    H3_ASSIGN_OR_RETURN(w.conv_pre,
                        l.conv("decoder.conv_pre", c.decoder_dim, c.latent_dim, 7, c.decoder_dim));
    int64_t ch = c.decoder_dim;
    const size_t nk = c.resblock_kernel_sizes.size();
    for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
        const std::string up = "decoder.ups." + std::to_string(i) + ".0";
        H3_ASSIGN_OR_RETURN(auto u, l.conv(up, ch, ch / 2, c.decoder_kernel_sizes[i], ch / 2));
        w.ups.push_back(std::move(u));
        ch /= 2;
        for (size_t j = 0; j < nk; ++j) {
            const std::string pre = "decoder.resblocks." + std::to_string(i * nk + j) + ".";
            AmpBlockWeights b;
            b.kernel = c.resblock_kernel_sizes[j];
            b.dilations = c.resblock_dilation_sizes[j];
            for (size_t m = 0; m < b.dilations.size(); ++m) {
                const std::string ms = std::to_string(m);
                H3_ASSIGN_OR_RETURN(auto c1, l.conv(pre + "convs1." + ms, ch, ch, b.kernel, ch));
                H3_ASSIGN_OR_RETURN(auto c2, l.conv(pre + "convs2." + ms, ch, ch, b.kernel, ch));
                b.convs1.push_back(std::move(c1));
                b.convs2.push_back(std::move(c2));
            }
            for (size_t a = 0; a < 2 * b.dilations.size(); ++a) {
                H3_ASSIGN_OR_RETURN(auto act, l.act(pre + "activations." + std::to_string(a), ch, filter));
                b.acts.push_back(std::move(act));
            }
            w.blocks.push_back(std::move(b));
        }
    }
    H3_ASSIGN_OR_RETURN(w.act_post, l.act("decoder.activation_post", ch, filter));
    H3_ASSIGN_OR_RETURN(w.conv_post, l.conv("decoder.conv_post", 1, ch, 7, 0));
    return vae;
}

namespace {

Result<Tensor> alloc(const ops::Context& ctx, const Shape& s) {
    return alloc_f32(ctx, s);
}

Result<Tensor> conv(const ops::Context& ctx, const ops::Conv1dParams& p, const AudioConv& c,
                    const Tensor& x) {
    return run_conv1d(ctx, p, c, x);
}

Result<Tensor> act(const ops::Context& ctx, const AudioAct& a, const Tensor& filter, const Tensor& x) {
    H3_ASSIGN_OR_RETURN(Tensor y, alloc(ctx, x.shape()));
    H3_TRY(ops::alias_free_snake_beta(ctx, ops::AliasFreeParams{}, x, a.alpha, a.beta, filter, filter, y));
    return y;
}

// One mono channel: x [1, C, A] de-normalized latents on ctx.device -> [1, 1, A·hop].
Result<Tensor> decode_mono(const ops::Context& ctx, const AudioVae& vae, const Tensor& z,
                           const AudioVaeRunOptions& opt) {
    const ops::CancelScope cancel_scope(opt.cancel); // the ops read it between their blocks too
    const AudioVaeConfig& c = vae.config;
    const AudioVaeWeights& w = vae.weights;
    H3_ASSIGN_OR_RETURN(Tensor x, conv(ctx, {}, w.in_proj, z));
    H3_ASSIGN_OR_RETURN(x, conv(ctx, {.padding = 3}, w.conv_pre, x));
    const size_t nk = c.resblock_kernel_sizes.size();
    for (size_t i = 0; i < w.ups.size(); ++i) {
        if (opt.cancel && opt.cancel->load()) return cancelled("audio decode cancelled");
        const int rate = c.decoder_rates[i], k = c.decoder_kernel_sizes[i];
        ops::ConvTranspose1dParams up{.stride = rate, .padding = (k - rate) / 2};
        const AudioConv& u = w.ups[i];
        H3_ASSIGN_OR_RETURN(
            Tensor y, alloc(ctx, Shape{1, u.w.dim(1), ops::conv_transpose1d_out_length(x.dim(2), k, up)}));
        H3_TRY(ops::conv_transpose1d(ctx, up, x, u.w, u.b, y));
        x = y;
        Tensor acc;
        for (size_t j = 0; j < nk; ++j) {
            const AmpBlockWeights& b = w.blocks[i * nk + j];
            H3_ASSIGN_OR_RETURN(Tensor h, alloc(ctx, x.shape()));
            H3_TRY(h.copy_from(x, ctx.stream()));
            for (size_t m = 0; m < b.dilations.size(); ++m) {
                const int d = b.dilations[m];
                H3_ASSIGN_OR_RETURN(Tensor r, act(ctx, b.acts[2 * m], w.filter, h));
                H3_ASSIGN_OR_RETURN(
                    r, conv(ctx, {.padding = (b.kernel * d - d) / 2, .dilation = d}, b.convs1[m], r));
                H3_ASSIGN_OR_RETURN(r, act(ctx, b.acts[2 * m + 1], w.filter, r));
                H3_ASSIGN_OR_RETURN(r, conv(ctx, {.padding = (b.kernel - 1) / 2}, b.convs2[m], r));
                H3_TRY(ops::add(ctx, h, r, h));
            }
            if (!acc.defined())
                acc = h;
            else
                H3_TRY(ops::add(ctx, acc, h, acc));
        }
        H3_TRY(ops::scale(ctx, 1.0f / static_cast<float>(nk), acc, acc));
        x = acc;
    }
    H3_ASSIGN_OR_RETURN(x, act(ctx, w.act_post, w.filter, x));
    H3_ASSIGN_OR_RETURN(x, conv(ctx, {.padding = 3}, w.conv_post, x));
    H3_TRY(ops::clamp(ctx, -1.0f, 1.0f, x, x));
    return x;
}

} // namespace

Result<AudioVae> random_audio_vae(const ops::Context& ctx, const AudioVaeConfig& config, uint64_t seed) {
    H3_TRY(config.validate("random audio VAE config"));
    AudioVae vae;
    vae.config = config;
    vae.device = ctx.device;
    auto make = [&](const Shape& s, float bound) -> Result<Tensor> {
        H3_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(s, DType::kF32, ctx.device));
        H3_TRY(ops::fill_uniform(ctx, {.seed = seed++, .bound = bound}, t));
        return t;
    };
    auto conv = [&](int64_t a, int64_t b, int64_t k, bool bias) -> Result<AudioConv> {
        AudioConv c;
        H3_ASSIGN_OR_RETURN(c.w, make(Shape{a, b, k}, 1.0f / std::sqrt(static_cast<float>(b * k))));
        if (bias) {
            H3_ASSIGN_OR_RETURN(c.b, make(Shape{a}, 0.01f));
        }
        return c;
    };
    auto act = [&](int64_t ch) -> Result<AudioAct> {
        AudioAct a;
        H3_ASSIGN_OR_RETURN(a.alpha, make(Shape{ch}, 0.3f));
        H3_ASSIGN_OR_RETURN(a.beta, make(Shape{ch}, 0.3f));
        return a;
    };
    const AudioVaeConfig& c = config;
    AudioVaeWeights& w = vae.weights;
    H3_ASSIGN_OR_RETURN(w.filter,
                        host_tensor_from(kaiser_sinc_filter(0.25, 0.3, 12), Shape{12}).to(ctx.device));
    H3_ASSIGN_OR_RETURN(w.in_proj, conv(c.latent_dim, c.latent_channels, 1, true));
    H3_ASSIGN_OR_RETURN(w.conv_pre, conv(c.decoder_dim, c.latent_dim, 7, true));
    int64_t ch = c.decoder_dim;
    for (size_t i = 0; i < c.decoder_rates.size(); ++i) {
        AudioConv u; // ConvTranspose1d [in, out, k], bias [out]
        H3_ASSIGN_OR_RETURN(u.w, make(Shape{ch, ch / 2, c.decoder_kernel_sizes[i]},
                                      1.0f / std::sqrt(static_cast<float>(ch))));
        H3_ASSIGN_OR_RETURN(u.b, make(Shape{ch / 2}, 0.01f));
        w.ups.push_back(std::move(u));
        ch /= 2;
        for (size_t j = 0; j < c.resblock_kernel_sizes.size(); ++j) {
            AmpBlockWeights b;
            b.kernel = c.resblock_kernel_sizes[j];
            b.dilations = c.resblock_dilation_sizes[j];
            for (size_t m = 0; m < b.dilations.size(); ++m) {
                H3_ASSIGN_OR_RETURN(auto c1, conv(ch, ch, b.kernel, true));
                H3_ASSIGN_OR_RETURN(auto c2, conv(ch, ch, b.kernel, true));
                b.convs1.push_back(std::move(c1));
                b.convs2.push_back(std::move(c2));
            }
            for (size_t a = 0; a < 2 * b.dilations.size(); ++a) {
                H3_ASSIGN_OR_RETURN(auto ac, act(ch));
                b.acts.push_back(std::move(ac));
            }
            w.blocks.push_back(std::move(b));
        }
    }
    H3_ASSIGN_OR_RETURN(w.act_post, act(ch));
    H3_ASSIGN_OR_RETURN(w.conv_post, conv(1, ch, 7, false));
    return vae;
}

Result<Tensor> decode_audio(const ops::Context& ctx, const AudioVae& vae, const Tensor& latents,
                            const AudioVaeRunOptions& opt) {
    const ops::CancelScope cancel_scope(opt.cancel); // the ops read it between their blocks too
    const AudioVaeConfig& c = vae.config;
    if (latents.rank() != 3 || latents.dim(1) != c.latent_channels || latents.dim(2) < 1)
        return invalid_argument("decode_audio: latents must be [channels, " +
                                std::to_string(c.latent_channels) + ", A >= 1], got " + latents.describe());
    if (ctx.device != vae.device)
        return invalid_argument("decode_audio: the weights live on another device than the context");
    H3_ASSIGN_OR_RETURN(Tensor lat,
                        latents.device().is_cpu() ? latents.contiguous() : latents.to(Device::cpu()));
    H3_ASSIGN_OR_RETURN(lat, lat.to_dtype(DType::kF32));
    const int64_t nch = lat.dim(0), a = lat.dim(2), samples = a * c.hop_length();
    Tensor out = Tensor::host(Shape{nch, samples}, DType::kF32);
    for (int64_t s = 0; s < nch; ++s) {
        Tensor z = Tensor::host(Shape{1, c.latent_channels, a}, DType::kF32);
        const float* src = lat.data_as<const float>() + s * c.latent_channels * a;
        float* dst = z.data_as<float>();
        for (int64_t ch = 0; ch < c.latent_channels; ++ch)
            for (int64_t t = 0; t < a; ++t)
                dst[ch * a + t] = src[ch * a + t] * c.latents_std[static_cast<size_t>(ch)] +
                                  c.latents_mean[static_cast<size_t>(ch)];
        if (ctx.is_cuda()) {
            H3_ASSIGN_OR_RETURN(z, z.to(ctx.device));
        }
        if (opt.cancel && opt.cancel->load()) return cancelled("audio decode cancelled");
        H3_ASSIGN_OR_RETURN(Tensor y, decode_mono(ctx, vae, z, opt));
        if (y.numel() != samples)
            return internal_error("decode_audio: decoder produced " + std::to_string(y.numel()) +
                                  " samples, " + "expected " + std::to_string(samples));
        if (ctx.is_cuda()) {
            H3_TRY(cuda::stream_synchronize(ctx.stream()));
            H3_ASSIGN_OR_RETURN(y, y.to(Device::cpu()));
        }
        std::copy(y.data_as<const float>(), y.data_as<const float>() + samples,
                  out.data_as<float>() + s * samples);
    }
    return out;
}

} // namespace h3::model
