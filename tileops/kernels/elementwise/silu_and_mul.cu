// SwiGLU gate: x is rows of [gate | up], each half n elements; y[r, c] = silu(gate[c]) * up[c],
// computed in f32 and rounded once. Entry points per dtype (f32, f16, bf16):
//
//   silu_and_mul_vec_*     n a multiple of the 16-byte vector width V: every gate, up and output
//                          row starts 16-byte aligned, so all three are read and written as whole
//                          vectors, kUnroll gate/up pairs in flight per thread (a block covers
//                          kUnroll * blockDim.x consecutive vectors of a row).
//   silu_and_mul_scalar_*  any n: one element per thread and iteration.
//
// Both: blockIdx.x/threadIdx.x walk the columns of a row (a grid-stride loop), blockIdx.y walks
// the rows (a grid-stride loop over gridDim.y). Launch contract (checked by the host): x and y
// 16-byte aligned; 1-D blocks.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// @entry silu_and_mul_vec_{f32,f16,bf16}: vector loads, vector stores
//   One element per thread: for halves that are not a whole number of 16-byte vectors.
// @entry silu_and_mul_scalar_{f32,f16,bf16}: scalar

#include "tileops_common.cuh"

using namespace tileops;

// silu(g) * u with silu(g) = g / (1 + exp(-g)) as PyTorch's CUDA silu evaluates it in f32, the
// product in f32 and rounded once to the output dtype.
//
// f32 outputs: expf and IEEE division (not __fdividef, whose div.approx.f32 returns 0 once the
// divisor exceeds 2^126, g < -87.3365, where silu(g) is still a normal f32 number), PyTorch's
// exact f32 results. Where the denominator overflows to inf (g < -88.7228) silu(g) is -0, so the
// product is a signed zero; g = -inf gives NaN, as the formula does. The f64 reference
// (elementwise/reference) models the same overflow.
//
// f16 and bf16 outputs (`narrow`): exp as ex2.approx.ftz of an FMUL and the division as
// div.full.f32, as activation.cu's 16-bit silu: the same function with the same overflow points
// for every f16 and bf16 gate (their spacing near -88.72 is 1/16 and 1/2, far wider than where
// the rounding of -g log2 e could move ex2's overflow), a relative error of a few f32 ulps
// (~2^-21) before the product, far under half an ulp of f16 (2^-12) and bf16 (2^-9): within an
// ulp of the correctly rounded output for every gate (the exhaustive test in tests/it/elementwise),
// at well under half the instructions of IEEE division.
template <bool narrow>
__device__ __forceinline__ float swiglu(float g, float u) {
    return (narrow ? fast_div(g, one_plus_exp_fast(-g)) : g / (1.0f + expf(-g))) * u;
}

constexpr int kUnroll = 4;

template <typename T>
__device__ __forceinline__ void silu_and_mul_vec(const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {
    using E = Elem<T>;
    constexpr int V = E::V;
    const int nv = n / V;
    // A block covers kUnroll * blockDim.x consecutive vectors of a row; all its loads are issued
    // (predicated) before the first use.
    const int chunk = kUnroll * blockDim.x;
    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const uint4* gv = reinterpret_cast<const uint4*>(x + row * 2 * static_cast<long long>(n));
        const uint4* uv = gv + nv;
        uint4* yv = reinterpret_cast<uint4*>(y + row * static_cast<long long>(n));
        for (int c0 = blockIdx.x * chunk + threadIdx.x; c0 < nv; c0 += gridDim.x * chunk) {
            uint4 g[kUnroll];
            uint4 u[kUnroll];
#pragma unroll
            for (int k = 0; k < kUnroll; ++k) {
                const int c = c0 + k * blockDim.x;
                if (c < nv) {
                    g[k] = load16(gv + c);
                    u[k] = load16(uv + c);
                }
            }
#pragma unroll
            for (int k = 0; k < kUnroll; ++k) {
                const int c = c0 + k * blockDim.x;
                if (c < nv) {
                    float gf[V];
                    float uf[V];
                    E::unpack(g[k], gf);
                    E::unpack(u[k], uf);
#pragma unroll
                    for (int j = 0; j < V; ++j) gf[j] = swiglu<(V > 4)>(gf[j], uf[j]);
                    store16(yv + c, E::pack(gf));
                }
            }
        }
    }
}

template <typename T>
__device__ __forceinline__ void silu_and_mul_scalar(const T* __restrict__ x, T* __restrict__ y, long long rows,
                                                    int n) {
    using E = Elem<T>;
    const int step = gridDim.x * blockDim.x;
    for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
        const T* g = x + row * 2 * static_cast<long long>(n);
        T* yr = y + row * static_cast<long long>(n);
        for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < n; c += step) {
            E::store(yr + c, swiglu<(E::V > 4)>(E::load(g + c), E::load(g + n + c)));
        }
    }
}

#define TILEOPS_SILU_AND_MUL_ENTRIES(T, SUFFIX)                                                                  \
    extern "C" __global__ void __launch_bounds__(256) silu_and_mul_vec_##SUFFIX(                                \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                     \
        silu_and_mul_vec<T>(x, y, rows, n);                                                                      \
    }                                                                                                            \
    extern "C" __global__ void __launch_bounds__(256) silu_and_mul_scalar_##SUFFIX(                             \
        const T* __restrict__ x, T* __restrict__ y, long long rows, int n) {                                     \
        silu_and_mul_scalar<T>(x, y, rows, n);                                                                   \
    }

TILEOPS_SILU_AND_MUL_ENTRIES(float, f32)
TILEOPS_SILU_AND_MUL_ENTRIES(__half, f16)
TILEOPS_SILU_AND_MUL_ENTRIES(__nv_bfloat16, bf16)
