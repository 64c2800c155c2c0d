// The video VAE encoder (spec §9.1): weights, the CNN forward (ops only), clip/tile assembly and the
// keyframe recipe (spec §3 step 4).
#include "core/cuda_api.h"
#include "core/staging.h"
#include "core/storage.h"
#include "core/torch_generator.h"
#include "io/checkpoint.h"
#include "model/video_vae/vae_profile.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

std::string level_prefix(size_t i) {
    return "encoder.down_blocks." + std::to_string(i) + ".";
}

void add_conv(std::vector<std::pair<std::string, std::vector<int64_t>>>& t, const std::string& name,
              int64_t out, int64_t in, int64_t k) {
    t.push_back({name + ".weight", {out, in, k, k, k}});
    t.push_back({name + ".bias", {out}});
}

void add_norm(std::vector<std::pair<std::string, std::vector<int64_t>>>& t, const std::string& name,
              int64_t c) {
    t.push_back({name + ".weight", {c}});
    t.push_back({name + ".bias", {c}});
}

ops::PadMode pad_mode(const VideoVaeConfig& c) {
    if (c.spatial_padding_mode == "reflect") return ops::PadMode::kReflect;
    if (c.spatial_padding_mode == "replicate") return ops::PadMode::kReplicate;
    return ops::PadMode::kZeros;
}

// The named tensors into VideoVaeEncoderWeights.
void assign_weights(VideoVaeEncoder& enc, std::map<std::string, Tensor>& got) {
    const VideoVaeConfig& c = enc.config;
    VideoVaeEncoderWeights& w = enc.weights;
    auto conv = [&](const std::string& n) { return VaeConv3d{got[n + ".weight"], got[n + ".bias"]}; };
    auto norm = [&](const std::string& n) {
        return VaeGroupNormWeights{got[n + ".weight"], got[n + ".bias"]};
    };
    w.conv_in = conv("encoder.conv_in");
    w.levels.clear();
    for (size_t i = 0; i < c.block_out_channels.size(); ++i) {
        VaeDownLevel lv;
        lv.stride_t = c.temporal_downsample_factors[i];
        lv.stride_s = c.spatial_downsample_factors[i];
        for (int j = 0; j < c.layers_per_block; ++j) {
            const std::string p = level_prefix(i) + "resnets." + std::to_string(j) + ".";
            VaeResnet3d r{norm(p + "norm1"), norm(p + "norm2"), conv(p + "conv1"), conv(p + "conv2"), {}};
            if (got.count(p + "conv_shortcut.weight")) r.shortcut = conv(p + "conv_shortcut");
            lv.resnets.push_back(std::move(r));
        }
        if (lv.stride_t * lv.stride_s > 1) lv.down = conv(level_prefix(i) + "downsamplers.0.conv");
        w.levels.push_back(std::move(lv));
    }
    w.norm_out = norm("encoder.norm_out");
    w.conv_out = conv("encoder.conv_out");
    w.quant_conv = conv("quant_conv");
}

Result<Tensor> to_host(const ops::Context& ctx, const Tensor& t) {
    if (t.device().is_cpu()) return t;
    H3_TRY(cuda::stream_synchronize(ctx.stream()));
    return t.to(Device::cpu());
}

// conv → an output tensor on the context's device (from the encoder's buffer pool).
Result<Tensor> run_conv(const ops::Context& ctx, BufferPool& pool, const VaeConv3d& conv,
                        const ops::Conv3dParams& p, const Tensor& x) {
    const Shape out = ops::conv3d_out_shape(x.shape(), conv.w.shape(), p);
    if (out.rank() != 5)
        return invalid_argument("video VAE encoder: input " + x.describe() +
                                " is too small for the convolution " + conv.w.describe());
    H3_ASSIGN_OR_RETURN(Tensor y, pool.take(out, DType::kF32));
    if (vae_profile::on()) vae_profile::mark(ctx, "enc other");
    H3_TRY(ops::conv3d(ctx, p, x, conv.w, conv.b, y));
    if (vae_profile::on()) // by shape: kernel taps, channels in → out, the output's frames × H × W
        vae_profile::mark(ctx, "enc conv k" + std::to_string(conv.w.dim(2)) + std::to_string(conv.w.dim(3)) +
                                   " " + std::to_string(conv.w.dim(1)) + ">" + std::to_string(conv.w.dim(0)) +
                                   (p.stride_h > 1 ? " s2 " : " ") + std::to_string(out[2]) + "x" +
                                   std::to_string(out[3]) + "x" + std::to_string(out[4]));
    return y;
}

