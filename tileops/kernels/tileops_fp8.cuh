// fp8 e4m3 helpers shared by fp8_quant.cu and qk_norm_rope_fp8.cu. Passed to NVRTC as the header
// "tileops_fp8.cuh" (never compiled on its own).
//
// The conversion is CUDA's own saturating one, __nv_cvt_float2_to_fp8x2(.., __NV_SATFINITE,
// __NV_E4M3): on sm_89 and newer one cvt.rn.satfinite.e4m3x2.f32 per two values (round to nearest
// even, |v| > 448 and +-inf to +-448, NaN to 0x7F); on older GPUs the header's software path with
// the same results. The CPU reference (ops/reference_rope_fp8.rs, fp8_e4m3_saturate) is a port of
// that software path, so both sides produce the same codes.
#pragma once

#include <cuda_fp8.h>

namespace tileops {

constexpr float kFp8Max = 448.0f;
// The smallest scale, 1 / (448 * 512) (vLLM's floor): all-zero or tiny groups keep a finite
// reciprocal. Must equal reference_rope_fp8::MIN_SCALE.
constexpr float kFp8MinScale = 1.0f / (448.0f * 512.0f);

// The max of a group's magnitudes propagates NaN, as torch.amax does (fmaxf would drop it): a NaN
// anywhere in a group makes its amax NaN, its scale NaN and every code of the group NaN (0x7F),
// as PyTorch's `amax -> clamp -> x / scale -> float8_e4m3fn` gives. Must match the CPU
// reference's nan_max (ops/reference_rope_fp8.rs).
__device__ __forceinline__ float nan_max(float a, float b) { return (a > b || a != a) ? a : b; }

// The scale of a group whose largest magnitude is amax, and its reciprocal: two correctly rounded
// f32 divisions (NVRTC's default --prec-div=true), as the CPU reference computes them. The floor
// keeps a NaN amax NaN (torch.clamp propagates NaN; fmaxf would turn it into the floor).
__device__ __forceinline__ float fp8_scale(float amax) { return nan_max(amax / kFp8Max, kFp8MinScale); }

// Two e4m3 codes in the low 16 bits: a in the low byte.
__device__ __forceinline__ unsigned fp8x2(float a, float b) {
    return static_cast<unsigned>(__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3));
}

// Four e4m3 codes, f[0] in the low byte (memory order on a little-endian GPU).
__device__ __forceinline__ unsigned fp8x4(float a, float b, float c, float d) {
    return fp8x2(a, b) | (fp8x2(c, d) << 16);
}

__device__ __forceinline__ unsigned char fp8x1(float a) {
    return static_cast<unsigned char>(__nv_cvt_float_to_fp8(a, __NV_SATFINITE, __NV_E4M3));
}

// Max over the `width` lanes (a power of two, at most 32) of an aligned lane segment, NaN
// propagating (nan_max); every lane of the warp must call it.
__device__ __forceinline__ float segment_max(float v, int width) {
    for (int o = width >> 1; o > 0; o >>= 1) v = nan_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Max of the magnitudes v >= 0 (or NaN) over the blockDim.x threads of each row of the block
// (blockDim.x a multiple of 32; `scratch` 32 floats per row), NaN propagating: row_reduce<true>
// of tileops_common.cuh with nan_max. Every thread of the block must call it.
__device__ __forceinline__ float block_amax(float v, float* scratch) {
    v = segment_max(v, 32);
    const int warps = blockDim.x >> 5;
    if (warps == 1) return v;
    const int lane = threadIdx.x & 31;
    float* s = scratch + threadIdx.y * 32;
    if (lane == 0) s[threadIdx.x >> 5] = v;
    __syncthreads();
    // Magnitudes are >= 0, so 0 is the identity for the lanes past the last warp.
    v = lane < warps ? s[lane] : 0.0f;
    v = segment_max(v, 32);
    // The scratch may be reused by the next reduction: no warp may write it before all have read.
    __syncthreads();
    return v;
}

// Sum over the `width` lanes (a power of two, at most 32) of an aligned lane segment; every lane of
// the warp must call it.
__device__ __forceinline__ float segment_sum(float v, int width) {
    for (int o = width >> 1; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

}  // namespace tileops
