// Where the checkpoint's components live and for how long: a PlacementPlan holds one ComponentPlacement per
// component. ModelStore (runtime/model_store.h) follows it. The struct is the extension point: layer-wise
// residency, weight dtypes and a memory budget (issue #15), device groups and ranks (issue #17) become fields
// or enum values here without changing the callers that lease components.
#pragma once

#include "core/device.h"
#include "core/status.h"
#include "model/weights/residency.h"

#include <array>
#include <cstddef>
#include <string>
#include <vector>

namespace h3::runtime {

enum class Component {
    kTransformer,    // transformer/: the FL2VA DiT (t2va, fl2va)
    kTransformerRef, // transformer_ref/: the Ref2VA DiT (ref2va); shares one slot with kTransformer
    kTextEncoder,    // text_encoder/ + tokenizer/: the Qwen3-VL language stack
    kVisionTower,    // text_encoder/'s Qwen3-VL vision tower (keyframe and reference images, videos)
    kVideoEncoder,   // vae/ encoder (fl2va keyframes, ref2va images and videos)
    kVideoDecoder,   // vae/ decoder
    kAudioEncoder,   // audio_vae/ encoder (ref2va audio, soundtracks)
    kAudioDecoder,   // audio_vae/ decoder
};
inline constexpr size_t kComponentCount = 8;
inline constexpr std::array<Component, kComponentCount> kAllComponents = {
    Component::kTransformer,  Component::kTransformerRef, Component::kTextEncoder,  Component::kVisionTower,
    Component::kVideoEncoder, Component::kVideoDecoder,   Component::kAudioEncoder, Component::kAudioDecoder};
// "transformer", "transformer_ref", "text_encoder", "vision_tower", "vae_encoder", "vae_decoder",
// "audio_vae_encoder", "audio_vae_decoder" (the metrics' labels).
const char* component_name(Component c);

enum class Residency {
    kPerJob,   // loaded when a job first leases it, released when its last lease ends
    kResident, // loaded once (components of the plan that a store preloads: at open) and kept between jobs
};
const char* residency_name(Residency r); // "per_job", "resident"

// The arithmetic a component runs in: its default (bf16 DiT and text stack; f16 video decoder blocks on CUDA,
// fp32 on the CPU; fp32 encoders and audio decoder), fp32 throughout where the component has that mode, or
// (DiTs and the video decoder; opt-in, lossy) e4m3 block GEMMs — with e4m3 attention in the DiTs
// (model::DitPrecision::kFp8), bf16 in the decoder (model::VideoVaePrecision::kFp8) —, or fp16 for GPUs
// without bf16 (DiTs and text stack: fp16 weights and activations, fp32 residual stream; the vision tower
// then runs fp32), or bf16 blocks in the video decoder (model::VideoVaePrecision::kBf16; opt-in, lossy; the
// other components' default already is bf16 or they have no such mode).
enum class ComputePrecision { kDefault, kFp32, kFp8, kFp16, kBf16 };
const char* precision_name(ComputePrecision p); // "default", "fp32", "fp8", "fp16", "bf16"

struct ComponentPlacement {
    Residency residency = Residency::kPerJob;
    Device device = Device::cpu();
    ComputePrecision precision = ComputePrecision::kDefault;
    // Where a layered component's weights live (the DiTs' 50 blocks, the text stack's 50 layers; others
    // ignore it): resident, or layerwise with the first K layers resident; native or int8; pinned or
    // pageable host masters (model/weights/residency.h).
    model::ResidencyOptions weights{};
};

// This process's place among the processes of a launch (runtime/launcher.h: RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT as torchrun and Slurm wrappers set them). world 1: a single process.
struct ProcessRank {
    int rank = 0, world = 1, local_rank = 0;
    std::string master_addr = "127.0.0.1";
    int master_port = 29500;
    bool active() const { return world > 1; }
};

// The DiT's device group (issue #17, runtime/device_group.h): sp Ulysses × ring ring-attention (sequence
// parallel, sp inside, ring across) × tp tensor-parallel ranks that run every denoise step together. One rank
// (the default) is the plain path.
struct ParallelPlan {
    // Launched as one process per rank: this process is rank process.rank of sp·ring·tp; else every rank is
    // a thread of this process.
    ProcessRank process;
    int sp = 1, tp = 1, ring = 1;
    // The ranks' CUDA devices (--gpus 0,1,2,3), one per rank; empty: every rank on the components' device
    // (the CPU's in-process ranks).
    std::vector<int> gpus;
    // bench dit --sp 1 [--ring 1]: a group of one rank that still takes the Ulysses (and ring) code path —
    // size-1 communicators, all-to-alls, gathers — so its overhead over the plain path can be timed.
    bool force_sequence_path = false, force_ring_path = false;
    // The Ulysses head groups overlapped with their collectives (model::DitParallel::overlap_groups): 0
    // automatic, 1 none.
    int overlap_groups = 0;
    int world() const { return sp * ring * tp; }
    bool active() const { return world() > 1; }
    Status validate(const Device& device) const;
    std::string describe() const; // "sp 2 x tp 2 (4 ranks on cpu)", "sp 2 x ring 2 x tp 1 (...)", "" for one
};

struct PlacementPlan {
    std::array<ComponentPlacement, kComponentCount> components;
    ParallelPlan parallel; // the DiT's ranks (the other components run on rank 0's device)
    // The memory budget planner's text when it chose the weights and residencies (--gpu-memory-budget).
    std::string memory_plan;

    ComponentPlacement& operator[](Component c) { return components[static_cast<size_t>(c)]; }
    const ComponentPlacement& operator[](Component c) const { return components[static_cast<size_t>(c)]; }

    // Every component per job on `device`; `precision` for the DiTs and the conditioner (the decoders and
    // encoders keep their defaults, as `--dtype` always did; kFp8 is the DiTs' alone).
    static PlacementPlan per_job(Device device, ComputePrecision precision = ComputePrecision::kDefault);
    // A server's plan: the DiTs and the decoders resident (the DiTs share one slot: the other variant swaps
    // in when a job needs it), the encoders per job, the text stack and vision tower as `text_encoder` says.
    static PlacementPlan serving(Device device, ComputePrecision precision, Residency text_encoder);

    // One device for every component for now (several devices come with device groups, issue #17).
    Status validate() const;
    // "transformer resident cuda:0 default, ..." (+ " weights layerwise (K=8, ...)" where the weights stream)
    std::string describe() const;
};

} // namespace h3::runtime
