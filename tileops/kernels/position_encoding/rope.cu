// NeoX rotary position embedding on x [tokens, heads, head_dim] with int64 positions [tokens] and
// a float32 table cos_sin_cache [max_pos, head_dim], each row [cos (head_dim/2) | sin (head_dim/2)]:
// with x1, x2 the halves of a head row, y1 = x1 cos - x2 sin and y2 = x2 cos + x1 sin (f32 math,
// one rounding to the output dtype). Entry points per dtype (f32, f16, bf16):
//
//   rope_vec_*      head_dim / 2 a multiple of the 16-byte vector width (4 f32, 8 f16/bf16):
//                   each thread rotates one vector of x1 against the matching vector of x2.
//   rope_scalar_*   any even head_dim: one element pair per thread.
//
// What one call reads, as the manifest counts it: x once, positions once per token (every thread
// of the token's block reads the same 8 bytes: one transaction), and the ONE table row of each
// token, once: the block stages it in shared memory and all heads of the token use it from there.
// The rest of the table is never touched. A position outside [0, max_pos) makes its token's rows
// NaN (a kernel cannot report an error; the host's CPU path refuses such positions).
//
// Launch contract (checked by the host): grid.x blocks stride over tokens; blockDim.x a multiple of
// 32; dynamic shared memory head_dim floats; x, y, positions and the table 16-byte aligned.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry rope_vec_{f32,f16,bf16}: vector loads, vector stores
//   One element pair per thread: head_dim / 2 not a multiple of the vector width.
// @entry rope_scalar_{f32,f16,bf16}: scalar

#include "tileops_common.cuh"

using namespace tileops;

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

// Stages the table row of token t in `table` (head_dim floats) and returns after the block has
// it. `vec`: head_dim is a multiple of 4, so the row is 16-byte aligned and copied as float4.
template <bool kVec>
__device__ __forceinline__ void stage_row(const long long* __restrict__ positions, const float* __restrict__ cache,
                                          long long t, long long max_pos, int head_dim, float* table) {
    const long long pos = __ldg(positions + t);
    const bool ok = pos >= 0 && pos < max_pos;
    if (kVec) {
        const float4* src = reinterpret_cast<const float4*>(cache + (ok ? pos : 0) * static_cast<long long>(head_dim));
        float4* dst = reinterpret_cast<float4*>(table);
        const float n = nan_f32();
        for (int i = threadIdx.x; i < head_dim / 4; i += blockDim.x) dst[i] = ok ? __ldg(src + i) : make_float4(n, n, n, n);
    } else {
        const float* src = cache + (ok ? pos : 0) * static_cast<long long>(head_dim);
        for (int i = threadIdx.x; i < head_dim; i += blockDim.x) table[i] = ok ? __ldg(src + i) : nan_f32();
    }
    __syncthreads();
}

