// sum, mean, amax and logsumexp over any set of dims, accumulating in f32 and rounding once.
// Entry points per reduction (sum, mean, amax, lse) and dtype (f32, f16, bf16):
//
//   reduce_rows_<r>_*      the reduced dims are the trailing ones: rows of n contiguous elements,
//       blockDim.x threads per row (a multiple of 32), blockDim.y rows per block (<= 32); 16-byte
//       loads, four in flight per thread, warp shuffles, one scalar store per row.
//       reduce_rows_lse_* holds the whole row in registers (up to 8 vectors per thread, 512
//       threads): its max, then one sum of exps; longer rows go to the split kernels.
//   reduce_cols_<r>_*, reduce_cols_vec_<r>_*   one block of reduced dims between kept ones:
//       [outer, n, inner] reduced over n; blockDim = (32, 8): a thread owns one column (or one
//       16-byte group of columns when inner is a multiple of it), the 8 threads of a y-column
//       split n, and shared memory combines them. Loads are coalesced along inner.
//   reduce_rows_split_<r>_*, reduce_cols_split_<r>_*, reduce_cols_vec_split_<r>_*, then
//   reduce_finish_<r>_*    the same layouts when they would launch too few blocks to fill the GPU
//       (few long rows, few columns): n is cut into slices, each block writes the partial state of
//       its slice (an f32 pair), and reduce_finish combines the slices of each output.
//   reduce_runs_<r>_*, then reduce_finish_<r>_*   several blocks of reduced dims (after the host
//       merged adjacent dims) with the innermost one reduced and long enough: the reduced elements
//       of an output are runs of `run` contiguous elements. Every run (or chunk of one) is a row
//       of a rows kernel (16-byte loads, four in flight per thread), addressed once per row
//       through up to 8 (size, stride) pairs each for the kept dims and the outer reduced dims;
//       the run's state goes to part[(out * per_out + j) * chunks + c] and reduce_finish combines
//       the per_out * chunks states of each output.
//   reduce_strided_<r>_*   anything else (short runs, or a kept innermost dim): one block of 256
//       threads per output, reduced elements addressed through up to 8 (size, stride) pairs each
//       for the kept and the reduced dims.
//
// Semantics follow PyTorch: amax propagates NaN; logsumexp is log(sum(exp(x - m))) + m with m the
// max, taken as 0 when infinite, so a row of only -inf gives -inf and a +inf gives +inf; a NaN
// reaches the sum and the result. Launch contract (checked by the host): x, y 16-byte aligned.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// Sum, mean, amax, logsumexp. Rows kernels write one scalar per row; the scalar cols and strided
// kernels read one element per thread.
// @entry reduce_rows_sum_{f32,f16,bf16}: vector loads
// @entry reduce_rows_mean_{f32,f16,bf16}: vector loads
// @entry reduce_rows_amax_{f32,f16,bf16}: vector loads
// @entry reduce_rows_lse_{f32,f16,bf16}: vector loads
// @entry reduce_cols_sum_{f32,f16,bf16}: scalar
// @entry reduce_cols_mean_{f32,f16,bf16}: scalar
// @entry reduce_cols_amax_{f32,f16,bf16}: scalar
// @entry reduce_cols_lse_{f32,f16,bf16}: scalar
// @entry reduce_cols_vec_sum_{f32,f16,bf16}: vector loads, vector stores
// @entry reduce_cols_vec_mean_{f32,f16,bf16}: vector loads, vector stores
// @entry reduce_cols_vec_amax_{f32,f16,bf16}: vector loads, vector stores
// @entry reduce_cols_vec_lse_{f32,f16,bf16}: vector loads, vector stores
// @entry reduce_strided_sum_{f32,f16,bf16}: scalar
// @entry reduce_strided_mean_{f32,f16,bf16}: scalar
// @entry reduce_strided_amax_{f32,f16,bf16}: scalar
// @entry reduce_strided_lse_{f32,f16,bf16}: scalar
//   Split layouts: partial states (f32 pairs) out, combined by reduce_finish.
// @entry reduce_runs_sum_{f32,f16,bf16}: vector loads
// @entry reduce_runs_mean_{f32,f16,bf16}: vector loads
// @entry reduce_runs_amax_{f32,f16,bf16}: vector loads
// @entry reduce_runs_lse_{f32,f16,bf16}: vector loads
// @entry reduce_rows_split_sum_{f32,f16,bf16}: vector loads
// @entry reduce_rows_split_mean_{f32,f16,bf16}: vector loads
// @entry reduce_rows_split_amax_{f32,f16,bf16}: vector loads
// @entry reduce_rows_split_lse_{f32,f16,bf16}: vector loads
// @entry reduce_cols_split_sum_{f32,f16,bf16}: scalar
// @entry reduce_cols_split_mean_{f32,f16,bf16}: scalar
// @entry reduce_cols_split_amax_{f32,f16,bf16}: scalar
// @entry reduce_cols_split_lse_{f32,f16,bf16}: scalar
// @entry reduce_cols_vec_split_sum_{f32,f16,bf16}: vector loads
// @entry reduce_cols_vec_split_mean_{f32,f16,bf16}: vector loads
// @entry reduce_cols_vec_split_amax_{f32,f16,bf16}: vector loads
// @entry reduce_cols_vec_split_lse_{f32,f16,bf16}: vector loads
// @entry reduce_finish_sum_{f32,f16,bf16}: scalar
// @entry reduce_finish_mean_{f32,f16,bf16}: scalar
// @entry reduce_finish_amax_{f32,f16,bf16}: scalar
// @entry reduce_finish_lse_{f32,f16,bf16}: scalar

