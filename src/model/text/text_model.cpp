#include "model/text/text_model.h"

#include "model/weights/weight_master.h"
#include "ops/cancel.h"
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::model {

Result<TextCheckpoint> open_text_checkpoint(const std::string& path) {
    std::string dir = path;
    std::error_code ec;
    if (!fs::exists(fs::path(path) / "config.json", ec)) {
        H3_ASSIGN_OR_RETURN(auto ckpt, io::discover_checkpoint(path));
        const io::Component* c = ckpt.find("text_encoder");
        if (!c) return not_found("checkpoint " + path + " has no 'text_encoder' component");
        if (!c->has_weights)
            return not_found("component 'text_encoder' in " + path + " holds no safetensors");
        dir = c->dir;
    }
    TextCheckpoint out;
    out.dir = dir;
    H3_ASSIGN_OR_RETURN(out.config, TextConfig::from_file((fs::path(dir) / "config.json").string()));
    H3_ASSIGN_OR_RETURN(out.tensors, io::TensorSet::open(dir));
    return out;
}

std::vector<std::pair<std::string, std::vector<int64_t>>> text_tensor_specs(const TextConfig& c, int layers) {
    const int64_t h = c.hidden_size, d = c.head_dim, q = int64_t(c.num_attention_heads) * d,
                  kv = int64_t(c.num_key_value_heads) * d, f = c.intermediate_size;
    std::vector<std::pair<std::string, std::vector<int64_t>>> s;
    const std::string p = kTextPrefix;
    s.push_back({p + "embed_tokens.weight", {c.vocab_size, h}});
    for (int i = 0; i < layers; ++i) {
        const std::string l = p + "layers." + std::to_string(i) + ".";
        s.push_back({l + "input_layernorm.weight", {h}});
        s.push_back({l + "self_attn.q_proj.weight", {q, h}});
        s.push_back({l + "self_attn.k_proj.weight", {kv, h}});
        s.push_back({l + "self_attn.v_proj.weight", {kv, h}});
        s.push_back({l + "self_attn.o_proj.weight", {h, q}});
        s.push_back({l + "self_attn.q_norm.weight", {d}});
        s.push_back({l + "self_attn.k_norm.weight", {d}});
        s.push_back({l + "post_attention_layernorm.weight", {h}});
        s.push_back({l + "mlp.gate_proj.weight", {f, h}});
        s.push_back({l + "mlp.up_proj.weight", {f, h}});
        s.push_back({l + "mlp.down_proj.weight", {h, f}});
    }
    return s;
}

namespace {

class Loader {
public:
    Loader(const TextCheckpoint& ckpt, const TextLoadOptions& opt, int layers) : ckpt_(ckpt), opt_(opt) {
        for (auto& [name, shape] : text_tensor_specs(ckpt.config, layers)) specs_[name] = shape;
    }
    // Host tensor in the target dtype (read-only mmap view when no conversion is needed).
    Result<Tensor> host(const std::string& name) {
        if (!ckpt_.tensors.contains(name))
            return not_found("text encoder " + ckpt_.dir + ": tensor '" + name + "' is missing");
        H3_ASSIGN_OR_RETURN(Tensor t, ckpt_.tensors.tensor(name));
        const auto& want = specs_.at(name);
        if (t.shape().to_vector() != want)
            return bad_input("text encoder " + ckpt_.dir + ": tensor '" + name + "' has shape " +
                             t.shape().to_string() + ", the config implies " + Shape(want).to_string());
        if (!dtype_is_float(t.dtype()))
            return bad_input("text encoder " + ckpt_.dir + ": tensor '" + name + "' has dtype " +
                             dtype_name(t.dtype()) + ", expected a float type");
        return convert_weight(t, precision_dtype(opt_.precision),
                              "text encoder " + ckpt_.dir + ": tensor '" + name + "'");
    }
    Result<Tensor> get(const std::string& name) {
        H3_ASSIGN_OR_RETURN(Tensor t, host(name));
        if (opt_.device.is_cpu()) return t; // mmap views stay zero-copy on the CPU (ops only read weights)
        return t.to(opt_.device);
    }
    // [a; b] stacked along rows, on the host.
    Result<Tensor> host_stacked(const std::string& a, const std::string& b) {
        H3_ASSIGN_OR_RETURN(Tensor ta, host(a));
        H3_ASSIGN_OR_RETURN(Tensor tb, host(b));
        Tensor out = Tensor::host({ta.dim(0) + tb.dim(0), ta.dim(1)}, ta.dtype());
        std::memcpy(out.data(), ta.data(), ta.nbytes());
        std::memcpy(static_cast<uint8_t*>(out.data()) + ta.nbytes(), tb.data(), tb.nbytes());
        return out;
    }
    // A matrix: on the host when it becomes a streamed master, else on the device.
    Result<Tensor> matrix(Tensor host_tensor, bool keep_on_host) {
        if (keep_on_host || opt_.device.is_cpu()) return host_tensor;
        return host_tensor.to(opt_.device);
    }

private:
    const TextCheckpoint& ckpt_;
    const TextLoadOptions& opt_;
    std::map<std::string, std::vector<int64_t>> specs_;
};

} // namespace

Result<std::unique_ptr<TextModel>> TextModel::load(const TextCheckpoint& ckpt, const TextLoadOptions& opt,
                                                   ops::Context ctx) {
    if (!(opt.device == ctx.device))
        return invalid_argument("text encoder: load device " + opt.device.to_string() +
                                " differs from the op context's " + ctx.device.to_string());
    const TextConfig& c = ckpt.config;
    const int layers = opt.layers < 0 ? c.used_layers() : opt.layers;
    if (layers > c.num_hidden_layers)
        return invalid_argument("text encoder: " + std::to_string(layers) +
                                " layers requested, the config has " + std::to_string(c.num_hidden_layers));
    Loader l(ckpt, opt, layers);
    TextWeights w;
    H3_ASSIGN_OR_RETURN(w.embed, l.host(std::string(kTextPrefix) + "embed_tokens.weight"));
    w.layers.resize(static_cast<size_t>(layers));
    const bool masters = !opt.residency.plain();
    for (int i = 0; i < layers; ++i) {
        const std::string p = std::string(kTextPrefix) + "layers." + std::to_string(i) + ".";
        TextLayerWeights& lw = w.layers[static_cast<size_t>(i)];
        H3_ASSIGN_OR_RETURN(lw.input_norm, l.get(p + "input_layernorm.weight"));
        H3_ASSIGN_OR_RETURN(lw.post_norm, l.get(p + "post_attention_layernorm.weight"));
        H3_ASSIGN_OR_RETURN(lw.q_norm, l.get(p + "self_attn.q_norm.weight"));
        H3_ASSIGN_OR_RETURN(lw.k_norm, l.get(p + "self_attn.k_norm.weight"));
        Tensor* mats[6] = {&lw.q, &lw.k, &lw.v, &lw.o, &lw.up_gate, &lw.down};
        const char* names[6] = {"self_attn.q_proj.weight",
                                "self_attn.k_proj.weight",
                                "self_attn.v_proj.weight",
                                "self_attn.o_proj.weight",
                                nullptr,
                                "mlp.down_proj.weight"};
        for (int m = 0; m < 6; ++m) {
            Tensor host;
            if (names[m]) {
                H3_ASSIGN_OR_RETURN(host, l.host(p + names[m]));
            } else {
                H3_ASSIGN_OR_RETURN(host,
                                    l.host_stacked(p + "mlp.up_proj.weight", p + "mlp.gate_proj.weight"));
            }
            // Streamed matrices stay on the host (mmap views when unconverted) for the layer source.
            H3_ASSIGN_OR_RETURN(*mats[m], l.matrix(std::move(host), masters));
        }
    }
    std::unique_ptr<LayerWeightSource> source;
    if (masters) {
        H3_ASSIGN_OR_RETURN(source, make_text_layer_source(w, opt.precision, opt.residency, ctx));
    }
    return std::make_unique<TextModel>(c, std::move(w), opt.precision, ctx, std::move(source));
}

Result<std::unique_ptr<LayerWeightSource>> make_text_layer_source(TextWeights& w, TextPrecision precision,
                                                                  const ResidencyOptions& o,
                                                                  const ops::Context& ctx) {
    const bool pinned = o.pin_host && ctx.device.is_cuda();
    const bool int8 = o.format == WeightFormat::kInt8;
    std::vector<std::vector<WeightMaster>> masters;
    for (TextLayerWeights& lw : w.layers) {
        std::vector<WeightMaster> ml;
        for (Tensor* t : {&lw.q, &lw.k, &lw.v, &lw.o, &lw.up_gate, &lw.down}) {
            if (!t->defined()) return invalid_argument("text layer lacks a projection matrix to place");
            Tensor h = *t;
            if (!h.device().is_cpu()) {
                H3_ASSIGN_OR_RETURN(h, host_buffer(t->shape(), t->dtype(), pinned && !int8));
                H3_TRY(h.copy_from(*t));
            }
            *t = Tensor(); // the layer keeps its norms only
            if (int8) {
                H3_ASSIGN_OR_RETURN(WeightMaster q, quantize_int8(h, pinned));
                ml.push_back(std::move(q));
            } else {
                ml.push_back({std::move(h), Tensor()});
            }
        }
        masters.push_back(std::move(ml));
    }
    return LayerWeightSource::create(
        std::move(masters), {.options = o, .compute = precision_dtype(precision), .what = "text layers"},
        ctx);
}

TextModel::TextModel(TextConfig config, TextWeights weights, TextPrecision precision, ops::Context ctx,
                     std::unique_ptr<LayerWeightSource> stream)
    : config_(std::move(config)), weights_(std::move(weights)), precision_(precision), ctx_(ctx),
      stream_(std::move(stream)) {
    H3_CHECK(!stream_ || stream_->layers() == layers(),
             "text layer source holds " << (stream_ ? stream_->layers() : 0) << " layers for " << layers());
}

std::string TextModel::residency_describe() const {
    return stream_ ? stream_->options().describe() : "resident";
}

double TextModel::flops(const TextConfig& c, int layers, int64_t L) {
    const double h = c.hidden_size, d = c.head_dim, hq = c.num_attention_heads, hkv = c.num_key_value_heads,
                 f = c.intermediate_size, n = static_cast<double>(L);
    const double gemm = 2.0 * n * h * (hq * d + 2 * hkv * d + hq * d + 3 * f);
    const double attn = 2.0 * 2.0 * hq * d * n * (n + 1) / 2.0; // q·kᵀ and p·v over the causal triangle
    return layers * (gemm + attn);
}

Result<std::array<std::vector<int64_t>, 3>> mrope_positions(const std::vector<int32_t>& ids,
                                                            const MropeTokens& tokens,
                                                            const std::vector<MropeGrid>& image_grids,
                                                            const std::vector<MropeGrid>& video_grids) {
    // Video grids split per frame: every timestamped block is a separate run.
    std::vector<MropeGrid> blocks;
    for (const MropeGrid& g : video_grids)
        for (int t = 0; t < g.t; ++t) blocks.push_back({1, g.h, g.w});
    const std::vector<MropeGrid>* grids[3] = {nullptr, &image_grids, &blocks};
    const char* names[3] = {"", "image", "video block"};
    size_t used[3] = {0, 0, 0};
    auto type_of = [&](int32_t id) {
        if (id == tokens.image_token_id) return 1;
        if (id == tokens.video_token_id) return 2;
        return 0;
    };
    std::array<std::vector<int64_t>, 3> pos;
    for (auto& p : pos) p.reserve(ids.size());
    const size_t L = ids.size();
    int64_t cur = 0;
    for (size_t st = 0; st < L;) {
        const int type = type_of(ids[st]);
        size_t ed = st + 1;
        while (ed < L && type_of(ids[ed]) == type) ++ed;
        const int64_t n = static_cast<int64_t>(ed - st);
        if (type == 0) {
            for (int64_t i = 0; i < n; ++i)
                for (auto& p : pos) p.push_back(cur + i);
            cur += n;
        } else {
            const std::vector<MropeGrid>& gl = *grids[type];
            const size_t k = used[type]++;
            if (k >= gl.size())
                return invalid_argument("mrope positions: " + std::to_string(gl.size()) + " " + names[type] +
                                        " grids but more " + names[type] + " runs in the tokens (row " +
                                        std::to_string(st) + ")");
            const MropeGrid& g = gl[k];
            if (g.t < 1 || g.h < 1 || g.w < 1 || int64_t(g.t) * g.h * g.w != n)
                return invalid_argument(
                    "mrope positions: " + std::string(names[type]) + " " + std::to_string(k) + " (grid " +
                    std::to_string(g.t) + "x" + std::to_string(g.h) + "x" + std::to_string(g.w) +
                    ") does not match its " + std::to_string(n) + " tokens from row " + std::to_string(st));
            for (int t = 0; t < g.t; ++t)
                for (int y = 0; y < g.h; ++y)
                    for (int x = 0; x < g.w; ++x) {
                        pos[0].push_back(cur + t);
                        pos[1].push_back(cur + y);
                        pos[2].push_back(cur + x);
                    }
            cur += std::max(g.h, g.w);
        }
        st = ed;
    }
    for (int type = 1; type <= 2; ++type)
        if (used[type] < grids[type]->size())
            return invalid_argument("mrope positions: " + std::to_string(grids[type]->size()) + " " +
                                    names[type] + " grids but only " + std::to_string(used[type]) + " " +
                                    names[type] + " runs in the tokens");
    return pos;
}

Result<Tensor> TextModel::forward(const std::vector<int32_t>& ids, const TextForwardOptions& o) const {
    return forward(ids, nullptr, o);
}

Result<Tensor> TextModel::forward(const std::vector<int32_t>& ids, const TextVisionInputs* vis,
                                  const TextForwardOptions& o) const {
    const ops::CancelScope cancel_scope(o.cancel); // the ops read it between their blocks too
    const TextConfig& c = config_;
    const int64_t L = static_cast<int64_t>(ids.size());
    if (L == 0) return invalid_argument("text encoder: no tokens");
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] < 0 || ids[i] >= weights_.embed.dim(0))
            return invalid_argument("text encoder: token " + std::to_string(i) + " has id " +
                                    std::to_string(ids[i]) + ", outside the embedding table [0, " +
                                    std::to_string(weights_.embed.dim(0)) + ")");
    const DType act = act_dtype(), res = residual_dtype();
    // Rounding points of eager PyTorch in a 16-bit dtype (bf16, or fp16 around the fp32 residual stream).
    const bool bf16 = precision_ != TextPrecision::kFp32;
    const int64_t hs = c.hidden_size, d = c.head_dim, hq = c.num_attention_heads, hkv = c.num_key_value_heads,
                  f = c.intermediate_size;
    auto alloc = [&](const Shape& s, DType dt) { return Tensor::empty(s, dt, ctx_.device); };

    // Embeddings: rows gathered on the host (the table stays in the checkpoint's mmap), then uploaded.
    Tensor idx = Tensor::host({L}, DType::kI32);
    std::memcpy(idx.data(), ids.data(), ids.size() * sizeof(int32_t));
    Tensor h_host = Tensor::host({L, hs}, res);
    H3_TRY(ops::gather_rows(ops::Context::cpu(), weights_.embed, idx, h_host));
    Tensor h;
    if (ctx_.device.is_cpu()) {
        h = h_host;
    } else {
        H3_ASSIGN_OR_RETURN(h, h_host.to(ctx_.device, ctx_.stream()));
    }

    // Vision rows: the merged vision embeddings replace the <|image_pad|> embeddings.
    const int64_t V = vis ? static_cast<int64_t>(vis->rows.size()) : 0;
    Tensor vrows;
    if (vis) {
        for (int a = 0; a < 3; ++a)
            if (!vis->positions[static_cast<size_t>(a)].empty() &&
                static_cast<int64_t>(vis->positions[static_cast<size_t>(a)].size()) != L)
                return invalid_argument("text encoder: vision positions have " +
                                        std::to_string(vis->positions[static_cast<size_t>(a)].size()) +
                                        " rows, the tokens " + std::to_string(L));
        for (int64_t i = 0; i < V; ++i) {
            const int64_t r = vis->rows[static_cast<size_t>(i)];
            if (r < 0 || r >= L || (i > 0 && r <= vis->rows[static_cast<size_t>(i - 1)]))
                return invalid_argument("text encoder: vision rows must be ascending rows in [0, " +
                                        std::to_string(L) + "), entry " + std::to_string(i) + " is " +
                                        std::to_string(r));
        }
        auto check = [&](const Tensor& t, const std::string& what) -> Status {
            if (!t.defined() || t.rank() != 2 || t.dim(0) != V || t.dim(1) != hs)
                return invalid_argument("text encoder: " + what + " must be [" + std::to_string(V) + ", " +
                                        std::to_string(hs) + "], got " +
                                        (t.defined() ? t.shape().to_string() : std::string("nothing")));
            return ok_status();
        };
        if (V > 0) H3_TRY(check(vis->embeds, "vision embeddings"));
        for (size_t j = 0; j < vis->deepstack.size(); ++j)
            H3_TRY(check(vis->deepstack[j], "deepstack feature " + std::to_string(j)));
        if (static_cast<int>(vis->deepstack.size()) > layers())
            return invalid_argument("text encoder: " + std::to_string(vis->deepstack.size()) +
                                    " deepstack features but only " + std::to_string(layers()) + " layers");
        if (V > 0) {
            Tensor vr = Tensor::host({V}, DType::kI64);
            std::memcpy(vr.data(), vis->rows.data(), static_cast<size_t>(V) * sizeof(int64_t));
            if (ctx_.device.is_cpu()) {
                vrows = vr;
            } else {
                H3_ASSIGN_OR_RETURN(vrows, vr.to(ctx_.device, ctx_.stream()));
            }
            Tensor e = vis->embeds;
            if (!(e.device() == ctx_.device)) {
                H3_ASSIGN_OR_RETURN(e, e.to(ctx_.device, ctx_.stream()));
            }
            H3_TRY(ops::scatter_rows(ctx_, e, vrows, h));
        }
    }
    if (o.hook.active("embed")) o.hook.record("embed", h);

    // RoPE tables [L, D] f32: angle = pos · inv_freq_j (fp32), inv_freq_j = 1 / θ^(2j/D), cos/sin of [a, a];
    // pos is the t, h or w position of the row per the interleaved MRoPE sections (all equal for text).
    Tensor cos_h = Tensor::host({L, d}, DType::kF32), sin_h = Tensor::host({L, d}, DType::kF32);
    {
        float* cp = cos_h.data_as<float>();
        float* sp = sin_h.data_as<float>();
        const float theta = static_cast<float>(c.rope_theta);
        const int sec_h = c.mrope_section.size() == 3 ? c.mrope_section[1] : 0,
                  sec_w = c.mrope_section.size() == 3 ? c.mrope_section[2] : 0;
        for (int64_t j = 0; j < d / 2; ++j) {
            const float inv = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(d));
            const size_t axis = (j % 3 == 1 && j < 3 * sec_h) ? 1 : (j % 3 == 2 && j < 3 * sec_w) ? 2 : 0;
            const std::vector<int64_t>* pv =
                vis && !vis->positions[axis].empty() ? &vis->positions[axis] : nullptr;
            for (int64_t p = 0; p < L; ++p) {
                const int64_t pos = pv ? (*pv)[static_cast<size_t>(p)] : p;
                const float a = static_cast<float>(pos) * inv;
                cp[p * d + j] = cp[p * d + j + d / 2] = std::cos(a);
                sp[p * d + j] = sp[p * d + j + d / 2] = std::sin(a);
            }
        }
    }
    Tensor cos_t = cos_h, sin_t = sin_h;
    if (!ctx_.device.is_cpu()) {
        H3_ASSIGN_OR_RETURN(cos_t, cos_h.to(ctx_.device, ctx_.stream()));
        H3_ASSIGN_OR_RETURN(sin_t, sin_h.to(ctx_.device, ctx_.stream()));
    }

    H3_ASSIGN_OR_RETURN(Tensor x, alloc({L, hs}, act));
    H3_ASSIGN_OR_RETURN(Tensor y, alloc({L, hs}, act));
    H3_ASSIGN_OR_RETURN(Tensor q, alloc({L, hq * d}, act));
    H3_ASSIGN_OR_RETURN(Tensor k, alloc({L, hkv * d}, act));
    H3_ASSIGN_OR_RETURN(Tensor v, alloc({L, hkv * d}, act));
    H3_ASSIGN_OR_RETURN(Tensor a, alloc({L, hq * d}, act));
    H3_ASSIGN_OR_RETURN(Tensor ug, alloc({L, 2 * f}, act));
    H3_ASSIGN_OR_RETURN(Tensor m, alloc({L, f}, act));
    Tensor q3 = q.view({L, hq, d}), k3 = k.view({L, hkv, d}), v3 = v.view({L, hkv, d}),
           a3 = a.view({L, hq, d});

    const ops::RmsNormParams norm{.eps = static_cast<float>(c.rms_norm_eps), .round_normed = bf16};
    const ops::RopeParams rope{.rotary_dim = static_cast<int>(d), .round_tables = bf16};
    const ops::AttentionParams attn{.scale = 1.0f / std::sqrt(static_cast<float>(d)), .causal = true};
    const Tensor none;
    const int n = layers();
    Tensor ds_rows, ds_add;
    if (vis && V > 0 && !vis->deepstack.empty()) {
        H3_ASSIGN_OR_RETURN(ds_rows, alloc({V, hs}, res));
        H3_ASSIGN_OR_RETURN(ds_add, alloc({V, hs}, act));
    }
    auto run_layer = [&](int i, const TextLayerWeights& w) -> Status {
        H3_TRY(ops::rms_norm(ctx_, norm, h, w.input_norm, x));
        H3_TRY(ops::gemm(ctx_, {}, x, w.q, none, q));
        H3_TRY(ops::gemm(ctx_, {}, x, w.k, none, k));
        H3_TRY(ops::gemm(ctx_, {}, x, w.v, none, v));
        H3_TRY(ops::head_norm_rope(ctx_, norm, rope, q3, w.q_norm, cos_t, sin_t));
        H3_TRY(ops::head_norm_rope(ctx_, norm, rope, k3, w.k_norm, cos_t, sin_t));
        H3_TRY(ops::attention(ctx_, attn, q3, k3, v3, a3));
        H3_TRY(ops::gemm(ctx_, {}, a, w.o, none, y));
        H3_TRY(ops::add(ctx_, h, y, h));
        H3_TRY(ops::rms_norm(ctx_, norm, h, w.post_norm, x));
        H3_TRY(ops::gemm(ctx_, {}, x, w.up_gate, none, ug));
        H3_TRY(ops::swiglu(ctx_, ug, m));
        H3_TRY(ops::gemm(ctx_, {}, m, w.down, none, y));
        H3_TRY(ops::add(ctx_, h, y, h));
        if (ds_rows.defined() && i < static_cast<int>(vis->deepstack.size())) {
            // DeepStack: h[rows] = h[rows] + feature (the feature cast to the activation dtype first).
            Tensor ds = vis->deepstack[static_cast<size_t>(i)];
            if (!(ds.device() == ctx_.device)) {
                H3_ASSIGN_OR_RETURN(ds, ds.to(ctx_.device, ctx_.stream()));
            }
            H3_TRY(ops::cast(ctx_, ds, ds_add));
            H3_TRY(ops::gather_rows(ctx_, h, vrows, ds_rows));
            H3_TRY(ops::add(ctx_, ds_rows, ds_add, ds_rows));
            H3_TRY(ops::scatter_rows(ctx_, ds_rows, vrows, h));
        }
        return ok_status();
    };
    for (int i = 0; i < n; ++i) {
        if (o.cancel && o.cancel->load())
            return cancelled("text encoder cancelled before layer " + std::to_string(i));
        TextLayerWeights w = weights_.layers[static_cast<size_t>(i)];
        if (stream_) {
            H3_ASSIGN_OR_RETURN(const std::vector<Tensor>* mats, stream_->acquire(i));
            w.q = (*mats)[0];
            w.k = (*mats)[1];
            w.v = (*mats)[2];
            w.o = (*mats)[3];
            w.up_gate = (*mats)[4];
            w.down = (*mats)[5];
        }
        const Status st = run_layer(i, w);
        if (stream_) {
            const Status released = stream_->release(i); // on failure too: no slot stays acquired
            H3_TRY(st);
            H3_TRY(released);
        }
        H3_TRY(st);
        const std::string name = "layers." + std::to_string(i) + ".out";
        if (o.hook.active(name)) o.hook.record(name, h);
        if (o.progress) o.progress(i + 1, n);
    }
    if (stream_) H3_TRY(stream_->end_pass());
    return h;
}

