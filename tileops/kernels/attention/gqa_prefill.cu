// Attention prefill on tensor cores (FlashAttention-2's forward pass): varlen sequences packed
// along the token axis, q [total_q, H, D] against k, v [total_kv, H_kv, D] in q's dtype, sequence
// b's queries rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and its keys rows [cu_seqlens_k[b],
// cu_seqlens_k[b + 1]), grouped query heads (query head h reads KV head h / (H / H_kv)), causal
// masking aligned bottom-right (key j visible from query i iff j <= i + Lk - Lq), a sliding window
// on the left (j >= i + Lk - Lq - window_left) and an optional softcap. Entry points per dtype
// (f16, bf16) and head dim (64, 128, 256): gqa_prefill_d{64,128,256}_{f16,bf16}.
//
// Work split. One block of 4 warps per (64-query tile, head, sequence) = (blockIdx.x, .y, .z);
// each warp owns 16 query rows. The block's Q tile goes through shared memory once (cp.async) and
// into registers as mma A fragments (ldmatrix), where it stays. The keys and values stream through
// shared memory a tile of BN = 64 keys at a time (32 for D = 256, whose 16 KiB per K or V tile is
// what fits beside the other in 48 KiB of static shared memory).
//
// Per key tile (FlashAttention-2's pipeline, one K and one V buffer):
//   wait for K_j, barrier (every warp is done with V_{j-1}), issue V_j's cp.async;
//   S = Q K_j^T on the tensor cores (mma.m16n8k16, K through ldmatrix as the B operand);
//   the online softmax on S's accumulator registers;
//   wait for V_j, barrier (every warp is done with K_j), issue K_{j+1}'s cp.async;
//   O += P V_j (the S accumulators re-packed in place as A fragments, V through ldmatrix.trans).
// So V_j's load overlaps S = Q K_j^T and the softmax, and K_{j+1}'s overlaps P V_j.
//
// Shared memory is swizzled: a row of D elements is D / 8 chunks of 16 bytes, and chunk c of row r
// sits at chunk c ^ (r % 8). The 8 rows one ldmatrix phase reads (or one cp.async phase writes) at
// the same logical chunk land on 8 different chunk slots of a 128-byte line: all 32 banks, no
// conflict (rows are a multiple of 128 bytes).
//
// The softmax runs in base 2 on the f32 accumulators: with c = sm_scale * log2(e) the weight of a
// score s is exp2(c s - m), one FFMA and one MUFU.EX2; the running max is taken on the raw scores
// (c > 0) and scaled once per row. With a softcap the score is first softcap * tanh(sm_scale s /
// softcap), then times log2(e): a second instantiation of the block, picked by the entry, so the
// plain loop carries no branch for it. Each thread holds two rows of its warp's 16 (g = lane / 4 and
// g + 8), and a row's values are spread over the 4 lanes of a quad: the row max is two xor
// shuffles; the row sum stays per lane until the end. The running max of a row with no visible key
// yet is -inf; its weights use 0 as the shift so that exp2(-inf - -inf) never makes a NaN.
//
// Masking. The key tiles wholly outside the causal limit or the window are never loaded; only the
// tiles that straddle a limit (or the sequence's end) take the per-element mask. A query row with
// no visible key writes o = 0 and lse = -inf. lse (natural log, [H, total_q]) is written when the
// pointer is not null. Rows and keys past a sequence's end are loaded as zeros (cp.async's
// src-size 0) and masked, or never stored.
//
// Launch contract (checked by the host): blockDim.x = 128; gridDim = (ceil(max Lq / 64), H, B);
// total_q and total_kv the rows of q and of k / v (the offsets are clamped to them);
// H % H_kv == 0; sm_scale > 0; every pointer 16-byte aligned; no dynamic shared memory.

// The entry points, with the global accesses each is written to issue (the loads are cp.async).
// @entry gqa_prefill_d64_{f16,bf16}: vector stores
// @entry gqa_prefill_d128_{f16,bf16}: vector stores
// @entry gqa_prefill_d256_{f16,bf16}: vector stores

