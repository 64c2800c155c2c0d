#include "runtime/device_group.h"

#include "core/cuda_api.h"
#include "ops/cancel.h"
#include "ops/provenance.h"
#include "runtime/device_session.h"

#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace h3::runtime {

namespace {

// Runs fn(r) for every rank on its own thread; collects the statuses (exceptions become errors). The rank
// threads take the caller's cancel flag (ops/cancel.h): a cancelled job stops on every rank; and its
// provenance record (ops/provenance.h): every rank's kernels are the job's.
std::vector<Status> on_rank_threads(int n, const std::function<Status(int)>& fn) {
    std::vector<Status> st(static_cast<size_t>(n));
    std::vector<std::thread> threads;
    threads.reserve(static_cast<size_t>(n));
    const std::atomic<bool>* cancel = ops::cancel_flag();
    ops::ProvenanceRecord* record = ops::provenance_record();
    for (int r = 0; r < n; ++r)
        threads.emplace_back([&, r, cancel, record] {
            const ops::CancelScope scope(cancel);
            const ops::ProvenanceScope provenance(record);
            try {
                st[static_cast<size_t>(r)] = fn(r);
            } catch (const std::exception& e) {
                st[static_cast<size_t>(r)] = internal_error(std::string("threw: ") + e.what());
            } catch (...) {
                st[static_cast<size_t>(r)] = internal_error("threw a non-standard exception");
            }
        });
    for (auto& t : threads) t.join();
    return st;
}

void wire_dit(DeviceGroup::Rank& r, const ParallelPlan& plan) {
    // Forced paths (bench dit --sp 1 / --ring 1): size-1 communicators wired all the same.
    const bool ring = plan.ring > 1 || plan.force_ring_path;
    const bool ulysses_path = plan.sp > 1 || plan.force_sequence_path;
    ops::Communicator* ulysses = ring ? r.sp.get() : r.seq.get();
    r.dit.seq = plan.sp * plan.ring > 1 || ulysses_path || ring ? r.seq.get() : nullptr;
    r.dit.sp = ulysses_path ? ulysses : nullptr;
    r.dit.ring = ring ? r.ring.get() : nullptr;
    r.dit.tp = plan.tp > 1 ? r.tp.get() : nullptr;
    r.dit.overlap_groups = plan.overlap_groups;
}

void place(DeviceGroup::Rank& r, int rank, const ParallelPlan& plan) {
    r.rank = rank;
    r.tp_rank = rank % plan.tp;
    r.seq_rank = rank / plan.tp;
    r.sp_rank = r.seq_rank % plan.sp;
    r.ring_rank = r.seq_rank / plan.sp;
}

// The sub-groups of rank r split from its world (every rank calls each split, in this order): NCCL's
// ncclCommSplit, or the TCP communicator's split (launched CPU ranks).
using SplitFn = std::function<Result<std::unique_ptr<ops::Communicator>>(ops::Communicator&, int, int)>;
Status split_groups(DeviceGroup::Rank& r, const ParallelPlan& plan, const SplitFn& split) {
    H3_ASSIGN_OR_RETURN(r.seq, split(*r.world, r.tp_rank, r.seq_rank));
    H3_ASSIGN_OR_RETURN(r.tp, split(*r.world, r.seq_rank, r.tp_rank));
    if (plan.ring > 1 || plan.force_ring_path) {
        H3_ASSIGN_OR_RETURN(r.sp, split(*r.world, r.ring_rank * plan.tp + r.tp_rank, r.sp_rank));
        H3_ASSIGN_OR_RETURN(r.ring, split(*r.world, r.sp_rank * plan.tp + r.tp_rank, r.ring_rank));
    }
    return ok_status();
}

Result<std::unique_ptr<ops::Communicator>> split_nccl(ops::Communicator& parent, int color, int key) {
    return ops::split_nccl_communicator(parent, color, key);
}

} // namespace

DeviceGroup::~DeviceGroup() = default;

