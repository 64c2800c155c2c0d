#include "ops/communicator.h"

namespace h3::ops {

namespace {

// What every collective's tensor must be; `op` names the collective.
Status check_tensor(const char* op, const Tensor& t, bool reduce) {
    if (!t.defined()) return invalid_argument(std::string(op) + ": the tensor is undefined");
    if (!t.is_contiguous())
        return invalid_argument(std::string(op) + ": " + t.describe() + " must be contiguous");
    if (reduce && t.dtype() != DType::kF32 && t.dtype() != DType::kBF16 && t.dtype() != DType::kF64)
        return invalid_argument(std::string(op) + ": sums f32, bf16 or f64, got " + t.describe());
    return ok_status();
}

} // namespace

Status Communicator::all_reduce_sum(const Context& ctx, Tensor& x) {
    H3_TRY(check_tensor("all_reduce_sum", x, true));
    H3_TRY(check_placement(ctx, "all_reduce_sum", x));
    return do_all_reduce_sum(ctx, x);
}

Status Communicator::all_to_all(const Context& ctx, const Tensor& send, Tensor& recv) {
    for (const Tensor* t : {&send, static_cast<const Tensor*>(&recv)}) {
        H3_TRY(check_tensor("all_to_all", *t, false));
        H3_TRY(check_placement(ctx, "all_to_all", *t));
    }
    const int n = size();
    if (send.numel() != recv.numel() || send.dtype() != recv.dtype() || send.numel() % n != 0)
        return invalid_argument("all_to_all: send " + send.describe() + " and recv " + recv.describe() +
                                " must match and split into " + std::to_string(n) + " equal chunks");
    return do_all_to_all(ctx, send, recv);
}

Status Communicator::all_gather(const Context& ctx, const Tensor& send, Tensor& recv) {
    for (const Tensor* t : {&send, static_cast<const Tensor*>(&recv)}) {
        H3_TRY(check_tensor("all_gather", *t, false));
        H3_TRY(check_placement(ctx, "all_gather", *t));
    }
    if (recv.numel() != send.numel() * size() || send.dtype() != recv.dtype())
        return invalid_argument("all_gather: recv " + recv.describe() + " must hold " +
                                std::to_string(size()) + " × send " + send.describe());
    return do_all_gather(ctx, send, recv);
}

Status Communicator::broadcast(const Context& ctx, Tensor& x, int root) {
    H3_TRY(check_tensor("broadcast", x, false));
    H3_TRY(check_placement(ctx, "broadcast", x));
    if (root < 0 || root >= size())
        return invalid_argument("broadcast: root " + std::to_string(root) + " is not a rank of " +
                                std::to_string(size()));
    return do_broadcast(ctx, x, root);
}

#if !defined(H3_WITH_NCCL)
bool nccl_available() {
    return false;
}
namespace {
Status no_nccl() {
    return unimplemented(
        "NCCL is not built in (this build found no CUDA toolkit with nccl.h and libnccl); rebuild with CUDA "
        "and NCCL, or run the ranks on the CPU communicator (device cpu)");
}
} // namespace
Result<NcclId> nccl_unique_id() {
    return no_nccl();
}
Result<std::unique_ptr<Communicator>> make_nccl_communicator(const NcclId&, int, int, int,
                                                             const CommOptions&) {
    return no_nccl();
}
Result<std::unique_ptr<Communicator>> split_nccl_communicator(Communicator&, int, int) {
    return no_nccl();
}
#endif

} // namespace h3::ops