template <typename T>
__device__ __forceinline__ void rope_vec(const T* __restrict__ x, const long long* __restrict__ positions,
                                         const float* __restrict__ cache, T* __restrict__ y, long long tokens,
                                         int heads, int head_dim, long long max_pos) {
    using E = Elem<T>;
    constexpr int V = E::V;
    TILEOPS_DYNAMIC_SHARED(float4, table4);
    float* table = reinterpret_cast<float*>(table4);
    const int half = head_dim / 2;
    const int per_head = half / V;
    const int pairs = heads * per_head;
    const int half_v = half / V;
    for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
        // Vector indices: head_dim and half are whole vectors here.
        const uint4* xv = reinterpret_cast<const uint4*>(x + t * static_cast<long long>(heads) * head_dim);
        uint4* yv = reinterpret_cast<uint4*>(y + t * static_cast<long long>(heads) * head_dim);
        // The first pair is loaded before the table row is staged, so that its DRAM latency
        // overlaps the position -> table-row dependency chain.
        uint4 ra = make_uint4(0, 0, 0, 0), rb = ra;
        if (threadIdx.x < pairs) {
            const int h = threadIdx.x / per_head;
            const int at = h * (head_dim / V) + (threadIdx.x - h * per_head);
            ra = load16(xv + at);
            rb = load16(xv + at + half_v);
        }
        stage_row<true>(positions, cache, t, max_pos, head_dim, table);
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int h = p / per_head;
            const int j = p - h * per_head;
            const int at = h * (head_dim / V) + j;
            if (p != threadIdx.x) {
                ra = load16(xv + at);
                rb = load16(xv + at + half_v);
            }
            float a[V], b[V];
            E::unpack(ra, a);
            E::unpack(rb, b);
            float c[V], s[V];
#pragma unroll
            for (int i = 0; i < V; i += 4) {
                const float4 cv = *reinterpret_cast<const float4*>(table + j * V + i);
                const float4 sv = *reinterpret_cast<const float4*>(table + half + j * V + i);
                c[i] = cv.x, c[i + 1] = cv.y, c[i + 2] = cv.z, c[i + 3] = cv.w;
                s[i] = sv.x, s[i + 1] = sv.y, s[i + 2] = sv.z, s[i + 3] = sv.w;
            }
            float y1[V], y2[V];
#pragma unroll
            for (int i = 0; i < V; ++i) {
                y1[i] = a[i] * c[i] - b[i] * s[i];
                y2[i] = b[i] * c[i] + a[i] * s[i];
            }
            store16(yv + at, E::pack(y1));
            store16(yv + at + half_v, E::pack(y2));
        }
        // The next token overwrites the table.
        __syncthreads();
    }
}

template <typename T>
__device__ __forceinline__ void rope_scalar(const T* __restrict__ x, const long long* __restrict__ positions,
                                            const float* __restrict__ cache, T* __restrict__ y, long long tokens,
                                            int heads, int head_dim, long long max_pos) {
    using E = Elem<T>;
    TILEOPS_DYNAMIC_SHARED(float4, table4);
    float* table = reinterpret_cast<float*>(table4);
    const int half = head_dim / 2;
    const int pairs = heads * half;
    for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
        stage_row<false>(positions, cache, t, max_pos, head_dim, table);
        const T* xt = x + t * static_cast<long long>(heads) * head_dim;
        T* yt = y + t * static_cast<long long>(heads) * head_dim;
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int h = p / half;
            const int i = p - h * half;
            const int at = h * head_dim + i;
            const float a = E::load(xt + at);
            const float b = E::load(xt + at + half);
            const float c = table[i];
            const float s = table[half + i];
            E::store(yt + at, a * c - b * s);
            E::store(yt + at + half, b * c + a * s);
        }
        __syncthreads();
    }
}

#define TILEOPS_ROPE_ENTRIES(T, SUFFIX)                                                                           \
    extern "C" __global__ void __launch_bounds__(512) rope_vec_##SUFFIX(                                          \
        const T* __restrict__ x, const long long* __restrict__ positions, const float* __restrict__ cache,      \
        T* __restrict__ y, long long tokens, int heads, int head_dim, long long max_pos) {                      \
        rope_vec<T>(x, positions, cache, y, tokens, heads, head_dim, max_pos);                                    \
    }                                                                                                             \
    extern "C" __global__ void __launch_bounds__(512) rope_scalar_##SUFFIX(                                       \
        const T* __restrict__ x, const long long* __restrict__ positions, const float* __restrict__ cache,      \
        T* __restrict__ y, long long tokens, int heads, int head_dim, long long max_pos) {                      \
        rope_scalar<T>(x, positions, cache, y, tokens, heads, head_dim, max_pos);                                 \
    }

TILEOPS_ROPE_ENTRIES(float, f32)
TILEOPS_ROPE_ENTRIES(__half, f16)
TILEOPS_ROPE_ENTRIES(__nv_bfloat16, bf16)
