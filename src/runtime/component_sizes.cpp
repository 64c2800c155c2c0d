#include "runtime/component_sizes.h"

#include "io/checkpoint.h"
#include "io/json_file.h"
#include "model/audio_vae/audio_vae.h"
#include "model/dit/dit_tensors.h"
#include "model/text/text_model.h"
#include "model/video_vae/video_vae.h"
#include "model/video_vae/video_vae_layout.h"
#include "model/vision/vision_config.h"
#include "model/vision/vision_model.h"

#include <algorithm>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::runtime {

namespace {
// The latent frames the decoder's clip plan is sized for (the release clip: 124 frames, 37 video latents).
constexpr int64_t kClipPlanLatents = 37;
} // namespace

namespace {

uint64_t numel(const std::vector<int64_t>& shape) {
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    return n;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Bytes of `dir`'s tensors whose names start with `prefix` (from the file headers), stored as they are
// (elem_bytes 0) or at elem_bytes per element.
Result<uint64_t> file_bytes(const std::string& dir, const std::string& prefix, size_t elem_bytes = 0) {
    H3_ASSIGN_OR_RETURN(io::TensorSet set, io::TensorSet::open(dir));
    uint64_t total = 0;
    for (const std::string& n : set.names()) {
        if (n.rfind(prefix, 0) != 0) continue;
        const io::TensorInfo* info = set.info(n);
        total += elem_bytes ? numel(info->shape) * elem_bytes : info->end - info->begin;
    }
    return total;
}

// Bytes of a component's tensor inventory (a configs-only checkpoint, e.g. `bench request`'s) at elem_bytes.
uint64_t inventory_bytes(const std::vector<std::pair<std::string, std::vector<int64_t>>>& tensors,
                         size_t elem_bytes) {
    uint64_t total = 0;
    for (const auto& t : tensors) total += numel(t.second) * elem_bytes;
    return total;
}

} // namespace

ComponentBytes dit_component_bytes(const model::DitConfig& c, model::DitPrecision p, const Workload& w) {
    ComponentBytes b;
    b.name = "transformer";
    b.stage = Stage::kDenoise;
    b.hot = true;
    b.layers = c.num_layers;
    const size_t act = dtype_size(model::precision_dtype(p)), res = dtype_size(model::residual_dtype(p));
    const std::vector<std::string> streamed = model::dit_streamed_names(0);
    uint64_t int8_layer = 0;
    for (const auto& spec : model::dit_tensor_specs(c, model::DitFormat::kDiffusers)) {
        const uint64_t bytes = numel(spec.shape) * (model::is_fp32_island(spec.name) ? 4 : act);
        const bool block = spec.name.rfind("transformer_blocks.", 0) == 0;
        bool is_streamed = false;
        for (const std::string& s : streamed)
            if (block && ends_with(spec.name, s.substr(std::string("transformer_blocks.0").size())))
                is_streamed = true;
        if (is_streamed) {
            if (spec.name.rfind("transformer_blocks.0.", 0) == 0) {
                b.layer += bytes;
                int8_layer += numel(spec.shape) + static_cast<uint64_t>(spec.shape[0]) * 4;
            }
        } else if (block && spec.name.find(".adaln_proj.") != std::string::npos) {
            b.resident_extra += bytes;
        } else {
            b.fixed += bytes;
        }
    }
    b.layer_int8 = int8_layer;
    // One forward (DiT::make_scratch + forward): residual, x/y, q/k/v/o, the FFN chunk, RoPE and row tables,
    // the refined text; plus the AdaLN tables of the schedule and a step cache's buffers.
    const uint64_t S = static_cast<uint64_t>(w.dit_rows), D = static_cast<uint64_t>(c.hidden_size),
                   I = static_cast<uint64_t>(c.inner_dim()), R = static_cast<uint64_t>(c.rotary_dim()),
                   M = static_cast<uint64_t>(std::max(1, 2 * (w.schedule_points - 1)));
    const uint64_t ffn =
        std::min<uint64_t>(w.ffn_chunk_bytes, S * 3 * static_cast<uint64_t>(c.ffn_dim) * act);
    b.working = S * D * res + 2 * S * D * act + 4 * S * I * act + ffn + 2 * 2 * S * R * 4 + 4 * S * 4 +
                static_cast<uint64_t>(w.text_rows) * D * act +
                static_cast<uint64_t>(c.num_layers) * M * 3 * 6 * D * act +
                M * static_cast<uint64_t>(c.final_adaln_out_features()) * act +
                static_cast<uint64_t>(w.cache_buffers) * S * D * 4;
    return b;
}

ComponentBytes text_component_bytes(const model::TextConfig& c, model::DitPrecision p, int layers,
                                    const Workload& w) {
    ComponentBytes b;
    b.name = "text_encoder";
    b.stage = Stage::kConditioning;
    b.layers = layers;
    const size_t act = dtype_size(model::precision_dtype(p)), res = dtype_size(model::residual_dtype(p));
    for (const auto& [name, shape] : model::text_tensor_specs(c, layers)) {
        if (name.find("embed_tokens") != std::string::npos) continue; // gathered on the host
        const uint64_t bytes = numel(shape) * act;
        const bool matrix = shape.size() == 2;
        if (!matrix) {
            b.fixed += bytes;
        } else if (name.find(".layers.0.") != std::string::npos) {
            b.layer += bytes;
            b.layer_int8 += numel(shape) + static_cast<uint64_t>(shape[0]) * 4;
        }
    }
    const uint64_t L = static_cast<uint64_t>(w.text_rows), H = static_cast<uint64_t>(c.hidden_size),
                   d = static_cast<uint64_t>(c.head_dim), F = static_cast<uint64_t>(c.intermediate_size);
    const uint64_t q = static_cast<uint64_t>(c.num_attention_heads) * d,
                   kv = static_cast<uint64_t>(c.num_key_value_heads) * d;
    b.working = L * H * res + L * (2 * H + 2 * q + 2 * kv + 3 * F) * act + 2 * L * d * 4;
    return b;
}

Result<std::vector<ComponentBytes>> checkpoint_component_bytes(const std::string& root, model::DitPrecision p,
                                                               const Workload& w,
                                                               const std::string& dit_component) {
    std::vector<ComponentBytes> out;
    H3_ASSIGN_OR_RETURN(io::CheckpointDir dir, io::discover_checkpoint(root));
    // The DiT's and the text stack's sizes come from their configs either way; a component with a config but
    // no weight files (a configs-only checkpoint: `bench request --random-weights`) is sized from its tensor
    // inventory, fp32 where the files would say.
    const io::Component* dc = dir.find(dit_component);
    if (dc && !dc->has_weights && !dc->config_path.empty()) {
        H3_ASSIGN_OR_RETURN(model::DitConfig c, model::DitConfig::from_file(dc->config_path));
        out.push_back(dit_component_bytes(c, p, w));
    } else {
        H3_ASSIGN_OR_RETURN(model::DitCheckpoint dit, model::open_dit_checkpoint(root, dit_component));
        out.push_back(dit_component_bytes(dit.config, p, w));
    }
    const io::Component* t = dir.find("text_encoder");
    if (t && !t->has_weights && !t->config_path.empty()) {
        H3_ASSIGN_OR_RETURN(model::TextConfig tcfg, model::TextConfig::from_file(t->config_path));
        out.push_back(text_component_bytes(tcfg, p, tcfg.used_layers(), w)); // t2va: no vision tower
    } else if (t && t->has_weights) {
        H3_ASSIGN_OR_RETURN(model::TextCheckpoint tc, model::open_text_checkpoint(root));
        out.push_back(text_component_bytes(tc.config, p, tc.config.used_layers(), w));
        H3_ASSIGN_OR_RETURN(nlohmann::json cfg,
                            io::read_json_file((fs::path(tc.dir) / "config.json").string()));
        if (model::VisionConfig::present(cfg)) {
            // fp16 mode runs the vision tower in fp32 (pipeline/text_conditioner).
            const size_t vsize = p == model::DitPrecision::kBf16 ? 2 : 4;
            ComponentBytes v;
            v.name = "vision_tower";
            v.stage = Stage::kConditioning;
            H3_ASSIGN_OR_RETURN(v.fixed, file_bytes(tc.dir, model::kVisionPrefix, vsize));
            out.push_back(v);
        }
    }
    for (const char* name : {"vae", "audio_vae"}) {
        const io::Component* c = dir.find(name);
        const bool configs_only = c && !c->has_weights && !c->config_path.empty();
        if (!c || (!c->has_weights && !configs_only)) continue;
        ComponentBytes v;
        v.name = std::string(name) == "vae" ? "vae_decoder" : "audio_vae_decoder"; // runtime::component_name
        v.stage = Stage::kDecode;
        if (configs_only && std::string(name) == "vae") {
            H3_ASSIGN_OR_RETURN(model::VideoVaeConfig vc, model::VideoVaeConfig::from_file(c->config_path));
            v.fixed = inventory_bytes(model::video_vae_decoder_tensors(vc), 4);
        } else if (configs_only) {
            H3_ASSIGN_OR_RETURN(model::AudioVaeConfig ac, model::AudioVaeConfig::from_file(c->config_path));
            v.fixed = inventory_bytes(model::audio_vae_decoder_tensors(ac), 4);
        } else {
            H3_ASSIGN_OR_RETURN(v.fixed, file_bytes(c->dir, "decoder."));
            if (v.fixed == 0) {
                H3_ASSIGN_OR_RETURN(v.fixed, file_bytes(c->dir, ""));
            }
        }
        if (std::string(name) == "vae") {
            H3_ASSIGN_OR_RETURN(model::VideoVaeConfig vc, model::VideoVaeConfig::from_file(c->config_path));
            v.working = video_decoder_working_bytes(vc, w.width, w.height, kClipPlanLatents);
        }
        out.push_back(v);
    }
    return out;
}

uint64_t video_decoder_working_bytes(const model::VideoVaeConfig& vc, int width, int height,
                                     int64_t latent_frames) {
    const model::VideoDecodeOptions d;
    const auto ty = model::split_tiles(height, d.tile, d.min_overlap, vc.patch);
    const auto tx = model::split_tiles(width, d.tile, d.min_overlap, vc.patch);
    const uint64_t th = static_cast<uint64_t>(ty.lengths[0]), tw = static_cast<uint64_t>(tx.lengths[0]);
    const uint64_t batch = std::min<uint64_t>(16, ty.starts.size() * tx.starts.size());
    const model::ClipPlan plan =
        model::plan_clips(static_cast<int>(latent_frames), vc.clip_length, vc.patch_t, vc.token_drop);
    const uint64_t clip = static_cast<uint64_t>(plan.clip_latents);
    const uint64_t tokens =
        batch * ((th / vc.patch) * (tw / vc.patch) * clip + static_cast<uint64_t>(vc.num_register_tokens));
    const uint64_t dim = static_cast<uint64_t>(vc.dim());
    return tokens * (6 * dim + 2 * static_cast<uint64_t>(vc.ffn_dim())) * 4 +
           batch * 3 * clip * static_cast<uint64_t>(vc.patch_t) * th * tw * 4;
}

} // namespace h3::runtime
