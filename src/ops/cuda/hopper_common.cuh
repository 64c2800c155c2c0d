// Hopper (sm_90a) building blocks for the attention kernels: mbarriers, TMA tile loads
// (cp.async.bulk.tensor completing on an mbarrier), wgmma shared-memory descriptors and fences, register
// reallocation (setmaxnreg), named barriers. Device code exists only in the sm_90a pass (H3_SM90A); the host
// side builds tensor maps through cuTensorMapEncodeTiled, fetched with cudaGetDriverEntryPointByVersion so
// the library needs no link against libcuda. Private to ops/cuda (.cu files only).
#pragma once

#include "ops/cuda/cuda_common.h"
#include "ops/cuda/tensor_map.h"

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define H3_SM90A 1
#endif

namespace h3::ops::cuda_detail {

#ifdef H3_SM90A
namespace sm90 {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- mbarriers
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_init_fence() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile("{\n"
                     ".reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n"
                     "}\n"
                     : "=r"(done)
                     : "r"(bar), "r"(parity)
                     : "memory");
    } while (!done);
}

// ---- TMA: one box of a tensor map into shared memory, completing `bytes` on `bar`
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0,
                                            int c1, int c2) {
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, "
        "%4, %5}], [%2];" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
        : "memory");
}
__device__ __forceinline__ void tma_prefetch_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- wgmma
// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading / stride byte offsets (see the
// PTX ISA's canonical layouts: K-major uses SBO = 8 rows · 128 B, LBO unused; MN-major uses LBO = the
// distance between 64-element MN blocks, SBO = between 8-row K groups). Atoms must be 1024-byte aligned.
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    uint64_t d = 0;
    d |= static_cast<uint64_t>((addr & 0x3FFFF) >> 4);
    d |= static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16;
    d |= static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32;
    d |= static_cast<uint64_t>(1) << 62; // 128-byte swizzle
    return d;
}
// The same for a 64-byte swizzle (K-major: 64-byte rows, SBO = 8 rows · 64 B; atoms 512-byte aligned).
__device__ __forceinline__ uint64_t smem_desc_sw64(uint32_t addr, uint32_t lbo, uint32_t sbo) {
    return (smem_desc(addr, lbo, sbo) & ~(uint64_t(3) << 62)) | (uint64_t(2) << 62);
}
// `d` advanced by `bytes` (a multiple of 16 that stays inside the 18-bit address field). The add is an
// asm volatile so the compiler computes it where it is used instead of hoisting one 64-bit descriptor per
// k-step out of the main loop (which costs the registers the pipelined wgmmas need).
__device__ __forceinline__ uint64_t desc_add(uint64_t d, uint32_t bytes) {
    uint32_t lo = static_cast<uint32_t>(d);
    const uint32_t hi = static_cast<uint32_t>(d >> 32);
    asm volatile("add.u32 %0, %0, %1;" : "+r"(lo) : "r"(bytes >> 4));
    return (static_cast<uint64_t>(hi) << 32) | lo;
}
__device__ __forceinline__ void wgmma_fence() {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keeps the compiler from moving register reads/writes of `r` across an asynchronous wgmma boundary.
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N> __device__ __forceinline__ void fence_regs(uint32_t (&r)[N]) {
#pragma unroll
    for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// ---- register reallocation between warpgroups
template <int R> __device__ __forceinline__ void regs_dealloc() {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(R));
}
template <int R> __device__ __forceinline__ void regs_alloc() {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(R));
}

// ---- named barriers (ids 1..15; 0 is __syncthreads)
__device__ __forceinline__ void named_sync(int id, int threads) {
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id, int threads) {
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// `a` if kFirst, else `b` (a reference either way): the attention kernels' second P register set, or the
// first one again where only one fits.
template <bool kFirst, class A, class B> __device__ __forceinline__ decltype(auto) pick(A& a, B& b) {
    if constexpr (kFirst)
        return (a);
    else
        return (b);
}

__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// Four floats to four e4m3 bytes (first in the low byte), round to nearest even, saturating to ±448.
__device__ __forceinline__ uint32_t pack_e4m3(float a, float b, float c, float d) {
    uint16_t lo, hi;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
    return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

} // namespace sm90
#endif // H3_SM90A

} // namespace h3::ops::cuda_detail
