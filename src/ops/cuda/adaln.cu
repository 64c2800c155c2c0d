// AdaLN modulation and the gated residual: per-row table rows picked by an index, tables with strided rows.
// Elementwise over 8-element chunks; the table row index is re-read per chunk (an L1 hit).
#include "ops/cuda/cuda_kernels.cuh"
#include "ops/cuda/cuda_ops.h"

namespace h3::ops::cuda_impl {

using namespace cuda_detail;

namespace {

constexpr int kBlock = 256;

struct TableArgs {
    int64_t rows, d, table_rows;
    const void* row;
    bool row64;
    int table_type;
    bool round_intermediate;
};

template <int N, typename TX, typename TY>
__global__ void modulate_kernel(const TX* __restrict__ x, const void* __restrict__ shift, int64_t shift_pitch,
                                const void* __restrict__ scale, int64_t scale_pitch, TY* __restrict__ y,
                                TableArgs a) {
    const int64_t per_row = a.d / N, chunks = a.rows * per_row;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t r = i / per_row, c = (i - r * per_row) * N;
        int64_t t = load_index(a.row, a.row64, r);
        if (t < 0 || t >= a.table_rows) continue;
        float v[N], sh[N], sc[N];
        load_vec<N>(x + r * a.d + c, v);
        load_vec_any<N>(shift, a.table_type, t * shift_pitch + c, sh);
        load_vec_any<N>(scale, a.table_type, t * scale_pitch + c, sc);
#pragma unroll
        for (int j = 0; j < N; ++j) {
            // bf16 emulation of eager PyTorch: (1 + scale) and the product are rounded (cuda_ops.h).
            float one_plus = 1.0f + sc[j];
            if (a.round_intermediate) one_plus = round_to<TY>(one_plus);
            float m = v[j] * one_plus;
            if (a.round_intermediate) m = round_to<TY>(m);
            v[j] = m + sh[j];
        }
        store_vec<N>(y + r * a.d + c, v);
    }
}

template <int N, typename TH, typename TY>
__global__ void gated_residual_kernel(TH* __restrict__ h, const void* __restrict__ gate, int64_t gate_pitch,
                                      const TY* __restrict__ y, TableArgs a) {
    const int64_t per_row = a.d / N, chunks = a.rows * per_row;
    for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < chunks;
         i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t r = i / per_row, c = (i - r * per_row) * N;
        int64_t t = load_index(a.row, a.row64, r);
        if (t < 0 || t >= a.table_rows) continue;
        float hv[N], g[N], yv[N];
        load_vec<N>(h + r * a.d + c, hv);
        load_vec_any<N>(gate, a.table_type, t * gate_pitch + c, g);
        load_vec<N>(y + r * a.d + c, yv);
#pragma unroll
        for (int j = 0; j < N; ++j) {
            float m = g[j] * yv[j];
            if (a.round_intermediate) m = round_to<TH>(m);
            hv[j] += m;
        }
        store_vec<N>(h + r * a.d + c, hv);
    }
}

TableArgs table_args(const Tensor& x, const Tensor& row, const Tensor& table, int64_t table_rows,
                     bool round_intermediate) {
    TableArgs a{};
    a.d = x.dim(-1);
    a.rows = a.d == 0 ? 0 : x.numel() / a.d;
    a.table_rows = table_rows;
    a.row = row.data();
    a.row64 = row.dtype() == DType::kI64;
    a.table_type = static_cast<int>(table.dtype());
    a.round_intermediate = round_intermediate;
    return a;
}

} // namespace

Status modulate(const Context& ctx, const ModulateParams& p, const Tensor& x, const Tensor& shift,
                const Tensor& scale, const Tensor& row, Tensor& y) {
    if (shift.dtype() != scale.dtype())
        return unimplemented("CUDA modulate: shift and scale tables must share a dtype");
    TableArgs a = table_args(x, row, shift, shift.dim(0) < scale.dim(0) ? shift.dim(0) : scale.dim(0),
                             p.round_intermediate);
    if (a.rows == 0 || a.d == 0) return ok_status();
    const bool vec = a.d % 8 == 0 && pointer_alignment(x.data()) >= 16 && pointer_alignment(y.data()) >= 16 &&
                     table_vec8_ok(shift) && table_vec8_ok(scale);
    return dispatch_float(x.dtype(), [&](auto tx) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TX = typename decltype(tx)::type;
            using TY = typename decltype(ty)::type;
            auto xp = x.data_as<const TX>();
            auto yp = y.data_as<TY>();
            if (vec)
                modulate_kernel<8><<<grid_for(a.rows * a.d / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(
                    xp, shift.data(), shift.stride(0), scale.data(), scale.stride(0), yp, a);
            else
                modulate_kernel<1><<<grid_for(a.rows * a.d, kBlock), kBlock, 0, stream_of(ctx)>>>(
                    xp, shift.data(), shift.stride(0), scale.data(), scale.stride(0), yp, a);
            return check_launch("modulate");
        });
    });
}

Status gated_residual(const Context& ctx, const GatedResidualParams& p, Tensor& h, const Tensor& gate,
                      const Tensor& y, const Tensor& row) {
    TableArgs a = table_args(h, row, gate, gate.dim(0), p.round_intermediate);
    if (a.rows == 0 || a.d == 0) return ok_status();
    const bool vec = a.d % 8 == 0 && pointer_alignment(h.data()) >= 16 && pointer_alignment(y.data()) >= 16 &&
                     table_vec8_ok(gate);
    return dispatch_float(h.dtype(), [&](auto th) {
        return dispatch_float(y.dtype(), [&](auto ty) {
            using TH = typename decltype(th)::type;
            using TY = typename decltype(ty)::type;
            auto hp = h.data_as<TH>();
            auto yp = y.data_as<const TY>();
            if (vec)
                gated_residual_kernel<8><<<grid_for(a.rows * a.d / 8, kBlock), kBlock, 0, stream_of(ctx)>>>(
                    hp, gate.data(), gate.stride(0), yp, a);
            else
                gated_residual_kernel<1><<<grid_for(a.rows * a.d, kBlock), kBlock, 0, stream_of(ctx)>>>(
                    hp, gate.data(), gate.stride(0), yp, a);
            return check_launch("gated_residual");
        });
    });
}

} // namespace h3::ops::cuda_impl
