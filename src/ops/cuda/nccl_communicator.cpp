// The NCCL communicator (ops/communicator.h): device tensors, collectives queued on the context's stream.
// Timeouts: barrier() waits for the stream while polling ncclCommGetAsyncError; past the timeout (or on an
// asynchronous NCCL error) the communicator is aborted (ncclCommAbort), which also ends kernels that wait
// for a peer. abort() may be called from another thread (the device group's failure path).
#include "ops/communicator.h"

#if defined(H3_WITH_NCCL)

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

namespace h3::ops {

namespace {

Status nccl_status(ncclResult_t r, const char* what) {
    if (r == ncclSuccess) return ok_status();
    return internal_error(std::string("NCCL ") + what + ": " + ncclGetErrorString(r));
}

Status cuda_status(cudaError_t e, const char* what) {
    if (e == cudaSuccess) return ok_status();
    return internal_error(std::string("CUDA (communicator) ") + what + ": " + cudaGetErrorString(e));
}

Result<ncclDataType_t> nccl_dtype(DType d) {
    switch (d) {
    case DType::kF32:
        return ncclFloat32;
    case DType::kBF16:
        return ncclBfloat16;
    case DType::kF16:
        return ncclFloat16;
    case DType::kF64:
        return ncclFloat64;
    case DType::kI32:
        return ncclInt32;
    case DType::kI64:
        return ncclInt64;
    case DType::kU8:
    case DType::kBool:
    case DType::kF8E4M3:
        return ncclUint8;
    case DType::kI8:
        return ncclInt8;
    }
    return invalid_argument("NCCL: no data type for " + std::string(dtype_name(d)));
}

class NcclCommunicator final : public Communicator {
public:
    NcclCommunicator(ncclComm_t comm, int rank, int size, int device, CommOptions options)
        : comm_(comm), rank_(rank), size_(size), device_(device), options_(options) {}
    ~NcclCommunicator() override {
        if (comm_ && !aborted_) ncclCommDestroy(comm_); // an aborted communicator was freed by the abort
    }
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    const char* backend() const override { return "nccl"; }
    ncclComm_t comm() const { return comm_; }
    int device() const { return device_; }
    const CommOptions& options() const { return options_; }

    void abort(const std::string& reason) override {
        std::lock_guard<std::mutex> lk(m_);
        if (aborted_) return;
        reason_ = reason;
        aborted_ = true;
        ncclCommAbort(comm_); // every later call sees aborted_ first
    }
    bool aborted() const override { return aborted_; }

protected:
    Status check_placement(const Context& ctx, const char* op, const Tensor& t) const override {
        if (aborted_) return aborted_status(op);
        if (!ctx.device.is_cuda() || t.device() != ctx.device)
            return invalid_argument(std::string(op) +
                                    ": the NCCL communicator needs tensors on the context's " +
                                    "CUDA device, got " + t.describe() + " on " + ctx.device.to_string());
        return ok_status();
    }
    Status do_all_reduce_sum(const Context& ctx, Tensor& x) override {
        H3_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_dtype(x.dtype()));
        return nccl_status(
            ncclAllReduce(x.data(), x.data(), static_cast<size_t>(x.numel()), t, ncclSum, comm_, stream(ctx)),
            "all_reduce_sum");
    }
    Status do_all_to_all(const Context& ctx, const Tensor& send, Tensor& recv) override {
        H3_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_dtype(send.dtype()));
        const size_t n = static_cast<size_t>(send.numel() / size_);
        const size_t bytes = send.nbytes() / static_cast<size_t>(size_);
        H3_TRY(nccl_status(ncclGroupStart(), "group start"));
        for (int j = 0; j < size_; ++j) {
            H3_TRY(nccl_status(
                ncclSend(static_cast<const uint8_t*>(send.data()) + bytes * j, n, t, j, comm_, stream(ctx)),
                "all_to_all send"));
            H3_TRY(nccl_status(
                ncclRecv(static_cast<uint8_t*>(recv.data()) + bytes * j, n, t, j, comm_, stream(ctx)),
                "all_to_all recv"));
        }
        return nccl_status(ncclGroupEnd(), "all_to_all");
    }
    Status do_all_gather(const Context& ctx, const Tensor& send, Tensor& recv) override {
        H3_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_dtype(send.dtype()));
        return nccl_status(
            ncclAllGather(send.data(), recv.data(), static_cast<size_t>(send.numel()), t, comm_, stream(ctx)),
            "all_gather");
    }
    Status do_broadcast(const Context& ctx, Tensor& x, int root) override {
        H3_ASSIGN_OR_RETURN(ncclDataType_t t, nccl_dtype(x.dtype()));
        return nccl_status(
            ncclBroadcast(x.data(), x.data(), static_cast<size_t>(x.numel()), t, root, comm_, stream(ctx)),
            "broadcast");
    }
    // Waits for the stream (every queued collective) with the timeout, watching NCCL's asynchronous errors.
    Status do_barrier(const Context& ctx) override {
        if (aborted_) return aborted_status("barrier");
        H3_TRY(cuda_status(cudaSetDevice(device_), "set device"));
        Tensor one;
        {
            auto t = Tensor::empty(Shape{1}, DType::kF32, ctx.device);
            if (!t.ok()) return t.status();
            one = std::move(t).value();
        }
        H3_TRY(nccl_status(ncclAllReduce(one.data(), one.data(), 1, ncclFloat32, ncclSum, comm_, stream(ctx)),
                           "barrier"));
        const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
        for (;;) {
            const cudaError_t q = cudaStreamQuery(static_cast<cudaStream_t>(stream(ctx)));
            if (q == cudaSuccess) return ok_status();
            if (q != cudaErrorNotReady) return cuda_status(q, "barrier");
            ncclResult_t async = ncclSuccess;
            H3_TRY(nccl_status(ncclCommGetAsyncError(comm_, &async), "async error query"));
            if (async != ncclSuccess && async != ncclInProgress) {
                abort(std::string("asynchronous NCCL error: ") + ncclGetErrorString(async));
                return aborted_status("barrier");
            }
            if (aborted_) return aborted_status("barrier");
            if (std::chrono::steady_clock::now() > deadline) {
                abort("rank " + std::to_string(rank_) + " waited " +
                      std::to_string(options_.timeout.count()) + " ms in barrier");
                return aborted_status("barrier");
            }
            std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
    }

private:
    static cudaStream_t stream(const Context& ctx) { return static_cast<cudaStream_t>(ctx.stream()); }
    Status aborted_status(const char* op) const {
        std::lock_guard<std::mutex> lk(m_);
        return internal_error(std::string("NCCL ") + op + " on rank " + std::to_string(rank_) +
                              ": the communicator was aborted (" + reason_ + ")");
    }

    ncclComm_t comm_;
    int rank_, size_, device_;
    CommOptions options_;
    std::atomic<bool> aborted_{false};
    mutable std::mutex m_;
    std::string reason_;
};

} // namespace

