// What the denoise loop needs from the encode stage, sent from the rank that ran it to the rest of a device
// group (issue #17): rank 0 runs the conditioner (text stack, vision tower) and the keyframe / reference
// encoders; every other rank receives the conditioning rows, the keyframe latents and the reference
// encodings through the group's world communicator and never loads those components. The payload travels as
// bytes through ops::Communicator::broadcast (its length first), so in-process threads, processes over TCP
// and NCCL ranks take the same path.
#pragma once

#include "core/status.h"
#include "ops/communicator.h"
#include "pipeline/conditioner.h"
#include "pipeline/latents.h"

#include <cstdint>
#include <string>
#include <vector>

namespace h3::pipeline {

struct EncodedInputs {
    Conditioning conditioning;
    std::vector<KeyframeCondition> keyframes;   // fl2va
    std::vector<ReferenceCondition> references; // ref2va
};

// The inputs as bytes and back (host tensors; undefined tensors stay undefined). unpack's errors name what
// is malformed.
std::vector<uint8_t> pack_encoded_inputs(const EncodedInputs& inputs);
Result<EncodedInputs> unpack_encoded_inputs(const std::vector<uint8_t>& bytes);

// Collective: root's `bytes` (not empty) to every rank, its length first (`what` names them in errors).
Status broadcast_bytes(const ops::Context& ctx, ops::Communicator& comm, std::vector<uint8_t>& bytes,
                       int root, const std::string& what);

// Collective: on `root` `inputs` is sent, on every other rank it is replaced by root's. `ctx` is the rank's
// op context (an NCCL communicator moves the bytes through a device buffer on it).
Status broadcast_encoded_inputs(const ops::Context& ctx, ops::Communicator& comm, EncodedInputs& inputs,
                                int root = 0);

} // namespace h3::pipeline
