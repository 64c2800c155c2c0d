#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_text.h"
#include "model/tiny/tiny_vae.h"

#include "io/checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/dit/dit_tensors.h"
#include "model/dit/random_weights.h"
#include "model/fasth3_contract.h"

#include <cstdio>
#include <filesystem>
#include <map>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

constexpr double kVideoShift = 12.0; // the official scheduler/scheduler_config.json value
constexpr double kAudioShift = 3.0;  // the official audio_scheduler/scheduler_config.json value

Status make_dirs(const fs::path& p) {
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) return io_error("cannot create directory " + p.string() + ": " + ec.message());
    return ok_status();
}

std::vector<io::NamedTensor> diffusers_tensors(const DitConfig& c, uint64_t seed, bool gates = false) {
    std::vector<io::NamedTensor> out;
    for (const auto& spec : dit_tensor_specs(c, DitFormat::kDiffusers))
        out.push_back({spec.name, random_dit_tensor(spec, seed)});
    if (gates)
        for (int b = 0; b < c.num_layers; ++b) {
            const TensorSpec spec = gate_compress_spec(c, b);
            out.push_back({spec.name, random_dit_tensor(spec, seed)});
        }
    return out;
}

// The same numbers under original names: fused per-head-interleaved qkv, swapped fc1 halves, inv_freq.
std::vector<io::NamedTensor> original_tensors(const DitConfig& c, uint64_t seed) {
    std::map<std::string, Tensor> by_name;
    for (auto& nt : diffusers_tensors(c, seed)) by_name[nt.name] = nt.tensor;
    std::vector<io::NamedTensor> out;
    for (const auto& spec : dit_tensor_specs(c, DitFormat::kOriginal)) {
        auto m = map_original_name(spec.name);
        H3_CHECK(m.has_value(), "no mapping for " << spec.name);
        switch (m->transform) {
        case OriginalTransform::kRename:
            out.push_back({spec.name, by_name.at(m->diffusers_names[0])});
            break;
        case OriginalTransform::kSwapHalves:
            out.push_back({spec.name, swap_row_halves(by_name.at(m->diffusers_names[0]))});
            break;
        case OriginalTransform::kSplitQkv:
            out.push_back({spec.name, interleave_qkv(by_name.at(m->diffusers_names[0]),
                                                     by_name.at(m->diffusers_names[1]),
                                                     by_name.at(m->diffusers_names[2]), c.num_attention_heads,
                                                     c.attention_head_dim)});
            break;
        case OriginalTransform::kDrop:
            out.push_back({spec.name, rope_inv_freq(c)});
            break;
        }
    }
    return out;
}

nlohmann::json component_entry(const char* library, const char* cls, const char* subfolder) {
    return nlohmann::json::array({library,
                                  cls,
                                  {{"type_hint", {library, cls}},
                                   {"pretrained_model_name_or_path", "h3-engine/tiny"},
                                   {"subfolder", subfolder},
                                   {"variant", nullptr},
                                   {"revision", nullptr}}});
}

