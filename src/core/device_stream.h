// RAII for a CUDA stream and an event, with a CPU form in which every call is an immediate no-op, so that
// code ordering uploads against the ops' stream (model weight streaming) runs unchanged on either device.
#pragma once

#include "core/device.h"
#include "core/status.h"

namespace h3 {

// A non-blocking stream of its own on `device` (an upload queue beside the ops' stream); empty on the CPU.
class DeviceStream {
public:
    static Result<DeviceStream> create(Device device);
    DeviceStream() = default;
    ~DeviceStream();
    DeviceStream(DeviceStream&& o) noexcept;
    DeviceStream& operator=(DeviceStream&& o) noexcept;
    DeviceStream(const DeviceStream&) = delete;
    DeviceStream& operator=(const DeviceStream&) = delete;

    void* handle() const { return stream_; } // cudaStream_t, nullptr on the CPU
    // Host waits for the work queued so far (this stream only; never the whole device).
    Status synchronize() const;

private:
    Device device_;
    void* stream_ = nullptr;
};

// A point in a stream's work. On the CPU work is done when it is queued, so record/wait are no-ops.
class DeviceEvent {
public:
    static Result<DeviceEvent> create(Device device);
    DeviceEvent() = default;
    ~DeviceEvent();
    DeviceEvent(DeviceEvent&& o) noexcept;
    DeviceEvent& operator=(DeviceEvent&& o) noexcept;
    DeviceEvent(const DeviceEvent&) = delete;
    DeviceEvent& operator=(const DeviceEvent&) = delete;

    // Marks the work queued on `stream` so far.
    Status record(void* stream);
    // Work queued on `stream` after this call waits for the recorded point (a device-side wait).
    Status make_wait(void* stream) const;
    // Host waits for the recorded point.
    Status synchronize() const;

private:
    Device device_;
    void* event_ = nullptr;
    bool recorded_ = false;
};

} // namespace h3
