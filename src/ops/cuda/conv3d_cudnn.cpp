// conv3d through cuDNN's (legacy, N-d) convolution API in channels-last layout. The first version passed the
// NCDHW tensors as they are; on the H200 that ran no faster than fp32 FMA (a 1344×768 clip: 9.6 s against
// 6.1 s for the built-in TF32 kernels), as cuDNN's tensor-core kernels want NDHWC. So the operands are
// transposed here: x (padded first where cuDNN cannot pad: the causal front frames, reflect / replicate /
// one-sided borders) to [B, T·H·W, C], w to [Cout, taps, Cin] (taps that only ever meet the causal zero
// frames dropped first), cuDNN writes y as [B, To·Ho·Wo, Cout], and one more transpose gives NCDHW; the bias
// is added by cudnnAddTensor. The algorithm per problem comes from cudnnGetConvolutionForwardAlgorithm_v7
// (the first usable GEMM-family result whose workspace fits) and is cached in the CudaContext. Opt-in
// (H3_CONV3D=cudnn) until a device run shows it beats the built-in kernels.
#include "ops/cuda/conv3d_cudnn.h"

#include "ops/cuda/cuda_ops.h"

#include <algorithm>
#include <climits>
#include <iterator>

// The N-d convolution API is marked deprecated in cuDNN 9 in favour of the graph API; it is still shipped and
// supported (PyTorch uses it), and it is all this needs.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace h3::ops::cuda_detail {

namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;

struct Descs {
    cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
    cudnnFilterDescriptor_t w = nullptr;
    cudnnConvolutionDescriptor_t conv = nullptr;
    ~Descs() {
        if (conv) cudnnDestroyConvolutionDescriptor(conv);
        if (w) cudnnDestroyFilterDescriptor(w);
        if (bias) cudnnDestroyTensorDescriptor(bias);
        if (y) cudnnDestroyTensorDescriptor(y);
        if (x) cudnnDestroyTensorDescriptor(x);
    }
};

// [N, C, D, H, W] dims over channels-last memory (C innermost).
Status set_tensor_ndhwc(cudnnTensorDescriptor_t d, const int (&dims)[5]) {
    const int c = dims[1], dd = dims[2], h = dims[3], w = dims[4];
    const int strides[5] = {c * dd * h * w, 1, h * w * c, w * c, c};
    return cudnn_status(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 5, dims, strides), "SetTensorNd");
}

Status set_tensor(cudnnTensorDescriptor_t d, const int (&dims)[5]) {
    int strides[5];
    strides[4] = 1;
    for (int i = 3; i >= 0; --i) strides[i] = strides[i + 1] * dims[i + 1];
    return cudnn_status(cudnnSetTensorNdDescriptor(d, CUDNN_DATA_FLOAT, 5, dims, strides), "SetTensorNd");
}

// A tensor over part of the context's scratch buffer (no ownership: valid until the scratch is regrown).
class ScratchStorage final : public Storage {
public:
    ScratchStorage(void* p, size_t n, Device d) {
        data_ = p;
        bytes_ = n;
        device_ = d;
    }
};
Tensor scratch_tensor(const Context& ctx, void* p, const Shape& shape) {
    const size_t bytes = static_cast<size_t>(shape.numel()) * sizeof(float);
    return Tensor::from_storage(std::make_shared<ScratchStorage>(p, bytes, ctx.device), 0, shape,
                                DType::kF32);
}

bool gemm_family(cudnnConvolutionFwdAlgo_t a) {
    return a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM ||
           a == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM || a == CUDNN_CONVOLUTION_FWD_ALGO_GEMM;
}

size_t round_up(size_t v) {
    return (v + 255) / 256 * 256;
}

} // namespace

