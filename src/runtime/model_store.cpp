#include "runtime/model_store.h"

#include "core/log.h"
#include "io/checkpoint.h"
#include "io/json_file.h"
#include "model/text/text_config.h"
#include "model/vision/vision_config.h"

#include <chrono>
#include <filesystem>
#include <tuple>

namespace fs = std::filesystem;

namespace h3::runtime {

namespace {

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

// The DiT variants share one slot.
std::optional<Component> slot_partner(Component c) {
    if (c == Component::kTransformer) return Component::kTransformerRef;
    if (c == Component::kTransformerRef) return Component::kTransformer;
    return std::nullopt;
}

// The checkpoint folder a component reads from (for messages).
const char* folder_of(Component c) {
    switch (c) {
    case Component::kTransformer:
        return "transformer/";
    case Component::kTransformerRef:
        return "transformer_ref/";
    case Component::kTextEncoder:
        return "text_encoder/ + tokenizer/";
    case Component::kVisionTower:
        return "text_encoder/ (vision_config + model.visual.* weights)";
    case Component::kVideoEncoder:
    case Component::kVideoDecoder:
        return "vae/";
    case Component::kAudioEncoder:
    case Component::kAudioDecoder:
        return "audio_vae/";
    }
    return "?";
}

template <typename T> std::shared_ptr<const void> share(T value) {
    return std::make_shared<const T>(std::move(value));
}
template <typename T> std::shared_ptr<const void> share(std::unique_ptr<T> p) {
    return std::shared_ptr<const T>(std::move(p));
}

// FastH3's sidecar into the info. Its declared shifts must be the scheduler configs' (and stand in for a
// missing one).
Status read_fasth3_sidecar(CheckpointInfo& info) {
    H3_ASSIGN_OR_RETURN(info.fasth3, model::read_fasth3_contract(info.root));
    if (!info.fasth3) return ok_status();
    const model::FastH3Contract& fc = *info.fasth3;
    for (auto [declared, used, name] : {std::tuple{fc.video_shift, &info.video_shift, "video"},
                                        std::tuple{fc.audio_shift, &info.audio_shift, "audio"}}) {
        if (!declared) continue;
        if (*used && **used != *declared)
            return bad_input(fc.path + ": " + name + "_scheduler_shift " + std::to_string(*declared) +
                             " disagrees with the checkpoint's " + name + " scheduler shift " +
                             std::to_string(**used));
        *used = declared;
    }
    return ok_status();
}

} // namespace

model::DitPrecision dit_precision(ComputePrecision p) {
    switch (p) {
    case ComputePrecision::kFp32:
        return model::DitPrecision::kFp32;
    case ComputePrecision::kFp8:
        return model::DitPrecision::kFp8;
    case ComputePrecision::kFp16:
        return model::DitPrecision::kFp16;
    case ComputePrecision::kBf16:
    case ComputePrecision::kDefault:
        break;
    }
    return model::DitPrecision::kBf16;
}

ComputePrecision placement_precision(model::VideoVaePrecision p) {
    switch (p) {
    case model::VideoVaePrecision::kBf16:
        return ComputePrecision::kBf16;
    case model::VideoVaePrecision::kFp8:
        return ComputePrecision::kFp8;
    case model::VideoVaePrecision::kExact:
        break;
    }
    return ComputePrecision::kDefault;
}

model::VideoVaePrecision video_vae_precision(ComputePrecision p) {
    return p == ComputePrecision::kFp8    ? model::VideoVaePrecision::kFp8
           : p == ComputePrecision::kBf16 ? model::VideoVaePrecision::kBf16
                                          : model::VideoVaePrecision::kExact;
}

DType video_decoder_compute(const ComponentPlacement& p) {
    if (p.precision == ComputePrecision::kFp32) return DType::kF32;
    return model::video_vae_compute(video_vae_precision(p.precision), p.device);
}

Result<std::unique_ptr<ModelStore>> ModelStore::open(const std::string& root, const PlacementPlan& plan,
                                                     ComponentSupplier supplier) {
    H3_TRY(plan.validate());
    std::unique_ptr<ModelStore> s(new ModelStore());
    s->plan_ = plan;
    s->supplier_ = std::move(supplier);
    CheckpointInfo& info = s->info_;
    info.root = root;
    const Device device = plan[Component::kTransformer].device;
    info.device = device.to_string();
    info.dtype = model::precision_name(dit_precision(plan[Component::kTransformer].precision));

    // ---- where every component is, and its config (read and validated; no weights)
    model::LatentSpecSources src;
    std::optional<model::DitConfig> dit, dit_ref;
    std::optional<model::VideoVaeConfig> vae;
    std::optional<model::AudioVaeConfig> avae;
    const auto present = [&](Component c, const std::string& dir) {
        info.present[static_cast<size_t>(c)] = true;
        s->dirs_[static_cast<size_t>(c)] = dir;
    };
    if (is_file(fs::path(root) / "config.json")) { // a bare transformer folder
        H3_ASSIGN_OR_RETURN(dit, model::DitConfig::from_file((fs::path(root) / "config.json").string()));
        src.dit_file = (fs::path(root) / "config.json").string();
        present(Component::kTransformer, root);
    } else {
        H3_ASSIGN_OR_RETURN(io::CheckpointDir dir, io::discover_checkpoint(root));
        info.video_shift = dir.video_shift;
        info.audio_shift = dir.audio_shift;
        // A component's folder without its config.json is a broken checkpoint (an interrupted download), not
        // an absent component: refused here, naming the file, rather than as a request's missing DiT later.
        for (const char* name : {"transformer", "transformer_ref", "vae", "audio_vae", "text_encoder"}) {
            const io::Component* c = dir.find(name);
            if (c && !is_file(fs::path(c->dir) / "config.json"))
                return not_found("checkpoint " + root + ": " + (fs::path(c->dir) / "config.json").string() +
                                 " does not exist (the " + name + "/ folder is there without its config)");
        }
        const auto config_of = [&](const char* name) -> const io::Component* {
            const io::Component* c = dir.find(name);
            return c && !c->config_path.empty() && is_file(c->config_path) ? c : nullptr;
        };
        if (const io::Component* c = config_of("transformer")) {
            H3_ASSIGN_OR_RETURN(dit, model::DitConfig::from_file(c->config_path));
            src.dit_file = c->config_path;
            present(Component::kTransformer, root);
        }
        if (const io::Component* c = config_of("transformer_ref")) {
            H3_ASSIGN_OR_RETURN(dit_ref, model::DitConfig::from_file(c->config_path));
            src.dit_ref_file = c->config_path;
            present(Component::kTransformerRef, root);
        }
        if (const io::Component* c = config_of("vae")) {
            H3_ASSIGN_OR_RETURN(vae, model::VideoVaeConfig::from_file(c->config_path));
            src.video_vae_file = c->config_path;
            present(Component::kVideoDecoder, c->dir);
            present(Component::kVideoEncoder, c->dir);
        }
        if (const io::Component* c = config_of("audio_vae")) {
            H3_ASSIGN_OR_RETURN(avae, model::AudioVaeConfig::from_file(c->config_path));
            src.audio_vae_file = c->config_path;
            present(Component::kAudioDecoder, c->dir);
            present(Component::kAudioEncoder, c->dir);
        }
        if (const io::Component* c = config_of("text_encoder"); c && model::find_tokenizer_dir(root).ok()) {
            H3_ASSIGN_OR_RETURN(auto tc, model::TextConfig::from_file(c->config_path));
            src.text_hidden_size = tc.hidden_size;
            src.text_file = c->config_path;
            present(Component::kTextEncoder, root);
            H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(c->config_path));
            // The vision tower: a vision_config, and the model.visual.* weights where the folder has weights.
            bool vision = model::VisionConfig::present(j);
            if (vision && c->has_weights) {
                auto ckpt = model::open_text_checkpoint(root);
                vision = ckpt.ok() && model::has_vision_tower(*ckpt);
            }
            if (vision) present(Component::kVisionTower, root);
        }
    }
    if (!dit && dit_ref) { // a Ref2VA-only checkpoint: its DiT gives the spec
        dit = dit_ref;
        src.dit_file = src.dit_ref_file;
        dit_ref.reset();
    }
    if (dit) src.dit = &*dit;
    if (dit_ref) src.dit_ref = &*dit_ref;
    if (vae) src.video_vae = &*vae;
    if (avae) src.audio_vae = &*avae;
    bool any = false;
    for (bool p : info.present) any |= p;
    if (!any)
        return not_found(
            "checkpoint " + root +
            " has no component this engine loads (transformer/, transformer_ref/, text_encoder/, "
            "vae/, audio_vae/)");
    H3_ASSIGN_OR_RETURN(info.spec, model::derive_latent_spec(src));
    info.dit = dit;
    H3_TRY(read_fasth3_sidecar(info));
    H3_ASSIGN_OR_RETURN(info.defaults, read_checkpoint_defaults(root));

