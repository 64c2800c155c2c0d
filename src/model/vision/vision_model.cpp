#include "model/vision/vision_model.h"

#include "core/dtype.h"
#include "model/weights/weight_master.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace h3::model {

// Query rows per attention call of one image: a 2048-edge reference image has tens of thousands of patches,
// and the cancel flag is read between the calls.
constexpr int64_t kAttentionRowsPerCheck = 4096;

std::vector<std::pair<std::string, std::vector<int64_t>>> vision_tensor_specs(const VisionConfig& c) {
    const int64_t h = c.hidden_size, f = c.intermediate_size, m = int64_t(c.merge_unit()) * h,
                  o = c.out_hidden_size;
    std::vector<std::pair<std::string, std::vector<int64_t>>> s;
    const std::string p = kVisionPrefix;
    s.push_back({p + "patch_embed.proj.weight",
                 {h, c.in_channels, c.temporal_patch_size, c.patch_size, c.patch_size}});
    s.push_back({p + "patch_embed.proj.bias", {h}});
    s.push_back({p + "pos_embed.weight", {c.num_position_embeddings, h}});
    for (int i = 0; i < c.depth; ++i) {
        const std::string b = p + "blocks." + std::to_string(i) + ".";
        for (const char* n : {"norm1", "norm2"}) {
            s.push_back({b + n + ".weight", {h}});
            s.push_back({b + n + ".bias", {h}});
        }
        s.push_back({b + "attn.qkv.weight", {3 * h, h}});
        s.push_back({b + "attn.qkv.bias", {3 * h}});
        s.push_back({b + "attn.proj.weight", {h, h}});
        s.push_back({b + "attn.proj.bias", {h}});
        s.push_back({b + "mlp.linear_fc1.weight", {f, h}});
        s.push_back({b + "mlp.linear_fc1.bias", {f}});
        s.push_back({b + "mlp.linear_fc2.weight", {h, f}});
        s.push_back({b + "mlp.linear_fc2.bias", {h}});
    }
    auto merger = [&](const std::string& q, int64_t norm) {
        s.push_back({q + "norm.weight", {norm}});
        s.push_back({q + "norm.bias", {norm}});
        s.push_back({q + "linear_fc1.weight", {m, m}});
        s.push_back({q + "linear_fc1.bias", {m}});
        s.push_back({q + "linear_fc2.weight", {o, m}});
        s.push_back({q + "linear_fc2.bias", {o}});
    };
    merger(p + "merger.", h);
    for (size_t j = 0; j < c.deepstack_visual_indexes.size(); ++j)
        merger(p + "deepstack_merger_list." + std::to_string(j) + ".", m);
    return s;
}

