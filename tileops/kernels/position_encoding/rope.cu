// NeoX rotary position embedding on x [tokens, heads, head_dim] with int64 positions [tokens] and
// a float32 table cos_sin_cache [max_pos, head_dim], each row [cos (head_dim/2) | sin (head_dim/2)]:
// with x1, x2 the halves of a head row, y1 = x1 cos - x2 sin and y2 = x2 cos + x1 sin (f32 math,
// one rounding to the output dtype). Entry points per dtype (f32, f16, bf16):
//
//   rope_vec_*      head_dim / 2 a multiple of the 16-byte vector width (4 f32, 8 f16/bf16):
//                   each thread rotates one vector of x1 against the matching vector of x2, one
//                   block per token and group of heads, no loop.
//   rope_scalar_*   any even head_dim: one element pair per thread.
//
// What one call reads, as the manifest counts it: x once, positions once per token (every thread
// of the token's block reads the same 8 bytes: one transaction), and the ONE table row of each
// token, once: the block stages it in shared memory and all heads of the token use it from there
// (rope_vec: once per block of heads; the manifest's shapes have one block per token). The rest of
// the table is never touched. A position outside [0, max_pos) makes its token's rows NaN (a
// kernel cannot report an error; the host's CPU path refuses such positions).
//
// Launch contract (checked by the host): dynamic shared memory head_dim floats; x, y, positions
// and the table 16-byte aligned. rope_vec: grid (tokens, ceil(heads / blockDim.y)), blockDim.x =
// head_dim / 2 / V, blockDim.x * blockDim.y >= head_dim / 4 (one table quad per thread) and <=
// 512. rope_scalar: grid.x blocks stride over tokens; blockDim.x a multiple of 32.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry rope_vec_{f32,f16,bf16}: vector loads, vector stores
//   One element pair per thread: head_dim / 2 not a multiple of the vector width.
// @entry rope_scalar_{f32,f16,bf16}: scalar

#include "tileops_common.cuh"

using namespace tileops;

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

// The scalar kernel's table row of token t, staged in `table` (head_dim floats); returns after
// the block has it.
__device__ __forceinline__ void stage_row(const long long* __restrict__ positions, const float* __restrict__ cache,
                                          long long t, long long max_pos, int head_dim, float* table) {
    const long long pos = __ldg(positions + t);
    const bool ok = pos >= 0 && pos < max_pos;
    const float* src = cache + (ok ? pos : 0) * static_cast<long long>(head_dim);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) table[i] = ok ? __ldg(src + i) : nan_f32();
    __syncthreads();
}

// One token (blockIdx.x) and blockDim.y heads (from blockIdx.y * blockDim.y) per block; thread
// (j, hy) rotates vector j of x1 of its head against vector j of x2 (j < blockDim.x = head_dim /
// 2 / V). No loop: every thread has exactly one pair.
//
// The table row is staged in shared memory, one quad of floats per thread (the host makes the
// block at least head_dim / 4 threads). V = 4 (f32): lane j reads cos quad j and sin quad j,
// consecutive across lanes. V = 8 (f16/bf16): lane j needs cos quads 2j and 2j + 1; stored in
// order, the 8 lanes of a 16-byte shared-memory phase would read every other quad (a 32-byte lane
// stride: 2 wavefronts per phase). So each half of the row (nq quads) is stored with its even
// quads first, then its odd ones: slot s holds quad 2s (s < nq / 2) or quad 2 (s - nq / 2) + 1,
// and lane j reads slots j and nq / 2 + j, consecutive across lanes. The copy keeps consecutive
// threads on consecutive slots (conflict-free stores) and reads the permuted quads from global
// memory: a warp that covers a whole half (head_dim <= 256) still reads whole sectors.
template <typename T>
__device__ __forceinline__ void rope_vec(const T* __restrict__ x, const long long* __restrict__ positions,
                                         const float* __restrict__ cache, T* __restrict__ y, long long tokens,
                                         int heads, int head_dim, long long max_pos) {
    using E = Elem<T>;
    constexpr int V = E::V;
    TILEOPS_DYNAMIC_SHARED(float4, table4);
    const long long t = blockIdx.x;
    if (t >= tokens) return;  // the whole block: no thread reaches the barrier
    const int j = threadIdx.x;
    const int half_v = blockDim.x;  // vectors per half head
    const int nq = half_v * (V / 4);  // quads per half of the table row
    const int h = blockIdx.y * blockDim.y + threadIdx.y;
    const bool active = h < heads;
    // Vector indices: head_dim and its half are whole vectors here.
    const long long at = (t * heads + (active ? h : 0)) * (2 * half_v) + j;
    // The pair is loaded before the table row is staged, so that its DRAM latency overlaps the
    // position -> table-row dependency chain.
    uint4 ra = make_uint4(0, 0, 0, 0), rb = ra;
    if (active) {
        ra = load16(reinterpret_cast<const uint4*>(x) + at);
        rb = load16(reinterpret_cast<const uint4*>(x) + at + half_v);
    }
    {
        const long long pos = __ldg(positions + t);
        const bool ok = pos >= 0 && pos < max_pos;
        const int i = threadIdx.y * blockDim.x + threadIdx.x;
        if (i < 2 * nq) {
            int q = i;
            if (V == 8) {
                const int hi = i >= nq ? nq : 0;
                const int s = i - hi;
                q = hi + (s < nq / 2 ? 2 * s : 2 * (s - nq / 2) + 1);
            }
            const float4* src = reinterpret_cast<const float4*>(cache + (ok ? pos : 0) * static_cast<long long>(head_dim));
            const float n = nan_f32();
            table4[i] = ok ? __ldg(src + q) : make_float4(n, n, n, n);
        }
    }
    __syncthreads();
    float a[V], b[V];
    E::unpack(ra, a);
    E::unpack(rb, b);
    // Quad i / 4 of this lane's V cos (sin) values: slot j (V = 4); slots j and nq / 2 + j (V = 8).
    float c[V], s[V];
#pragma unroll
    for (int i = 0; i < V; i += 4) {
        const int slot = j + (i / 4) * (nq / 2);
        const float4 cv = table4[slot];
        const float4 sv = table4[nq + slot];
        c[i] = cv.x, c[i + 1] = cv.y, c[i + 2] = cv.z, c[i + 3] = cv.w;
        s[i] = sv.x, s[i + 1] = sv.y, s[i + 2] = sv.z, s[i + 3] = sv.w;
    }
    float y1[V], y2[V];
#pragma unroll
    for (int i = 0; i < V; ++i) {
        y1[i] = a[i] * c[i] - b[i] * s[i];
        y2[i] = b[i] * c[i] + a[i] * s[i];
    }
    if (active) {
        store16(reinterpret_cast<uint4*>(y) + at, E::pack(y1));
        store16(reinterpret_cast<uint4*>(y) + at + half_v, E::pack(y2));
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
        stage_row(positions, cache, t, max_pos, head_dim, table);
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