Status cudnn_conv3d(const Context& ctx, const Conv3dParams& p, const Tensor& x, const Tensor& w,
                    const Tensor& bias, Tensor& y, bool& ran) {
    ran = false;
    const int64_t b = x.dim(0), cin = x.dim(1), t = x.dim(2), h = x.dim(3), wd = x.dim(4);
    const int64_t cout = w.dim(0), kt = w.dim(2), kh = w.dim(3), kw = w.dim(4), to = y.dim(2);
    const int64_t ho = y.dim(3), wo = y.dim(4);
    // Taps k with (To − 1)·st + k < pad_front read only zero frames for every output frame.
    const int first = static_cast<int>(std::clamp<int64_t>(p.pad_front - (to - 1) * p.stride_t, 0, kt - 1));
    const int front = p.pad_front - first;
    const int64_t ktu = kt - first;
    // Padding cuDNN can do itself: zeros, the same on both sides, no front frames.
    const bool native = front == 0 && p.spatial_mode == PadMode::kZeros && p.pad_top == p.pad_bottom &&
                        p.pad_left == p.pad_right;
    const int pad_h = native ? p.pad_top : 0, pad_w = native ? p.pad_left : 0;
    const int64_t tp = t + front, hp = native ? h : h + p.pad_top + p.pad_bottom,
                  wp = native ? wd : wd + p.pad_left + p.pad_right;
    const int64_t x_elems = b * cin * tp * hp * wp, y_elems = y.numel(), w_elems = cout * cin * ktu * kh * kw;
    for (int64_t v : {x_elems, y_elems, w_elems})
        if (v > INT_MAX) return ok_status(); // 32-bit descriptor strides: the implicit GEMM kernels instead
    // The transposes' grid limits (rows per batch ≤ 65535·32): the implicit GEMM kernels instead.
    if (cin > 65535 * 32 || to * ho * wo > 65535LL * 32 || b > 65535 || cout > 65535) return ok_status();

    Descs d;
    H3_TRY(cudnn_status(cudnnCreateTensorDescriptor(&d.x), "CreateTensorDescriptor"));
    H3_TRY(cudnn_status(cudnnCreateTensorDescriptor(&d.y), "CreateTensorDescriptor"));
    H3_TRY(cudnn_status(cudnnCreateFilterDescriptor(&d.w), "CreateFilterDescriptor"));
    H3_TRY(cudnn_status(cudnnCreateConvolutionDescriptor(&d.conv), "CreateConvolutionDescriptor"));
    const int xdims[5] = {static_cast<int>(b), static_cast<int>(cin), static_cast<int>(tp),
                          static_cast<int>(hp), static_cast<int>(wp)};
    const int ydims[5] = {static_cast<int>(b), static_cast<int>(cout), static_cast<int>(to),
                          static_cast<int>(ho), static_cast<int>(wo)};
    const int wdims[5] = {static_cast<int>(cout), static_cast<int>(cin), static_cast<int>(ktu),
                          static_cast<int>(kh), static_cast<int>(kw)};
    H3_TRY(set_tensor_ndhwc(d.x, xdims));
    H3_TRY(set_tensor_ndhwc(d.y, ydims));
    H3_TRY(cudnn_status(cudnnSetFilterNdDescriptor(d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NHWC, 5, wdims),
                        "SetFilterNd"));
    const int pads[3] = {0, pad_h, pad_w}, strides[3] = {p.stride_t, p.stride_h, p.stride_w},
              dil[3] = {1, 1, 1};
    H3_TRY(cudnn_status(cudnnSetConvolutionNdDescriptor(d.conv, 3, pads, strides, dil,
                                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                        "SetConvolutionNd"));
    // As PyTorch: DEFAULT math permits TF32 tensor cores for fp32 data (Ampere and later), FMA math forbids
    // them.
    const cudnnMathType_t want_math = ctx.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    H3_TRY(cudnn_status(cudnnSetConvolutionMathType(d.conv, want_math), "SetConvolutionMathType"));
    int odims[5] = {0};
    H3_TRY(
        cudnn_status(cudnnGetConvolutionNdForwardOutputDim(d.conv, d.x, d.w, 5, odims), "ForwardOutputDim"));
    for (int i = 0; i < 5; ++i)
        if (odims[i] != ydims[i])
            return internal_error("conv3d (cuDNN): output dims disagree with conv3d_out_shape at dim " +
                                  std::to_string(i));

    // The algorithm for this problem (cached).
    const auto handle = static_cast<cudnnHandle_t>(ctx.cuda->cudnn());
    Conv3dKey key;
    key.dims.assign(std::begin(xdims), std::end(xdims));
    key.dims.insert(key.dims.end(), std::begin(wdims), std::end(wdims));
    key.dims.insert(key.dims.end(),
                    {pad_h, pad_w, p.stride_t, p.stride_h, p.stride_w, ctx.allow_tf32 ? 1 : 0});
    Conv3dCache& cache = ctx.cuda->conv3d_cache();
    Conv3dAlgo algo;
    const bool cached = find_cached(cache.mutex, cache.algos, key, algo);
    if (!cached) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
        int found = 0;
        const cudnnStatus_t s = cudnnGetConvolutionForwardAlgorithm_v7(
            handle, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf);
        if (s == CUDNN_STATUS_SUCCESS)
            for (int i = 0; i < found; ++i) {
                const auto& r = perf[i];
                if (r.status != CUDNN_STATUS_SUCCESS || !gemm_family(r.algo) || r.memory > kMaxWorkspace)
                    continue;
                if (!ctx.allow_tf32 && r.mathType != CUDNN_FMA_MATH) continue; // exact fp32: no tensor cores
                algo.supported = true;
                algo.algo = static_cast<int>(r.algo);
                algo.math = static_cast<int>(r.mathType);
                algo.workspace = r.memory;
                break;
            }
        if (!algo.supported)
            log_info("conv3d: cuDNN offers no GEMM-family algorithm for x [" + std::to_string(b) + ", " +
                     std::to_string(cin) + ", " + std::to_string(tp) + ", " + std::to_string(hp) + ", " +
                     std::to_string(wp) + "], w [" + std::to_string(cout) + ", " + std::to_string(cin) +
                     ", " + std::to_string(ktu) + ", " + std::to_string(kh) + ", " + std::to_string(kw) +
                     "]: the built-in kernels run it");
        store_cached(cache.mutex, cache.algos, key, algo);
    }
    if (!algo.supported) return ok_status();
    H3_TRY(cudnn_status(cudnnSetConvolutionMathType(d.conv, static_cast<cudnnMathType_t>(algo.math)),
                        "SetConvolutionMathType"));

    // Scratch: [padded x (NCDHW) | x (NDHWC) | sliced w | w (NDHWC) | y (NDHWC) | cuDNN workspace].
    const bool pad = !native;
    const size_t xp_bytes = pad ? round_up(static_cast<size_t>(x_elems) * sizeof(float)) : 0;
    const size_t xt_bytes = round_up(static_cast<size_t>(x_elems) * sizeof(float));
    const size_t ws_bytes = first > 0 ? round_up(static_cast<size_t>(w_elems) * sizeof(float)) : 0;
    const size_t wt_bytes = round_up(static_cast<size_t>(w_elems) * sizeof(float));
    const size_t yt_bytes = round_up(static_cast<size_t>(y_elems) * sizeof(float));
    H3_ASSIGN_OR_RETURN(void* scratch, ctx.cuda->scratch(xp_bytes + xt_bytes + ws_bytes + wt_bytes +
                                                         yt_bytes + algo.workspace));
    char* cursor = static_cast<char*>(scratch);
    auto carve = [&](size_t bytes) {
        char* at = cursor;
        cursor += bytes;
        return static_cast<void*>(at);
    };
    void* xp = carve(xp_bytes);
    void* xt = carve(xt_bytes);
    void* wsl = carve(ws_bytes);
    void* wt = carve(wt_bytes);
    void* yt = carve(yt_bytes);
    void* work = algo.workspace > 0 ? carve(algo.workspace) : nullptr;
    // x → (padded) → [B, T·H·W, C]
    Tensor xsrc = x;
    if (pad) {
        H3_TRY(conv3d_pad_input(ctx, x, front, p.pad_top, p.pad_bottom, p.pad_left, p.pad_right,
                                p.spatial_mode, static_cast<float*>(xp)));
        xsrc = scratch_tensor(ctx, xp, Shape{b, cin, tp, hp, wp});
    }
    Tensor xt_t = scratch_tensor(ctx, xt, Shape{b, tp * hp * wp, cin});
    H3_TRY(cuda_impl::transpose(ctx, xsrc.view({b, cin, tp * hp * wp}), xt_t));
    // w → (taps sliced) → [Cout, taps, Cin]
    Tensor wsrc = w;
    if (first > 0) {
        H3_TRY(conv3d_slice_taps(ctx, w, first, static_cast<float*>(wsl)));
        wsrc = scratch_tensor(ctx, wsl, Shape{cout, cin, ktu, kh, kw});
    }
    Tensor wt_t = scratch_tensor(ctx, wt, Shape{cout, ktu * kh * kw, cin});
    H3_TRY(cuda_impl::transpose(ctx, wsrc.view({cout, cin, ktu * kh * kw}), wt_t));
    const float one = 1.0f, zero = 0.0f;
    H3_TRY(cudnn_status(cudnnConvolutionForward(handle, &one, d.x, xt, d.w, wt, d.conv,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(algo.algo), work,
                                                algo.workspace, &zero, d.y, yt),
                        "ConvolutionForward"));
    // [B, To·Ho·Wo, Cout] → y [B, Cout, To, Ho, Wo], then the bias
    Tensor yv = y.view({b, cout, to * ho * wo});
    H3_TRY(cuda_impl::transpose(ctx, scratch_tensor(ctx, yt, Shape{b, to * ho * wo, cout}), yv));
    if (bias.defined()) {
        H3_TRY(cudnn_status(cudnnCreateTensorDescriptor(&d.bias), "CreateTensorDescriptor"));
        const int bdims[5] = {1, static_cast<int>(cout), 1, 1, 1};
        H3_TRY(set_tensor(d.bias, bdims));
        cudnnTensorDescriptor_t yd = nullptr;
        H3_TRY(cudnn_status(cudnnCreateTensorDescriptor(&yd), "CreateTensorDescriptor"));
        Status st = set_tensor(yd, ydims);
        if (st.ok())
            st = cudnn_status(cudnnAddTensor(handle, &one, d.bias, bias.data(), &one, yd, y.data()),
                              "AddTensor");
        cudnnDestroyTensorDescriptor(yd);
        H3_TRY(st);
    }
    ran = true;
    return ok_status();
}

} // namespace h3::ops::cuda_detail
