// Attention decode over a KV cache (flash-decoding on CUDA cores): one query token per sequence,
// q [B, H, D] against the sequence's first seqlens[b] keys and values of its cache, with grouped
// query heads (H = g * H_kv: query head h reads KV head h / g). Entry points per q dtype (f16, bf16):
//
//   gqa_decode_*            dense cache   k, v [B, S_max, H_kv, D] in q's dtype
//   gqa_decode_fp8_*        dense cache   in float8_e4m3fn, per-tensor k_scale / v_scale (f32 [1])
//   gqa_decode_paged_*      paged cache   k, v [num_pages, page_size, H_kv, D] (vLLM / FlashInfer
//                                         NHD), block_table [B, max_pages] int32, in q's dtype
//   gqa_decode_paged_fp8_*  paged cache   in float8_e4m3fn
//   gqa_decode_merge_*      the second pass of split-KV: merges the partial results
//
// Work split. One block of 128 threads per (sequence b, KV head, head tile, split): the block serves
// GT query heads of the group over the keys [split * chunk, (split + 1) * chunk) of sequence b.
// GT = 8 for a 16-bit cache and a group of more than 4 (64 f32 q values and 64 f32 accumulators per
// thread), 4 for groups of up to 4 and for an fp8 cache (whose 16 elements a lane double the
// registers per head). Each key and value is loaded ONCE per block and used for all GT heads, so a
// group of g <= GT heads reads its KV once; a larger group (g = 16 with a 16-bit cache, g >= 8 with
// fp8) has ceil(g / GT) head tiles, adjacent in the grid, that read the same KV (the second read
// mostly from L2). The host picks the number of splits so that the grid fills the GPU at any batch;
// with one split the block writes the final output directly (the one-pass path), otherwise each
// block writes its normalised partial output and log-sum-exp (f32) and gqa_decode_merge combines
// them.
//
// Inside a block: L = D / E lanes hold one key (E = 8 elements of a 16-bit cache, 16 of fp8: one
// 16-byte load per lane per key and per value), so a warp holds 32 / L keys and the block
// KG = 128 / L key groups. Each group walks its keys TK = 4 at a time, with all 2 * TK loads of a
// step issued before any is used (8 x 16 bytes in flight per thread). The block is compiled per L
// (one instantiation per head dim), so the shuffles' lanes are constants. The scores of the GT
// heads are dot products over the L lanes, summed by a transposed reduction (each xor level halves
// the values a lane holds, see transposed_sums): afterwards a lane owns the full scores of one
// head for N = max(GT * TK / L, 1) of the step's keys, runs the online softmax on those only, and
// the weights and rescale factors go back to the segment's lanes by one indexed shuffle each.
// Scores are in base 2: q is scaled by sm_scale * log2(e) (times k_scale for fp8) when it is
// loaded, so p = exp2(s - m) is one FADD and one MUFU.EX2. With a softcap c the score is
// c * tanh(q.k * sm_scale / c) (Gemma 2), computed as (c * log2 e) * tanh(q.k * (sm_scale / c)).
// Numerics as FlashAttention: f32 accumulation, a running max per head and step, the accumulators
// rescaled once per step. The KG groups' states are merged through shared memory at the end.
// v_scale multiplies the output. Key addresses are a 64-bit base per block plus a 32-bit key (or
// paged: page and row) index times the key stride, one wide multiply-add per key and tensor; the
// paged cache's page and row advance by a step without a division, and the block table is read
// once per key.