#include "tileops_common.cuh"
#include "tileops_mma.cuh"

using namespace tileops;

namespace {

constexpr int kThreads = 128;
constexpr int kBlockM = 64;  // query rows per block, 16 per warp
constexpr float kLn2 = 0.6931471805599453f;

// The tensor-core ops and the f32 pair packing of one 16-bit type.
template <typename T> struct Mma;

template <> struct Mma<__half> {
    __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                               const float (&c)[4]) {
        mma_m16n8k16_f16(d, a, b, c);
    }
    // (lo, hi) as two halves, lo in the low 16 bits: the lower column of an A fragment register.
    __device__ static __forceinline__ uint32_t pack(float lo, float hi) { return half2_bits(__floats2half2_rn(lo, hi)); }
};

template <> struct Mma<__nv_bfloat16> {
    __device__ static __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                               const float (&c)[4]) {
        mma_m16n8k16_bf16(d, a, b, c);
    }
    __device__ static __forceinline__ uint32_t pack(float lo, float hi) {
        return bf162_bits(__floats2bfloat162_rn(lo, hi));
    }
};

// The tile shapes of one head dim.
template <int D>
struct Tiles {
    static_assert(D == 64 || D == 128 || D == 256, "head dims 64, 128, 256");
    static constexpr int BN = D == 256 ? 32 : 64;  // keys per tile
    static constexpr int kChunks = D / 8;          // 16-byte chunks per row
    static constexpr int kKSteps = D / 16;         // k-steps of Q K^T, n-tiles pairs of P V
    static constexpr int kNTiles = BN / 8;         // n-tiles of S (8 keys each)
    static constexpr int kOTiles = D / 8;          // n-tiles of O (8 dims each)
    // Shared memory: the Q tile at first, then the K and V tiles (and at the end the O tile)
    // in the same bytes.
    static constexpr int kQElems = kBlockM * D;
    static constexpr int kKvElems = BN * D;
    static constexpr int kElems = kQElems > 2 * kKvElems ? kQElems : 2 * kKvElems;
    static_assert(kElems * 2 <= 48 * 1024, "static shared memory");
};

// The element offset of (row, chunk c) in a swizzled tile of D / 8 chunks per row.
template <int D>
__device__ __forceinline__ int swz(int row, int chunk) {
    return row * D + ((chunk ^ (row & 7)) << 3);
}

// The same for the ldmatrix walks, as a per-lane address and constants so that the loop keeps a
// few base registers rather than one address per fragment. A lane reads chunk e + c of `row` (e
// even, a loop constant; c in {0, 1}, the lane's): (e + c) ^ (row % 8) = e ^ y with
// y = c ^ (row % 8), which is (e & ~7) + ((e & 7) ^ y). So from the lane's address of chunk c,
// whose bits 4-6 are y's (the tile is 128-byte aligned and its rows a multiple of 128 bytes), the
// address is (lane ^ ((e & 7) << 4)) + ((e & ~7) << 4) bytes: one XOR with one of 4 constants, and
// an immediate offset. The XOR is on the address itself, not on an offset from the array: from
// the offset ptxas proves the bits of the two terms disjoint, turns the + into an OR and then
// keeps every combination in its own register (spills at D = 256).
__device__ __forceinline__ const char* swz_at(const char* lane, int e) {
    const unsigned long long a = reinterpret_cast<unsigned long long>(lane) ^ static_cast<unsigned>((e & 7) << 4);
    return reinterpret_cast<const char*>(a) + ((e & ~7) << 4);
}

