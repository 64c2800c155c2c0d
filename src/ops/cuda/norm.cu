// RMSNorm and RoPE, plain and fused (rms_norm_modulate, head_norm_rope). fp32 math; intermediates are
// rounded exactly where the unfused composition would store them (cuda_ops.h states the contract).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

struct RowNormArgs {
    int64_t rows, d;
    float eps;
    bool round_normed;
    const void* weight; // nullptr: plain norm
    int weight_type;
    // modulate (rms_norm_modulate only)
    const void* shift;
    const void* scale;
    int table_type;
    int64_t shift_pitch, scale_pitch, table_rows;
    const void* row;
    bool row64;
    bool round_intermediate;
};

int row_block(int64_t chunks) {
    int64_t b = ((chunks + 31) / 32) * 32;
    return static_cast<int>(b < 32 ? 32 : (b > 256 ? 256 : b));
}

// One block per row. The second pass re-reads the row, which is still in L1/L2 (a 5376-wide bf16 row is
// 10.5 KiB), so the kernel moves each byte across HBM once.
template <int N, bool kModulate, typename TX, typename TY>
__global__ void row_norm_kernel(const TX* __restrict__ x, TY* __restrict__ y, RowNormArgs a) {
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        int64_t trow = 0;
        if constexpr (kModulate) {
            trow = load_index(a.row, a.row64, r);
            if (trow < 0 || trow >= a.table_rows) continue; // uniform across the block: skip the row
        }
        const TX* xr = x + r * a.d;
        float ss = 0.0f;
        for (int64_t c = threadIdx.x * static_cast<int64_t>(N); c < a.d;
             c += blockDim.x * static_cast<int64_t>(N)) {
            float v[N];
            load_vec<N>(xr + c, v);
#pragma unroll
            for (int j = 0; j < N; ++j) ss += v[j] * v[j];
        }
        ss = block_sum(ss);
        const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.d) + a.eps);
        for (int64_t c = threadIdx.x * static_cast<int64_t>(N); c < a.d;
             c += blockDim.x * static_cast<int64_t>(N)) {
            float v[N], w[N];
            load_vec<N>(xr + c, v);
            if (a.weight) load_vec_any<N>(a.weight, a.weight_type, c, w);
#pragma unroll
            for (int j = 0; j < N; ++j) {
                float n = v[j] * inv;
                // The norm's own output dtype: y for rms_norm, x (PyTorch's RMSNorm) for the fused op.
                if (a.round_normed) n = kModulate ? round_to<TX>(n) : round_to<TY>(n);
                if (a.weight) n *= w[j];
                v[j] = n;
            }
            if constexpr (kModulate) {
                float sh[N], sc[N];
                load_vec_any<N>(a.shift, a.table_type, trow * a.shift_pitch + c, sh);
                load_vec_any<N>(a.scale, a.table_type, trow * a.scale_pitch + c, sc);
#pragma unroll
                for (int j = 0; j < N; ++j) {
                    float one_plus = 1.0f + sc[j];
                    if (a.round_intermediate) one_plus = round_to<TY>(one_plus);
                    float t = round_to<TX>(v[j]) * one_plus;
                    if (a.round_intermediate) t = round_to<TY>(t);
                    v[j] = t + sh[j];
                }
            }
            store_vec<N>(y + r * a.d + c, v);
        }
    }
}

template <bool kModulate, typename TX, typename TY>
Status launch_row_norm(const Context& ctx, const Tensor& x, Tensor& y, const RowNormArgs& a, bool vec) {
    if (a.rows == 0 || a.d == 0) return ok_status();
    const unsigned grid = static_cast<unsigned>(a.rows < (1LL << 30) ? a.rows : (1LL << 30));
    auto xp = x.data_as<const TX>();
    auto yp = y.data_as<TY>();
    if (vec)
        row_norm_kernel<8, kModulate><<<grid, row_block(a.d / 8), 0, stream_of(ctx)>>>(xp, yp, a);
    else
        row_norm_kernel<1, kModulate><<<grid, row_block(a.d), 0, stream_of(ctx)>>>(xp, yp, a);
    return check_launch(kModulate ? "rms_norm_modulate" : "rms_norm");
}

// ---- per-head norm + RoPE: one warp per (position, head) row of dh channels
// -------------------------------------
struct HeadArgs {
    int64_t rows, heads, dh;
    float eps;
    bool do_norm, round_normed;
    const void* weight;
    int weight_type;
    const void* cos; // nullptr: no RoPE
    const void* sin;
    int table_type;
    int rot;
    bool round_tables;
};

