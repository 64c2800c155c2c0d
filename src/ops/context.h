// Where an op runs. CPU ops ignore `cuda`; CUDA ops need it (stream, cuBLASLt/cuDNN handles, workspace).
#pragma once

#include "core/device.h"
#include "core/status.h"

namespace h3::ops {

class CudaContext; // ops/cuda/cuda_context.h; exists only in CUDA builds

struct Context {
    Device device = Device::cpu();
    CudaContext* cuda = nullptr;
    // CUDA fp32 convolutions (conv3d) may multiply on TF32 tensor cores, as PyTorch's default
    // torch.backends.cudnn.allow_tf32 does; off: fp32 FMA, the CPU reference's precision. CPU ops ignore it.
    bool allow_tf32 = false;

    static Context cpu() { return {}; }
    bool is_cuda() const { return device.is_cuda(); }
    // The cudaStream_t of `cuda` (nullptr on the CPU).
    void* stream() const;
};

// Waits until the work queued on ctx's stream has run (nothing to wait for on the CPU). Not device-wide.
Status synchronize(const Context& ctx);

} // namespace h3::ops
