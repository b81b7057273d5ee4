// cuda_emu.h: what a CUDA kernel source needs to compile as host C++ and run on cuda-emu's fibers.
//
// build.rs passes it with `-include` before every kernel file, so the kernel sources stay exactly
// the ones NVRTC compiles. It provides the CUDA built-ins (threadIdx, blockIdx, blockDim, gridDim,
// warpSize), __syncthreads, the __shfl_*_sync family with PTX shfl.sync semantics, __syncwarp,
// __ballot_sync, __ldg, static and dynamic __shared__ memory, the fast-math intrinsics with
// their PTX semantics, and the runtime side of tileops_mma.cuh's tensor-core instructions (a warp
// exchange collective, the shared-memory test, the deferred cp.async copies). f16, bf16 and fp8 come from NVIDIA's own headers (their host code paths).
//
// Every synchronising call goes to the runtime (src/fiber.rs), which switches fibers there; the
// call sites pass __FILE__ and __LINE__ so that a launch failure names the source line.
#pragma once

#define TILEOPS_EMULATED 1

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#ifdef CUDA_EMU_SCAN
// build.rs's entry scan: keep the tokens it looks for in the preprocessed text.
#define __global__ __global__
#define __launch_bounds__(...) __launch_bounds__(__VA_ARGS__)
#endif

// Static __shared__ arrays. Normal build: plain statics in one section, which the runtime fills
// with 0xFF (a NaN for every float type) before each block, so a read of unwritten shared memory
// shows. Launches are serialised, so one copy serves every block. AddressSanitizer build: plain
// statics, which get redzones (the poisoning is the normal build's job), unless it also counts
// traffic (CUDA_EMU_TRAFFIC, as it does): the traffic ledger tells shared accesses by the
// section's bounds. Then GCC gives a redzone only to the arrays of templates and inline
// functions (vague linkage: build.rs moves them into the section afterwards), not to those
// declared in the section.
// host_defines.h keeps a __shared__ that is already defined, so this must come first.
#if defined(CUDA_EMU_ASAN) && !defined(CUDA_EMU_TRAFFIC)
#define __shared__ static
#else
#define __shared__ static __attribute__((section("cuda_emu_shared")))
#endif
// The launch bounds are read from the source by build.rs and checked at every launch.
#ifndef CUDA_EMU_SCAN
#define __launch_bounds__(...)
#endif

#include <vector_types.h>
#include <vector_functions.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

// ---- The runtime's side (src/fiber.rs, src/shim.rs) -------------------------------------------

struct CudaEmuThread {
    uint3 thread_idx;
    uint3 block_idx;
    dim3 block_dim;
    dim3 grid_dim;
};

extern "C" {
// The CUDA thread whose fiber is running; the scheduler sets it at every switch.
extern const CudaEmuThread* cuda_emu_current;
void cuda_emu_syncthreads(const char* file, int line);
void cuda_emu_syncwarp(unsigned mask, const char* file, int line);
unsigned cuda_emu_shfl(int mode, unsigned mask, unsigned value, int b, int c, int width, const char* file,
                       int line);
unsigned cuda_emu_ballot(unsigned mask, int predicate, const char* file, int line);
// A preemption point at a read-only load (the random schedule may switch fibers there).
void cuda_emu_load_point(const char* file, int line);
void* cuda_emu_dynamic_shared(void);
// The tensor-core instructions' runtime side (tileops_mma.cuh's emulated path). A warp exchange:
// every lane of the warp deposits `count` words (at most 8); each gets the address of all 32
// lanes' words, lane-major, readable until its next synchronising call.
const uint32_t* cuda_emu_warp_exchange(int op, const uint32_t* words, int count, const char* file, int line);
// Whether `bytes` bytes at `p` lie in shared memory (static or the launch's dynamic buffer).
int cuda_emu_is_shared(const void* p, unsigned long bytes);
// cp.async: `data16` (the source's 16 bytes, or zeros) lands at `dst` at the covering
// wait_group (or earlier); commit_group and wait_group of the calling thread.
void cuda_emu_cp_async(void* dst, const void* data16, const char* file, int line);
void cuda_emu_cp_async_commit(void);
void cuda_emu_cp_async_wait(int newest_pending, const char* file, int line);
// Fails the launch with a message (a kernel-visible contract violation the shim detects).
[[noreturn]] void cuda_emu_fail(const char* what, const char* file, int line);
}

#define threadIdx (cuda_emu_current->thread_idx)
#define blockIdx (cuda_emu_current->block_idx)
#define blockDim (cuda_emu_current->block_dim)
#define gridDim (cuda_emu_current->grid_dim)
#define warpSize 32

