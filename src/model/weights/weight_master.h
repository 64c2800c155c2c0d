// Host masters of streamed weight matrices, W8A16 quantization at load, and the dtype conversion of weights
// that refuses to turn a value into an fp16 infinity.
#pragma once

#include "core/tensor.h"

#include <string>

namespace h3::model {

// One streamed matrix [N, K] on the host: in the compute dtype (a read-only mmap view of the checkpoint when
// no conversion was needed, else an owned copy), or i8 with one f32 scale per row (W8A16).
struct WeightMaster {
    Tensor data;  // host
    Tensor scale; // f32 [N] when data is i8; undefined otherwise
    bool int8() const { return data.dtype() == DType::kI8; }
    size_t bytes() const { return data.nbytes() + (scale.defined() ? scale.nbytes() : 0); }
};

// A host tensor of `shape` / `dtype`, page-locked when `pinned` (CUDA builds; pinned storage is host memory).
Result<Tensor> host_buffer(const Shape& shape, DType dtype, bool pinned);

// Symmetric per-row int8: scale[n] = max|w[n, :]| / 127 (fp32), q = clamp(nearbyint(w / scale), −127, 127)
// (round half to even; a zero row has scale 0 and q 0). w: a host float matrix [N, K]. Dequantized,
// fp32(q)·scale rounded to the compute dtype (ops::dequantize_rows) gives w back exactly when every w[n, k]
// is an integer multiple ≤ 127 of a row scale that is a power of two.
Result<WeightMaster> quantize_int8(const Tensor& w, bool pinned);

// `host` converted to `target` (host, contiguous; `host` itself when it already is). Converting to f16
// rejects a tensor holding a finite value that rounds to ±inf in fp16, naming `what` and the value, instead
// of producing infinities; so is any non-finite value in a weight.
Result<Tensor> convert_weight(const Tensor& host, DType target, const std::string& what);

} // namespace h3::model
