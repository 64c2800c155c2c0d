// Host values as bytes and back, for what one process sends another (pipeline/group_broadcast.h: the encoded
// inputs; pipeline/job_input_bytes.h: a job's input): fixed-width integers in the host's byte order (the
// processes of a group run the same binary), raw byte runs, tensors (rank, dtype, dims, data; an undefined
// tensor as rank -1). The reader checks every length against what is left and names `what` in its errors.
#pragma once

#include "core/status.h"
#include "core/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h3::pipeline {

class ByteWriter {
public:
    void u32(uint32_t v) { raw(&v, sizeof v); }
    void i64(int64_t v) { raw(&v, sizeof v); }
    void bytes(const void* p, size_t n) { // the length, then the bytes
        i64(static_cast<int64_t>(n));
        raw(p, n);
    }
    void tensor(const Tensor& t);
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    }
    std::vector<uint8_t> out;
};

class ByteReader {
public:
    // `what` names the payload in errors ("encoded inputs", "job input").
    ByteReader(const std::vector<uint8_t>& b, std::string what) : b_(b), what_(std::move(what)) {}
    Status raw(void* p, size_t n);
    Result<uint32_t> u32();
    Result<int64_t> i64();
    // A length-prefixed run of at most `max` bytes.
    Result<std::vector<uint8_t>> bytes(size_t max);
    Result<Tensor> tensor();
    bool done() const { return at_ == b_.size(); }
    Status error(const std::string& message) const { return invalid_argument(what_ + ": " + message); }

private:
    const std::vector<uint8_t>& b_;
    std::string what_;
    size_t at_ = 0;
};

} // namespace h3::pipeline
