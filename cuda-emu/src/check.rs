//! Checking one kernel directly (without the driver): run it under every schedule from the same
//! inputs and flag anything a GPU would only show as garbage, with the reason.
//!
//! A kernel is flagged when a launch fails (divergent barrier, deadlock, bad shuffle, misaligned
//! access, limits), when it writes outside a device allocation, when two schedules leave
//! different outputs (a race), when an output holds the emulator's poison (it read shared memory
//! no thread wrote, or memory outside an allocation), or when an output element was never written.

use std::ffi::c_void;

use crate::{Fault, FaultKind, LaunchConfig, Schedule, memory};

/// The bit pattern of poisoned shared memory and of the guard zones: NaN, and kept through f32
/// arithmetic on x86 (a NaN operand's payload propagates).
const POISON_BITS: u32 = u32::from_ne_bytes([memory::GUARD_BYTE; 4]);
/// The fill of a fresh allocation.
const FILL_BITS: u32 = u32::from_ne_bytes([memory::FILL_BYTE; 4]);

/// One kernel argument.
#[derive(Clone, Debug)]
pub enum Arg {
    /// A device buffer holding these values (a `const float*` parameter).
    Input(Vec<f32>),
    /// A device buffer of this many f32, freshly allocated (a `float*` parameter); its contents
    /// after the launch are returned.
    Output(usize),
    /// An `int` parameter.
    Int(i32),
}

/// Runs `entry` under `schedules` (every schedule when empty, seed 1 for the random one) and
/// returns the outputs, or the reason the kernel is wrong.
///
/// ```
/// use cuda_emu::check::{Arg, check};
/// use cuda_emu::{Dim3, LaunchConfig};
///
/// let config = LaunchConfig::new(Dim3::x(1), Dim3::x(64));
/// let err = check("planted_divergent_barrier", &config, &[Arg::Output(64)], &[]).unwrap_err();
/// assert!(err.message.contains("divergent __syncthreads"), "{err}");
/// ```
pub fn check(
    entry: &str,
    config: &LaunchConfig,
    args: &[Arg],
    schedules: &[Schedule],
) -> Result<Vec<Vec<f32>>, Fault> {
    let entry = crate::find(entry)
        .ok_or_else(|| Fault::new(FaultKind::InvalidLaunch, format!("no entry named {entry}")))?;
    let all = Schedule::all(1);
    let schedules = if schedules.is_empty() {
        &all[..]
    } else {
        schedules
    };
    let mut first: Option<(Schedule, Vec<Vec<u32>>)> = None;
    for &schedule in schedules {
        let outputs = run_once(entry, config, args, schedule)?;
        for (k, output) in outputs.iter().enumerate() {
            if let Some(i) = output.iter().position(|&b| b == POISON_BITS) {
                return Err(Fault::new(
                    FaultKind::Kernel,
                    format!(
                        "{}: output {k} element {i} is the emulator's poison (NaN {POISON_BITS:#x}): \
                         the kernel read shared memory no thread wrote, or memory outside an \
                         allocation [schedule {schedule}]",
                        entry.name
                    ),
                ));
            }
            if let Some(i) = output.iter().position(|&b| b == FILL_BITS) {
                return Err(Fault::new(
                    FaultKind::Kernel,
                    format!(
                        "{}: output {k} element {i} was never written (it holds the allocation \
                         fill {FILL_BITS:#x}) [schedule {schedule}]",
                        entry.name
                    ),
                ));
            }
        }
        match &first {
            None => first = Some((schedule, outputs)),
            Some((base, expected)) => {
                for (k, (a, b)) in expected.iter().zip(&outputs).enumerate() {
                    if let Some(i) = a.iter().zip(b).position(|(x, y)| x != y) {
                        return Err(Fault::new(
                            FaultKind::Race,
                            format!(
                                "{}: a race: output {k} element {i} is {} under schedule {base} \
                                 but {} under {schedule}",
                                entry.name,
                                f32::from_bits(a[i]),
                                f32::from_bits(b[i])
                            ),
                        ));
                    }
                }
            }
        }
    }
    let (_, outputs) = first.expect("at least one schedule ran");
    Ok(outputs
        .into_iter()
        .map(|o| o.into_iter().map(f32::from_bits).collect())
        .collect())
}

/// Device buffers freed on drop.
struct Buffers(Vec<u64>);

impl Drop for Buffers {
    fn drop(&mut self) {
        for &address in &self.0 {
            memory::free(address);
        }
    }
}

fn run_once(
    entry: &'static crate::Entry,
    config: &LaunchConfig,
    args: &[Arg],
    schedule: Schedule,
) -> Result<Vec<Vec<u32>>, Fault> {
    let out_of_memory = || Fault::resources("allocating a device buffer");
    let mut buffers = Buffers(Vec::new());
    // The values the parameters point at: a device address or an int, 8 bytes each.
    let mut values: Vec<u64> = Vec::with_capacity(args.len());
    let mut outputs = Vec::new();
    for arg in args {
        match arg {
            Arg::Input(data) => {
                let address = memory::alloc(data.len() * 4).ok_or_else(out_of_memory)?;
                buffers.0.push(address);
                // SAFETY: the allocation holds data.len() f32.
                unsafe {
                    std::ptr::copy_nonoverlapping(data.as_ptr(), address as *mut f32, data.len())
                };
                values.push(address);
            }
            Arg::Output(len) => {
                let address = memory::alloc(len * 4).ok_or_else(out_of_memory)?;
                buffers.0.push(address);
                outputs.push((address, *len));
                values.push(address);
            }
            Arg::Int(v) => values.push(*v as u32 as u64),
        }
    }
    let mut params: Vec<*mut c_void> = values
        .iter_mut()
        .map(|v| (v as *mut u64).cast::<c_void>())
        .collect();
    if params.len() != entry.params {
        return Err(Fault::new(
            FaultKind::InvalidLaunch,
            format!(
                "{} takes {} parameters, {} given",
                entry.name,
                entry.params,
                params.len()
            ),
        ));
    }
    let _device = memory::exclusive();
    // SAFETY: every parameter points at 8 bytes: a device address for pointer parameters, or an
    // int in the low half (little-endian) for int parameters.
    unsafe { crate::launch(entry, config, params.as_mut_ptr(), schedule) }?;
    memory::check_guards(Some(&buffers.0))
        .map_err(|why| Fault::new(FaultKind::OutOfBounds, format!("{}: {why}", entry.name)))?;
    Ok(outputs
        .iter()
        .map(|&(address, len)| {
            // SAFETY: the allocation holds `len` f32.
            unsafe { std::slice::from_raw_parts(address as *const u32, len) }.to_vec()
        })
        .collect())
}
