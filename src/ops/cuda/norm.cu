// RMSNorm and RoPE, plain and fused (rms_norm_modulate, head_norm_rope, gated_residual_rms_norm). fp32 math;
// intermediates are rounded exactly where the unfused composition would store them (cuda_ops.h states the
// contract).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/row_norm_args.cuh"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

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
        const float inv = row_inv_rms<N>(xr, a.d, a.eps);
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

// ---- gated residual then RMSNorm: one block per row (GatedNormArgs: row_norm_args.cuh) -----------------

// h += gate[row]·y as gated_residual_kernel does it, the sum of squares of the stored h, then out = the norm
// as row_norm_kernel computes it. Each thread keeps its kIters chunks of the updated row in registers between
// the two halves, so h and y cross HBM once. y is read only before block_sum's barrier and out written only
// after it, so out may alias y (no __restrict__ on either).
template <int N, int kIters, typename TH, typename TO>
__global__ void __launch_bounds__(256) gated_residual_norm_kernel(TH* h, TO* out, GatedNormArgs a) {
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t t = load_index(a.row, a.row64, r);
        if (t < 0 || t >= a.table_rows) continue; // uniform across the block: skip the row
        TH* hr = h + r * a.d;
        float hv[kIters][N];
        float ss = 0.0f;
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
            const int64_t c = (threadIdx.x + static_cast<int64_t>(i) * blockDim.x) * N;
            if (c >= a.d) break;
            float g[N], yv[N];
            load_vec<N>(hr + c, hv[i]);
            load_vec_any<N>(a.gate, a.gate_type, t * a.gate_pitch + c, g);
            load_vec_any<N>(a.y, a.y_type, r * a.d + c, yv);
#pragma unroll
            for (int j = 0; j < N; ++j) {
                // the value the norm reads back from h
                hv[i][j] = gated_residual_value<TH>(hv[i][j], g[j], yv[j], a.round_intermediate);
                ss = __fmaf_rn(hv[i][j], hv[i][j], ss);
            }
            store_vec<N>(hr + c, hv[i]);
        }
        ss = block_sum(ss);
        const float inv = 1.0f / sqrtf(ss / static_cast<float>(a.d) + a.eps);
#pragma unroll
        for (int i = 0; i < kIters; ++i) {
            const int64_t c = (threadIdx.x + static_cast<int64_t>(i) * blockDim.x) * N;
            if (c >= a.d) break;
            float w[N];
            if (a.weight) load_vec_any<N>(a.weight, a.weight_type, c, w);
#pragma unroll
            for (int j = 0; j < N; ++j) hv[i][j] = gated_norm_value<TO>(a, hv[i][j], inv, w[j]);
            store_vec<N>(out + r * a.d + c, hv[i]);
        }
    }
}

// The same for rows wider than the registers hold (gated_norm_plan's iters 0): each thread stores its updated
// chunks of h and reads them back after the barrier (its own writes), in the register kernel's chunk order.
template <int N, typename TH, typename TO>
__global__ void __launch_bounds__(256) gated_residual_norm_wide_kernel(TH* h, TO* out, GatedNormArgs a) {
    const int64_t step = static_cast<int64_t>(blockDim.x) * N;
    for (int64_t r = blockIdx.x; r < a.rows; r += gridDim.x) {
        const int64_t t = load_index(a.row, a.row64, r);
        if (t < 0 || t >= a.table_rows) continue; // uniform across the block: skip the row
        TH* hr = h + r * a.d;
        const float inv = gated_residual_row<N>(hr, a, r, t);
        for (int64_t c = threadIdx.x * static_cast<int64_t>(N); c < a.d; c += step) {
            float hv[N], w[N];
            load_vec<N>(hr + c, hv);
            if (a.weight) load_vec_any<N>(a.weight, a.weight_type, c, w);
#pragma unroll
            for (int j = 0; j < N; ++j) hv[j] = gated_norm_value<TO>(a, hv[j], inv, w[j]);
            store_vec<N>(out + r * a.d + c, hv);
        }
    }
}