template <typename TX> __global__ void head_norm_rope_kernel(TX* __restrict__ x, HeadArgs a) {
    extern __shared__ float smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float* row_buf = smem + warp * a.dh;
    const int64_t warps_total = static_cast<int64_t>(gridDim.x) * (blockDim.x >> 5);
    for (int64_t r = blockIdx.x * static_cast<int64_t>(blockDim.x >> 5) + warp; r < a.rows;
         r += warps_total) {
        TX* xr = x + r * a.dh;
        float ss = 0.0f;
        for (int64_t c = lane; c < a.dh; c += 32) {
            float v = to_f32(xr[c]);
            row_buf[c] = v;
            ss += v * v;
        }
        if (a.do_norm) {
            ss = warp_sum(ss);
            const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.dh) + a.eps);
            for (int64_t c = lane; c < a.dh; c += 32) {
                float n = row_buf[c] * inv;
                if (a.round_normed) n = round_to<TX>(n);
                if (a.weight) n *= load_any(a.weight, a.weight_type, c);
                row_buf[c] = round_to<TX>(n); // the unfused norm stores x's dtype before RoPE reads it
            }
        }
        __syncwarp();
        if (a.cos) {
            const int64_t pos = r / a.heads;
            const int half = a.rot / 2;
            for (int64_t c = lane; c < a.dh; c += 32) {
                float out = row_buf[c];
                if (c < a.rot) {
                    float cs = load_any(a.cos, a.table_type, pos * a.rot + c);
                    float sn = load_any(a.sin, a.table_type, pos * a.rot + c);
                    if (a.round_tables) {
                        // bf16 emulation: each product is rounded before the sum (eager PyTorch).
                        cs = round_to<TX>(cs), sn = round_to<TX>(sn);
                        const float oc = round_to<TX>(out * cs);
                        out = c < half ? oc - round_to<TX>(row_buf[c + half] * sn)
                                       : oc + round_to<TX>(row_buf[c - half] * sn);
                    } else {
                        out =
                            c < half ? out * cs - row_buf[c + half] * sn : out * cs + row_buf[c - half] * sn;
                    }
                }
                xr[c] = from_f32<TX>(out);
            }
        } else {
            for (int64_t c = lane; c < a.dh; c += 32) xr[c] = from_f32<TX>(row_buf[c]);
        }
        __syncwarp(); // row_buf is reused by this warp's next row
    }
}

// kPer consecutive elements of T as fp32, in one access when they span 4, 8 or 16 aligned bytes.
template <int N, typename T> __device__ __forceinline__ void load_lane(const T* p, float (&v)[N]) {
    constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
    if constexpr (kBytes == 16 || kBytes == 8 || kBytes == 4) {
        using Raw = std::conditional_t<kBytes == 16, uint4, std::conditional_t<kBytes == 8, uint2, uint32_t>>;
        const Raw raw = *reinterpret_cast<const Raw*>(p);
        const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = to_f32(e[j]);
    } else {
#pragma unroll
        for (int j = 0; j < N; ++j) v[j] = to_f32(p[j]);
    }
}
template <int N, typename T> __device__ __forceinline__ void store_lane(T* p, const float (&v)[N]) {
    constexpr int kBytes = static_cast<int>(sizeof(T)) * N;
    if constexpr (kBytes == 16 || kBytes == 8 || kBytes == 4) {
        using Raw = std::conditional_t<kBytes == 16, uint4, std::conditional_t<kBytes == 8, uint2, uint32_t>>;
        Raw raw;
        T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
        for (int j = 0; j < N; ++j) e[j] = from_f32<T>(v[j]);
        *reinterpret_cast<Raw*>(p) = raw;
    } else {
#pragma unroll
        for (int j = 0; j < N; ++j) p[j] = from_f32<T>(v[j]);
    }
}