#include "tileops_common.cuh"

using namespace tileops;

enum Kind { kSum = 0, kMean = 1, kAmax = 2, kLse = 3 };

// max that propagates NaN (fmaxf drops it).
__device__ __forceinline__ float nan_max(float a, float b) { return fmax_nan(a, b); }

// The reference point of a logsumexp running max: the max itself, or 0 when it is infinite.
__device__ __forceinline__ float lse_ref(float m) { return fabsf(m) == __int_as_float(0x7f800000) ? 0.0f : m; }

// A running sum of exp(x - ref(from)) re-expressed against ref(to), to >= from. A zero sum stays
// zero (not 0 * inf = NaN when `from` was -inf); a NaN sum stays NaN.
__device__ __forceinline__ float lse_rescale(float s, float from, float to) {
    return (s == 0.0f || from == to) ? s : s * exp_fast(lse_ref(from) - lse_ref(to));
}

// Reduction state. sum/mean: a = sum. amax: a = max. logsumexp: a = running max (NaN-free: fmaxf),
// b = sum of exp(x - lse_ref(a)).
template <int K>
struct Red {
    float a;
    float b;

    __device__ __forceinline__ void init() {
        a = (K == kAmax || K == kLse) ? neg_inf() : 0.0f;
        b = 0.0f;
    }

    template <int V>
    __device__ __forceinline__ void add(const float (&f)[V]) {
        if constexpr (K == kSum || K == kMean) {
#pragma unroll
            for (int j = 0; j < V; ++j) a += f[j];
        } else if constexpr (K == kAmax) {
#pragma unroll
            for (int j = 0; j < V; ++j) a = nan_max(a, f[j]);
        } else {
            // One rescale per vector: the vector's max first.
            float m = a;
#pragma unroll
            for (int j = 0; j < V; ++j) m = fmaxf(m, f[j]);
            b = lse_rescale(b, a, m);
            a = m;
            // exp(x - r) as one FFMA and one MUFU op. Its rounding bias 2^e (ExpShift) moves
            // log(b) by |e ln 2| <= ln 2 / 2 ulp(r log2e), under an ulp of the result, which
            // lies in [r, r + log(count)].
            const ExpShift shift(lse_ref(m));
#pragma unroll
            for (int j = 0; j < V; ++j) b += shift(f[j]);
        }
    }

    __device__ __forceinline__ void add1(float v) {
        const float f[1] = {v};
        add<1>(f);
    }

