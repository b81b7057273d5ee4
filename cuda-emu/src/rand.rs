//! The cuRAND host API that candle's CUDA device links (`-lcurand`): a generator per handle,
//! seeded, bound to a stream, filling device memory with uniform or normal values.
//!
//! The values come from the emulator's own seeded generator (fastrand's wyrand), not from
//! cuRAND's XORWOW/Philox sequences: a program sees the same distributions and the same rules
//! (uniform values in `(0, 1]`; normal values only in even counts, as cuRAND's pseudo-random
//! generators require), and the same seed gives the same values from run to run, but not the
//! values a GPU would give. Nothing in tileops draws random numbers on the device; candle creates
//! a generator for every CUDA device, which is why the emulator needs one.

use std::ffi::c_void;

use crate::memory;

/// cuRAND's generator handle (curand.h's `curandGenerator_t`): a pointer to an opaque struct.
///
/// This module's types are declared here, from curand.h, rather than taken from cudarc's `curand`
/// feature: that feature, enabled by this crate, was unified into tileops's cudarc by every cargo
/// command that selects the whole workspace and left out by those that select tileops alone, so
/// tileops and everything above it were built twice in each profile.
#[allow(non_camel_case_types)]
pub(crate) type curandGenerator_t = *mut curandGenerator_st;

/// What a [`curandGenerator_t`] points to; only ever a pointer here.
#[allow(non_camel_case_types)]
#[repr(C)]
pub(crate) struct curandGenerator_st {
    _opaque: [u8; 0],
}

/// cuRAND's status codes (curand.h's `curandStatus_t`), the values of the header.
#[allow(non_camel_case_types, dead_code)]
#[repr(u32)]
#[derive(Debug, Copy, Clone, PartialEq, Eq)]
pub(crate) enum curandStatus {
    CURAND_STATUS_SUCCESS = 0,
    CURAND_STATUS_VERSION_MISMATCH = 100,
    CURAND_STATUS_NOT_INITIALIZED = 101,
    CURAND_STATUS_ALLOCATION_FAILED = 102,
    CURAND_STATUS_TYPE_ERROR = 103,
    CURAND_STATUS_OUT_OF_RANGE = 104,
    CURAND_STATUS_LENGTH_NOT_MULTIPLE = 105,
    CURAND_STATUS_DOUBLE_PRECISION_REQUIRED = 106,
    CURAND_STATUS_LAUNCH_FAILURE = 201,
    CURAND_STATUS_PREEXISTING_FAILURE = 202,
    CURAND_STATUS_INITIALIZATION_FAILED = 203,
    CURAND_STATUS_ARCH_MISMATCH = 204,
    CURAND_STATUS_INTERNAL_ERROR = 999,
}

/// A generator: its seed and the draws made since it was seeded.
struct Generator {
    tag: u64,
    rng: fastrand::Rng,
    /// `true` for the quasi-random types, which the emulator does not model.
    quasi: bool,
}

impl Generator {
    /// Marks a live generator, so that a stale or foreign handle is refused.
    const TAG: u64 = 0x6375_7261_6e64_0001;
    /// cuRAND's default seed for pseudo-random generators.
    const DEFAULT_SEED: u64 = 0;
}

/// The generator behind a handle: `CURAND_STATUS_NOT_INITIALIZED` for null or a handle this
/// module did not create (or already destroyed).
///
/// # Safety
/// `handle` is null or was returned by [`curandCreateGenerator`].
unsafe fn generator<'a>(handle: curandGenerator_t) -> Result<&'a mut Generator, curandStatus> {
    let generator = handle.cast::<Generator>();
    if generator.is_null() {
        return Err(curandStatus::CURAND_STATUS_NOT_INITIALIZED);
    }
    // SAFETY: the caller's contract: a pointer this module handed out.
    let generator = unsafe { &mut *generator };
    if generator.tag != Generator::TAG {
        return Err(curandStatus::CURAND_STATUS_NOT_INITIALIZED);
    }
    Ok(generator)
}

fn status(result: Result<(), curandStatus>) -> curandStatus {
    result.err().unwrap_or(curandStatus::CURAND_STATUS_SUCCESS)
}

/// `curandCreateGenerator`: a generator of `rng_type` (any pseudo-random type; the quasi-random
/// types are created but refuse to generate), seeded with cuRAND's default seed.
///
/// # Safety
/// `generator` is null or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandCreateGenerator(
    generator: *mut curandGenerator_t,
    rng_type: u32,
) -> curandStatus {
    if generator.is_null() {
        return curandStatus::CURAND_STATUS_NOT_INITIALIZED;
    }
    // cuRAND's types: 100..=161 pseudo-random, 200..=204 quasi-random.
    let quasi = match rng_type {
        100 | 101 | 121 | 141 | 142 | 161 => false,
        200..=204 => true,
        _ => return curandStatus::CURAND_STATUS_TYPE_ERROR,
    };
    let object = Box::new(Generator {
        tag: Generator::TAG,
        rng: fastrand::Rng::with_seed(Generator::DEFAULT_SEED),
        quasi,
    });
    // SAFETY: checked non-null above; the caller's out-pointer.
    unsafe { generator.write(Box::into_raw(object).cast()) };
    curandStatus::CURAND_STATUS_SUCCESS
}

