// LayerNorm over the last dim: y = (x - mean) * rsqrt(var + eps) * weight + bias, with the biased
// variance (as torch.nn.functional.layer_norm), accumulating in f32 and rounding once to the
// output dtype. Entry points per dtype (f32, f16, bf16):
//
//   layer_norm_rows_v4_*, layer_norm_rows_v16_*   up to 4 / 16 vectors of 16 bytes per thread: the
//       row stays in registers, so x is read from DRAM once, and the variance is the exact
//       two-pass sum of squared deviations from the mean; weight and bias are read through L2
//       (v4, rows a multiple of 16 bytes: with x, as f32 in registers; 512 threads a row at most).
//   layer_norm_loop_*                             any row length: one block per row, x read three
//       times (mean, variance, normalize; the row is then in L2).
//
// A NaN or inf in a row makes the whole row NaN (x - mean is NaN for every element), as PyTorch.
// rstd is rsqrtf(var + eps), as PyTorch's LayerNorm kernels take it; mean and var scale the sums
// by one 1 / n.
// Launch contract (checked by the host): x, weight, bias, y 16-byte aligned; blockDim.x = threads
// per row (a multiple of 32, at most 512 for v4), blockDim.y = rows per block (<= 32; 1 for the
// loop kernel).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry layer_norm_rows_v4_{f32,f16,bf16}: vector loads, vector stores
// @entry layer_norm_rows_v16_{f32,f16,bf16}: vector loads, vector stores
// @entry layer_norm_loop_{f32,f16,bf16}: vector loads, vector stores

#include "tileops_common.cuh"

using namespace tileops;

// LayerNorm's output for body vector i of a row split as `s`: (x - mean) * rstd * weight + bias,
// stored to y[i]. `scalar_params`: weight and bias read element by element (rows whose length is
// not a multiple of V, in v4: their weight and bias line up with x's vectors only on the
// 16-byte-aligned rows, and they are the uncommon case).
template <typename T, bool scalar_params = false>
__device__ __forceinline__ void layer_norm_store(const uint4& xq, const T* __restrict__ w, const T* __restrict__ b,
                                                 const RowSplit& s, int i, float mean, float rstd, uint4* y) {
    using E = Elem<T>;
    constexpr int V = E::V;
    float f[V];
    float wf[V];
    float bf[V];
    E::unpack(xq, f);
    if (scalar_params) {
        const long long c = s.head + static_cast<long long>(i) * V;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            wf[j] = E::load(w + c + j);
            bf[j] = E::load(b + c + j);
        }
    } else {
        load_param(w, s, i, wf);
        load_param(b, s, i, bf);
    }
#pragma unroll
    for (int j = 0; j < V; ++j) f[j] = fmaf((f[j] - mean) * rstd, wf[j], bf[j]);
    store16(y + i, E::pack(f));
}

// The row's rstd from its (reduced) sum of squared deviations: rsqrt as PyTorch's LayerNorm
// kernels take it (rsqrtf, one MUFU op; 1 / sqrtf is an IEEE square root and division).
__device__ __forceinline__ float layer_norm_rstd(float ss, float inv_n, float eps) {
    return rsqrtf(ss * inv_n + eps);
}

// Rows of up to 4 vectors per thread (v4) whose length n is a multiple of the vector width V
// (every row then starts 16-byte aligned: no head or tail element, and weight and bias line up
// with x's vectors). x is unpacked to f32 once and kept in registers (its sum, then its
// deviations from the mean, which the store scales); weight and bias are loaded with x, before
// the reductions, so that their L2 round trips overlap x's DRAM one instead of following the
// second reduction. 4 * V floats and 8 more vectors held through the reductions: v4 is launched
// with at most 512 threads per block (128 registers a thread; longer rows go to v16). Other row
// lengths take layer_norm_rows (x packed, weight and bias read at the store).
template <typename T>
__device__ __forceinline__ void layer_norm_rows_regs(const T* __restrict__ x, const T* __restrict__ w,
                                                     const T* __restrict__ b, T* __restrict__ y, long long rows,
                                                     int n, float eps, float* red_sum) {
    using E = Elem<T>;
    constexpr int V = E::V;
    constexpr int VPT = 4;

    const BlockRow row = block_row(rows, n);
    const int body = n / V;
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const uint4* xv = reinterpret_cast<const uint4*>(x + row.base);
    uint4* yv = reinterpret_cast<uint4*>(y + row.base);
    const uint4* wv = reinterpret_cast<const uint4*>(w);
    const uint4* bv = reinterpret_cast<const uint4*>(b);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

    // All loads first: 3 * VPT independent 16-byte loads in flight per thread. A vector the
    // thread does not own reads as zeros, so every pass runs over all VPT vectors without a
    // branch (the sum adds zeros; the squared deviations and the stores are masked).
    bool own[VPT];
    uint4 xq[VPT];
    uint4 wq[VPT];
    uint4 bq[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        own[k] = row.active && i < body;
        xq[k] = own[k] ? load16(xv + i) : zero;
        wq[k] = own[k] ? load16(wv + i) : zero;
        bq[k] = own[k] ? load16(bv + i) : zero;
    }

    float d[VPT][V];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        E::unpack(xq[k], d[k]);
#pragma unroll
        for (int j = 0; j < V; ++j) sum += d[k][j];
    }
    const float inv_n = 1.0f / static_cast<float>(n);
    const float mean = row_reduce<false>(sum, red_sum) * inv_n;

    // The exact two-pass sum of squared deviations; d becomes x - mean.
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        float part = 0.0f;
#pragma unroll
        for (int j = 0; j < V; ++j) {
            d[k][j] -= mean;
            part = fmaf(d[k][j], d[k][j], part);
        }
        ss += own[k] ? part : 0.0f;
    }
    const float rstd = layer_norm_rstd(row_reduce<false>(ss, red_sum), inv_n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        float f[V];
        float wf[V];
        float bf[V];
        E::unpack(wq[k], wf);
        E::unpack(bq[k], bf);
#pragma unroll
        for (int j = 0; j < V; ++j) f[j] = fmaf(d[k][j] * rstd, wf[j], bf[j]);
        if (own[k]) store16(yv + t + k * tpr, E::pack(f));
    }
}

