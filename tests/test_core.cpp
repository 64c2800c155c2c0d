// Core: dtype conversions (exact rounding), Tensor views and copies, Status/Result, devices.
#include "core/chunk_download.h"
#include "core/device.h"
#include "core/dtype.h"
#include "core/status.h"
#include "core/storage.h"
#include "core/tensor.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace h3;

TEST(DType, Bf16RoundTripIsExactForEveryPattern) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        float f = bf16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        ASSERT_EQ(f32_to_bf16(f), h) << "pattern " << h;
    }
}

TEST(DType, Bf16RoundsHalfToEven) {
    // 1 + 2^-8 lies halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.00390625f)), 1.0f);
    // 1 + 3·2^-8 lies halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.01171875f)), 1.015625f);
    // Just above the halfway point rounds up.
    EXPECT_EQ(bf16_to_f32(f32_to_bf16(std::nextafter(1.00390625f, 2.0f))), 1.0078125f);
    EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
    EXPECT_TRUE(std::isinf(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::infinity()))));
}

TEST(DType, F16RoundTripIsExactForEveryPattern) {
    for (uint32_t h = 0; h < 0x10000; ++h) {
        float f = f16_to_f32(static_cast<uint16_t>(h));
        if (std::isnan(f)) continue;
        ASSERT_EQ(f32_to_f16(f), h) << "pattern " << h;
    }
}

TEST(DType, F16MatchesNearestEvenOnRandomFloats) {
    // Reference: the nearest of the two f16 neighbours in double precision, ties to an even pattern.
    std::mt19937 rng(7);
    std::uniform_int_distribution<uint32_t> bits(0, 0xffffffffu);
    for (int i = 0; i < 200000; ++i) {
        float x = f32_from_bits(bits(rng));
        if (std::isnan(x) || std::fabs(x) >= 65504.0f) continue;
        uint16_t r = f32_to_f16(x);
        double got = f16_to_f32(r);
        // neighbours one ulp away in f16 (same sign)
        uint16_t up = static_cast<uint16_t>(r + 1), dn = static_cast<uint16_t>(r - 1);
        for (uint16_t n : {up, dn}) {
            double other = f16_to_f32(n);
            if (std::isnan(other) || std::isinf(other) ||
                (std::signbit(other) != std::signbit(got) && other != 0))
                continue;
            double dg = std::fabs(got - x), dn2 = std::fabs(other - x);
            ASSERT_LE(dg, dn2) << "x=" << x << " got " << got << " but " << other << " is closer";
            if (dg == dn2) ASSERT_EQ(r & 1, 0) << "tie not to even for x=" << x;
        }
    }
    EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff); // below the halfway point to 65536: max finite
    EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00); // ties to even → overflow to inf
    EXPECT_EQ(f16_to_f32(f32_to_f16(std::ldexp(1.0f, -24))), std::ldexp(1.0f, -24)); // smallest subnormal
    EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0);                                 // tie → even (zero)
    EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 1);
}

