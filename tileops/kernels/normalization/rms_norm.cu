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

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry rms_norm_rows_v4_{f32,f16,bf16}: vector loads, vector stores
// @entry rms_norm_rows_v16_{f32,f16,bf16}: vector loads, vector stores
// @entry rms_norm_loop_{f32,f16,bf16}: vector loads, vector stores

#include "tileops_common.cuh"

using namespace tileops;

// Rows of up to 4 vectors per thread (v4) whose length n is a multiple of the vector width V
// (every row then starts 16-byte aligned: no head or tail element, and the weight lines up with
// x's vectors): the weight is loaded with x, before the reduction, so that its L2 round trip
// overlaps x's DRAM one instead of following the reduction. Other row lengths take rms_norm_rows.
template <typename T>
__device__ __forceinline__ void rms_norm_rows_aligned(const T* __restrict__ x, const T* __restrict__ w,
                                                      T* __restrict__ y, long long rows, int n, float eps,
                                                      float* red_sum) {
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
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

    // All loads first: 2 * VPT independent 16-byte loads in flight per thread. A vector the
    // thread does not own reads as zeros (its squares add nothing) and is not stored.
    bool own[VPT];
    uint4 xq[VPT];
    uint4 wq[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        own[k] = row.active && i < body;
        xq[k] = own[k] ? load16(xv + i) : zero;
        wq[k] = own[k] ? load16(wv + i) : zero;
    }

    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) ss = add_squares<T>(xq[k], ss);
    const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        float f[V];
        float wf[V];
        E::unpack(xq[k], f);
        E::unpack(wq[k], wf);
#pragma unroll
        for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * wf[j];
        if (own[k]) store16(yv + t + k * tpr, E::pack(f));
    }
}

// Rows of up to VPT vectors per thread in registers, any length (v16, and v4 rows whose length
// is not a multiple of V): the weight read at the store; `scalar_params`: element by element
// (v4's rows of other lengths: the weight lines up with x's vectors only on their 16-byte-aligned
// rows, and they are the uncommon case).
template <typename T, int VPT, bool scalar_params = false>
__device__ __forceinline__ void rms_norm_rows(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                              long long rows, int n, float eps, float* red_sum) {
    using E = Elem<T>;

    const RegRow<T, VPT> r(x, y, rows, n, 0.0f);

    float ss = r.sx * r.sx;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) ss = add_squares<T>(r.buf[k], ss);
    }
    const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (!r.owns(k)) continue;
        if (scalar_params) {
            constexpr int V = E::V;
            const long long c = r.s.head + static_cast<long long>(r.index(k)) * V;
            float f[V];
            E::unpack(r.buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * E::load(w + c + j);
            store16(r.yv + r.index(k), E::pack(f));
        } else {
            rms_store(r.buf[k], w, r.s, r.index(k), rstd, r.yv);
        }
    }
    if (r.si >= 0) E::store(r.yr + r.si, (r.sx * rstd) * E::load(w + r.si));
}

template <typename T>
__device__ __forceinline__ void rms_norm_loop(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                              long long rows, int n, float eps) {
    using E = Elem<T>;
    __shared__ float red_sum[32];
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    for (long long row = blockIdx.x; row < rows; row += gridDim.x) {
        const LoopRow<T> r(x, y, row, n, 0.0f);

        float ss = r.sx * r.sx;
        for (int i = t; i < r.s.body; i += tpr) ss = add_squares<T>(load16(r.xv + i), ss);
        const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

        for (int i = t; i < r.s.body; i += tpr) rms_store(load16(r.xv + i), w, r.s, i, rstd, r.yv);
        if (r.si >= 0) E::store(r.yr + r.si, (r.sx * rstd) * E::load(w + r.si));
    }
}

#define TILEOPS_RMS_NORM_ENTRIES(T, SUFFIX)                                                                       \
    extern "C" __global__ void __launch_bounds__(1024) rms_norm_rows_v4_##SUFFIX(                                 \
        const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int n, float eps) {  \
        __shared__ float red_sum[32 * 32];                                                                        \
        /* n is uniform: every block takes the same side. */                                                      \
        if (n % Elem<T>::V == 0) {                                                                                \
            rms_norm_rows_aligned<T>(x, w, y, rows, n, eps, red_sum);                                             \
        } else {                                                                                                  \
            rms_norm_rows<T, 4, true>(x, w, y, rows, n, eps, red_sum);                                            \
        }                                                                                                         \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(512) rms_norm_rows_v16_##SUFFIX(                                 \
        const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int n, float eps) {  \
        __shared__ float red_sum[32 * 32];                                                                        \
        rms_norm_rows<T, 16>(x, w, y, rows, n, eps, red_sum);                                                     \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024) rms_norm_loop_##SUFFIX(                                    \
        const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, long long rows, int n, float eps) {  \
        rms_norm_loop<T>(x, w, y, rows, n, eps);                                                                  \
    }

TILEOPS_RMS_NORM_ENTRIES(float, f32)
TILEOPS_RMS_NORM_ENTRIES(__half, f16)
TILEOPS_RMS_NORM_ENTRIES(__nv_bfloat16, bf16)
