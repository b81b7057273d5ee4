// Elementwise activations y = f(x) on a contiguous tensor of n elements, computed in f32 and
// rounded once to the output dtype. Entry points per dtype (f32, f16, bf16):
//
//   relu_*       max(x, 0), NaN kept (PyTorch's relu propagates NaN; fmaxf would drop it)
//   gelu_erf_*   x * Phi(x), Phi(x) = erfc(-x / sqrt(2)) / 2: the erfc form stays accurate in
//                the negative tail, where 1 + erf(x / sqrt(2)) cancels. f32: normcdff. f16 and
//                bf16: gelu_erf_fast (one ex2, one rcp, a degree-7 polynomial), within an ulp of
//                the correctly rounded output for every f16 and bf16 input (the exhaustive test
//                in tests/it/elementwise), at about a third of normcdff's instructions
//   gelu_tanh_*  0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), evaluated as
//                x / (1 + exp(-2u)) (the same function: 1 + tanh(u) = 2 / (1 + exp(-2u)))
//   silu_*       x / (1 + exp(-x))
//   sigmoid_*    1 / (1 + exp(-x))
//   neg_*        -x (a sign flip: exact, NaN and infinities kept)
//   abs_*        |x| (the sign cleared: exact, NaN kept, -0 becomes +0, as torch.abs)
//
// f16 and bf16 outputs of gelu_tanh, silu and sigmoid take exp as ex2.approx.ftz of an FMUL and
// the division as div.full.f32 (fast_div: rcp with range scaling, 2 ulp of f32 over the full
// range, subnormal quotients and x / inf = 0 included): the same function, the same overflow
// points for every f16 and bf16 input (within an ulp of the correctly rounded output for all of
// them: the exhaustive test in tests/it/elementwise), at well under half the instructions. f32
// outputs keep expf and IEEE division, PyTorch's exact f32 results:
//
// The deep negative tail matches PyTorch's CUDA kernels, which evaluate sigmoid and silu in f32
// exactly as written here, with expf and IEEE division: where the f32 denominator 1 + expf(-x)
// overflows to inf (x < -88.7228, i.e. -x > ln(FLT_MAX)) the result is a signed zero, +0 for
// sigmoid and x * 0 for silu (-0; NaN at -inf); above that, the correctly rounded quotient, a
// subnormal for sigmoid on (-88.7228, -87.3365) and a normal number for silu. The division is
// therefore IEEE (`/`, div.rn.f32), not __fdividef: div.approx.f32 returns 0 once the divisor
// exceeds 2^126 (x < -87.3365), which would zero sigmoid's subnormals and silu's normal values
// down to -88.72 where PyTorch has them. One division per element costs nothing here (the kernel
// is memory-bound). gelu_tanh gets the same rule: a signed zero exactly where its f32 denominator
// 1 + expf(-2u) overflows (x < -10.0610); PyTorch's 0.5 x (1 + tanhf(u)) is -0 there too (and
// from about x < -5.16 on, where 1 + tanhf(u) cancels to 0; this form keeps those tiny values to
// f32 accuracy instead). The f64 reference (elementwise/reference.rs) models the same overflow.
//
// Memory-bound: a grid-stride loop over 16-byte vectors with kUnroll independent loads in flight
// per thread, then the n % V scalar tail. Launch contract (checked by the host): x and y 16-byte
// aligned (their bases: the tensor is contiguous, so every vector is aligned), any 1-D grid and
// block shape.

// The entry points, with the global accesses each is written to issue: tileops's build script
// reads these lines into `tileops::kernels`, and the compile test checks them against the PTX.
// Relu, gelu (erf and tanh forms), silu, sigmoid, neg, abs.
// @entry relu_{f32,f16,bf16}: vector loads, vector stores
// @entry gelu_erf_{f32,f16,bf16}: vector loads, vector stores
// @entry gelu_tanh_{f32,f16,bf16}: vector loads, vector stores
// @entry silu_{f32,f16,bf16}: vector loads, vector stores
// @entry sigmoid_{f32,f16,bf16}: vector loads, vector stores
// @entry neg_{f32,f16,bf16}: vector loads, vector stores
// @entry abs_{f32,f16,bf16}: vector loads, vector stores

