// Recorded blocks (ops/graph.h) for the DiT's block loop on CUDA: each block's ops are recorded once per
// request workspace and then replayed with one launch per block, so a small-shape step no longer pays the
// host work of ~20 ops × 50 blocks. A block is recorded at its second run over a workspace (the first, run
// normally, times the GEMMs, builds the attention plans and sizes the scratch) and recorded again when
// anything it was recorded over changes (the AdaLN table, the adapters, the row tables, the ops' scratch).
// Forwards that need the host inside a block — streamed or int8 weights (the block source), a device
// group, VSA (its per-step sparsity), a phase timer, intermediate hooks — run normally; so does every
// forward when H3_CUDA_GRAPHS=0 or DitForwardOptions::block_graphs is off.
#pragma once

#include "ops/graph.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h3::model {

// What a block's recording was made over: any change means it must be recorded again.
struct DitBlockGraphKey {
    const void* table = nullptr; // the block's AdaLN table rows
    const void* lora = nullptr;  // the run-time adapters (LoraSet)
    const void* h = nullptr;     // the residual stream
    const void* cos = nullptr;   // RoPE tables
    const void* adaln_row = nullptr;
    int64_t rows = 0;
    uint64_t epoch = 0; // ops::graph_epoch
    bool operator==(const DitBlockGraphKey&) const = default;
};

struct DitBlockGraphs {
    struct Slot {
        DitBlockGraphKey key;
        int unrecorded_runs = 0; // runs under this key before its recording
        bool failed = false;     // recording under this key failed: the block runs normally
        ops::StreamGraph graph;
    };
    std::vector<Slot> blocks; // one per DiT block
    // Counters over the workspace's life (tests and benches read them).
    uint64_t recorded = 0, launched = 0, failed = 0;
    size_t nodes = 0;       // operations in the recordings made so far (summed)
    std::string last_error; // why the last recording failed ("" when none did)
};

} // namespace h3::model
