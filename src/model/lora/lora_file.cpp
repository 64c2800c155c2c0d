#include "model/lora/lora_file.h"

#include "core/log.h"
#include "io/json_file.h"
#include "model/dit/random_weights.h"
#include "model/lora/lora_keys.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

namespace h3::model {

const char* qkv_rows_name(LoraQkvRows r) {
    switch (r) {
    case LoraQkvRows::kAuto:
        return "auto";
    case LoraQkvRows::kStacked:
        return "stacked";
    case LoraQkvRows::kPerHead:
        return "per-head";
    }
    return "?";
}

namespace {

// diffusers' lora_adapter_metadata (a PEFT LoraConfig as JSON, keys optionally prefixed "transformer.").
struct AdapterMetadata {
    bool present = false;
    double r = 0, alpha = 0;
    bool rslora = false, dora = false;
    std::map<std::string, double> rank_pattern, alpha_pattern;
};

Result<AdapterMetadata> parse_metadata(const std::map<std::string, std::string>& md,
                                       const std::string& label) {
    AdapterMetadata m;
    auto it = md.find("lora_adapter_metadata");
    if (it == md.end()) return m;
    // bounded nesting, as every parse of outside JSON
    auto parsed = io::parse_json(it->second, label + ": __metadata__ lora_adapter_metadata");
    if (!parsed.ok()) return parsed.status();
    const nlohmann::json j = std::move(parsed).value();
    if (!j.is_object()) return bad_input(label + ": __metadata__ lora_adapter_metadata is not a JSON object");
    auto field = [&](const std::string& name) -> const nlohmann::json* {
        for (const char* p : {"", "transformer.", "transformer_ref."}) {
            auto f = j.find(std::string(p) + name);
            if (f != j.end()) return &*f;
        }
        return nullptr;
    };
    const nlohmann::json* r = field("r");
    const nlohmann::json* a = field("lora_alpha");
    if (!r || !r->is_number()) return m; // metadata without a rank: nothing to scale by
    m.present = true;
    m.r = r->get<double>();
    m.alpha = a && a->is_number() ? a->get<double>() : m.r;
    if (const auto* f = field("use_rslora"); f && f->is_boolean()) m.rslora = f->get<bool>();
    if (const auto* f = field("use_dora"); f && f->is_boolean()) m.dora = f->get<bool>();
    for (auto [name, dst] : {std::pair{"rank_pattern", &m.rank_pattern}, {"alpha_pattern", &m.alpha_pattern}})
        if (const auto* f = field(name); f && f->is_object())
            for (auto& [k, v] : f->items())
                if (v.is_number()) (*dst)[k] = v.get<double>();
    if (m.r <= 0) return bad_input(label + ": lora_adapter_metadata has rank " + std::to_string(m.r));
    return m;
}

// PEFT matches a pattern key against the module name's tail ("(.*\.)?key$").
double pattern_value(const std::map<std::string, double>& p, const std::string& module, double fallback) {
    for (const auto& [k, v] : p)
        if (module == k ||
            (module.size() > k.size() && module.compare(module.size() - k.size(), k.size(), k) == 0 &&
             module[module.size() - k.size() - 1] == '.'))
            return v;
    return fallback;
}

// A contiguous host copy that owns its memory (never a view into a file mapping).
Result<Tensor> owned(const Tensor& t) {
    return t.to(Device::cpu()); // always a fresh contiguous copy
}

Tensor copy_rows(const Tensor& t, int64_t r0, int64_t r1) {
    Tensor out = Tensor::host(Shape{r1 - r0, t.dim(1)}, t.dtype());
    const size_t row = static_cast<size_t>(t.dim(1)) * dtype_size(t.dtype());
    std::memcpy(out.data(), static_cast<const uint8_t*>(t.data()) + static_cast<size_t>(r0) * row,
                static_cast<size_t>(r1 - r0) * row);
    return out;
}

// Drops the rank columns of b that are zero in every row (and the matching rows of a). `kept` = 0: the part
// never uses the adapter at all.
Status compact_rank(const Tensor& a, const Tensor& b, Tensor& a_out, Tensor& b_out, int64_t& kept) {
    const int64_t out = b.dim(0), r = b.dim(1), in = a.dim(1);
    H3_ASSIGN_OR_RETURN(std::vector<float> bv, to_f32_vector(b));
    std::vector<int64_t> cols;
    for (int64_t j = 0; j < r; ++j) {
        bool used = false;
        for (int64_t i = 0; i < out && !used; ++i) used = bv[static_cast<size_t>(i * r + j)] != 0.0f;
        if (used) cols.push_back(j);
    }
    kept = static_cast<int64_t>(cols.size());
    if (kept == r || kept == 0) {
        a_out = a;
        b_out = b;
        return ok_status();
    }
    const size_t ea = dtype_size(a.dtype()), eb = dtype_size(b.dtype());
    a_out = Tensor::host(Shape{kept, in}, a.dtype());
    b_out = Tensor::host(Shape{out, kept}, b.dtype());
    for (int64_t c = 0; c < kept; ++c)
        std::memcpy(static_cast<uint8_t*>(a_out.data()) + static_cast<size_t>(c * in) * ea,
                    static_cast<const uint8_t*>(a.data()) + static_cast<size_t>(cols[c] * in) * ea,
                    static_cast<size_t>(in) * ea);
    for (int64_t i = 0; i < out; ++i)
        for (int64_t c = 0; c < kept; ++c)
            std::memcpy(static_cast<uint8_t*>(b_out.data()) + static_cast<size_t>(i * kept + c) * eb,
                        static_cast<const uint8_t*>(b.data()) + static_cast<size_t>(i * r + cols[c]) * eb,
                        eb);
    return ok_status();
}

struct Group {
    const LoraModule* module = nullptr;
    std::string name; // as the file spells it (prefix stripped)
    int a = -1, b = -1, alpha = -1;
    bool peft_default = false, kohya = false;
};

std::string list_keys(const std::vector<std::string>& keys, size_t max) {
    std::string s;
    for (size_t i = 0; i < keys.size() && i < max; ++i) s += (i ? ", " : "") + keys[i];
    if (keys.size() > max) s += ", ... (" + std::to_string(keys.size() - max) + " more)";
    return s;
}

std::string shape_str(const Tensor& t) {
    return t.shape().to_string();
}

} // namespace

Result<LoraAdapter> convert_lora_tensors(const std::vector<io::NamedTensor>& tensors,
                                         const std::map<std::string, std::string>& metadata,
                                         const DitConfig& c, const LoraReadOptions& opt,
                                         const std::string& label) {
    if (tensors.empty()) return bad_input(label + ": the file holds no tensors");
    const LoraVocabulary vocab(c);
    H3_ASSIGN_OR_RETURN(AdapterMetadata meta, parse_metadata(metadata, label));
    if (meta.dora)
        return bad_input(label + ": a DoRA adapter (use_dora in lora_adapter_metadata) is not supported");

    std::vector<std::string> variants, ignored;
    std::map<const LoraModule*, Group> groups;
    std::vector<const LoraModule*> order;
    bool any_kohya = false, any_default = false, any_alpha = false, any_peft_prefix = false;
    std::set<LoraNaming> namings;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const std::string& key = tensors[i].name;
        const LoraKey k = parse_lora_key(key, vocab);
        if (k.variant) {
            variants.push_back(key);
            continue;
        }
        if (!k.recognized || !k.module || !k.module->adapted) {
            ignored.push_back(key);
            continue;
        }
        auto [it, fresh] = groups.try_emplace(k.module);
        Group& g = it->second;
        if (fresh) {
            g.module = k.module;
            g.name = k.module_name;
            order.push_back(k.module);
        }
        int* slot = k.part == LoraPart::kA ? &g.a : k.part == LoraPart::kB ? &g.b : &g.alpha;
        if (*slot >= 0)
            return bad_input(label + ": keys '" + tensors[static_cast<size_t>(*slot)].name + "' and '" + key +
                             "' give the same " + (k.part == LoraPart::kAlpha ? "alpha" : "factor") +
                             " of module " + k.module->name);
        *slot = static_cast<int>(i);
        g.peft_default |= k.peft_default;
        g.kohya |= k.kohya;
        any_kohya |= k.kohya;
        any_default |= k.peft_default;
        any_alpha |= k.part == LoraPart::kAlpha;
        any_peft_prefix |= key.rfind("base_model.model.", 0) == 0;
        namings.insert(k.module->naming);
    }
    if (!variants.empty())
        return bad_input(label +
                         ": DoRA / LoKr / LoHa / LoCon / full-difference tensors are not supported (" +
                         std::to_string(variants.size()) + " keys: " + list_keys(variants, 8) + ")");
    if (!ignored.empty()) {
        if (opt.strict)
            return bad_input(
                label + ": " + std::to_string(ignored.size()) + " of " + std::to_string(tensors.size()) +
                " keys name no projection h3-engine adapts (attention q/k/v/out, FFN, AdaLN of the "
                "DiT and refiner blocks): " +
                list_keys(ignored, 30));
    }
    if (groups.empty())
        return bad_input(label + ": no LoRA factor names a projection of this DiT (" +
                         std::to_string(tensors.size()) + " keys, e.g. " + list_keys(ignored, 5) + ")");

