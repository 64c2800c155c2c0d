// ModelStore: the one owner of a checkpoint's loaded components. open() discovers the checkpoint and reads
// every component's config (no weights), derives the model::LatentSpec from them (cross-checked: a mismatch
// between the DiT, the VAEs and the text encoder is an error naming both files and fields) and preloads what
// the PlacementPlan keeps resident. Stages borrow models through leases (RAII): a per-job component is loaded
// by its first lease and released when its last lease ends; a resident one stays loaded between jobs. The two
// DiT variants (transformer/, transformer_ref/) share one slot: leasing the other one releases the loaded one
// first (never two DiTs in memory). Loads are counted per component (a warm server leases its decoders again
// without reading them). Thread-safe; the store must outlive its leases.
#pragma once

#include "core/status.h"
#include "model/audio_vae/audio_vae.h"
#include "model/audio_vae/audio_vae_encoder.h"
#include "model/dit/dit_model.h"
#include "model/fasth3_contract.h"
#include "model/latent_spec.h"
#include "model/lora/lora_set.h"
#include "model/text/text_stack.h"
#include "model/video_vae/video_vae.h"
#include "model/video_vae/video_vae_encoder.h"
#include "runtime/checkpoint_defaults.h"
#include "runtime/device_session.h"
#include "runtime/placement.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h3::runtime {

class ModelStore;