    __device__ __forceinline__ void merge(float oa, float ob) {
        if constexpr (K == kSum || K == kMean) {
            a += oa;
        } else if constexpr (K == kAmax) {
            a = nan_max(a, oa);
        } else {
            const float m = fmaxf(a, oa);
            b = lse_rescale(b, a, m) + lse_rescale(ob, oa, m);
            a = m;
        }
    }

    // The output value; `count` is the number of reduced elements (for mean).
    __device__ __forceinline__ float finish(long long count) const {
        if constexpr (K == kMean) {
            return static_cast<float>(static_cast<double>(a) / static_cast<double>(count));
        } else if constexpr (K == kLse) {
            return logf(b) + lse_ref(a);
        } else {
            return a;
        }
    }
};

// Merge of commutative states: every lane ends with the same value.
template <int K>
__device__ __forceinline__ void warp_reduce(Red<K>& r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const float oa = __shfl_xor_sync(0xffffffffu, r.a, o);
        const float ob = __shfl_xor_sync(0xffffffffu, r.b, o);
        r.merge(oa, ob);
    }
}

// Reduces over the blockDim.x threads of one row (threadIdx.y picks the row); blockDim.x is a
// multiple of 32, at most 1024; `scratch` holds 32 pairs per row of the block. Every thread of
// the block calls it.
template <int K>
__device__ __forceinline__ void block_row_reduce(Red<K>& r, float2* scratch) {
    warp_reduce(r);
    const int warps = blockDim.x >> 5;
    if (warps == 1) return;
    const int lane = threadIdx.x & 31;
    float2* s = scratch + threadIdx.y * 32;
    if (lane == 0) s[threadIdx.x >> 5] = make_float2(r.a, r.b);
    __syncthreads();
    Red<K> t;
    t.init();
    if (lane < warps) {
        t.a = s[lane].x;
        t.b = s[lane].y;
    }
    warp_reduce(t);
    r = t;
    // The scratch may be reused: no warp may write it before all have read.
    __syncthreads();
}

// The state of body vectors begin, begin + step, ... (< end) of a row: four independent 16-byte
// loads in flight per thread on every pass. Whole passes unconditionally; the last 1-3 vectors
// (a thread with 2 or 3 vectors in all, too) as one predicated pass, not a tail loop that has
// one load in flight at a time.
template <typename T, int K>
__device__ __forceinline__ void add_vectors(Red<K>& r, const uint4* __restrict__ xv, int begin, int end, int step) {
    using E = Elem<T>;
    constexpr int V = E::V;
    constexpr int U = 4;
    int i = begin;
    if constexpr (K == kAmax) {
        // amax in the vectors' own type (VecMax: f16/bf16 values two at a time, NaN-propagating,
        // nothing unpacked), one f32 max at the end.
        VecMax<T, true> vm;
        for (; i + (U - 1) * step < end; i += U * step) {
            uint4 buf[U];
#pragma unroll
            for (int k = 0; k < U; ++k) buf[k] = load16(xv + i + k * step);
#pragma unroll
            for (int k = 0; k < U; ++k) vm.add(buf[k]);
        }
        if (i < end) {
            uint4 buf[U - 1];
#pragma unroll
            for (int k = 0; k < U - 1; ++k) {
                if (i + k * step < end) buf[k] = load16(xv + i + k * step);
            }
#pragma unroll
            for (int k = 0; k < U - 1; ++k) {
                if (i + k * step < end) vm.add(buf[k]);
            }
        }
        r.a = nan_max(r.a, vm.value());
        return;
    }
    for (; i + (U - 1) * step < end; i += U * step) {
        uint4 buf[U];
#pragma unroll
        for (int k = 0; k < U; ++k) buf[k] = load16(xv + i + k * step);
#pragma unroll
        for (int k = 0; k < U; ++k) {
            float f[V];
            E::unpack(buf[k], f);
            r.add(f);
        }
    }
    if (i < end) {
        uint4 buf[U - 1];
#pragma unroll
        for (int k = 0; k < U - 1; ++k) {
            if (i + k * step < end) buf[k] = load16(xv + i + k * step);
        }
#pragma unroll
        for (int k = 0; k < U - 1; ++k) {
            if (i + k * step < end) {
                float f[V];
                E::unpack(buf[k], f);
                r.add(f);
            }
        }
    }
}