// Edge cases: a sequence of length 0 (or a split past its end) gives o = 0 and lse = -inf (as
// FlashInfer); a seqlens entry is clamped to the cache's capacity (S_max, or max_pages * page_size)
// and below at 0, so a device copy that disagrees with the host plan never reads out of bounds; a
// block-table entry outside [0, num_pages) is never read through: the sequence's head outputs and
// lse come out NaN instead (the host plan refuses such a table before any launch).
//
// Launch contract (checked by the host): blockDim.x = 128; D in {64, 128, 256}; H % H_kv == 0;
// gridDim.x = B * H_kv * splits * head_tiles; every pointer 16-byte aligned; chunk a multiple of
// the keys a block takes per step (KG * TK).

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// One entry point per instantiation: the cache (16-bit or fp8, dense or paged), the heads a block
// takes (g4, g8: the host picks 4 for groups up to 4 and for an fp8 cache, 8 otherwise) and the head
// dim; the host picks the one a call needs, so the SASS ledger walks exactly the loop a row runs.
// @entry gqa_decode_g4_d64_{f16,bf16}: vector loads
// @entry gqa_decode_g4_d128_{f16,bf16}: vector loads
// @entry gqa_decode_g4_d256_{f16,bf16}: vector loads
// @entry gqa_decode_g8_d64_{f16,bf16}: vector loads
// @entry gqa_decode_g8_d128_{f16,bf16}: vector loads
// @entry gqa_decode_g8_d256_{f16,bf16}: vector loads
// @entry gqa_decode_fp8_g4_d64_{f16,bf16}: vector loads
// @entry gqa_decode_fp8_g4_d128_{f16,bf16}: vector loads
// @entry gqa_decode_fp8_g4_d256_{f16,bf16}: vector loads
// @entry gqa_decode_paged_g4_d64_{f16,bf16}: vector loads
// @entry gqa_decode_paged_g4_d128_{f16,bf16}: vector loads
// @entry gqa_decode_paged_g4_d256_{f16,bf16}: vector loads
// @entry gqa_decode_paged_g8_d64_{f16,bf16}: vector loads
// @entry gqa_decode_paged_g8_d128_{f16,bf16}: vector loads
// @entry gqa_decode_paged_g8_d256_{f16,bf16}: vector loads
// @entry gqa_decode_paged_fp8_g4_d64_{f16,bf16}: vector loads
// @entry gqa_decode_paged_fp8_g4_d128_{f16,bf16}: vector loads
// @entry gqa_decode_paged_fp8_g4_d256_{f16,bf16}: vector loads
// @entry gqa_decode_merge_{f16,bf16}: vector loads

#include "tileops_common.cuh"
#include "tileops_fp8.cuh"

using namespace tileops;

namespace {

constexpr int kThreads = 128;
// Keys per lane group per step: the loads of a step are all in flight together.
constexpr int kTileKeys = 4;
constexpr float kLn2 = 0.6931471805599453f;

// Marks a float8_e4m3fn cache (one byte per element).
struct Fp8E4M3 {};

// A cache element type: E elements per 16-byte vector, unpacked to f32.
template <typename C>
struct Cache {
    static constexpr bool kFp8 = false;
    static constexpr int E = Elem<C>::V;
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[E]) { Elem<C>::unpack(r, f); }
};

template <>
struct Cache<Fp8E4M3> {
    static constexpr bool kFp8 = true;
    static constexpr int E = 16;
    // e4m3 -> f16 is exact (one cvt.rn.f16x2.e4m3x2 per pair on sm_89+), then f16 -> f32.
    __device__ static __forceinline__ void unpack(const uint4& r, float (&f)[E]) {
        const unsigned w[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const __nv_fp8x2_storage_t pair = static_cast<__nv_fp8x2_storage_t>(w[i] >> (16 * half));
                const __half2_raw raw = __nv_cvt_fp8x2_to_halfraw2(pair, __NV_E4M3);
                const float2 t = __half22float2(*reinterpret_cast<const __half2*>(&raw));
                f[4 * i + 2 * half] = t.x;
                f[4 * i + 2 * half + 1] = t.y;
            }
        }
    }
};

// NaN when either is NaN, else the larger: a NaN partial (a refused page) must not be dropped.

struct DecodeArgs {
    int batch, heads, kv_heads, dim;
    long long s_max;  // dense: keys per sequence in the cache; paged: page_size
    int max_pages, num_pages;
    int splits;
    long long chunk;  // keys per split: up to a whole sequence, which an int holds, plus a step
    int head_tiles;
    float qscale;  // sm_scale * log2(e), or sm_scale / softcap
    float cap2;    // softcap * log2(e), 0 = no softcap
    int write_lse;
};

}  // namespace