namespace {

class Loader {
public:
    Loader(const TextCheckpoint& ckpt, const VisionConfig& c, const VisionLoadOptions& opt)
        : ckpt_(ckpt), opt_(opt) {
        for (auto& [name, shape] : vision_tensor_specs(c)) specs_[name] = shape;
    }
    Result<Tensor> host(const std::string& name) {
        if (!ckpt_.tensors.contains(name))
            return not_found("vision tower " + ckpt_.dir + ": tensor '" + name + "' is missing");
        H3_ASSIGN_OR_RETURN(Tensor t, ckpt_.tensors.tensor(name));
        const auto& want = specs_.at(name);
        if (t.shape().to_vector() != want)
            return bad_input("vision tower " + ckpt_.dir + ": tensor '" + name + "' has shape " +
                             t.shape().to_string() + ", the config implies " + Shape(want).to_string());
        if (!dtype_is_float(t.dtype()))
            return bad_input("vision tower " + ckpt_.dir + ": tensor '" + name + "' has dtype " +
                             dtype_name(t.dtype()) + ", expected a float type");
        return convert_weight(t, precision_dtype(opt_.precision),
                              "vision tower " + ckpt_.dir + ": tensor '" + name + "'");
    }
    Result<Tensor> place(const Tensor& t) {
        if (opt_.device.is_cpu()) return t;
        return t.to(opt_.device);
    }
    Result<Tensor> get(const std::string& name) {
        H3_ASSIGN_OR_RETURN(Tensor t, host(name));
        return place(t);
    }
    // Rows [r0, r1) of a 2-D (or 1-D) tensor as their own contiguous tensor on the device.
    Result<Tensor> rows(const std::string& name, int64_t r0, int64_t r1) {
        H3_ASSIGN_OR_RETURN(Tensor t, host(name));
        H3_ASSIGN_OR_RETURN(Tensor part, t.slice(0, r0, r1).contiguous());
        return place(part);
    }

private:
    const TextCheckpoint& ckpt_;
    const VisionLoadOptions& opt_;
    std::map<std::string, std::vector<int64_t>> specs_;
};

Result<VisionMergerWeights> load_merger(Loader& l, const std::string& p, bool postshuffle) {
    VisionMergerWeights m;
    m.postshuffle = postshuffle;
    H3_ASSIGN_OR_RETURN(m.norm_w, l.get(p + "norm.weight"));
    H3_ASSIGN_OR_RETURN(m.norm_b, l.get(p + "norm.bias"));
    H3_ASSIGN_OR_RETURN(m.fc1, l.get(p + "linear_fc1.weight"));
    H3_ASSIGN_OR_RETURN(m.fc1_b, l.get(p + "linear_fc1.bias"));
    H3_ASSIGN_OR_RETURN(m.fc2, l.get(p + "linear_fc2.weight"));
    H3_ASSIGN_OR_RETURN(m.fc2_b, l.get(p + "linear_fc2.bias"));
    return m;
}

} // namespace

Result<std::unique_ptr<VisionModel>> VisionModel::load(const TextCheckpoint& ckpt,
                                                       const VisionLoadOptions& opt, ops::Context ctx) {
    if (!(opt.device == ctx.device))
        return invalid_argument("vision tower: load device " + opt.device.to_string() +
                                " differs from the op context's " + ctx.device.to_string());
    H3_ASSIGN_OR_RETURN(VisionConfig c,
                        VisionConfig::from_file((fs::path(ckpt.dir) / "config.json").string()));
    Loader l(ckpt, c, opt);
    const std::string p = kVisionPrefix;
    const int64_t h = c.hidden_size;
    VisionWeights w;
    {
        H3_ASSIGN_OR_RETURN(Tensor patch, l.host(p + "patch_embed.proj.weight"));
        H3_ASSIGN_OR_RETURN(w.patch, l.place(patch.view({h, int64_t(c.patch_dim())})));
    }
    H3_ASSIGN_OR_RETURN(w.patch_b, l.get(p + "patch_embed.proj.bias"));
    H3_ASSIGN_OR_RETURN(w.pos_embed, l.host(p + "pos_embed.weight"));
    w.blocks.resize(static_cast<size_t>(c.depth));
    for (int i = 0; i < c.depth; ++i) {
        const std::string b = p + "blocks." + std::to_string(i) + ".";
        VisionBlockWeights& bw = w.blocks[static_cast<size_t>(i)];
        H3_ASSIGN_OR_RETURN(bw.norm1_w, l.get(b + "norm1.weight"));
        H3_ASSIGN_OR_RETURN(bw.norm1_b, l.get(b + "norm1.bias"));
        H3_ASSIGN_OR_RETURN(bw.norm2_w, l.get(b + "norm2.weight"));
        H3_ASSIGN_OR_RETURN(bw.norm2_b, l.get(b + "norm2.bias"));
        H3_ASSIGN_OR_RETURN(bw.q, l.rows(b + "attn.qkv.weight", 0, h));
        H3_ASSIGN_OR_RETURN(bw.k, l.rows(b + "attn.qkv.weight", h, 2 * h));
        H3_ASSIGN_OR_RETURN(bw.v, l.rows(b + "attn.qkv.weight", 2 * h, 3 * h));
        H3_ASSIGN_OR_RETURN(bw.q_b, l.rows(b + "attn.qkv.bias", 0, h));
        H3_ASSIGN_OR_RETURN(bw.k_b, l.rows(b + "attn.qkv.bias", h, 2 * h));
        H3_ASSIGN_OR_RETURN(bw.v_b, l.rows(b + "attn.qkv.bias", 2 * h, 3 * h));
        H3_ASSIGN_OR_RETURN(bw.proj, l.get(b + "attn.proj.weight"));
        H3_ASSIGN_OR_RETURN(bw.proj_b, l.get(b + "attn.proj.bias"));
        H3_ASSIGN_OR_RETURN(bw.fc1, l.get(b + "mlp.linear_fc1.weight"));
        H3_ASSIGN_OR_RETURN(bw.fc1_b, l.get(b + "mlp.linear_fc1.bias"));
        H3_ASSIGN_OR_RETURN(bw.fc2, l.get(b + "mlp.linear_fc2.weight"));
        H3_ASSIGN_OR_RETURN(bw.fc2_b, l.get(b + "mlp.linear_fc2.bias"));
    }
    H3_ASSIGN_OR_RETURN(w.merger, load_merger(l, p + "merger.", false));
    for (size_t j = 0; j < c.deepstack_visual_indexes.size(); ++j) {
        H3_ASSIGN_OR_RETURN(auto m,
                            load_merger(l, p + "deepstack_merger_list." + std::to_string(j) + ".", true));
        w.deepstack.push_back(std::move(m));
    }
    return std::make_unique<VisionModel>(std::move(c), std::move(w), opt.precision, ctx);
}

