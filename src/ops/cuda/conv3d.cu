// CUDA conv3d, three implementations (CudaContext::conv3d_impl, H3_CONV3D; see cuda_context.h):
//  - fp16 (the default under ctx.allow_tf32 on sm_80+, any Cin): fp16 operands, fp32 accumulation on
//    tensor cores over a channels-last, explicitly padded fp16 copy of the input and fp16 weights, both with
//    Cin rounded up to a multiple of 8 by zero channels (conv_in's Cin = 3 runs as 8) (conv3d_f16.cu). The
//    GEMM runs on Hopper warpgroup MMAs (conv3d_wgmma.cu: m64n256k16, 128 × 256 CTA tiles) on sm_90a where
//    the padded Cin is a multiple of 64 and the grid fills the device, else on mma.sync m16n8k16 with
//    16-byte cp.async loads through a 4-stage ring ("igemm16"). fp16 has TF32's 10-bit mantissa, so this is
//    the rounding class allow_tf32 promises; its narrower exponent is discussed there.
//    On the H200 ~270 TFLOP/s on the encoder's 128-channel 3×3×3 convolutions at 256×256, against ~40 for
//    the kernels below, which were gather-bound (scalar NCDHW loads, 8-deep K steps).
//  - tf32 (and every case igemm16 does not take: allow_tf32 off, cc < 8, int32 / grid limits):
//    the implicit GEMM below over the NCDHW tensors, fp32 FMA or, with ctx.allow_tf32 on sm_80+, TF32 tensor
//    cores. With allow_tf32 off it is the only path: exact fp32.
//  - cudnn (opt-in): cuDNN's convolution in channels-last layout over inputs padded and transposed here
//    (conv3d_cudnn.cpp); shapes it refuses take the default's choice.
// On the H200 the tf32 kernels ran a 5-frame 1344×768 clip in 6.1 s, fp32 FMA in 8.8 s, cuDNN on NCDHW
// tensors 9.6 s (TF32) / 8.4 s (FMA).
// The tf32 implicit GEMM: the weights are first transposed into Wt [taps·Cin, Cout] (k = tap·Cin
// + ci, tap = (kt·KH + kh)·KW + kw) in the context's scratch buffer; then every block computes a 128
// (Cout) × 128 (output pixels of one output frame) tile over the K range of the temporal taps that land on
// real frames for that output frame (the causal zero frames are skipped, block-uniformly). The input tile
// is gathered on the fly (im2col never materialized), padding resolved per index. Double-buffered shared
// memory, 8×8 outputs per thread, fp32 FMA accumulation — or, with ctx.allow_tf32, TF32 tensor cores
// (mma.sync m16n8k8, 8 warps of 64×32, fp32 accumulation; shared rows padded by 8 floats so the fragment
// loads are conflict-free).
#include "ops/cuda/conv3d_cudnn.h"
#include "ops/cuda/conv3d_f16.h"
#include "ops/cuda/cuda_common.h"
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/tensor_map.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kBM = 128, kBN = 128, kBK = 8, kThreads = 256, kPad = 8;

struct Conv3dArgs {
    const float* x;
    const float* wt; // [taps·Cin, Cout]
    const float* bias;
    float* y;
    int cin, t, h, w, cout, kt, kh, kw, to, ho, wo;
    int st, sh, sw, pad_front, pad_top, pad_left, mode;
};

// Source index of padded position i, or −1 for a zero (mode: 0 zeros, 1 reflect, 2 replicate).
__device__ __forceinline__ int pad_index(int i, int n, int mode) {
    if (i >= 0 && i < n) return i;
    if (mode == 1) return i < 0 ? -i : 2 * (n - 1) - i;
    if (mode == 2) return i < 0 ? 0 : n - 1;
    return -1;
}

__global__ void transpose_weights_kernel(const float* __restrict__ w, float* __restrict__ wt, int64_t cout,
                                         int64_t cin, int64_t taps) {
    const int64_t n = cout * cin * taps;
    for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < n;
         o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t co = o % cout, k = o / cout, ci = k % cin, tap = k / cin;
        wt[o] = w[(co * cin + ci) * taps + tap];
    }
}

