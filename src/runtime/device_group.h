// runtime::DeviceGroup: the ranks that run one job's denoise loop together (issue #17). Ranks are threads of
// this process (rank = seq_rank·tp + tp_rank, seq_rank = ring_rank·sp + sp_rank), each with its op context
// and its communicators: the world, its sequence group (the sp·ring ranks of its tp_rank), its Ulysses group
// (the sp ranks of its ring_rank and tp_rank), its ring group (the ring ranks of its sp_rank and tp_rank)
// and its tensor-parallel group (the tp ranks of its seq_rank). With ring 1 the Ulysses group is the
// sequence group (sp stays null: model::DitParallel points at seq for both).
//   CPU: every rank on the CPU, the in-process communicator (tests run 2, 4, 8 ranks on this machine).
//   CUDA (--gpus): one GPU per rank, NCCL (the unique id made here; ncclCommInitRank on every rank's thread,
//   then ncclCommSplit for the groups). Threads, not child processes: the ranks share the host copies of
//   the weights, the job's conditioning and the model store, and a failure is one process's to clean up.
//   Other hosts join through the launcher convention (runtime/launcher.h).
// run_spmd(fn) runs fn once per rank. The first rank that fails (an error Status or an exception) aborts the
// group: every other rank's pending or next collective fails at once, and a rank that never reaches its
// collective is caught by the communicators' timeout. run_spmd returns the first failure, naming its rank.
#pragma once

#include "core/status.h"
#include "model/dit/dit_parallel.h"
#include "ops/communicator.h"
#include "ops/context.h"
#include "runtime/placement.h"

#include <functional>
#include <memory>
#include <vector>

namespace h3::runtime {

class DeviceSession;

class DeviceGroup {
public:
    struct Rank {
        int rank = 0, sp_rank = 0, ring_rank = 0, tp_rank = 0; // in the whole group
        int seq_rank = 0;                                      // ring_rank·sp + sp_rank
        int local = 0;                                         // index among this process's ranks
        ops::Context ctx;
        std::unique_ptr<ops::Communicator> world, seq, sp, ring, tp; // sp, ring: only with ring > 1
        model::DitParallel dit; // points at the communicators above (null for a group of one)
    };

    // `ctx`: the components' device (CPU: every rank on it; CUDA: the plan's gpus).
    static Result<std::unique_ptr<DeviceGroup>> create(const ParallelPlan& plan, const ops::Context& ctx,
                                                       const ops::CommOptions& options = {});
    ~DeviceGroup();

    const ParallelPlan& plan() const { return plan_; }
    int size() const { return static_cast<int>(ranks_.size()); } // this process's ranks
    Rank& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }

    Status run_spmd(const std::function<Status(Rank&)>& fn);
    // Aborts every communicator of the group (a job's owner gives up on it).
    void abort(const std::string& reason);

private:
    DeviceGroup() = default;
    // One rank in this process, its peers in the others (RANK / WORLD_SIZE).
    static Result<std::unique_ptr<DeviceGroup>>
    create_launched(std::unique_ptr<DeviceGroup> g, const ops::Context& ctx, const ops::CommOptions& options);
    ParallelPlan plan_;
    std::vector<std::unique_ptr<DeviceSession>> sessions_; // CUDA: one per rank
    std::vector<std::unique_ptr<Rank>> ranks_;
};

} // namespace h3::runtime
