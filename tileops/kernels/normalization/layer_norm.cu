// LayerNorm over the last dim: y = (x - mean) * rsqrt(var + eps) * weight + bias, with the biased
// variance (as torch.nn.functional.layer_norm), accumulating in f32 and rounding once to the
// output dtype. Entry points per dtype (f32, f16, bf16):
//
//   layer_norm_rows_v4_*, layer_norm_rows_v16_*   up to 4 / 16 vectors of 16 bytes per thread: the
//       row stays in registers, so x is read from DRAM once, and the variance is the exact
//       two-pass sum of squared deviations from the mean; weight and bias are read through L2.
//   layer_norm_loop_*                             any row length: one block per row, x read three
//       times (mean, variance, normalize; the row is then in L2).
//
// A NaN or inf in a row makes the whole row NaN (x - mean is NaN for every element), as PyTorch.
// Launch contract (checked by the host): x, weight, bias, y 16-byte aligned; blockDim.x = threads
// per row (a multiple of 32), blockDim.y = rows per block (<= 32; 1 for the loop kernel).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry layer_norm_rows_v4_{f32,f16,bf16}: vector loads, vector stores
// @entry layer_norm_rows_v16_{f32,f16,bf16}: vector loads, vector stores
// @entry layer_norm_loop_{f32,f16,bf16}: vector loads, vector stores

#include "tileops_common.cuh"

using namespace tileops;

// LayerNorm's output for body vector i of a row split as `s`: (x - mean) * rstd * weight + bias,
// stored to y[i].
template <typename T>
__device__ __forceinline__ void layer_norm_store(const uint4& xq, const T* __restrict__ w, const T* __restrict__ b,
                                                 const RowSplit& s, int i, float mean, float rstd, uint4* y) {
    using E = Elem<T>;
    constexpr int V = E::V;
    float f[V];
    float wf[V];
    float bf[V];
    E::unpack(xq, f);
    load_param(w, s, i, wf);
    load_param(b, s, i, bf);
#pragma unroll
    for (int j = 0; j < V; ++j) f[j] = fmaf((f[j] - mean) * rstd, wf[j], bf[j]);
    store16(y + i, E::pack(f));
}

template <typename T, int VPT>
__device__ __forceinline__ void layer_norm_rows(const T* __restrict__ x, const T* __restrict__ w,
                                                const T* __restrict__ b, T* __restrict__ y, long long rows, int n,
                                                float eps) {
    using E = Elem<T>;
    __shared__ float red_sum[32 * 32];

    const RegRow<T, VPT> r(x, y, rows, n, 0.0f);

    float sum = r.sx;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) sum = add_values<T>(r.buf[k], sum);
    }
    const float mean = row_reduce<false>(sum, red_sum) / static_cast<float>(n);

    float ss = r.si >= 0 ? (r.sx - mean) * (r.sx - mean) : 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) ss = add_sq_dev<T>(r.buf[k], mean, ss);
    }
    const float rstd = 1.0f / sqrtf(row_reduce<false>(ss, red_sum) / static_cast<float>(n) + eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) layer_norm_store(r.buf[k], w, b, r.s, r.index(k), mean, rstd, r.yv);
    }
    if (r.si >= 0) E::store(r.yr + r.si, fmaf((r.sx - mean) * rstd, E::load(w + r.si), E::load(b + r.si)));
}

template <typename T>
__device__ __forceinline__ void layer_norm_loop(const T* __restrict__ x, const T* __restrict__ w,
                                                const T* __restrict__ b, T* __restrict__ y, long long rows, int n,
                                                float eps) {
    using E = Elem<T>;
    __shared__ float red_sum[32];
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const LoopRow<T> r(x, y, row, n, 0.0f);

        float sum = r.sx;
        for (int i = t; i < r.s.body; i += tpr) sum = add_values<T>(load16(r.xv + i), sum);
        const float mean = row_reduce<false>(sum, red_sum) / static_cast<float>(n);

        float ss = r.si >= 0 ? (r.sx - mean) * (r.sx - mean) : 0.0f;
        for (int i = t; i < r.s.body; i += tpr) ss = add_sq_dev<T>(load16(r.xv + i), mean, ss);
        const float rstd = 1.0f / sqrtf(row_reduce<false>(ss, red_sum) / static_cast<float>(n) + eps);

        for (int i = t; i < r.s.body; i += tpr) layer_norm_store(load16(r.xv + i), w, b, r.s, i, mean, rstd, r.yv);
        if (r.si >= 0) E::store(r.yr + r.si, fmaf((r.sx - mean) * rstd, E::load(w + r.si), E::load(b + r.si)));
    }
}

#define TILEOPS_LAYER_NORM_ENTRIES(T, SUFFIX)                                                                    \
    extern "C" __global__ void __launch_bounds__(1024) layer_norm_rows_v4_##SUFFIX(                              \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,            \
        long long rows, int n, float eps) {                                                                      \
        layer_norm_rows<T, 4>(x, w, b, y, rows, n, eps);                                                         \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(512) layer_norm_rows_v16_##SUFFIX(                              \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,            \
        long long rows, int n, float eps) {                                                                      \
        layer_norm_rows<T, 16>(x, w, b, y, rows, n, eps);                                                        \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(1024) layer_norm_loop_##SUFFIX(                                 \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,            \
        long long rows, int n, float eps) {                                                                      \
        layer_norm_loop<T>(x, w, b, y, rows, n, eps);                                                            \
    }

TILEOPS_LAYER_NORM_ENTRIES(float, f32)
TILEOPS_LAYER_NORM_ENTRIES(__half, f16)
TILEOPS_LAYER_NORM_ENTRIES(__nv_bfloat16, bf16)
