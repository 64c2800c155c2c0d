// CPU row gather / scatter references (indices were range-checked by the dispatcher).
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/cpu_ops.h"

namespace h3::ops::cpu_impl {

Status gather_rows(const Context&, const Tensor& src, const Tensor& index, Tensor& dst) {
    const int64_t m = dst.dim(0), d = dst.dim(1);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i)
        convert_array(elem_ptr(src, load_index(index, i) * d), src.dtype(), elem_ptr_mut(dst, i * d),
                      dst.dtype(), static_cast<size_t>(d));
    return ok_status();
}

Status scatter_rows(const Context&, const Tensor& src, const Tensor& index, Tensor& dst) {
    // Serial: with duplicate indices the last source row wins, deterministically.
    const int64_t m = src.dim(0), d = src.dim(1);
    for (int64_t i = 0; i < m; ++i)
        convert_array(elem_ptr(src, i * d), src.dtype(), elem_ptr_mut(dst, load_index(index, i) * d),
                      dst.dtype(), static_cast<size_t>(d));
    return ok_status();
}

} // namespace h3::ops::cpu_impl
