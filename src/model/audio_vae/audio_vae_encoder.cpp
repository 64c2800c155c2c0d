#include "model/audio_vae/audio_vae_encoder.h"
#include "model/audio_vae/audio_vae_common.h"

#include "core/cuda_api.h"
#include "io/checkpoint.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

using TensorList = std::vector<std::pair<std::string, std::vector<int64_t>>>;

std::string block_prefix(size_t i) {
    return "encoder.block." + std::to_string(i);
}

// ---- weight sources
// ----------------------------------------------------------------------------------------

// Where the builder reads named host tensors from: a checkpoint, or a random generator. `get` returns a
// writable host f32 tensor of exactly `shape`, or an error naming the tensor.
struct TensorSource {
    std::function<bool(const std::string&)> has;
    std::function<Result<Tensor>(const std::string&, const Shape&)> get;
};

class EncoderBuilder {
public:
    EncoderBuilder(TensorSource src, Device dev) : src_(std::move(src)), dev_(dev) {}

    Result<Tensor> place(const Tensor& t) const { return dev_.is_cpu() ? Result<Tensor>(t) : t.to(dev_); }
    Result<Tensor> get(const std::string& name, const Shape& shape) {
        H3_ASSIGN_OR_RETURN(Tensor t, src_.get(name, shape));
        return place(t);
    }
    // Conv1d weight_g [out, 1, 1] / weight_v [out, in, k] → W = g · v / ‖v‖ (norm over in and k), + bias.
    Result<AudioConv> wn_conv(const std::string& name, int64_t out, int64_t in, int64_t k) {
        H3_ASSIGN_OR_RETURN(Tensor g, src_.get(name + ".weight_g", Shape{out, 1, 1}));
        H3_ASSIGN_OR_RETURN(Tensor v, src_.get(name + ".weight_v", Shape{out, in, k}));
        fold_weight_norm(g, v);
        AudioConv c;
        H3_ASSIGN_OR_RETURN(c.w, place(v));
        H3_ASSIGN_OR_RETURN(c.b, get(name + ".bias", Shape{out}));
        return c;
    }
    // Snake alpha stored [1, C, 1] → [C].
    Result<Tensor> alpha(const std::string& name, int64_t c) {
        H3_ASSIGN_OR_RETURN(Tensor a, src_.get(name + ".alpha", Shape{1, c, 1}));
        return place(a.view({c}));
    }
    Result<AudioLinear> linear(const std::string& name, int64_t out, int64_t in) {
        AudioLinear l;
        H3_ASSIGN_OR_RETURN(l.w, get(name + ".weight", Shape{out, in}));
        H3_ASSIGN_OR_RETURN(l.b, get(name + ".bias", Shape{out}));
        return l;
    }
    Result<AudioLayerNorm> layer_norm(const std::string& name, int64_t d) {
        AudioLayerNorm n;
        H3_ASSIGN_OR_RETURN(n.w, get(name + ".weight", Shape{d}));
        H3_ASSIGN_OR_RETURN(n.b, get(name + ".bias", Shape{d}));
        return n;
    }
    bool has(const std::string& name) const { return src_.has(name); }
    Result<Tensor> host(const std::string& name, const Shape& shape) { return src_.get(name, shape); }

private:
    TensorSource src_;
    Device dev_;
};

// Rows [r0, r0 + n) of a host [R, C] tensor as a new contiguous host tensor.
Tensor host_rows(const Tensor& t, int64_t r0, int64_t n) {
    const int64_t cols = t.dim(1);
    Tensor out = Tensor::host(Shape{n, cols}, DType::kF32);
    std::memcpy(out.data(), t.data_as<const float>() + r0 * cols,
                static_cast<size_t>(n * cols) * sizeof(float));
    return out;
}

