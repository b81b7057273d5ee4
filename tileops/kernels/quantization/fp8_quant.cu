// Dynamic fp8 (e4m3) quantization: x viewed as `groups` contiguous groups of `g` elements (a row
// of [M, K] per token when g == K, or K / g groups per row); per group scale = max(amax / 448,
// 1 / (448 * 512)) in f32 and codes = saturate_e4m3(x * (1 / scale)). Entry points per dtype:
//
//   fp8_quant_rows_*   the group stays in registers (CH = 8 input vectors of 16 bytes per thread,
//                      up to 512 threads per group): x read once.
//   fp8_quant_loop_*   groups too long for one block's registers: one block per group, x read
//                      twice (the second read mostly from L2).
//
// The body of a group is aligned to the OUTPUT (a group of g % 16 != 0 elements starts anywhere in
// a 16-byte line of y): `head` scalars up to the first 16-byte boundary of y, `body` x 16
// elements, `tail` scalars. At that boundary x is 16-byte aligned too (the element index is a
// multiple of 16). The body is read as 16-byte vectors (V elements: 4 f32, 8 f16/bf16) with
// consecutive lanes on consecutive vectors: lane t of a group holds vectors t, t + tpr, t + 2 tpr,
// ... (tpr = threads per group), so one warp load covers whole sectors. The magnitudes' max is
// taken on the packed vectors (no unpacking: see Vec), then over the group's lanes by shuffles.
// Codes: a 2-byte vector's 8 codes are half of a 16-byte store, so neighbouring lanes swap one
// vector's codes and each stores 16; an f32 vector's 4 codes are a quarter of one, so 4 lanes
// transpose their codes of 4 steps (store_codes).
//
// NaN propagates through the group max, as torch.amax: a group holding a NaN gets scale NaN and
// every code NaN (0x7F). Otherwise +-inf makes the scale inf, its own code NaN (inf * 0) and the
// group's finite codes 0. The CPU reference does the same, bit for bit.
//
// Launch contract (checked by the host): x, y, scales 16-byte aligned; rows kernel: blockDim.x =
// threads per group (a power of two <= 512, at least 2 for f16/bf16 and 4 for f32: the code swaps),
// blockDim.y = groups per block, blockDim.x * blockDim.y a multiple of 32 and blockDim.y <= 8
// when blockDim.x >= 32; loop kernel: blockDim = (1024, 1).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// The stores are 16 e4m3 codes (one 128-bit store per 16 elements).
// @entry fp8_quant_rows_{f32,f16,bf16}: vector loads, vector stores
// @entry fp8_quant_loop_{f32,f16,bf16}: vector loads, vector stores

#include "tileops_common.cuh"
#include "tileops_fp8.cuh"

using namespace tileops;

struct Split16 {
    int head;
    int body;
    int tail;
};

__device__ __forceinline__ Split16 split16(const unsigned char* y, int n) {
    const int misaligned = static_cast<int>(reinterpret_cast<unsigned long long>(y) & 15u);
    Split16 s;
    s.head = min(n, (16 - misaligned) & 15);
    s.body = (n - s.head) / 16;
    s.tail = n - s.head - s.body * 16;
    return s;
}

// The element index of scalar number q (head scalars first, then the tail).
__device__ __forceinline__ int scalar_at(const Split16& s, int q) {
    return q < s.head ? q : s.head + s.body * 16 + (q - s.head);
}

// One 16-byte input vector (V elements) at a time: its magnitudes folded into a running max
// without unpacking, and its V codes.
template <typename T> struct Vec;

// 2-byte types: the running max is a packed pair (max.NaN.{f16,bf16}x2 of the magnitudes: exact,
// NaN propagating, one instruction per two elements); 8 codes per vector, as a uint2.
template <typename T> struct Vec16 {
    static constexpr int V = 8;
    static constexpr int S = 2;  // steps per 16-byte run of codes
    using Codes = uint2;
    __device__ static __forceinline__ Codes quantize(const uint4& r, float inv) {
        float f[V];
        Elem<T>::unpack(r, f);
        return make_uint2(fp8x4(f[0] * inv, f[1] * inv, f[2] * inv, f[3] * inv),
                          fp8x4(f[4] * inv, f[5] * inv, f[6] * inv, f[7] * inv));
    }
};

template <> struct Vec<__nv_bfloat16> : Vec16<__nv_bfloat16> {
    __device__ static __forceinline__ unsigned absmax(const uint4& r, unsigned m) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
        __nv_bfloat162 acc = *reinterpret_cast<const __nv_bfloat162*>(&m);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc = __hmax2_nan(acc, __habs2(*reinterpret_cast<const __nv_bfloat162*>(&w[i])));
        return bf162_bits(acc);
    }
    __device__ static __forceinline__ float amax(unsigned m) {
        return nan_max(__uint_as_float(m << 16), __uint_as_float(m & 0xffff0000u));
    }
};

