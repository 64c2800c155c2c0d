// Turns a --device string into an op context (and owns the CUDA context behind it).
#pragma once

#include "core/status.h"
#include "ops/context.h"

#include <memory>
#include <string>

namespace h3::cli {

class DeviceSession {
public:
    static Result<std::unique_ptr<DeviceSession>> open(const std::string& device);
    ~DeviceSession();
    const ops::Context& context() const { return ctx_; }
    Status synchronize() const;

private:
    DeviceSession() = default;
    ops::Context ctx_;
    std::unique_ptr<ops::CudaContext, void (*)(ops::CudaContext*)> cuda_{nullptr, nullptr};
};

} // namespace h3::cli
