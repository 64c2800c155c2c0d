// The streamed weights of a stack of identical layers and how they reach the device. Resident layers keep
// device copies; streamed layers keep host masters and are uploaded into a ring of prefetch_depth + 1 device
// slots on a copy stream of their own, ordered against the ops' stream with events (no device-wide sync):
// while layer l computes, the next prefetch_depth streamed layers (in pass order, wrapping to the first
// streamed layer of the next pass) are uploaded. A caller that jumps (a step cache skipping blocks) simply
// acquires the layer it jumps to: prefetched layers outside the new window are released unused and the
// destination is uploaded then (the only upload the compute stream waits for without overlap). int8 layers
// are dequantized on the ops' stream into one staging set in the compute dtype before their GEMMs.
//
// On the CPU the "device" slots are host buffers, uploads are memcpy and events are no-ops, so a layerwise
// run reads exactly the bytes a resident run reads.
//
// One user at a time (the engine's worker): acquire a layer, queue the work that reads it, release it.
#pragma once

#include "core/device_stream.h"
#include "core/host_pin.h"
#include "model/weights/residency.h"
#include "model/weights/weight_master.h"
#include "ops/context.h"

#include <memory>
#include <string>
#include <vector>

namespace h3::model {

class LayerWeightSource {
public:
    struct Params {
        ResidencyOptions options;
        DType compute = DType::kBF16; // what the GEMMs read (the int8 dequantization target)
        std::string what = "layers";  // for messages: "DiT blocks", "text layers"
        // Host tensors outside the layers that stay on the host in the same file mappings (the DiT's AdaLN
        // masters under layerwise): their mapped pages join the masters' registration. A page range can be
        // registered once, and the masters' page rounding may take the first or last page of a neighbour; a
        // copy from a tensor that begins inside a registered range and runs past it is refused by CUDA
        // (invalid argument), so every host tensor read later must lie wholly inside one registered range
        // or wholly outside all of them.
        std::vector<Tensor> pin_also;
    };
    // `layers[l][i]`: host master i of layer l; every layer has the same tensors (count, shapes, dtypes).
    // Native masters must be in the compute dtype; int8 masters carry their scales. Resident layers are
    // copied to the device here; host masters of streamed layers are page-locked when options.pin_host and
    // the device is CUDA: read-only mmap views registered in place (a failure is logged and they stay
    // pageable), owned copies moved into page-locked memory.
    static Result<std::unique_ptr<LayerWeightSource>> create(std::vector<std::vector<WeightMaster>> layers,
                                                             const Params& params, const ops::Context& ctx);
    ~LayerWeightSource();
    LayerWeightSource(const LayerWeightSource&) = delete;
    LayerWeightSource& operator=(const LayerWeightSource&) = delete;

    int layers() const { return static_cast<int>(masters_.size()); }
    bool streamed(int layer) const { return layer >= first_streamed_; }
    const ResidencyOptions& options() const { return params_.options; }
    const Params& params() const { return params_; }
    int tensors_per_layer() const { return tensors_; }
    // Tensor i of `layer` as stored (the compute dtype, or i8 with its f32 row scales) on the host: a
    // streamed layer's master itself (shared, read-only), a host copy of a resident layer's device tensors.
    // Tensor parallel slices these (model/dit/dit_model_parallel.cpp).
    Result<WeightMaster> host_master(int layer, int i) const;

    // The device tensors (compute dtype) of `layer`, valid for work queued on the ops' stream until
    // release(layer). One layer at a time.
    Result<const std::vector<Tensor>*> acquire(int layer);
    // The work reading `layer` is queued: its slot may be refilled once that work has run.
    Status release(int layer);
    // The pass ended (after any layer, or none): prefetched layers the next pass does not start with are
    // released and the next pass's first layers are prefetched.
    Status end_pass();

    const ResidencyStats& stats() const { return stats_; }
    void reset_counters(); // the traffic counters; the byte sizes stay
    int slots() const { return static_cast<int>(slots_.size()); }
    int slots_holding() const;            // slots holding an uploaded (or uploading) layer
    int slots_in_use() const;             // acquired and not released (0 between passes)
    std::vector<int> slot_layers() const; // layer per slot, −1 for an empty one (tests)

private:
    struct Slot {
        std::vector<Tensor> data, scale; // stored dtype (compute or i8), scales for int8
        DeviceEvent uploaded, consumed;
        int layer = -1;
        bool in_use = false, used = false;
    };
    LayerWeightSource() = default;
    int next_streamed(int layer) const;
    std::vector<int> window(int from, int count) const;
    int slot_of(int layer) const;
    Status upload(Slot& s, int layer);
    Status top_up(const std::vector<int>& want);
    Result<const std::vector<Tensor>*> ready(const std::vector<Tensor>& data,
                                             const std::vector<Tensor>& scale);

    Params params_;
    ops::Context ctx_;
    std::vector<std::vector<WeightMaster>> masters_;
    std::unique_ptr<HostPinning> pinning_; // destroyed before the masters it locks
    std::vector<std::vector<Tensor>> resident_, resident_scale_;
    std::vector<Slot> slots_;
    std::vector<Tensor> staging_; // int8: the dequantized layer
    DeviceStream copy_;           // declared last: destroyed first, waiting for queued uploads
    int first_streamed_ = 0;
    int tensors_ = 0; // per layer
    int current_ = -1;
    ResidencyStats stats_;
};

} // namespace h3::model
