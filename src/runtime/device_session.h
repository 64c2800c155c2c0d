// A device by name ("cpu", "cuda", "cuda:N") as an op context, owning the CUDA context behind it (stream,
// cuBLASLt / cuDNN handles, workspace).
#pragma once

#include "core/status.h"
#include "ops/context.h"

#include <memory>
#include <string>

namespace h3::runtime {

class DeviceSession {
public:
    static Result<std::unique_ptr<DeviceSession>> open(const std::string& device);
    static Result<std::unique_ptr<DeviceSession>> open(Device device);
    ~DeviceSession();
    const ops::Context& context() const { return ctx_; }
    Status synchronize() const;
    // Makes the session's device current on the calling thread (a worker thread is not the one that opened
    // it). No-op on the CPU.
    Status make_current() const;

private:
    DeviceSession() = default;
    ops::Context ctx_;
    std::unique_ptr<ops::CudaContext, void (*)(ops::CudaContext*)> cuda_{nullptr, nullptr};
};

} // namespace h3::runtime
