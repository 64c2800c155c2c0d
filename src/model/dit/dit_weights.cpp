#include "model/dit/dit_weights.h"

#include "model/dit/random_weights.h"
#include "model/weights/weight_master.h"

#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace h3::model {

const char* precision_name(DitPrecision p) {
    switch (p) {
    case DitPrecision::kFp32:
        return "fp32";
    case DitPrecision::kFp8:
        return "fp8";
    case DitPrecision::kFp16:
        return "fp16";
    default:
        return "bf16";
    }
}

Result<DitPrecision> parse_precision(const std::string& text, const std::string& field) {
    if (text == "fp32") return DitPrecision::kFp32;
    if (text == "bf16") return DitPrecision::kBf16;
    if (text == "fp16") return DitPrecision::kFp16;
    if (text == "fp8") return DitPrecision::kFp8;
    return invalid_argument(field + " '" + text + "' must be bf16, fp16, fp8 or fp32");
}

DType precision_dtype(DitPrecision p) {
    switch (p) {
    case DitPrecision::kFp32:
        return DType::kF32;
    case DitPrecision::kFp16:
        return DType::kF16;
    default:
        return DType::kBF16;
    }
}

DType residual_dtype(DitPrecision p) {
    return p == DitPrecision::kFp16 ? DType::kF32 : precision_dtype(p);
}

std::vector<std::string> dit_streamed_names(int b) {
    const std::string p = "transformer_blocks." + std::to_string(b) + ".";
    return {p + "attn.to_q.weight",     p + "attn.to_k.weight",     p + "attn.to_v.weight",
            p + "attn.to_out.0.weight", p + "ff.net.0.proj.weight", p + "ff.net.2.weight"};
}

Result<DitCheckpoint> open_dit_checkpoint(const std::string& path, const std::string& component) {
    std::string dir = path;
    std::error_code ec;
    if (!fs::exists(fs::path(path) / "config.json", ec)) {
        H3_ASSIGN_OR_RETURN(auto ckpt, io::discover_checkpoint(path));
        const io::Component* c = ckpt.find(component);
        if (!c) return not_found("checkpoint " + path + " has no '" + component + "' component");
        if (!c->has_weights)
            return not_found("component '" + component + "' in " + path + " holds no safetensors");
        dir = c->dir;
    }
    DitCheckpoint out;
    out.dir = dir;
    H3_ASSIGN_OR_RETURN(out.config, DitConfig::from_file((fs::path(dir) / "config.json").string()));
    H3_ASSIGN_OR_RETURN(out.tensors, io::TensorSet::open(dir));
    bool original = out.tensors.contains("blocks.0.attn.qkv_proj.weight") ||
                    out.tensors.contains("video_patch_proj.weight");
    out.format = original ? DitFormat::kOriginal : DitFormat::kDiffusers;
    return out;
}

namespace {

class Loader {
public:
    Loader(const DitCheckpoint& ckpt, const DitLoadOptions& opt,
           std::function<bool(const std::string&)> keep_on_host = {})
        : ckpt_(ckpt), opt_(opt), keep_on_host_(std::move(keep_on_host)) {
        for (const auto& s : dit_tensor_specs(ckpt.config, DitFormat::kDiffusers)) specs_[s.name] = s;
        for (int b = 0; b < ckpt.config.num_layers; ++b) {
            TensorSpec g = gate_compress_spec(ckpt.config, b);
            specs_[g.name] = g;
        }
    }

    // Whether the checkpoint holds a diffusers-named tensor (under its original name in that format).
    bool has(const std::string& name) const {
        if (ckpt_.format == DitFormat::kDiffusers) return ckpt_.tensors.contains(name);
        auto orig = original_name_of(name);
        return orig && ckpt_.tensors.contains(*orig);
    }