TEST(DType, Fp8E4M3RoundTripAndSaturation) {
    for (uint32_t v = 0; v < 256; ++v) {
        float f = f8e4m3_to_f32(static_cast<uint8_t>(v));
        if (std::isnan(f)) continue;
        ASSERT_EQ(f32_to_f8e4m3(f), v) << "pattern " << v << " value " << f;
    }
    EXPECT_EQ(f8e4m3_to_f32(0x7e), 448.0f);
    EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1000.0f)), 448.0f);
    EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(-1e9f)), -448.0f);
    EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(std::numeric_limits<float>::infinity())), 448.0f);
    EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(464.0f)), 448.0f); // halfway to the NaN slot: saturate
    EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(1.0625f)), 1.0f);  // tie between 1 and 1.125 → even
    EXPECT_EQ(f8e4m3_to_f32(f32_to_f8e4m3(std::ldexp(1.0f, -9))), std::ldexp(1.0f, -9)); // min subnormal
    EXPECT_TRUE(std::isnan(f8e4m3_to_f32(f32_to_f8e4m3(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(DType, NamesParse) {
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kI8, DType::kU8,
                    DType::kI32, DType::kI64, DType::kBool}) {
        EXPECT_EQ(parse_dtype(dtype_name(t)), t);
        EXPECT_EQ(parse_safetensors_dtype(dtype_safetensors_name(t)), t);
    }
    EXPECT_FALSE(parse_safetensors_dtype("F7").has_value());
}

TEST(Tensor, ViewsSliceAndContiguousCopy) {
    Tensor t = Tensor::host(Shape{3, 4}, DType::kF32);
    for (int i = 0; i < 12; ++i) t.data_as<float>()[i] = static_cast<float>(i);
    Tensor col = t.slice(1, 1, 3); // [3,2], strided
    EXPECT_FALSE(col.is_contiguous());
    EXPECT_EQ(col.get({2, 1}), 10.0);
    auto c = col.contiguous();
    ASSERT_TRUE(c.ok());
    EXPECT_TRUE(c->is_contiguous());
    std::vector<float> expect = {1, 2, 5, 6, 9, 10};
    EXPECT_EQ(*to_f32_vector(*c), expect);
    Tensor v = t.view({2, -1});
    EXPECT_EQ(v.dim(1), 6);
    auto bf = t.to_dtype(DType::kBF16);
    ASSERT_TRUE(bf.ok());
    EXPECT_EQ(bf->get({2, 3}), 11.0);
    auto bad = Tensor::empty(Shape{-1, 2}, DType::kF32);
    EXPECT_FALSE(bad.ok());
}

TEST(Tensor, CopyFromChecksShapes) {
    Tensor a = Tensor::host(Shape{2, 2}, DType::kF32);
    Tensor b = Tensor::host(Shape{4}, DType::kF32);
    Status s = b.copy_from(a);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.message().find("f32[2, 2]"), std::string::npos);
}

// Host allocations: zero-filled whatever their size; from kHugeHostBytes on aligned to 2 MiB (the huge-page
// advice needs whole 2 MiB pages); the uninitialised variant has the same size and alignment and is writable.
TEST(Storage, HostAllocationsZeroedAndAligned) {
    for (const size_t bytes : {size_t{1}, size_t{1000}, kHugeHostBytes - 8, kHugeHostBytes + 12345}) {
        SCOPED_TRACE("bytes " + std::to_string(bytes));
        auto s = allocate_host(bytes);
        ASSERT_TRUE(s.ok()) << s.status().to_string();
        ASSERT_EQ((*s)->bytes(), bytes);
        const auto* p = static_cast<const unsigned char*>((*s)->data());
        const uintptr_t align = bytes >= kHugeHostBytes ? uintptr_t{2} << 20 : 64;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
        size_t nonzero = 0;
        for (size_t i = 0; i < bytes; ++i) nonzero += p[i] != 0;
        EXPECT_EQ(nonzero, 0u);
        auto u = allocate_host_uninitialized(bytes);
        ASSERT_TRUE(u.ok()) << u.status().to_string();
        ASSERT_EQ((*u)->bytes(), bytes);
        EXPECT_EQ(reinterpret_cast<uintptr_t>((*u)->data()) % align, 0u);
        std::memset((*u)->data(), 0x5A, bytes);
        EXPECT_EQ(static_cast<const unsigned char*>((*u)->data())[bytes - 1], 0x5A);
    }
}

TEST(Status, ResultAndContext) {
    Result<int> r = bad_input("tensor 'x' is short");
    EXPECT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_EQ(r.status().with_context("file a").message(), "file a: tensor 'x' is short");
    Result<int> ok = 3;
    EXPECT_TRUE(ok.ok());
    EXPECT_EQ(*ok, 3);
}

TEST(Device, Parse) {
    EXPECT_EQ(*parse_device("cpu"), Device::cpu());
    EXPECT_EQ(*parse_device("cuda:1"), Device::cuda(1));
    EXPECT_EQ(parse_device("gpu").status().code(), ErrorCode::kInvalidArgument);
    EXPECT_FALSE(parse_device("cuda:x").ok());
}

// ChunkDownload's double-buffering with a stand-in for the device: "device" buffers whose copy to the host
// buffer happens only when the host waits for it (an asynchronous copy that has not run yet), and a log of
// every step. The chunks reach the sink whole and in order; chunk k is handed over only after chunk k+1's
// copy was queued (its download overlapped the next chunk's production), never more than two chunks are
// held, and a slot is never rewritten while its copy is in flight.
namespace {
struct FakeTransferLog {
    std::vector<std::string> steps;
    int violations = 0;
};
class FakeTransfer final : public ChunkTransfer {
public:
    explicit FakeTransfer(FakeTransferLog& log) : log_(log) {}
    Result<Tensor> buffer(int slot, const Shape& shape, DType dtype) override {
        log_.steps.push_back("buffer " + std::to_string(slot));
        if (in_flight_[slot]) ++log_.violations;
        const size_t bytes = static_cast<size_t>(shape.numel()) * dtype_size(dtype);
        if (!device_[slot] || device_[slot]->bytes() < bytes) {
            device_[slot] = allocate_host(bytes).value();
            host_[slot] = allocate_host(bytes).value();
        }
        return Tensor::from_storage(device_[slot], 0, shape, dtype);
    }
    Status queue_copy(int slot, size_t bytes) override {
        log_.steps.push_back("queue " + std::to_string(slot));
        in_flight_[slot] = true;
        bytes_[slot] = bytes;
        return ok_status();
    }
    Status wait(int slot) override {
        log_.steps.push_back("wait " + std::to_string(slot));
        if (in_flight_[slot]) std::memcpy(host_[slot]->data(), device_[slot]->data(), bytes_[slot]);
        in_flight_[slot] = false;
        return ok_status();
    }
    const void* host_bytes(int slot) const override { return host_[slot]->data(); }
    bool synchronous() const override { return false; }

private:
    FakeTransferLog& log_;
    std::shared_ptr<Storage> device_[2], host_[2];
    bool in_flight_[2] = {false, false};
    size_t bytes_[2] = {0, 0};
};
} // namespace

TEST(ChunkDownload, DoubleBufferedOrderOverlapAndBound) {
    FakeTransferLog log;
    std::vector<Tensor> got;
    std::vector<size_t> handed_at; // log length when each chunk reached the sink
    ChunkDownload dl(std::make_unique<FakeTransfer>(log), [&](Tensor t) -> Status {
        got.push_back(std::move(t));
        handed_at.push_back(log.steps.size());
        log.steps.push_back("sink");
        return ok_status();
    });
    const int chunks = 5;
    std::vector<size_t> queued_at;
    for (int k = 0; k < chunks; ++k) {
        auto buf = dl.next(Shape{k + 1, 2, 3}, DType::kU8); // sizes differ: the buffers grow
        ASSERT_TRUE(buf.ok()) << buf.status().to_string();
        std::memset(buf->data(), 10 + k, buf->nbytes()); // the "producer"
        queued_at.push_back(log.steps.size());           // commit's first step queues the copy
        ASSERT_TRUE(dl.commit().ok());
        EXPECT_EQ(log.steps[queued_at.back()], "queue " + std::to_string(k % 2));
        // chunk k-1 was handed over at commit k; chunk k is held
        EXPECT_EQ(got.size(), static_cast<size_t>(k)) << "at commit " << k;
    }
    ASSERT_TRUE(dl.finish().ok());
    ASSERT_EQ(got.size(), static_cast<size_t>(chunks));
    EXPECT_EQ(dl.chunks_delivered(), chunks);
    EXPECT_EQ(log.violations, 0) << "a slot was rewritten while its copy was in flight";
    for (int k = 0; k < chunks; ++k) {
        SCOPED_TRACE(k);
        EXPECT_EQ(got[k].shape(), (Shape{k + 1, 2, 3}));
        EXPECT_TRUE(got[k].device().is_cpu());
        const uint8_t* d = got[k].data_as<const uint8_t>();
        EXPECT_TRUE(std::all_of(d, d + got[k].nbytes(), [&](uint8_t v) { return v == 10 + k; }))
            << "the chunk's bytes, copied before they were read";
        if (k + 1 < chunks)
            EXPECT_GT(handed_at[k], queued_at[k + 1]) << "handed over before the next was queued";
    }
    // the sink's tensors are its own: the later chunks did not overwrite the first
    EXPECT_EQ(got[0].data_as<const uint8_t>()[0], 10);
}

TEST(ChunkDownload, ErrorsAndTheSynchronousHost) {
    // a sink's error ends the download with it
    FakeTransferLog log;
    {
        int calls = 0;
        ChunkDownload dl(std::make_unique<FakeTransfer>(log), [&](Tensor) -> Status {
            return ++calls == 2 ? io_error("sink full") : ok_status();
        });
        for (int k = 0; k < 3; ++k) {
            auto buf = dl.next(Shape{4}, DType::kU8);
            ASSERT_TRUE(buf.ok()) << k;
            const Status st = dl.commit(); // hands over chunk k-1: the second hand-over fails
            EXPECT_EQ(st.ok(), k != 2) << k << ": " << st.to_string();
        }
        EXPECT_FALSE(dl.next(Shape{4}, DType::kU8).ok()) << "no next() after an error";
        EXPECT_FALSE(dl.commit().ok()) << "commit() without next()";
        log.steps.clear(); // destroyed with chunk 2's copy in flight: it is waited for
    }
    EXPECT_EQ(log.steps, (std::vector<std::string>{"wait 0"})) << "the destructor waits for the queued copy";
    // the host transfer (the CPU decode's): every chunk handed over at its own commit
    auto host = make_chunk_transfer(Device::cpu(), nullptr, 16);
    ASSERT_TRUE(host.ok());
    std::vector<int> seen;
    ChunkDownload dl(std::move(host).value(), [&](Tensor t) -> Status {
        seen.push_back(t.data_as<const uint8_t>()[0]);
        return ok_status();
    });
    for (int k = 0; k < 3; ++k) {
        auto buf = dl.next(Shape{40}, DType::kU8); // larger than the slot size given: it grows
        ASSERT_TRUE(buf.ok());
        std::memset(buf->data(), k + 1, 40);
        ASSERT_TRUE(dl.commit().ok());
        EXPECT_EQ(seen.size(), static_cast<size_t>(k) + 1);
    }
    ASSERT_TRUE(dl.finish().ok());
    EXPECT_EQ(seen, (std::vector<int>{1, 2, 3}));
}