Result<TextWeights> random_text_weights(const TextConfig& c, int layers, TextPrecision precision,
                                        const ops::Context& ctx, uint64_t seed, bool host_matrices,
                                        bool pinned) {
    const DType dt = precision_dtype(precision);
    const int64_t h = c.hidden_size, d = c.head_dim, q = int64_t(c.num_attention_heads) * d,
                  kv = int64_t(c.num_key_value_heads) * d, f = c.intermediate_size;
    auto make = [&](const Shape& s, float bound, float offset) -> Result<Tensor> {
        H3_ASSIGN_OR_RETURN(Tensor t, Tensor::empty(s, dt, ctx.device));
        H3_TRY(ops::fill_uniform(ctx, {.seed = seed++, .bound = bound, .offset = offset}, t));
        return t;
    };
    TextWeights w;
    // The embedding table is gathered on the host; a small random one is enough for a bench.
    Tensor emb = Tensor::host({std::min<int64_t>(c.vocab_size, 4096), h}, dt);
    H3_TRY(ops::fill_uniform(ops::Context::cpu(), {.seed = seed++, .bound = 1.0f}, emb));
    w.embed = emb;
    w.layers.resize(static_cast<size_t>(layers));
    const float sh = 1.0f / std::sqrt(static_cast<float>(h)), sq = 1.0f / std::sqrt(static_cast<float>(q)),
                sf = 1.0f / std::sqrt(static_cast<float>(f));
    for (auto& l : w.layers) {
        H3_ASSIGN_OR_RETURN(l.input_norm, make({h}, 0.1f, 1.0f));
        H3_ASSIGN_OR_RETURN(l.post_norm, make({h}, 0.1f, 1.0f));
        H3_ASSIGN_OR_RETURN(l.q, make({q, h}, sh, 0.0f));
        H3_ASSIGN_OR_RETURN(l.k, make({kv, h}, sh, 0.0f));
        H3_ASSIGN_OR_RETURN(l.v, make({kv, h}, sh, 0.0f));
        H3_ASSIGN_OR_RETURN(l.o, make({h, q}, sq, 0.0f));
        H3_ASSIGN_OR_RETURN(l.q_norm, make({d}, 0.1f, 1.0f));
        H3_ASSIGN_OR_RETURN(l.k_norm, make({d}, 0.1f, 1.0f));
        H3_ASSIGN_OR_RETURN(l.up_gate, make({2 * f, h}, sh, 0.0f));
        H3_ASSIGN_OR_RETURN(l.down, make({h, f}, sf, 0.0f));
        if (!host_matrices) continue;
        for (Tensor* t : {&l.q, &l.k, &l.v, &l.o, &l.up_gate, &l.down}) {
            H3_ASSIGN_OR_RETURN(Tensor hm,
                                host_buffer(t->shape(), t->dtype(), pinned && ctx.device.is_cuda()));
            H3_TRY(hm.copy_from(*t));
            *t = std::move(hm); // the device copy is freed before the next layer is made
        }
    }
    return w;
}

} // namespace h3::model