// The reference's 3×3×3 "causal" convolution: spatial padding 1 in the config's mode, 2 zero frames in front.
ops::Conv3dParams causal3(ops::PadMode mode) {
    return {
        .pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1, .spatial_mode = mode};
}

// silu(group_norm(x)) for an activation x [B, C, T, H, W] as the input transform of the convolution that
// consumes it (Conv3dParams::input): GroupNorm's per-(b, t, channel) scale and shift [B, T, C], applied as
// the convolution reads x, so the normalized activation is never materialized on the fp16 CUDA path; the CPU
// materializes it with group_norm's own expression (bit for bit).
Result<ops::Conv3dInputTransform> norm_silu(const ops::Context& ctx, BufferPool& pool,
                                            const VideoVaeConfig& c, const VaeGroupNormWeights& n,
                                            const Tensor& x) {
    const Shape s{x.dim(0), x.dim(2), x.dim(1)};
    ops::Conv3dInputTransform a;
    a.silu = true;
    H3_ASSIGN_OR_RETURN(a.scale, pool.take(s, DType::kF32));
    H3_ASSIGN_OR_RETURN(a.shift, pool.take(s, DType::kF32));
    vae_profile::mark(ctx, "enc other");
    H3_TRY(ops::group_norm_stats(ctx,
                                 {.groups = c.norm_num_groups, .eps = static_cast<float>(c.encoder_norm_eps)},
                                 x, n.w, n.b, a.scale, a.shift));
    vae_profile::mark(ctx, "enc group_norm stats");
    return a;
}

// `p` reading its input through `in` (which must outlive the convolution call).
ops::Conv3dParams reading(ops::Conv3dParams p, const ops::Conv3dInputTransform& in) {
    p.input = &in;
    return p;
}

Result<Tensor> resnet(const ops::Context& ctx, BufferPool& pool, const VideoVaeConfig& c,
                      const VaeResnet3d& r, const Tensor& x) {
    const ops::PadMode mode = pad_mode(c);
    Tensor h;
    {
        H3_ASSIGN_OR_RETURN(ops::Conv3dInputTransform n1, norm_silu(ctx, pool, c, r.norm1, x));
        H3_ASSIGN_OR_RETURN(h, run_conv(ctx, pool, r.conv1, reading(causal3(mode), n1), x));
    }
    H3_ASSIGN_OR_RETURN(ops::Conv3dInputTransform n2, norm_silu(ctx, pool, c, r.norm2, h));
    ops::Conv3dParams p2 = reading(causal3(mode), n2);
    if (!r.shortcut.w.defined()) {
        // x is added by conv2 (Conv3dParams::residual: in the Hopper GEMM's epilogue), the same sums as
        // conv2 followed by an add
        p2.residual = &x;
        return run_conv(ctx, pool, r.conv2, p2, h);
    }
    // With a 1×1×1 shortcut, conv2's input is released before the shortcut's output is taken (one
    // activation less at the peak than fusing its add).
    H3_ASSIGN_OR_RETURN(Tensor out, run_conv(ctx, pool, r.conv2, p2, h));
    h = Tensor();
    H3_ASSIGN_OR_RETURN(Tensor s, run_conv(ctx, pool, r.shortcut, {}, x));
    H3_TRY(ops::add(ctx, s, out, out));
    vae_profile::mark(ctx, "enc residual add");
    return out;
}