    // ---- the device, then the resident components (of the DiT slot only the first variant)
    H3_ASSIGN_OR_RETURN(s->session_, DeviceSession::open(device));
    H3_TRY(s->preload());
    H3_LOG_INFO("model store: {} ({}); {}", root, info.spec.describe(), plan.describe());
    return s;
}

Status ModelStore::preload() {
    bool dit_preloaded = false; // of the DiT slot only the first variant
    for (Component c : kAllComponents) {
        if (plan_[c].residency != Residency::kResident || !info_.has(c)) continue;
        if (slot_partner(c)) {
            if (dit_preloaded) continue;
            dit_preloaded = true;
        }
        H3_ASSIGN_OR_RETURN(auto model, acquire(c));
        (void)model;
        release(c);
    }
    return ok_status();
}

Status ModelStore::replan(const PlacementPlan& plan) {
    H3_TRY(plan.validate());
    {
        std::lock_guard<std::mutex> lock(mu_);
        for (Component c : kAllComponents)
            if (slot(c).model || slot(c).leases > 0)
                return internal_error(std::string("model store: cannot change the placement plan while ") +
                                      component_name(c) + " is loaded");
        if (!(plan[Component::kTransformer].device == plan_[Component::kTransformer].device))
            return invalid_argument("model store: a new placement plan must keep the device " + info_.device);
        plan_ = plan;
        info_.dtype = model::precision_name(dit_precision(plan[Component::kTransformer].precision));
    }
    H3_TRY(preload());
    H3_LOG_INFO("model store: new plan: {}", plan_.describe());
    return ok_status();
}

