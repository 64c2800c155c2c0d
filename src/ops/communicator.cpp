#include "ops/communicator.h"

namespace h3::ops {

Status check_comm_tensor(const char* op, const Tensor& t, bool reduce) {
    if (!t.defined()) return invalid_argument(std::string(op) + ": the tensor is undefined");
    if (!t.is_contiguous())
        return invalid_argument(std::string(op) + ": " + t.describe() + " must be contiguous");
    if (reduce && t.dtype() != DType::kF32 && t.dtype() != DType::kBF16 && t.dtype() != DType::kF64)
        return invalid_argument(std::string(op) + ": sums f32, bf16 or f64, got " + t.describe());
    return ok_status();
}

#if !defined(H3_WITH_NCCL)
bool nccl_available() {
    return false;
}
namespace {
Status no_nccl() {
    return unimplemented(
        "NCCL is not built in (this build found no CUDA toolkit with nccl.h and libnccl); rebuild with CUDA "
        "and NCCL, or run the ranks on the CPU communicator (--device cpu)");
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