// Tiles per encoder call on `device` for tiles of `pixels` pixels × `frames` frames.
int encode_tile_batch(const VideoEncodeOptions& o, const VideoVaeConfig& c, Device device, int64_t frames,
                      int64_t pixels) {
    if (o.tile_batch > 0) return o.tile_batch;
    if (device.is_cpu()) return 1;
    int64_t widest = 0; // the largest activation of one tile (level i runs at its input resolution)
    int64_t t = frames, px = pixels, cin = c.block_out_channels[0];
    for (size_t i = 0; i < c.block_out_channels.size(); ++i) {
        widest = std::max(widest, std::max<int64_t>(cin, c.block_out_channels[i]) * t * px);
        cin = c.block_out_channels[i];
        if (c.spatial_downsample_factors[i] == 2) px /= 4;
        if (c.temporal_downsample_factors[i] == 2) t = (t + 1) / 2;
    }
    constexpr int64_t kBudget = int64_t{1} << 30;
    return static_cast<int>(std::clamp<int64_t>(kBudget / std::max<int64_t>(widest * 4, 1), 1, 64));
}

// frames [a0, a1) of x [C, F, H, W] (host), the indices past the end clamped to the last frame, into `out`
// [C, a1 − a0, H, W] (contiguous host memory, pageable or page-locked).
void frames_clamped_into(const Tensor& x, int64_t a0, int64_t a1, Tensor& out) {
    const int64_t ch = x.dim(0), f = x.dim(1), hw = x.dim(2) * x.dim(3), n = a1 - a0;
    for (int64_t c = 0; c < ch; ++c)
        for (int64_t k = 0; k < n; ++k)
            std::memcpy(out.data_as<float>() + (c * n + k) * hw,
                        x.data_as<const float>() + (c * f + std::min(a0 + k, f - 1)) * hw,
                        static_cast<size_t>(hw) * sizeof(float));
}

// Host memory for one clip of `shape`: on the CPU a plain tensor; on CUDA a view of the encoder's page-locked
// clip buffer (grown when too small) once the stream has finished with it (the previous clip's upload), or a
// plain tensor when page-locked memory cannot be had.
Result<Tensor> clip_buffer(const ops::Context& ctx, const VideoVaeEncoder& enc, const Shape& shape) {
    if (ctx.device.is_cpu()) return Tensor::host(shape, DType::kF32);
    const size_t bytes = static_cast<size_t>(shape.numel()) * sizeof(float);
    H3_TRY(cuda::stream_synchronize(ctx.stream()));
    if (!enc.clip_staging || enc.clip_staging->bytes() < bytes) {
        enc.clip_staging.reset();
        auto p = allocate_pinned(bytes);
        if (!p.ok()) return Tensor::host(shape, DType::kF32);
        enc.clip_staging = std::move(p).value();
    }
    return Tensor::from_storage(enc.clip_staging, 0, shape, DType::kF32);
}

} // namespace

std::vector<std::pair<std::string, std::vector<int64_t>>> video_vae_encoder_tensors(const VideoVaeConfig& c) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> t;
    const auto& ch = c.block_out_channels;
    add_conv(t, "encoder.conv_in", ch[0], c.in_channels, 3);
    int64_t cin = ch[0];
    for (size_t i = 0; i < ch.size(); ++i) {
        for (int j = 0; j < c.layers_per_block; ++j) {
            const std::string p = level_prefix(i) + "resnets." + std::to_string(j) + ".";
            add_norm(t, p + "norm1", cin);
            add_conv(t, p + "conv1", ch[i], cin, 3);
            add_norm(t, p + "norm2", ch[i]);
            add_conv(t, p + "conv2", ch[i], ch[i], 3);
            if (cin != ch[i]) add_conv(t, p + "conv_shortcut", ch[i], cin, 1);
            cin = ch[i];
        }
        if (c.temporal_downsample_factors[i] * c.spatial_downsample_factors[i] > 1)
            add_conv(t, level_prefix(i) + "downsamplers.0.conv", ch[i], ch[i], 3);
    }
    add_norm(t, "encoder.norm_out", cin);
    add_conv(t, "encoder.conv_out", 2LL * c.latent_channels, cin, 3);
    add_conv(t, "quant_conv", 2LL * c.latent_channels, 2LL * c.latent_channels, 1);
    return t;
}