#include "tileops_common.cuh"

using namespace tileops;

enum Act { kRelu = 0, kGeluErf = 1, kGeluTanh = 2, kSilu = 3, kSigmoid = 4, kNeg = 5, kAbs = 6 };

// gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt(2)) / 2, for outputs rounded to f16 or bf16. With a =
// |x| / sqrt(2) and t = 1 / (1 + a / 2), erfc(a) = t exp(-a^2 + P(t)) with P a degree-7 minimax fit
// of ln(erfc(a) / t) + a^2 on a in [0, 10.5] (relative error of erfc < 7.4e-7 with its f32
// coefficients; past a = 10.5, |x| > 14.8, Phi(-|x|) is below every f16 and bf16 output), and
// erfc(-a) = 2 - erfc(a). f32 rounding of x^2 and of the exponent adds to that: a dense sweep of
// this f32 evaluation against f64 erfc gives a relative error of Phi(-|x|) under 1.7e-6 for |x| <=
// 4 and under 8.6e-6 (2^-16.8, the exponent's rounding near -100) up to |x| = 14: far under half an
// ulp of bf16 (2^-9) and f16 (2^-12). Evaluated as t' = t 2^-14 (the FFMA that forms 1 + a / 2
// scales it for free; P's coefficients are scaled by 2^14k, and by log2 e for ex2) and Phi(-|x|) =
// t' 2^((-a^2 + P(t)) log2 e + 13): the exponent raised by 13 keeps ex2.approx.ftz from flushing a
// Phi that x Phi brings back to a nonzero bf16 (x near -13.5, Phi ~ 2^-138, where 2^(... + 13) ~
// 2^-123). One rcp.approx.ftz (its flush only hits 1 + a / 2 > 2^126, where exp is 0 anyway), one
// ex2. Infinities and NaN: a = inf gives t' = 0 and exp = 0, so Phi is 0 (x = -inf: x Phi = NaN, as
// PyTorch's -inf * 0) or 1 (+inf); NaN stays NaN.
__device__ __forceinline__ float gelu_erf_fast(float x) {
    constexpr float kT = 0x1p-14f;  // t' = t kT
    constexpr float kHalfA = 0.35355339059327378f;  // a / 2 = |x| kHalfA
    // P's coefficients c_k, as c_k 2^14k log2 e (c_0 log2 e + 13 for k = 0).
    constexpr float p0 = -1.2655092477798462f * kLog2e + 13.0f;
    constexpr float p1 = 0.9991161227226257f * kLog2e * 0x1p14f;
    constexpr float p2 = 0.3905179798603058f * kLog2e * 0x1p28f;
    constexpr float p3 = -0.028129884973168373f * kLog2e * 0x1p42f;
    constexpr float p4 = 0.32797348499298096f * kLog2e * 0x1p56f;
    constexpr float p5 = -0.9773831963539124f * kLog2e * 0x1p70f;
    constexpr float p6 = 0.7379865646362305f * kLog2e * 0x1p84f;
    constexpr float p7 = -0.18457256257534027f * kLog2e * 0x1p98f;
    const float t = rcp_ftz(fmaf(fabsf(x), kHalfA / kT, 1.0f / kT));
    float p = fmaf(p7, t, p6);
    p = fmaf(p, t, p5);
    p = fmaf(p, t, p4);
    p = fmaf(p, t, p3);
    p = fmaf(p, t, p2);
    p = fmaf(p, t, p1);
    p = fmaf(p, t, p0);
    // -a^2 log2 e = x (-log2 e / 2) x.
    const float h = t * ex2_ftz(fmaf(x * (-0.5f * kLog2e), x, p));
    return x * (x > 0.0f ? 1.0f - h : h);
}

