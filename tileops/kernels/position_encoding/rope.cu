// Rotary position embedding on x [tokens, heads, head_dim] with positions [tokens] (int64, int32
// or uint32) and a table cos_sin_cache [max_pos, head_dim], each row [cos (head_dim/2) | sin
// (head_dim/2)], in float32 or in x's dtype. Two layouts of a head row's rotated pairs:
//
//   NeoX (half rotation, vLLM's is_neox_style): pair i is (x[i], x[i + head_dim/2]);
//   interleaved (GPT-J, candle's rope_i):        pair i is (x[2i], x[2i + 1]).
//
// With (a, b) a pair and c, s its table entries i, the output pair is (a c - b s, b c + a s), in
// f32 math with one rounding to the output dtype. Entry points per dtype (f32, f16, bf16):
//
//   rope_vec_*, rope_vec_interleaved_*        head_dim / 2 a multiple of the 16-byte vector width
//                                             (4 f32, 8 f16/bf16): each thread rotates two vectors
//                                             of x, one block per token and group of heads, no loop.
//   rope_scalar_*, rope_scalar_interleaved_*  any even head_dim: one element pair per thread.
//
// What one call reads, as the manifest counts it: x once, positions once per token (every thread
// of the token's block reads the same word: one transaction), and the ONE table row of each
// token, once: the block stages it in shared memory (as f32) and all heads of the token use it
// from there (rope_vec: once per block of heads; the manifest's shapes have one block per token).
// The rest of the table is never touched. A position outside [0, max_pos) makes its token's rows
// NaN (a kernel cannot report an error; the host's CPU path refuses such positions).
//
// Launch contract (checked by the host): dynamic shared memory head_dim floats; x, y, positions
// and the table 16-byte aligned; pos_kind 0 (int64), 1 (int32) or 2 (uint32); table_x nonzero
// only for a 16-bit x whose table is in x's dtype. rope_vec: grid (tokens, ceil(heads /
// blockDim.y)), blockDim.x = head_dim / 2 / V, blockDim.x * blockDim.y >= head_dim / 4 (one table
// quad per thread) and <= 512. rope_scalar: grid.x blocks stride over tokens; blockDim.x a
// multiple of 32.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry rope_vec_{f32,f16,bf16}: vector loads, vector stores
// @entry rope_vec_interleaved_{f32,f16,bf16}: vector loads, vector stores
//   One element pair per thread: head_dim / 2 not a multiple of the vector width.
// @entry rope_scalar_{f32,f16,bf16}: scalar
// @entry rope_scalar_interleaved_{f32,f16,bf16}: scalar

#include "tileops_common.cuh"

using namespace tileops;

__device__ __forceinline__ float nan_f32() { return __int_as_float(0x7fffffff); }

// The position of token t. positions is int64 (pos_kind 0), int32 (1) or uint32 (2): an int32
// below 0 stays negative and a uint32 above INT_MAX positive, so both fall outside the table.
__device__ __forceinline__ long long load_position(const void* positions, long long t, int pos_kind) {
    if (pos_kind == 0) return __ldg(static_cast<const long long*>(positions) + t);
    const int raw = __ldg(static_cast<const int*>(positions) + t);
    return pos_kind == 1 ? static_cast<long long>(raw) : static_cast<long long>(static_cast<unsigned>(raw));
}

// Quad q (values 4q .. 4q + 3) of table row `row`, as f32: the table is float32, or T where
// table_x is set (x 16-bit: four 2-byte loads, once per block).
template <typename T>
__device__ __forceinline__ float4 table_quad(const void* cache, long long row, int head_dim, int q, int table_x) {
    if (sizeof(T) == 2 && table_x) {
        const T* p = static_cast<const T*>(cache) + row * head_dim + 4 * q;
        return make_float4(Elem<T>::load(p), Elem<T>::load(p + 1), Elem<T>::load(p + 2), Elem<T>::load(p + 3));
    }
    return __ldg(reinterpret_cast<const float4*>(static_cast<const float*>(cache) + row * head_dim) + q);
}