// The L-lane sums of a step's NV = GT * TK scores, transposed: at each xor level a lane keeps
// the half of its values whose index bit matches its own lane bit and receives the partner's sum
// of that half, so the shuffles halve with every level (NV / 2 + NV / 4 + ... instead of NV per
// level), and lane l of the segment ends with the full sums of values
// [(l / SPAN) * N, (l / SPAN + 1) * N) in s[0, N), N = max(NV / L, 1) (SPAN = max(L / NV, 1)
// lanes hold copies of one value when there are fewer values than lanes).
//
// Value v = h * TK + j sits in slot v ^ (hmask * TK) of a lane (hmask: head_mask below): the
// lane's q registers are loaded in that order, so at the levels that split the heads every lane
// keeps its lower half and sends its upper one, with no select; the levels that split the keys
// of a head (the last ones) select.
template <int OFF, int NV, int n>
__device__ __forceinline__ void transposed_level(float (&s)[NV], int lg) {
    if constexpr (OFF > 0) {
        if constexpr (n > kTileKeys) {
#pragma unroll
            for (int i = 0; i < n / 2; ++i) s[i] += __shfl_xor_sync(0xffffffffu, s[i + n / 2], OFF);
            transposed_level<OFF / 2, NV, n / 2>(s, lg);
        } else if constexpr (n >= 2) {
            const bool hi = (lg & OFF) != 0;
#pragma unroll
            for (int i = 0; i < n / 2; ++i) {
                const float send = hi ? s[i] : s[i + n / 2];
                const float keep = hi ? s[i + n / 2] : s[i];
                s[i] = keep + __shfl_xor_sync(0xffffffffu, send, OFF);
            }
            transposed_level<OFF / 2, NV, n / 2>(s, lg);
        } else {
            s[0] += __shfl_xor_sync(0xffffffffu, s[0], OFF);
            transposed_level<OFF / 2, NV, 1>(s, lg);
        }
    }
}

template <int L, int NV>
__device__ __forceinline__ void transposed_sums(float (&s)[NV], int lg) {
    transposed_level<L / 2, NV, NV>(s, lg);
}

// The head a lane's register slot h holds (h ^ mask): the head-splitting levels of
// transposed_sums, lane bit L / 2 for the top head bit, L / 4 for the next, ...
template <int L, int GT>
__device__ __forceinline__ int head_mask(int lg) {
    int mask = 0;
#pragma unroll
    for (int bit = GT / 2, off = L / 2; bit > 0 && off > 0; bit >>= 1, off >>= 1) {
        if (lg & off) mask |= bit;
    }
    return mask;
}

// The block's shared memory, declared once by the entry point for every instantiation below.
struct DecodeShared {
    float o[kThreads * 64];  // [KG][GT][D] partial accumulators: KG * GT * D = 128 * GT * E <= 128 * 64
    float m[32 * 8];         // [KG][GT] running max (base 2); KG <= 32, GT <= 8
    float l[32 * 8];         // [KG][GT] running sum
    int bad;
};