bool nccl_available() {
    return true;
}

Result<NcclId> nccl_unique_id() {
    ncclUniqueId id;
    H3_TRY(nccl_status(ncclGetUniqueId(&id), "get unique id"));
    NcclId out{};
    static_assert(sizeof(id) == sizeof(NcclId), "ncclUniqueId is 128 bytes");
    std::memcpy(out.data(), &id, sizeof(id));
    return out;
}

Result<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclId& id, int rank, int size, int device,
                                                             const CommOptions& options) {
    if (rank < 0 || rank >= size)
        return invalid_argument("NCCL: rank " + std::to_string(rank) + " of world size " +
                                std::to_string(size));
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0); // NVLink multicast off unless the user set it
    H3_TRY(cuda_status(cudaSetDevice(device), "set device"));
    ncclUniqueId nid;
    std::memcpy(&nid, id.data(), sizeof(nid));
    ncclComm_t comm = nullptr;
    H3_TRY(nccl_status(ncclCommInitRank(&comm, size, nid, rank), "init rank"));
    return std::unique_ptr<Communicator>(
        std::make_unique<NcclCommunicator>(comm, rank, size, device, options));
}

Result<std::unique_ptr<Communicator>> split_nccl_communicator(Communicator& parent, int color, int key) {
    auto* p = dynamic_cast<NcclCommunicator*>(&parent);
    if (!p)
        return invalid_argument("split_nccl_communicator: the parent is a " + std::string(parent.backend()) +
                                " communicator");
    if (p->aborted()) return internal_error("split_nccl_communicator: the parent was aborted");
    H3_TRY(cuda_status(cudaSetDevice(p->device()), "set device"));
    ncclComm_t sub = nullptr;
    H3_TRY(nccl_status(ncclCommSplit(p->comm(), color, key, &sub, nullptr), "split"));
    int rank = 0, size = 0;
    H3_TRY(nccl_status(ncclCommUserRank(sub, &rank), "user rank"));
    H3_TRY(nccl_status(ncclCommCount(sub, &size), "count"));
    return std::unique_ptr<Communicator>(
        std::make_unique<NcclCommunicator>(sub, rank, size, p->device(), p->options()));
}

} // namespace h3::ops

#endif // H3_WITH_NCCL