Result<VideoVaeEncoder> load_video_vae_encoder(const std::string& dir, Device device) {
    VideoVaeEncoder enc;
    enc.device = device;
    const std::string cfg_path = (fs::path(dir) / "config.json").string();
    H3_ASSIGN_OR_RETURN(enc.config, VideoVaeConfig::from_file(cfg_path));
    H3_TRY(enc.config.validate_encoder(cfg_path));
    H3_ASSIGN_OR_RETURN(auto ts, io::TensorSet::open(dir));
    std::map<std::string, Tensor> got;
    for (const auto& [name, shape] : video_vae_encoder_tensors(enc.config)) {
        if (!ts.contains(name)) return bad_input("video VAE encoder " + dir + " lacks tensor '" + name + "'");
        H3_ASSIGN_OR_RETURN(Tensor t, ts.tensor(name));
        if (t.shape().to_vector() != shape)
            return bad_input("video VAE encoder " + dir + ": tensor '" + name + "' has shape " +
                             t.shape().to_string() + ", the config implies " + Shape(shape).to_string());
        if (!dtype_is_float(t.dtype()))
            return bad_input("video VAE encoder " + dir + ": tensor '" + name + "' is not a float tensor");
        H3_ASSIGN_OR_RETURN(t, t.to_dtype(DType::kF32));
        if (!device.is_cpu()) {
            H3_ASSIGN_OR_RETURN(t, t.to(device));
        }
        got[name] = t;
    }
    assign_weights(enc, got);
    return enc;
}

Result<VideoVaeEncoder> random_video_vae_encoder(const ops::Context& ctx, const VideoVaeConfig& config,
                                                 uint64_t seed) {
    H3_TRY(config.validate("random video VAE encoder config"));
    H3_TRY(config.validate_encoder("random video VAE encoder config"));
    VideoVaeEncoder enc;
    enc.config = config;
    enc.device = ctx.device;
    std::map<std::string, Tensor> got;
    for (const auto& [name, shape] : video_vae_encoder_tensors(config)) {
        H3_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(Shape(shape), DType::kF32, ctx.device));
        const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
        const bool norm = weight && shape.size() == 1;
        float bound = 0.01f; // biases
        if (norm) {
            bound = 0.1f;
        } else if (weight) {
            int64_t fan_in = 1;
            for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
            bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
        }
        H3_TRY(ops::fill_uniform(ctx, {.seed = seed++, .bound = bound, .offset = norm ? 1.0f : 0.0f}, t));
        got[name] = t;
    }
    assign_weights(enc, got);
    return enc;
}

namespace {

// Frame fi of u8 [F, H, W, 3] into its planes of out [3, F, H, W] f32.
void normalize_rgb8_frame(const Tensor& frames, int64_t fi, Tensor& out) {
    static constexpr float kMean[3] = {0.485f, 0.456f, 0.406f};
    static constexpr float kStd[3] = {0.229f, 0.224f, 0.225f};
    const int64_t f = frames.dim(0), hw = frames.dim(1) * frames.dim(2);
    const uint8_t* s = frames.data_as<const uint8_t>();
    float* d = out.data_as<float>();
    for (int64_t c = 0; c < 3; ++c)
        for (int64_t i = 0; i < hw; ++i)
            d[(c * f + fi) * hw + i] =
                (static_cast<float>(s[(fi * hw + i) * 3 + c]) / 255.0f - kMean[c]) / kStd[c];
}

// [3, F, H, W] f32 for the frames, every value written (no zeroing first: 1.5 GB for a release-size
// reference clip), frame by frame with the calling thread's cancel flag read between frames.
Result<Tensor> normalize_rgb8_cancellable(const Tensor& frames) {
    const Shape shape{3, frames.dim(0), frames.dim(1), frames.dim(2)};
    H3_ASSIGN_OR_RETURN(auto storage, allocate_host_uninitialized(static_cast<size_t>(shape.numel()) * 4));
    Tensor out = Tensor::from_storage(std::move(storage), 0, shape, DType::kF32);
    const std::atomic<bool>* cancel = ops::cancel_flag();
    for (int64_t fi = 0; fi < frames.dim(0); ++fi) {
        if (ops::cancel_requested(cancel)) return ops::cancelled_in("encode_video: normalizing the frames");
        normalize_rgb8_frame(frames, fi, out);
    }
    return out;
}

} // namespace