// xp[b, c, tt, yy, xx] = x[b, c, tt − front, pad(yy − top), pad(xx − left)], zero in front / outside (zeros).
__global__ void pad_input_kernel(const float* __restrict__ x, float* __restrict__ xp, int64_t planes, int t,
                                 int h, int w, int tp, int hp, int wp, int front, int top, int left,
                                 int mode) {
    const int64_t total = planes * tp * hp * wp;
    for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
         o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int xx = static_cast<int>(o % wp);
        const int64_t r = o / wp;
        const int yy = static_cast<int>(r % hp);
        const int64_t r2 = r / hp;
        const int tt = static_cast<int>(r2 % tp);
        const int64_t plane = r2 / tp;
        const int ti = tt - front, yi = pad_index(yy - top, h, mode), xi = pad_index(xx - left, w, mode);
        xp[o] = (ti >= 0 && yi >= 0 && xi >= 0)
                    ? x[((plane * t + ti) * h + yi) * static_cast<int64_t>(w) + xi]
                    : 0.0f;
    }
}

// wt[co, ci, k, :, :] = w[co, ci, first + k, :, :]
__global__ void slice_taps_kernel(const float* __restrict__ w, float* __restrict__ wt, int64_t rows, int kt,
                                  int first, int64_t khw) {
    const int ktu = kt - first;
    const int64_t total = rows * ktu * khw;
    for (int64_t o = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; o < total;
         o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t e = o % khw, r = o / khw, k = r % ktu, row = r / ktu;
        wt[o] = w[(row * kt + first + k) * khw + e];
    }
}

__device__ __forceinline__ uint32_t to_tf32(float f) {
    uint32_t r = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(f));
#else
    __trap(); // TF32 needs sm_80+: the host never picks this path there
#endif
    return r;
}

// c += a·b on one 16×8×8 TF32 tile (sm_80+).
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();
#endif
}

