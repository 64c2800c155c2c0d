#include "pipeline/group_broadcast.h"

#include "pipeline/byte_codec.h"

#include <cstring>
#include <string>

namespace h3::pipeline {

namespace {

constexpr uint32_t kMagic = 0x48334449; // "H3DI"

} // namespace

std::vector<uint8_t> pack_encoded_inputs(const EncodedInputs& in) {
    ByteWriter w;
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
    ByteReader rd(bytes, "encoded inputs");
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

Status broadcast_bytes(const ops::Context& ctx, ops::Communicator& comm, std::vector<uint8_t>& bytes,
                       int root, const std::string& what) {
    Tensor length = Tensor::host(Shape{1}, DType::kI64);
    length.data_as<int64_t>()[0] = comm.rank() == root ? static_cast<int64_t>(bytes.size()) : 0;
    H3_TRY(broadcast_host(ctx, comm, length, root).with_context("broadcasting the size of the " + what));
    const int64_t n = length.data_as<int64_t>()[0];
    if (n <= 0 || n > (int64_t{1} << 40))
        return internal_error(what + ": rank " + std::to_string(root) + " announced " + std::to_string(n) +
                              " bytes");
    Tensor payload = Tensor::host(Shape{n}, DType::kU8);
    if (comm.rank() == root) std::memcpy(payload.data(), bytes.data(), bytes.size());
    H3_TRY(broadcast_host(ctx, comm, payload, root).with_context("broadcasting the " + what));
    if (comm.rank() != root) bytes.assign(payload.data_as<uint8_t>(), payload.data_as<uint8_t>() + n);
    return ok_status();
}

Status broadcast_encoded_inputs(const ops::Context& ctx, ops::Communicator& comm, EncodedInputs& inputs,
                                int root) {
    std::vector<uint8_t> bytes;
    if (comm.rank() == root) bytes = pack_encoded_inputs(inputs);
    H3_TRY(broadcast_bytes(ctx, comm, bytes, root, "encoded inputs"));
    if (comm.rank() == root) return ok_status();
    H3_ASSIGN_OR_RETURN(inputs, unpack_encoded_inputs(bytes));
    return ok_status();
}

} // namespace h3::pipeline
