// RMSNorm over the last dim: y = x * rsqrt(mean(x^2) + eps) * weight, accumulating in f32 and
// rounding once to the output dtype. Entry points per dtype (f32, f16, bf16):
//
//   rms_norm_rows_v4_*, rms_norm_rows_v16_*   up to 4 / 16 vectors of 16 bytes per thread: the
//       row stays in registers, so x is read from DRAM once; the weight is read through L2.
//   rms_norm_loop_*                           any row length: one block per row, x read twice.
//
// A NaN in a row makes the row NaN; an inf makes its own element NaN and the others 0 (as PyTorch).
// Launch contract (checked by the host): x, weight, y 16-byte aligned; blockDim.x = threads per row
// (a multiple of 32), blockDim.y = rows per block (<= 32; 1 for the loop kernel).
#include "tileops_common.cuh"

using namespace tileops;

// The weight values for body vector i of a row whose split is `s`. They line up with whole
// 16-byte vectors of the weight only when the row has no head (it starts 16-byte aligned).
template <typename T>
__device__ __forceinline__ void load_weight(const T* __restrict__ w, const RowSplit& s, int i,
                                            float (&wf)[Elem<T>::V]) {
    constexpr int V = Elem<T>::V;
    if (s.head == 0) {
        Elem<T>::unpack(load16(w + static_cast<long long>(i) * V), wf);
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j) wf[j] = Elem<T>::load(w + s.head + static_cast<long long>(i) * V + j);
    }
}

template <typename T, int VPT>
__device__ __forceinline__ void rms_norm_rows(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                              long long rows, int n, float eps) {
    using E = Elem<T>;
    constexpr int V = E::V;
    __shared__ float red_sum[32 * 32];

    const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    const bool active = row < rows;
    const long long base = (active ? row : 0) * static_cast<long long>(n);
    const T* xr = x + base;
    T* yr = y + base;
    const RowSplit s = split_row(xr, n);
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
    uint4* yv = reinterpret_cast<uint4*>(yr + s.head);

    uint4 buf[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) buf[k] = load16(xv + i);
    }
    const int si = active ? scalar_index<T>(s, t, true, true) : -1;
    const float sx = si >= 0 ? E::load(xr + si) : 0.0f;

    float ss = sx * sx;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (active && t + k * tpr < s.body) {
            float f[V];
            E::unpack(buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) ss = fmaf(f[j], f[j], ss);
        }
    }
    ss = row_reduce<false>(ss, red_sum);
    const float rstd = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) {
            float f[V];
            float wf[V];
            E::unpack(buf[k], f);
            load_weight(w, s, i, wf);
#pragma unroll
            for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * wf[j];
            store16(yv + i, E::pack(f));
        }
    }
    if (si >= 0) E::store(yr + si, (sx * rstd) * E::load(w + si));
}

template <typename T>
__device__ __forceinline__ void rms_norm_loop(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                              long long rows, int n, float eps) {
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

        float ss = sx * sx;
        for (int i = t; i < s.body; i += tpr) {
            float f[V];
            E::unpack(load16(xv + i), f);
#pragma unroll
            for (int j = 0; j < V; ++j) ss = fmaf(f[j], f[j], ss);
        }
        ss = row_reduce<false>(ss, red_sum);
        const float rstd = 1.0f / sqrtf(ss / static_cast<float>(n) + eps);

        for (int i = t; i < s.body; i += tpr) {
            float f[V];
            float wf[V];
            E::unpack(load16(xv + i), f);
            load_weight(w, s, i, wf);
#pragma unroll
            for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * wf[j];
            store16(yv + i, E::pack(f));
        }
        if (si >= 0) E::store(yr + si, (sx * rstd) * E::load(w + si));
    }
}

#define TILEOPS_RMS_NORM_ENTRIES(T, SUFFIX)                                                                       \
    extern "C" __global__ void __launch_bounds__(1024) rms_norm_rows_v4_##SUFFIX(                                 \
        const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int n, float eps) {  \
        rms_norm_rows<T, 4>(x, w, y, rows, n, eps);                                                               \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(512) rms_norm_rows_v16_##SUFFIX(                                 \
        const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int n, float eps) {  \
        rms_norm_rows<T, 16>(x, w, y, rows, n, eps);                                                              \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024) rms_norm_loop_##SUFFIX(                                    \
        const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int n, float eps) {  \
        rms_norm_loop<T>(x, w, y, rows, n, eps);                                                                  \
    }

TILEOPS_RMS_NORM_ENTRIES(float, f32)
TILEOPS_RMS_NORM_ENTRIES(__half, f16)
TILEOPS_RMS_NORM_ENTRIES(__nv_bfloat16, bf16)
