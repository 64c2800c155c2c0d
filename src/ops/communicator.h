// Collectives between the ranks of a device group (issue #17). One Communicator object per rank; every rank
// of the group calls the same collectives in the same order with the same shapes and dtypes. Two backends:
//   cpu   in-process (ops/cpu/cpu_communicator.cpp): one thread per rank sharing memory; host tensors. The
//         reduction order is fixed (rank 0 + rank 1 + ... in fp32, then one rounding), so every rank gets the
//         same bits and a run gives the same bits every time.
//   nccl  (ops/cuda/nccl_communicator.cpp): device tensors, the work queued on ctx's stream. Built where the
//         CUDA toolkit has NCCL (H3_WITH_NCCL); elsewhere make_nccl_* return kUnimplemented saying so.
// Failure: a collective that waits longer than the timeout fails, and so does every pending or later
// collective on every rank of the group (the group is aborted); abort(reason) does the same on purpose (a
// rank that failed tells its peers). Errors name the collective, the rank and the reason.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "ops/context.h"

#include <array>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace h3::ops {

struct CommOptions {
    // How long one collective may wait for the other ranks before the group is aborted.
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};
};

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    virtual const char* backend() const = 0; // "cpu", "tcp", "nccl"

    // The collectives check their arguments here (one set of rules for every backend: defined, contiguous,
    // dtypes, counts, root; then the backend's placement rule) and run the backend's do_* only on valid ones.
    // x ← Σ over ranks of x, in place (f32, bf16, f64; contiguous).
    Status all_reduce_sum(const Context& ctx, Tensor& x);
    // send and recv: contiguous, same dtype and element count, divisible by size() into equal chunks; chunk
    // i of send goes to rank i, recv's chunk j came from rank j. recv must not alias send.
    Status all_to_all(const Context& ctx, const Tensor& send, Tensor& recv);
    // recv = the ranks' send tensors in rank order (recv holds size() × send's elements).
    Status all_gather(const Context& ctx, const Tensor& send, Tensor& recv);
    // x on every rank ← x of rank `root`.
    Status broadcast(const Context& ctx, Tensor& x, int root);
    // Returns when every rank reached it (and, on a device, the queued collectives finished).
    Status barrier(const Context& ctx) { return do_barrier(ctx); }

    // Fails every pending and later collective of the group on every rank with `reason`.
    virtual void abort(const std::string& reason) = 0;
    virtual bool aborted() const = 0;

protected:
    // Where the backend needs a collective's tensors (and its context); `op` names the collective.
    virtual Status check_placement(const Context& ctx, const char* op, const Tensor& t) const = 0;
    // The backend's collectives, called with checked arguments.
    virtual Status do_all_reduce_sum(const Context& ctx, Tensor& x) = 0;
    virtual Status do_all_to_all(const Context& ctx, const Tensor& send, Tensor& recv) = 0;
    virtual Status do_all_gather(const Context& ctx, const Tensor& send, Tensor& recv) = 0;
    virtual Status do_broadcast(const Context& ctx, Tensor& x, int root) = 0;
    virtual Status do_barrier(const Context& ctx) = 0;
};

// ---- the in-process CPU backend
// A group of `size` ranks in this process; communicator(r) is rank r's handle (one thread per rank). Groups
// made by split share the root's abort: aborting any of them aborts them all.
class CpuCommGroup {
public:
    static std::shared_ptr<CpuCommGroup> create(int size, const CommOptions& options = {});
    virtual ~CpuCommGroup() = default;
    virtual int size() const = 0;
    virtual std::unique_ptr<Communicator> communicator(int rank) = 0;
    // A sub-group over `members` (ranks of this group, in the sub-group's rank order) sharing the abort.
    virtual std::shared_ptr<CpuCommGroup> subgroup(const std::vector<int>& members) = 0;
    virtual void abort(const std::string& reason) = 0;
};

// ---- processes over TCP (the launcher's convention, runtime/launcher.h): rank 0 listens on addr:port, the
// others connect (retrying until the timeout) and every collective goes through rank 0 (a star: peers send
// their buffers, rank 0 sums in rank order / routes, sends the results back), so the bits equal the
// in-process backend's. The same handshake hands rank 0's `blob` (the NCCL unique id) to every rank.
// A failed or closed connection fails the collective on every rank (rank 0 closes them all).
struct TcpRendezvous {
    std::string addr = "127.0.0.1";
    int port = 29500;
    int rank = 0, size = 1;
};
Result<std::unique_ptr<Communicator>> make_tcp_communicator(const TcpRendezvous& where,
                                                            const CommOptions& options = {},
                                                            std::array<char, 128>* blob = nullptr);
// Splits a TCP communicator (make_tcp_communicator's, or a split of one) by color, ordered by key (then by
// the parent's rank); every rank of `parent` calls it, in the same order (ncclCommSplit's contract). The
// sub-group's first member listens on an ephemeral port of the address its peers reach it by (the local end
// of its connection to the parent's rank 0), the parent's all_gather tells the others, and they connect:
// the sub-group's collectives are a star through that member, with the same arithmetic as the parent's.
Result<std::unique_ptr<Communicator>> split_tcp_communicator(Communicator& parent, int color, int key,
                                                             const CommOptions& options = {});

// ---- NCCL
bool nccl_available(); // built with NCCL
using NcclId = std::array<char, 128>;
// A fresh ncclUniqueId (rank 0 makes it; the others receive it over the bootstrap).
Result<NcclId> nccl_unique_id();
// Rank `rank` of `size` on CUDA device `device` (ncclCommInitRank; call concurrently from every rank).
// Sets NCCL_NVLS_ENABLE=0 first unless the environment already sets it.
Result<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclId& id, int rank, int size, int device,
                                                             const CommOptions& options = {});
// Splits `parent` (an NCCL communicator) by color, ordered by key (ncclCommSplit; every rank calls it).
Result<std::unique_ptr<Communicator>> split_nccl_communicator(Communicator& parent, int color, int key);

} // namespace h3::ops