// Copies `rows` rows of D elements (row r at src + r * stride elements) into a swizzled shared
// tile, 16 bytes per cp.async; rows at or past `valid` are zero-filled (their source not read).
// `src` points at the tile's first row (it may be past the tensor's end when valid = 0: it is then
// never read, and `base` stands in as the pointer cp.async is given).
template <int D, int ROWS, typename T>
__device__ __forceinline__ void load_tile(T* sm, const T* src, long long stride, int valid, const T* base) {
    constexpr int kChunks = D / 8;
    constexpr int kRowsPerPass = kThreads / kChunks;
    static_assert(ROWS % kRowsPerPass == 0, "whole passes");
    const int c = threadIdx.x % kChunks;
    const int r0 = threadIdx.x / kChunks;
    // One 64-bit address per tile; the passes are 32-bit offsets from it (a tile spans at most
    // 64 rows of the tensor).
    const T* const first = src + r0 * stride + c * 8;
    const int pass_stride = static_cast<int>(kRowsPerPass * stride);
#pragma unroll
    for (int i = 0; i < ROWS / kRowsPerPass; ++i) {
        const int r = r0 + i * kRowsPerPass;
        const bool ok = r < valid;
        cp_async_cg_16_zfill(sm + swz<D>(r, c), ok ? first + i * pass_stride : base, ok);
    }
}

}  // namespace

