// Dynamic fp8 (e4m3) quantization: x viewed as `groups` contiguous groups of `g` elements (a row
// of [M, K] per token when g == K, or K / g groups per row); per group scale = max(amax / 448,
// 1 / (448 * 512)) in f32 and codes = saturate_e4m3(x * (1 / scale)). Entry points per dtype:
//
//   fp8_quant_rows_*   the group stays in registers (CH chunks of 16 elements per thread: CH = 2
//                      for f32, 4 for f16/bf16, up to 512 threads per group): x read once.
//   fp8_quant_loop_*   groups too long for one block's registers: one block per group, x read
//                      twice (the second read mostly from L2).
//
// A chunk is 16 consecutive elements: 16/V input vectors of 16 bytes and one 16-byte store of
// codes. Chunks are aligned to the OUTPUT (a group of g % 16 != 0 elements starts anywhere in a
// 16-byte line of y): `head` scalars up to the first 16-byte boundary of y, `body` chunks, `tail`
// scalars. At that boundary x is 16-byte aligned too (the element index is a multiple of 16).
//
// NaN propagates through the group max, as torch.amax: a group holding a NaN gets scale NaN and
// every code NaN (0x7F). Otherwise +-inf makes the scale inf, its own code NaN (inf * 0) and the
// group's finite codes 0. The CPU reference does the same, bit for bit.
//
// Launch contract (checked by the host): x, y, scales 16-byte aligned; rows kernel: blockDim.x =
// threads per group (a power of two <= 512), blockDim.y = groups per block, blockDim.x * blockDim.y
// a multiple of 32 and blockDim.y <= 8 when blockDim.x >= 32; loop kernel: blockDim = (1024, 1).

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

template <typename T>
struct Chunk {
    static constexpr int V = Elem<T>::V;
    static constexpr int NV = 16 / V;

    __device__ static __forceinline__ void load(const T* p, uint4 (&r)[NV]) {
#pragma unroll
        for (int v = 0; v < NV; ++v) r[v] = load16(p + v * V);
    }

    __device__ static __forceinline__ void unpack(const uint4 (&r)[NV], float (&f)[16]) {
#pragma unroll
        for (int v = 0; v < NV; ++v) {
            float g[V];
            Elem<T>::unpack(r[v], g);
#pragma unroll
            for (int j = 0; j < V; ++j) f[v * V + j] = g[j];
        }
    }

    __device__ static __forceinline__ float amax(const uint4 (&r)[NV], float m) {
        float f[16];
        unpack(r, f);
#pragma unroll
        for (int j = 0; j < 16; ++j) m = nan_max(m, fabsf(f[j]));
        return m;
    }

    __device__ static __forceinline__ void quantize(const uint4 (&r)[NV], float inv, unsigned char* out) {
        float f[16];
        unpack(r, f);
        unsigned w[4];
#pragma unroll
        for (int q = 0; q < 4; ++q)
            w[q] = fp8x4(f[4 * q] * inv, f[4 * q + 1] * inv, f[4 * q + 2] * inv, f[4 * q + 3] * inv);
        store16(out, make_uint4(w[0], w[1], w[2], w[3]));
    }
};

template <typename T, int CH>
__device__ __forceinline__ void fp8_quant_rows(const T* __restrict__ x, unsigned char* __restrict__ y,
                                               float* __restrict__ scales, long long groups, int g) {
    using E = Elem<T>;
    using C = Chunk<T>;
    __shared__ float red[32 * 8];

    const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    const bool active = row < groups;
    const long long base = (active ? row : 0) * static_cast<long long>(g);
    const T* xr = x + base;
    unsigned char* yr = y + base;
    const Split16 s = split16(yr, g);
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    uint4 buf[CH][C::NV];
#pragma unroll
    for (int k = 0; k < CH; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) C::load(xr + s.head + i * 16, buf[k]);
    }
    float amax = 0.0f;
    const int scalars = active ? s.head + s.tail : 0;
    for (int q = t; q < scalars; q += tpr) amax = nan_max(amax, fabsf(E::load(xr + scalar_at(s, q))));
#pragma unroll
    for (int k = 0; k < CH; ++k) {
        if (active && t + k * tpr < s.body) amax = C::amax(buf[k], amax);
    }
    amax = tpr <= 32 ? segment_max(amax, tpr) : block_amax(amax, red);
    const float scale = fp8_scale(amax);
    const float inv = 1.0f / scale;

#pragma unroll
    for (int k = 0; k < CH; ++k) {
        const int i = t + k * tpr;
        if (active && i < s.body) C::quantize(buf[k], inv, yr + s.head + i * 16);
    }
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
    using C = Chunk<T>;
    __shared__ float red[32];
    const int t = threadIdx.x;
    const int tpr = blockDim.x;

    for (long long row = blockIdx.x; row < groups; row += gridDim.x) {
        const T* xr = x + row * static_cast<long long>(g);
        unsigned char* yr = y + row * static_cast<long long>(g);
        const Split16 s = split16(yr, g);
        const int scalars = s.head + s.tail;
        float amax = 0.0f;
        for (int q = t; q < scalars; q += tpr) amax = nan_max(amax, fabsf(E::load(xr + scalar_at(s, q))));
        for (int i = t; i < s.body; i += tpr) {
            uint4 r[C::NV];
            C::load(xr + s.head + i * 16, r);
            amax = C::amax(r, amax);
        }
        amax = block_amax(amax, red);
        const float scale = fp8_scale(amax);
        const float inv = 1.0f / scale;
        for (int i = t; i < s.body; i += tpr) {
            uint4 r[C::NV];
            C::load(xr + s.head + i * 16, r);
            C::quantize(r, inv, yr + s.head + i * 16);
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

TILEOPS_FP8_QUANT_ENTRIES(float, f32, 2)
TILEOPS_FP8_QUANT_ENTRIES(__half, f16, 4)
TILEOPS_FP8_QUANT_ENTRIES(__nv_bfloat16, bf16, 4)