template <int N, typename TH, typename TO>
void launch_gated_norm(const Context& ctx, int iters, int threads, TH* h, TO* out, const GatedNormArgs& a) {
    const unsigned grid = static_cast<unsigned>(a.rows < (1LL << 30) ? a.rows : (1LL << 30));
    if (iters == 0)
        gated_residual_norm_wide_kernel<N><<<grid, threads, 0, stream_of(ctx)>>>(h, out, a);
    else if (iters == 1)
        gated_residual_norm_kernel<N, 1><<<grid, threads, 0, stream_of(ctx)>>>(h, out, a);
    else if (iters == 2)
        gated_residual_norm_kernel<N, 2><<<grid, threads, 0, stream_of(ctx)>>>(h, out, a);
    else
        gated_residual_norm_kernel<N, 4><<<grid, threads, 0, stream_of(ctx)>>>(h, out, a);
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

// The same per-head norm + RoPE for head dims of 64 and 128 (the video VAE's and the DiT's), register-only:
// lane l owns the kPer = dh/32 consecutive channels from l·kPer (one vector access) and the RoPE partner
// (c ± rot/2) comes from lane l ± rot/(2·kPer) by a shuffle. A lane moves only 4 or 8 bytes of a row, so
// every warp handles kRows consecutive rows (8 for head dim 64, 4 for 128) with all of their loads in flight
// before any is used; consecutive rows are heads of one position (pos = r / heads), so the lane's cos/sin
// values are loaded once per position, and each row's 1/sqrt is computed on one lane (two rows per warp left
// the video VAE's q/k ~3x below the memory bandwidth; the generic kernel above ran at ~0.65 TB/s on the
// DiT's, H200). Needs rot/2 to be a multiple of kPer (so a lane's channels are all on one side of the
// rotation) and a 16-byte aligned x.
template <int kPer> constexpr int head_rows_per_warp() {
    return kPer == 2 ? 8 : 4;
}

template <typename TX, int kPer, bool kRope>
__global__ void __launch_bounds__(256) head_norm_rope_lanes_kernel(TX* __restrict__ x, HeadArgs a) {
    constexpr int kRows = head_rows_per_warp<kPer>(), kDh = 32 * kPer; // kDh == a.dh
    const int lane = threadIdx.x & 31;
    const int64_t warp = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) >> 5;
    const int64_t r0 = warp * kRows;
    if (r0 >= a.rows) return; // warp-uniform
    const int c0 = lane * kPer;
    // RoPE: the lane's side of the rotation, its partner lane, and its cos/sin at the first row's position
    // (with round_tables rounded to x's dtype as they are loaded), in flight with the rows' loads below.
    const int half = kRope ? a.rot / 2 : 0;
    const bool lo = c0 < half, in_rot = kRope && c0 < a.rot;
    const int src = lo ? lane + half / kPer : (in_rot ? lane - half / kPer : lane);
    int64_t pos = 0, head = 0;
    float cs[kPer], sn[kPer];
    auto load_tables = [&] {
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            cs[j] = load_any(a.cos, a.table_type, pos * a.rot + c0 + j);
            sn[j] = load_any(a.sin, a.table_type, pos * a.rot + c0 + j);
            if (a.round_tables) cs[j] = round_to<TX>(cs[j]), sn[j] = round_to<TX>(sn[j]);
        }
    };
    if constexpr (kRope) {
        // a 32-bit division where the rows allow it (a 64-bit one is a long subroutine)
        pos = a.rows <= 0xffffffffLL ? static_cast<uint32_t>(r0) / static_cast<uint32_t>(a.heads)
                                     : r0 / a.heads;
        head = r0 - pos * a.heads;
        if (in_rot) load_tables();
    }
    float v[kRows][kPer];
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
        if (r0 + k < a.rows) {
            load_lane<kPer>(x + (r0 + k) * kDh + c0, v[k]);
        } else {
#pragma unroll
            for (int j = 0; j < kPer; ++j) v[k][j] = 0.0f;
        }
    }
    if (a.do_norm) {
        float wv[kPer];
#pragma unroll
        for (int j = 0; j < kPer; ++j) wv[j] = a.weight ? load_any(a.weight, a.weight_type, c0 + j) : 1.0f;
        float ss[kRows];
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
            ss[k] = 0.0f;
#pragma unroll
            for (int j = 0; j < kPer; ++j) ss[k] += v[k][j] * v[k][j];
        }
        // warp_sum's butterfly for every row, the rows interleaved
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int k = 0; k < kRows; ++k) ss[k] += __shfl_xor_sync(0xffffffffu, ss[k], o);
        // The scalar tail, 1/sqrt(mean + eps), is a few dozen instructions: lane k computes it for row k
        // (the same operations, once per row rather than on every lane) and broadcasts it.
        float ss_lane = ss[0];