// The activation of one value; `narrow`: the output is f16 or bf16 (see gelu_erf_fast and the
// top).
template <int A, bool narrow>
__device__ __forceinline__ float act(float v) {
    if (A == kRelu) {
        return v < 0.0f ? 0.0f : v;
    } else if (A == kGeluErf) {
        return narrow ? gelu_erf_fast(v) : v * normcdff(v);
    } else if (A == kGeluTanh) {
        const float u = 0.7978845608028654f * fmaf(0.044715f * v, v * v, v);
        // v / (1 + exp(-2u)), IEEE division (see the top); -inf gives -inf / inf = NaN, as the
        // tanh form does (-inf * 0).
        return narrow ? fast_div(v, one_plus_exp_fast(-2.0f * u)) : v / (1.0f + expf(-2.0f * u));
    } else if (A == kNeg) {
        return -v;
    } else if (A == kAbs) {
        return fabsf(v);
    } else if (A == kSilu) {
        // PyTorch's x / (1 + exp(-x)): -0 once the denominator overflows, NaN at -inf.
        return narrow ? fast_div(v, one_plus_exp_fast(-v)) : v / (1.0f + expf(-v));
    } else {
        // PyTorch's 1 / (1 + exp(-x)): +0 once the denominator overflows.
        return narrow ? fast_div(1.0f, one_plus_exp_fast(-v)) : 1.0f / (1.0f + expf(-v));
    }
}

// Independent 16-byte loads per thread per iteration: 256 threads x 4 x 16 B = 16 KiB in flight
// per block.
constexpr int kUnroll = 4;

template <typename T, int A>
__device__ __forceinline__ void unary(const T* __restrict__ x, T* __restrict__ y, long long n) {
    using E = Elem<T>;
    constexpr int V = E::V;
    const long long nv = n / V;
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    uint4* yv = reinterpret_cast<uint4*>(y);
    const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;

    // Each iteration: kUnroll vectors a grid stride apart, all loads issued (predicated) before
    // the first use, so a partial last round still has its loads in flight together.
    for (long long i = first; i < nv; i += kUnroll * stride) {
        uint4 r[kUnroll];
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            if (i + k * stride < nv) r[k] = load16(xv + i + k * stride);
        }
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) {
            if (i + k * stride < nv) {
                float f[V];
                E::unpack(r[k], f);
#pragma unroll
                for (int j = 0; j < V; ++j) f[j] = act<A, (V > 4)>(f[j]);
                store16(yv + i + k * stride, E::pack(f));
            }
        }
    }
    // The tail: fewer than V elements after the last whole vector.
    const long long t = nv * V + first;
    if (t < n) E::store(y + t, act<A, (V > 4)>(E::load(x + t)));
}

#define TILEOPS_ACT_ENTRY(NAME, A, T)                                                                       \
    extern "C" __global__ void __launch_bounds__(256) NAME(const T* __restrict__ x, T* __restrict__ y, long long n) { \
        unary<T, A>(x, y, n);                                                                                   \
    }

#define TILEOPS_ACT_ENTRIES(T, SUFFIX)                 \
    TILEOPS_ACT_ENTRY(relu_##SUFFIX, kRelu, T)         \
    TILEOPS_ACT_ENTRY(gelu_erf_##SUFFIX, kGeluErf, T)  \
    TILEOPS_ACT_ENTRY(gelu_tanh_##SUFFIX, kGeluTanh, T) \
    TILEOPS_ACT_ENTRY(silu_##SUFFIX, kSilu, T)         \
    TILEOPS_ACT_ENTRY(sigmoid_##SUFFIX, kSigmoid, T)   \
    TILEOPS_ACT_ENTRY(neg_##SUFFIX, kNeg, T)           \
    TILEOPS_ACT_ENTRY(abs_##SUFFIX, kAbs, T)

TILEOPS_ACT_ENTRIES(float, f32)
TILEOPS_ACT_ENTRIES(__half, f16)
TILEOPS_ACT_ENTRIES(__nv_bfloat16, bf16)
