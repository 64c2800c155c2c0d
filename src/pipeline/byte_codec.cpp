#include "pipeline/byte_codec.h"

#include <cstring>

namespace h3::pipeline {

void ByteWriter::tensor(const Tensor& t) {
    if (!t.defined()) {
        i64(-1);
        return;
    }
    const Tensor c = *t.contiguous();
    i64(c.rank());
    u32(static_cast<uint32_t>(c.dtype()));
    for (int d = 0; d < c.rank(); ++d) i64(c.dim(d));
    raw(c.data(), c.nbytes());
}

Status ByteReader::raw(void* p, size_t n) {
    if (n > b_.size() - at_)
        return error("the payload ends " + std::to_string(n - (b_.size() - at_)) + " bytes early");
    if (n) std::memcpy(p, b_.data() + at_, n);
    at_ += n;
    return ok_status();
}

Result<uint32_t> ByteReader::u32() {
    uint32_t v = 0;
    H3_TRY(raw(&v, sizeof v));
    return v;
}

Result<int64_t> ByteReader::i64() {
    int64_t v = 0;
    H3_TRY(raw(&v, sizeof v));
    return v;
}

Result<std::vector<uint8_t>> ByteReader::bytes(size_t max) {
    H3_ASSIGN_OR_RETURN(int64_t n, i64());
    if (n < 0 || static_cast<uint64_t>(n) > max || static_cast<size_t>(n) > b_.size() - at_)
        return error("a run of " + std::to_string(n) + " bytes (" + std::to_string(b_.size() - at_) +
                     " left)");
    std::vector<uint8_t> v(static_cast<size_t>(n));
    H3_TRY(raw(v.data(), v.size()));
    return v;
}

Result<Tensor> ByteReader::tensor() {
    H3_ASSIGN_OR_RETURN(int64_t rank, i64());
    if (rank == -1) return Tensor();
    if (rank < 0 || rank > 8) return error("a tensor of rank " + std::to_string(rank));
    H3_ASSIGN_OR_RETURN(uint32_t dt, u32());
    if (dt > static_cast<uint32_t>(DType::kF64)) return error("unknown dtype code " + std::to_string(dt));
    std::vector<int64_t> dims(static_cast<size_t>(rank));
    int64_t numel = 1;
    for (auto& d : dims) {
        H3_ASSIGN_OR_RETURN(d, i64());
        if (d < 0 || (d > 0 && numel > (int64_t{1} << 40) / d))
            return error("a tensor dimension of " + std::to_string(d));
        numel *= d;
    }
    Tensor t = Tensor::host(Shape(dims), static_cast<DType>(dt));
    H3_TRY(raw(t.data(), t.nbytes()));
    return t;
}

} // namespace h3::pipeline