template <typename T, int K>
__device__ __forceinline__ void reduce_rows(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {
    using E = Elem<T>;
    __shared__ float2 scratch[32 * 32];

    const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    // Threads of a row past the end still take part in the block's reduction.
    const bool active = row < rows;
    const T* xr = x + (active ? row : 0) * static_cast<long long>(n);
    const RowSplit s = split_row(xr, n);
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);

    Red<K> r;
    r.init();
    if (active) {
        add_vectors<T, K>(r, xv, t, s.body, tpr);
        const int si = scalar_index<T>(s, t, true, true);
        if (si >= 0) r.add1(E::load(xr + si));
    }
    block_row_reduce(r, scratch);
    if (active && t == 0) E::store(y + row, r.finish(n));
}

// logsumexp of rows of at most VPT vectors per thread (the host sends longer rows to the split
// kernels), held in registers: the max first (VecMax), then one sum of exp(x - max), an FFMA
// and a MUFU op per element, instead of the running (max, sum) of Red<kLse> that rescales per
// vector and per merge (two more exps at every shuffle step). The same blocks as reduce_rows.
template <typename T, int VPT>
__device__ __forceinline__ void reduce_rows_lse(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {
    using E = Elem<T>;
    constexpr int V = E::V;
    __shared__ float scratch[32 * 32];

    const long long row = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    // Threads of a row past the end still take part in the block's reductions.
    const bool active = row < rows;
    const T* xr = x + (active ? row : 0) * static_cast<long long>(n);
    const RowSplit s = split_row(xr, n);
    const int t = threadIdx.x;
    const int tpr = blockDim.x;
    uint4 buf[VPT];
    load_body(reinterpret_cast<const uint4*>(xr + s.head), s.body, active, buf);
    const int si = active ? scalar_index<T>(s, t, true, true) : -1;
    const float sx = si >= 0 ? E::load(xr + si) : neg_inf();
    // fmaxf's rule: a NaN does not become the max; it reaches the sum and the result.
    VecMax<T, false> vm;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (active && t + k * tpr < s.body) vm.add(buf[k]);
    }
    const float m = row_reduce<true>(fmaxf(vm.value(), sx), scratch);
    const float ref = lse_ref(m);
    const ExpShift shift(ref);
    float b = si >= 0 ? shift(sx) : 0.0f;
#pragma unroll
    for (int k = 0; k < VPT; ++k) {
        if (active && t + k * tpr < s.body) {
            float f[V];
            E::unpack(buf[k], f);
#pragma unroll
            for (int j = 0; j < V; ++j) b += shift(f[j]);
        }
    }
    b = row_reduce<false>(b, scratch);
    // b is the sum of exp(x - ref) times ExpShift's 2^e: its log less log_bias.
    if (active && t == 0) E::store(y + row, (logf(b) - shift.log_bias()) + ref);
}

// A row split into gridDim.x chunks of `chunk` 16-byte vectors (few long rows: one block per row
// would leave most SMs idle). Block (c, r) writes the state of chunk c of row r to
// part[row * gridDim.x + c]; reduce_finish combines them. blockDim = (256, 1).
template <typename T, int K>
__device__ __forceinline__ void reduce_rows_split(const T* __restrict__ x, float2* __restrict__ part, long long rows,
                                                  int n, int chunk) {
    using E = Elem<T>;
    __shared__ float2 scratch[32];
    const int c = blockIdx.x;
    const int chunks = gridDim.x;
    const int t = threadIdx.x;
    const int tpb = blockDim.x;
    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const T* xr = x + row * static_cast<long long>(n);
        const RowSplit s = split_row(xr, n);
        const uint4* xv = reinterpret_cast<const uint4*>(xr + s.head);
        const int begin = c * chunk;
        const int end = min(s.body, begin + chunk);
        Red<K> r;
        r.init();
        add_vectors<T, K>(r, xv, begin + t, end, tpb);
        const int si = scalar_index<T>(s, t, c == 0, c == chunks - 1);
        if (si >= 0) r.add1(E::load(xr + si));
        block_row_reduce(r, scratch);
        if (t == 0) part[row * chunks + c] = make_float2(r.a, r.b);
    }
}