// A component borrowed from the store for the lease's lifetime. Movable, not copyable.
template <typename T> class Lease {
public:
    Lease() = default;
    Lease(Lease&& o) noexcept : model_(std::move(o.model_)), store_(o.store_), component_(o.component_) {
        o.store_ = nullptr;
    }
    Lease& operator=(Lease&& o) noexcept {
        if (this != &o) {
            reset();
            model_ = std::move(o.model_);
            store_ = o.store_;
            component_ = o.component_;
            o.store_ = nullptr;
        }
        return *this;
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease() { reset(); }

    const T& operator*() const { return *model_; }
    const T* operator->() const { return model_.get(); }
    const T* get() const { return model_.get(); }
    explicit operator bool() const { return model_ != nullptr; }
    Component component() const { return component_; }
    // Ends the lease now (a per-job component is released when this was its last lease).
    void reset();

private:
    friend class ModelStore;
    Lease(std::shared_ptr<const T> model, ModelStore* store, Component c)
        : model_(std::move(model)), store_(store), component_(c) {}
    std::shared_ptr<const T> model_;
    ModelStore* store_ = nullptr;
    Component component_ = Component::kTransformer;
};

// The DiT arithmetic of a placement's precision (kDefault: bf16).
model::DitPrecision dit_precision(ComputePrecision p);
// The video decoder's precision as a placement's (kExact: kDefault) and back (kFp8, kBf16; others: kExact).
ComputePrecision placement_precision(model::VideoVaePrecision p);
model::VideoVaePrecision video_vae_precision(ComputePrecision p);
// The block dtype a video decoder placed so loads with (fp32 for a kFp32 placement, else
// model::video_vae_compute); a kFp8 decoder is then quantized (model::quantize_video_vae_fp8).
DType video_decoder_compute(const ComponentPlacement& p);

// What a request is checked against before anything loads: the configs' facts.
struct CheckpointInfo {
    std::string root;
    model::LatentSpec spec;
    std::optional<model::DitConfig> dit; // transformer/ (transformer_ref/ when it is the only DiT)
    std::array<bool, kComponentCount> present{};
    std::optional<double> video_shift, audio_shift; // scheduler configs
    std::string device;                             // "cpu", "cuda:0"
    std::string dtype;                              // the DiTs' arithmetic: "bf16", "fp32", "fp8" or "fp16"
    // FastH3: the root's fastvideo_inference.json (the student's trained rungs and attention; the job
    // builder's defaults for the tasks of the FL2VA DiT). nullopt: not a FastH3 checkpoint.
    std::optional<model::FastH3Contract> fasth3;
    // The root's h3_defaults.json (runtime/checkpoint_defaults.h): the request defaults the checkpoint
    // declares (its native size, frames, steps) and its captions' vocabulary. nullopt: none declared.
    std::optional<CheckpointDefaults> defaults;
    bool has(Component c) const { return present[static_cast<size_t>(c)]; }
};

// Makes components instead of reading their weights from the checkpoint (bench request: random weights at
// the width the checkpoint's configs give). Each function receives the folder the store would load from, the
// component's placement and the store's context; a function left empty loads from the checkpoint as usual.
// The store still reads every config, derives the LatentSpec, leases, counts and releases as it always does.
struct ComponentSupplier {
    template <typename T>
    using Make =
        std::function<Result<T>(const std::string& dir, const ComponentPlacement&, const ops::Context&)>;
    Make<std::unique_ptr<model::DitModel>> dit;           // transformer/ and transformer_ref/ (dir: the root)
    Make<std::unique_ptr<model::TextStack>> text_encoder; // dir: the root
    Make<model::VideoVae> video_decoder;
    Make<model::AudioVae> audio_decoder;
};

class ModelStore {
public:
    // `root`: a checkpoint root (either layout) or a bare transformer folder. A configs-only checkpoint opens
    // too (nothing loads until a lease); `supplier` makes the components it has a function for.
    static Result<std::unique_ptr<ModelStore>> open(const std::string& root, const PlacementPlan& plan,
                                                    ComponentSupplier supplier = {});
    ~ModelStore();
    ModelStore(const ModelStore&) = delete;
    ModelStore& operator=(const ModelStore&) = delete;

    const CheckpointInfo& info() const { return info_; }
    const model::LatentSpec& spec() const { return info_.spec; }
    const PlacementPlan& plan() const { return plan_; }
    const ops::Context& context() const { return session_->context(); }
    const DeviceSession& session() const { return *session_; }
    // Replaces the plan while no component is loaded or leased (a CLI job sizes its weight placement from the
    // built job before the first lease); the device stays; the new plan's resident components are preloaded.
    Status replan(const PlacementPlan& plan);
    // not_found naming every component of `needed` the checkpoint lacks.
    Status require(std::initializer_list<Component> needed) const;

    // Leases (the component is loaded first when it is not). Errors name the component and the checkpoint.
    Result<Lease<model::DitModel>> dit(Component variant); // kTransformer or kTransformerRef
    Result<Lease<model::TextStack>> text_encoder();
    Result<Lease<model::VisionModel>> vision_tower();
    Result<Lease<model::VideoVaeEncoder>> video_encoder();
    Result<Lease<model::VideoVae>> video_decoder();
    Result<Lease<model::AudioVaeEncoder>> audio_encoder();
    Result<Lease<model::AudioVae>> audio_decoder();

    bool loaded(Component c) const;
    uint64_t loads(Component c) const; // since open

    // LoRA, merged mode: the adapters folded into every DiT this store loads (once per load, before the
    // model is shared; generate --lora-mode merged). Only before a DiT is loaded; `names` label them (what
    // the jobs name: path and strength), merged_adapters() returns them for the jobs to be checked against.
    Status set_merged_adapters(std::vector<model::LoraUse> uses, std::vector<std::string> names);
    const std::vector<std::string>& merged_adapters() const { return merged_names_; }
    // component_name → loads, for every component the checkpoint has.
    std::map<std::string, uint64_t> load_counts() const;

private:
    template <typename T> friend class Lease;
    ModelStore() = default;
    struct Slot {
        std::shared_ptr<const void> model;
        int leases = 0;
        std::atomic<uint64_t> loads{0}; // read without the lock (a load holds it for long)
    };
    Result<std::shared_ptr<const void>> acquire(Component c); // loads when needed, counts the lease
    Status preload(); // the plan's resident components (of the DiT slot only the first variant)
    template <typename T> Result<Lease<T>> lease(Component c);
    Result<std::shared_ptr<const void>> load(Component c) const; // reads the component from disk
    void release(Component c);
    Slot& slot(Component c) { return slots_[static_cast<size_t>(c)]; }
    const Slot& slot(Component c) const { return slots_[static_cast<size_t>(c)]; }

    CheckpointInfo info_;
    PlacementPlan plan_;
    ComponentSupplier supplier_;
    std::unique_ptr<DeviceSession> session_;
    std::array<std::string, kComponentCount> dirs_; // where each present component loads from
    mutable std::mutex mu_;
    std::array<Slot, kComponentCount> slots_;
    std::vector<model::LoraUse> merged_; // LoRA merged into each DiT at load
    std::vector<std::string> merged_names_;
};

template <typename T> void Lease<T>::reset() {
    model_.reset();
    if (store_) store_->release(component_);
    store_ = nullptr;
}

} // namespace h3::runtime