// One block: query rows [64 x, 64 x + 64) of sequence z, head y. kSoftcap: compiled with the
// softcap's tanh (the entry picks the instantiation), so the plain loop has no branch for it.
template <typename T, int D, bool kSoftcap>
__device__ __forceinline__ void gqa_prefill(const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v,
                                            T* __restrict__ o, float* __restrict__ lse,
                                            const int* __restrict__ cu_seqlens_q,
                                            const int* __restrict__ cu_seqlens_k, int total_q, int total_kv,
                                            int num_heads, int num_kv_heads, float sm_scale, float softcap,
                                            int window_left, int causal, T* sm) {
    using Tl = Tiles<D>;
    constexpr int BN = Tl::BN;
    constexpr int kKSteps = Tl::kKSteps;
    constexpr int kNTiles = Tl::kNTiles;
    constexpr int kOTiles = Tl::kOTiles;

    const int b = blockIdx.z;
    const int h = blockIdx.y;
    // The offsets clamped to the tensors' rows: a device copy that disagrees with the host plan
    // (which checked its own copy) gives wrong rows, never a read or write out of bounds.
    const int q_start = min(max(__ldg(cu_seqlens_q + b), 0), total_q);
    const int lq = min(max(__ldg(cu_seqlens_q + b + 1), q_start), total_q) - q_start;
    const int m0 = blockIdx.x * kBlockM;  // the block's first query row in the sequence
    if (m0 >= lq) return;
    const int k_start = min(max(__ldg(cu_seqlens_k + b), 0), total_kv);
    const int lk = min(max(__ldg(cu_seqlens_k + b + 1), k_start), total_kv) - k_start;
    const int kvh = h / (num_heads / num_kv_heads);
    const int shift = lk - lq;  // key j is the diagonal of query i when j = i + shift

    const int warp = threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    const int g = lane / 4;  // the thread's rows of the warp: g and g + 8
    const int t = lane % 4;  // its column pair within an 8-column tile: 2t, 2t + 1

    // The keys any row of the block can see: [kv_lo, kv_hi).
    const int m_last = min(m0 + kBlockM, lq) - 1;
    int kv_hi = lk;
    if (causal) kv_hi = min(kv_hi, m_last + shift + 1);
    int kv_lo = 0;
    if (window_left >= 0) kv_lo = max(kv_lo, m0 + shift - window_left);
    const int tile_lo = kv_lo / BN;
    const int tile_hi = kv_hi > kv_lo ? (kv_hi + BN - 1) / BN : tile_lo;  // one past the last tile

    // The Q tile into registers: cp.async into shared memory, then ldmatrix.x4 per k-step.
    const long long q_stride = static_cast<long long>(num_heads) * D;
    const long long kv_stride = static_cast<long long>(num_kv_heads) * D;
    load_tile<D, kBlockM>(sm, q + (q_start + m0) * q_stride + h * D, q_stride, lq - m0, q);
    cp_async_commit_group();
    cp_async_wait_group(0);
    __syncthreads();
    uint32_t qa[kKSteps][4];
    {
        // Lane L addresses row L % 8 of matrix L / 8: matrices 0, 1 the rows 0-7, 8-15 at the
        // k-step's first chunk, 2, 3 the same rows at its second.
        const int row = warp * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        const char* const base = reinterpret_cast<const char*>(sm + swz<D>(row, lane >> 4));
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) ldmatrix_x4(qa[kk], swz_at(base, kk * 2));
    }
    __syncthreads();  // the Q tile's bytes become the K and V tiles

    T* const sk = sm;
    T* const sv = sm + Tl::kKvElems;
    const T* const kbase = k + k_start * kv_stride + kvh * D;
    const T* const vbase = v + k_start * kv_stride + kvh * D;
    if (tile_lo < tile_hi) {
        load_tile<D, BN>(sk, kbase + tile_lo * BN * kv_stride, kv_stride, lk - tile_lo * BN, k);
    }
    cp_async_commit_group();

    float acc[kOTiles][4];
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
    float row_max[2] = {neg_inf(), neg_inf()};  // base 2, scaled
    float row_sum[2] = {0.0f, 0.0f};            // this lane's part
    const float scale2 = sm_scale * kLog2e;
    const float cap_in = kSoftcap ? sm_scale / softcap : 0.0f;
    const float cap_out = softcap * kLog2e;
    // The thread's two query rows in the sequence.
    const int qi0 = m0 + warp * 16 + g;
    const int qi1 = qi0 + 8;

    // ldmatrix lane addresses: K (non-trans) for n-tile pairs: matrices 0, 1 the keys 0-7 at
    // chunks 2kk, 2kk + 1, matrices 2, 3 the keys 8-15; V (trans) for k-steps of keys: matrices
    // 0, 1 the keys 0-7, 8-15 at dim chunk 2p, matrices 2, 3 the same at 2p + 1.
    const char* const k_lane = reinterpret_cast<const char*>(sk + swz<D>((lane & 7) + (lane >> 4) * 8, (lane >> 3) & 1));
    const char* const v_lane = reinterpret_cast<const char*>(sv + swz<D>((lane & 7) + ((lane >> 3) & 1) * 8, lane >> 4));

    for (int tile = tile_lo; tile < tile_hi; ++tile) {
        const int n0 = tile * BN;
        cp_async_wait_group(0);
        __syncthreads();  // K_j is in; every warp is done with V_{j-1}
        load_tile<D, BN>(sv, vbase + n0 * kv_stride, kv_stride, lk - n0, v);
        cp_async_commit_group();

        // S = Q K_j^T.
        float s[kNTiles][4];
#pragma unroll
        for (int n = 0; n < kNTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
#pragma unroll
            for (int np = 0; np < kNTiles / 2; ++np) {
                uint32_t kb[4];
                ldmatrix_x4(kb, swz_at(k_lane, kk * 2) + np * 16 * D * 2);
                const uint32_t b0[2] = {kb[0], kb[1]};
                const uint32_t b1[2] = {kb[2], kb[3]};
                Mma<T>::mma(s[2 * np], qa[kk], b0, s[2 * np]);
                Mma<T>::mma(s[2 * np + 1], qa[kk], b1, s[2 * np + 1]);
            }
        }

        // Scores: softcap, then the mask on the tiles that straddle a limit or the end.
        if constexpr (kSoftcap) {
#pragma unroll
            for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
                for (int e = 0; e < 4; ++e) s[n][e] = cap_out * tanhf(s[n][e] * cap_in);
            }
        }
        const bool straddles = n0 + BN > lk || (causal && n0 + BN - 1 > m0 + shift) ||
                               (window_left >= 0 && n0 < m_last + shift - window_left);
        if (straddles) {
            // Key n0 + 8n + 2t + (e & 1) against per-row limits taken relative to the lane's
            // first key, so that each test is one compare with an immediate.
            const int kj = n0 + 2 * t;
#pragma unroll
            for (int r = 0; r < 2; ++r) {
                const int i = r == 0 ? qi0 : qi1;
                int hi = lk - 1 - kj;  // the last visible key, relative to kj
                if (causal) hi = min(hi, i + shift - kj);
                const int lo = window_left >= 0 ? i + shift - window_left - kj : -kBlockM;  // the first
#pragma unroll
                for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
                    for (int e = 0; e < 2; ++e) {
                        const int j = n * 8 + e;
                        if (j > hi || j < lo) s[n][2 * r + e] = neg_inf();
                    }
                }
            }
        }

        // The online softmax: the rows' new max, the rescale of what came before, the weights.
        const float mul = kSoftcap ? 1.0f : scale2;  // scores to base-2 units
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            // NaN-keeping maxima (fmaxf drops a NaN): a NaN score, from a NaN in q or a visible
            // key, makes the row's max, weights, sum, output and lse NaN.
            float mx = neg_inf();
