// Shared device code for tileops kernels: element traits, 16-byte vector access, row geometry and
// row reductions. Passed to NVRTC as the header "tileops_common.cuh" (never compiled on its own).
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

// The launch's dynamic shared memory as an array `name` of T. On the GPU an `extern __shared__`
// array; under the CPU emulator (cuda-emu, which defines TILEOPS_EMULATED) the launch's own buffer
// of exactly the requested size, so an access past it is caught.
#ifdef TILEOPS_EMULATED
#define TILEOPS_DYNAMIC_SHARED(T, name) T* const name = static_cast<T*>(cuda_emu_dynamic_shared())
#else
#define TILEOPS_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

namespace tileops {

// NVRTC has no INFINITY macro.
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

constexpr float kLog2e = 1.4426950408889634f;

// exp(v) as exp2(v * log2(e)): one MUFU op (ex2.approx, ~2 ulp) instead of the longer expf
// sequence; the kernels are memory-bound only if the per-element instruction count stays small.
__device__ __forceinline__ float exp_fast(float v) { return exp2f(v * kLog2e); }

// 2^v as the bare ex2.approx.ftz.f32 (one MUFU op, ~2 ulp): exp2f without -ftz adds a compare
// and two predicated multiplies around it to handle subnormal results. A result under 2^-126
// flushes to zero, which no sum of at least one 1.0 and no rounding to f16/bf16 can notice
// (bf16's subnormals start there too, f16's far above). The emulator computes it on the CPU with
// the same flush.
__device__ __forceinline__ float ex2_ftz(float v) {
#ifdef TILEOPS_EMULATED
    const float r = exp2f(v);
    return r < 0x1p-126f ? 0.0f : r;
#else
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#endif
}

// max(a, b) with NaN winning (torch.amax): one FMNMX.NAN (max.NaN.f32, sm_80+), where
// `(a > b || a != a) ? a : b` is two compares and a select. The emulator computes the select.
__device__ __forceinline__ float fmax_nan(float a, float b) {
#ifdef TILEOPS_EMULATED
    return (a > b || a != a) ? a : b;
#else
    float r;
    asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#endif
}

// 1 / v as the bare rcp.approx.ftz.f32 (one MUFU op, ~1 ulp): rcp.approx without -ftz, which
// __fdividef(1, v) compiles to, adds a compare, a select and two multiplies around it to scale
// tiny divisors. For v >= 1 the flush only touches results under 2^-126 (v > 2^126). The
// emulator divides exactly, with the same flush.
__device__ __forceinline__ float rcp_ftz(float v) {
#ifdef TILEOPS_EMULATED
    const float r = 1.0f / v;
    return fabsf(r) < 0x1p-126f ? copysignf(0.0f, r) : r;
#else
    float r;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(v));
    return r;
#endif
}

// a / b as div.full.f32 for results rounded to f16 or bf16: rcp with range scaling, 2 ulp of f32
// over the full range (subnormal quotients and a / inf = 0 included), a handful of instructions
// where IEEE division (div.rn.f32) takes a dozen and a slow-path branch. The emulator divides
// exactly.
__device__ __forceinline__ float fast_div(float a, float b) {
#ifdef TILEOPS_EMULATED
    return a / b;
#else
    float r;
    asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
#endif
}

// 1 + exp(v) for f16 and bf16 outputs: ex2.approx.ftz (its flush of results under 2^-126
// vanishes in the 1 +; it overflows to inf where expf does, v > 88.72, up to the rounding of
// v log2 e, which no f16 or bf16 v reaches: their spacing there is 1/16 and 1/2).
__device__ __forceinline__ float one_plus_exp_fast(float v) { return 1.0f + ex2_ftz(v * kLog2e); }

