// Tensor-core building blocks for tileops kernels (sm_80 and later): the warp-wide matrix
// multiply-accumulate mma.sync m16n8k16 with f32 accumulators, the shared-memory fragment loads
// ldmatrix, and the asynchronous global -> shared copies cp.async. Passed to NVRTC as the header
// "tileops_mma.cuh" (never compiled on its own).
//
// On the GPU each call is one inline-PTX instruction. Under the CPU emulator (cuda-emu, which
// defines TILEOPS_EMULATED) the same names are macros that add the caller's __FILE__/__LINE__ and
// run the instructions with the PTX ISA semantics below: mma and ldmatrix as warp collectives
// (every lane of the warp must execute the same call, as .sync.aligned requires), cp.async as a
// deferred copy per thread.
//
// Registers. Every fragment register is a uint32_t holding two 16-bit values (f16 or bf16 bits),
// the lower column (or k) index in the low half, as the PTX ISA packs them. In a warp, lane L has
// group g = L / 4 and thread-in-group t = L % 4.
//
// mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 d, a, b, c:  D = A * B + C,
// A 16x16 (row-major, rows m, columns k), B 16x8 (k x n, "col": each lane holds a column's k
// pairs), C and D 16x8 f32. Lane L holds
//   a[0] = A[g    ][2t, 2t+1]      a[1] = A[g + 8][2t, 2t+1]
//   a[2] = A[g    ][2t+8, 2t+9]    a[3] = A[g + 8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][g]          b[1] = B[2t+8, 2t+9][g]
//   c[0], d[0] = C/D[g][2t]   c[1], d[1] = C/D[g][2t+1]   c[2], d[2] = C/D[g+8][2t]   c[3], d[3] = C/D[g+8][2t+1]
// So element (row r, k) of A sits in lane (r % 8) * 4 + (k % 8) / 2, register (r / 8) + 2 (k / 8),
// half k % 2; element (k, n) of B in lane n * 4 + (k % 8) / 2, register k / 8, half k % 2.
//
// ldmatrix.sync.aligned.m8n8{.x1,.x2,.x4}{,.trans}.shared.b16 r, [addr]: loads 1, 2 or 4 8x8
// matrices of 16-bit elements from shared memory. Lane L supplies the address of row L % 8 of
// matrix L / 8 (lanes 0-7 for .x1, 0-15 for .x2, all 32 for .x4; the other lanes' addresses are
// ignored). Each row is 8 elements = 16 bytes, 16-byte aligned, in shared memory. Lane L receives
// r[i] = matrix i's elements (row g, columns 2t and 2t+1); with .trans, the transposed matrix's:
// (rows 2t and 2t+1, column g), the row-2t element in the low half. Loading a row-major 16x16 A
// tile as .x4 with lane L pointing at row L % 16, column 8 * (L / 16) yields a[0..3] above; a
// k-major B tile (B[k][n] rows) loaded .trans yields b[0..1], an n-major one (rows of n) plain.
//
// cp.async.cg.shared.global [dst], [src], 16[, src_size]: copies 16 bytes from global to shared
// memory asynchronously (cache-global: through L2 only). Both addresses 16-byte aligned. With
// src_size 0 nothing is read and the 16 bytes are zero-filled. cp.async.commit_group closes the
// copies the thread issued since its last commit into a group; cp.async.wait_group N waits until
// at most the newest N of the thread's committed groups are pending. A copy's destination is
// undefined until the wait that covers it, and the wait covers only the calling thread's copies:
// other threads see them after a __syncthreads that follows their issuers' waits.
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#ifdef TILEOPS_EMULATED

// ---- The emulated instructions (cuda-emu: host C++ on one fiber per CUDA thread) ---------------