// Combines the `splits` partial states of each output (part[out * splits + s]) and writes y.
template <typename T, int K>
__device__ __forceinline__ void reduce_finish(const float2* __restrict__ part, T* __restrict__ y, long long outputs,
                                              int splits, long long n) {
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long out = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; out < outputs;
         out += stride) {
        const float2* p = part + out * splits;
        Red<K> r;
        r.a = p[0].x;
        r.b = p[0].y;
        for (int s = 1; s < splits; ++s) r.merge(p[s].x, p[s].y);
        Elem<T>::store(y + out, r.finish(n));
    }
}

constexpr int kColsX = 32;  // column groups per block (blockDim.x)
constexpr int kColsY = 8;   // threads splitting n (blockDim.y)

// With kSplit, blockIdx.y takes slice [blockIdx.y * slice, + slice) of n, and the state of each column goes to
// part[column * gridDim.y + slice] for reduce_finish (y unused); otherwise y gets the result.
template <typename T, int K, int VW, bool kSplit>
__device__ __forceinline__ void reduce_cols(const T* __restrict__ x, T* __restrict__ y, float2* __restrict__ part,
                                            long long outer, long long n, long long inner, long long slice) {
    __shared__ float2 scratch[kColsY][kColsX][VW];
    // Tile indices in 32 bits (the host guarantees outer * ceil(inner / 32) < 2^31): a 64-bit
    // division is a subroutine call, and registers live across it spill.
    const unsigned groups = static_cast<unsigned>(inner / VW);
    const unsigned tiles_per_outer = (groups + kColsX - 1) / kColsX;
    const unsigned tiles = static_cast<unsigned>(outer) * tiles_per_outer;
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    // This block's part of n: all of it, or slice blockIdx.y (the host computes the slice
    // length: a 64-bit division here is a subroutine call, around which registers spill).
    const long long k0 = kSplit ? blockIdx.y * slice : 0;
    const long long k1 = kSplit ? min(n, k0 + slice) : n;
    for (unsigned tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        const unsigned o = tile / tiles_per_outer;
        const unsigned g = (tile - o * tiles_per_outer) * kColsX + tx;
        const bool active = g < groups;
        Red<K> r[VW];
#pragma unroll
        for (int j = 0; j < VW; ++j) r[j].init();
        if (active) {
            const T* base = x + static_cast<long long>(o) * n * inner + static_cast<long long>(g) * VW;
            for (long long k = k0 + ty; k < k1; k += kColsY) {
                float f[VW];
                load_group<T, VW>(base + k * inner, f);
#pragma unroll
                for (int j = 0; j < VW; ++j) r[j].add1(f[j]);
            }
        }
#pragma unroll
        for (int j = 0; j < VW; ++j) scratch[ty][tx][j] = make_float2(r[j].a, r[j].b);
        __syncthreads();
        if (ty == 0 && active) {
            // Both loops unrolled: r[] is only ever indexed by constants (no local memory).
#pragma unroll
            for (int w = 1; w < kColsY; ++w) {
#pragma unroll
                for (int j = 0; j < VW; ++j) {
                    const float2 p = scratch[w][tx][j];
                    r[j].merge(p.x, p.y);
                }
            }
            const long long column = static_cast<long long>(o) * inner + static_cast<long long>(g) * VW;
            if constexpr (kSplit) {
#pragma unroll
                for (int j = 0; j < VW; ++j) {
                    part[(column + j) * gridDim.y + blockIdx.y] = make_float2(r[j].a, r[j].b);
                }
            } else {
                float out[VW];
#pragma unroll
                for (int j = 0; j < VW; ++j) out[j] = r[j].finish(n);
                store_group<T, VW>(y + column, out);
            }
        }
        // The next tile rewrites the scratch.
        __syncthreads();
    }
}

constexpr int kMaxDims = 8;