// One block: (sequence, KV head, split, head tile) from blockIdx.x, head tile fastest; GT the query
// heads a block serves and L = D / E the lanes of one key (compile-time: the q values and
// accumulators are register arrays, and the score sums' shuffles are unrolled per lane count).
template <typename T, typename C, bool kPaged, int GT, int L>
__device__ __forceinline__ void gqa_decode_block(const T* __restrict__ q, const void* __restrict__ k_cache,
                                                 const void* __restrict__ v_cache, const int* __restrict__ seqlens,
                                                 const int* __restrict__ block_table,
                                                 const float* __restrict__ k_scale, const float* __restrict__ v_scale,
                                                 T* __restrict__ o, float* __restrict__ lse, float* __restrict__ part_o,
                                                 float* __restrict__ part_lse, const DecodeArgs& a, DecodeShared& sm) {
    constexpr int E = Cache<C>::E;
    constexpr int kBytes = Cache<C>::kFp8 ? 1 : static_cast<int>(sizeof(T));
    constexpr int D = L * E;
    constexpr int KG = kThreads / L;
    constexpr int kStep = KG * kTileKeys;  // keys a block takes per step
    // After the transposed sums each lane owns N scores of one head (N consecutive keys of the
    // step, copied on SPAN lanes): the softmax runs on those only, and the weights are
    // broadcast back to the segment for the value accumulation.
    constexpr int NV = GT * kTileKeys;
    constexpr int N = NV >= L ? NV / L : 1;
    constexpr int SPAN = L > NV ? L / NV : 1;
    constexpr int LPH = SPAN * kTileKeys / N;  // lanes that hold one head's scores
    static_assert(GT * E <= 64 && GT <= 8, "DecodeShared's sizes");
    static_assert(N <= kTileKeys && LPH * GT == L, "one head per lane");
    float* const sm_o = sm.o;
    float* const sm_m = sm.m;
    float* const sm_l = sm.l;
    int& sm_bad = sm.bad;

    unsigned idx = blockIdx.x;
    const int tile = static_cast<int>(idx % static_cast<unsigned>(a.head_tiles));
    idx /= static_cast<unsigned>(a.head_tiles);
    const int split = static_cast<int>(idx % static_cast<unsigned>(a.splits));
    idx /= static_cast<unsigned>(a.splits);
    const int kvh = static_cast<int>(idx % static_cast<unsigned>(a.kv_heads));
    const int b = static_cast<int>(idx / static_cast<unsigned>(a.kv_heads));
    const int group = a.heads / a.kv_heads;
    const int h0 = kvh * group + tile * GT;  // first query head of this block
    const int gt = min(GT, group - tile * GT);

    const int lg = threadIdx.x % L;  // lane within the key group
    const int gi = threadIdx.x / L;  // key group
    const int own_v = (lg / SPAN) * N;         // the first score this lane owns (h * TK + j)
    const int own_h = own_v / kTileKeys;       // its head
    const int own_j = own_v % kTileKeys;       // its first key of the group's step

    if (threadIdx.x == 0) sm_bad = 0;

    // The sequence's valid keys, clamped to the cache's capacity, and this split's share (a
    // seqlens entry is an int, so every key index fits one).
    const long long capacity = kPaged ? static_cast<long long>(a.max_pages) * a.s_max : a.s_max;
    const int len = static_cast<int>(min(max(static_cast<long long>(seqlens[b]), 0LL), capacity));
    const int k_begin = static_cast<int>(min(static_cast<long long>(split) * a.chunk, static_cast<long long>(len)));
    const int k_end = static_cast<int>(min(static_cast<long long>(len), static_cast<long long>(k_begin) + a.chunk));

    // q: this lane's E elements of each of the block's heads, pre-scaled (base 2, k_scale folded).
    float qscale = a.qscale;
    if constexpr (Cache<C>::kFp8) qscale *= __ldg(k_scale);
    // Slot h holds head h ^ hmask (see transposed_sums).
    const int hmask = head_mask<L, GT>(lg);
    float qf[GT][E];
#pragma unroll
    for (int h = 0; h < GT; ++h) {
        const int head = h ^ hmask;
        const T* qrow = q + (static_cast<long long>(b) * a.heads + h0 + min(head, gt - 1)) * D + lg * E;
#pragma unroll
        for (int c = 0; c < E / 8; ++c) {
            float t[8];
            Elem<T>::unpack(load16(qrow + c * 8), t);
#pragma unroll
            for (int e = 0; e < 8; ++e) qf[h][c * 8 + e] = head < gt ? t[e] * qscale : 0.0f;
        }
    }

    float m_own = neg_inf(), l_own = 0.0f;  // the running max and sum of head own_h
    float acc[GT][E];
#pragma unroll
    for (int h = 0; h < GT; ++h) {
#pragma unroll
        for (int e = 0; e < E; ++e) acc[h][e] = 0.0f;
    }

    // Key addresses: a 64-bit base per block (the KV head and this lane's slice) plus a 32-bit
    // row index times the row stride (one wide multiply-add per key and tensor).
    const unsigned stride = static_cast<unsigned>(a.kv_heads) * (D * kBytes);  // bytes between keys
    const long long slice = static_cast<long long>(kvh) * (D * kBytes) + lg * (E * kBytes);
    const char* kc = static_cast<const char*>(k_cache) + slice;
    const char* vc = static_cast<const char*>(v_cache) + slice;
    if constexpr (!kPaged) {
        // The group's first key of the block's first step; advanced a step at a time.
        const long long first = static_cast<long long>(b) * a.s_max + k_begin + gi * kTileKeys;
        kc += first * stride;
        vc += first * stride;
    }
    // Paged: the group's first key of the step as (page index, row in the page), advanced by a
    // step's kStep keys without a division; the other keys of the step follow by +1 with a wrap.
    const int page_size = static_cast<int>(a.s_max);
    const int* bt = block_table + static_cast<long long>(b) * a.max_pages;
    int pidx = 0, prow = 0, step_pages = 0, step_rows = 0, last_page = 0;
    if constexpr (kPaged) {
        last_page = max(k_end - 1, 0) / page_size;
        const int first = k_begin + gi * kTileKeys;
        pidx = first / page_size;
        prow = first % page_size;
        step_pages = kStep / page_size;
        step_rows = kStep % page_size;
    }
    bool bad = false;
    __syncthreads();  // sm_bad is initialised before any thread may set it

    for (int base = k_begin; base < k_end; base += kStep) {
        const int first = base + gi * kTileKeys;  // the group's first key of the step
        uint4 kv[2][kTileKeys];
        // All loads of the step first.
        if constexpr (kPaged) {
            // A key past the end reads the sequence's last page (its table entry in bounds, the
            // row inside the page): its score is masked below. A page outside the pool is never
            // read through and refuses the sequence.
            int p = pidx, r = prow;
#pragma unroll
            for (int j = 0; j < kTileKeys; ++j) {
                if (j > 0 && ++r == page_size) {
                    r = 0;
                    ++p;
                }
                const int page = __ldg(bt + min(p, last_page));
                const bool ok = static_cast<unsigned>(page) < static_cast<unsigned>(a.num_pages);
                bad |= !ok;
                const unsigned long long off =
                    static_cast<unsigned long long>(static_cast<unsigned>(page) * page_size + r) * stride;
                // A key past the end reads a row of the page the sequence does not own, whatever
                // the pool holds there (a NaN, say): its value is zeroed, as its weight is 0 and
                // 0 * NaN would be NaN.
                const bool live = first + j < k_end;
                kv[0][j] = ok ? load16(kc + off) : make_uint4(0, 0, 0, 0);
                kv[1][j] = ok && live ? load16(vc + off) : make_uint4(0, 0, 0, 0);
            }
            prow += step_rows;
            pidx += step_pages;
            if (prow >= page_size) {
                prow -= page_size;
                ++pidx;
            }
        } else {
            // A key past the end loads the last valid key again (in bounds, already read): its
            // score is masked below, so it adds nothing.
            const int last = k_end - 1 - first;  // the last valid key, from the group's first
#pragma unroll
            for (int j = 0; j < kTileKeys; ++j) {
                const long long off = static_cast<long long>(min(j, last)) * static_cast<int>(stride);
                kv[0][j] = load16(kc + off);
                kv[1][j] = load16(vc + off);
            }
            kc += static_cast<long long>(kStep) * stride;
            vc += static_cast<long long>(kStep) * stride;
        }

        // Scores, base 2: s[h * TK + j] = (qscale * q_h) . k_j, this lane's part.
        float s[NV];
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) {
            float kf[E];
            Cache<C>::unpack(kv[0][j], kf);
#pragma unroll
            for (int h = 0; h < GT; ++h) {
                float dot = 0.0f;
#pragma unroll
                for (int e = 0; e < E; ++e) dot = fmaf(qf[h][e], kf[e], dot);
                s[h * kTileKeys + j] = dot;
            }
        }
        transposed_sums<L, NV>(s, lg);

        // Online softmax on the lane's own N scores: the head's step max over its LPH lanes,
        // then the weights p = exp2(s - m) overwrite the scores.
        // The maxima keep a NaN (fmaxf would drop it): a NaN score (a NaN in q, a key or the
        // k scale) makes the row's max, weights, sum and output NaN, never a plausible number.
        float step_max = neg_inf();
#pragma unroll
        for (int i = 0; i < N; ++i) {
            float dot = s[i];
            if (a.cap2 != 0.0f) dot = a.cap2 * tanhf(dot);
            s[i] = first + own_j + i < k_end ? dot : neg_inf();
            step_max = fmax_nan(step_max, s[i]);
        }
#pragma unroll
        for (int off = SPAN; off < LPH; off <<= 1)
            step_max = fmax_nan(step_max, __shfl_xor_sync(0xffffffffu, step_max, off));
        const float m_new = fmax_nan(m_own, step_max);
        // Every key so far masked: nothing to add (and -inf - -inf would be NaN).
        const float m_use = m_new == neg_inf() ? 0.0f : m_new;
        const float corr = exp2f(m_own - m_use);
        float sum = 0.0f;
#pragma unroll
        for (int i = 0; i < N; ++i) {
            s[i] = exp2f(s[i] - m_use);
            sum += s[i];
        }
        l_own = fmaf(l_own, corr, sum);
        m_own = m_new;

        // The weights and rescale factors back to every lane of the segment (constant source
        // lanes), the accumulators rescaled once per step, then the values.
        float p[NV];
#pragma unroll
        for (int v = 0; v < NV; ++v) p[v] = __shfl_sync(0xffffffffu, s[v % N], (v / N) * SPAN, L);
#pragma unroll
        for (int h = 0; h < GT; ++h) {
            const float c = __shfl_sync(0xffffffffu, corr, h * LPH, L);
#pragma unroll
            for (int e = 0; e < E; ++e) acc[h][e] *= c;
        }
#pragma unroll
        for (int j = 0; j < kTileKeys; ++j) {
            float vf[E];
            Cache<C>::unpack(kv[1][j], vf);
#pragma unroll
            for (int h = 0; h < GT; ++h) {
#pragma unroll
                for (int e = 0; e < E; ++e) acc[h][e] = fmaf(p[h * kTileKeys + j], vf[e], acc[h][e]);
            }
        }
    }

    // The head's sum over its lanes (copies excluded), then merge the KG groups' states through
    // shared memory.