// exp(x - m) for one shift m, as ex2(fma(x, log2e, -m * log2e)): one FFMA and one MUFU op per
// element, where exp_fast(x - m) is a FADD, an FMUL and the subnormal fix-up around the MUFU.
// Rounding m * log2e to `ml` scales every value by the same 2^e, e = m * log2e - ml (exact by
// an FMA, |e| <= half an ulp of ml): a ratio of two of them (softmax within one row) does not
// see it; a sum that must be exp(x - m)'s divides it out with `unbias` (or subtracts `log_bias`
// from its log). For an infinite m (a row of -inf, or one holding +inf: the results are NaN or
// 0 either way) e is taken as 0.
struct ExpShift {
    static constexpr float kLn2 = 0.6931471805599453f;
    float ml;  // m * log2e, rounded
    float e;   // m * log2e - ml
    __device__ __forceinline__ explicit ExpShift(float m) {
        ml = m * kLog2e;
        e = fabsf(ml) < __int_as_float(0x7f800000) ? fmaf(m, kLog2e, -ml) : 0.0f;
    }
    __device__ __forceinline__ float operator()(float x) const { return ex2_ftz(fmaf(x, kLog2e, -ml)); }
    // ln(2^e): log(sum of the values) - log_bias() = log(sum of exp(x - m)).
    __device__ __forceinline__ float log_bias() const { return e * kLn2; }
    // v * 2^-e: a sum of the values as the sum of exp(x - m). While |e ln 2| < 2^-12 (|m| up to
    // ~5000) as v - v e ln 2, whose next term is below f32's resolution; beyond, by one more ex2.
    __device__ __forceinline__ float unbias(float v) const {
        const float t = log_bias();
        return fabsf(t) < 0x1p-12f ? fmaf(-v, t, v) : v * ex2_ftz(-e);
    }
};

// Element traits: V elements per 16-byte vector, unpacking to and packing from f32.
template <typename T> struct Elem;

template <> struct Elem<float> {
    static constexpr int V = 4;
    __device__ static __forceinline__ float load(const float* p) { return __ldg(p); }
    __device__ static __forceinline__ void store(float* p, float v) { *p = v; }
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[V]) {
        f[0] = __uint_as_float(r.x);
        f[1] = __uint_as_float(r.y);
        f[2] = __uint_as_float(r.z);
        f[3] = __uint_as_float(r.w);
    }
    __device__ static __forceinline__ uint4 pack(const float (&f)[V]) {
        return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                          __float_as_uint(f[3]));
    }
};

__device__ __forceinline__ unsigned half2_bits(__half2 h) { return *reinterpret_cast<unsigned*>(&h); }
__device__ __forceinline__ __half2 bits_half2(unsigned u) { return *reinterpret_cast<__half2*>(&u); }

template <> struct Elem<__half> {
    static constexpr int V = 8;
    __device__ static __forceinline__ float load(const __half* p) { return __half2float(__ldg(p)); }
    __device__ static __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[V]) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const float2 t = __half22float2(bits_half2(w[i]));
            f[2 * i] = t.x;
            f[2 * i + 1] = t.y;
        }
    }
    __device__ static __forceinline__ uint4 pack(const float (&f)[V]) {
        return make_uint4(half2_bits(__floats2half2_rn(f[0], f[1])), half2_bits(__floats2half2_rn(f[2], f[3])),
                          half2_bits(__floats2half2_rn(f[4], f[5])), half2_bits(__floats2half2_rn(f[6], f[7])));
    }
};

__device__ __forceinline__ unsigned bf162_bits(__nv_bfloat162 h) { return *reinterpret_cast<unsigned*>(&h); }
__device__ __forceinline__ __nv_bfloat162 bits_bf162(unsigned u) { return *reinterpret_cast<__nv_bfloat162*>(&u); }

template <> struct Elem<__nv_bfloat16> {
    static constexpr int V = 8;
    __device__ static __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(__ldg(p)); }
    __device__ static __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
    // bf16 -> f32 is exact: the bf16 bits are the top half of the f32 bits.
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[V]) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            f[2 * i] = __uint_as_float(w[i] << 16);
            f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
        }
    }
    __device__ static __forceinline__ uint4 pack(const float (&f)[V]) {
        return make_uint4(bf162_bits(__floats2bfloat162_rn(f[0], f[1])), bf162_bits(__floats2bfloat162_rn(f[2], f[3])),
                          bf162_bits(__floats2bfloat162_rn(f[4], f[5])), bf162_bits(__floats2bfloat162_rn(f[6], f[7])));
    }
};