// The head mean and adaptive average pool as one matrix [O, H·Dh]: output j averages, over the heads, the
// head dims [floor(j·Dh/O), ceil((j+1)·Dh/O)) (torch's adaptive_avg_pool1d bins).
Tensor pool_matrix(int64_t heads, int64_t head_dim, int64_t out) {
    Tensor p = Tensor::host(Shape{out, heads * head_dim}, DType::kF32); // zeroed
    float* pp = p.data_as<float>();
    for (int64_t j = 0; j < out; ++j) {
        const int64_t start = (j * head_dim) / out, end = ((j + 1) * head_dim + out - 1) / out;
        const float w =
            static_cast<float>(1.0 / (static_cast<double>(heads) * static_cast<double>(end - start)));
        for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = start; d < end; ++d) pp[j * heads * head_dim + h * head_dim + d] = w;
    }
    return p;
}

Result<AudioVaeEncoderWeights> build_weights(const AudioVaeConfig& c, EncoderBuilder& b) {
    AudioVaeEncoderWeights w;
    int64_t d = c.encoder_dim;
    H3_ASSIGN_OR_RETURN(w.conv_in, b.wn_conv(block_prefix(0), d, 1, 7));
    for (size_t i = 0; i < c.encoder_rates.size(); ++i) {
        const std::string pre = block_prefix(i + 1) + ".block.";
        DacEncoderBlock blk;
        blk.stride = c.encoder_rates[i];
        for (int u = 0; u < 3; ++u) {
            const std::string up = pre + std::to_string(u) + ".block.";
            DacResidualUnit unit;
            unit.dilation = u == 0 ? 1 : (u == 1 ? 3 : 9);
            H3_ASSIGN_OR_RETURN(unit.alpha1, b.alpha(up + "0", d));
            H3_ASSIGN_OR_RETURN(unit.conv1, b.wn_conv(up + "1", d, d, 7));
            H3_ASSIGN_OR_RETURN(unit.alpha2, b.alpha(up + "2", d));
            H3_ASSIGN_OR_RETURN(unit.conv2, b.wn_conv(up + "3", d, d, 1));
            blk.units.push_back(std::move(unit));
        }
        H3_ASSIGN_OR_RETURN(blk.alpha, b.alpha(pre + "3", d));
        H3_ASSIGN_OR_RETURN(blk.down, b.wn_conv(pre + "4", 2 * d, d, 2 * blk.stride));
        w.blocks.push_back(std::move(blk));
        d *= 2;
    }
    const size_t last = c.encoder_rates.size() + 1;
    H3_ASSIGN_OR_RETURN(w.alpha_out, b.alpha(block_prefix(last), d));
    H3_ASSIGN_OR_RETURN(w.conv_out, b.wn_conv(block_prefix(last + 1), c.latent_dim, d, 3));

    const int64_t dm = c.latent_dim, o = c.latent_channels, hidden = 2 * o;
    AudioPreBlockWeights& p = w.pre;
    H3_ASSIGN_OR_RETURN(p.norm1, b.layer_norm("pre_block.norm1", dm));
    H3_ASSIGN_OR_RETURN(p.norm2, b.layer_norm("pre_block.norm2", o));
    H3_ASSIGN_OR_RETURN(p.norm3, b.layer_norm("pre_block.norm3", dm));
    H3_ASSIGN_OR_RETURN(p.mlp_norm, b.layer_norm("pre_block.mlp.norm", o));
    H3_ASSIGN_OR_RETURN(Tensor qkv, b.host("pre_block.attn.qkv.weight", Shape{3 * dm, dm}));
    H3_ASSIGN_OR_RETURN(p.q.w, b.place(host_rows(qkv, 0, dm)));
    H3_ASSIGN_OR_RETURN(p.k.w, b.place(host_rows(qkv, dm, dm)));
    H3_ASSIGN_OR_RETURN(p.v.w, b.place(host_rows(qkv, 2 * dm, dm)));
    H3_ASSIGN_OR_RETURN(p.q.b, b.get("pre_block.attn.q_bias", Shape{dm}));
    H3_ASSIGN_OR_RETURN(p.v.b, b.get("pre_block.attn.v_bias", Shape{dm}));
    // The key bias is a frozen zero buffer; when a checkpoint carries it, it is used as stored.
    if (b.has("pre_block.attn.zero_k_bias")) {
        H3_ASSIGN_OR_RETURN(p.k.b, b.get("pre_block.attn.zero_k_bias", Shape{dm}));
    } else {
        H3_ASSIGN_OR_RETURN(p.k.b, b.place(Tensor::host(Shape{dm}, DType::kF32)));
    }
    H3_ASSIGN_OR_RETURN(p.pool, b.place(pool_matrix(c.num_attention_heads, dm / c.num_attention_heads, o)));
    H3_ASSIGN_OR_RETURN(p.attn_proj, b.linear("pre_block.attn.proj", o, o));
    H3_ASSIGN_OR_RETURN(p.proj, b.linear("pre_block.proj", o, dm));
    // GeGLU: act(w0·x) ⊙ (w1·x) → one GEMM into [value | gate] = [w1·x | w0·x] for ops::geglu.
    H3_ASSIGN_OR_RETURN(Tensor w0, b.host("pre_block.mlp.w0.weight", Shape{hidden, o}));
    H3_ASSIGN_OR_RETURN(Tensor b0, b.host("pre_block.mlp.w0.bias", Shape{hidden}));
    H3_ASSIGN_OR_RETURN(Tensor w1, b.host("pre_block.mlp.w1.weight", Shape{hidden, o}));
    H3_ASSIGN_OR_RETURN(Tensor b1, b.host("pre_block.mlp.w1.bias", Shape{hidden}));
    Tensor wi = Tensor::host(Shape{2 * hidden, o}, DType::kF32),
           bi = Tensor::host(Shape{2 * hidden}, DType::kF32);
    std::memcpy(wi.data_as<float>(), w1.data(), w1.nbytes());
    std::memcpy(wi.data_as<float>() + hidden * o, w0.data(), w0.nbytes());
    std::memcpy(bi.data_as<float>(), b1.data(), b1.nbytes());
    std::memcpy(bi.data_as<float>() + hidden, b0.data(), b0.nbytes());
    H3_ASSIGN_OR_RETURN(p.mlp_in.w, b.place(wi));
    H3_ASSIGN_OR_RETURN(p.mlp_in.b, b.place(bi));
    H3_ASSIGN_OR_RETURN(p.mlp_out, b.linear("pre_block.mlp.w2", o, hidden));
    H3_ASSIGN_OR_RETURN(Tensor mw, b.host("mean_proj.weight", Shape{o, o, 1}));
    H3_ASSIGN_OR_RETURN(w.mean_proj.w, b.place(mw.view({o, o})));
    H3_ASSIGN_OR_RETURN(w.mean_proj.b, b.get("mean_proj.bias", Shape{o}));
    return w;
}

