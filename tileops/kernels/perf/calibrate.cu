// Microbenchmarks of `cargo run --release --example calibrate` (tileops::perf::calibrate_gpu):
// the rates a profile's calibrations are fractions of. Not ops.
//
// HBM: four mixes over 16-byte (float4) elements, grid-stride loops, launched with block sizes
// 128/256/512 over a working set of at least 2 GB (far beyond the L2). Each mix moves a known
// number of bytes per element (HbmMix::bytes_moved); the profile keeps the envelope, the best mix.
// CUDA cores: register-only FMA chains, ILP independent chains per thread.
// Tensor cores as mma.sync drives them: register-only chains of mma.sync m16n8k16 (bf16 in, f32
// accumulate; SASS HMMA.16816), the roof the kernel ledger prices HMMA instructions at.
// fill_uniform_*: pseudo-random GEMM operands in [-1, 1). Tensor cores draw less power on zeros,
// so a sustained rate measured on zeroed matrices would overstate the power-capped ceiling.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// The calibration microbenchmarks (`tileops::perf::calibrate_gpu`).
// @entry hbm_copy: vector loads, vector stores
// @entry hbm_triad: vector loads, vector stores
// @entry hbm_read: vector loads
// @entry hbm_write: vector stores
// @entry fma_chain_ilp1: scalar
// @entry fma_chain_ilp2: scalar
// @entry fma_chain_ilp4: scalar
// @entry fma_chain_ilp8: scalar
// @entry fma_chain_ilp16: scalar
// @entry mma_sync_bf16: scalar
// @entry fill_uniform_f32: scalar
// @entry fill_uniform_f16: scalar
// @entry fill_uniform_bf16: scalar

#include <cuda_fp16.h>
#include <cuda_bf16.h>

#include "tileops_mma.cuh"

#define TILEOPS_GRID_STRIDE(i, n)                                                                 \
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                \
         i += (long long)gridDim.x * blockDim.x)

// The loops that read take 4 elements per thread per step, so each thread has 4 independent
// 16-byte loads in flight: a GPU issues in order, and one load per step would stall at every use.
// b[i] = a[i]: one read and one write per element.
extern "C" __global__ void hbm_copy(const float4* __restrict__ a, float4* __restrict__ b,
                                    long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const float4 v0 = a[i], v1 = a[i + stride], v2 = a[i + 2 * stride], v3 = a[i + 3 * stride];
        b[i] = v0;
        b[i + stride] = v1;
        b[i + 2 * stride] = v2;
        b[i + 3 * stride] = v3;
    }
    for (; i < n; i += stride) {
        b[i] = a[i];
    }
}

__device__ __forceinline__ float4 tileops_triad(const float4 x, const float4 y, const float s) {
    return make_float4(x.x + s * y.x, x.y + s * y.y, x.z + s * y.z, x.w + s * y.w);
}

// a[i] = b[i] + s * c[i]: two reads and one write per element (STREAM Triad).
extern "C" __global__ void hbm_triad(float4* __restrict__ a, const float4* __restrict__ b,
                                     const float4* __restrict__ c, float s, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const float4 x0 = b[i], x1 = b[i + stride], x2 = b[i + 2 * stride], x3 = b[i + 3 * stride];
        const float4 y0 = c[i], y1 = c[i + stride], y2 = c[i + 2 * stride], y3 = c[i + 3 * stride];
        a[i] = tileops_triad(x0, y0, s);
        a[i + stride] = tileops_triad(x1, y1, s);
        a[i + 2 * stride] = tileops_triad(x2, y2, s);
        a[i + 3 * stride] = tileops_triad(x3, y3, s);
    }
    for (; i < n; i += stride) {
        a[i] = tileops_triad(b[i], c[i], s);
    }
}

__device__ __forceinline__ float tileops_sum4(const float4 v) { return (v.x + v.y) + (v.z + v.w); }

// A reduction over a: one read per element. The sum is stored only when it equals `never` (the
// harness passes a value the data cannot sum to), so the loads are live but nothing is written.
extern "C" __global__ void hbm_read(const float4* __restrict__ a, float* __restrict__ sink,
                                    float never, long long n) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float acc = 0.0f;
    for (; i + 3 * stride < n; i += 4 * stride) {
        const float4 v0 = a[i], v1 = a[i + stride], v2 = a[i + 2 * stride], v3 = a[i + 3 * stride];
        acc += (tileops_sum4(v0) + tileops_sum4(v1)) + (tileops_sum4(v2) + tileops_sum4(v3));
    }
    for (; i < n; i += stride) {
        acc += tileops_sum4(a[i]);
    }
    if (acc == never) {
        sink[threadIdx.x] = acc;
    }
}

