#include "bench/dit/h2d_link.h"

#include "core/device_stream.h"
#include "model/weights/weight_master.h"

#include <chrono>

namespace h3::bench {

Result<double> h2d_seconds(const ops::Context& ctx, size_t bytes, bool pinned) {
    if (ctx.device.is_cpu()) return 0.0;
    H3_ASSIGN_OR_RETURN(Tensor host,
                        model::host_buffer(Shape{static_cast<int64_t>(bytes)}, DType::kU8, pinned));
    H3_ASSIGN_OR_RETURN(Tensor dev, Tensor::empty(host.shape(), DType::kU8, ctx.device));
    H3_ASSIGN_OR_RETURN(DeviceStream stream, DeviceStream::create(ctx.device));
    H3_TRY(dev.copy_from(host, stream.handle()));
    H3_TRY(stream.synchronize());
    const auto t0 = std::chrono::steady_clock::now();
    H3_TRY(dev.copy_from(host, stream.handle()));
    H3_TRY(stream.synchronize());
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

} // namespace h3::bench