    // One diffusers-named tensor: read (through the original table if needed), check, convert, upload.
    Result<Tensor> get(const std::string& name) {
        auto it = specs_.find(name);
        H3_CHECK(it != specs_.end(), "no spec for " << name);
        H3_ASSIGN_OR_RETURN(Tensor host, read_diffusers(name));
        if (host.shape().to_vector() != it->second.shape)
            return bad_input("transformer checkpoint " + ckpt_.dir + ": tensor '" + name + "' has shape " +
                             host.shape().to_string() + ", the config implies " +
                             Shape(it->second.shape).to_string());
        if (!dtype_is_float(host.dtype()))
            return bad_input("transformer checkpoint " + ckpt_.dir + ": tensor '" + name + "' has dtype " +
                             dtype_name(host.dtype()) + ", expected a float type");
        const DType target = is_fp32_island(name) ? DType::kF32 : precision_dtype(opt_.precision);
        H3_ASSIGN_OR_RETURN(
            host,
            convert_weight(host, target, "transformer checkpoint " + ckpt_.dir + ": tensor '" + name + "'"));
        if (keep_on_host_ && keep_on_host_(name)) return host; // a host master (mmap view when unconverted)
        if (opt_.device.is_cpu()) {
            if (host.read_only()) return host.to(Device::cpu()); // own copy, detached from the mmap
            return host;
        }
        return host.to(opt_.device);
    }

private:
    Result<Tensor> read_diffusers(const std::string& name) {
        if (ckpt_.format == DitFormat::kDiffusers) return checked(name);
        auto orig = original_name_of(name);
        H3_CHECK(orig.has_value(), "no original name for " << name);
        H3_ASSIGN_OR_RETURN(Tensor t, checked(*orig));
        auto m = map_original_name(*orig);
        if (m->transform == OriginalTransform::kRename) return t;
        if (m->transform == OriginalTransform::kSwapHalves) {
            if (t.rank() != 2 || t.dim(0) % 2)
                return bad_input(ckpt_.dir + ": '" + *orig + "' must be 2-D with an even row count, got " +
                                 t.shape().to_string());
            return swap_row_halves(t);
        }
        // kSplitQkv: split once, keep the three parts for the sibling names.
        auto cached = split_cache_.find(name);
        if (cached != split_cache_.end()) {
            Tensor r = cached->second;
            split_cache_.erase(cached);
            return r;
        }
        const DitConfig& c = ckpt_.config;
        if (t.rank() != 2 || t.dim(0) != 3LL * c.inner_dim())
            return bad_input(ckpt_.dir + ": '" + *orig + "' has shape " + t.shape().to_string() +
                             ", expected [" + std::to_string(3 * c.inner_dim()) + ", " +
                             std::to_string(c.hidden_size) + "]");
        Tensor q, k, v;
        split_qkv(t, c.num_attention_heads, c.attention_head_dim, q, k, v);
        const auto& names = m->diffusers_names;
        Tensor parts[3] = {q, k, v};
        Tensor wanted;
        for (int i = 0; i < 3; ++i) {
            if (names[static_cast<size_t>(i)] == name)
                wanted = parts[i];
            else
                split_cache_[names[static_cast<size_t>(i)]] = parts[i];
        }
        return wanted;
    }

    Result<Tensor> checked(const std::string& name) {
        if (!ckpt_.tensors.contains(name))
            return bad_input("transformer checkpoint " + ckpt_.dir + " lacks tensor '" + name + "'");
        return ckpt_.tensors.tensor(name);
    }

    const DitCheckpoint& ckpt_;
    const DitLoadOptions& opt_;
    std::function<bool(const std::string&)> keep_on_host_;
    std::map<std::string, TensorSpec> specs_;
    std::map<std::string, Tensor> split_cache_;
};

Status load_block(Loader& l, const std::string& p, bool adaln, DitBlockWeights& b) {
    H3_ASSIGN_OR_RETURN(b.norm1, l.get(p + "norm1.weight"));
    H3_ASSIGN_OR_RETURN(b.to_q, l.get(p + "attn.to_q.weight"));
    H3_ASSIGN_OR_RETURN(b.to_k, l.get(p + "attn.to_k.weight"));
    H3_ASSIGN_OR_RETURN(b.to_v, l.get(p + "attn.to_v.weight"));
    H3_ASSIGN_OR_RETURN(b.norm_q, l.get(p + "attn.norm_q.weight"));
    H3_ASSIGN_OR_RETURN(b.norm_k, l.get(p + "attn.norm_k.weight"));
    H3_ASSIGN_OR_RETURN(b.to_out, l.get(p + "attn.to_out.0.weight"));
    H3_ASSIGN_OR_RETURN(b.norm2, l.get(p + "norm2.weight"));
    H3_ASSIGN_OR_RETURN(b.ff_in, l.get(p + "ff.net.0.proj.weight"));
    H3_ASSIGN_OR_RETURN(b.ff_out, l.get(p + "ff.net.2.weight"));
    if (adaln) {
        H3_ASSIGN_OR_RETURN(b.adaln_weight, l.get(p + "adaln_proj.linear.weight"));
        H3_ASSIGN_OR_RETURN(b.adaln_bias, l.get(p + "adaln_proj.linear.bias"));
    }
    return ok_status();
}

} // namespace