#pragma unroll
            for (int n = 0; n < kNTiles; ++n) mx = fmax_nan(mx, fmax_nan(s[n][2 * r], s[n][2 * r + 1]));
            mx = fmax_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmax_nan(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmax_nan(row_max[r], mx * mul);
            // No visible key so far: nothing to add, and no -inf - -inf.
            const float m_use = m_new == neg_inf() ? 0.0f : m_new;
            const float corr = ex2_ftz(row_max[r] - m_use);
            row_max[r] = m_new;
            float sum = 0.0f;
#pragma unroll
            for (int n = 0; n < kNTiles; ++n) {
#pragma unroll
                for (int e = 2 * r; e < 2 * r + 2; ++e) {
                    s[n][e] = ex2_ftz(fmaf(s[n][e], mul, -m_use));
                    sum += s[n][e];
                }
            }
            row_sum[r] = fmaf(row_sum[r], corr, sum);
#pragma unroll
            for (int n = 0; n < kOTiles; ++n) {
                acc[n][2 * r] *= corr;
                acc[n][2 * r + 1] *= corr;
            }
        }

        cp_async_wait_group(0);
        __syncthreads();  // V_j is in; every warp is done with K_j
        if (tile + 1 < tile_hi) {
            load_tile<D, BN>(sk, kbase + (n0 + BN) * kv_stride, kv_stride, lk - n0 - BN, k);
        }
        cp_async_commit_group();

        // O += P V_j: S's n-tiles 2kk and 2kk + 1 are the A fragment of keys [16kk, 16kk + 16).
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
            const uint32_t pa[4] = {
                Mma<T>::pack(s[2 * kk][0], s[2 * kk][1]), Mma<T>::pack(s[2 * kk][2], s[2 * kk][3]),
                Mma<T>::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]), Mma<T>::pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int dp = 0; dp < kOTiles / 2; ++dp) {
                uint32_t vb[4];
                ldmatrix_x4_trans(vb, swz_at(v_lane, dp * 2) + kk * 16 * D * 2);
                const uint32_t b0[2] = {vb[0], vb[1]};
                const uint32_t b1[2] = {vb[2], vb[3]};
                Mma<T>::mma(acc[2 * dp], pa, b0, acc[2 * dp]);
                Mma<T>::mma(acc[2 * dp + 1], pa, b1, acc[2 * dp + 1]);
            }
        }
    }

    // The rows' sums over their quads, the normalised O tile through shared memory (the K and V
    // tiles' bytes, once every warp is done with them), then 16-byte stores of the valid rows.
    float inv[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
        float l = row_sum[r];
        l += __shfl_xor_sync(0xffffffffu, l, 1);
        l += __shfl_xor_sync(0xffffffffu, l, 2);
        // Only a row with no visible key (its max still -inf) is empty, o = 0 and lse = -inf;
        // otherwise l >= 1 (the row max's own weight is exp2(0)), or NaN with a NaN max.
        const bool empty = row_max[r] == neg_inf();
        inv[r] = empty ? 0.0f : 1.0f / l;
        const int i = r == 0 ? qi0 : qi1;
        if (lse != nullptr && t == 0 && i < lq) {
            lse[static_cast<long long>(h) * total_q + q_start + i] =
                empty ? neg_inf() : (row_max[r] + log2f(l)) * kLn2;
        }
    }
    cp_async_wait_group(0);
    __syncthreads();
