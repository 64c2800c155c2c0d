// `bench dit`'s whole forwards over one request state (embeddings, the blocks, final norm and heads): the
// workspace reused (no device allocation per forward) against a fresh one per forward (what every forward
// paid before), device-resident outputs against host copies; with --block-graphs the device-output forward
// with every op launched from the host against the same forward replaying each block's recording
// (model/dit/dit_graphs.h), both the mean of --iters forwards. Through the one-rank group's code path with
// --sp/--ring 1.
#pragma once

#include "bench/dit/setup.h"

#include <string>
#include <vector>

namespace h3::bench {

struct ForwardRun {
    std::string name;
    bool reuse = false, on_device = false;
    bool recorded = false; // block recordings (the others launch every op from the host)
    int timed = 1;         // forwards timed (the mean is reported)
    double seconds = 0;
    uint64_t allocations = 0;
    uint64_t recordings = 0, launches = 0, failures = 0;
    size_t nodes = 0;
    std::string record_error;
};

Result<std::vector<ForwardRun>> time_forwards(DitBench& b, const model::DitForwardOptions& fo, int iters,
                                              bool block_graphs);

// The code path the forwards took: "plain", or the one-rank group's ("ulysses", "ring", "ulysses+ring").
const char* forward_path(const DitBench& b);

} // namespace h3::bench
