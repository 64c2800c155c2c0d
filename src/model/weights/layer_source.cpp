#include "model/weights/layer_source.h"

#include "core/log.h"
#include "ops/quant.h"

#include <algorithm>

namespace h3::model {

namespace {

Result<std::vector<Tensor>> device_like(const std::vector<Tensor>& host, Device device) {
    std::vector<Tensor> out;
    for (const Tensor& t : host) {
        H3_ASSIGN_OR_RETURN(Tensor d, Tensor::empty(t.shape(), t.dtype(), device));
        out.push_back(std::move(d));
    }
    return out;
}

} // namespace

Result<std::unique_ptr<LayerWeightSource>>
LayerWeightSource::create(std::vector<std::vector<WeightMaster>> layers, const Params& params,
                          const ops::Context& ctx) {
    const ResidencyOptions& o = params.options;
    const int n = static_cast<int>(layers.size());
    if (n == 0) return invalid_argument(params.what + ": no layers to place");
    if (o.prefetch_depth < 1) return invalid_argument("prefetch depth must be at least 1");
    if (o.mode == Residency::kLayerwise && (o.resident_layers < 0 || o.resident_layers > n))
        return invalid_argument("resident layers " + std::to_string(o.resident_layers) + " outside [0, " +
                                std::to_string(n) + "] for " + params.what);
    const bool int8 = o.format == WeightFormat::kInt8;
    const std::vector<WeightMaster>& first = layers[0];
    for (int l = 0; l < n; ++l) {
        const auto& ml = layers[static_cast<size_t>(l)];
        if (ml.size() != first.size())
            return invalid_argument(params.what + ": layer " + std::to_string(l) + " has " +
                                    std::to_string(ml.size()) + " streamed tensors, layer 0 has " +
                                    std::to_string(first.size()));
        for (size_t i = 0; i < ml.size(); ++i) {
            const WeightMaster& m = ml[i];
            if (!m.data.defined() || !m.data.device().is_cpu() || !m.data.is_contiguous())
                return invalid_argument(params.what + ": master " + std::to_string(i) + " of layer " +
                                        std::to_string(l) + " must be a contiguous host tensor");
            if (!(m.data.shape() == first[i].data.shape()) || m.int8() != int8 ||
                (!int8 && m.data.dtype() != params.compute))
                return invalid_argument(params.what + ": master " + std::to_string(i) + " of layer " +
                                        std::to_string(l) + " is " + m.data.describe() + ", expected " +
                                        (int8 ? std::string("i8") : std::string(dtype_name(params.compute))) +
                                        first[i].data.shape().to_string());
            if (int8 && !(m.scale.defined() && m.scale.dtype() == DType::kF32 &&
                          m.scale.shape() == Shape{m.data.dim(0)}))
                return invalid_argument(params.what + ": int8 master " + std::to_string(i) + " of layer " +
                                        std::to_string(l) + " lacks its f32 row scales");
        }
    }
    std::unique_ptr<LayerWeightSource> s(new LayerWeightSource());
    s->params_ = params;
    s->ctx_ = ctx;
    s->first_streamed_ = o.mode == Residency::kResident ? n : o.resident_layers;
    s->tensors_ = static_cast<int>(first.size());
    s->masters_ = std::move(layers);
    const Device dev = ctx.device;
    // Resident layers: device copies in the stored dtype.
    s->resident_.resize(static_cast<size_t>(s->first_streamed_));
    s->resident_scale_.resize(static_cast<size_t>(s->first_streamed_));
    for (int l = 0; l < s->first_streamed_; ++l)
        for (const WeightMaster& m : s->masters_[static_cast<size_t>(l)]) {
            H3_ASSIGN_OR_RETURN(Tensor d, m.data.to(dev, ctx.stream()));
            s->stats_.device_resident_bytes += d.nbytes();
            s->resident_[static_cast<size_t>(l)].push_back(std::move(d));
            if (m.scale.defined()) {
                H3_ASSIGN_OR_RETURN(Tensor ds, m.scale.to(dev, ctx.stream()));
                s->stats_.device_resident_bytes += ds.nbytes();
                s->resident_scale_[static_cast<size_t>(l)].push_back(std::move(ds));
            }
        }
    // Host masters of streamed layers stay; resident layers' masters are dropped (their device copy is it).
    for (int l = 0; l < s->first_streamed_; ++l) s->masters_[static_cast<size_t>(l)].clear();
    const bool pin = dev.is_cuda() && o.pin_host;
    std::vector<HostPinning::Range> mapped;
    for (int l = s->first_streamed_; l < n; ++l)
        for (WeightMaster& m : s->masters_[static_cast<size_t>(l)])
            for (Tensor* t : {&m.data, &m.scale}) {
                if (!t->defined()) continue;
                if (pin && !t->read_only() && !t->storage()->pinned()) {
                    // An owned pageable master (a converted or split copy) moves into page-locked memory.
                    H3_ASSIGN_OR_RETURN(Tensor p, host_buffer(t->shape(), t->dtype(), true));
                    H3_TRY(p.copy_from(*t));
                    *t = std::move(p);
                }
                s->stats_.host_master_bytes += t->nbytes();
                if (t->read_only()) {
                    s->stats_.host_mapped_bytes += t->nbytes();
                    mapped.push_back({t->data(), t->nbytes()});
                }
                if (t->storage()->pinned()) s->stats_.host_pinned_bytes += t->nbytes();
            }
    for (const Tensor& t : params.pin_also)
        if (t.defined() && t.device().is_cpu() && t.read_only()) mapped.push_back({t.data(), t.nbytes()});
    if (pin && !mapped.empty()) {
        // Read-only mappings are registered read-only in place: their pages stay the page cache's, shared
        // with every process mapping the same files.
        auto pinned = HostPinning::pin(mapped, /*read_only=*/true);
        if (pinned.ok()) {
            s->stats_.host_pinned_bytes += (*pinned)->bytes();
            s->pinning_ = std::move(pinned).value();
        } else {
            H3_LOG_WARN("{}: page-locking the mapped host masters failed ({}); streaming them from pageable "
                        "memory",
                        params.what, pinned.status().message());
        }
    }
    if (s->first_streamed_ < n) {
        H3_ASSIGN_OR_RETURN(s->copy_, DeviceStream::create(dev));
        const int streamed = n - s->first_streamed_;
        const int ring = std::min(o.prefetch_depth + 1, streamed);
        std::vector<Tensor> shapes, scale_shapes;
        for (const WeightMaster& m : s->masters_[static_cast<size_t>(s->first_streamed_)]) {
            shapes.push_back(m.data);
            if (m.scale.defined()) scale_shapes.push_back(m.scale);
        }
        for (int r = 0; r < ring; ++r) {
            Slot slot;
            H3_ASSIGN_OR_RETURN(slot.data, device_like(shapes, dev));
            H3_ASSIGN_OR_RETURN(slot.scale, device_like(scale_shapes, dev));
            H3_ASSIGN_OR_RETURN(slot.uploaded, DeviceEvent::create(dev));
            H3_ASSIGN_OR_RETURN(slot.consumed, DeviceEvent::create(dev));
            for (const auto* v : {&slot.data, &slot.scale})
                for (const Tensor& t : *v) s->stats_.device_ring_bytes += t.nbytes();
            s->slots_.push_back(std::move(slot));
        }
    }
    if (int8) {
        const auto& shape_src =
            s->first_streamed_ > 0 ? s->resident_[0] : s->slots_[0].data; // any layer: all are alike
        for (const Tensor& t : shape_src) {
            H3_ASSIGN_OR_RETURN(Tensor st, Tensor::empty(t.shape(), params.compute, dev));
            s->stats_.device_staging_bytes += st.nbytes();
            s->staging_.push_back(std::move(st));
        }
    }
    return s;
}

LayerWeightSource::~LayerWeightSource() = default;

int LayerWeightSource::next_streamed(int layer) const {
    return layer + 1 < layers() ? layer + 1 : first_streamed_;
}

std::vector<int> LayerWeightSource::window(int from, int count) const {
    std::vector<int> w;
    int l = from;
    for (int i = 0; i < count; ++i) {
        if (std::find(w.begin(), w.end(), l) != w.end()) break; // fewer streamed layers than the window
        w.push_back(l);
        l = next_streamed(l);
    }
    return w;
}

int LayerWeightSource::slot_of(int layer) const {
    for (size_t i = 0; i < slots_.size(); ++i)
        if (slots_[i].layer == layer) return static_cast<int>(i);
    return -1;
}

Status LayerWeightSource::upload(Slot& s, int layer) {
    void* copy = copy_.handle();
    H3_TRY(s.consumed.make_wait(copy)); // the last work reading the slot's old layer has run
    const auto& ms = masters_[static_cast<size_t>(layer)];
    size_t si = 0;
    for (size_t i = 0; i < ms.size(); ++i) {
        H3_TRY(s.data[i].copy_from(ms[i].data, copy));
        stats_.h2d_bytes += ms[i].data.nbytes();
        if (ms[i].scale.defined()) {
            H3_TRY(s.scale[si++].copy_from(ms[i].scale, copy));
            stats_.h2d_bytes += ms[i].scale.nbytes();
        }
    }
    H3_TRY(s.uploaded.record(copy));
    s.layer = layer;
    s.used = false;
    ++stats_.uploads;
    return ok_status();
}

// Makes every layer of `want` held by a slot, evicting slots whose layer is not wanted and not in use.
Status LayerWeightSource::top_up(const std::vector<int>& want) {
    auto wanted = [&](int l) { return std::find(want.begin(), want.end(), l) != want.end(); };
    for (Slot& s : slots_)
        if (!s.in_use && s.layer >= 0 && !wanted(s.layer)) {
            if (!s.used) ++stats_.dropped_prefetches;
            s.layer = -1;
        }
    for (int l : want) {
        if (slot_of(l) >= 0) continue;
        auto free = std::find_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.layer < 0; });
        if (free == slots_.end()) break; // the ring is full of wanted layers
        H3_TRY(upload(*free, l));
    }
    return ok_status();
}