ModelStore::~ModelStore() = default;

Status ModelStore::require(std::initializer_list<Component> needed) const {
    std::string missing;
    for (Component c : needed)
        if (!info_.has(c))
            missing +=
                std::string(missing.empty() ? "" : ", ") + component_name(c) + " (" + folder_of(c) + ")";
    if (missing.empty()) return ok_status();
    return not_found("checkpoint " + info_.root + " lacks " + missing);
}

Status ModelStore::set_merged_adapters(std::vector<model::LoraUse> uses, std::vector<std::string> names) {
    std::lock_guard<std::mutex> lock(mu_);
    for (Component c : {Component::kTransformer, Component::kTransformerRef})
        if (slot(c).model)
            return invalid_argument("lora: adapters are merged when a DiT loads; " +
                                    std::string(component_name(c)) + " is loaded already");
    merged_ = std::move(uses);
    merged_names_ = std::move(names);
    return ok_status();
}

Result<std::shared_ptr<const void>> ModelStore::load(Component c) const {
    const std::string& dir = dirs_[static_cast<size_t>(c)];
    const ComponentPlacement& p = plan_[c];
    const ops::Context& ctx = session_->context();
    const bool fp32 = p.precision == ComputePrecision::kFp32;
    const bool fp16 = p.precision == ComputePrecision::kFp16;
    const auto text_precision = fp32   ? model::TextPrecision::kFp32
                                : fp16 ? model::TextPrecision::kFp16
                                       : model::TextPrecision::kBf16;
    const ComponentSupplier& sup = supplier_;
    switch (c) {
    case Component::kTransformer:
    case Component::kTransformerRef: {
        if (sup.dit) {
            H3_ASSIGN_OR_RETURN(auto m, sup.dit(dir, p, ctx));
            return share(std::move(m));
        }
        H3_ASSIGN_OR_RETURN(auto ckpt, model::open_dit_checkpoint(dir, component_name(c)));
        model::DitLoadOptions lo{.device = p.device, .precision = dit_precision(p.precision)};
        lo.residency = p.weights;
        H3_ASSIGN_OR_RETURN(auto m, model::DitModel::load(ckpt, lo, ctx));
        if (!merged_.empty()) H3_TRY(m->merge_adapters(merged_).with_context("lora"));
        return share(std::move(m));
    }
    case Component::kTextEncoder: {
        if (sup.text_encoder) {
            H3_ASSIGN_OR_RETURN(auto m, sup.text_encoder(dir, p, ctx));
            return share(std::move(m));
        }
        model::TextLoadOptions to{.device = p.device, .precision = text_precision};
        to.residency = p.weights;
        H3_ASSIGN_OR_RETURN(auto m, model::load_text_stack(dir, to, ctx));
        return share(std::move(m));
    }
    case Component::kVisionTower: {
        // fp16 mode: the small vision tower keeps fp32 (no overflow to detect)
        const auto vision_precision = fp16 ? model::TextPrecision::kFp32 : text_precision;
        H3_ASSIGN_OR_RETURN(
            auto m, model::load_vision_tower(dir, {.device = p.device, .precision = vision_precision}, ctx));
        return share(std::move(m));
    }
    case Component::kVideoEncoder: {
        H3_ASSIGN_OR_RETURN(auto m, model::load_video_vae_encoder(dir, p.device));
        return share(std::move(m));
    }
    case Component::kVideoDecoder: {
        if (sup.video_decoder) {
            H3_ASSIGN_OR_RETURN(auto m, sup.video_decoder(dir, p, ctx));
            return share(std::move(m));
        }
        H3_ASSIGN_OR_RETURN(auto m, model::load_video_vae(dir, p.device, video_decoder_compute(p)));
        if (video_vae_precision(p.precision) == model::VideoVaePrecision::kFp8) // e4m3 block GEMMs
            H3_TRY(model::quantize_video_vae_fp8(ctx, m));
        return share(std::move(m));
    }
    case Component::kAudioEncoder: {
        H3_ASSIGN_OR_RETURN(auto m, model::load_audio_vae_encoder(dir, p.device));
        return share(std::move(m));
    }
    case Component::kAudioDecoder: {
        if (sup.audio_decoder) {
            H3_ASSIGN_OR_RETURN(auto m, sup.audio_decoder(dir, p, ctx));
            return share(std::move(m));
        }
        H3_ASSIGN_OR_RETURN(auto m, model::load_audio_vae(dir, p.device));
        return share(std::move(m));
    }
    }
    return internal_error("model store: unknown component");
}