#pragma unroll
    for (int off = SPAN; off < LPH; off <<= 1) l_own += __shfl_xor_sync(0xffffffffu, l_own, off);
    if (bad) sm_bad = 1;
#pragma unroll
    for (int h = 0; h < GT; ++h) {
#pragma unroll
        for (int e = 0; e < E; ++e) sm_o[(gi * GT + h) * D + lg * E + e] = acc[h][e];
    }
    if (lg % LPH == 0) {
        sm_m[gi * GT + own_h] = m_own;
        sm_l[gi * GT + own_h] = l_own;
    }
    __syncthreads();

    const bool refused = sm_bad != 0;
    const float vs = Cache<C>::kFp8 ? __ldg(v_scale) : 1.0f;
    for (int i = threadIdx.x; i < gt * D; i += kThreads) {
        const int h = i / D;
        const int d = i % D;
        float mx = neg_inf();
        for (int g = 0; g < KG; ++g) mx = fmax_nan(mx, sm_m[g * GT + h]);
        float sum = 0.0f, out = 0.0f;
        if (mx != neg_inf()) {
            for (int g = 0; g < KG; ++g) {
                const float w = exp2f(sm_m[g * GT + h] - mx);
                sum = fmaf(sm_l[g * GT + h], w, sum);
                out = fmaf(sm_o[(g * GT + h) * D + d], w, out);
            }
        }
        // Only a row with no visible key (its max still -inf) is the empty result, o = 0 and
        // lse = -inf; a NaN max (a NaN score) carries into both.
        const float nan = __int_as_float(0x7fc00000);
        const bool empty = mx == neg_inf();
        const float value = refused ? nan : (empty ? 0.0f : out / sum * vs);
        const float row_lse = refused ? nan : (empty ? neg_inf() : mx + log2f(sum));  // base 2
        const long long row = static_cast<long long>(b) * a.heads + h0 + h;
        if (a.splits == 1) {
            Elem<T>::store(o + row * D + d, value);
            if (a.write_lse && d == 0) lse[row] = row_lse * kLn2;
        } else {
            part_o[(row * a.splits + split) * D + d] = value;
            if (d == 0) part_lse[row * a.splits + split] = row_lse;
        }
    }
}