// The dims of a strided reduction after merging adjacent dims: kept dims address the outputs
// (row-major over kept_size), reduced dims the elements of one output; strides in elements.
struct ReduceGeom {
    long long kept_size[kMaxDims];
    long long kept_stride[kMaxDims];
    long long red_size[kMaxDims];
    long long red_stride[kMaxDims];
    int kept_rank;
    int red_rank;
};

// The offset of flat index `i` (< the product of the sizes) over `rank` dims of `size`/`stride`
// (innermost last), dividing in I (long long, or unsigned when the caller knows the product fits
// 32 bits: a 64-bit division is ~20 instructions on ptxas's 32-bit fast path and a subroutine
// call otherwise). Unrolled over kMaxDims with constant indices so the params are never copied
// to local memory. The outermost dim takes what is left of `i` without a division; with rank 0,
// i is 0 and the unused stride[0] is 0.
template <typename I>
__device__ __forceinline__ long long strided_offset(I i, const long long (&size)[kMaxDims],
                                                    const long long (&stride)[kMaxDims], int rank) {
    long long off = 0;
#pragma unroll
    for (int d = kMaxDims - 1; d >= 1; --d) {
        if (d < rank) {
            const I q = i / static_cast<I>(size[d]);
            off += static_cast<long long>(i - q * static_cast<I>(size[d])) * stride[d];
            i = q;
        }
    }
    return off + static_cast<long long>(i) * stride[0];
}

// The runs layout: run p (of `runs`) is run j = p % per_out of output p / per_out; chunk
// blockIdx.y of it (chunk vectors each, gridDim.y chunks) goes to part[p * gridDim.y +
// blockIdx.y]. g holds the kept dims and the reduced dims outside the run (the run's own dim,
// stride 1, is left out). blockDim = (threads per run, runs per block <= 32), as reduce_rows.
// The host guarantees runs < 2^31, so run indices divide in 32 bits.
template <typename T, int K>
__device__ __forceinline__ void reduce_runs(const T* __restrict__ x, float2* __restrict__ part, const ReduceGeom& g,
                                            long long runs, long long per_out, int run, int chunk) {
    using E = Elem<T>;
    __shared__ float2 scratch[32 * 32];
    const long long p = static_cast<long long>(blockIdx.x) * blockDim.y + threadIdx.y;
    // Threads of a run past the end still take part in the block's reduction.
    const bool active = p < runs;
    long long off = 0;
    if (active) {
        // Once per run, not per element.
        const unsigned pu = static_cast<unsigned>(p);
        const unsigned out = pu / static_cast<unsigned>(per_out);
        off = strided_offset(out, g.kept_size, g.kept_stride, g.kept_rank) +
              strided_offset(pu - out * static_cast<unsigned>(per_out), g.red_size, g.red_stride, g.red_rank);
    }
    const T* xr = x + off;
    const RowSplit s = split_row(xr, run);
    const int c = blockIdx.y;
    const int chunks = gridDim.y;
    Red<K> r;
    r.init();
    if (active) {
        const int begin = c * chunk;
        add_vectors<T, K>(r, reinterpret_cast<const uint4*>(xr + s.head), begin + threadIdx.x, min(s.body, begin + chunk),
                          blockDim.x);
        const int si = scalar_index<T>(s, threadIdx.x, c == 0, c == chunks - 1);
        if (si >= 0) r.add1(E::load(xr + si));
    }
    block_row_reduce(r, scratch);
    if (active && threadIdx.x == 0) part[p * chunks + c] = make_float2(r.a, r.b);
}

template <typename T, int K>
__device__ __forceinline__ void reduce_strided(const T* __restrict__ x, T* __restrict__ y, const ReduceGeom& g,
                                               long long outputs, long long n) {
    using E = Elem<T>;
    __shared__ float2 scratch[32];
    for (long long out = blockIdx.x; out < outputs; out += gridDim.x) {
        const T* base = x + strided_offset(out, g.kept_size, g.kept_stride, g.kept_rank);
        Red<K> r;
        r.init();
        for (long long i = threadIdx.x; i < n; i += blockDim.x) {
            r.add1(E::load(base + strided_offset(i, g.red_size, g.red_stride, g.red_rank)));
        }
        block_row_reduce(r, scratch);
        if (threadIdx.x == 0) E::store(y + out, r.finish(n));
    }
}