/// `curandDestroyGenerator`: frees a generator.
///
/// # Safety
/// `generator` is null or a live handle of [`curandCreateGenerator`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandDestroyGenerator(generator: curandGenerator_t) -> curandStatus {
    // SAFETY: the caller's contract.
    status(unsafe { self::generator(generator) }.map(|object| {
        object.tag = 0;
        // SAFETY: created by Box::into_raw in curandCreateGenerator; a live handle (the
        // caller's contract) is freed once.
        drop(unsafe { Box::from_raw(std::ptr::from_mut(object)) });
    }))
}

/// `curandSetPseudoRandomGeneratorSeed`: restarts the generator's sequence from `seed`.
///
/// # Safety
/// `generator` is null or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandSetPseudoRandomGeneratorSeed(
    generator: curandGenerator_t,
    seed: u64,
) -> curandStatus {
    // SAFETY: the caller's contract.
    status(unsafe { self::generator(generator) }.and_then(|object| {
        if object.quasi {
            return Err(curandStatus::CURAND_STATUS_TYPE_ERROR);
        }
        object.rng = fastrand::Rng::with_seed(seed);
        Ok(())
    }))
}

/// `curandSetStream`: every call completes before it returns, so the stream changes nothing.
///
/// # Safety
/// `generator` is null or a live handle.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandSetStream(
    generator: curandGenerator_t,
    _stream: *mut c_void,
) -> curandStatus {
    // SAFETY: the caller's contract.
    status(unsafe { self::generator(generator) }.map(|_| ()))
}

/// Fills `count` elements of type `T` at device address `out` with `draw()`, range checked.
///
/// # Safety
/// `generator` is null or a live handle.
unsafe fn fill<T>(
    generator: curandGenerator_t,
    out: *mut T,
    count: usize,
    mut draw: impl FnMut(&mut fastrand::Rng) -> T,
) -> curandStatus {
    // SAFETY: the caller's contract.
    let object = match unsafe { self::generator(generator) } {
        Ok(object) => object,
        Err(code) => return code,
    };
    if object.quasi {
        return curandStatus::CURAND_STATUS_TYPE_ERROR;
    }
    let Some(bytes) = count.checked_mul(size_of::<T>()) else {
        return curandStatus::CURAND_STATUS_LAUNCH_FAILURE;
    };
    let _device = memory::exclusive();
    if count > 0 {
        if let Err(why) = memory::check_range(out as u64, bytes) {
            eprintln!("cuda-emu: curandGenerate*: {why}");
            return curandStatus::CURAND_STATUS_LAUNCH_FAILURE;
        }
        if !(out as usize).is_multiple_of(align_of::<T>()) {
            return curandStatus::CURAND_STATUS_LAUNCH_FAILURE;
        }
    }
    for i in 0..count {
        // SAFETY: `count` elements of device memory, checked above, aligned.
        unsafe { out.add(i).write(draw(&mut object.rng)) };
    }
    curandStatus::CURAND_STATUS_SUCCESS
}

/// A uniform f64 in `(0, 1]`, cuRAND's range.
fn uniform_f64(rng: &mut fastrand::Rng) -> f64 {
    1.0 - rng.f64()
}

/// A uniform f32 in `(0, 1]`.
fn uniform_f32(rng: &mut fastrand::Rng) -> f32 {
    // Drawn in f64 and rounded: rounding can reach 1.0, never 0.
    uniform_f64(rng) as f32
}

/// Normal values in pairs (Box-Muller): cuRAND's pseudo-random generators produce them in pairs
/// and refuse an odd count (`CURAND_STATUS_LENGTH_NOT_MULTIPLE`).
///
/// # Safety
/// `generator` is null or a live handle.
unsafe fn fill_normal<T: Copy>(
    generator: curandGenerator_t,
    out: *mut T,
    count: usize,
    mean: f64,
    stddev: f64,
    narrow: impl Fn(f64) -> T,
) -> curandStatus {
    if !count.is_multiple_of(2) {
        return curandStatus::CURAND_STATUS_LENGTH_NOT_MULTIPLE;
    }
    let mut spare: Option<f64> = None;
    // SAFETY: the caller's contract.
    unsafe {
        fill(generator, out, count, |rng| {
            let z = spare.take().unwrap_or_else(|| {
                let (u1, u2) = (uniform_f64(rng), uniform_f64(rng));
                let radius = (-2.0 * u1.ln()).sqrt();
                let angle = std::f64::consts::TAU * u2;
                spare = Some(radius * angle.sin());
                radius * angle.cos()
            });
            narrow(mean + stddev * z)
        })
    }
}

/// `curandGenerateUniform`: `num` f32 values in `(0, 1]` into device memory.
///
/// # Safety
/// `generator` is null or a live handle; `output` addresses device memory (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandGenerateUniform(
    generator: curandGenerator_t,
    output: *mut f32,
    num: usize,
) -> curandStatus {
    // SAFETY: the caller's contract.
    unsafe { fill(generator, output, num, uniform_f32) }
}

