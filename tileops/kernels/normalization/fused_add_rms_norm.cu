// Fused residual add + RMSNorm over the last dim (vLLM's fused_add_rms_norm):
//   h = x + residual, rounded to the dtype and written to residual_out;
//   y = h * rsqrt(mean(h^2) + eps) * weight, from the rounded h (as the unfused ops would),
// accumulating in f32. Entry points per dtype (f32, f16, bf16):
//
//   fused_add_rms_norm_rows_v4_*   up to 4 vectors of 16 bytes per thread: h stays in registers,
//       so x and residual are read from DRAM once and both outputs written once; rows whose length
//       is a multiple of the vector width load the weight with x and residual.
//   fused_add_rms_norm_loop_*      any row length: one block per row; h is written to
//       residual_out in the first pass and read back by the same thread in the second (a plain,
//       coherent load: never the read-only path for data this kernel wrote).
//
// Launch contract (checked by the host): x, residual, weight, y, residual_out 16-byte aligned and
// residual_out not overlapping x or residual; blockDim.x = threads per row (a multiple of 32),
// blockDim.y = rows per block (<= 32; 1 for the loop kernel).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry fused_add_rms_norm_rows_v4_{f32,f16,bf16}: vector loads, vector stores
// @entry fused_add_rms_norm_loop_{f32,f16,bf16}: vector loads, vector stores

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

// Rows of up to 4 vectors per thread whose length n is a multiple of the vector width V (every
// row then starts 16-byte aligned: no head or tail element, and the weight lines up with x's
// vectors): the weight is loaded with x and residual, before the reduction, so that its L2 round
// trip overlaps their DRAM one instead of following the reduction. Other row lengths take
// fused_rows.
template <typename T>
__device__ __forceinline__ void fused_rows_aligned(const T* __restrict__ x, const T* __restrict__ res,
                                                   const T* __restrict__ w, T* __restrict__ y,
                                                   T* __restrict__ res_out, long long rows, int n, float eps,
                                                   float* red_sum) {
    using E = Elem<T>;
    constexpr int V = E::V;
    constexpr int VPT = 4;

    const BlockRow row = block_row(rows, n);
    const int body = n / V;
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const uint4* xv = reinterpret_cast<const uint4*>(x + row.base);
    const uint4* rv = reinterpret_cast<const uint4*>(res + row.base);
    const uint4* wv = reinterpret_cast<const uint4*>(w);
    uint4* yv = reinterpret_cast<uint4*>(y + row.base);
    uint4* ov = reinterpret_cast<uint4*>(res_out + row.base);
    const uint4 zero = make_uint4(0u, 0u, 0u, 0u);

    // All loads first: 3 * VPT independent 16-byte loads in flight per thread. A vector the
    // thread does not own reads as zeros (its squares add nothing) and is not stored.
    bool own[VPT];
    uint4 hq[VPT];
    uint4 rq[VPT];
    uint4 wq[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        own[k] = row.active && i < body;
        hq[k] = own[k] ? load16(xv + i) : zero;
        rq[k] = own[k] ? load16(rv + i) : zero;
        wq[k] = own[k] ? load16(wv + i) : zero;
    }

    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        hq[k] = add_vec<T>(hq[k], rq[k], ss);
        if (own[k]) store16(ov + t + k * tpr, hq[k]);
    }
    const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        float f[V];
        float wf[V];
        E::unpack(hq[k], f);
        E::unpack(wq[k], wf);
#pragma unroll
        for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * wf[j];
        if (own[k]) store16(yv + t + k * tpr, E::pack(f));
    }
}

// Rows of up to VPT vectors per thread, any length: the weight read at the store, element by
// element (rows of a length that is not a multiple of V: the weight lines up with x's vectors
// only on their 16-byte-aligned rows, and they are the uncommon case).
template <typename T, int VPT>
__device__ __forceinline__ void fused_rows(const T* __restrict__ x, const T* __restrict__ res,
                                           const T* __restrict__ w, T* __restrict__ y, T* __restrict__ res_out,
                                           long long rows, int n, float eps, float* red_sum) {
    using E = Elem<T>;

    // x's body in registers (r.buf), h written over it.
    RegRow<T, VPT> r(x, y, rows, n, 0.0f);
    const uint4* rv = reinterpret_cast<const uint4*>(res + r.base + r.s.head);
    uint4* ov = reinterpret_cast<uint4*>(res_out + r.base + r.s.head);
    uint4 rb[VPT];
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) rb[k] = load16(rv + r.index(k));
    }
    const float sh = r.si >= 0 ? add_scalar(r.xr + r.si, res + r.base + r.si, res_out + r.base + r.si) : 0.0f;

    float ss = sh * sh;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) {
            r.buf[k] = add_vec<T>(r.buf[k], rb[k], ss);
            store16(ov + r.index(k), r.buf[k]);
        }
    }
    const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) {
            constexpr int V = E::V;
            const long long c = r.s.head + static_cast<long long>(r.index(k)) * V;
            float f[V];
            E::unpack(r.buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * E::load(w + c + j);
            store16(r.yv + r.index(k), E::pack(f));
        }
    }
    if (r.si >= 0) E::store(r.yr + r.si, (sh * rstd) * E::load(w + r.si));
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
        const LoopRow<T> r(x, y, row, n, 0.0f);
        const uint4* rv = reinterpret_cast<const uint4*>(res + base + r.s.head);
        uint4* ov = reinterpret_cast<uint4*>(res_out + base + r.s.head);
        const float sh = r.si >= 0 ? add_scalar(r.xr + r.si, res + base + r.si, res_out + base + r.si) : 0.0f;

        float ss = sh * sh;
        for (int i = t; i < r.s.body; i += tpr) {
            store16(ov + i, add_vec<T>(load16(r.xv + i), load16(rv + i), ss));
        }
        const float rstd = rms_rstd(row_reduce<false>(ss, red_sum), n, eps);

        // This thread wrote ov[i] above: a plain load sees it.
        for (int i = t; i < r.s.body; i += tpr) rms_store(ov[i], w, r.s, i, rstd, r.yv);
        if (r.si >= 0) E::store(r.yr + r.si, (sh * rstd) * E::load(w + r.si));
    }
}

#define TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(T, SUFFIX)                                                             \
    extern "C" __global__ void __launch_bounds__(1024) fused_add_rms_norm_rows_v4_##SUFFIX(                       \
        const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w, T* __restrict__ y,           \
        T* __restrict__ res_out, long long rows, int n, float eps) {                                              \
        __shared__ float red_sum[32 * 32];                                                                        \
        /* n is uniform: every block takes the same side. */                                                      \
        if (n % Elem<T>::V == 0) {                                                                                \
            fused_rows_aligned<T>(x, res, w, y, res_out, rows, n, eps, red_sum);                                  \
        } else {                                                                                                  \
            fused_rows<T, 4>(x, res, w, y, res_out, rows, n, eps, red_sum);                                       \
        }                                                                                                         \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(1024) fused_add_rms_norm_loop_##SUFFIX(                          \
        const T* __restrict__ x, const T* __restrict__ res, const T* __restrict__ w, T* __restrict__ y,           \
        T* __restrict__ res_out, long long rows, int n, float eps) {                                              \
        fused_loop<T>(x, res, w, y, res_out, rows, n, eps);                                                       \
    }

TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(float, f32)
TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(__half, f16)
TILEOPS_FUSED_ADD_RMS_NORM_ENTRIES(__nv_bfloat16, bf16)