Tensor normalize_rgb8(const Tensor& frames) {
    Tensor out = Tensor::host(Shape{3, frames.dim(0), frames.dim(1), frames.dim(2)}, DType::kF32);
    for (int64_t fi = 0; fi < frames.dim(0); ++fi) normalize_rgb8_frame(frames, fi, out);
    return out;
}

namespace {

// The encoder's buffer pool on ctx's device (made on first use, remade when the device changes).
BufferPool& encoder_pool(const ops::Context& ctx, const VideoVaeEncoder& enc) {
    if (!enc.buffers || enc.buffers->device() != ctx.device)
        enc.buffers = std::make_shared<BufferPool>(ctx.device);
    return *enc.buffers;
}

// The encoder forward; the moments stay on ctx's device (in a tensor of their own, not a pool buffer). An
// input on another device is copied over first.
Result<Tensor> encode_moments_on_device(const ops::Context& ctx, const VideoVaeEncoder& enc,
                                        const Tensor& input, const std::atomic<bool>* cancel) {
    const ops::CancelScope cancel_scope(cancel); // the ops read it between their blocks too
    // one encoder call over a whole clip or tile batch can take many seconds on the CPU: the flag is read
    // between its blocks (a host load, no device sync)
    const auto cancelled_now = [&] { return cancel && cancel->load(std::memory_order_relaxed); };
    const VideoVaeConfig& c = enc.config;
    const VideoVaeEncoderWeights& w = enc.weights;
    if (ctx.device != enc.device)
        return invalid_argument("encode_video: the weights live on another device than the context");
    if (input.rank() != 5 || input.dim(1) != c.in_channels || input.dtype() != DType::kF32)
        return invalid_argument("encode_video: pixels must be f32 [B, " + std::to_string(c.in_channels) +
                                ", T, H, W], got " + input.describe());
    BufferPool& pool = encoder_pool(ctx, enc);
    Tensor x = input;
    if (x.device() != ctx.device) {
        H3_ASSIGN_OR_RETURN(Tensor xc, input.contiguous());
        H3_ASSIGN_OR_RETURN(x, pool.take(input.shape(), DType::kF32));
        H3_TRY(x.copy_from(xc, ctx.stream()));
    }
    const ops::PadMode mode = pad_mode(c);
    H3_ASSIGN_OR_RETURN(Tensor h, run_conv(ctx, pool, w.conv_in, causal3(mode), x));
    x = Tensor();
    for (const VaeDownLevel& lv : w.levels) {
        for (const VaeResnet3d& r : lv.resnets) {
            if (cancelled_now()) return cancelled("video encode cancelled");
            H3_ASSIGN_OR_RETURN(h, resnet(ctx, pool, c, r, h));
        }
        if (cancelled_now()) return cancelled("video encode cancelled");
        if (lv.down.w.defined()) {
            // stride-2 levels pad right/bottom by 1 (no other spatial padding); 2 zero frames in front.
            const int pad = lv.stride_s == 2 ? 1 : 0;
            const ops::Conv3dParams p{.stride_t = lv.stride_t,
                                      .stride_h = lv.stride_s,
                                      .stride_w = lv.stride_s,
                                      .pad_front = 2,
                                      .pad_bottom = pad,
                                      .pad_right = pad,
                                      .spatial_mode = mode};
            H3_ASSIGN_OR_RETURN(h, run_conv(ctx, pool, lv.down, p, h));
        }
    }
    if (cancelled_now()) return cancelled("video encode cancelled");
    H3_ASSIGN_OR_RETURN(ops::Conv3dInputTransform no, norm_silu(ctx, pool, c, w.norm_out, h));
    H3_ASSIGN_OR_RETURN(Tensor o, run_conv(ctx, pool, w.conv_out, reading(causal3(mode), no), h));
    h = Tensor();
    const Shape ms = ops::conv3d_out_shape(o.shape(), w.quant_conv.w.shape(), {});
    if (ms.rank() != 5) return invalid_argument("video VAE encoder: quant_conv does not fit " + o.describe());
    H3_ASSIGN_OR_RETURN(Tensor m, Tensor::empty(ms, DType::kF32, ctx.device));
    H3_TRY(ops::conv3d(ctx, {}, o, w.quant_conv.w, w.quant_conv.b, m));
    return m;
}

} // namespace