// Each entry's full name `<base>_##SUFFIX` is spelled out (the tests look for it).
// Vectors per thread of reduce_rows_lse; the host's rows_lse plan matches.
constexpr int kLseVectors = 8;

#define TILEOPS_REDUCE_ROWS(NAME, K, T)                                                                           \
    extern "C" __global__ void __launch_bounds__(1024)                                                            \
        NAME(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                      \
        reduce_rows<T, K>(x, y, rows, n);                                                                         \
    }
// logsumexp's rows hold a row in registers, 8 vectors per thread (reduce_rows_lse), up to 512
// threads a row: 2 blocks of 512 per SM asked for (at most 64 registers), so one block's loads
// overlap the other's reductions.
#define TILEOPS_REDUCE_ROWS_LSE(NAME, T)                                                                          \
    extern "C" __global__ void __launch_bounds__(512, 2)                                                          \
        NAME(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                 \
        reduce_rows_lse<T, kLseVectors>(x, y, rows, n);                                                           \
    }
#define TILEOPS_REDUCE_COLS(NAME, K, VW, T)                                                                       \
    extern "C" __global__ void __launch_bounds__(256)                                                             \
        NAME(const T* __restrict__ x, T* __restrict__ y, long long outer, long long n, long long inner) { \
        reduce_cols<T, K, VW, false>(x, y, nullptr, outer, n, inner, n);                                             \
    }
#define TILEOPS_REDUCE_COLS_SPLIT(NAME, K, VW, T)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                                       \
        const T* __restrict__ x, float2* __restrict__ part, long long outer, long long n, long long inner,        \
        long long slice) {                                                                                        \
        reduce_cols<T, K, VW, true>(x, nullptr, part, outer, n, inner, slice);                                    \
    }
#define TILEOPS_REDUCE_ROWS_SPLIT(NAME, K, T)                                                                     \
    extern "C" __global__ void __launch_bounds__(256)                                                             \
        NAME(const T* __restrict__ x, float2* __restrict__ part, long long rows, int n, int chunk) {              \
        reduce_rows_split<T, K>(x, part, rows, n, chunk);                                                         \
    }
#define TILEOPS_REDUCE_FINISH(NAME, K, T)                                                                         \
    extern "C" __global__ void __launch_bounds__(256)                                                             \
        NAME(const float2* __restrict__ part, T* __restrict__ y, long long outputs, int splits, long long n) {    \
        reduce_finish<T, K>(part, y, outputs, splits, n);                                                         \
    }
#define TILEOPS_REDUCE_STRIDED(NAME, K, T)                                                                        \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                            \
        const T* __restrict__ x, T* __restrict__ y, const ReduceGeom g, long long outputs, long long n) {         \
        reduce_strided<T, K>(x, y, g, outputs, n);                                                                \
    }

// One block of 1024 per SM asked for: ptxas's own target on sm_80 is two (32 registers), at which
// the per-run addressing spills.
#define TILEOPS_REDUCE_RUNS(NAME, K, T)                                                                           \
    extern "C" __global__ void __launch_bounds__(1024, 1)                                                         \
        NAME(const T* __restrict__ x, float2* __restrict__ part, const ReduceGeom g, long long runs,              \
             long long per_out, int run, int chunk) {                                                             \
        reduce_runs<T, K>(x, part, g, runs, per_out, run, chunk);                                                 \
    }