template <> struct Vec<__half> : Vec16<__half> {
    __device__ static __forceinline__ unsigned absmax(const uint4& r, unsigned m) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
        __half2 acc = bits_half2(m);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc = __hmax2_nan(acc, __habs2(bits_half2(w[i])));
        return half2_bits(acc);
    }
    __device__ static __forceinline__ float amax(unsigned m) {
        const float2 f = __half22float2(bits_half2(m));
        return nan_max(f.x, f.y);
    }
};

// f32: the magnitudes' bits compared as unsigned integers (the same order as the values, every
// NaN above +inf); 4 codes per vector, as one word.
template <> struct Vec<float> {
    static constexpr int V = 4;
    static constexpr int S = 4;  // steps per 16-byte run of codes
    using Codes = unsigned;
    __device__ static __forceinline__ unsigned absmax(const uint4& r, unsigned m) {
        m = max(m, r.x & 0x7fffffffu);
        m = max(m, r.y & 0x7fffffffu);
        m = max(m, r.z & 0x7fffffffu);
        return max(m, r.w & 0x7fffffffu);
    }
    __device__ static __forceinline__ float amax(unsigned m) { return __uint_as_float(m); }
    __device__ static __forceinline__ Codes quantize(const uint4& r, float inv) {
        return fp8x4(__uint_as_float(r.x) * inv, __uint_as_float(r.y) * inv, __uint_as_float(r.z) * inv,
                     __uint_as_float(r.w) * inv);
    }
};

// Quantizes and stores the lane's vectors r[s] = vector i0 + s * tpr (s < S = Vec<T>::S), which
// with the same steps of the other lanes of its aligned S-lane segment make S whole 16-byte runs
// of codes (lane-contiguous vectors: lane t ^ x holds vector i ^ x; tpr a multiple of S). Each
// lane stores one run per step: 2-byte types (8 codes per vector, S = 2) swap one vector's codes
// with the neighbour lane, the even lane storing the run of step 0 (its own codes first), the odd
// lane that of step 1; f32 (4 codes per vector, S = 4) transposes the 4 x 4 words of its segment
// (two rounds of swaps), lane m storing the run of step m. One store instruction either way, so
// the warp's request covers the segment's contiguous runs. `n`: the vectors of the group (a
// multiple of S); past it a vector is neither loaded nor stored. Every lane of the warp must call
// it.
template <typename T>
__device__ __forceinline__ void store_codes(const uint4* r, float inv, unsigned char* y, int i0, int tpr, int n) {
    using Q = Vec<T>;
    if constexpr (Q::V == 8) {
        const uint2 ca = Q::quantize(r[0], inv);
        const uint2 cb = Q::quantize(r[1], inv);
        const bool even = (threadIdx.x & 1) == 0;
        const uint2 send = even ? cb : ca;
        const unsigned r0 = __shfl_xor_sync(0xffffffffu, send.x, 1);
        const unsigned r1 = __shfl_xor_sync(0xffffffffu, send.y, 1);
        const int at = even ? i0 : i0 - 1 + tpr;
        const uint4 v = even ? make_uint4(ca.x, ca.y, r0, r1) : make_uint4(r0, r1, cb.x, cb.y);
        if (at < n) store16(y + at * 8, v);
    } else {
        unsigned w[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) w[k] = Q::quantize(r[k], inv);
        const int m = threadIdx.x & 3;
        // Lanes m and m ^ 2 swap 2 x 2 blocks: lane m < 2 keeps its steps 0, 1 and takes lane
        // m + 2's; lane m >= 2 keeps its steps 2, 3 and takes lane m - 2's.
        const bool hi = (m & 2) != 0;
        const unsigned s0 = __shfl_xor_sync(0xffffffffu, hi ? w[0] : w[2], 2);
        const unsigned s1 = __shfl_xor_sync(0xffffffffu, hi ? w[1] : w[3], 2);
        const unsigned x0 = hi ? s0 : w[0], x1 = hi ? s1 : w[1], x2 = hi ? w[2] : s0, x3 = hi ? w[3] : s1;
        // Then lanes m and m ^ 1 swap within the blocks: lane m ends with step m of lanes 0-3.
        const bool odd = (m & 1) != 0;
        const unsigned q0 = __shfl_xor_sync(0xffffffffu, odd ? x0 : x1, 1);
        const unsigned q1 = __shfl_xor_sync(0xffffffffu, odd ? x2 : x3, 1);
        const uint4 v = odd ? make_uint4(q0, x1, q1, x3) : make_uint4(x0, q0, x2, q1);
        const int at = i0 - m + m * tpr;
        if (at < n) store16(y + at * 4, v);
    }
}

