// Where an op runs. CPU ops ignore `cuda`; CUDA ops need it (stream, cuBLASLt/cuDNN handles, workspace).
#pragma once

#include "core/device.h"

namespace h3::ops {

class CudaContext; // ops/cuda/cuda_context.h; exists only in CUDA builds

struct Context {
    Device device = Device::cpu();
    CudaContext* cuda = nullptr;

    static Context cpu() { return {}; }
    bool is_cuda() const { return device.is_cuda(); }
    // The cudaStream_t of `cuda` (nullptr on the CPU).
    void* stream() const;
};

} // namespace h3::ops
