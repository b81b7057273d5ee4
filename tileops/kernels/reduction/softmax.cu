// Softmax, exp(x - max) / sum(exp(x - max)), and log_softmax, (x - max) - log(sum(exp(x - max))),
// over one dimension, accumulating in f32. One body per kernel shape, templated on LOG: the two
// differ only in the output step (softmax_norm / softmax_out). Entry points per dtype (f32, f16,
// bf16), each as softmax_* and log_softmax_*:
//
//   softmax_rows_v4_*, softmax_rows_v8_*, softmax_rows_v16_*   last dim, up to 4 / 8 / 16 vectors
//       of 16 bytes per thread: the whole row stays in registers, so x is read from DRAM once
//       (max, sum, write).
//   softmax_partial_*, softmax_finalize_*   last dim, rows too long for one block's registers:
//       each block takes a chunk of a row; partial writes (chunk max, chunk sum), finalize combines
//       a row's partials and writes its chunk (the second read of x mostly hits L2). The partials
//       are the same for both ops.
//   softmax_cols_*, softmax_cols_vec_*      any other dim ([outer, n, inner], inner > 1): one
//       thread per column (or per 16-byte group of columns), online max/sum, then a write pass.
//
// Semantics follow PyTorch: a row that holds a NaN or +inf, or is all -inf, becomes all NaN.
// Launch contract (checked by the host): x, y 16-byte aligned; rows kernels take blockDim.x = threads
// per row (a multiple of 32), blockDim.y = rows per block (<= 32); gridDim.x * blockDim.y >= rows.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// Softmax and log_softmax, one body each with the output step as a template parameter, so every
// `softmax_*` entry has a `log_softmax_*` twin with the same access pattern.
// @entry softmax_rows_v4_{f32,f16,bf16}: vector loads, vector stores
// @entry softmax_rows_v8_{f32,f16,bf16}: vector loads, vector stores
// @entry softmax_rows_v16_{f32,f16,bf16}: vector loads, vector stores
//   Writes one (max, sum) pair per block.
// @entry softmax_partial_{f32,f16,bf16}: vector loads
// @entry softmax_finalize_{f32,f16,bf16}: vector loads, vector stores
//   One element per thread: for inner extents that are not a multiple of a 16-byte vector.
// @entry softmax_cols_{f32,f16,bf16}: scalar
// @entry softmax_cols_vec_{f32,f16,bf16}: vector loads, vector stores
// @entry log_softmax_rows_v4_{f32,f16,bf16}: vector loads, vector stores
// @entry log_softmax_rows_v8_{f32,f16,bf16}: vector loads, vector stores
// @entry log_softmax_rows_v16_{f32,f16,bf16}: vector loads, vector stores
// @entry log_softmax_partial_{f32,f16,bf16}: vector loads
// @entry log_softmax_finalize_{f32,f16,bf16}: vector loads, vector stores
// @entry log_softmax_cols_{f32,f16,bf16}: scalar
// @entry log_softmax_cols_vec_{f32,f16,bf16}: vector loads, vector stores

#include "tileops_common.cuh"

using namespace tileops;

// Every exp(x - m) of a row is `shift(x)` (ExpShift: one FFMA and one MUFU op), which is
// exp(x - m) * 2^e for one e per row (the rounding of m * log2e).
//
// The output step, the only difference between the ops: a row's max m and sum gives
// y = shift(x) * norm for softmax, y = (x - m) - norm for log_softmax. `biased`: the sum is of
// shift(x) itself (the row in registers), so softmax's norm is 1 / sum (2^e cancels) and
// log_softmax's log(sum) - e ln 2; otherwise the sum is of exp(x - m), and softmax's norm takes
// the 2^-e that shift(x) needs.
template <bool LOG>
__device__ __forceinline__ float softmax_norm(float sum, const ExpShift& shift, bool biased) {
    if constexpr (LOG) {
        return biased ? logf(sum) - shift.log_bias() : logf(sum);
    } else {
        return biased ? 1.0f / sum : shift.unbias(1.0f / sum);
    }
}

template <bool LOG>
__device__ __forceinline__ float softmax_out(float x, float m, const ExpShift& shift, float norm) {
    if constexpr (LOG) {
        return (x - m) - norm;
    } else {
        return shift(x) * norm;
    }
}

// m's max with the V values of one packed vector (fmaxf: NaN ignored, it reaches the sum).
template <typename T>
__device__ __forceinline__ float max_values(const uint4& q, float m) {
    float f[Elem<T>::V];
    Elem<T>::unpack(q, f);
#pragma unroll
    for (int j = 0; j < Elem<T>::V; ++j) m = fmaxf(m, f[j]);
    return m;
}

