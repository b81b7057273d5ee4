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
#include "tileops_common.cuh"

using namespace tileops;

template <typename T, int VPT>
__device__ __forceinline__ void layer_norm_rows(const T* __restrict__ x, const T* __restrict__ w,
                                                const T* __restrict__ b, T* __restrict__ y, long long rows, int n,
                                                float eps) {
    using E = Elem<T>;
    constexpr int V = E::V;
    __shared__ float red_sum[32 * 32];

    const BlockRow r = block_row(rows, n);
    const bool active = r.active;
    const T* xr = x + r.base;
    T* yr = y + r.base;
    const RowSplit s = split_row(xr, n);
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
    uint4* yv = reinterpret_cast<uint4*>(yr + s.head);

    uint4 buf[VPT];
    load_body(xv, s.body, active, buf);
    const int si = active ? scalar_index<T>(s, t, true, true) : -1;
    const float sx = si >= 0 ? E::load(xr + si) : 0.0f;

    float sum = sx;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (active && t + k * tpr < s.body) {
            float f[V];
            E::unpack(buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) sum += f[j];
        }
    }
    const float mean = row_reduce<false>(sum, red_sum) / static_cast<float>(n);

    float ss = 0.0f;
    if (si >= 0) ss = (sx - mean) * (sx - mean);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (active && t + k * tpr < s.body) {
            float f[V];
            E::unpack(buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const float d = f[j] - mean;
                ss = fmaf(d, d, ss);
            }
        }
    }
    const float rstd = 1.0f / sqrtf(row_reduce<false>(ss, red_sum) / static_cast<float>(n) + eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) {
            float f[V];
            float wf[V];
            float bf[V];
            E::unpack(buf[k], f);
            load_param(w, s, i, wf);
            load_param(b, s, i, bf);
#pragma unroll
            for (int j = 0; j < V; ++j) f[j] = fmaf((f[j] - mean) * rstd, wf[j], bf[j]);
            store16(yv + i, E::pack(f));
        }
    }
    if (si >= 0) E::store(yr + si, fmaf((sx - mean) * rstd, E::load(w + si), E::load(b + si)));
}

template <typename T>
__device__ __forceinline__ void layer_norm_loop(const T* __restrict__ x, const T* __restrict__ w,
                                                const T* __restrict__ b, T* __restrict__ y, long long rows, int n,
                                                float eps) {
    using E = Elem<T>;
    constexpr int V = E::V;
    __shared__ float red_sum[32];
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const T* xr = x + row * static_cast<long long>(n);
        T* yr = y + row * static_cast<long long>(n);
        const RowSplit s = split_row(xr, n);
        const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
        uint4* yv = reinterpret_cast<uint4*>(yr + s.head);
        const int si = scalar_index<T>(s, t, true, true);
        const float sx = si >= 0 ? E::load(xr + si) : 0.0f;

        float sum = sx;
        for (int i = t; i < s.body; i += tpr) {
            float f[V];
            E::unpack(load16(xv + i), f);
#pragma unroll
            for (int j = 0; j < V; ++j) sum += f[j];
        }
        const float mean = row_reduce<false>(sum, red_sum) / static_cast<float>(n);

        float ss = si >= 0 ? (sx - mean) * (sx - mean) : 0.0f;
        for (int i = t; i < s.body; i += tpr) {
            float f[V];
            E::unpack(load16(xv + i), f);
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const float d = f[j] - mean;
                ss = fmaf(d, d, ss);
            }
        }
        const float rstd = 1.0f / sqrtf(row_reduce<false>(ss, red_sum) / static_cast<float>(n) + eps);

        for (int i = t; i < s.body; i += tpr) {
            float f[V];
            float wf[V];
            float bf[V];
            E::unpack(load16(xv + i), f);
            load_param(w, s, i, wf);
            load_param(b, s, i, bf);
#pragma unroll
            for (int j = 0; j < V; ++j) f[j] = fmaf((f[j] - mean) * rstd, wf[j], bf[j]);
            store16(yv + i, E::pack(f));
        }
        if (si >= 0) E::store(yr + si, fmaf((sx - mean) * rstd, E::load(w + si), E::load(b + si)));
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