// ---- forward
// -------------------------------------------------------------------------------------------------

Result<Tensor> alloc(const ops::Context& ctx, const Shape& s) {
    return alloc_f32(ctx, s);
}

Result<Tensor> conv(const ops::Context& ctx, const ops::Conv1dParams& p, const AudioConv& c,
                    const Tensor& x) {
    return run_conv1d(ctx, p, c, x);
}

Result<Tensor> snake(const ops::Context& ctx, const Tensor& alpha, const Tensor& x) {
    H3_ASSIGN_OR_RETURN(Tensor y, alloc(ctx, x.shape()));
    H3_TRY(ops::snake(ctx, x, alpha, y));
    return y;
}

Result<Tensor> linear(const ops::Context& ctx, const AudioLinear& l, const Tensor& x) {
    H3_ASSIGN_OR_RETURN(Tensor y, alloc(ctx, Shape{x.dim(0), l.w.dim(0)}));
    H3_TRY(ops::gemm(ctx, {}, x, l.w, l.b, y));
    return y;
}

Result<Tensor> layer_norm(const ops::Context& ctx, const AudioLayerNorm& n, const Tensor& x) {
    H3_ASSIGN_OR_RETURN(Tensor y, alloc(ctx, x.shape()));
    H3_TRY(ops::layer_norm(ctx, {.eps = 1e-5f}, x, n.w, n.b, y));
    return y;
}