#pragma unroll
        for (int k = 1; k < kRows; ++k)
            if (lane == k) ss_lane = ss[k];
        const float inv_lane = 1.0f / sqrtf(ss_lane / static_cast<float>(kDh) + a.eps);
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
            const float inv = __shfl_sync(0xffffffffu, inv_lane, k);
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
                float n = v[k][j] * inv;
                if (a.round_normed) n = round_to<TX>(n);
                if (a.weight) n *= wv[j];
                v[k][j] = round_to<TX>(n); // the unfused norm stores x's dtype before RoPE reads it
            }
        }
    }
#pragma unroll
    for (int k = 0; k < kRows; ++k) {
        const int64_t r = r0 + k;
        if (r >= a.rows) break; // warp-uniform
        if constexpr (kRope) {
            if (k > 0 && ++head == a.heads) { // the next position
                head = 0, ++pos;
                if (in_rot) load_tables();
            }
            float pv[kPer];
#pragma unroll
            for (int j = 0; j < kPer; ++j) pv[j] = __shfl_sync(0xffffffffu, v[k][j], src);
            if (in_rot) {
#pragma unroll
                for (int j = 0; j < kPer; ++j) {
                    // out·cs ∓ partner·sn. bf16 emulation (round_tables): each product rounded to x's dtype
                    // before the sum, as eager PyTorch does. Otherwise, and in fp32 where that rounding is
                    // none, one fma: the contraction the two-row kernel compiled to, written out so that the
                    // results stay bit-identical.
                    const float ps = a.round_tables ? round_to<TX>(pv[j] * sn[j]) : pv[j] * sn[j];
                    if (a.round_tables && !std::is_same_v<TX, float>)
                        v[k][j] = round_to<TX>(v[k][j] * cs[j]) + (lo ? -ps : ps);
                    else
                        v[k][j] = __fmaf_rn(v[k][j], cs[j], lo ? -ps : ps);
                }
            }
        }
        store_lane<kPer>(x + r * kDh + c0, v[k]);
    }
}

template <int kPer> Status launch_head_lanes(const Context& ctx, Tensor& x, const HeadArgs& a) {
    constexpr int kRows = head_rows_per_warp<kPer>();
    const int64_t warps = (a.rows + kRows - 1) / kRows;
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
    const RowNormArgs a = norm_args(p, x, weight);
    const bool vec = a.d % 8 == 0 && pointer_alignment(x.data()) >= 16 && pointer_alignment(y.data()) >= 16 &&
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
    const RowNormArgs a = modulate_norm_args(np, mp, x, weight, shift, scale, row);
    const bool vec = modulate_norm_vec8(a, x, weight, shift, scale) && pointer_alignment(y.data()) >= 16;
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

Status gated_residual_rms_norm(const Context& ctx, const GatedResidualParams& gp, const RmsNormParams& np,
                               Tensor& h, const Tensor& gate, const Tensor& y, const Tensor& row,
                               const Tensor& norm_weight, Tensor& out) {
    const GatedNormArgs a = gated_norm_args(gp, np, h, gate, y, row, norm_weight);
    if (a.rows == 0 || a.d == 0) return ok_status();
    const bool vec = gated_norm_vec8(a, h, gate, y, norm_weight) && pointer_alignment(out.data()) >= 16;
    const GatedNormPlan plan = gated_norm_plan(a.d, vec);
    const int iters = plan.iters, threads = plan.threads;
    return dispatch_float(h.dtype(), [&](auto th) {
        return dispatch_float(out.dtype(), [&](auto to) {
            using TH = typename decltype(th)::type;
            using TO = typename decltype(to)::type;
            if (vec)
                launch_gated_norm<8>(ctx, iters, threads, h.data_as<TH>(), out.data_as<TO>(), a);
            else
                launch_gated_norm<1>(ctx, iters, threads, h.data_as<TH>(), out.data_as<TO>(), a);
            return check_launch("gated_residual_rms_norm");
        });
    });
}

Status rope(const Context& ctx, const RopeParams& p, Tensor& x, const Tensor& cos, const Tensor& sin) {
    HeadArgs a = head_args(x, p, cos, sin);
    a.do_norm = false;
    return launch_head(ctx, x, a);
}

} // namespace h3::ops::cuda_impl