namespace tileops_mma_emu {

// The exchange collectives' ids, as the runtime names them in its messages (src/fiber.rs).
enum ExchangeOp {
    kMmaBf16 = 1,
    kMmaF16 = 2,
    kLdmatrix = 8,   // + the matrix count (1, 2 or 4), + 8 for .trans
};

// The 16-bit pattern of poisoned shared memory (the runtime fills it with 0xFF bytes).
constexpr uint16_t kPoison16 = 0xffff;
// The f32 poison the emulator's checks look for in outputs.
constexpr uint32_t kPoison32 = 0xffffffffu;

inline unsigned lane_id() {
    const unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    return linear % 32;
}

inline uint16_t half_of(uint32_t reg, unsigned which) { return static_cast<uint16_t>(reg >> (16 * which)); }

template <bool kBf16>
inline float to_float(uint16_t bits) {
    if (kBf16) {
        const uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
}

// mma.sync m16n8k16, f32 accumulation. Each lane deposits its A and B registers; the exchange
// gives every lane all 32 lanes' registers, from which it computes its own four outputs:
// D[r][n] = C[r][n] + sum over k = 0, 1, ..., 15 in that order of A[r][k] * B[k][n], each product
// exact in f32 (two 8- or 11-bit significands; bf16 products under f32's range underflow as f32
// multiplication does) and each sum rounded to nearest even. A GPU adds in its own order and
// precision: compare with tolerances. An operand holding the shared-memory poison (0xffff, a NaN)
// makes the output the f32 poison 0xffffffff, so that a read of memory no copy or store filled is
// named as such by the emulator's output checks.
template <bool kBf16>
inline void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], const float (&c)[4],
                const char* file, int line) {
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    const uint32_t* all = cuda_emu_warp_exchange(kBf16 ? kMmaBf16 : kMmaF16, mine, 6, file, line);
    const unsigned lane = lane_id();
    const unsigned g = lane / 4;
    const unsigned t = lane % 4;
    float out[4];
    for (int i = 0; i < 4; ++i) {
        const unsigned r = g + 8 * (i / 2);
        const unsigned n = 2 * t + (i % 2);
        float acc = c[i];
        bool poison = false;
        for (unsigned k = 0; k < 16; ++k) {
            const uint32_t a_reg = all[((r % 8) * 4 + (k % 8) / 2) * 6 + (r / 8) + 2 * (k / 8)];
            const uint32_t b_reg = all[(n * 4 + (k % 8) / 2) * 6 + 4 + k / 8];
            const uint16_t a_bits = half_of(a_reg, k % 2);
            const uint16_t b_bits = half_of(b_reg, k % 2);
            poison |= a_bits == kPoison16 || b_bits == kPoison16;
            acc += to_float<kBf16>(a_bits) * to_float<kBf16>(b_bits);
        }
        if (poison) std::memcpy(&acc, &kPoison32, 4);
        out[i] = acc;
    }
    for (int i = 0; i < 4; ++i) d[i] = out[i];
}

// ldmatrix: each lane that supplies a row (lane < 8 * kCount) checks its address and reads its
// row's 16 bytes before the exchange, so every read happens before any lane of the warp goes on
// (as in the one warp-wide instruction); every lane then picks its elements from the owners' rows.
template <int kCount, bool kTrans>
inline void ldmatrix(uint32_t (&r)[kCount], const void* row, const char* file, int line) {
    static_assert(kCount == 1 || kCount == 2 || kCount == 4, "ldmatrix loads 1, 2 or 4 matrices");
    const unsigned lane = lane_id();
    uint32_t mine[4] = {0, 0, 0, 0};
    if (lane < 8u * kCount) {
        if (reinterpret_cast<std::uintptr_t>(row) % 16 != 0) {
            cuda_emu_fail("misaligned ldmatrix row (rows must be 16-byte aligned)", file, line);
        }
        if (!cuda_emu_is_shared(row, 16)) {
            cuda_emu_fail("ldmatrix row outside shared memory", file, line);
        }
        const uint4 v = *static_cast<const uint4*>(row);
        mine[0] = v.x;
        mine[1] = v.y;
        mine[2] = v.z;
        mine[3] = v.w;
    }
    const uint32_t* all = cuda_emu_warp_exchange(kLdmatrix + kCount + (kTrans ? 8 : 0), mine, 4, file, line);
    const unsigned g = lane / 4;
    const unsigned t = lane % 4;
    for (int i = 0; i < kCount; ++i) {
        const uint32_t* rows = all + 4 * 8 * i;  // matrix i's 8 rows of 4 words
        if (!kTrans) {
            r[i] = rows[4 * g + t];
        } else {
            const uint32_t lo = half_of(rows[4 * (2 * t) + g / 2], g % 2);
            const uint32_t hi = half_of(rows[4 * (2 * t + 1) + g / 2], g % 2);
            r[i] = lo | (hi << 16);
        }
    }
}