// sum plus shift(v) for the V values v of one packed vector.
template <typename T>
__device__ __forceinline__ float add_exps(const uint4& q, const ExpShift& shift, float sum) {
    float f[Elem<T>::V];
    Elem<T>::unpack(q, f);
#pragma unroll
    for (int j = 0; j < Elem<T>::V; ++j) sum += shift(f[j]);
    return sum;
}

// The output step for one packed vector, stored to *y.
template <bool LOG, typename T>
__device__ __forceinline__ void softmax_store(const uint4& q, float m, const ExpShift& shift, float norm, uint4* y) {
    float f[Elem<T>::V];
    Elem<T>::unpack(q, f);
#pragma unroll
    for (int j = 0; j < Elem<T>::V; ++j) f[j] = softmax_out<LOG>(f[j], m, shift, norm);
    store16(y, Elem<T>::pack(f));
}

// The row's max m, then the sum of shift(x) (ExpShift: exp(x - m) times one 2^e per row), then
// the output. softmax keeps shift(x) of its first KEEP vectors in registers for the store pass,
// as f32 (V registers a vector), and recomputes it for the others: for f32 KEEP = VPT costs no
// registers (a vector's exps take the place of its raw values, dead after the sum); for 16-bit
// types each kept vector costs 4 more registers, and 2 blocks of 512 threads per SM leave 64 a
// thread in all, so only part of the row fits (see the entries).
template <bool LOG, typename T, int VPT, int KEEP>
__device__ __forceinline__ void softmax_rows(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {
    using E = Elem<T>;
    constexpr int V = E::V;
    constexpr int kKeep = LOG ? 0 : KEEP;
    static_assert(KEEP <= VPT, "kept vectors are vectors of the row");
    __shared__ float red_max[32 * 32];
    __shared__ float red_sum[32 * 32];

    const RegRow<T, VPT> r(x, y, rows, n, neg_inf());

    VecMax<T, false> vm;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) vm.add(r.buf[k]);
    }
    float m = row_reduce<true>(fmaxf(vm.value(), r.sx), red_max);
    const ExpShift shift(m);

    float ex[kKeep > 0 ? kKeep : 1][V];
    float sum = r.si >= 0 ? shift(r.sx) : 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) {
            float f[V];
            E::unpack(r.buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) {
                const float e = shift(f[j]);
                if (k < kKeep) ex[k < kKeep ? k : 0][j] = e;
                sum += e;
            }
        }
    }
    sum = row_reduce<false>(sum, red_sum);
    const float norm = softmax_norm<LOG>(sum, shift, true);

#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (r.owns(k)) {
            if (k < kKeep) {
                float f[V];
#pragma unroll
                for (int j = 0; j < V; ++j) f[j] = ex[k < kKeep ? k : 0][j] * norm;
                store16(r.yv + r.index(k), E::pack(f));
            } else {
                softmax_store<LOG, T>(r.buf[k], m, shift, norm, r.yv + r.index(k));
            }
        }
    }
    if (r.si >= 0) E::store(r.yr + r.si, softmax_out<LOG>(r.sx, m, shift, norm));
}

// Loads the part of a row's body that chunk `c` owns into registers, plus the one head/tail scalar
// of this thread. Returns the scalar's row index or -1.
template <typename T, int VPT>
__device__ __forceinline__ int load_chunk(const T* xr, const RowSplit& s, int c, int chunks, uint4 (&buf)[VPT],
                                          float& sx) {
    const int t = threadIdx.x;
    const int v0 = c * VPT * static_cast<int>(blockDim.x);
    const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = v0 + t + k * static_cast<int>(blockDim.x);
        if (i < s.body) buf[k] = load16(xv + i);
    }
    const int si = scalar_index<T>(s, t, c == 0, c == chunks - 1);
    sx = si >= 0 ? Elem<T>::load(xr + si) : neg_inf();
    return si;
}

// One chunk of a long row: (max, sum of exp(x - max)) into part[row * chunks + chunk].
template <typename T, int VPT>
__device__ __forceinline__ void softmax_partial(const T* __restrict__ x, float2* __restrict__ part, long long rows,
                                                int n) {
    using E = Elem<T>;
    __shared__ float red_max[32];
    __shared__ float red_sum[32];
    const int c = blockIdx.x;
    const int chunks = gridDim.x;
    const int v0 = c * VPT * static_cast<int>(blockDim.x);

    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const T* xr = x + row * static_cast<long long>(n);
        const RowSplit s = split_row(xr, n);
        uint4 buf[VPT];
        float sx;
        const int si = load_chunk<T, VPT>(xr, s, c, chunks, buf, sx);

        float m = sx;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            if (v0 + static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x) < s.body) {
                m = max_values<T>(buf[k], m);
            }
        }
        m = row_reduce<true>(m, red_max);
        // A chunk of only -inf (and NaN) has max -inf: measure it from 0 instead, so -inf
        // contributes 0 and NaN stays NaN, rather than -inf - -inf making the chunk NaN.
        const float ms = m == neg_inf() ? 0.0f : m;
        const ExpShift shift(ms);

        float sum = si >= 0 ? shift(sx) : 0.0f;
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            if (v0 + static_cast<int>(threadIdx.x) + k * static_cast<int>(blockDim.x) < s.body) {
                sum = add_exps<T>(buf[k], shift, sum);
            }
        }
        sum = row_reduce<false>(sum, red_sum);
        // The chunks' sums are combined with others of other shifts: each as a sum of exp(x - m).
        if (threadIdx.x == 0) part[row * chunks + c] = make_float2(m, shift.unbias(sum));
    }
}