/// `curandGenerateUniformDouble`: `num` f64 values in `(0, 1]` into device memory.
///
/// # Safety
/// As [`curandGenerateUniform`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandGenerateUniformDouble(
    generator: curandGenerator_t,
    output: *mut f64,
    num: usize,
) -> curandStatus {
    // SAFETY: the caller's contract.
    unsafe { fill(generator, output, num, uniform_f64) }
}

/// `curandGenerateNormal`: `n` (even) f32 values of the normal distribution.
///
/// # Safety
/// As [`curandGenerateUniform`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandGenerateNormal(
    generator: curandGenerator_t,
    output: *mut f32,
    n: usize,
    mean: f32,
    stddev: f32,
) -> curandStatus {
    // SAFETY: the caller's contract.
    unsafe {
        fill_normal(generator, output, n, mean.into(), stddev.into(), |v| {
            v as f32
        })
    }
}

/// `curandGenerateNormalDouble`: `n` (even) f64 values of the normal distribution.
///
/// # Safety
/// As [`curandGenerateUniform`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn curandGenerateNormalDouble(
    generator: curandGenerator_t,
    output: *mut f64,
    n: usize,
    mean: f64,
    stddev: f64,
) -> curandStatus {
    // SAFETY: the caller's contract.
    unsafe { fill_normal(generator, output, n, mean, stddev, |v| v) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn device_buffer(bytes: usize) -> u64 {
        let mut address = 0;
        // SAFETY: a valid out-pointer.
        let status = unsafe { crate::driver::cuMemAlloc_v2(&mut address, bytes) };
        assert_eq!(status, cudarc::driver::sys::CUresult::CUDA_SUCCESS);
        address
    }

    fn create() -> curandGenerator_t {
        let mut generator = std::ptr::null_mut();
        // SAFETY: a valid out-pointer.
        let status = unsafe { curandCreateGenerator(&mut generator, 100) };
        assert_eq!(status, curandStatus::CURAND_STATUS_SUCCESS);
        generator
    }

    #[test]
    fn uniform_values_lie_in_zero_one_and_repeat_with_the_seed() {
        let generator = create();
        let out = device_buffer(4 * 1000) as *mut f32;
        let draw = || {
            // SAFETY: a live generator and a 1000-element device buffer.
            unsafe {
                assert_eq!(
                    curandSetPseudoRandomGeneratorSeed(generator, 42),
                    curandStatus::CURAND_STATUS_SUCCESS
                );
                assert_eq!(
                    curandGenerateUniform(generator, out, 1000),
                    curandStatus::CURAND_STATUS_SUCCESS
                );
                std::slice::from_raw_parts(out, 1000).to_vec()
            }
        };
        let first = draw();
        assert!(first.iter().all(|&v| v > 0.0 && v <= 1.0));
        let mean = first.iter().map(|&v| f64::from(v)).sum::<f64>() / 1000.0;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
        assert_eq!(first, draw());
        // SAFETY: a live generator.
        let destroyed = unsafe { curandDestroyGenerator(generator) };
        assert_eq!(destroyed, curandStatus::CURAND_STATUS_SUCCESS);
    }

    #[test]
    fn normal_values_come_in_pairs_with_the_asked_moments() {
        let generator = create();
        let out = device_buffer(8 * 4000) as *mut f64;
        // SAFETY: a live generator and a 4000-element device buffer.
        unsafe {
            assert_eq!(
                curandGenerateNormalDouble(generator, out, 3, 0.0, 1.0),
                curandStatus::CURAND_STATUS_LENGTH_NOT_MULTIPLE
            );
            assert_eq!(
                curandGenerateNormalDouble(generator, out, 4000, 2.0, 3.0),
                curandStatus::CURAND_STATUS_SUCCESS
            );
            let values = std::slice::from_raw_parts(out, 4000);
            let mean = values.iter().sum::<f64>() / 4000.0;
            let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 4000.0;
            assert!((mean - 2.0).abs() < 0.2, "mean {mean}");
            assert!((var.sqrt() - 3.0).abs() < 0.2, "stddev {}", var.sqrt());
            curandDestroyGenerator(generator);
        }
    }

    #[test]
    fn host_memory_and_bad_handles_are_refused() {
        let generator = create();
        let mut host = [0f32; 4];
        // SAFETY: the calls check what they are given.
        unsafe {
            assert_eq!(
                curandGenerateUniform(generator, host.as_mut_ptr(), 4),
                curandStatus::CURAND_STATUS_LAUNCH_FAILURE
            );
            assert_eq!(
                curandGenerateUniform(std::ptr::null_mut(), host.as_mut_ptr(), 4),
                curandStatus::CURAND_STATUS_NOT_INITIALIZED
            );
            let mut other = std::ptr::null_mut();
            assert_eq!(
                curandCreateGenerator(&mut other, 7),
                curandStatus::CURAND_STATUS_TYPE_ERROR
            );
            curandDestroyGenerator(generator);
        }
        assert_eq!(host, [0.0; 4]);
    }
}
