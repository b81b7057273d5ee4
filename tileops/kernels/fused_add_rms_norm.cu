// Fused residual add + RMSNorm over the last dim (vLLM's fused_add_rms_norm):
//   h = x + residual, rounded to the dtype and written to residual_out;
//   y = h * rsqrt(mean(h^2) + eps) * weight, from the rounded h (as the unfused ops would),
// accumulating in f32. Entry points per dtype (f32, f16, bf16):
//
//   fused_add_rms_norm_rows_v4_*   up to 4 vectors of 16 bytes per thread: h stays in registers,
//       so x and residual are read from DRAM once and both outputs written once.
//   fused_add_rms_norm_loop_*      any row length: one block per row; h is written to
//       residual_out in the first pass and read back by the same thread in the second (a plain,
//       coherent load: never the read-only path for data this kernel wrote).
//
// Launch contract (checked by the host): x, residual, weight, y, residual_out 16-byte aligned and
// residual_out not overlapping x or residual; blockDim.x = threads per row (a multiple of 32),
// blockDim.y = rows per block (<= 32; 1 for the loop kernel).
#include "tileops_common.cuh"

using namespace tileops;

// x + residual for one vector, rounded to T (packed), and the sum of squares of the rounded values.
template <typename T>
__device__ __forceinline__ uint4 add_vec(uint4 xq, uint4 rq, float& ss) {
    using E = Elem<T>;
    constexpr int V = E::V;
    float f[V];
    float r[V];
    E::unpack(xq, f);
    E::unpack(rq, r);
#pragma unroll
    for (int j = 0; j < V; ++j) f[j] += r[j];
    const uint4 h = E::pack(f);
    ss = add_squares<T>(h, ss);
    return h;
}

// v rounded to T and widened back to f32.
template <typename T> __device__ __forceinline__ float round_to(float v);
template <> __device__ __forceinline__ float round_to<float>(float v) { return v; }
template <> __device__ __forceinline__ float round_to<__half>(float v) { return __half2float(__float2half_rn(v)); }
template <> __device__ __forceinline__ float round_to<__nv_bfloat16>(float v) {
    return __bfloat162float(__float2bfloat16_rn(v));
}

// x + residual for one scalar, rounded to T and stored to residual_out; returns the rounded value.
template <typename T>
__device__ __forceinline__ float add_scalar(const T* x, const T* r, T* ro) {
    using E = Elem<T>;
    const float h = round_to<T>(E::load(x) + E::load(r));
    E::store(ro, h);
    return h;
}

template <typename T, int VPT>
__device__ __forceinline__ void fused_rows(const T* __restrict__ x, const T* __restrict__ res,
                                           const T* __restrict__ w, T* __restrict__ y, T* __restrict__ res_out,
                                           long long rows, int n, float eps) {
    using E = Elem<T>;
    __shared__ float red_sum[32 * 32];

    const BlockRow r = block_row(rows, n);
    const bool active = r.active;
    const long long base = r.base;
    const RowSplit s = split_row(x + base, n);
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const uint4* xv = reinterpret_cast<const uint4*>(x + base + s.head);
    const uint4* rv = reinterpret_cast<const uint4*>(res + base + s.head);
    uint4* yv = reinterpret_cast<uint4*>(y + base + s.head);
    uint4* ov = reinterpret_cast<uint4*>(res_out + base + s.head);

    uint4 xb[VPT];
    uint4 rb[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) {
            xb[k] = load16(xv + i);
            rb[k] = load16(rv + i);
        }
    }
    const int si = active ? scalar_index<T>(s, t, true, true) : -1;
    const float sh = si >= 0 ? add_scalar(x + base + si, res + base + si, res_out + base + si) : 0.0f;

    float ss = sh * sh;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) {
            xb[k] = add_vec<T>(xb[k], rb[k], ss);
            store16(ov + i, xb[k]);
        }
    }
    const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) rms_store(xb[k], w, s, i, rstd, yv);
    }
    if (si >= 0) E::store(y + base + si, (sh * rstd) * E::load(w + si));
}

template <typename T>
__device__ __forceinline__ void fused_loop(const T* __restrict__ x, const T* __restrict__ res,
                                           const T* __restrict__ w, T* __restrict__ y, T* __restrict__ res_out,
                                           long long rows, int n, float eps) {
    using E = Elem<T>;
    __shared__ float red_sum[32];
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const long long base = row * static_cast<long long>(n);
        const RowSplit s = split_row(x + base, n);
        const uint4* xv = reinterpret_cast<const uint4*>(x + base + s.head);
        const uint4* rv = reinterpret_cast<const uint4*>(res + base + s.head);
        uint4* yv = reinterpret_cast<uint4*>(y + base + s.head);
        uint4* ov = reinterpret_cast<uint4*>(res_out + base + s.head);
        const int si = scalar_index<T>(s, t, true, true);
        const float sh = si >= 0 ? add_scalar(x + base + si, res + base + si, res_out + base + si) : 0.0f;

        float ss = sh * sh;
        for (int i = t; i < s.body; i += tpr) {
            store16(ov + i, add_vec<T>(load16(xv + i), load16(rv + i), ss));
        }
        const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

        // This thread wrote ov[i] above: a plain load sees it.
        for (int i = t; i < s.body; i += tpr) rms_store(ov[i], w, s, i, rstd, yv);
        if (si >= 0) E::store(y + base + si, (sh * rstd) * E::load(w + si));
    }
}

#define TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(T, SUFFIX)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) fused_add_rms_norm_rows_v4_##SUFFIX(                       \
        const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w, T* __restrict__ y,           \
        T* __restrict__ res_out, long long rows, int n, float eps) {                                              \
        fused_rows<T, 4>(x, res, w, y, res_out, rows, n, eps);                                                    \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024) fused_add_rms_norm_loop_##SUFFIX(                          \
        const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w, T* __restrict__ y,           \
        T* __restrict__ res_out, long long rows, int n, float eps) {                                              \
        fused_loop<T>(x, res, w, y, res_out, rows, n, eps);                                                       \
    }

TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(float, f32)
TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(__half, f16)
TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(__nv_bfloat16, bf16)