// Combines a row's partials into (max, norm) and writes chunk blockIdx.x of the row.
template <bool LOG, typename T, int VPT>
__device__ __forceinline__ void softmax_finalize(const T* __restrict__ x, const float2* __restrict__ part,
                                                 T* __restrict__ y, long long rows, int n) {
    using E = Elem<T>;
    __shared__ float red_max[32];
    __shared__ float red_sum[32];
    const int c = blockIdx.x;
    const int chunks = gridDim.x;
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const int v0 = c * VPT * tpr;

    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const T* xr = x + row * static_cast<long long>(n);
        T* yr = y + row * static_cast<long long>(n);
        const RowSplit s = split_row(xr, n);
        // Issue the chunk's loads before reading the partials, to overlap the two latencies.
        uint4 buf[VPT];
        float sx;
        const int si = load_chunk<T, VPT>(xr, s, c, chunks, buf, sx);

        const float2* pr = part + row * chunks;
        float m = neg_inf();
        for (int i = t; i < chunks; i += tpr) m = fmaxf(m, pr[i].x);
        m = row_reduce<true>(m, red_max);
        float sum = 0.0f;
        for (int i = t; i < chunks; i += tpr) {
            const float2 p = pr[i];
            // A chunk of only -inf has p = (-inf, 0): exp(-inf - m) * 0 = 0 while m is finite.
            sum += p.y * exp_fast(p.x - m);
        }
        sum = row_reduce<false>(sum, red_sum);
        const ExpShift shift(m);
        const float norm = softmax_norm<LOG>(sum, shift, false);

        uint4* yv = reinterpret_cast<uint4*>(yr + s.head);
#pragma unroll
        for (int k = 0; k < VPT; ++k) {
            const int i = v0 + t + k * tpr;
            if (i < s.body) softmax_store<LOG, T>(buf[k], m, shift, norm, yv + i);
        }
        if (si >= 0) E::store(yr + si, softmax_out<LOG>(sx, m, shift, norm));
    }
}

// Softmax over the middle dim of [outer, n, inner]: thread g owns VW adjacent columns (VW = 1, or
// one 16-byte vector when inner is a multiple of it), so a warp reads contiguous memory.
template <bool LOG, typename T, int VW>
__device__ __forceinline__ void softmax_cols(const T* __restrict__ x, T* __restrict__ y, long long outer, int n,
                                             long long inner) {
    const long long groups = inner / VW;
    const long long total = outer * groups;
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long g = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; g < total; g += stride) {
        const long long o = g / groups;
        const long long base = o * n * inner + (g - o * groups) * VW;
        float m[VW];
        float s[VW];
#pragma unroll
        for (int j = 0; j < VW; ++j) {
            m[j] = neg_inf();
            s[j] = 0.0f;
        }
        for (int k = 0; k < n; ++k) {
            float f[VW];
            load_group<T, VW>(x + base + k * inner, f);
#pragma unroll
            for (int j = 0; j < VW; ++j) {
                // Online softmax: rescale the running sum when the max grows. While the max is
                // still -inf, measure from 0 so that -inf adds 0 (not NaN) and NaN stays NaN.
                const float mn = fmaxf(m[j], f[j]);
                if (mn != m[j]) {
                    s[j] *= exp_fast(m[j] - mn);
                    m[j] = mn;
                }
                s[j] += exp_fast(f[j] - (m[j] == neg_inf() ? 0.0f : m[j]));
            }
        }
        float norm[VW];
#pragma unroll
        for (int j = 0; j < VW; ++j) norm[j] = softmax_norm<LOG>(s[j], ExpShift(m[j]), false);
        for (int k = 0; k < n; ++k) {
            float f[VW];
            load_group<T, VW>(x + base + k * inner, f);
#pragma unroll
            for (int j = 0; j < VW; ++j) f[j] = softmax_out<LOG>(f[j], m[j], ExpShift(m[j]), norm[j]);
            store_group<T, VW>(y + base + k * inner, f);
        }
    }
}