    LoraAdapter out;
    out.source = label;
    if (namings.size() > 1)
        out.format = "mixed";
    else if (any_kohya)
        out.format = *namings.begin() == LoraNaming::kOriginal ? "musubi" : "kohya";
    else if (*namings.begin() == LoraNaming::kOriginal)
        out.format = any_default ? "diffsynth" : "original";
    else
        out.format = (any_alpha || any_default || any_peft_prefix) ? "peft" : "diffusers";
    LoraQkvRows rows = opt.qkv_rows;
    if (rows == LoraQkvRows::kAuto)
        rows = out.format == "diffsynth" ? LoraQkvRows::kPerHead : LoraQkvRows::kStacked;

    std::map<LoraTarget, std::string> owner;
    for (const LoraModule* mod : order) {
        const Group& g = groups[mod];
        const std::string where = label + ": module " + g.name;
        if (g.a < 0 || g.b < 0)
            return bad_input(where + " has " + (g.a < 0 ? "no lora_A / lora_down" : "no lora_B / lora_up") +
                             " factor (found '" +
                             tensors[static_cast<size_t>(g.a >= 0   ? g.a
                                                         : g.b >= 0 ? g.b
                                                                    : g.alpha)]
                                 .name +
                             "')");
        const Tensor& a_in = tensors[static_cast<size_t>(g.a)].tensor;
        const Tensor& b_in = tensors[static_cast<size_t>(g.b)].tensor;
        if (!dtype_is_float(a_in.dtype()) || !dtype_is_float(b_in.dtype()))
            return bad_input(where + ": factors must be float tensors, got A " + a_in.describe() + " and B " +
                             b_in.describe());
        if (a_in.rank() != 2 || b_in.rank() != 2)
            return bad_input(where + ": factors must be 2-D, got A " + shape_str(a_in) + " and B " +
                             shape_str(b_in));
        const int64_t r = a_in.dim(0);
        if (r < 1 || b_in.dim(1) != r)
            return bad_input(where + ": rank mismatch — A is " + shape_str(a_in) + " (rank " +
                             std::to_string(r) + ") but B is " + shape_str(b_in) + " (rank " +
                             std::to_string(b_in.dim(1)) + ")");
        if (a_in.dim(1) != mod->in || b_in.dim(0) != mod->out)
            return bad_input(where + ": shape mismatch — the DiT's " + mod->name + " is [" +
                             std::to_string(mod->out) + ", " + std::to_string(mod->in) + "], so A must be [" +
                             std::to_string(r) + ", " + std::to_string(mod->in) + "] and B [" +
                             std::to_string(mod->out) + ", " + std::to_string(r) + "]; the file has A " +
                             shape_str(a_in) + " and B " + shape_str(b_in));
        double scale = 1.0;
        if (g.alpha >= 0) {
            const Tensor& at = tensors[static_cast<size_t>(g.alpha)].tensor;
            if (at.numel() != 1 || !dtype_is_float(at.dtype()))
                return bad_input(where + ": alpha must be one float, got " + at.describe());
            H3_ASSIGN_OR_RETURN(std::vector<float> av, to_f32_vector(at));
            scale = static_cast<double>(av[0]) / static_cast<double>(r);
        } else if (meta.present) {
            const double rm = pattern_value(meta.rank_pattern, g.name, meta.r);
            const double am = pattern_value(meta.alpha_pattern, g.name, meta.alpha);
            if (rm != static_cast<double>(r))
                return bad_input(where + ": lora_adapter_metadata gives rank " + std::to_string(rm) +
                                 " but A has " + std::to_string(r) + " rows");
            scale = meta.rslora ? am / std::sqrt(rm) : am / rm;
        }
        if (!std::isfinite(scale)) return bad_input(where + ": alpha / rank is not finite");

        H3_ASSIGN_OR_RETURN(Tensor a, owned(a_in));
        H3_ASSIGN_OR_RETURN(Tensor b, owned(b_in));
        std::vector<std::pair<LoraTarget, Tensor>> parts; // target, its B rows
        switch (mod->transform) {
        case LoraModuleTransform::kDirect:
            parts.push_back({mod->targets[0], b});
            break;
        case LoraModuleTransform::kSwapHalves:
            parts.push_back({mod->targets[0], swap_row_halves(b)});
            break;
        case LoraModuleTransform::kSplitQkv: {
            const int64_t inner = c.inner_dim();
            Tensor q, k, v;
            if (rows == LoraQkvRows::kPerHead && !mod->fused_stacked_only) {
                split_qkv(b, c.num_attention_heads, c.attention_head_dim, q, k, v);
            } else {
                q = copy_rows(b, 0, inner);
                k = copy_rows(b, inner, 2 * inner);
                v = copy_rows(b, 2 * inner, 3 * inner);
            }
            parts = {{mod->targets[0], q}, {mod->targets[1], k}, {mod->targets[2], v}};
            break;
        }
        }
        for (auto& [target, bpart] : parts) {
            if (!lora_target_exists(c, target)) return internal_error(where + ": target out of range");
            auto [it, fresh] = owner.try_emplace(target, g.name);
            if (!fresh)
                return bad_input(label + ": modules " + it->second + " and " + g.name + " both adapt " +
                                 lora_target_name(target));
            LoraFactor f;
            f.target = target;
            f.scale = static_cast<float>(scale);
            int64_t kept = r;
            if (mod->transform == LoraModuleTransform::kSplitQkv) {
                H3_TRY(compact_rank(a, bpart, f.a, f.b, kept));
                if (kept == 0) continue; // this projection's block of B is all zero: nothing to apply
            } else {
                f.a = a;
                f.b = bpart;
            }
            out.factors.push_back(std::move(f));
        }
    }
    std::sort(out.factors.begin(), out.factors.end(),
              [](const LoraFactor& x, const LoraFactor& y) { return x.target < y.target; });
    out.ignored = std::move(ignored);
    if (!out.ignored.empty())
        H3_LOG_WARN(
            "{}: {} of {} keys name no projection h3-engine adapts and were skipped ({}); lora_strict "
            "makes this an error",
            label, out.ignored.size(), tensors.size(), list_keys(out.ignored, 5));
    return out;
}

