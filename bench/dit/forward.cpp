#include "bench/dit/forward.h"

#include "core/cuda_api.h"

#include <chrono>

namespace h3::bench {

namespace {

ForwardRun forward_run(const char* name, bool reuse, bool on_device) {
    ForwardRun r;
    r.name = name, r.reuse = reuse, r.on_device = on_device;
    return r;
}

} // namespace

Result<std::vector<ForwardRun>> time_forwards(DitBench& b, const model::DitForwardOptions& fo, int iters,
                                              bool block_graphs) {
    using Clock = std::chrono::steady_clock;
    model::DitModel& dit = *b.dit;
    std::vector<ForwardRun> forwards = {forward_run("fresh_workspace_host_outputs", false, false),
                                        forward_run("workspace_host_outputs", true, false),
                                        forward_run("workspace_device_outputs", true, true)};
    if (block_graphs) {
        forwards.back().timed = iters;
        forwards.push_back(forward_run("workspace_device_outputs_recorded", true, true));
        forwards.back().recorded = true;
        forwards.back().timed = iters;
    }
    model::DitForwardOptions gfo = fo;
    gfo.parallel = b.group_dit(); // --sp 1: the group's code path on one rank
    H3_ASSIGN_OR_RETURN(model::DitRequestState state, dit.prepare_request(b.packed, gfo));
    for (ForwardRun& fr : forwards) {
        model::DitForwardOptions ffo = gfo;
        ffo.reuse_workspace = fr.reuse;
        ffo.outputs_on_device = fr.on_device;
        ffo.block_graphs = fr.recorded;
        // Warm-up: sizes the workspace, tunes, plans; recorded blocks are recorded at their second run.
        for (int w = 0; w < (fr.recorded ? 2 : 1); ++w) {
            H3_TRY(dit.forward(b.packed, &b.tables, ffo, &state).status());
            H3_TRY(b.session->synchronize());
        }
        const uint64_t a0 = device_memory_stats().allocations;
        const auto t0 = Clock::now();
        for (int i = 0; i < fr.timed; ++i) H3_TRY(dit.forward(b.packed, &b.tables, ffo, &state).status());
        H3_TRY(b.session->synchronize());
        fr.seconds = std::chrono::duration<double>(Clock::now() - t0).count() / fr.timed;
        fr.allocations = (device_memory_stats().allocations - a0) / static_cast<uint64_t>(fr.timed);
        if (fr.recorded && state.workspace) {
            const model::DitBlockGraphs& g = state.workspace->graphs;
            fr.recordings = g.recorded, fr.launches = g.launched, fr.failures = g.failed;
            fr.nodes = g.nodes, fr.record_error = g.last_error;
        }
    }
    return forwards;
}

const char* forward_path(const DitBench& b) {
    const model::DitParallel* g = b.group_dit();
    return !g ? "plain" : g->sp && g->ring ? "ulysses+ring" : g->ring ? "ring" : "ulysses";
}

} // namespace h3::bench