// The running max of 16-byte vectors, taken in the vectors' own type: for f16 and bf16 one
// HMNMX2 per two values and nothing unpacked (the max of two values is exact in any format),
// for f32 one FMNMX per value. kNan: a NaN wins (amax); otherwise a NaN is ignored as fmaxf
// does (softmax and logsumexp, where it reaches the sum instead).
template <typename T, bool kNan> struct VecMax;

template <bool kNan> struct VecMax<float, kNan> {
    float m = neg_inf();
    __device__ __forceinline__ static float max2(float a, float b) {
        if constexpr (kNan) {
            return fmax_nan(a, b);
        } else {
            return fmaxf(a, b);
        }
    }
    __device__ __forceinline__ void add(const uint4& q) {
        m = max2(m, __uint_as_float(q.x));
        m = max2(m, __uint_as_float(q.y));
        m = max2(m, __uint_as_float(q.z));
        m = max2(m, __uint_as_float(q.w));
    }
    __device__ __forceinline__ float value() const { return m; }
};

template <bool kNan> struct VecMax<__half, kNan> {
    __half2 m = bits_half2(0xfc00fc00u);  // -inf, -inf
    __device__ __forceinline__ static __half2 max2(__half2 a, __half2 b) {
        if constexpr (kNan) {
            return __hmax2_nan(a, b);
        } else {
            return __hmax2(a, b);
        }
    }
    __device__ __forceinline__ void add(const uint4& q) {
        m = max2(m, max2(max2(bits_half2(q.x), bits_half2(q.y)), max2(bits_half2(q.z), bits_half2(q.w))));
    }
    __device__ __forceinline__ float value() const {
        const float2 f = __half22float2(max2(m, __lowhigh2highlow(m)));
        return f.x;
    }
};

template <bool kNan> struct VecMax<__nv_bfloat16, kNan> {
    __nv_bfloat162 m = bits_bf162(0xff80ff80u);  // -inf, -inf
    __device__ __forceinline__ static __nv_bfloat162 max2(__nv_bfloat162 a, __nv_bfloat162 b) {
        if constexpr (kNan) {
            return __hmax2_nan(a, b);
        } else {
            return __hmax2(a, b);
        }
    }
    __device__ __forceinline__ void add(const uint4& q) {
        m = max2(m, max2(max2(bits_bf162(q.x), bits_bf162(q.y)), max2(bits_bf162(q.z), bits_bf162(q.w))));
    }
    __device__ __forceinline__ float value() const {
        const unsigned w = bf162_bits(max2(m, __lowhigh2highlow(m)));
        return __uint_as_float(w << 16);
    }
};

// 16-byte global accesses: ld.global.nc.v4 (read-only path) and st.global.v4.
__device__ __forceinline__ uint4 load16(const void* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ void store16(void* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }

// How one row of n elements splits into 16-byte vectors: `head` scalars up to the first 16-byte
// boundary, `body` whole vectors, then `tail` scalars. Every row of x and y has the same split,
// because the host passes 16-byte-aligned base pointers. Odd row lengths misalign every other
// row, so the split is per row.
struct RowSplit {
    int head;
    int body;
    int tail;
};

template <typename T>
__device__ __forceinline__ RowSplit split_row(const T* row, int n) {
    constexpr int V = Elem<T>::V;
    const int misaligned = static_cast<int>((reinterpret_cast<unsigned long long>(row) & 15u) / sizeof(T));
    RowSplit s;
    s.head = min(n, (V - misaligned) % V);
    s.body = (n - s.head) / V;
    s.tail = n - s.head - s.body * V;
    return s;
}

// The one scalar (head or tail element) that thread `t` of a row owns, as an index into the row,
// or -1: head elements go to threads 0..head-1, tail elements to the threads after them
// (head + tail < 2V <= 16 < 32, so one warp always covers them). A chunk of a split row owns the
// head only when it is the first chunk and the tail only when it is the last.
template <typename T>
__device__ __forceinline__ int scalar_index(const RowSplit& s, int t, bool has_head, bool has_tail) {
    const int head = has_head ? s.head : 0;
    const int tail = has_tail ? s.tail : 0;
    if (t < head) return t;
    if (t < head + tail) return s.head + s.body * Elem<T>::V + (t - head);
    return -1;
}

// The values of a per-column parameter (weight, bias) for body vector i of a row split as `s`.
// They line up with whole 16-byte vectors of the parameter only when the row has no head (it
// starts 16-byte aligned).
template <typename T>
__device__ __forceinline__ void load_param(const T* __restrict__ p, const RowSplit& s, int i,
                                           float (&pf)[Elem<T>::V]) {
    constexpr int V = Elem<T>::V;
    if (s.head == 0) {
        Elem<T>::unpack(load16(p + static_cast<long long>(i) * V), pf);
    } else {
#pragma unroll
        for (int j = 0; j < V; ++j) pf[j] = Elem<T>::load(p + s.head + static_cast<long long>(i) * V + j);
    }
}

// The row a thread of a rows kernel (the row in registers, blockDim.y rows per block) works on:
// threadIdx.y picks the row. Threads of a row past the end are inactive but still take part in
// the block's reductions; they point at row 0 so every address stays in bounds.
struct BlockRow {
    bool active;
    long long base;  // offset of the row's first element
};

__device__ __forceinline__ BlockRow block_row(long long rows, int n) {
    const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    BlockRow r;
    r.active = row < rows;
    r.base = (r.active ? row : 0) * static_cast<long long>(n);
    return r;
}

// Loads the body vectors this thread of a rows kernel owns (t + k * blockDim.x, k < VPT) into
// registers: VPT independent 16-byte loads in flight per thread.
template <int VPT>
__device__ __forceinline__ void load_body(const uint4* v, int body, bool active, uint4 (&buf)[VPT]) {
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        const int i = t + k * tpr;
        if (active && i < body) buf[k] = load16(v + i);
    }
}

