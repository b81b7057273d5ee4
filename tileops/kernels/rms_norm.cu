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

template <typename T, int VPT>
__device__ __forceinline__ void rms_norm_rows(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                              long long rows, int n, float eps) {
    using E = Elem<T>;
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

    float ss = sx * sx;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (active && t + k * tpr < s.body) ss = add_squares<T>(buf[k], ss);
    }
    const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) rms_store(buf[k], w, s, i, rstd, yv);
    }
    if (si >= 0) E::store(yr + si, (sx * rstd) * E::load(w + si));
}

template <typename T>
__device__ __forceinline__ void rms_norm_loop(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                              long long rows, int n, float eps) {
    using E = Elem<T>;
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
        for (int i = t; i < s.body; i += tpr) ss = add_squares<T>(load16(xv + i), ss);
        const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

        for (int i = t; i < s.body; i += tpr) rms_store(load16(xv + i), w, s, i, rstd, yv);
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