Result<std::shared_ptr<const void>> ModelStore::acquire(Component c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!info_.has(c))
        return not_found(std::string(component_name(c)) + ": checkpoint " + info_.root + " has no " +
                         folder_of(c));
    Slot& s = slot(c);
    if (!s.model) {
        if (auto partner = slot_partner(c)) {
            Slot& other = slot(*partner);
            if (other.model && other.leases > 0)
                return internal_error(std::string(component_name(c)) + ": the DiT slot holds " +
                                      component_name(*partner) + ", which is still leased");
            other.model.reset(); // never two DiTs in memory
        }
        H3_TRY(session_->make_current());
        const auto t0 = std::chrono::steady_clock::now();
        auto m = load(c);
        if (!m.ok()) return m.status().with_context(std::string("loading ") + component_name(c));
        s.model = std::move(m).value();
        ++s.loads;
        H3_LOG_INFO("model store: loaded {} in {:.3f} s ({} load(s))", component_name(c),
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                    s.loads.load());
    }
    ++s.leases;
    return s.model;
}

template <typename T> Result<Lease<T>> ModelStore::lease(Component c) {
    H3_ASSIGN_OR_RETURN(std::shared_ptr<const void> m, acquire(c));
    return Lease<T>(std::static_pointer_cast<const T>(m), this, c);
}

void ModelStore::release(Component c) {
    std::lock_guard<std::mutex> lock(mu_);
    Slot& s = slot(c);
    if (s.leases > 0) --s.leases;
    if (s.leases == 0 && plan_[c].residency == Residency::kPerJob) s.model.reset();
}

Result<Lease<model::DitModel>> ModelStore::dit(Component variant) {
    if (!slot_partner(variant))
        return internal_error(std::string("model store: ") + component_name(variant) + " is not a DiT");
    return lease<model::DitModel>(variant);
}
Result<Lease<model::TextStack>> ModelStore::text_encoder() {
    return lease<model::TextStack>(Component::kTextEncoder);
}
Result<Lease<model::VisionModel>> ModelStore::vision_tower() {
    return lease<model::VisionModel>(Component::kVisionTower);
}
Result<Lease<model::VideoVaeEncoder>> ModelStore::video_encoder() {
    return lease<model::VideoVaeEncoder>(Component::kVideoEncoder);
}
Result<Lease<model::VideoVae>> ModelStore::video_decoder() {
    return lease<model::VideoVae>(Component::kVideoDecoder);
}
Result<Lease<model::AudioVaeEncoder>> ModelStore::audio_encoder() {
    return lease<model::AudioVaeEncoder>(Component::kAudioEncoder);
}
Result<Lease<model::AudioVae>> ModelStore::audio_decoder() {
    return lease<model::AudioVae>(Component::kAudioDecoder);
}

bool ModelStore::loaded(Component c) const {
    std::lock_guard<std::mutex> lock(mu_);
    return slot(c).model != nullptr;
}

uint64_t ModelStore::loads(Component c) const {
    return slot(c).loads.load();
}

std::map<std::string, uint64_t> ModelStore::load_counts() const {
    std::map<std::string, uint64_t> out;
    for (Component c : kAllComponents)
        if (info_.has(c)) out[component_name(c)] = slot(c).loads.load();
    return out;
}

} // namespace h3::runtime