size_t lora_tensor_limit(const DitConfig& config) {
    const size_t blocks = static_cast<size_t>(std::max(0, config.num_layers)) +
                          static_cast<size_t>(std::max(0, config.num_refiner_layers)) + 2;
    return 4096 + 64 * blocks;
}

Result<LoraAdapter> read_lora_file(const std::string& path, const DitConfig& config,
                                   const LoraReadOptions& options) {
    const io::SafetensorsLimits limits{.max_header_bytes = options.max_header_bytes,
                                       .max_tensors = options.max_tensors ? options.max_tensors
                                                                          : lora_tensor_limit(config)};
    H3_ASSIGN_OR_RETURN(io::SafetensorsFile f, io::SafetensorsFile::open(path, limits));
    std::vector<io::NamedTensor> tensors;
    tensors.reserve(f.tensors().size());
    for (const auto& info : f.tensors()) {
        H3_ASSIGN_OR_RETURN(Tensor t, f.tensor(info.name));
        tensors.push_back({info.name, std::move(t)});
    }
    return convert_lora_tensors(tensors, f.metadata(), config, options, path);
}

Status write_lora_file(const std::string& path, const LoraAdapter& adapter) {
    std::vector<io::NamedTensor> out;
    for (const LoraFactor& f : adapter.factors) {
        const std::string p = "transformer." + lora_target_name(f.target);
        Tensor alpha = Tensor::host(Shape{}, DType::kF32);
        alpha.data_as<float>()[0] = f.scale * static_cast<float>(f.rank());
        out.push_back({p + ".lora_A.weight", f.a});
        out.push_back({p + ".lora_B.weight", f.b});
        out.push_back({p + ".alpha", alpha});
    }
    return io::write_safetensors(path, out, {{"format", "pt"}});
}

} // namespace h3::model