Result<Tensor> encode_moments(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& input,
                              const std::atomic<bool>* cancel) {
    H3_ASSIGN_OR_RETURN(Tensor m, encode_moments_on_device(ctx, enc, input, cancel));
    return to_host(ctx, m);
}

Result<Tensor> encode_clip_moments(const ops::Context& caller_ctx, const VideoVaeEncoder& enc,
                                   const Tensor& x, const VideoEncodeOptions& opt) {
    const ops::CancelScope cancel_scope(opt.cancel); // the ops read it between their blocks too
    ops::Context ctx = caller_ctx;
    ctx.allow_tf32 = opt.tf32;
    const VideoVaeConfig& c = enc.config;
    if (x.rank() != 4 || x.dim(0) != c.in_channels || x.dtype() != DType::kF32 || !x.device().is_cpu())
        return invalid_argument("encode_clip_moments: x must be host f32 [" + std::to_string(c.in_channels) +
                                ", T, H, W], got " + x.describe());
    vae_profile::mark(ctx, nullptr);
    H3_ASSIGN_OR_RETURN(Tensor xc, x.contiguous());
    const int64_t ch = xc.dim(0), t = xc.dim(1), height = xc.dim(2), width = xc.dim(3);
    if (opt.cancel && opt.cancel->load()) return cancelled("video encode cancelled");
    if (!opt.tiling) {
        H3_ASSIGN_OR_RETURN(Tensor m,
                            encode_moments(ctx, enc, xc.view({1, ch, t, height, width}), opt.cancel));
        return m.view({m.dim(1), m.dim(2), m.dim(3), m.dim(4)});
    }
    const int ratio = c.patch;
    if (opt.tile % ratio || opt.min_overlap % ratio || opt.min_overlap < ratio || opt.min_overlap >= opt.tile)
        return invalid_argument("encode_video: tile " + std::to_string(opt.tile) + " and min overlap " +
                                std::to_string(opt.min_overlap) + " must be multiples of the spatial ratio " +
                                std::to_string(ratio) + " with 0 < overlap < tile");
    const TileLayout ty = split_tiles(static_cast<int>(height), opt.tile, opt.min_overlap, ratio);
    const TileLayout tx = split_tiles(static_cast<int>(width), opt.tile, opt.min_overlap, ratio);
    const size_t ny = ty.starts.size(), nx = tx.starts.size();
    std::vector<std::vector<Tensor>> tiles(ny, std::vector<Tensor>(nx));
    struct Pending {
        size_t i, j;
        int64_t y0, x0, th, tw;
    };
    std::vector<Pending> batch;
    // The clip goes to ctx's device once (page-locked, asynchronous) and the tiles are cut from it there; on
    // CUDA the tiles' moments stay on the device and are stitched there: no stream synchronize per tile.
    BufferPool& pool = encoder_pool(ctx, enc);
    StagingBuffer staging;
    Tensor clip = xc;
    if (!ctx.device.is_cpu()) {
        H3_ASSIGN_OR_RETURN(clip, pool.take(xc.shape(), DType::kF32));
        if (xc.storage()->pinned()) { // encode_video's clip buffer: one DMA, no staging copy
            H3_TRY(clip.copy_from(xc, ctx.stream()));
        } else {
            H3_TRY(staging.upload(xc, clip, ctx.stream()));
        }
        vae_profile::mark(ctx, "enc clip upload");
    }
    auto flush = [&]() -> Status {
        if (batch.empty()) return ok_status();
        if (opt.cancel && opt.cancel->load()) return cancelled("video encode cancelled");
        const int64_t nb = static_cast<int64_t>(batch.size()), th = batch[0].th, tw = batch[0].tw;
        H3_ASSIGN_OR_RETURN(Tensor in, pool.take(Shape{nb, ch, t, th, tw}, DType::kF32));
        for (int64_t b = 0; b < nb; ++b) {
            Tensor dst = in.slice(0, b, b + 1).view({ch, t, th, tw});
            const Pending& pd = batch[static_cast<size_t>(b)];
            H3_TRY(ops::crop_tile(ctx, {.y0 = pd.y0, .x0 = pd.x0}, clip, dst));
        }
        vae_profile::mark(ctx, "enc tile cut");
        H3_ASSIGN_OR_RETURN(Tensor m, encode_moments_on_device(ctx, enc, in, opt.cancel));
        vae_profile::mark(ctx, "enc other");
        for (int64_t b = 0; b < nb; ++b) {
            const Pending& pd = batch[static_cast<size_t>(b)];
            tiles[pd.i][pd.j] = m.slice(0, b, b + 1).view({m.dim(1), m.dim(2), m.dim(3), m.dim(4)});
        }
        batch.clear();
        return ok_status();
    };
    for (size_t i = 0; i < ny; ++i)
        for (size_t j = 0; j < nx; ++j) {
            // The reference slices x[..., y:y+tile, x:x+tile]: the last tile may be shorter.
            const int64_t y0 = ty.starts[i], x0 = tx.starts[j];
            const int64_t th = std::min<int64_t>(ty.lengths[i], height - y0);
            const int64_t tw = std::min<int64_t>(tx.lengths[j], width - x0);
            const size_t max_batch = static_cast<size_t>(encode_tile_batch(opt, c, ctx.device, t, th * tw));
            if (!batch.empty() && (batch.size() >= max_batch || batch[0].th != th || batch[0].tw != tw))
                H3_TRY(flush());
            batch.push_back({i, j, y0, x0, th, tw});
        }
    H3_TRY(flush());
    std::vector<int> oy(ty.overlaps), ox(tx.overlaps);
    for (int& o : oy) o /= ratio;
    for (int& o : ox) o /= ratio;
    H3_ASSIGN_OR_RETURN(Tensor stitched, stitch_tiles(ctx, tiles, oy, ox));
    H3_TRY(staging.wait()); // the clip's upload out of the page-locked buffer has landed
    vae_profile::mark(ctx, "enc stitch");
    auto host = to_host(ctx, stitched);
    vae_profile::mark(ctx, "enc download");
    return host;
}