// The same per-head norm + RoPE for head dims of 64 and 128 (the DiT's and the video VAE's), register-only:
// lane l owns the kPer = dh/32 consecutive channels from l·kPer (one vector access), the RoPE partner
// (c ± rot/2) comes from lane l ± rot/(2·kPer) by a shuffle, and every warp handles two rows with both loads
// in flight before either is used. The generic kernel above ran at ~0.65 TB/s on the DiT's q/k (H200).
// Needs rot/2 to be a multiple of kPer (so a lane's channels are all on one side of the rotation) and a
// 16-byte aligned x.
template <typename TX, int kPer, bool kRope>
__global__ void __launch_bounds__(256) head_norm_rope_lanes_kernel(TX* __restrict__ x, HeadArgs a) {
    constexpr int kRowsPerWarp = 2;
    const int lane = threadIdx.x & 31;
    const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
    const int64_t r0 = warp * kRowsPerWarp;
    if (r0 >= a.rows) return; // warp-uniform
    const int c0 = lane * kPer;
    float v[kRowsPerWarp][kPer];
#pragma unroll
    for (int k = 0; k < kRowsPerWarp; ++k) {
        if (r0 + k < a.rows) {
            load_lane<kPer>(x + (r0 + k) * a.dh + c0, v[k]);
        } else {
#pragma unroll
            for (int j = 0; j < kPer; ++j) v[k][j] = 0.0f;
        }
    }
    float wv[kPer];
#pragma unroll
    for (int j = 0; j < kPer; ++j) wv[j] = a.weight ? load_any(a.weight, a.weight_type, c0 + j) : 1.0f;
#pragma unroll
    for (int k = 0; k < kRowsPerWarp; ++k) {
        const int64_t r = r0 + k;
        if (r >= a.rows) break; // warp-uniform
        if (a.do_norm) {
            float ss = 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) ss += v[k][j] * v[k][j];
            ss = warp_sum(ss);
            const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.dh) + a.eps);
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
                float n = v[k][j] * inv;
                if (a.round_normed) n = round_to<TX>(n);
                if (a.weight) n *= wv[j];
                v[k][j] = round_to<TX>(n); // the unfused norm stores x's dtype before RoPE reads it
            }
        }
        if constexpr (kRope) {
            const int half = a.rot / 2;
            const bool lo = c0 < half, in_rot = c0 < a.rot;
            const int src = lo ? lane + half / kPer : (in_rot ? lane - half / kPer : lane);
            float pv[kPer];
#pragma unroll
            for (int j = 0; j < kPer; ++j) pv[j] = __shfl_sync(0xffffffffu, v[k][j], src);
            if (in_rot) {
                const int64_t pos = r / a.heads;
#pragma unroll
                for (int j = 0; j < kPer; ++j) {
                    float cs = load_any(a.cos, a.table_type, pos * a.rot + c0 + j);
                    float sn = load_any(a.sin, a.table_type, pos * a.rot + c0 + j);
                    const float out = v[k][j];
                    if (a.round_tables) {
                        cs = round_to<TX>(cs), sn = round_to<TX>(sn);
                        const float oc = round_to<TX>(out * cs);
                        v[k][j] = lo ? oc - round_to<TX>(pv[j] * sn) : oc + round_to<TX>(pv[j] * sn);
                    } else {
                        v[k][j] = lo ? out * cs - pv[j] * sn : out * cs + pv[j] * sn;
                    }
                }
            }
        }
        store_lane<kPer>(x + r * a.dh + c0, v[k]);
    }
}

template <int kPer> Status launch_head_lanes(const Context& ctx, Tensor& x, const HeadArgs& a) {
    const int64_t warps = (a.rows + 1) / 2;
    const int64_t blocks = (warps + 7) / 8;
    if (blocks > 2147483647LL) return unimplemented("CUDA head_norm_rope: too many rows");
    return dispatch_float(x.dtype(), [&](auto tx) {
        using TX = typename decltype(tx)::type;
        if (a.cos)
            head_norm_rope_lanes_kernel<TX, kPer, true>
                <<<static_cast<unsigned>(blocks), 256, 0, stream_of(ctx)>>>(x.data_as<TX>(), a);
        else
            head_norm_rope_lanes_kernel<TX, kPer, false>
                <<<static_cast<unsigned>(blocks), 256, 0, stream_of(ctx)>>>(x.data_as<TX>(), a);
        return check_launch("head_norm_rope");
    });
}