// The scalar kernel's table row of token t, staged in `table` (head_dim floats); returns after
// the block has it.
template <typename T>
__device__ __forceinline__ void stage_row(const void* positions, int pos_kind, const void* cache, int table_x,
                                          long long t, long long max_pos, int head_dim, float* table) {
    const long long pos = load_position(positions, t, pos_kind);
    const bool ok = pos >= 0 && pos < max_pos;
    const long long at = (ok ? pos : 0) * static_cast<long long>(head_dim);
    for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
        float v = nan_f32();
        if (ok) {
            v = (sizeof(T) == 2 && table_x) ? Elem<T>::load(static_cast<const T*>(cache) + at + i)
                                            : __ldg(static_cast<const float*>(cache) + at + i);
        }
        table[i] = v;
    }
    __syncthreads();
}

// One token (blockIdx.x) and blockDim.y heads (from blockIdx.y * blockDim.y) per block; thread
// (j, hy) loads vectors j and j + half_v of its head row (j < blockDim.x = half_v = head_dim / 2
// / V): the same addresses in both layouts, so the global accesses are the same. No loop: every
// thread has exactly one pair of vectors.
//
// NeoX: vector j of x1 rotates against vector j of x2, with cos/sin values jV .. jV + V - 1.
// Interleaved: each vector holds V / 2 whole pairs; vector k uses cos/sin values kV/2 .. kV/2 +
// V/2 - 1.
//
// The table row is staged in shared memory as f32, one quad of floats per thread (the host makes
// the block at least head_dim / 4 threads). NeoX, V = 4 (f32): lane j reads cos quad j and sin
// quad j, consecutive across lanes. NeoX, V = 8 (f16/bf16): lane j needs cos quads 2j and 2j + 1;
// stored in order, the 8 lanes of a 16-byte shared-memory phase would read every other quad (a
// 32-byte lane stride: 2 wavefronts per phase). So each half of the row (nq quads) is stored with
// its even quads first, then its odd ones: slot s holds quad 2s (s < nq / 2) or quad 2 (s - nq /
// 2) + 1, and lane j reads slots j and nq / 2 + j, consecutive across lanes. The copy keeps
// consecutive threads on consecutive slots (conflict-free stores) and reads the permuted quads
// from global memory: a warp that covers a whole half (head_dim <= 256) still reads whole
// sectors. Interleaved: the row in order; lane j reads, per half, quads (V = 8) or float pairs
// (V = 4) j and half_v + j, consecutive across lanes.
template <typename T, bool Interleaved>
__device__ __forceinline__ void rope_vec(const T* __restrict__ x, const void* __restrict__ positions,
                                         const void* __restrict__ cache, T* __restrict__ y, long long tokens,
                                         int heads, int head_dim, long long max_pos, int pos_kind, int table_x) {
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
        const long long pos = load_position(positions, t, pos_kind);
        const bool ok = pos >= 0 && pos < max_pos;
        const int i = threadIdx.y * blockDim.x + threadIdx.x;
        if (i < 2 * nq) {
            int q = i;
            if (!Interleaved && V == 8) {
                const int hi = i >= nq ? nq : 0;
                const int s = i - hi;
                q = hi + (s < nq / 2 ? 2 * s : 2 * (s - nq / 2) + 1);
            }
            const float n = nan_f32();
            table4[i] = ok ? table_quad<T>(cache, pos, head_dim, q, table_x) : make_float4(n, n, n, n);
        }
    }
    __syncthreads();
    float a[V], b[V];
    E::unpack(ra, a);
    E::unpack(rb, b);
    float ya[V], yb[V];
    if constexpr (!Interleaved) {
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
#pragma unroll
        for (int i = 0; i < V; ++i) {
            ya[i] = a[i] * c[i] - b[i] * s[i];
            yb[i] = b[i] * c[i] + a[i] * s[i];
        }
    } else {
        // V / 2 cos (sin) values per vector: vector j's and vector half_v + j's.
        constexpr int P = V / 2;
        float ca[P], sa[P], cb[P], sb[P];
        if constexpr (P == 4) {
            const float4 c0 = table4[j], c1 = table4[half_v + j];
            const float4 s0 = table4[nq + j], s1 = table4[nq + half_v + j];
            ca[0] = c0.x, ca[1] = c0.y, ca[2] = c0.z, ca[3] = c0.w;
            cb[0] = c1.x, cb[1] = c1.y, cb[2] = c1.z, cb[3] = c1.w;
            sa[0] = s0.x, sa[1] = s0.y, sa[2] = s0.z, sa[3] = s0.w;
            sb[0] = s1.x, sb[1] = s1.y, sb[2] = s1.z, sb[3] = s1.w;
        } else {
            const float2* table2 = reinterpret_cast<const float2*>(table4);
            const float2 c0 = table2[j], c1 = table2[half_v + j];
            const float2 s0 = table2[2 * nq + j], s1 = table2[2 * nq + half_v + j];
            ca[0] = c0.x, ca[1] = c0.y, cb[0] = c1.x, cb[1] = c1.y;
            sa[0] = s0.x, sa[1] = s0.y, sb[0] = s1.x, sb[1] = s1.y;
        }
#pragma unroll
        for (int i = 0; i < P; ++i) {
            ya[2 * i] = a[2 * i] * ca[i] - a[2 * i + 1] * sa[i];
            ya[2 * i + 1] = a[2 * i + 1] * ca[i] + a[2 * i] * sa[i];
            yb[2 * i] = b[2 * i] * cb[i] - b[2 * i + 1] * sb[i];
            yb[2 * i + 1] = b[2 * i + 1] * cb[i] + b[2 * i] * sb[i];
        }
    }
    if (active) {
        store16(reinterpret_cast<uint4*>(y) + at, E::pack(ya));
        store16(reinterpret_cast<uint4*>(y) + at + half_v, E::pack(yb));
    }
}

