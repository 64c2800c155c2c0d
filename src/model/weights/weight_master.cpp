#include "model/weights/weight_master.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace h3::model {

Result<Tensor> host_buffer(const Shape& shape, DType dtype, bool pinned) {
    if (!pinned) return Tensor::empty(shape, dtype, Device::cpu());
    const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
    H3_ASSIGN_OR_RETURN(auto storage, allocate_pinned(bytes));
    return Tensor::from_storage(std::move(storage), 0, shape, dtype);
}

Result<WeightMaster> quantize_int8(const Tensor& w_in, bool pinned) {
    if (!w_in.device().is_cpu() || w_in.rank() != 2 || !dtype_is_float(w_in.dtype()))
        return invalid_argument("quantize_int8: expected a host float matrix, got " + w_in.describe());
    H3_ASSIGN_OR_RETURN(Tensor w, w_in.contiguous());
    const int64_t n = w.dim(0), k = w.dim(1);
    WeightMaster m;
    H3_ASSIGN_OR_RETURN(m.data, host_buffer(w.shape(), DType::kI8, pinned));
    H3_ASSIGN_OR_RETURN(m.scale, host_buffer(Shape{n}, DType::kF32, pinned));
    int8_t* q = m.data.data_as<int8_t>();
    float* sc = m.scale.data_as<float>();
    const size_t esz = dtype_size(w.dtype());
    bool finite = true;
#pragma omp parallel for schedule(static) reduction(&& : finite)
    for (int64_t r = 0; r < n; ++r) {
        std::vector<float> row(static_cast<size_t>(k));
        convert_array(static_cast<const uint8_t*>(w.data()) + static_cast<size_t>(r * k) * esz, w.dtype(),
                      row.data(), DType::kF32, static_cast<size_t>(k));
        float amax = 0.0f;
        for (float v : row) {
            finite = finite && std::isfinite(v);
            amax = std::max(amax, std::fabs(v));
        }
        const float s = amax / 127.0f;
        sc[r] = s;
        for (int64_t j = 0; j < k; ++j) {
            const float v = s > 0.0f ? std::nearbyint(row[static_cast<size_t>(j)] / s) : 0.0f;
            q[r * k + j] = static_cast<int8_t>(std::clamp(v, -127.0f, 127.0f));
        }
    }
    if (!finite) return bad_input("quantize_int8: the matrix holds an inf or NaN");
    return m;
}

Result<Tensor> convert_weight(const Tensor& host, DType target, const std::string& what) {
    if (host.dtype() == target) return host;
    H3_ASSIGN_OR_RETURN(Tensor out, host.to_dtype(target));
    if (target != DType::kF16) return out;
    // Find the first value that overflowed (fp16's largest finite value is 65504).
    H3_ASSIGN_OR_RETURN(Tensor src, host.contiguous());
    const uint16_t* h = out.data_as<const uint16_t>();
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
        if ((h[i] & 0x7c00u) != 0x7c00u) continue; // finite in fp16
        const double v = load_as_f64(src.data(), src.dtype(), static_cast<size_t>(i));
        if (!std::isfinite(v))
            return bad_input(what + " holds a non-finite value (" + std::to_string(v) + ") at element " +
                             std::to_string(i));
        return bad_input(what + " holds " + std::to_string(v) + " at element " + std::to_string(i) +
                         ", beyond fp16's largest finite value 65504: dtype fp16 cannot represent this "
                         "weight (use bf16 or fp32)");
    }
    return out;
}

} // namespace h3::model