namespace cuda_emu {

// PTX shfl.sync modes, in the runtime's numbering.
enum ShflMode { kIdx = 0, kUp = 1, kDown = 2, kBfly = 3 };

// A shuffle of any 1-, 2-, 4- or 8-byte value: 8-byte values as two 32-bit shuffles, as CUDA's
// own overloads do.
template <typename T>
inline T shfl(int mode, unsigned mask, T var, int b, int width, const char* file, int line) {
    static_assert(std::is_trivially_copyable<T>::value, "shuffled values must be trivially copyable");
    static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
    // CUDA's c operand: the segment mask in bits 12:8, the clamp in bits 4:0 (0 for shfl.up).
    const int c = ((32 - width) << 8) | (mode == kUp ? 0 : 0x1f);
    unsigned words[2] = {0, 0};
    std::memcpy(words, &var, sizeof(T));
    words[0] = cuda_emu_shfl(mode, mask, words[0], b, c, width, file, line);
    if (sizeof(T) > 4) words[1] = cuda_emu_shfl(mode, mask, words[1], b, c, width, file, line);
    T out;
    std::memcpy(&out, words, sizeof(T));
    return out;
}

// __ldg: a read-only load, and a point where the random schedule may preempt.
template <typename T>
inline T ldg(const T* p, const char* file, int line) {
    // ld.global.nc needs natural alignment; checked here so the message names the caller's line.
    if (reinterpret_cast<std::uintptr_t>(p) % alignof(T) != 0) {
        cuda_emu_fail(sizeof(T) == 16 ? "misaligned 16-byte __ldg" : "misaligned __ldg", file, line);
    }
    cuda_emu_load_point(file, line);
    return *p;
}

}  // namespace cuda_emu

#define __syncthreads() cuda_emu_syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) cuda_emu_syncwarp(cuda_emu_mask_or_full(__VA_ARGS__), __FILE__, __LINE__)
inline unsigned cuda_emu_mask_or_full(unsigned mask = 0xffffffffu) { return mask; }
#define __ballot_sync(mask, pred) cuda_emu_ballot((mask), (pred) ? 1 : 0, __FILE__, __LINE__)
#define __shfl_sync(mask, var, lane, ...) \
    cuda_emu_shfl_call(cuda_emu::kIdx, (mask), (var), (lane), __FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_up_sync(mask, var, delta, ...) \
    cuda_emu_shfl_call(cuda_emu::kUp, (mask), (var), (delta), __FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_down_sync(mask, var, delta, ...) \
    cuda_emu_shfl_call(cuda_emu::kDown, (mask), (var), (delta), __FILE__, __LINE__, ##__VA_ARGS__)
#define __shfl_xor_sync(mask, var, lane_mask, ...) \
    cuda_emu_shfl_call(cuda_emu::kBfly, (mask), (var), (lane_mask), __FILE__, __LINE__, ##__VA_ARGS__)
template <typename T>
inline T cuda_emu_shfl_call(int mode, unsigned mask, T var, int b, const char* file, int line, int width = 32) {
    return cuda_emu::shfl(mode, mask, var, b, width, file, line);
}
#define __ldg(p) cuda_emu::ldg((p), __FILE__, __LINE__)

// ---- Fast-math intrinsics with their PTX semantics ---------------------------------------------

// div.approx.f32 computes a * (1 / b), and 1 / b flushes to zero for |b| > 2^126: so 1 / inf is 0
// (and inf / inf NaN), where IEEE division would give a subnormal. Inside that range the result
// is the correctly rounded quotient: the GPU's is within 2 ulp of it (compare with tolerances).
inline float __fdividef(float a, float b) {
    if (std::fabs(b) > 0x1p126f) return a * std::copysign(0.0f, b);
    return a / b;
}
inline float __expf(float x) { return std::exp(x); }
inline float __logf(float x) { return std::log(x); }
inline float __sinf(float x) { return std::sin(x); }
inline float __cosf(float x) { return std::cos(x); }
inline float __powf(float a, float b) { return std::pow(a, b); }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float __saturatef(float x) { return x > 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float normcdff(float x) { return 0.5f * std::erfc(-x * 0.70710678118654752f); }
inline float exp10f(float x) { return std::pow(10.0f, x); }
inline void sincosf(float x, float* s, float* c) {
    *s = std::sin(x);
    *c = std::cos(x);
}
inline float __int_as_float(int i) {
    float f;
    std::memcpy(&f, &i, 4);
    return f;
}
inline float __uint_as_float(unsigned u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
inline int __float_as_int(float f) {
    int i;
    std::memcpy(&i, &f, 4);
    return i;
}
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __ffs(int x) { return __builtin_ffs(x); }

// CUDA's min/max overloads for device code (host C++ has only std::min/std::max).
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }

// expf, sqrtf, fmaf & co.: the global ones of <math.h> (through <cmath>), as in CUDA device code.