Status write_diffusers(const TinyCheckpointParams& p, const DitConfig& c) {
    fs::path root(p.dir);
    nlohmann::json index = {{"_class_name", "MiniMaxH3ModularPipeline"},
                            {"_diffusers_version", "0.36.0.dev0"},
                            {"_blocks_class_name", "MiniMaxH3Blocks"}};
    index["transformer"] = component_entry("diffusers", "MiniMaxH3Transformer3DModel", "transformer");
    index["transformer_ref"] = component_entry("diffusers", "MiniMaxH3Transformer3DModel", "transformer_ref");
    index["scheduler"] = component_entry("diffusers", "MiniMaxH3Scheduler", "scheduler");
    index["audio_scheduler"] = component_entry("diffusers", "MiniMaxH3Scheduler", "audio_scheduler");
    index["vae"] = component_entry("diffusers", "AutoencoderKLMiniMaxH3", "vae");
    index["audio_vae"] = component_entry("diffusers", "AutoencoderKLMiniMaxH3Audio", "audio_vae");
    H3_TRY(make_dirs(root));
    H3_TRY(io::write_json_file((root / "model_index.json").string(), index));
    for (auto [name, shift] :
         {std::pair{"scheduler", kVideoShift}, std::pair{"audio_scheduler", kAudioShift}}) {
        H3_TRY(make_dirs(root / name));
        nlohmann::json s = {
            {"_class_name", "MiniMaxH3Scheduler"}, {"_diffusers_version", "0.36.0.dev0"}, {"shift", shift}};
        H3_TRY(io::write_json_file((root / name / "scheduler_config.json").string(), s));
    }
    const bool fasth3 = p.variant == TinyVariant::kFastH3;
    for (auto [name, seed] : {std::pair{"transformer", p.seed}, std::pair{"transformer_ref", p.seed + 1}}) {
        fs::path dir = root / name;
        H3_TRY(make_dirs(dir));
        H3_TRY(io::write_json_file((dir / "config.json").string(), c.to_diffusers_json()));
        const bool gates = fasth3 && std::string(name) == "transformer"; // the student is the FL2VA DiT
        H3_TRY(io::write_sharded_safetensors(dir.string(), "diffusion_pytorch_model",
                                             diffusers_tensors(c, seed, gates), p.shards));
    }
    if (fasth3) H3_TRY(io::write_json_file((root / kFastH3ContractFile).string(), fasth3_contract_json()));
    return ok_status();
}

Status write_original(const TinyCheckpointParams& p, const DitConfig& c) {
    fs::path root(p.dir);
    for (auto [part, seed] : {std::pair{"FL2VA", p.seed}, std::pair{"Ref2VA", p.seed + 1}}) {
        bool fl2va = std::string(part) == "FL2VA";
        nlohmann::json index = {{"_class_name", "MiniMaxH3Pipeline"},
                                {"_diffusers_version", "0.32.2"},
                                {"scheduler", nullptr},
                                {"transformer", {"diffusers", "MiniMaxH3DiTModel"}}};
        index["_minimax_h3"] = {{"schema_version", 1},
                                {"partition", fl2va ? "fl2va" : "ref2va"},
                                {"tasks", fl2va ? nlohmann::json{"t2va", "fl2va"} : nlohmann::json{"ref2va"}},
                                {"task_aliases", nlohmann::json::object()},
                                {"sigma_shift_scales", {{"video", kVideoShift}, {"audio", kAudioShift}}}};
        fs::path dir = root / part / "transformer";
        H3_TRY(make_dirs(dir));
        H3_TRY(io::write_json_file((root / part / "model_index.json").string(), index));
        H3_TRY(io::write_json_file((dir / "config.json").string(), c.to_original_json()));
        H3_TRY(io::write_sharded_safetensors(dir.string(), "model", original_tensors(c, seed), p.shards));
    }
    return ok_status();
}

} // namespace

// The FastH3 sidecar as FastVideo's export writes it (the release's ladder and VSA policy).
nlohmann::json fasth3_contract_json() {
    return {{"schema_version", kFastH3Schema},
            {"model_id", "h3-engine/tiny-fasth3"},
            {"task", "t2av"},
            {"dmd_denoising_steps", {999, 749, 500, 250}},
            {"num_inference_steps", 5},
            {"transformer_forwards", 4},
            {"guidance_scale", 1.0},
            {"attention_backend", "VIDEO_SPARSE_ATTN_H3"},
            {"vsa_tile_size", 64},
            {"vsa_sparsity", 0.9}};
}

Status write_tiny_checkpoint(const TinyCheckpointParams& p) {
    if (p.dir.empty()) return invalid_argument("make-tiny: no output directory given");
    H3_TRY(p.geometry.validate());
    DitConfig c = tiny_dit_config(p.geometry);
    H3_TRY(c.validate("tiny config"));
    if (p.variant == TinyVariant::kFastH3 && p.layout != TinyLayout::kDiffusers)
        return invalid_field("variant", "variant fasth3 writes the diffusers layout only (FastH3 exports are "
                                        "diffusers checkpoints)");
    H3_TRY(p.layout == TinyLayout::kDiffusers ? write_diffusers(p, c) : write_original(p, c));
    H3_TRY(write_tiny_vaes(p));
    return write_tiny_text(p);
}

} // namespace h3::model