Result<const std::vector<Tensor>*> LayerWeightSource::ready(const std::vector<Tensor>& data,
                                                            const std::vector<Tensor>& scale) {
    if (staging_.empty()) return &data;
    for (size_t i = 0; i < data.size(); ++i)
        H3_TRY(ops::dequantize_rows(ctx_, data[i], scale[i], staging_[i]));
    ++stats_.dequantized;
    return &staging_;
}

Result<const std::vector<Tensor>*> LayerWeightSource::acquire(int layer) {
    H3_CHECK(layer >= 0 && layer < layers(), "layer " << layer << " outside [0, " << layers() << ")");
    H3_CHECK(current_ < 0,
             "layer " << current_ << " is still acquired; release it before acquiring " << layer);
    current_ = layer;
    if (!streamed(layer))
        return ready(resident_[static_cast<size_t>(layer)], resident_scale_[static_cast<size_t>(layer)]);
    const std::vector<int> want = window(layer, params_.options.prefetch_depth + 1);
    // Not prefetched: the caller jumped here; top_up uploads it first (the window starts with it), and the
    // ops' stream waits for that upload without overlap.
    if (slot_of(layer) < 0) ++stats_.sync_loads;
    H3_TRY(top_up(want));
    Slot& s = slots_[static_cast<size_t>(slot_of(layer))];
    H3_TRY(s.uploaded.make_wait(ctx_.stream()));
    s.in_use = true;
    s.used = true;
    auto out = ready(s.data, s.scale);
    if (out.ok() && !staging_.empty()) {
        // Dequantized into the staging set: the slot is free for the next upload once that has run.
        H3_TRY(s.consumed.record(ctx_.stream()));
        s.in_use = false;
    }
    return out;
}