template <typename T, int CH>
__device__ __forceinline__ void fp8_quant_rows(const T* __restrict__ x, unsigned char* __restrict__ y,
                                               float* __restrict__ scales, long long groups, int g) {
    using E = Elem<T>;
    using Q = Vec<T>;
    constexpr int V = Q::V;
    static_assert(CH % Q::S == 0, "vectors are stored S steps at a time");
    __shared__ float red[32 * 8];

    const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    const bool active = row < groups;
    const long long base = (active ? row : 0) * static_cast<long long>(g);
    const T* xr = x + base;
    unsigned char* yr = y + base;
    const Split16 s = split16(yr, g);
    const T* xv = xr + s.head;
    unsigned char* yv = yr + s.head;
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    // Vector i of the body is element s.head + i * V; lane t holds vectors t + k * tpr.
    const int n = active ? s.body * (16 / V) : 0;

    const uint4* xp = reinterpret_cast<const uint4*>(xv) + t;
    uint4 buf[CH];
#pragma unroll
    for (int k = 0; k < CH; ++k, xp += tpr) {
        if (t + k * tpr < n) buf[k] = load16(xp);
    }
    float amax = 0.0f;
    const int scalars = active ? s.head + s.tail : 0;
    for (int q = t; q < scalars; q += tpr) amax = nan_max(amax, fabsf(E::load(xr + scalar_at(s, q))));
    unsigned m = 0;
#pragma unroll
    for (int k = 0; k < CH; ++k) {
        if (t + k * tpr < n) m = Q::absmax(buf[k], m);
    }
    amax = nan_max(amax, Q::amax(m));
    amax = tpr <= 32 ? segment_max(amax, tpr) : block_amax(amax, red);
    const float scale = fp8_scale(amax);
    const float inv = 1.0f / scale;

#pragma unroll
    for (int k = 0; k < CH; k += Q::S) store_codes<T>(buf + k, inv, yv, t + k * tpr, tpr, n);
    for (int q = t; q < scalars; q += tpr) {
        const int at = scalar_at(s, q);
        yr[at] = fp8x1(E::load(xr + at) * inv);
    }
    if (active && t == 0) scales[row] = scale;
}

template <typename T>
__device__ __forceinline__ void fp8_quant_loop(const T* __restrict__ x, unsigned char* __restrict__ y,
                                               float* __restrict__ scales, long long groups, int g) {
    using E = Elem<T>;
    using Q = Vec<T>;
    constexpr int V = Q::V;
    __shared__ float red[32];
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    for (long long row = blockIdx.x; row < groups; row += gridDim.x) {
        const T* xr = x + row * static_cast<long long>(g);
        unsigned char* yr = y + row * static_cast<long long>(g);
        const Split16 s = split16(yr, g);
        const T* xv = xr + s.head;
        unsigned char* yv = yr + s.head;
        const int n = s.body * (16 / V);
        const int scalars = s.head + s.tail;
        float amax = 0.0f;
        for (int q = t; q < scalars; q += tpr) amax = nan_max(amax, fabsf(E::load(xr + scalar_at(s, q))));
        unsigned m = 0;
        for (int i = t; i < n; i += tpr) m = Q::absmax(load16(xv + i * V), m);
        amax = block_amax(nan_max(amax, Q::amax(m)), red);
        const float scale = fp8_scale(amax);
        const float inv = 1.0f / scale;
        // S lane-contiguous steps per iteration; the bound is the block's, so that every lane
        // reaches the swaps in store_codes.
        for (int b = 0; b < n; b += Q::S * tpr) {
            // A vector past n is not loaded: its codes are swapped but never stored.
            const uint4* xp = reinterpret_cast<const uint4*>(xv) + b + t;
            uint4 r[Q::S];
#pragma unroll
            for (int k = 0; k < Q::S; ++k, xp += tpr) {
                if (b + t + k * tpr < n) r[k] = load16(xp);
            }
            store_codes<T>(r, inv, yv, b + t, tpr, n);
        }
        for (int q = t; q < scalars; q += tpr) {
            const int at = scalar_at(s, q);
            yr[at] = fp8x1(E::load(xr + at) * inv);
        }
        if (t == 0) scales[row] = scale;
    }
}

#define TILEOPS_FP8_QUANT_ENTRIES(T, SUFFIX, CH)                                                                   \
    extern "C" __global__ void __launch_bounds__(512) fp8_quant_rows_##SUFFIX(                                     \
        const T* __restrict__ x, unsigned char* __restrict__ y, float* __restrict__ scales, long long groups,    \
        int g) {                                                                                                   \
        fp8_quant_rows<T, CH>(x, y, scales, groups, g);                                                            \
    }                                                                                                              \
    extern "C" __global__ void __launch_bounds__(1024) fp8_quant_loop_##SUFFIX(                                    \
        const T* __restrict__ x, unsigned char* __restrict__ y, float* __restrict__ scales, long long groups,    \
        int g) {                                                                                                   \
        fp8_quant_loop<T>(x, y, scales, groups, g);                                                                \
    }

TILEOPS_FP8_QUANT_ENTRIES(float, f32, 8)
TILEOPS_FP8_QUANT_ENTRIES(__half, f16, 8)
TILEOPS_FP8_QUANT_ENTRIES(__nv_bfloat16, bf16, 8)