Result<Tensor> load_dit_tensor(const DitCheckpoint& ckpt, const std::string& name,
                               const DitLoadOptions& opt) {
    Loader l(ckpt, opt);
    return l.get(name);
}

Result<DitWeights> load_dit_weights(const DitCheckpoint& ckpt, const DitLoadOptions& opt,
                                    const std::function<bool(const std::string&)>& keep_on_host) {
    Loader l(ckpt, opt, keep_on_host);
    DitWeights w;
    H3_ASSIGN_OR_RETURN(w.proj_in_w, l.get("proj_in.weight"));
    H3_ASSIGN_OR_RETURN(w.proj_in_b, l.get("proj_in.bias"));
    H3_ASSIGN_OR_RETURN(w.audio_proj_in_w, l.get("audio_proj_in.weight"));
    H3_ASSIGN_OR_RETURN(w.audio_proj_in_b, l.get("audio_proj_in.bias"));
    H3_ASSIGN_OR_RETURN(w.context_w, l.get("context_embedder.weight"));
    H3_ASSIGN_OR_RETURN(w.context_b, l.get("context_embedder.bias"));
    H3_ASSIGN_OR_RETURN(w.time_w1, l.get("time_embedder.linear_1.weight"));
    H3_ASSIGN_OR_RETURN(w.time_b1, l.get("time_embedder.linear_1.bias"));
    H3_ASSIGN_OR_RETURN(w.time_w2, l.get("time_embedder.linear_2.weight"));
    H3_ASSIGN_OR_RETURN(w.time_b2, l.get("time_embedder.linear_2.bias"));
    H3_ASSIGN_OR_RETURN(w.refiner_final_norm, l.get("token_refiner.final_norm.weight"));
    H3_ASSIGN_OR_RETURN(w.norm_out, l.get("norm_out.norm.weight"));
    H3_ASSIGN_OR_RETURN(w.norm_out_w, l.get("norm_out.linear.weight"));
    H3_ASSIGN_OR_RETURN(w.norm_out_b, l.get("norm_out.linear.bias"));
    H3_ASSIGN_OR_RETURN(w.proj_out_w, l.get("proj_out.weight"));
    H3_ASSIGN_OR_RETURN(w.proj_out_b, l.get("proj_out.bias"));
    H3_ASSIGN_OR_RETURN(w.audio_proj_out_w, l.get("audio_proj_out.weight"));
    H3_ASSIGN_OR_RETURN(w.audio_proj_out_b, l.get("audio_proj_out.bias"));
    const DitConfig& c = ckpt.config;
    w.refiner.resize(static_cast<size_t>(c.num_refiner_layers));
    for (int i = 0; i < c.num_refiner_layers; ++i)
        H3_TRY(load_block(l, "token_refiner.refiner_blocks." + std::to_string(i) + ".", false,
                          w.refiner[static_cast<size_t>(i)]));
    w.blocks.resize(static_cast<size_t>(c.num_layers));
    for (int i = 0; i < c.num_layers; ++i)
        H3_TRY(load_block(l, "transformer_blocks." + std::to_string(i) + ".", opt.load_adaln,
                          w.blocks[static_cast<size_t>(i)]));
    // FastH3: the VSA compression gates, in every block or in none.
    const bool gates = c.num_layers > 0 && l.has(gate_compress_name(0));
    for (int i = 0; i < c.num_layers; ++i) {
        if (l.has(gate_compress_name(i)) != gates) {
            const int missing = gates ? i : 0, present = gates ? 0 : i;
            return bad_input("transformer checkpoint " + ckpt.dir + ": '" + gate_compress_name(missing) +
                             "' is missing but block " + std::to_string(present) +
                             " has attn.to_gate_compress; a FastH3 checkpoint carries it in every block");
        }
        if (gates) {
            H3_ASSIGN_OR_RETURN(w.blocks[static_cast<size_t>(i)].gate_compress, l.get(gate_compress_name(i)));
        }
    }
    return w;
}

} // namespace h3::model