VideoPosterior posterior_from_moments(const Tensor& m) {
    const int64_t c2 = m.dim(0), c = c2 / 2, n = m.numel() / c2;
    VideoPosterior p;
    p.mean = Tensor::host(Shape{1, c, m.dim(1), m.dim(2), m.dim(3)}, DType::kF32);
    p.std = Tensor::host(p.mean.shape(), DType::kF32);
    const float* src = m.data_as<const float>();
    std::memcpy(p.mean.data_as<float>(), src, static_cast<size_t>(c * n) * sizeof(float));
    float* sd = p.std.data_as<float>();
    for (int64_t i = 0; i < c * n; ++i) {
        const float lv = std::min(20.0f, std::max(-30.0f, src[c * n + i]));
        sd[i] = std::exp(0.5f * lv);
    }
    return p;
}

Result<VideoPosterior> encode_video(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& frames,
                                    const VideoEncodeOptions& opt) {
    const ops::CancelScope cancel_scope(opt.cancel);
    const VideoVaeConfig& c = enc.config;
    Tensor px;
    if (frames.dtype() == DType::kU8) {
        if (frames.rank() != 4 || frames.dim(3) != 3 || c.in_channels != 3)
            return invalid_argument("encode_video: RGB8 frames must be u8 [F, H, W, 3], got " +
                                    frames.describe());
        H3_ASSIGN_OR_RETURN(Tensor host, to_host(ctx, frames));
        H3_ASSIGN_OR_RETURN(host, host.contiguous());
        H3_ASSIGN_OR_RETURN(px, normalize_rgb8_cancellable(host));
    } else if (frames.dtype() == DType::kF32 &&
               (frames.rank() == 4 || (frames.rank() == 5 && frames.dim(0) == 1))) {
        H3_ASSIGN_OR_RETURN(Tensor host, to_host(ctx, frames));
        H3_ASSIGN_OR_RETURN(host, host.contiguous());
        px = host.rank() == 5 ? host.view({host.dim(1), host.dim(2), host.dim(3), host.dim(4)}) : host;
    } else {
        return invalid_argument("encode_video: frames must be u8 [F, H, W, 3] or f32 [3, F, H, W], got " +
                                frames.describe());
    }
    if (px.dim(1) < 1 || px.dim(2) < 1 || px.dim(3) < 1)
        return invalid_argument("encode_video: no pixels in " + frames.describe());
    const int64_t f = px.dim(1), clip = c.clip_length;
    // frames [a0, a1) of px (clamped at the end) in host memory the clip's upload reads directly
    const auto clip_input = [&](int64_t a0, int64_t a1) -> Result<Tensor> {
        H3_ASSIGN_OR_RETURN(Tensor buf,
                            clip_buffer(ctx, enc, Shape{px.dim(0), a1 - a0, px.dim(2), px.dim(3)}));
        frames_clamped_into(px, a0, a1, buf);
        return buf;
    };
    if (f == 1) {
        H3_ASSIGN_OR_RETURN(Tensor one, clip_input(0, 1));
        H3_ASSIGN_OR_RETURN(Tensor m, encode_clip_moments(ctx, enc, one, opt));
        return posterior_from_moments(m);
    }
    const int64_t padded = (f + clip - 1) / clip * clip;
    std::vector<Tensor> parts;
    int64_t total = 0;
    for (int64_t a0 = 0; a0 < padded; a0 += clip) {
        H3_ASSIGN_OR_RETURN(Tensor part, clip_input(a0, a0 + clip));
        H3_ASSIGN_OR_RETURN(Tensor m, encode_clip_moments(ctx, enc, part, opt));
        total += m.dim(1);
        parts.push_back(std::move(m));
    }
    vae_profile::print("encode"); // the clips' phases summed
    const int64_t keep = total - c.token_drop;
    if (keep < 1)
        return invalid_argument("encode_video: " + std::to_string(f) +
                                " frames leave no latent after token_drop");
    const int64_t c2 = parts[0].dim(0), lh = parts[0].dim(2), lw = parts[0].dim(3), hw = lh * lw;
    Tensor m = Tensor::host(Shape{c2, keep, lh, lw}, DType::kF32);
    int64_t t0 = 0;
    for (const Tensor& part : parts) {
        const int64_t n = std::min(part.dim(1), keep - t0);
        for (int64_t ch = 0; ch < c2 && n > 0; ++ch)
            std::memcpy(m.data_as<float>() + (ch * keep + t0) * hw,
                        part.data_as<const float>() + ch * part.dim(1) * hw,
                        static_cast<size_t>(n * hw) * sizeof(float));
        t0 += std::max<int64_t>(n, 0);
    }
    return posterior_from_moments(m);
}

