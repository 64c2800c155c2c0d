#include "pipeline/group_broadcast.h"

#include <cstring>
#include <string>

namespace h3::pipeline {

namespace {

constexpr uint32_t kMagic = 0x48334449; // "H3DI"

class Writer {
public:
    void u32(uint32_t v) { raw(&v, sizeof v); }
    void i64(int64_t v) { raw(&v, sizeof v); }
    void tensor(const Tensor& t) {
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
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        out.insert(out.end(), b, b + n);
    }
    std::vector<uint8_t> out;
};

class Reader {
public:
    explicit Reader(const std::vector<uint8_t>& b) : b_(b) {}
    Status raw(void* p, size_t n) {
        if (n > b_.size() - at_)
            return invalid_argument("encoded inputs: the payload ends " +
                                    std::to_string(n - (b_.size() - at_)) + " bytes early");
        std::memcpy(p, b_.data() + at_, n);
        at_ += n;
        return ok_status();
    }
    Result<uint32_t> u32() {
        uint32_t v = 0;
        H3_TRY(raw(&v, sizeof v));
        return v;
    }
    Result<int64_t> i64() {
        int64_t v = 0;
        H3_TRY(raw(&v, sizeof v));
        return v;
    }
    Result<Tensor> tensor() {
        H3_ASSIGN_OR_RETURN(int64_t rank, i64());
        if (rank == -1) return Tensor();
        if (rank < 0 || rank > 8)
            return invalid_argument("encoded inputs: a tensor of rank " + std::to_string(rank));
        H3_ASSIGN_OR_RETURN(uint32_t dt, u32());
        if (dt > static_cast<uint32_t>(DType::kF64))
            return invalid_argument("encoded inputs: unknown dtype code " + std::to_string(dt));
        std::vector<int64_t> dims(static_cast<size_t>(rank));
        int64_t numel = 1;
        for (auto& d : dims) {
            H3_ASSIGN_OR_RETURN(d, i64());
            if (d < 0 || (d > 0 && numel > (int64_t{1} << 40) / d))
                return invalid_argument("encoded inputs: a tensor dimension of " + std::to_string(d));
            numel *= d;
        }
        Tensor t = Tensor::host(Shape(dims), static_cast<DType>(dt));
        H3_TRY(raw(t.data(), t.nbytes()));
        return t;
    }
    bool done() const { return at_ == b_.size(); }

private:
    const std::vector<uint8_t>& b_;
    size_t at_ = 0;
};

} // namespace

std::vector<uint8_t> pack_encoded_inputs(const EncodedInputs& in) {
    Writer w;
    w.u32(kMagic);
    w.tensor(in.conditioning.embeddings);
    w.i64(static_cast<int64_t>(in.conditioning.tags.size()));
    w.raw(in.conditioning.tags.data(), in.conditioning.tags.size() * sizeof(int32_t));
    w.i64(static_cast<int64_t>(in.keyframes.size()));
    for (const KeyframeCondition& k : in.keyframes) {
        w.u32(static_cast<uint32_t>(k.anchor));
        w.tensor(k.latents);
    }
    w.i64(static_cast<int64_t>(in.references.size()));
    for (const ReferenceCondition& r : in.references) {
        w.u32(static_cast<uint32_t>(r.kind));
        w.tensor(r.latents);
        w.tensor(r.audio_rows);
    }
    return std::move(w.out);
}

Result<EncodedInputs> unpack_encoded_inputs(const std::vector<uint8_t>& bytes) {
    Reader rd(bytes);
    H3_ASSIGN_OR_RETURN(uint32_t magic, rd.u32());
    if (magic != kMagic) return invalid_argument("encoded inputs: the payload does not start with its tag");
    EncodedInputs in;
    H3_ASSIGN_OR_RETURN(in.conditioning.embeddings, rd.tensor());
    H3_ASSIGN_OR_RETURN(int64_t tags, rd.i64());
    if (tags < 0 || tags != in.conditioning.rows())
        return invalid_argument("encoded inputs: " + std::to_string(tags) + " tags for " +
                                std::to_string(in.conditioning.rows()) + " conditioning rows");
    in.conditioning.tags.resize(static_cast<size_t>(tags));
    H3_TRY(rd.raw(in.conditioning.tags.data(), in.conditioning.tags.size() * sizeof(int32_t)));
    H3_ASSIGN_OR_RETURN(int64_t keyframes, rd.i64());
    if (keyframes < 0 || keyframes > 2)
        return invalid_argument("encoded inputs: " + std::to_string(keyframes) + " keyframes");
    for (int64_t i = 0; i < keyframes; ++i) {
        KeyframeCondition k;
        H3_ASSIGN_OR_RETURN(uint32_t anchor, rd.u32());
        if (anchor > static_cast<uint32_t>(KeyframeAnchor::kLast))
            return invalid_argument("encoded inputs: keyframe anchor code " + std::to_string(anchor));
        k.anchor = static_cast<KeyframeAnchor>(anchor);
        H3_ASSIGN_OR_RETURN(k.latents, rd.tensor());
        in.keyframes.push_back(std::move(k));
    }
    H3_ASSIGN_OR_RETURN(int64_t references, rd.i64());
    if (references < 0 || references > 1024)
        return invalid_argument("encoded inputs: " + std::to_string(references) + " references");
    for (int64_t i = 0; i < references; ++i) {
        ReferenceCondition r;
        H3_ASSIGN_OR_RETURN(uint32_t kind, rd.u32());
        if (kind > static_cast<uint32_t>(ReferenceKind::kAudio))
            return invalid_argument("encoded inputs: reference kind code " + std::to_string(kind));
        r.kind = static_cast<ReferenceKind>(kind);
        H3_ASSIGN_OR_RETURN(r.latents, rd.tensor());
        H3_ASSIGN_OR_RETURN(r.audio_rows, rd.tensor());
        in.references.push_back(std::move(r));
    }
    if (!rd.done()) return invalid_argument("encoded inputs: bytes left over after the last reference");
    return in;
}

namespace {

// x on every rank ← root's x, through a device buffer when the communicator moves device memory.
Status broadcast_host(const ops::Context& ctx, ops::Communicator& comm, Tensor& x, int root) {
    if (std::string(comm.backend()) != "nccl") return comm.broadcast(ctx, x, root);
    H3_ASSIGN_OR_RETURN(Tensor d, x.to(ctx.device, ctx.stream()));
    H3_TRY(comm.broadcast(ctx, d, root));
    H3_ASSIGN_OR_RETURN(Tensor back, d.to(Device::cpu(), ctx.stream()));
    return x.copy_from(back);
}

} // namespace

Status broadcast_encoded_inputs(const ops::Context& ctx, ops::Communicator& comm, EncodedInputs& inputs,
                                int root) {
    std::vector<uint8_t> bytes;
    if (comm.rank() == root) bytes = pack_encoded_inputs(inputs);
    Tensor length = Tensor::host(Shape{1}, DType::kI64);
    length.data_as<int64_t>()[0] = static_cast<int64_t>(bytes.size());
    H3_TRY(broadcast_host(ctx, comm, length, root).with_context("broadcasting the encoded inputs' size"));
    const int64_t n = length.data_as<int64_t>()[0];
    if (n <= 0 || n > (int64_t{1} << 40))
        return internal_error("encoded inputs: rank " + std::to_string(root) + " announced " +
                              std::to_string(n) + " bytes");
    Tensor payload = Tensor::host(Shape{n}, DType::kU8);
    if (comm.rank() == root) std::memcpy(payload.data(), bytes.data(), bytes.size());
    H3_TRY(broadcast_host(ctx, comm, payload, root).with_context("broadcasting the encoded inputs"));
    if (comm.rank() == root) return ok_status();
    bytes.assign(payload.data_as<uint8_t>(), payload.data_as<uint8_t>() + n);
    H3_ASSIGN_OR_RETURN(inputs, unpack_encoded_inputs(bytes));
    return ok_status();
}

} // namespace h3::pipeline