Status launch_head(const Context& ctx, Tensor& x, const HeadArgs& a) {
    if (a.rows == 0 || a.dh == 0) return ok_status();
    if ((a.dh == 64 || a.dh == 128) && pointer_alignment(x.data()) >= 16) {
        const int per = static_cast<int>(a.dh / 32);
        if (!a.cos || (a.rot % (2 * per) == 0 && a.rot <= a.dh))
            return per == 4 ? launch_head_lanes<4>(ctx, x, a) : launch_head_lanes<2>(ctx, x, a);
    }
    constexpr int kWarps = 8;
    const size_t smem = static_cast<size_t>(kWarps) * static_cast<size_t>(a.dh) * sizeof(float);
    if (smem > 48 * 1024) return unimplemented("CUDA head_norm_rope: head dim too large");
    const unsigned grid = grid_for(a.rows, kWarps, 1LL << 30);
    return dispatch_float(x.dtype(), [&](auto tx) {
        using TX = typename decltype(tx)::type;
        head_norm_rope_kernel<TX><<<grid, kWarps * 32, smem, stream_of(ctx)>>>(x.data_as<TX>(), a);
        return check_launch("head_norm_rope");
    });
}

HeadArgs head_args(const Tensor& x, const RopeParams& rp, const Tensor& cos, const Tensor& sin) {
    HeadArgs a{};
    a.heads = x.dim(1);
    a.dh = x.dim(2);
    a.rows = x.dim(0) * a.heads;
    if (cos.defined()) {
        a.cos = cos.data();
        a.sin = sin.data();
        a.table_type = static_cast<int>(cos.dtype());
        a.rot = rp.rotary_dim;
        a.round_tables = rp.round_tables;
    }
    return a;
}

} // namespace

Status rms_norm(const Context& ctx, const RmsNormParams& p, const Tensor& x, const Tensor& weight,
                Tensor& y) {
    RowNormArgs a{};
    a.d = x.dim(-1);
    a.rows = a.d == 0 ? 0 : x.numel() / a.d;
    a.eps = p.eps;
    a.round_normed = p.round_normed;
    if (weight.defined()) a.weight = weight.data(), a.weight_type = static_cast<int>(weight.dtype());
    bool vec = a.d % 8 == 0 && pointer_alignment(x.data()) >= 16 && pointer_alignment(y.data()) >= 16 &&
               (!weight.defined() || pointer_alignment(weight.data()) >= 16);
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            return launch_row_norm<false, typename decltype(tx)::type, typename decltype(ty)::type>(ctx, x, y,
                                                                                                    a, vec);
        });
    });
}

Status rms_norm_modulate(const Context& ctx, const RmsNormParams& np, const ModulateParams& mp,
                         const Tensor& x, const Tensor& weight, const Tensor& shift, const Tensor& scale,
                         const Tensor& row, Tensor& y) {
    if (shift.dtype() != scale.dtype())
        return unimplemented("CUDA rms_norm_modulate: shift and scale tables must share a dtype");
    RowNormArgs a{};
    a.d = x.dim(-1);
    a.rows = a.d == 0 ? 0 : x.numel() / a.d;
    a.eps = np.eps;
    a.round_normed = np.round_normed;
    if (weight.defined()) a.weight = weight.data(), a.weight_type = static_cast<int>(weight.dtype());
    a.shift = shift.data();
    a.scale = scale.data();
    a.table_type = static_cast<int>(shift.dtype());
    a.shift_pitch = shift.stride(0);
    a.scale_pitch = scale.stride(0);
    a.table_rows = shift.dim(0) < scale.dim(0) ? shift.dim(0) : scale.dim(0);
    a.row = row.data();
    a.row64 = row.dtype() == DType::kI64;
    a.round_intermediate = mp.round_intermediate;
    bool vec = a.d % 8 == 0 && pointer_alignment(x.data()) >= 16 && pointer_alignment(y.data()) >= 16 &&
               (!weight.defined() || pointer_alignment(weight.data()) >= 16) && table_vec8_ok(shift) &&
               table_vec8_ok(scale);
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            return launch_row_norm<true, typename decltype(tx)::type, typename decltype(ty)::type>(ctx, x, y,
                                                                                                   a, vec);
        });
    });
}

Status head_norm_rope(const Context& ctx, const RmsNormParams& np, const RopeParams& rp, Tensor& x,
                      const Tensor& weight, const Tensor& cos, const Tensor& sin) {
    HeadArgs a = head_args(x, rp, cos, sin);
    a.do_norm = true;
    a.eps = np.eps;
    a.round_normed = np.round_normed;
    if (weight.defined()) a.weight = weight.data(), a.weight_type = static_cast<int>(weight.dtype());
    return launch_head(ctx, x, a);
}

Status rope(const Context& ctx, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin) {
    HeadArgs a = head_args(x, p, cos, sin);
    a.do_norm = false;
    return launch_head(ctx, x, a);
}

} // namespace h3::ops::cuda_impl