// The vectors whose exps softmax keeps for the store pass (softmax_rows): all of them in f32,
// where they replace the raw values. In f16/bf16, v4 keeps its 4 (32 registers, within the 64
// of its 1024-thread bound); v8 and v16 recompute them: v8's 8 would need 64 registers for the
// exps alone, and ptxas spills them at 2 blocks of 512 per SM (and only 2 or 4 kept vectors
// cost more instructions than they save); v16 is the same at 128.
template <typename T> constexpr int kKeepV8 = sizeof(T) == 4 ? 8 : 0;
template <typename T> constexpr int kKeepV16 = sizeof(T) == 4 ? 16 : 0;

// Both ops' entry points; softmax_partial_* and log_softmax_partial_* share one body. The partial
// asks for 3 blocks per SM (at most 85 registers): left to its own heuristic ptxas aims at 64 and
// spills the f16 body; 3 x 256 threads x 8 loads of 16 bytes in flight still cover the latency.
// rows_v8 asks for 2 blocks of 512 per SM (at most 64 registers), so one block's loads overlap
// the other's reductions.
#define TILEOPS_SOFTMAX_ENTRIES(T, SUFFIX)                                                                          \
    extern "C" __global__ void __launch_bounds__(1024) softmax_rows_v4_##SUFFIX(                                    \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                        \
        softmax_rows<false, T, 4, 4>(x, y, rows, n);                                                                \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(512, 2) softmax_rows_v8_##SUFFIX(                                  \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                        \
        softmax_rows<false, T, 8, kKeepV8<T>>(x, y, rows, n);                                                       \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(512) softmax_rows_v16_##SUFFIX(                                    \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                        \
        softmax_rows<false, T, 16, kKeepV16<T>>(x, y, rows, n);                                                     \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256, 3) softmax_partial_##SUFFIX(                                  \
        const T* __restrict__ x, float2* __restrict__ part, long long rows, int n) {                                \
        softmax_partial<T, 8>(x, part, rows, n);                                                                    \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256) softmax_finalize_##SUFFIX(                                    \
        const T* __restrict__ x, const float2* __restrict__ part, T* __restrict__ y, long long rows, int n) {       \
        softmax_finalize<false, T, 8>(x, part, y, rows, n);                                                         \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256) softmax_cols_##SUFFIX(                                        \
        const T* __restrict__ x, T* __restrict__ y, long long outer, int n, long long inner) {                      \
        softmax_cols<false, T, 1>(x, y, outer, n, inner);                                                           \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256) softmax_cols_vec_##SUFFIX(                                    \
        const T* __restrict__ x, T* __restrict__ y, long long outer, int n, long long inner) {                      \
        softmax_cols<false, T, Elem<T>::V>(x, y, outer, n, inner);                                                  \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(1024) log_softmax_rows_v4_##SUFFIX(                                \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                        \
        softmax_rows<true, T, 4, 0>(x, y, rows, n);                                                                 \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(512, 2) log_softmax_rows_v8_##SUFFIX(                              \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                        \
        softmax_rows<true, T, 8, 0>(x, y, rows, n);                                                                 \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(512) log_softmax_rows_v16_##SUFFIX(                                \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                        \
        softmax_rows<true, T, 16, 0>(x, y, rows, n);                                                                \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256, 3) log_softmax_partial_##SUFFIX(                              \
        const T* __restrict__ x, float2* __restrict__ part, long long rows, int n) {                                \
        softmax_partial<T, 8>(x, part, rows, n);                                                                    \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256) log_softmax_finalize_##SUFFIX(                                \
        const T* __restrict__ x, const float2* __restrict__ part, T* __restrict__ y, long long rows, int n) {       \
        softmax_finalize<true, T, 8>(x, part, y, rows, n);                                                          \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256) log_softmax_cols_##SUFFIX(                                    \
        const T* __restrict__ x, T* __restrict__ y, long long outer, int n, long long inner) {                      \
        softmax_cols<true, T, 1>(x, y, outer, n, inner);                                                            \
    }                                                                                                               \
    extern "C" __global__ void __launch_bounds__(256) log_softmax_cols_vec_##SUFFIX(                                \
        const T* __restrict__ x, T* __restrict__ y, long long outer, int n, long long inner) {                      \
        softmax_cols<true, T, Elem<T>::V>(x, y, outer, n, inner);                                                   \
    }

TILEOPS_SOFTMAX_ENTRIES(float, f32)
TILEOPS_SOFTMAX_ENTRIES(__half, f16)
TILEOPS_SOFTMAX_ENTRIES(__nv_bfloat16, bf16)