// The row prologue of a rows kernel (the row in registers, blockDim.y rows per block), written
// once: the thread's row, how it splits into vectors, its VPT body vectors loaded into `buf`
// (vector t + k * tpr in buf[k]) and the one head/tail scalar it owns. Threads of a row past the
// end are inactive (they load nothing and own no scalar) but still take part in the block's
// reductions.
template <typename T, int VPT>
struct RegRow {
    bool active;
    long long base;  // offset of the row's first element
    const T* xr;     // the row of x
    T* yr;           // the row of y
    RowSplit s;
    int t;           // threadIdx.x
    int tpr;         // threads per row, blockDim.x
    uint4* yv;       // the body vectors of y's row
    uint4 buf[VPT];  // buf[k]: body vector t + k * tpr, when owns(k)
    int si;          // the index in the row of this thread's scalar, or -1
    float sx;        // its value, or `fill` when there is none

    __device__ __forceinline__ RegRow(const T* x, T* y, long long rows, int n, float fill) {
        const BlockRow r = block_row(rows, n);
        active = r.active;
        base = r.base;
        xr = x + base;
        yr = y + base;
        s = split_row(xr, n);
        t = threadIdx.x;
        tpr = blockDim.x;
        yv = reinterpret_cast<uint4*>(yr + s.head);
        // All loads first: VPT independent 16-byte loads in flight per thread.
        load_body(reinterpret_cast<const uint4*>(xr + s.head), s.body, active, buf);
        si = active ? scalar_index<T>(s, t, true, true) : -1;
        sx = si >= 0 ? Elem<T>::load(xr + si) : fill;
    }

    // The body index of buf[k].
    __device__ __forceinline__ int index(int k) const { return t + k * tpr; }
    // Whether buf[k] holds a body vector of this thread's row.
    __device__ __forceinline__ bool owns(int k) const { return active && index(k) < s.body; }
};

// The same prologue for one row of a loop kernel (one block per row, rows in a grid-stride loop,
// the body read from memory in each pass): the row's vectors and the thread's head/tail scalar.
template <typename T>
struct LoopRow {
    const T* xr;
    T* yr;
    RowSplit s;
    const uint4* xv;  // the body vectors of x's row
    uint4* yv;        // the body vectors of y's row
    int si;           // the index in the row of this thread's scalar, or -1
    float sx;         // its value, or `fill` when there is none