// Rows of up to 16 vectors per thread (v16), and v4 rows whose length is not a multiple of V:
// x stays packed in registers and is unpacked in each pass; weight and bias are read at the
// store.
template <typename T, int VPT, bool scalar_params = false>
__device__ __forceinline__ void layer_norm_rows(const T* __restrict__ x, const T* __restrict__ w,
                                                const T* __restrict__ b, T* __restrict__ y, long long rows, int n,
                                                float eps, float* red_sum) {
    using E = Elem<T>;

    const RegRow<T, VPT> r(x, y, rows, n, 0.0f);

    float sum = r.sx;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) sum = add_values<T>(r.buf[k], sum);
    }
    const float inv_n = 1.0f / static_cast<float>(n);
    const float mean = row_reduce<false>(sum, red_sum) * inv_n;

    float ss = r.si >= 0 ? (r.sx - mean) * (r.sx - mean) : 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) ss = add_sq_dev<T>(r.buf[k], mean, ss);
    }
    const float rstd = layer_norm_rstd(row_reduce<false>(ss, red_sum), inv_n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) layer_norm_store<T, scalar_params>(r.buf[k], w, b, r.s, r.index(k), mean, rstd, r.yv);
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
        const float inv_n = 1.0f / static_cast<float>(n);
        const float mean = row_reduce<false>(sum, red_sum) * inv_n;

        float ss = r.si >= 0 ? (r.sx - mean) * (r.sx - mean) : 0.0f;
        for (int i = t; i < r.s.body; i += tpr) ss = add_sq_dev<T>(load16(r.xv + i), mean, ss);
        const float rstd = layer_norm_rstd(row_reduce<false>(ss, red_sum), inv_n, eps);

        for (int i = t; i < r.s.body; i += tpr) layer_norm_store(load16(r.xv + i), w, b, r.s, i, mean, rstd, r.yv);
        if (r.si >= 0) E::store(r.yr + r.si, fmaf((r.sx - mean) * rstd, E::load(w + r.si), E::load(b + r.si)));
    }
}

#define TILEOPS_LAYER_NORM_ENTRIES(T, SUFFIX)                                                                    \
    extern "C" __global__ void __launch_bounds__(512) layer_norm_rows_v4_##SUFFIX(                               \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,            \
        long long rows, int n, float eps) {                                                                      \
        __shared__ float red_sum[32 * 32];                                                                       \
        /* n is uniform: every block takes the same side. */                                                     \
        if (n % Elem<T>::V == 0) {                                                                               \
            layer_norm_rows_regs<T>(x, w, b, y, rows, n, eps, red_sum);                                          \
        } else {                                                                                                 \
            layer_norm_rows<T, 4, true>(x, w, b, y, rows, n, eps, red_sum);                                      \
        }                                                                                                        \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(512) layer_norm_rows_v16_##SUFFIX(                              \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,            \
        long long rows, int n, float eps) {                                                                      \
        __shared__ float red_sum[32 * 32];                                                                       \
        layer_norm_rows<T, 16>(x, w, b, y, rows, n, eps, red_sum);                                               \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(1024) layer_norm_loop_##SUFFIX(                                 \
        const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,            \
        long long rows, int n, float eps) {                                                                      \
        layer_norm_loop<T>(x, w, b, y, rows, n, eps);                                                            \
    }

TILEOPS_LAYER_NORM_ENTRIES(float, f32)
TILEOPS_LAYER_NORM_ENTRIES(__half, f16)
TILEOPS_LAYER_NORM_ENTRIES(__nv_bfloat16, bf16)