VisionModel::VisionModel(VisionConfig config, VisionWeights weights, TextPrecision precision,
                         ops::Context ctx)
    : config_(std::move(config)), weights_(std::move(weights)), precision_(precision), ctx_(ctx) {}

namespace {

// One axis of transformers 5.x get_vision_interpolation_indices_and_weights(mode="bilinear",
// align_corners=True) for the patch index `i` of an axis of `size` patches over a `side`-row table:
// src = i·(side−1) / max(size−1, 1) as one correctly rounded fp32 division (the closed form of
// linspace(0, side−1, size), which it replaced: the two differ in the last bit for some i), the taps
// floor(src) and floor(src)+1 clamped to the table, the weights (1 − |src − floor − o|).clamp(min=0), o =
// 0, 1.
struct AxisTaps {
    int64_t tap[2];
    float weight[2];
};

AxisTaps axis_taps(int64_t i, int64_t size, int64_t side) {
    const float src = static_cast<float>(i * (side - 1)) / static_cast<float>(std::max<int64_t>(size - 1, 1));
    const float fl = std::floor(src);
    const float frac = src - fl; // exact
    AxisTaps a;
    for (int o = 0; o < 2; ++o) {
        a.tap[o] = std::clamp<int64_t>(static_cast<int64_t>(fl) + o, 0, side - 1);
        a.weight[o] = std::max(1.0f - std::fabs(frac - static_cast<float>(o)), 0.0f);
    }
    return a;
}

} // namespace

Tensor VisionModel::position_embedding(const std::vector<VisionGrid>& grids) const {
    // transformers 5.x Qwen3VLVisionModel.forward: pos = (pos_embed(indices) * weights[:, :, None]).sum(1) —
    // the table rows (the checkpoint's dtype, exact in fp32) times the fp32 weights in fp32 (type
    // promotion), the four taps 00, 01, 10, 11 summed in fp32 from 0 in that order; the caller rounds the sum
    // once to the tower's dtype (`pos_embeds.to(hidden_states.dtype)`) before adding it.
    const VisionConfig& c = config_;
    const int64_t hs = c.hidden_size, side = c.pos_side(), m = c.spatial_merge_size;
    int64_t n = 0;
    for (const auto& g : grids) n += g.patches();
    Tensor out = Tensor::host({n, hs}, DType::kF32);
    float* o = out.data_as<float>();
    const Tensor& table = weights_.pos_embed;
    std::vector<float> e(static_cast<size_t>(hs));
    auto table_row = [&](int64_t r) {
        const void* src = static_cast<const uint8_t*>(table.data()) + r * hs * dtype_size(table.dtype());
        convert_array(src, table.dtype(), e.data(), DType::kF32, static_cast<size_t>(hs));
    };
    int64_t r = 0;
    for (const auto& g : grids)
        for (int t = 0; t < g.t; ++t)
            for (int bh = 0; bh < g.h / m; ++bh)
                for (int bw = 0; bw < g.w / m; ++bw)
                    for (int ih = 0; ih < m; ++ih)
                        for (int iw = 0; iw < m; ++iw, ++r) {
                            const AxisTaps y = axis_taps(bh * m + ih, g.h, side);
                            const AxisTaps x = axis_taps(bw * m + iw, g.w, side);
                            float* dst = o + r * hs;
                            std::fill(dst, dst + hs, 0.0f);
                            for (int a = 0; a < 2; ++a)
                                for (int b = 0; b < 2; ++b) {
                                    const float wt = y.weight[a] * x.weight[b];
                                    table_row(y.tap[a] * side + x.tap[b]);
                                    for (int64_t j = 0; j < hs; ++j) {
                                        const float p = e[static_cast<size_t>(j)] * wt;
                                        dst[j] = dst[j] + p;
                                    }
                                }
                        }
    return out;
}

