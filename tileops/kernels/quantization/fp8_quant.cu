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
// vector's codes and each stores 16 (store_codes); an f32 vector's 4 codes are one lane-contiguous
// 4-byte store.
//
// NaN propagates through the group max, as torch.amax: a group holding a NaN gets scale NaN and
// every code NaN (0x7F). Otherwise +-inf makes the scale inf, its own code NaN (inf * 0) and the
// group's finite codes 0. The CPU reference does the same, bit for bit.
//
// Launch contract (checked by the host): x, y, scales 16-byte aligned; rows kernel: blockDim.x =
// threads per group (a power of two <= 512, at least 2 for f16/bf16: the code swap pairs lanes),
// blockDim.y = groups per block, blockDim.x * blockDim.y a multiple of 32 and blockDim.y <= 8
// when blockDim.x >= 32; loop kernel: blockDim = (1024, 1).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// The 2-byte types store 16 e4m3 codes (one 128-bit store per 16 elements); f32 stores its 4 codes
// per 16-byte input vector as one 32-bit store (lane-contiguous, so a warp still writes whole
// sectors).
// @entry fp8_quant_rows_{f16,bf16}: vector loads, vector stores
// @entry fp8_quant_loop_{f16,bf16}: vector loads, vector stores
// @entry fp8_quant_rows_f32: vector loads
// @entry fp8_quant_loop_f32: vector loads

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

// Quantizes and stores two vectors of the lane: ra at vector index ia and rb at ib = ia + tpr,
// where lane t ^ 1 holds the neighbouring vectors ia ^ 1 and ib ^ 1 (lane-contiguous steps over
// an even lane count). `n`: the vectors of the group (even for 2-byte types); past it a vector is
// neither loaded nor stored. 2-byte types: the 8 codes of a vector are half of a 16-byte store,
// so the two lanes swap one vector's codes: the even lane stores the pair at ia (its own codes
// first), the odd lane the pair at ib - 1 (its own codes last), in ONE store instruction so that
// the warp's request covers both lanes' 32 contiguous bytes. Every lane of the warp must call it.
// f32: each lane stores its own 4 codes per vector (lane-contiguous 4-byte stores).
template <typename T>
__device__ __forceinline__ void store_codes(const uint4& ra, const uint4& rb, float inv, unsigned char* y, int ia,
                                            int ib, int n) {
    using Q = Vec<T>;
    const typename Q::Codes ca = Q::quantize(ra, inv);
    const typename Q::Codes cb = Q::quantize(rb, inv);
    if constexpr (Q::V == 8) {
        const bool even = (threadIdx.x & 1) == 0;
        const uint2 send = even ? cb : ca;
        const unsigned r0 = __shfl_xor_sync(0xffffffffu, send.x, 1);
        const unsigned r1 = __shfl_xor_sync(0xffffffffu, send.y, 1);
        const int at = even ? ia : ib - 1;
        const uint4 v = even ? make_uint4(ca.x, ca.y, r0, r1) : make_uint4(r0, r1, cb.x, cb.y);
        if (at < n) store16(y + at * 8, v);
    } else {
        if (ia < n) *reinterpret_cast<unsigned*>(y + ia * 4) = ca;
        if (ib < n) *reinterpret_cast<unsigned*>(y + ib * 4) = cb;
    }
}

template <typename T, int CH>
__device__ __forceinline__ void fp8_quant_rows(const T* __restrict__ x, unsigned char* __restrict__ y,
                                               float* __restrict__ scales, long long groups, int g) {
    using E = Elem<T>;
    using Q = Vec<T>;
    constexpr int V = Q::V;
    static_assert(CH % 2 == 0, "vectors are stored two steps at a time");
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
    for (int k = 0; k < CH; k += 2) store_codes<T>(buf[k], buf[k + 1], inv, yv, t + k * tpr, t + (k + 1) * tpr, n);
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
        // Two lane-contiguous steps per iteration; the bound is the block's, so that every lane
        // reaches the swap in store_codes.
        for (int b = 0; b < n; b += 2 * tpr) {
            const int ia = b + t;
            const int ib = ia + tpr;
            uint4 ra = make_uint4(0, 0, 0, 0), rb = ra;
            if (ia < n) ra = load16(xv + ia * V);
            if (ib < n) rb = load16(xv + ib * V);
            store_codes<T>(ra, rb, inv, yv, ia, ib, n);
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