// The DAC trunk: x [1, 1, A·hop] on ctx.device → [1, latent_dim, A].
Result<Tensor> encoder_trunk(const ops::Context& ctx, const AudioVaeEncoderWeights& w, Tensor x,
                             const AudioVaeRunOptions& opt) {
    const ops::CancelScope cancel_scope(opt.cancel); // the ops read it between their blocks too
    H3_ASSIGN_OR_RETURN(x, conv(ctx, {.padding = 3}, w.conv_in, x));
    for (const DacEncoderBlock& blk : w.blocks) {
        if (opt.cancel && opt.cancel->load()) return cancelled("audio encode cancelled");
        for (const DacResidualUnit& u : blk.units) {
            H3_ASSIGN_OR_RETURN(Tensor r, snake(ctx, u.alpha1, x));
            H3_ASSIGN_OR_RETURN(r,
                                conv(ctx, {.padding = 3 * u.dilation, .dilation = u.dilation}, u.conv1, r));
            H3_ASSIGN_OR_RETURN(r, snake(ctx, u.alpha2, r));
            H3_ASSIGN_OR_RETURN(r, conv(ctx, {}, u.conv2, r));
            // padding 3·d keeps the length, so the reference's centre crop of the shortcut never applies.
            H3_TRY(ops::add(ctx, x, r, x));
        }
        H3_ASSIGN_OR_RETURN(x, snake(ctx, blk.alpha, x));
        H3_ASSIGN_OR_RETURN(x,
                            conv(ctx, {.stride = blk.stride, .padding = (blk.stride + 1) / 2}, blk.down, x));
    }
    H3_ASSIGN_OR_RETURN(x, snake(ctx, w.alpha_out, x));
    return conv(ctx, {.padding = 1}, w.conv_out, x);
}

// pre_block + mean_proj over rows x [A, latent_dim] → posterior mean rows [A, latent_channels].
Result<Tensor> pre_block_mean(const ops::Context& ctx, const AudioVaeConfig& c, const AudioPreBlockWeights& p,
                              const AudioLinear& mean_proj, const Tensor& x) {
    const int64_t a = x.dim(0), heads = c.num_attention_heads, hd = c.latent_dim / heads;
    H3_ASSIGN_OR_RETURN(Tensor n1, layer_norm(ctx, p.norm1, x));
    H3_ASSIGN_OR_RETURN(Tensor q, linear(ctx, p.q, n1));
    H3_ASSIGN_OR_RETURN(Tensor k, linear(ctx, p.k, n1));
    H3_ASSIGN_OR_RETURN(Tensor v, linear(ctx, p.v, n1));
    H3_ASSIGN_OR_RETURN(Tensor o, alloc(ctx, Shape{a, heads, hd}));
    H3_TRY(ops::attention(ctx, {.causal = true}, q.view({a, heads, hd}), k.view({a, heads, hd}),
                          v.view({a, heads, hd}), o));
    H3_ASSIGN_OR_RETURN(Tensor pooled, alloc(ctx, Shape{a, p.pool.dim(0)}));
    H3_TRY(ops::gemm(ctx, {}, o.view({a, c.latent_dim}), p.pool, Tensor(), pooled));
    H3_ASSIGN_OR_RETURN(Tensor att, linear(ctx, p.attn_proj, pooled));
    H3_ASSIGN_OR_RETURN(Tensor n3, layer_norm(ctx, p.norm3, x));
    H3_ASSIGN_OR_RETURN(Tensor y, linear(ctx, p.proj, n3));
    H3_TRY(ops::add(ctx, y, att, y));
    H3_ASSIGN_OR_RETURN(Tensor m, layer_norm(ctx, p.norm2, y));
    H3_ASSIGN_OR_RETURN(m, layer_norm(ctx, p.mlp_norm, m));
    H3_ASSIGN_OR_RETURN(Tensor h, linear(ctx, p.mlp_in, m));
    H3_ASSIGN_OR_RETURN(Tensor g, alloc(ctx, Shape{a, h.dim(1) / 2}));
    H3_TRY(ops::geglu(ctx, {.tanh = true}, h, g));
    H3_ASSIGN_OR_RETURN(Tensor mo, linear(ctx, p.mlp_out, g));
    H3_TRY(ops::add(ctx, y, mo, y));
    return linear(ctx, mean_proj, y);
}