#define TILEOPS_REDUCE_ENTRIES(T, SUFFIX)                                                                         \
    TILEOPS_REDUCE_ROWS(reduce_rows_sum_##SUFFIX, kSum, T)                                                         \
    TILEOPS_REDUCE_ROWS(reduce_rows_mean_##SUFFIX, kMean, T)                                                       \
    TILEOPS_REDUCE_ROWS(reduce_rows_amax_##SUFFIX, kAmax, T)                                                       \
    TILEOPS_REDUCE_ROWS_LSE(reduce_rows_lse_##SUFFIX, T)                                                           \
    TILEOPS_REDUCE_COLS(reduce_cols_sum_##SUFFIX, kSum, 1, T)                                                      \
    TILEOPS_REDUCE_COLS(reduce_cols_mean_##SUFFIX, kMean, 1, T)                                                    \
    TILEOPS_REDUCE_COLS(reduce_cols_amax_##SUFFIX, kAmax, 1, T)                                                    \
    TILEOPS_REDUCE_COLS(reduce_cols_lse_##SUFFIX, kLse, 1, T)                                                      \
    TILEOPS_REDUCE_COLS(reduce_cols_vec_sum_##SUFFIX, kSum, Elem<T>::V, T)                                         \
    TILEOPS_REDUCE_COLS(reduce_cols_vec_mean_##SUFFIX, kMean, Elem<T>::V, T)                                       \
    TILEOPS_REDUCE_COLS(reduce_cols_vec_amax_##SUFFIX, kAmax, Elem<T>::V, T)                                       \
    TILEOPS_REDUCE_COLS(reduce_cols_vec_lse_##SUFFIX, kLse, Elem<T>::V, T)                                         \
    TILEOPS_REDUCE_STRIDED(reduce_strided_sum_##SUFFIX, kSum, T)                                                   \
    TILEOPS_REDUCE_STRIDED(reduce_strided_mean_##SUFFIX, kMean, T)                                                 \
    TILEOPS_REDUCE_STRIDED(reduce_strided_amax_##SUFFIX, kAmax, T)                                                 \
    TILEOPS_REDUCE_STRIDED(reduce_strided_lse_##SUFFIX, kLse, T)                                                      \
    TILEOPS_REDUCE_RUNS(reduce_runs_sum_##SUFFIX, kSum, T)                                                         \
    TILEOPS_REDUCE_RUNS(reduce_runs_mean_##SUFFIX, kMean, T)                                                       \
    TILEOPS_REDUCE_RUNS(reduce_runs_amax_##SUFFIX, kAmax, T)                                                       \
    TILEOPS_REDUCE_RUNS(reduce_runs_lse_##SUFFIX, kLse, T)                                                         \
    TILEOPS_REDUCE_ROWS_SPLIT(reduce_rows_split_sum_##SUFFIX, kSum, T)                                                \
    TILEOPS_REDUCE_ROWS_SPLIT(reduce_rows_split_mean_##SUFFIX, kMean, T)                                              \
    TILEOPS_REDUCE_ROWS_SPLIT(reduce_rows_split_amax_##SUFFIX, kAmax, T)                                              \
    TILEOPS_REDUCE_ROWS_SPLIT(reduce_rows_split_lse_##SUFFIX, kLse, T)                                                \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_split_sum_##SUFFIX, kSum, 1, T)                                             \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_split_mean_##SUFFIX, kMean, 1, T)                                           \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_split_amax_##SUFFIX, kAmax, 1, T)                                           \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_split_lse_##SUFFIX, kLse, 1, T)                                             \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_vec_split_sum_##SUFFIX, kSum, Elem<T>::V, T)                                \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_vec_split_mean_##SUFFIX, kMean, Elem<T>::V, T)                              \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_vec_split_amax_##SUFFIX, kAmax, Elem<T>::V, T)                              \
    TILEOPS_REDUCE_COLS_SPLIT(reduce_cols_vec_split_lse_##SUFFIX, kLse, Elem<T>::V, T)                                \
    TILEOPS_REDUCE_FINISH(reduce_finish_sum_##SUFFIX, kSum, T)                                                        \
    TILEOPS_REDUCE_FINISH(reduce_finish_mean_##SUFFIX, kMean, T)                                                      \
    TILEOPS_REDUCE_FINISH(reduce_finish_amax_##SUFFIX, kAmax, T)                                                      \
    TILEOPS_REDUCE_FINISH(reduce_finish_lse_##SUFFIX, kLse, T)

TILEOPS_REDUCE_ENTRIES(float, f32)
TILEOPS_REDUCE_ENTRIES(__half, f16)
TILEOPS_REDUCE_ENTRIES(__nv_bfloat16, bf16)