// The second pass of split-KV: for each (b, h) row, o = sum_s w_s o_s / sum_s w_s with
// w_s = exp2(lse_s - max lse), lse = max + log2(sum w) (returned as a natural log). Rows of D / 4
// threads (4 elements each, one 16-byte load per split), 512 / D rows per block.
template <typename T>
__device__ __forceinline__ void gqa_decode_merge(const float* __restrict__ part_o, const float* __restrict__ part_lse,
                                                 T* __restrict__ o, float* __restrict__ lse, long long rows, int dim,
                                                 int splits, int write_lse) {
    const int tpr = dim / 4;
    const long long row = static_cast<long long>(blockIdx.x) * (kThreads / tpr) + threadIdx.x / tpr;
    const int c = threadIdx.x % tpr;
    if (row >= rows) return;
    const float* pl = part_lse + row * splits;
    float mx = neg_inf();
    for (int s = 0; s < splits; ++s) mx = fmax_nan(mx, __ldg(pl + s));
    float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float row_lse = neg_inf();
    if (mx != mx) {
        const float nan = __int_as_float(0x7fc00000);
        out[0] = out[1] = out[2] = out[3] = nan;
        row_lse = nan;
    } else if (mx != neg_inf()) {
        float sum = 0.0f;
        for (int s = 0; s < splits; ++s) {
            const float w = exp2f(__ldg(pl + s) - mx);
            const float4 po = __ldg(reinterpret_cast<const float4*>(part_o + (row * splits + s) * dim) + c);
            sum += w;
            out[0] = fmaf(w, po.x, out[0]);
            out[1] = fmaf(w, po.y, out[1]);
            out[2] = fmaf(w, po.z, out[2]);
            out[3] = fmaf(w, po.w, out[3]);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) out[i] /= sum;
        row_lse = mx + log2f(sum);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) Elem<T>::store(o + row * dim + c * 4 + i, out[i]);
    if (write_lse && c == 0) lse[row] = row_lse * kLn2;
}