Result<Tensor> to_host(const ops::Context& ctx, const Tensor& t) {
    if (t.device().is_cpu()) return t;
    H3_TRY(cuda::stream_synchronize(ctx.stream()));
    return t.to(Device::cpu());
}

Status check_waveform(const char* fn, const AudioVaeEncoder& enc, const ops::Context& ctx, const Tensor& w) {
    if (!w.defined() || w.rank() != 2 || w.dim(0) < 1 || w.dim(0) > 2 || w.dim(1) < 1)
        return invalid_argument(std::string(fn) +
                                ": waveform must be [channels = 1 or 2, samples >= 1], got " +
                                (w.defined() ? w.describe() : std::string("an undefined tensor")));
    if (!dtype_is_float(w.dtype()))
        return invalid_argument(std::string(fn) + ": waveform must be a float tensor, got " + w.describe());
    if (ctx.device != enc.device)
        return invalid_argument(std::string(fn) +
                                ": the encoder's weights live on another device than the context");
    return ok_status();
}

// Every channel of a checked waveform → its posterior mean rows [A, latent_channels] on the host.
Result<std::vector<Tensor>> encode_rows(const ops::Context& ctx, const AudioVaeEncoder& enc,
                                        const Tensor& wave, const AudioVaeRunOptions& opt) {
    const ops::CancelScope cancel_scope(opt.cancel); // the ops read it between their blocks too
    const AudioVaeConfig& c = enc.config;
    H3_ASSIGN_OR_RETURN(Tensor host, to_host(ctx, wave));
    H3_ASSIGN_OR_RETURN(host, host.to_dtype(DType::kF32));
    const int64_t n = host.dim(1), hop = c.encoder_hop(), a = (n + hop - 1) / hop;
    std::vector<Tensor> out;
    for (int64_t ch = 0; ch < host.dim(0); ++ch) {
        Tensor x = Tensor::host(Shape{1, 1, a * hop}, DType::kF32); // zeroed: the right padding
        std::memcpy(x.data(), host.data_as<const float>() + ch * n, static_cast<size_t>(n) * sizeof(float));
        if (ctx.is_cuda()) {
            H3_ASSIGN_OR_RETURN(x, x.to(ctx.device));
        }
        if (opt.cancel && opt.cancel->load()) return cancelled("audio encode cancelled");
        H3_ASSIGN_OR_RETURN(Tensor z, encoder_trunk(ctx, enc.weights, x, opt));
        if (z.dim(1) != c.latent_dim || z.dim(2) != a)
            return internal_error("encode_audio_mean: the encoder produced " + z.shape().to_string() +
                                  ", expected [1, " + std::to_string(c.latent_dim) + ", " +
                                  std::to_string(a) + "]");
        H3_ASSIGN_OR_RETURN(Tensor rows, alloc(ctx, Shape{a, c.latent_dim}));
        H3_TRY(ops::transpose(ctx, z.view({c.latent_dim, a}), rows));
        H3_ASSIGN_OR_RETURN(Tensor mean,
                            pre_block_mean(ctx, c, enc.weights.pre, enc.weights.mean_proj, rows));
        H3_ASSIGN_OR_RETURN(mean, to_host(ctx, mean));
        out.push_back(std::move(mean));
    }
    return out;
}

Result<AudioVaeEncoder> assemble(const AudioVaeConfig& config, TensorSource src, Device device) {
    AudioVaeEncoder enc;
    enc.config = config;
    enc.device = device;
    EncoderBuilder b(std::move(src), device);
    H3_ASSIGN_OR_RETURN(enc.weights, build_weights(config, b));
    return enc;
}

} // namespace

