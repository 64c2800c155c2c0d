// The op test harness shared by tests/test_ops.cpp and tests/test_ops_conv.cpp: backend selection
// (`--backend cuda` or H3_TEST_BACKEND=cuda), random inputs, output storage with guard bytes, tolerances and
// the output check (NaN/Inf, guards, |got − want| <= atol + rtol·|want|).
#pragma once

#include "core/cuda_api.h"
#include "core/dtype.h"
#include "core/storage.h"
#include "core/tensor.h"
#include "ops/ops.h"
#ifdef H3_WITH_CUDA
#include "ops/cuda/cuda_context.h"
#endif

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace h3::ops::harness {

// ---- backend selection -----------------------------------------------------------------------------------
inline bool g_want_cuda = false;

struct Backend {
    Context ctx;
#ifdef H3_WITH_CUDA
    std::unique_ptr<CudaContext> holder;
#endif
    std::string skip_reason; // non-empty: CUDA requested but unavailable
};

inline Backend& backend() {
    static Backend b = [] {
        Backend r;
        if (!g_want_cuda) return r;
#ifdef H3_WITH_CUDA
        if (cuda::device_count() == 0) {
            r.skip_reason = "no CUDA device";
            return r;
        }
        auto c = CudaContext::create(0);
        if (!c.ok()) {
            r.skip_reason = "CudaContext::create failed: " + c.status().to_string();
            return r;
        }
        r.holder = std::move(c).value();
        r.ctx.device = Device::cuda(0);
        r.ctx.cuda = r.holder.get();
#else
        r.skip_reason = "this build has no CUDA backend";
#endif
        return r;
    }();
    return b;
}
inline bool on_cuda() {
    return g_want_cuda;
}
inline const Context& ctx() {
    return backend().ctx;
}

#define SKIP_IF_NO_BACKEND()                                                                                 \
    do {                                                                                                     \
        if (!backend().skip_reason.empty()) GTEST_SKIP() << backend().skip_reason;                           \
    } while (0)

inline Tensor rnd(const Shape& shape, DType dt, uint32_t seed, float lo = -2.0f, float hi = 2.0f) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(shape.numel()));
    for (float& f : v) f = dist(gen);
    return host_tensor_from(v, shape, dt);
}

// Host values as doubles (contiguous or strided).
inline std::vector<double> values(const Tensor& t) {
    auto r = to_f32_vector(t);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return {r->begin(), r->end()};
}

// Place a host tensor on the backend device (undefined stays undefined).
inline Tensor dev(const Tensor& host) {
    if (!host.defined() || !on_cuda()) return host;
    auto r = host.to(ctx().device);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? std::move(r).value() : Tensor();
}

// Output storage with kGuard bytes of a fixed pattern on both sides, on the backend device.
constexpr size_t kGuard = 256;
constexpr uint8_t kPattern = 0xA5;

class Guarded {
public:
    explicit Guarded(const Tensor& init) : shape_(init.shape()), dtype_(init.dtype()) {
        const size_t total = init.nbytes() + 2 * kGuard;
        auto s = allocate(total, ctx().device);
        EXPECT_TRUE(s.ok()) << s.status().to_string();
        storage_ = std::move(s).value();
        if (ctx().device.is_cpu()) {
            std::memset(storage_->data(), kPattern, total);
        } else {
            EXPECT_TRUE(cuda::memset_device(storage_->data(), kPattern, total).ok());
        }
        t = Tensor::from_storage(storage_, kGuard, shape_, dtype_);
        Status st = t.copy_from(init);
        EXPECT_TRUE(st.ok()) << st.to_string();
    }
    // The payload, back on the host.
    Tensor host() const {
        if (ctx().device.is_cpu()) return t;
        auto r = t.to(Device::cpu());
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        return std::move(r).value();
    }
    bool guards_intact() const {
        std::vector<uint8_t> bytes(storage_->bytes());
        if (ctx().device.is_cpu()) {
            std::memcpy(bytes.data(), storage_->data(), bytes.size());
        } else if (!cuda::memcpy(bytes.data(), storage_->data(), bytes.size(), cuda::CopyKind::kDeviceToHost)
                        .ok()) {
            return false;
        }
        const size_t tail = kGuard + t.nbytes();
        for (size_t i = 0; i < kGuard; ++i)
            if (bytes[i] != kPattern || bytes[tail + i] != kPattern) return false;
        return true;
    }
    Tensor t;

private:
    Shape shape_;
    DType dtype_;
    std::shared_ptr<Storage> storage_;
};

struct Tol {
    double atol, rtol;
};

// The per-op tolerance table row: one Tol per output dtype.
struct TolTable {
    Tol f32, bf16, f16;
    Tol of(DType t) const { return t == DType::kBF16 ? bf16 : (t == DType::kF16 ? f16 : f32); }
};

// Checks finiteness, guards and closeness; prints the first few mismatches.
inline void check_output(const Guarded& out, const std::vector<double>& want, Tol tol) {
    EXPECT_TRUE(out.guards_intact()) << "the op wrote outside its output";
    std::vector<double> got = values(out.host());
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (!std::isfinite(got[i])) {
            if (bad++ < 5) ADD_FAILURE() << "non-finite output [" << i << "] = " << got[i];
            continue;
        }
        const double err = std::fabs(got[i] - want[i]);
        worst = std::max(worst, err);
        if (!(err <= tol.atol + tol.rtol * std::fabs(want[i])) && bad++ < 5)
            ADD_FAILURE() << "[" << i << "] got " << got[i] << " want " << want[i] << " err " << err;
    }
    EXPECT_EQ(bad, 0) << bad << " of " << got.size() << " outside atol " << tol.atol << " rtol " << tol.rtol
                      << " (max abs err " << worst << ")";
}

// A fresh host copy (so the CPU reference in CUDA mode never shares storage with the inputs).
inline Tensor clone(const Tensor& t) {
    auto r = t.to_dtype(t.dtype());
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
}

// A tensor's bytes on the host (copied back from the device where it lives there).
inline std::vector<uint8_t> host_bytes(const Tensor& t) {
    Tensor h = t;
    if (!t.device().is_cpu()) {
        auto r = t.to(Device::cpu());
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        h = std::move(r).value();
    }
    const auto* p = static_cast<const uint8_t*>(h.data());
    return {p, p + h.nbytes()};
}

#define ASSERT_OK(expr)                                                                                      \
    do {                                                                                                     \
        ::h3::Status s_ = (expr);                                                                            \
        ASSERT_TRUE(s_.ok()) << s_.to_string();                                                              \
    } while (0)

// Reads `--backend cuda`, `--backend=cuda` or H3_TEST_BACKEND=cuda (call after InitGoogleTest).
inline void parse_backend(int argc, char** argv) {
    const char* env = std::getenv("H3_TEST_BACKEND");
    if (env && std::string(env) == "cuda") g_want_cuda = true;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--backend=cuda" || (a == "--backend" && i + 1 < argc && std::string(argv[i + 1]) == "cuda"))
            g_want_cuda = true;
    }
}

} // namespace h3::ops::harness