void VisionModel::rotary_tables(const std::vector<VisionGrid>& grids, Tensor& cos, Tensor& sin) const {
    const VisionConfig& c = config_;
    const int64_t d = c.head_dim(), dim = d / 2, k = dim / 2, m = c.spatial_merge_size;
    int64_t n = 0;
    for (const auto& g : grids) n += g.patches();
    cos = Tensor::host({n, d}, DType::kF32);
    sin = Tensor::host({n, d}, DType::kF32);
    float* cp = cos.data_as<float>();
    float* sp = sin.data_as<float>();
    // inv_freq_j = 1 / 10000^(2j / dim) over dim = head_dim / 2 (fp32).
    std::vector<float> inv(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j)
        inv[static_cast<size_t>(j)] =
            1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(dim));
    int64_t r = 0;
    for (const auto& g : grids)
        for (int t = 0; t < g.t; ++t)
            for (int bh = 0; bh < g.h / m; ++bh)
                for (int bw = 0; bw < g.w / m; ++bw)
                    for (int ih = 0; ih < m; ++ih)
                        for (int iw = 0; iw < m; ++iw, ++r) {
                            const float y = static_cast<float>(bh * m + ih),
                                        x = static_cast<float>(bw * m + iw);
                            for (int64_t j = 0; j < k; ++j) {
                                const float ay = y * inv[static_cast<size_t>(j)],
                                            ax = x * inv[static_cast<size_t>(j)];
                                for (int64_t rep = 0; rep < 2; ++rep) {
                                    const int64_t base = r * d + rep * dim;
                                    cp[base + j] = std::cos(ay);
                                    sp[base + j] = std::sin(ay);
                                    cp[base + k + j] = std::cos(ax);
                                    sp[base + k + j] = std::sin(ax);
                                }
                            }
                        }
}

Status VisionModel::merge(const VisionMergerWeights& w, const Tensor& h, Tensor& out) const {
    const int64_t n = h.dim(0), hs = h.dim(1), u = config_.merge_unit(), mh = u * hs;
    const DType act = act_dtype();
    auto alloc = [&](const Shape& s) { return Tensor::empty(s, act, ctx_.device); };
    const ops::LayerNormParams ln{.eps = 1e-6f};
    const Tensor none;
    H3_ASSIGN_OR_RETURN(Tensor x, alloc({n, hs}));
    Tensor xm = x.view({n / u, mh});
    if (w.postshuffle) {
        H3_TRY(ops::layer_norm(ctx_, ln, h.view({n / u, mh}), w.norm_w, w.norm_b, xm));
    } else {
        H3_TRY(ops::layer_norm(ctx_, ln, h, w.norm_w, w.norm_b, x));
    }
    H3_ASSIGN_OR_RETURN(Tensor y, alloc({n / u, mh}));
    H3_TRY(ops::gemm(ctx_, {}, xm, w.fc1, w.fc1_b, y));
    H3_TRY(ops::gelu(ctx_, {.tanh = false}, y, y));
    H3_TRY(ops::gemm(ctx_, {}, y, w.fc2, w.fc2_b, out));
    (void)none;
    return ok_status();
}