TensorList audio_vae_encoder_tensors(const AudioVaeConfig& c) {
    TensorList t;
    auto conv = [&](const std::string& n, int64_t out, int64_t in, int64_t k) {
        t.push_back({n + ".bias", {out}});
        t.push_back({n + ".weight_g", {out, 1, 1}});
        t.push_back({n + ".weight_v", {out, in, k}});
    };
    auto snake = [&](const std::string& n, int64_t ch) { t.push_back({n + ".alpha", {1, ch, 1}}); };
    int64_t d = c.encoder_dim;
    conv(block_prefix(0), d, 1, 7);
    for (size_t i = 0; i < c.encoder_rates.size(); ++i) {
        const std::string pre = block_prefix(i + 1) + ".block.";
        for (int u = 0; u < 3; ++u) {
            const std::string up = pre + std::to_string(u) + ".block.";
            snake(up + "0", d);
            conv(up + "1", d, d, 7);
            snake(up + "2", d);
            conv(up + "3", d, d, 1);
        }
        snake(pre + "3", d);
        conv(pre + "4", 2 * d, d, 2 * c.encoder_rates[i]);
        d *= 2;
    }
    const size_t last = c.encoder_rates.size() + 1;
    snake(block_prefix(last), d);
    conv(block_prefix(last + 1), c.latent_dim, d, 3);
    const int64_t dm = c.latent_dim, o = c.latent_channels, hidden = 2 * o;
    auto norm = [&](const std::string& n, int64_t dim) {
        t.push_back({n + ".weight", {dim}});
        t.push_back({n + ".bias", {dim}});
    };
    auto lin = [&](const std::string& n, int64_t out, int64_t in) {
        t.push_back({n + ".weight", {out, in}});
        t.push_back({n + ".bias", {out}});
    };
    norm("pre_block.norm1", dm);
    t.push_back({"pre_block.attn.qkv.weight", {3 * dm, dm}});
    t.push_back({"pre_block.attn.q_bias", {dm}});
    t.push_back({"pre_block.attn.v_bias", {dm}});
    t.push_back({"pre_block.attn.zero_k_bias", {dm}});
    lin("pre_block.attn.proj", o, o);
    lin("pre_block.proj", o, dm);
    norm("pre_block.norm3", dm);
    norm("pre_block.norm2", o);
    norm("pre_block.mlp.norm", o);
    lin("pre_block.mlp.w0", hidden, o);
    lin("pre_block.mlp.w1", hidden, o);
    lin("pre_block.mlp.w2", o, hidden);
    t.push_back({"mean_proj.weight", {o, o, 1}});
    t.push_back({"mean_proj.bias", {o}});
    t.push_back({"logs_proj.weight", {o, o, 1}});
    t.push_back({"logs_proj.bias", {o}});
    return t;
}

Result<AudioVaeEncoder> load_audio_vae_encoder(const std::string& dir, Device device) {
    H3_ASSIGN_OR_RETURN(AudioVaeConfig config,
                        AudioVaeConfig::from_file((fs::path(dir) / "config.json").string()));
    H3_TRY(config.validate_encoder((fs::path(dir) / "config.json").string()));
    H3_ASSIGN_OR_RETURN(io::TensorSet ts, io::TensorSet::open(dir));
    bool any_encoder = false;
    for (const std::string& name : ts.names()) any_encoder |= name.rfind("encoder.", 0) == 0;
    if (!any_encoder)
        return bad_input("audio VAE " + dir +
                         " has no encoder weights (encoder.*): ref2va audio references need them");
    auto shared = std::make_shared<io::TensorSet>(std::move(ts));
    TensorSource src;
    src.has = [shared](const std::string& name) { return shared->contains(name); };
    src.get = [shared, dir](const std::string& name, const Shape& shape) -> Result<Tensor> {
        if (!shared->contains(name))
            return bad_input("audio VAE " + dir + " lacks encoder tensor '" + name + "'");
        H3_ASSIGN_OR_RETURN(Tensor t, shared->tensor(name));
        if (!(t.shape() == shape))
            return bad_input("audio VAE " + dir + ": tensor '" + name + "' has shape " +
                             t.shape().to_string() + ", the config implies " + shape.to_string());
        if (!dtype_is_float(t.dtype()))
            return bad_input("audio VAE " + dir + ": tensor '" + name + "' is not a float tensor");
        return t.to_dtype(DType::kF32); // a writable host copy
    };
    return assemble(config, std::move(src), device);
}