template <typename T, bool Interleaved>
__device__ __forceinline__ void rope_scalar(const T* __restrict__ x, const void* __restrict__ positions,
                                            const void* __restrict__ cache, T* __restrict__ y, long long tokens,
                                            int heads, int head_dim, long long max_pos, int pos_kind, int table_x) {
    using E = Elem<T>;
    TILEOPS_DYNAMIC_SHARED(float4, table4);
    float* table = reinterpret_cast<float*>(table4);
    const int half = head_dim / 2;
    const int pairs = heads * half;
    for (long long t = blockIdx.x; t < tokens; t += gridDim.x) {
        stage_row<T>(positions, pos_kind, cache, table_x, t, max_pos, head_dim, table);
        const T* xt = x + t * static_cast<long long>(heads) * head_dim;
        T* yt = y + t * static_cast<long long>(heads) * head_dim;
        for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
            const int h = p / half;
            const int i = p - h * half;
            // The pair's two elements: (i, i + half) in NeoX, (2i, 2i + 1) interleaved.
            const int first = h * head_dim + (Interleaved ? 2 * i : i);
            const int second = first + (Interleaved ? 1 : half);
            const float a = E::load(xt + first);
            const float b = E::load(xt + second);
            const float c = table[i];
            const float s = table[half + i];
            E::store(yt + first, a * c - b * s);
            E::store(yt + second, b * c + a * s);
        }
        __syncthreads();
    }
}

#define TILEOPS_ROPE_ENTRY(NAME, KIND, INTERLEAVED, T)                                                          \
    extern "C" __global__ void __launch_bounds__(512) NAME(                                                     \
        const T* __restrict__ x, const void* __restrict__ positions, const void* __restrict__ cache,            \
        T* __restrict__ y, long long tokens, int heads, int head_dim, long long max_pos, int pos_kind,          \
        int table_x) {                                                                                          \
        rope_##KIND<T, INTERLEAVED>(x, positions, cache, y, tokens, heads, head_dim, max_pos, pos_kind, table_x); \
    }

#define TILEOPS_ROPE_ENTRIES(T, SUFFIX)                                     \
    TILEOPS_ROPE_ENTRY(rope_vec_##SUFFIX, vec, false, T)                    \
    TILEOPS_ROPE_ENTRY(rope_scalar_##SUFFIX, scalar, false, T)              \
    TILEOPS_ROPE_ENTRY(rope_vec_interleaved_##SUFFIX, vec, true, T)         \
    TILEOPS_ROPE_ENTRY(rope_scalar_interleaved_##SUFFIX, scalar, true, T)

TILEOPS_ROPE_ENTRIES(float, f32)
TILEOPS_ROPE_ENTRIES(__half, f16)
TILEOPS_ROPE_ENTRIES(__nv_bfloat16, bf16)