#pragma unroll
    for (int n = 0; n < kOTiles; ++n) {
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const int row = warp * 16 + g + 8 * r;
            // Element 2t of chunk n: the pair's byte offset within the 16-byte chunk is 4t.
            uint32_t* dst = reinterpret_cast<uint32_t*>(sm + swz<D>(row, n) + 2 * t);
            *dst = Mma<T>::pack(acc[n][2 * r] * inv[r], acc[n][2 * r + 1] * inv[r]);
        }
    }
    __syncthreads();
    constexpr int kRowsPerPass = kThreads / Tl::kChunks;
    const int c = threadIdx.x % Tl::kChunks;
#pragma unroll
    for (int p = 0; p < kBlockM / kRowsPerPass; ++p) {
        const int r = threadIdx.x / Tl::kChunks + p * kRowsPerPass;
        if (m0 + r < lq) {
            const uint4 val = *reinterpret_cast<const uint4*>(sm + swz<D>(r, c));
            store16(o + (q_start + m0 + r) * q_stride + h * D + c * 8, val);
        }
    }
}

// MIN_BLOCKS: D = 64 needs some 130 registers, and ptxas left to itself picks 128 with a spill on
// sm_80 (137 on sm_90): 3 blocks an SM lets it take up to 168. D = 128 and 256 take what they need
// (242 and 255 on sm_90): 2 blocks an SM.
#define TILEOPS_GQA_PREFILL_ENTRY(NAME, T, D, MIN_BLOCKS)                                                         \
    extern "C" __global__ void __launch_bounds__(128, MIN_BLOCKS) NAME(                                          \
        const T* __restrict__ q, const T* __restrict__ k, const T* __restrict__ v, T* __restrict__ o,            \
        float* __restrict__ lse, const int* __restrict__ cu_seqlens_q, const int* __restrict__ cu_seqlens_k,     \
        int total_q, int total_kv, int num_heads, int num_kv_heads, float sm_scale, float softcap,               \
        int window_left, int causal) {                                                                           \
        __shared__ __align__(128) T sm[Tiles<D>::kElems];                                                        \
        /* ptxas lays the else (plain) branch out as the fall-through: the path the SASS ledger walks. */       \
        if (softcap != 0.0f) {                                                                                  \
            gqa_prefill<T, D, true>(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, total_q, total_kv, num_heads,  \
                                    num_kv_heads, sm_scale, softcap, window_left, causal, sm);                  \
        } else {                                                                                                \
            gqa_prefill<T, D, false>(q, k, v, o, lse, cu_seqlens_q, cu_seqlens_k, total_q, total_kv, num_heads, \
                                     num_kv_heads, sm_scale, softcap, window_left, causal, sm);                 \
        }                                                                                                       \
    }

#define TILEOPS_GQA_PREFILL_ENTRIES(T, SUFFIX)                     \
    TILEOPS_GQA_PREFILL_ENTRY(gqa_prefill_d64_##SUFFIX, T, 64, 3)  \
    TILEOPS_GQA_PREFILL_ENTRY(gqa_prefill_d128_##SUFFIX, T, 128, 1) \
    TILEOPS_GQA_PREFILL_ENTRY(gqa_prefill_d256_##SUFFIX, T, 256, 1)

TILEOPS_GQA_PREFILL_ENTRIES(__half, f16)
TILEOPS_GQA_PREFILL_ENTRIES(__nv_bfloat16, bf16)