// a[i] = s: one write per element.
extern "C" __global__ void hbm_write(float4* __restrict__ a, float s, long long n) {
    const float4 v = make_float4(s, s, s, s);
    TILEOPS_GRID_STRIDE(i, n) { a[i] = v; }
}

// ILP independent chains x = fma(x, a, b), `iters` steps each: 2 * ILP * iters FLOP per thread,
// all in registers. One store per thread keeps the chains live.
#define TILEOPS_FMA_CHAIN(ILP, SUFFIX)                                                            \
    extern "C" __global__ void fma_chain_##SUFFIX(float* __restrict__ out, int iters, float a,    \
                                                  float b) {                                      \
        float x[ILP];                                                                             \
        _Pragma("unroll") for (int j = 0; j < ILP; ++j) {                                         \
            x[j] = (float)threadIdx.x * 1.0e-3f + (float)j;                                       \
        }                                                                                         \
        _Pragma("unroll 16") for (int i = 0; i < iters; ++i) {                                    \
            _Pragma("unroll") for (int j = 0; j < ILP; ++j) { x[j] = fmaf(x[j], a, b); }          \
        }                                                                                         \
        float s = 0.0f;                                                                           \
        _Pragma("unroll") for (int j = 0; j < ILP; ++j) { s += x[j]; }                            \
        out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = s;                                \
    }

TILEOPS_FMA_CHAIN(1, ilp1)
TILEOPS_FMA_CHAIN(2, ilp2)
TILEOPS_FMA_CHAIN(4, ilp4)
TILEOPS_FMA_CHAIN(8, ilp8)
TILEOPS_FMA_CHAIN(16, ilp16)

// kMmaChains independent accumulators per warp, each `iters` steps of D = A * B + D with every
// element of A equal to a and of B to b (bf16): 2 * 16 * 8 * 16 FLOP per mma, kMmaChains * iters
// mmas per warp, all in registers, enough independent mmas in flight to keep the tensor pipe
// full. Each thread stores the sum of its accumulators, which keeps them live:
// kMmaChains * 4 * (iters * 16 * a * b) when every product is exact (the host twin's figure).
constexpr int kMmaChains = 8;

extern "C" __global__ void mma_sync_bf16(float* __restrict__ out, int iters, float a, float b) {
    const __nv_bfloat162 a2 = __floats2bfloat162_rn(a, a);
    const __nv_bfloat162 b2 = __floats2bfloat162_rn(b, b);
    const uint32_t ra = *reinterpret_cast<const uint32_t*>(&a2);
    const uint32_t rb = *reinterpret_cast<const uint32_t*>(&b2);
    const uint32_t fa[4] = {ra, ra, ra, ra};
    const uint32_t fb[2] = {rb, rb};
    float acc[kMmaChains][4];
#pragma unroll
    for (int c = 0; c < kMmaChains; ++c) {
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[c][j] = 0.0f;
    }
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < kMmaChains; ++c) mma_m16n8k16_bf16(acc[c], fa, fb, acc[c]);
    }
    float s = 0.0f;
#pragma unroll
    for (int c = 0; c < kMmaChains; ++c) {
#pragma unroll
        for (int j = 0; j < 4; ++j) s += acc[c][j];
    }
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// A hash of (i, seed) to [-1, 1): splitmix64's finaliser, 24 bits of mantissa.
__device__ __forceinline__ float tileops_uniform(unsigned long long i, unsigned int seed) {
    unsigned long long z = i + 0x9E3779B97F4A7C15ull * ((unsigned long long)seed + 1ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)(z >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

#define TILEOPS_FILL_UNIFORM(T, SUFFIX, CONVERT)                                                  \
    extern "C" __global__ void fill_uniform_##SUFFIX(T* __restrict__ p, long long n,              \
                                                     unsigned int seed) {                         \
        TILEOPS_GRID_STRIDE(i, n) { p[i] = CONVERT(tileops_uniform((unsigned long long)i, seed)); } \
    }

TILEOPS_FILL_UNIFORM(float, f32, (float))
TILEOPS_FILL_UNIFORM(__half, f16, __float2half)
TILEOPS_FILL_UNIFORM(__nv_bfloat16, bf16, __float2bfloat16)