// kCinAligned: Cin % kBK == 0, so the kBK rows of one K step share one tap (block-uniform tap decoding).
// kTf32: the products on TF32 tensor cores instead of fp32 FMA.
template <bool kCinAligned, bool kTf32>
__global__ void __launch_bounds__(kThreads) conv3d_igemm_kernel(const Conv3dArgs a) {
    __shared__ __align__(16) float As[2][kBK][kBM + kPad];
    __shared__ __align__(16) float Bs[2][kBK][kBN + kPad];
    const int tid = threadIdx.x;
    const int frame = blockIdx.z % a.to, b = blockIdx.z / a.to;
    const int m0 = blockIdx.y * kBM, n0 = blockIdx.x * kBN;
    const int np = a.ho * a.wo, khw = a.kh * a.kw;
    const int t_base = frame * a.st - a.pad_front;
    const int kt0 = max(0, -t_base), kt1 = min(a.kt, a.t - t_base);
    const int ktot = max(0, kt1 - kt0) * khw * a.cin;
    const int64_t kbase = static_cast<int64_t>(kt0) * khw * a.cin; // first row of Wt used
    const int64_t hw = static_cast<int64_t>(a.h) * a.w;
    const float* xb = a.x + static_cast<int64_t>(b) * a.cin * a.t * hw;

    // A loads: row k = tid / 32, columns m = (tid % 32)·4 .. +4 of Wt.
    const int a_k = tid >> 5, a_m = (tid & 31) * 4;
    // B loads: pixel n = tid % 128, rows k = tid / 128 + 2j.
    const int b_n = tid & (kBN - 1), b_k = tid >> 7;
    const int pix = n0 + b_n;
    const bool b_ok = pix < np;
    const int oy = b_ok ? pix / a.wo : 0, ox = b_ok ? pix - (pix / a.wo) * a.wo : 0;
    const int iy0 = oy * a.sh - a.pad_top, ix0 = ox * a.sw - a.pad_left;

    float ra[4], rb[4];
    auto load = [&](int k0) {
        {
            const int k = k0 + a_k;
            const float* src = a.wt + (kbase + k) * a.cout;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int co = m0 + a_m + j;
                ra[j] = (k < ktot && co < a.cout) ? __ldg(src + co) : 0.0f;
            }
        }
        if (kCinAligned) {
            const int tap = k0 / a.cin, ci0 = k0 - tap * a.cin; // uniform
            const int dt = tap / khw, r = tap - dt * khw, dy = r / a.kw, dx = r - dy * a.kw;
            const int iy = pad_index(iy0 + dy, a.h, a.mode), ix = pad_index(ix0 + dx, a.w, a.mode);
            const bool ok = b_ok && k0 < ktot && iy >= 0 && ix >= 0;
            const float* src = xb + (static_cast<int64_t>(ci0) * a.t + t_base + kt0 + dt) * hw +
                               static_cast<int64_t>(iy) * a.w + ix;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                rb[j] = ok ? __ldg(src + static_cast<int64_t>(b_k + 2 * j) * a.t * hw) : 0.0f;
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int k = k0 + b_k + 2 * j;
                float v = 0.0f;
                if (b_ok && k < ktot) {
                    const int tap = k / a.cin, ci = k - tap * a.cin;
                    const int dt = tap / khw, r = tap - dt * khw, dy = r / a.kw, dx = r - dy * a.kw;
                    const int iy = pad_index(iy0 + dy, a.h, a.mode), ix = pad_index(ix0 + dx, a.w, a.mode);
                    if (iy >= 0 && ix >= 0)
                        v = __ldg(xb + (static_cast<int64_t>(ci) * a.t + t_base + kt0 + dt) * hw +
                                  static_cast<int64_t>(iy) * a.w + ix);
                }
                rb[j] = v;
            }
        }
    };
    auto store = [&](int buf) {
        *reinterpret_cast<float4*>(&As[buf][a_k][a_m]) = make_float4(ra[0], ra[1], ra[2], ra[3]);
#pragma unroll
        for (int j = 0; j < 4; ++j) Bs[buf][b_k + 2 * j][b_n] = rb[j];
    };

    if constexpr (kTf32) {
        // Warp w owns rows (w / 4)·64 + [0, 64) and columns (w % 4)·32 + [0, 32): 4 × 4 tiles of 16 × 8.
        const int warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
        const int wm = (warp >> 2) * 64, wn = (warp & 3) * 32;
        float acc[4][4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
        if (ktot > 0) {
            load(0);
            store(0);
            __syncthreads();
            int buf = 0;
            for (int k0 = 0; k0 < ktot; k0 += kBK) {
                const bool more = k0 + kBK < ktot;
                if (more) load(k0 + kBK);
                uint32_t af[4][4], bf[4][2];
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int m = wm + i * 16 + g;
                    af[i][0] = to_tf32(As[buf][t4][m]);
                    af[i][1] = to_tf32(As[buf][t4][m + 8]);
                    af[i][2] = to_tf32(As[buf][t4 + 4][m]);
                    af[i][3] = to_tf32(As[buf][t4 + 4][m + 8]);
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int n = wn + j * 8 + g;
                    bf[j][0] = to_tf32(Bs[buf][t4][n]);
                    bf[j][1] = to_tf32(Bs[buf][t4 + 4][n]);
                }
#pragma unroll
                for (int i = 0; i < 4; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) mma_tf32(acc[i][j], af[i], bf[j]);
                if (more) {
                    store(buf ^ 1); // buf ^ 1 was last read before the previous step's barrier
                    __syncthreads();
                    buf ^= 1;
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int co = m0 + wm + i * 16 + g + 8 * h;
                if (co >= a.cout) continue;
                const float bv = a.bias ? a.bias[co] : 0.0f;
                float* yrow = a.y + ((static_cast<int64_t>(b) * a.cout + co) * a.to + frame) * np;
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int p = n0 + wn + j * 8 + 2 * t4 + e;
                        if (p < np) yrow[p] = acc[i][j][2 * h + e] + bv;
                    }
            }
        return;
    }
    // Thread (ty, tx) owns rows ty·4 + {0..3}, 64 + ty·4 + {0..3} and columns tx·4 + {0..3}, 64 + tx·4 + ...
    const int ty = tid >> 4, tx = tid & 15;
    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.0f;
    if (ktot > 0) {
        load(0);
        store(0);
        __syncthreads();
        int buf = 0;
        for (int k0 = 0; k0 < ktot; k0 += kBK) {
            const bool more = k0 + kBK < ktot;
            if (more) load(k0 + kBK);
#pragma unroll
            for (int k = 0; k < kBK; ++k) {
                const float4 a0 = *reinterpret_cast<const float4*>(&As[buf][k][ty * 4]);
                const float4 a1 = *reinterpret_cast<const float4*>(&As[buf][k][64 + ty * 4]);
                const float4 b0 = *reinterpret_cast<const float4*>(&Bs[buf][k][tx * 4]);
                const float4 b1 = *reinterpret_cast<const float4*>(&Bs[buf][k][64 + tx * 4]);
                const float av[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
                const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            if (more) {
                store(buf ^ 1);
                __syncthreads();
                buf ^= 1;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int co = m0 + (i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4);
        if (co >= a.cout) continue;
        const float bv = a.bias ? a.bias[co] : 0.0f;
        float* yrow = a.y + ((static_cast<int64_t>(b) * a.cout + co) * a.to + frame) * np;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int p = n0 + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
            if (p < np) yrow[p] = acc[i][j] + bv;
        }
    }
}

int mode_code(PadMode m) {
    return m == PadMode::kReflect ? 1 : (m == PadMode::kReplicate ? 2 : 0);
}

// The fp16 tensor-core path (conv3d_f16.cu) when it takes the shape: `ran` false otherwise; `fused` true when
// its GEMM also added p.residual.
Status conv3d_f16(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w,
                  const Tensor& bias, Tensor& y, bool& ran, bool& fused) {
    ran = false;
    fused = false;
    constexpr int64_t kIntMax = 2147483647;
    if (x.numel() > kIntMax || w.numel() > kIntMax || y.numel() > kIntMax) return ok_status();
    auto i32 = [](int64_t v) { return static_cast<int>(v); };
    const Conv3dF16Problem q{i32(x.dim(0)), i32(x.dim(1)), i32(x.dim(2)),
                             i32(x.dim(3)), i32(x.dim(4)), i32(w.dim(0)),
                             i32(w.dim(2)), i32(w.dim(3)), i32(w.dim(4)),
                             i32(y.dim(2)), i32(y.dim(3)), i32(y.dim(4)),
                             p.stride_t,    p.stride_h,    p.stride_w,
                             p.pad_front,   p.pad_top,     p.pad_bottom,
                             p.pad_left,    p.pad_right,   mode_code(p.spatial_mode)};
    if (!conv3d_f16_eligible(q)) return ok_status();
    // Scratch is fetched here and used only by the kernels enqueued below (a later call may regrow it).
    H3_ASSIGN_OR_RETURN(void* scratch, ctx.cuda->scratch(conv3d_f16_scratch_bytes(q)));
    Conv3dF16Transform in;
    if (p.input) {
        in.scale = p.input->scale.data_as<const float>();
        in.shift = p.input->shift.data_as<const float>();
        in.silu = p.input->silu;
    }
    // The GEMM: Hopper warpgroup MMAs where they can run and (kAuto) fill the device, else mma.sync.
    const Conv3dImpl impl = ctx.cuda->conv3d_impl();
    const bool wgmma = impl != Conv3dImpl::kIgemm16 && hopper_kernels_usable(ctx) &&
                       conv3d_f16_wgmma_eligible(q) &&
                       (impl == Conv3dImpl::kWgmma || conv3d_f16_wgmma_ctas(q) >= ctx.cuda->sm_count());
    const Conv3dF16Gemm gemm = wgmma ? Conv3dF16Gemm::kWgmma : Conv3dF16Gemm::kMma;
    // The wgmma GEMM adds the residual in its epilogue; after mma.sync the caller adds it.
    const float* residual = wgmma && p.residual ? p.residual->data_as<const float>() : nullptr;
    const char* failed = "conv3d fp16";
    const cudaError_t e =
        conv3d_f16_launch(q, in, x.data_as<const float>(), w.data_as<const float>(),
                          bias.defined() ? bias.data_as<const float>() : nullptr, y.data_as<float>(), scratch,
                          stream_of(ctx), &failed, gemm, residual);
    H3_TRY(cuda_status(e, failed));
    ran = true;
    fused = residual != nullptr;
    return ok_status();
}

} // namespace

} // namespace h3::ops::cuda_impl

namespace h3::ops::cuda_detail {

Status conv3d_pad_input(const Context& ctx, const Tensor& x, int front, int top, int bottom, int left,
                        int right, PadMode mode, float* xp) {
    const int t = static_cast<int>(x.dim(2)), h = static_cast<int>(x.dim(3)), w = static_cast<int>(x.dim(4));
    const int tp = t + front, hp = h + top + bottom, wp = w + left + right;
    const int64_t planes = x.dim(0) * x.dim(1);
    cuda_impl::pad_input_kernel<<<grid_for(planes * tp * hp * wp, 256), 256, 0, stream_of(ctx)>>>(
        x.data_as<const float>(), xp, planes, t, h, w, tp, hp, wp, front, top, left,
        cuda_impl::mode_code(mode));
    return check_launch("conv3d input padding");
}

Status conv3d_slice_taps(const Context& ctx, const Tensor& w, int first, float* wt) {
    const int64_t rows = w.dim(0) * w.dim(1), khw = w.dim(3) * w.dim(4);
    const int kt = static_cast<int>(w.dim(2));
    cuda_impl::slice_taps_kernel<<<grid_for(rows * (kt - first) * khw, 256), 256, 0, stream_of(ctx)>>>(
        w.data_as<const float>(), wt, rows, kt, first, khw);
    return check_launch("conv3d tap slice");
}

} // namespace h3::ops::cuda_detail

namespace h3::ops::cuda_impl {

namespace {

// The convolution through whichever path takes it; `fused` true when that path also added p.residual.
Status conv3d_run(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w,
                  const Tensor& bias, Tensor& y, bool& fused) {
    fused = false;
    const Conv3dImpl impl = ctx.cuda->conv3d_impl();
    // fp16 tensor cores: the TF32 rounding class, so only under allow_tf32; cp.async / mma.sync need sm_80.
    const bool f16_ok = impl != Conv3dImpl::kTf32 && ctx.allow_tf32 && ctx.cuda->cc_major() >= 8;
    if (p.input) {
        // The fp16 path applies the input transform in its conversion pass; every other path convolves u
        // materialized by group_norm_apply (a temporary: those paths are the opt-in and fallback ones).
        if (f16_ok && impl != Conv3dImpl::kCudnn) {
            bool ran = false;
            H3_TRY(conv3d_f16(ctx, p, x, w, bias, y, ran, fused));
            if (ran) return ok_status();
        }
        H3_ASSIGN_OR_RETURN(Tensor u, Tensor::empty(x.shape(), DType::kF32, ctx.device));
        H3_TRY(
            cuda_impl::group_norm_apply(ctx, {.silu = p.input->silu}, x, p.input->scale, p.input->shift, u));
        Conv3dParams plain = p;
        plain.input = nullptr;
        // u goes back through cudaFree, which waits for the device: the convolution has read it by then
        return conv3d_run(ctx, plain, u, w, bias, y, fused);
    }
    if (impl == Conv3dImpl::kCudnn) {
        bool ran = false;
        H3_TRY(cudnn_conv3d(ctx, p, x, w, bias, y, ran));
        if (ran) return ok_status();
    }
    if (f16_ok) {
        bool ran = false;
        H3_TRY(conv3d_f16(ctx, p, x, w, bias, y, ran, fused));
        if (ran) return ok_status();
    }
    const int64_t cout = w.dim(0), cin = w.dim(1), taps = w.dim(2) * w.dim(3) * w.dim(4);
    const int64_t np = y.dim(3) * y.dim(4), frames = y.dim(0) * y.dim(2);
    constexpr int64_t kIntMax = 2147483647;
    if (x.numel() > kIntMax / 4 || y.numel() > kIntMax / 4 || taps * cin > kIntMax / 4 || np > kIntMax / 4)
        return unimplemented("conv3d (CUDA): tensors beyond 2^29 elements per operand");
    if (frames > 65535) return unimplemented("conv3d (CUDA): more than 65535 output frames (B·To)");
    const size_t wt_bytes = static_cast<size_t>(cout * cin * taps) * sizeof(float);
    H3_ASSIGN_OR_RETURN(void* wt, ctx.cuda->scratch(wt_bytes));
    const cudaStream_t stream = stream_of(ctx);
    transpose_weights_kernel<<<grid_for(cout * cin * taps, 256), 256, 0, stream>>>(
        w.data_as<const float>(), static_cast<float*>(wt), cout, cin, taps);
    H3_TRY(check_launch("conv3d weight transpose"));
    Conv3dArgs a{};
    a.x = x.data_as<const float>();
    a.wt = static_cast<const float*>(wt);
    a.bias = bias.defined() ? bias.data_as<const float>() : nullptr;
    a.y = y.data_as<float>();
    a.cin = static_cast<int>(cin);
    a.t = static_cast<int>(x.dim(2));
    a.h = static_cast<int>(x.dim(3));
    a.w = static_cast<int>(x.dim(4));
    a.cout = static_cast<int>(cout);
    a.kt = static_cast<int>(w.dim(2));
    a.kh = static_cast<int>(w.dim(3));
    a.kw = static_cast<int>(w.dim(4));
    a.to = static_cast<int>(y.dim(2));
    a.ho = static_cast<int>(y.dim(3));
    a.wo = static_cast<int>(y.dim(4));
    a.st = p.stride_t;
    a.sh = p.stride_h;
    a.sw = p.stride_w;
    a.pad_front = p.pad_front;
    a.pad_top = p.pad_top;
    a.pad_left = p.pad_left;
    a.mode = mode_code(p.spatial_mode);
    const dim3 grid(static_cast<unsigned>((np + kBN - 1) / kBN),
                    static_cast<unsigned>((cout + kBM - 1) / kBM), static_cast<unsigned>(frames));
    if (grid.y > 65535) return unimplemented("conv3d (CUDA): more than 65535·128 output channels");
    const bool aligned = cin % kBK == 0;
    // TF32 tensor cores exist from sm_80 on; older GPUs (sm_70/sm_75) take the fp32 FMA path.
    if (ctx.allow_tf32 && ctx.cuda->cc_major() >= 8) {
        if (aligned)
            conv3d_igemm_kernel<true, true><<<grid, kThreads, 0, stream>>>(a);
        else
            conv3d_igemm_kernel<false, true><<<grid, kThreads, 0, stream>>>(a);
    } else if (aligned) {
        conv3d_igemm_kernel<true, false><<<grid, kThreads, 0, stream>>>(a);
    } else {
        conv3d_igemm_kernel<false, false><<<grid, kThreads, 0, stream>>>(a);
    }
    return check_launch("conv3d");
}

} // namespace

Status conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
              Tensor& y) {
    if (y.numel() == 0) return ok_status();
    bool fused = false;
    H3_TRY(conv3d_run(ctx, p, x, w, bias, y, fused));
    if (p.residual && !fused) return cuda_impl::add(ctx, y, *p.residual, y);
    return ok_status();
}

} // namespace h3::ops::cuda_impl