Result<VisionOutput> VisionModel::forward(const Tensor& pixel_values, const std::vector<VisionGrid>& grids,
                                          const IntermediateHook& hook,
                                          const std::atomic<bool>* cancel) const {
    const ops::CancelScope cancel_scope(cancel); // the ops read it between their blocks too
    const auto cancelled_now = [&] { return cancel && cancel->load(std::memory_order_relaxed); };
    const VisionConfig& c = config_;
    if (grids.empty()) return invalid_argument("vision tower: no images");
    int64_t n = 0;
    for (size_t i = 0; i < grids.size(); ++i) {
        const VisionGrid& g = grids[i];
        if (g.t < 1 || g.h < 1 || g.w < 1 || g.h % c.spatial_merge_size || g.w % c.spatial_merge_size)
            return invalid_argument("vision tower: image " + std::to_string(i) + " has grid (" +
                                    std::to_string(g.t) + ", " + std::to_string(g.h) + ", " +
                                    std::to_string(g.w) + "); h and w must be positive multiples of " +
                                    std::to_string(c.spatial_merge_size));
        n += g.patches();
    }
    if (pixel_values.rank() != 2 || pixel_values.dim(0) != n || pixel_values.dim(1) != c.patch_dim())
        return invalid_argument("vision tower: pixel_values is " + pixel_values.shape().to_string() +
                                ", the grids imply [" + std::to_string(n) + ", " +
                                std::to_string(c.patch_dim()) + "]");
    const DType act = act_dtype();
    const int64_t hs = c.hidden_size, nh = c.num_heads, d = c.head_dim(), f = c.intermediate_size,
                  u = c.merge_unit();
    auto alloc = [&](const Shape& s) { return Tensor::empty(s, act, ctx_.device); };
    auto upload = [&](const Tensor& host) -> Result<Tensor> {
        if (ctx_.device.is_cpu()) return host;
        return host.to(ctx_.device, ctx_.stream());
    };

    // Patch embedding: pixel rows in the weight's dtype (the reference casts), then a GEMM with bias.
    Tensor px = pixel_values;
    if (px.device().is_cpu() && !ctx_.device.is_cpu()) {
        H3_ASSIGN_OR_RETURN(px, px.to(ctx_.device, ctx_.stream()));
    }
    H3_ASSIGN_OR_RETURN(Tensor pxa, alloc({n, int64_t(c.patch_dim())}));
    H3_TRY(ops::cast(ctx_, px, pxa));
    H3_ASSIGN_OR_RETURN(Tensor h, alloc({n, hs}));
    H3_TRY(ops::gemm(ctx_, {}, pxa, weights_.patch, weights_.patch_b, h));
    if (hook.active("patch_embed")) hook.record("patch_embed", h);
    {
        Tensor pe_host = position_embedding(grids);
        H3_ASSIGN_OR_RETURN(Tensor pe, upload(pe_host));
        H3_ASSIGN_OR_RETURN(Tensor pea, alloc({n, hs}));
        H3_TRY(ops::cast(ctx_, pe, pea));
        if (hook.active("pos_embed")) hook.record("pos_embed", pea);
        H3_TRY(ops::add(ctx_, h, pea, h));
    }
    Tensor cos_h, sin_h;
    rotary_tables(grids, cos_h, sin_h);
    H3_ASSIGN_OR_RETURN(Tensor cos_t, upload(cos_h));
    H3_ASSIGN_OR_RETURN(Tensor sin_t, upload(sin_h));

    // Sequences: each frame of each image attends within itself (cu_seqlens of h·w per frame).
    std::vector<std::pair<int64_t, int64_t>> seqs;
    {
        int64_t r = 0;
        for (const auto& g : grids)
            for (int t = 0; t < g.t; ++t) {
                seqs.push_back({r, r + int64_t(g.h) * g.w});
                r += int64_t(g.h) * g.w;
            }
    }

    H3_ASSIGN_OR_RETURN(Tensor x, alloc({n, hs}));
    H3_ASSIGN_OR_RETURN(Tensor y, alloc({n, hs}));
    H3_ASSIGN_OR_RETURN(Tensor q, alloc({n, hs}));
    H3_ASSIGN_OR_RETURN(Tensor k, alloc({n, hs}));
    H3_ASSIGN_OR_RETURN(Tensor v, alloc({n, hs}));
    H3_ASSIGN_OR_RETURN(Tensor a, alloc({n, hs}));
    H3_ASSIGN_OR_RETURN(Tensor mlp, alloc({n, f}));
    Tensor q3 = q.view({n, nh, d}), k3 = k.view({n, nh, d}), v3 = v.view({n, nh, d}), a3 = a.view({n, nh, d});
    const ops::LayerNormParams ln{.eps = 1e-6f};
    const ops::RopeParams rope{.rotary_dim = static_cast<int>(d), .round_tables = false};
    const ops::AttentionParams attn{.scale = 1.0f / std::sqrt(static_cast<float>(d)), .causal = false};

    VisionOutput out;
    for (int i = 0; i < c.depth; ++i) {
        if (cancelled_now()) return cancelled("vision tower cancelled");
        const VisionBlockWeights& w = weights_.blocks[static_cast<size_t>(i)];
        H3_TRY(ops::layer_norm(ctx_, ln, h, w.norm1_w, w.norm1_b, x));
        H3_TRY(ops::gemm(ctx_, {}, x, w.q, w.q_b, q));
        H3_TRY(ops::gemm(ctx_, {}, x, w.k, w.k_b, k));
        H3_TRY(ops::gemm(ctx_, {}, x, w.v, w.v_b, v));
        H3_TRY(ops::rope(ctx_, rope, q3, cos_t, sin_t));
        H3_TRY(ops::rope(ctx_, rope, k3, cos_t, sin_t));
        for (const auto& [s0, s1] : seqs) {
            Tensor ks = k3.slice(0, s0, s1), vs = v3.slice(0, s0, s1);
            // query rows in chunks, the flag read between them: every row attends to the whole image
            // independently, so the chunks give the same rows as one call
            for (int64_t r0 = s0; r0 < s1; r0 += kAttentionRowsPerCheck) {
                if (cancelled_now()) return cancelled("vision tower cancelled");
                const int64_t r1 = std::min<int64_t>(s1, r0 + kAttentionRowsPerCheck);
                Tensor qs = q3.slice(0, r0, r1), as = a3.slice(0, r0, r1);
                H3_TRY(ops::attention(ctx_, attn, qs, ks, vs, as));
            }
        }
        H3_TRY(ops::gemm(ctx_, {}, a, w.proj, w.proj_b, y));
        H3_TRY(ops::add(ctx_, h, y, h));
        H3_TRY(ops::layer_norm(ctx_, ln, h, w.norm2_w, w.norm2_b, x));
        H3_TRY(ops::gemm(ctx_, {}, x, w.fc1, w.fc1_b, mlp));
        H3_TRY(ops::gelu(ctx_, {.tanh = true}, mlp, mlp));
        H3_TRY(ops::gemm(ctx_, {}, mlp, w.fc2, w.fc2_b, y));
        H3_TRY(ops::add(ctx_, h, y, h));
        const std::string name = "blocks." + std::to_string(i) + ".out";
        if (hook.active(name)) hook.record(name, h);
        for (size_t j = 0; j < c.deepstack_visual_indexes.size(); ++j) {
            if (c.deepstack_visual_indexes[j] != i) continue;
            H3_ASSIGN_OR_RETURN(Tensor ds, alloc({n / u, int64_t(c.out_hidden_size)}));
            H3_TRY(merge(weights_.deepstack[j], h, ds));
            if (out.deepstack.size() <= j) out.deepstack.resize(j + 1);
            out.deepstack[j] = ds;
        }
    }
    H3_ASSIGN_OR_RETURN(out.embeds, alloc({n / u, int64_t(c.out_hidden_size)}));
    H3_TRY(merge(weights_.merger, h, out.embeds));
    return out;
}

} // namespace h3::model
