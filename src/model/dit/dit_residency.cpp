// The DiT's block weight source: the six projection matrices of every block taken out of DitWeights into
// host masters (int8-quantized, or from the int8 cache), then placed by a LayerWeightSource.
#include "model/dit/dit_model.h"
#include "model/weights/int8_cache.h"

#include "core/log.h"

#include <array>
#include <optional>

namespace h3::model {

namespace {

// The six streamed matrices of a block, in dit_streamed_names order.
std::array<Tensor*, 6> streamed_fields(DitBlockWeights& b) {
    return {&b.to_q, &b.to_k, &b.to_v, &b.to_out, &b.ff_in, &b.ff_out};
}

// A host tensor for a master: host tensors as they are (mmap views stay views), device ones copied down.
Result<Tensor> to_host(const Tensor& t, bool pinned) {
    if (t.device().is_cpu()) return t;
    H3_ASSIGN_OR_RETURN(Tensor h, host_buffer(t.shape(), t.dtype(), pinned));
    H3_TRY(h.copy_from(t));
    return h;
}

} // namespace

Result<std::unique_ptr<LayerWeightSource>> make_dit_block_source(DitWeights& w, DitPrecision precision,
                                                                 const ResidencyOptions& o,
                                                                 const ops::Context& ctx,
                                                                 const std::string& identity) {
    const int L = static_cast<int>(w.blocks.size());
    const DType compute = precision_dtype(precision);
    const bool pinned = o.pin_host && ctx.device.is_cuda();
    const bool int8 = o.format == WeightFormat::kInt8;
    std::vector<std::vector<std::string>> names(static_cast<size_t>(L));
    std::vector<std::vector<WeightMaster>> masters(static_cast<size_t>(L));
    std::vector<Shape> shapes;
    for (int b = 0; b < L; ++b) {
        names[static_cast<size_t>(b)] = dit_streamed_names(b);
        for (Tensor* f : streamed_fields(w.blocks[static_cast<size_t>(b)])) {
            if (!f->defined())
                return invalid_argument("DiT block " + std::to_string(b) +
                                        " lacks a projection matrix to place");
            if (b == 0) shapes.push_back(f->shape());
            // int8 quantizes from the host tensor; the unquantized copy is dropped right after.
            H3_ASSIGN_OR_RETURN(Tensor h, to_host(*f, pinned && !int8));
            masters[static_cast<size_t>(b)].push_back({std::move(h), Tensor()});
            *f = Tensor(); // the block keeps its norms only
        }
    }
    if (int8) {
        const std::string path = o.int8_cache_dir.empty() || identity.empty()
                                     ? std::string()
                                     : int8_cache_path(o.int8_cache_dir, identity, "transformer");
        std::optional<std::vector<std::vector<WeightMaster>>> cached;
        if (!path.empty()) {
            H3_ASSIGN_OR_RETURN(cached, read_int8_cache(path, identity, names, shapes));
        }
        if (cached) {
            masters = std::move(*cached);
            H3_LOG_INFO("DiT int8 weights from {}", path);
        } else {
            for (auto& layer : masters)
                for (WeightMaster& m : layer) {
                    H3_ASSIGN_OR_RETURN(m, quantize_int8(m.data, pinned && path.empty()));
                }
            if (!path.empty()) {
                H3_TRY(write_int8_cache(path, identity, names, masters));
                // Stream from the file's mapping from now on: one copy in the page cache for every process.
                H3_ASSIGN_OR_RETURN(cached, read_int8_cache(path, identity, names, shapes));
                if (!cached)
                    return internal_error("the int8 cache " + path + " just written does not read back");
                masters = std::move(*cached);
                H3_LOG_INFO("DiT int8 weights quantized and cached in {}", path);
            }
        }
    }
    // AdaLN masters left on the host (layerwise) lie in the same mappings as the projection masters.
    std::vector<Tensor> adaln_host;
    for (const DitBlockWeights& b : w.blocks)
        for (const Tensor* t : {&b.adaln_weight, &b.adaln_bias})
            if (t->defined() && t->device().is_cpu()) adaln_host.push_back(*t);
    return LayerWeightSource::create(
        std::move(masters),
        {.options = o, .compute = compute, .what = "DiT blocks", .pin_also = std::move(adaln_host)}, ctx);
}

} // namespace h3::model