Result<std::unique_ptr<DeviceGroup>> DeviceGroup::create(const ParallelPlan& plan, const ops::Context& ctx,
                                                         const ops::CommOptions& options) {
    H3_TRY(plan.validate(ctx.device));
    std::unique_ptr<DeviceGroup> g(new DeviceGroup());
    g->plan_ = plan;
    const int n = plan.world(), tp = plan.tp, sp = plan.sp, ring = plan.ring, seq = sp * ring;
    if (plan.process.active()) return create_launched(std::move(g), ctx, options);
    for (int r = 0; r < n; ++r) {
        auto rank = std::make_unique<Rank>();
        place(*rank, r, plan);
        rank->local = r;
        rank->ctx = ctx;
        g->ranks_.push_back(std::move(rank));
    }
    if (ctx.device.is_cpu()) {
        auto world = ops::CpuCommGroup::create(n, options);
        auto rank_of = [&](int g_ring, int s, int t) { return (g_ring * sp + s) * tp + t; };
        // seq: the ranks of tp_rank t in seq order; tp: the ranks of seq_rank q in tp order; Ulysses: the
        // ranks of (ring_rank, tp_rank) in sp order; ring: the ranks of (sp_rank, tp_rank) in ring order.
        std::vector<std::shared_ptr<ops::CpuCommGroup>> seq_groups, tp_groups, sp_groups, ring_groups;
        for (int t = 0; t < tp; ++t) {
            std::vector<int> members;
            for (int q = 0; q < seq; ++q) members.push_back(q * tp + t);
            seq_groups.push_back(world->subgroup(members));
        }
        for (int q = 0; q < seq; ++q) {
            std::vector<int> members;
            for (int t = 0; t < tp; ++t) members.push_back(q * tp + t);
            tp_groups.push_back(world->subgroup(members));
        }
        const bool rings = ring > 1 || plan.force_ring_path;
        if (rings) {
            for (int gr = 0; gr < ring; ++gr)
                for (int t = 0; t < tp; ++t) {
                    std::vector<int> members;
                    for (int s = 0; s < sp; ++s) members.push_back(rank_of(gr, s, t));
                    sp_groups.push_back(world->subgroup(members));
                }
            for (int s = 0; s < sp; ++s)
                for (int t = 0; t < tp; ++t) {
                    std::vector<int> members;
                    for (int gr = 0; gr < ring; ++gr) members.push_back(rank_of(gr, s, t));
                    ring_groups.push_back(world->subgroup(members));
                }
        }
        for (auto& r : g->ranks_) {
            r->world = world->communicator(r->rank);
            r->seq = seq_groups[static_cast<size_t>(r->tp_rank)]->communicator(r->seq_rank);
            r->tp = tp_groups[static_cast<size_t>(r->seq_rank)]->communicator(r->tp_rank);
            if (rings) {
                r->sp =
                    sp_groups[static_cast<size_t>(r->ring_rank * tp + r->tp_rank)]->communicator(r->sp_rank);
                r->ring = ring_groups[static_cast<size_t>(r->sp_rank * tp + r->tp_rank)]->communicator(
                    r->ring_rank);
            }
            wire_dit(*r, plan);
        }
        return g;
    }
    // CUDA: one session and one NCCL rank per GPU of the plan.
    if (!ops::nccl_available()) return ops::nccl_unique_id().status().with_context("sp/tp on CUDA");
    for (int r = 0; r < n; ++r) {
        // A one-rank group without --gpus (bench dit --sp 1) runs on the components' device.
        const int gpu = plan.gpus.empty() ? ctx.device.index : plan.gpus[static_cast<size_t>(r)];
        H3_ASSIGN_OR_RETURN(auto s, DeviceSession::open(Device::cuda(gpu)));
        g->ranks_[static_cast<size_t>(r)]->ctx = s->context();
        g->sessions_.push_back(std::move(s));
    }
    H3_ASSIGN_OR_RETURN(ops::NcclId id, ops::nccl_unique_id());
    const auto st = on_rank_threads(n, [&](int r) -> Status {
        Rank& rk = *g->ranks_[static_cast<size_t>(r)];
        H3_TRY(g->sessions_[static_cast<size_t>(r)]->make_current());
        H3_ASSIGN_OR_RETURN(rk.world, ops::make_nccl_communicator(id, r, n, rk.ctx.device.index, options));
        return split_groups(rk, plan, split_nccl);
    });
    for (int r = 0; r < n; ++r)
        if (!st[static_cast<size_t>(r)].ok())
            return st[static_cast<size_t>(r)].with_context("NCCL setup of rank " + std::to_string(r));
    for (auto& r : g->ranks_) wire_dit(*r, plan);
    return g;
}