Result<AudioVaeEncoder> random_audio_vae_encoder(const ops::Context& ctx, const AudioVaeConfig& config,
                                                 uint64_t seed) {
    H3_TRY(config.validate("random audio VAE config"));
    H3_TRY(config.validate_encoder("random audio VAE config"));
    auto counter = std::make_shared<uint64_t>(seed * 1000003ull);
    TensorSource src;
    src.has = [](const std::string&) { return true; };
    src.get = [counter](const std::string& name, const Shape& shape) -> Result<Tensor> {
        Tensor t = Tensor::host(shape, DType::kF32);
        const bool norm_gain = name.find("norm") != std::string::npos && name.ends_with(".weight");
        float bound = 0.02f, offset = 0.0f; // biases
        if (name.ends_with(".weight_g")) {  // gains in [0.4, 1): activations stay O(1) through the trunk
            bound = 0.3f;
            offset = 0.7f;
        } else if (name.ends_with(".alpha") || norm_gain) {
            bound = 0.2f;
            offset = 1.0f;
        } else if (name.ends_with("zero_k_bias")) {
            bound = 0.0f;
        } else if (name.ends_with(".weight_v") || name.ends_with(".weight")) {
            int64_t fan = 1;
            for (int i = 1; i < shape.rank(); ++i) fan *= shape[i];
            bound = 1.0f / std::sqrt(static_cast<float>(fan));
        }
        H3_TRY(ops::fill_uniform(ops::Context::cpu(),
                                 {.seed = (*counter)++, .bound = bound, .offset = offset}, t));
        return t;
    };
    return assemble(config, std::move(src), ctx.device);
}

Result<Tensor> encode_audio_mean(const ops::Context& ctx, const AudioVaeEncoder& enc, const Tensor& waveform,
                                 const AudioVaeRunOptions& opt) {
    H3_TRY(check_waveform("encode_audio_mean", enc, ctx, waveform));
    H3_ASSIGN_OR_RETURN(std::vector<Tensor> rows, encode_rows(ctx, enc, waveform, opt));
    const int64_t a = rows[0].dim(0), o = rows[0].dim(1);
    Tensor out = Tensor::host(Shape{static_cast<int64_t>(rows.size()), o, a}, DType::kF32);
    for (size_t ch = 0; ch < rows.size(); ++ch) {
        const float* src = rows[ch].data_as<const float>();
        float* dst = out.data_as<float>() + static_cast<int64_t>(ch) * o * a;
        for (int64_t t = 0; t < a; ++t)
            for (int64_t k = 0; k < o; ++k) dst[k * a + t] = src[t * o + k];
    }
    return out;
}

Result<Tensor> encode_reference_audio_rows(const ops::Context& ctx, const AudioVaeEncoder& enc,
                                           const AudioVaeConfig& cfg, const Tensor& stereo,
                                           const AudioVaeRunOptions& opt) {
    const char* fn = "encode_reference_audio_rows";
    H3_TRY(check_waveform(fn, enc, ctx, stereo));
    if (stereo.dim(0) != 2)
        return invalid_argument(std::string(fn) +
                                ": the reference soundtrack must be stereo [2, samples], got " +
                                stereo.describe());
    const int64_t o = enc.config.latent_channels;
    if (cfg.latents_mean.size() != static_cast<size_t>(o) || cfg.latents_std.size() != static_cast<size_t>(o))
        return invalid_argument(std::string(fn) + ": latents_mean/latents_std must hold " +
                                std::to_string(o) + " values each");
    H3_ASSIGN_OR_RETURN(std::vector<Tensor> rows, encode_rows(ctx, enc, stereo, opt));
    const int64_t a = rows[0].dim(0);
    Tensor out = Tensor::host(Shape{2 * a, o}, DType::kF32);
    for (int64_t ch = 0; ch < 2; ++ch) {
        const float* src = rows[static_cast<size_t>(ch)].data_as<const float>();
        float* dst = out.data_as<float>() + ch * a * o;
        for (int64_t t = 0; t < a; ++t)
            for (int64_t k = 0; k < o; ++k)
                dst[t * o + k] = (src[t * o + k] - cfg.latents_mean[static_cast<size_t>(k)]) /
                                 cfg.latents_std[static_cast<size_t>(k)];
    }
    return out;
}

} // namespace h3::model