#define TILEOPS_GQA_DECODE_ENTRY(NAME, T, C, PAGED, GT, D)                                                         \
    extern "C" __global__ void __launch_bounds__(128, 2) NAME(                                                    \
        const T* __restrict__ q, const void* __restrict__ k_cache, const void* __restrict__ v_cache,              \
        const int* __restrict__ seqlens, const int* __restrict__ block_table, const float* __restrict__ k_scale, \
        const float* __restrict__ v_scale, T* __restrict__ o, float* __restrict__ lse, float* __restrict__ part_o, \
        float* __restrict__ part_lse, int batch, int heads, int kv_heads, int dim, long long s_max, int max_pages, \
        int num_pages, int splits, long long chunk, int head_tiles, float qscale, float cap2, int write_lse) {     \
        const DecodeArgs a{batch, heads,  kv_heads,   dim,    s_max, max_pages, num_pages,                      \
                           splits, chunk, head_tiles, qscale, cap2, write_lse};                                 \
        __shared__ DecodeShared sm;                                                                             \
        gqa_decode_block<T, C, PAGED, GT, D / Cache<C>::E>(q, k_cache, v_cache, seqlens, block_table, k_scale,  \
                                                           v_scale, o, lse, part_o, part_lse, a, sm);           \
    }

// Every instantiation of one q dtype: each cache kind, heads per block and head dim; then the merge.
#define TILEOPS_GQA_DECODE_ENTRIES(T, SUFFIX)                                                             \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_g4_d64_##SUFFIX, T, T, false, 4, 64)                              \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_g4_d128_##SUFFIX, T, T, false, 4, 128)                            \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_g4_d256_##SUFFIX, T, T, false, 4, 256)                            \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_g8_d64_##SUFFIX, T, T, false, 8, 64)                              \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_g8_d128_##SUFFIX, T, T, false, 8, 128)                            \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_g8_d256_##SUFFIX, T, T, false, 8, 256)                            \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_fp8_g4_d64_##SUFFIX, T, Fp8E4M3, false, 4, 64)                    \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_fp8_g4_d128_##SUFFIX, T, Fp8E4M3, false, 4, 128)                  \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_fp8_g4_d256_##SUFFIX, T, Fp8E4M3, false, 4, 256)                  \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_g4_d64_##SUFFIX, T, T, true, 4, 64)                         \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_g4_d128_##SUFFIX, T, T, true, 4, 128)                       \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_g4_d256_##SUFFIX, T, T, true, 4, 256)                       \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_g8_d64_##SUFFIX, T, T, true, 8, 64)                         \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_g8_d128_##SUFFIX, T, T, true, 8, 128)                       \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_g8_d256_##SUFFIX, T, T, true, 8, 256)                       \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_fp8_g4_d64_##SUFFIX, T, Fp8E4M3, true, 4, 64)               \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_fp8_g4_d128_##SUFFIX, T, Fp8E4M3, true, 4, 128)             \
    TILEOPS_GQA_DECODE_ENTRY(gqa_decode_paged_fp8_g4_d256_##SUFFIX, T, Fp8E4M3, true, 4, 256)             \
    extern "C" __global__ void __launch_bounds__(128) gqa_decode_merge_##SUFFIX(                          \
        const float* __restrict__ part_o, const float* __restrict__ part_lse, T* __restrict__ o,          \
        float* __restrict__ lse, long long rows, int dim, int splits, int write_lse) {                    \
        gqa_decode_merge<T>(part_o, part_lse, o, lse, rows, dim, splits, write_lse);                      \
    }

TILEOPS_GQA_DECODE_ENTRIES(__half, f16)
TILEOPS_GQA_DECODE_ENTRIES(__nv_bfloat16, bf16)