Tensor sample_normalized_latent(const VideoPosterior& post, const VideoVaeConfig& config, uint64_t seed) {
    const int64_t n = post.mean.numel(), c = post.mean.dim(1), per = n / c;
    std::vector<float> eps(static_cast<size_t>(n));
    TorchGenerator gen(seed);
    gen.randn(eps.data(), eps.size());
    Tensor out = Tensor::host(post.mean.shape(), DType::kF32);
    const float* mp = post.mean.data_as<const float>();
    const float* sp = post.std.data_as<const float>();
    float* o = out.data_as<float>();
    for (int64_t i = 0; i < n; ++i) {
        const int64_t ch = i / per;
        const float noise = sp[i] * eps[static_cast<size_t>(i)];
        const float z = round_f16(mp[i] + noise);
        o[i] =
            (z - config.latents_mean[static_cast<size_t>(ch)]) / config.latents_std[static_cast<size_t>(ch)];
    }
    return out;
}

Result<Tensor> encode_keyframe(const ops::Context& ctx, const VideoVaeEncoder& enc, const Tensor& image,
                               const VideoEncodeOptions& opt, uint64_t seed) {
    if (image.dtype() != DType::kU8 || !(image.rank() == 3 || (image.rank() == 4 && image.dim(0) == 1)) ||
        image.dim(-1) != 3)
        return invalid_argument("encode_keyframe: the image must be u8 [H, W, 3], got " + image.describe());
    const Tensor frames = image.rank() == 3 ? image.view({1, image.dim(0), image.dim(1), 3}) : image;
    H3_ASSIGN_OR_RETURN(VideoPosterior post, encode_video(ctx, enc, frames, opt));
    return sample_normalized_latent(post, enc.config, seed);
}

} // namespace h3::model
