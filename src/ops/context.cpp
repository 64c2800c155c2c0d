#include "ops/context.h"

#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

namespace h3::ops {

void* Context::stream() const {
#ifdef H3_WITH_CUDA
    return cuda ? cuda->stream() : nullptr;
#else
    return nullptr;
#endif
}

} // namespace h3::ops
