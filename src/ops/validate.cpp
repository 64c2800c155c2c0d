#include "ops/validate.h"

#include <sstream>

namespace h3::ops::detail {

namespace {
std::string prefix(const char* op, const char* name) {
    return std::string(op) + ": " + name + " ";
}
std::string paren(const std::string& why) {
    return why.empty() ? "" : " (" + why + ")";
}
} // namespace

std::string desc(const Tensor& t) {
    if (!t.defined()) return "undefined";
    return std::string(dtype_name(t.dtype())) + t.shape().to_string();
}

Status check_context(const char* op, const Context& ctx) {
    if (ctx.is_cuda() && ctx.cuda == nullptr)
        return invalid_argument(std::string(op) + ": context is on " + ctx.device.to_string() +
                                " but has no CudaContext");
    return ok_status();
}

Status check_tensor(const char* op, const char* name, const Context& ctx, const Tensor& t) {
    if (!t.defined()) return invalid_argument(prefix(op, name) + "is undefined");
    if (!(t.device() == ctx.device))
        return invalid_argument(prefix(op, name) + desc(t) + " is on " + t.device().to_string() +
                                " but the op runs on " + ctx.device.to_string());
    return ok_status();
}

Status check_float(const char* op, const char* name, const Context& ctx, const Tensor& t) {
    H3_TRY(check_tensor(op, name, ctx, t));
    DType d = t.dtype();
    if (d != DType::kF32 && d != DType::kBF16 && d != DType::kF16)
        return invalid_argument(prefix(op, name) + "is " + desc(t) + " but must be f32, bf16 or f16");
    return ok_status();
}

Status check_float_contig(const char* op, const char* name, const Context& ctx, const Tensor& t) {
    H3_TRY(check_float(op, name, ctx, t));
    return check_contiguous(op, name, t);
}

Status check_f32_contig(const char* op, const char* name, const Context& ctx, const Tensor& t, int rank) {
    H3_TRY(check_float_contig(op, name, ctx, t));
    if (rank >= 0) H3_TRY(check_rank(op, name, t, rank));
    if (t.dtype() != DType::kF32)
        return invalid_argument(std::string(op) + ": " + name + " is " + desc(t) + ", expected f32");
    return ok_status();
}

Status check_rank(const char* op, const char* name, const Tensor& t, int rank) {
    if (t.rank() != rank)
        return invalid_argument(prefix(op, name) + "is " + desc(t) + " but must have rank " +
                                std::to_string(rank));
    return ok_status();
}

Status check_writable(const char* op, const char* name, const Tensor& t) {
    if (t.read_only()) return invalid_argument(prefix(op, name) + desc(t) + " is read-only (an output)");
    return ok_status();
}

Status check_contiguous(const char* op, const char* name, const Tensor& t) {
    if (!t.is_contiguous()) return invalid_argument(prefix(op, name) + desc(t) + " must be contiguous");
    return ok_status();
}

Status check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected,
                   const std::string& why) {
    if (!(t.shape() == expected))
        return invalid_argument(prefix(op, name) + "is " + desc(t) + " but expected shape " +
                                expected.to_string() + paren(why));
    return ok_status();
}

Status check_index(const char* op, const char* name, const Context& ctx, const Tensor& t, int64_t len,
                   const std::string& why) {
    H3_TRY(check_tensor(op, name, ctx, t));
    if (t.dtype() != DType::kI32 && t.dtype() != DType::kI64)
        return invalid_argument(prefix(op, name) + "is " + desc(t) + " but must be i32 or i64");
    H3_TRY(check_shape(op, name, t, Shape{len}, why));
    return check_contiguous(op, name, t);
}

Status check_index_values(const char* op, const char* name, const Tensor& t, int64_t limit,
                          const std::string& limit_what) {
    if (!t.device().is_cpu()) return ok_status();
    const int64_t n = t.numel();
    for (int64_t i = 0; i < n; ++i) {
        int64_t v = t.dtype() == DType::kI32 ? t.data_as<const int32_t>()[i] : t.data_as<const int64_t>()[i];
        if (v < 0 || v >= limit) {
            std::ostringstream os;
            os << op << ": " << name << "[" << i << "] = " << v << " is out of range [0, " << limit << ") ("
               << limit_what << ")";
            return invalid_argument(os.str());
        }
    }
    return ok_status();
}

Status check_table(const char* op, const char* name, const Context& ctx, const Tensor& t, int64_t cols,
                   const std::string& why) {
    H3_TRY(check_float(op, name, ctx, t));
    H3_TRY(check_rank(op, name, t, 2));
    if (t.dim(1) != cols)
        return invalid_argument(prefix(op, name) + "is " + desc(t) + " but must have " +
                                std::to_string(cols) + " columns" + paren(why));
    if (t.dim(0) == 0) return invalid_argument(prefix(op, name) + "is " + desc(t) + " but has no rows");
    if (t.stride(1) != 1 || t.stride(0) < cols)
        return invalid_argument(prefix(op, name) + desc(t) + " has strides [" + std::to_string(t.stride(0)) +
                                ", " + std::to_string(t.stride(1)) +
                                "]; table rows must be dense (stride(1) == 1, stride(0) >= cols)");
    return ok_status();
}

Status cuda_not_built(const char* op) {
    return unimplemented(std::string(op) + ": this build has no CUDA backend (configure with nvcc)");
}

} // namespace h3::ops::detail