    __device__ __forceinline__ LoopRow(const T* x, T* y, long long row, int n, float fill) {
        xr = x + row * static_cast<long long>(n);
        yr = y + row * static_cast<long long>(n);
        s = split_row(xr, n);
        xv = reinterpret_cast<const uint4*>(xr + s.head);
        yv = reinterpret_cast<uint4*>(yr + s.head);
        si = scalar_index<T>(s, threadIdx.x, true, true);
        sx = si >= 0 ? Elem<T>::load(xr + si) : fill;
    }
};

// A group of VW adjacent elements of a column kernel (VW = 1, or one 16-byte vector), as f32.
template <typename T, int VW>
__device__ __forceinline__ void load_group(const T* p, float (&f)[VW]) {
    if constexpr (VW == 1) {
        f[0] = Elem<T>::load(p);
    } else {
        static_assert(VW == Elem<T>::V, "a group is one element or one 16-byte vector");
        Elem<T>::unpack(load16(p), f);
    }
}

template <typename T, int VW>
__device__ __forceinline__ void store_group(T* p, const float (&f)[VW]) {
    if constexpr (VW == 1) {
        Elem<T>::store(p, f[0]);
    } else {
        store16(p, Elem<T>::pack(f));
    }
}

// The sum of the V values of one packed vector, added to acc.
template <typename T>
__device__ __forceinline__ float add_values(const uint4& q, float acc) {
    float f[Elem<T>::V];
    Elem<T>::unpack(q, f);
#pragma unroll
    for (int j = 0; j < Elem<T>::V; ++j) acc += f[j];
    return acc;
}

// acc plus the sum of squared deviations from `mean` of the V values of one packed vector.
template <typename T>
__device__ __forceinline__ float add_sq_dev(const uint4& q, float mean, float acc) {
    float f[Elem<T>::V];
    Elem<T>::unpack(q, f);
#pragma unroll
    for (int j = 0; j < Elem<T>::V; ++j) {
        const float d = f[j] - mean;
        acc = fmaf(d, d, acc);
    }
    return acc;
}

// ss plus the sum of squares of the V values of one packed vector.
template <typename T>
__device__ __forceinline__ float add_squares(const uint4& q, float ss) {
    constexpr int V = Elem<T>::V;
    float f[V];
    Elem<T>::unpack(q, f);
#pragma unroll
    for (int j = 0; j < V; ++j) ss = fmaf(f[j], f[j], ss);
    return ss;
}

// RMSNorm's 1 / sqrt(mean square + eps) from a row's (reduced) sum of squares.
__device__ __forceinline__ float rms_rstd(float ss, int n, float eps) {
    return 1.0f / sqrtf(ss / static_cast<float>(n) + eps);
}

// RMSNorm's output for body vector i of a row split as `s`: (h * rstd) * weight, stored to y[i].
template <typename T>
__device__ __forceinline__ void rms_store(const uint4& hq, const T* __restrict__ w, const RowSplit& s, int i,
                                          float rstd, uint4* y) {
    constexpr int V = Elem<T>::V;
    float f[V];
    float wf[V];
    Elem<T>::unpack(hq, f);
    load_param(w, s, i, wf);
#pragma unroll
    for (int j = 0; j < V; ++j) f[j] = (f[j] * rstd) * wf[j];
    store16(y + i, Elem<T>::pack(f));
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Reduces `v` over the blockDim.x threads of one row (threadIdx.y picks the row). blockDim.x is
// a multiple of 32 and at most 1024; `scratch` holds 32 floats per row of the block. Every thread
// of the block must call it (it synchronises the block when a row spans several warps).
// fmaxf ignores NaN; softmax propagates NaN through the sum instead, as PyTorch's kernels do.
template <bool kMax>
__device__ __forceinline__ float row_reduce(float v, float* scratch) {
    v = kMax ? warp_max(v) : warp_sum(v);
    const int warps = blockDim.x >> 5;
    if (warps == 1) return v;
    const int lane = threadIdx.x & 31;
    float* s = scratch + threadIdx.y * 32;
    if (lane == 0) s[threadIdx.x >> 5] = v;
    __syncthreads();
    v = lane < warps ? s[lane] : (kMax ? neg_inf() : 0.0f);
    v = kMax ? warp_max(v) : warp_sum(v);
    // The scratch may be reused by the next reduction: no warp may write it before all have read.
    __syncthreads();
    return v;
}

}  // namespace tileops