Result<std::unique_ptr<DeviceGroup>> DeviceGroup::create_launched(std::unique_ptr<DeviceGroup> g,
                                                                  const ops::Context& ctx,
                                                                  const ops::CommOptions& options) {
    const ParallelPlan& plan = g->plan_;
    const ProcessRank& p = plan.process;
    auto rank = std::make_unique<Rank>();
    place(*rank, p.rank, plan);
    rank->ctx = ctx;
    const ops::TcpRendezvous where{
        .addr = p.master_addr, .port = p.master_port, .rank = p.rank, .size = p.world};
    if (ctx.device.is_cpu()) { // the TCP star, split into the groups as NCCL's would be
        H3_ASSIGN_OR_RETURN(rank->world, ops::make_tcp_communicator(where, options));
        H3_TRY(split_groups(*rank, plan, [&](ops::Communicator& parent, int color, int key) {
            return ops::split_tcp_communicator(parent, color, key, options);
        }));
        wire_dit(*rank, plan);
    } else {
        if (!ops::nccl_available())
            return ops::nccl_unique_id().status().with_context("RANK/WORLD_SIZE on CUDA");
        ops::NcclId id{};
        if (p.rank == 0) {
            H3_ASSIGN_OR_RETURN(id, ops::nccl_unique_id());
        }
        { // the bootstrap hands rank 0's id to every rank; then it is closed
            H3_ASSIGN_OR_RETURN(auto boot, ops::make_tcp_communicator(where, options, &id));
        }
        H3_ASSIGN_OR_RETURN(rank->world,
                            ops::make_nccl_communicator(id, p.rank, p.world, ctx.device.index, options));
        H3_TRY(split_groups(*rank, plan, split_nccl));
        wire_dit(*rank, plan);
    }
    g->ranks_.push_back(std::move(rank));
    return g;
}

void DeviceGroup::abort(const std::string& reason) {
    for (auto& r : ranks_)
        for (ops::Communicator* c : {r->world.get(), r->seq.get(), r->sp.get(), r->ring.get(), r->tp.get()})
            if (c) c->abort(reason);
}

Status DeviceGroup::run_spmd(const std::function<Status(Rank&)>& fn) {
    std::mutex m;
    int first = -1; // the first rank that failed: its status is the job's
    const auto st = on_rank_threads(size(), [&](int r) -> Status {
        Rank& rk = *ranks_[static_cast<size_t>(r)];
        if (!sessions_.empty()) {
            H3_TRY(sessions_[static_cast<size_t>(r)]->make_current());
        } else if (rk.ctx.device.is_cuda()) { // a launched rank: this process's one device
            H3_TRY(cuda::set_device(rk.ctx.device.index));
        }
        Status s = ok_status();
        try {
            s = fn(rk);
        } catch (const std::exception& e) {
            s = internal_error(std::string("threw: ") + e.what());
        } catch (...) {
            s = internal_error("threw a non-standard exception");
        }
        if (!s.ok()) {
            bool mine = false;
            {
                std::lock_guard<std::mutex> lk(m);
                if (first < 0) first = r, mine = true;
            }
            if (mine) abort("rank " + std::to_string(r) + " failed: " + s.message());
        }
        return s;
    });
    if (first < 0) return ok_status();
    const Status& s = st[static_cast<size_t>(first)];
    return Status(s.code(),
                  "rank " + std::to_string(first) + " of " + std::to_string(size()) + ": " + s.message());
}

} // namespace h3::runtime