// cp.async: checks the operands, reads the source now (when valid) and hands the 16 bytes to the
// runtime, which lands them at the destination later: at the thread's covering wait_group, or,
// under the random schedule, at a random switch after the group's commit, or at the thread's
// exit. Until then the destination holds the poison (0xFF bytes). Reading the source at issue is
// one of the GPU's allowed orders (it may read any time before the wait) and lets the
// instrumented build check and count the read like any other 16-byte load.
inline void cp_async(void* dst, const void* src, bool valid, const char* file, int line) {
    if (reinterpret_cast<std::uintptr_t>(dst) % 16 != 0) {
        cuda_emu_fail("misaligned cp.async destination (16-byte copies need 16-byte alignment)", file, line);
    }
    if (!cuda_emu_is_shared(dst, 16)) {
        cuda_emu_fail("cp.async destination outside shared memory", file, line);
    }
    if (reinterpret_cast<std::uintptr_t>(src) % 16 != 0) {
        cuda_emu_fail("misaligned cp.async source (16-byte copies need 16-byte alignment)", file, line);
    }
    uint4 data = make_uint4(0, 0, 0, 0);
    if (valid) data = *static_cast<const uint4*>(src);
    *static_cast<uint4*>(dst) = make_uint4(~0u, ~0u, ~0u, ~0u);
    cuda_emu_cp_async(dst, &data, file, line);
}

}  // namespace tileops_mma_emu

#define mma_m16n8k16_bf16(d, a, b, c) tileops_mma_emu::mma<true>((d), (a), (b), (c), __FILE__, __LINE__)
#define mma_m16n8k16_f16(d, a, b, c) tileops_mma_emu::mma<false>((d), (a), (b), (c), __FILE__, __LINE__)
#define ldmatrix_x1(r, p) tileops_mma_emu::ldmatrix<1, false>((r), (p), __FILE__, __LINE__)
#define ldmatrix_x2(r, p) tileops_mma_emu::ldmatrix<2, false>((r), (p), __FILE__, __LINE__)
#define ldmatrix_x4(r, p) tileops_mma_emu::ldmatrix<4, false>((r), (p), __FILE__, __LINE__)
#define ldmatrix_x1_trans(r, p) tileops_mma_emu::ldmatrix<1, true>((r), (p), __FILE__, __LINE__)
#define ldmatrix_x2_trans(r, p) tileops_mma_emu::ldmatrix<2, true>((r), (p), __FILE__, __LINE__)
#define ldmatrix_x4_trans(r, p) tileops_mma_emu::ldmatrix<4, true>((r), (p), __FILE__, __LINE__)
#define cp_async_cg_16(dst, src) tileops_mma_emu::cp_async((dst), (src), true, __FILE__, __LINE__)
#define cp_async_cg_16_zfill(dst, src, valid) \
    tileops_mma_emu::cp_async((dst), (src), static_cast<bool>(valid), __FILE__, __LINE__)
#define cp_async_commit_group() cuda_emu_cp_async_commit()
#define cp_async_wait_group(N) cuda_emu_cp_async_wait((N), __FILE__, __LINE__)

#else  // the GPU: one inline-PTX instruction each

// NVRTC has no <cstdint>; the fragment registers are 32-bit unsigned.
#if !defined(__CUDACC_RTC__)
#include <cstdint>
#else
typedef unsigned int uint32_t;
#endif

// No side effects: a pure function of its registers, which the compiler may schedule freely.
__device__ __forceinline__ void mma_m16n8k16_bf16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                  const float (&c)[4]) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}

__device__ __forceinline__ void mma_m16n8k16_f16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                                 const float (&c)[4]) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %11, %12, %13};\n"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
          "f"(c[3]));
}

// The shared-window address of a generic pointer to shared memory (32 bits suffice).
__device__ __forceinline__ unsigned tileops_smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// The "memory" clobbers keep the compiler from moving ordinary shared-memory stores and loads
// across the fragment loads and the copies, which it cannot see through.
__device__ __forceinline__ void ldmatrix_x1(uint32_t (&r)[1], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(tileops_smem_addr(smem_row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(tileops_smem_addr(smem_row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(tileops_smem_addr(smem_row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x1_trans(uint32_t (&r)[1], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
                 : "=r"(r[0])
                 : "r"(tileops_smem_addr(smem_row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(tileops_smem_addr(smem_row))
                 : "memory");
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* smem_row) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(tileops_smem_addr(smem_row))
                 : "memory");
}

__device__ __forceinline__ void cp_async_cg_16(void* smem_dst, const void* gmem_src) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(tileops_smem_addr(smem_dst)), "l"(gmem_src)
                 : "memory");
}

// src-size 0 when !valid: the source is not read and the 16 bytes become zeros.
__device__ __forceinline__ void cp_async_cg_16_zfill(void* smem_dst, const void* gmem_src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tileops_smem_addr(smem_dst)),
                 "l"(gmem_src), "r"(valid ? 16 : 0)
                 : "memory");
}

__device__ __forceinline__ void cp_async_commit_group() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// wait_group's operand is an immediate: a template argument, behind the macro of the API.
template <int N>
__device__ __forceinline__ void tileops_cp_async_wait_group() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}
#define cp_async_wait_group(N) tileops_cp_async_wait_group<(N)>()

#endif  // TILEOPS_EMULATED
