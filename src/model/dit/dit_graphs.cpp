// The DiT's recorded blocks (dit_graphs.h): when a forward may use them, and one block's run through its
// recording.
#include "core/log.h"
#include "core/one_time_work.h"
#include "model/dit/dit_model.h"
#include "ops/provenance.h"

#include <atomic>
#include <chrono>

namespace h3::model {

namespace {
const void* ptr(const Tensor& t) {
    return t.defined() ? t.data() : nullptr;
}
} // namespace

bool DitModel::block_graphs_apply(const DitForwardOptions& o, bool own_workspace, bool group) const {
    return *block_graphs_off(o, own_workspace, group) == '\0';
}

const char* DitModel::block_graphs_off(const DitForwardOptions& o, bool own_workspace, bool group) const {
    if (!ops::graphs_available(ctx_)) return ctx_.is_cuda() ? "graphs unavailable" : "cpu";
    if (!o.block_graphs) return "disabled";
    if (!own_workspace) return "fresh workspace";
    if (group) return "device group";
    if (blocks_) return "streamed weights";
    if (o.timer) return "phase timer";
    if (o.hook.wants) return "hooks";
    if (o.attention.is_vsa()) return "vsa";
    return "";
}

Status DitModel::run_block_recorded(int index, Tensor& h, const Tensor& table, const RowTables& rows,
                                    const DitForwardOptions& o, DitWorkspace& ws) const {
    DitBlockGraphs& g = ws.graphs;
    if (g.blocks.size() != weights_.blocks.size()) g.blocks.resize(weights_.blocks.size());
    DitBlockGraphs::Slot& slot = g.blocks[static_cast<size_t>(index)];
    const DitBlockGraphKey key{.table = ptr(table),
                               .lora = o.lora,
                               .h = ptr(h),
                               .cos = ptr(rows.cos),
                               .adaln_row = ptr(rows.adaln_row),
                               .rows = h.dim(0),
                               .epoch = ops::graph_epoch(ctx_)};
    if (!(slot.key == key)) {
        slot = DitBlockGraphs::Slot{};
        slot.key = key;
    }
    auto run = [&] { return run_block(index, h, table, rows, o, ws.scratch); };
    if (slot.graph.defined()) {
        ops::note_impl(ops::OpFamily::kBlockGraphs, "replay");
        H3_TRY(slot.graph.launch(ctx_));
        ++g.launched;
        return ok_status();
    }
    // The first run under a key is unrecorded: it times new GEMM shapes, builds attention plans and grows the
    // scratch, none of which a recording may do.
    if (slot.failed || slot.unrecorded_runs == 0) {
        ++slot.unrecorded_runs;
        ops::note_impl(ops::OpFamily::kBlockGraphs, "host-launch (first run)");
        return run();
    }
    const auto t_record = std::chrono::steady_clock::now();
    auto rec = ops::StreamGraph::record(ctx_, run);
    note_one_time({.graph_recordings = 1,
                   .graph_recording_seconds =
                       std::chrono::duration<double>(std::chrono::steady_clock::now() - t_record).count()});
    if (!rec.ok()) { // this block runs unrecorded under this key from now on; the forward goes on
        slot.failed = true;
        ++g.failed;
        g.last_error = rec.status().message();
        ops::note_fallback(ops::OpFamily::kBlockGraphs, "replay", "host-launch",
                           "DiT block " + std::to_string(index) +
                               "'s ops could not be recorded as a CUDA graph (" + g.last_error +
                               "); it runs unrecorded");
        return run();
    }
    if (ops::graph_epoch(ctx_) != key.epoch) { // the recording saw the scratch replaced: record again later
        slot = DitBlockGraphs::Slot{};
        slot.key = key;
        slot.unrecorded_runs = 1;
        return run();
    }
    slot.graph = std::move(*rec);
    ops::note_impl(ops::OpFamily::kBlockGraphs, "record");
    ++g.recorded;
    g.nodes += slot.graph.nodes();
    H3_TRY(slot.graph.launch(ctx_));
    ++g.launched;
    return ok_status();
}

} // namespace h3::model