Status LayerWeightSource::release(int layer) {
    H3_CHECK(current_ == layer, "release of layer " << layer << " but " << current_ << " is acquired");
    current_ = -1;
    if (!streamed(layer)) return ok_status();
    const int si = slot_of(layer);
    H3_CHECK(si >= 0, "released layer " << layer << " holds no slot");
    Slot& s = slots_[static_cast<size_t>(si)];
    if (s.in_use) {
        H3_TRY(s.consumed.record(ctx_.stream()));
        s.in_use = false;
    }
    // The slot of `layer` may take the layer after the window of the next one.
    return top_up(window(next_streamed(layer), params_.options.prefetch_depth + 1));
}

Status LayerWeightSource::end_pass() {
    H3_CHECK(current_ < 0, "end_pass with layer " << current_ << " still acquired");
    if (first_streamed_ >= layers()) return ok_status();
    return top_up(window(first_streamed_, params_.options.prefetch_depth + 1));
}

Result<WeightMaster> LayerWeightSource::host_master(int layer, int i) const {
    H3_CHECK(layer >= 0 && layer < layers() && i >= 0 && i < tensors_per_layer(),
             "tensor " << i << " of layer " << layer << " outside " << layers() << " layers × "
                       << tensors_per_layer());
    if (streamed(layer)) return masters_[static_cast<size_t>(layer)][static_cast<size_t>(i)];
    WeightMaster m;
    H3_ASSIGN_OR_RETURN(m.data, resident_[static_cast<size_t>(layer)][static_cast<size_t>(i)].to(
                                    Device::cpu(), ctx_.stream()));
    const auto& scales = resident_scale_[static_cast<size_t>(layer)];
    if (!scales.empty()) {
        H3_ASSIGN_OR_RETURN(m.scale, scales[static_cast<size_t>(i)].to(Device::cpu(), ctx_.stream()));
    }
    return m;
}

void LayerWeightSource::reset_counters() {
    stats_.h2d_bytes = 0;
    stats_.uploads = stats_.sync_loads = stats_.dropped_prefetches = stats_.dequantized = 0;
}

int LayerWeightSource::slots_holding() const {
    return static_cast<int>(
        std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.layer >= 0; }));
}

int LayerWeightSource::slots_in_use() const {
    return static_cast<int>(
        std::count_if(slots_.begin(), slots_.end(), [](const Slot& s) { return s.in_use; }));
}

std::vector<int> LayerWeightSource::slot_layers() const {
    std::vector<int> out;
    for (const Slot& s : slots_) out.push_back(s.layer);
    return out;
}

} // namespace h3::model
