#include "core/device_stream.h"

#include "core/cuda_api.h"

#include <utility>

namespace h3 {

Result<DeviceStream> DeviceStream::create(Device device) {
    DeviceStream s;
    s.device_ = device;
    if (device.is_cpu()) return s;
    H3_TRY(cuda::set_device(device.index));
    H3_ASSIGN_OR_RETURN(s.stream_, cuda::stream_create());
    return s;
}

namespace {
void close_stream(void* stream) {
    if (!stream) return;
    (void)cuda::stream_synchronize(stream); // queued copies may still read host memory
    cuda::stream_destroy(stream);
}
} // namespace

DeviceStream::~DeviceStream() {
    close_stream(stream_);
}

DeviceStream::DeviceStream(DeviceStream&& o) noexcept
    : device_(o.device_), stream_(std::exchange(o.stream_, nullptr)) {}

DeviceStream& DeviceStream::operator=(DeviceStream&& o) noexcept {
    if (this != &o) {
        close_stream(stream_);
        device_ = o.device_;
        stream_ = std::exchange(o.stream_, nullptr);
    }
    return *this;
}

Status DeviceStream::synchronize() const {
    return stream_ ? cuda::stream_synchronize(stream_) : ok_status();
}

Result<DeviceEvent> DeviceEvent::create(Device device) {
    DeviceEvent e;
    e.device_ = device;
    if (device.is_cpu()) return e;
    H3_TRY(cuda::set_device(device.index));
    H3_ASSIGN_OR_RETURN(e.event_, cuda::event_create());
    return e;
}

DeviceEvent::~DeviceEvent() {
    cuda::event_destroy(event_);
}

DeviceEvent::DeviceEvent(DeviceEvent&& o) noexcept
    : device_(o.device_), event_(std::exchange(o.event_, nullptr)), recorded_(o.recorded_) {}

DeviceEvent& DeviceEvent::operator=(DeviceEvent&& o) noexcept {
    if (this != &o) {
        cuda::event_destroy(event_);
        device_ = o.device_;
        event_ = std::exchange(o.event_, nullptr);
        recorded_ = o.recorded_;
    }
    return *this;
}

Status DeviceEvent::record(void* stream) {
    if (!event_) return ok_status();
    H3_TRY(cuda::event_record(event_, stream));
    recorded_ = true;
    return ok_status();
}

Status DeviceEvent::make_wait(void* stream) const {
    if (!event_ || !recorded_) return ok_status(); // nothing recorded: nothing to wait for
    return cuda::stream_wait_event(stream, event_);
}

Status DeviceEvent::synchronize() const {
    if (!event_ || !recorded_) return ok_status();
    return cuda::event_synchronize(event_);
}

} // namespace h3
