//! The stand-in CUDA driver: the driver API functions cudarc and NVRTC call, over the emulator.
//!
//! One device, modelled on an H200 (compute capability 9.0), named so that tileops's
//! `Device::is_emulated()` is true. Streams are synchronous, events read the host clock (the
//! emulator measures correctness, never speed), module images (the CUBIN NVRTC produced) are read
//! only for each entry's static shared memory, and `cuLaunchKernel` runs the emulated entry of the
//! same name.
//!
//! Environment:
//! - `CUDA_EMU_SCHEDULE`: the schedule of every launch (`round-robin` when unset; see
//!   [`Schedule`]).
//! - `CUDA_EMU_COMPARE`: a second schedule. Every launch then runs under both, from the same
//!   memory, and fails when any byte of device memory differs: a race.
//! - `CUDA_EMU_COVERAGE_DIR`: each process appends the name of every entry it launched to
//!   `launched-<pid>.txt` there.
//! - `CUDA_EMU_SM_COUNT`: the SM count reported (132, as an H200).
//! - `CUDA_EMU_LEDGER=<path>`: the launch log. Every `cuLaunchKernel` appends one JSON line to
//!   `<path>` before it returns: `{"entry":…,"grid":[x,y,z],"block":[x,y,z],"dynamic_smem":n,
//!   "ran":bool,"tid":n,"traffic":…}` (`tid`: the Linux id of the launching thread, so that a
//!   process's concurrent callers can tell their launches apart), `traffic` being `null` in a
//!   build that does not count it, else
//!   the launch's [`crate::gate::TrafficRecord`] (see [`crate::gate::TrafficRecord::to_json`]).
//! - `CUDA_EMU_DRY_RUN=1`: launches are checked and logged but not run (see
//!   [`cuda_emu_set_dry_run`]).
//!
//! A failed launch returns the CUDA error a GPU would give, prints the emulator's message to
//! stderr, and `cuGetErrorString` of that error returns the message, so that cudarc's error (and
//! the failing test) shows the kernel, block, thread and source line.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, c_char, c_int, c_uint, c_void};
use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, Once, OnceLock};
use std::time::Instant;

use cudarc::driver::sys::{
    CUcontext, CUdevice, CUdevice_attribute, CUdeviceptr, CUevent, CUfunction,
    CUfunction_attribute, CUhostFn, CUmodule, CUpointer_attribute, CUresult, CUstream,
    CUstreamCaptureStatus, CUuuid,
};

use crate::memory;
use crate::{Fault, FaultKind, LaunchConfig, Schedule, entries::Entry};

/// The device name: tileops's `Device::is_emulated()` looks for the `cuda-emu` prefix.
pub const DEVICE_NAME: &str = "cuda-emu (NVIDIA H200 emulated on the CPU)";
/// The device memory reported: what the emulator lets a process allocate.
const TOTAL_MEMORY: usize = 16 << 30;
/// CUDA 13.0, the driver of the target machines.
const DRIVER_VERSION: c_int = 13000;

type Result<T = ()> = std::result::Result<T, CUresult>;

fn status(result: Result) -> CUresult {
    match result {
        Ok(()) => CUresult::CUDA_SUCCESS,
        Err(code) => code,
    }
}

/// Writes `value` through an out-pointer, or fails on null.
unsafe fn put<T>(out: *mut T, value: T) -> Result {
    if out.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
    }
    // SAFETY: the caller passes a valid out-pointer.
    unsafe { out.write(value) };
    Ok(())
}

// ---- Handles -----------------------------------------------------------------------------------

/// The primary context: one, for the one device.
struct Context;
static PRIMARY: Context = Context;

fn primary() -> CUcontext {
    (&PRIMARY as *const Context).cast_mut().cast()
}

thread_local! {
    static CURRENT: std::cell::Cell<CUcontext> = const { std::cell::Cell::new(std::ptr::null_mut()) };
}

struct Module {
    /// What the CUBIN says of each entry (empty for a PTX image).
    resources: HashMap<String, EntryResources>,
}

/// One entry's resources as its CUBIN records them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct EntryResources {
    /// Static shared memory, bytes: the size of its `.nv.shared.<entry>` section.
    static_shared: usize,
    /// Registers per thread: its `EIATTR_REGCOUNT` in the image's `.nv.info` section (0 when
    /// the image does not say, as a PTX one does not).
    registers: u32,
}

struct Function {
    entry: &'static Entry,
    static_shared: usize,
    registers: u32,
    max_dynamic_shared: Mutex<usize>,
}

struct Event {
    /// The host time of the last record; `None` before the first.
    recorded: Mutex<Option<Instant>>,
    timing: bool,
}

/// A stream handle: the emulator runs everything at once, so a stream carries nothing.
struct Stream;

fn leak<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// # Safety
/// `handle` must come from `leak::<T>` and not have been freed.
unsafe fn handle<'a, T>(handle: *mut c_void) -> Result<&'a T> {
    if handle.is_null() {
        return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
    }
    // SAFETY: per the contract.
    Ok(unsafe { &*handle.cast::<T>() })
}

// ---- Errors ------------------------------------------------------------------------------------

/// The messages of failed launches, by error code (the latest one of each), kept for the life of
/// the process because cuGetErrorString hands out pointers into them.
static MESSAGES: Mutex<Vec<(CUresult, &'static std::ffi::CStr)>> = Mutex::new(Vec::new());

fn record_fault(fault: &Fault) -> CUresult {
    let code = match fault.kind {
        FaultKind::InvalidLaunch => CUresult::CUDA_ERROR_INVALID_VALUE,
        FaultKind::OutOfBounds => CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        FaultKind::Resources => CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        FaultKind::Kernel if fault.message.contains("misaligned") => {
            CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
        }
        FaultKind::Kernel | FaultKind::Race => CUresult::CUDA_ERROR_LAUNCH_FAILED,
    };
    eprintln!("cuda-emu: {}", fault.message);
    let text =
        CString::new(format!("cuda-emu: {}", fault.message.replace('\0', " "))).unwrap_or_default();
    let mut messages = MESSAGES.lock().unwrap_or_else(|p| p.into_inner());
    messages.retain(|(c, _)| *c != code);
    messages.push((code, Box::leak(text.into_boxed_c_str())));
    code
}

fn error_name(code: CUresult) -> &'static str {
    use CUresult::*;
    match code {
        CUDA_SUCCESS => "CUDA_SUCCESS\0",
        CUDA_ERROR_INVALID_VALUE => "CUDA_ERROR_INVALID_VALUE\0",
        CUDA_ERROR_OUT_OF_MEMORY => "CUDA_ERROR_OUT_OF_MEMORY\0",
        CUDA_ERROR_NOT_INITIALIZED => "CUDA_ERROR_NOT_INITIALIZED\0",
        CUDA_ERROR_INVALID_DEVICE => "CUDA_ERROR_INVALID_DEVICE\0",
        CUDA_ERROR_INVALID_IMAGE => "CUDA_ERROR_INVALID_IMAGE\0",
        CUDA_ERROR_INVALID_CONTEXT => "CUDA_ERROR_INVALID_CONTEXT\0",
        CUDA_ERROR_INVALID_HANDLE => "CUDA_ERROR_INVALID_HANDLE\0",
        CUDA_ERROR_NOT_FOUND => "CUDA_ERROR_NOT_FOUND\0",
        CUDA_ERROR_NOT_READY => "CUDA_ERROR_NOT_READY\0",
        CUDA_ERROR_ILLEGAL_ADDRESS => "CUDA_ERROR_ILLEGAL_ADDRESS\0",
        CUDA_ERROR_MISALIGNED_ADDRESS => "CUDA_ERROR_MISALIGNED_ADDRESS\0",
        CUDA_ERROR_LAUNCH_FAILED => "CUDA_ERROR_LAUNCH_FAILED\0",
        CUDA_ERROR_NOT_SUPPORTED => "CUDA_ERROR_NOT_SUPPORTED\0",
        _ => "CUDA_ERROR_UNKNOWN\0",
    }
}

/// `cuGetErrorName`: the name of `error` (`CUDA_ERROR_UNKNOWN` for a code the emulator never
/// returns), as a static NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorName(error: CUresult, pStr: *mut *const c_char) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(pStr, error_name(error).as_ptr().cast()) })
}

/// `cuGetErrorString`: the emulator's message of the latest failed launch that returned `error`
/// (kernel, block, thread, source line), else the error's name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetErrorString(error: CUresult, pStr: *mut *const c_char) -> CUresult {
    let messages = MESSAGES.lock().unwrap_or_else(|p| p.into_inner());
    let text = match messages.iter().rev().find(|(c, _)| *c == error) {
        Some((_, message)) => message.as_ptr(),
        None => error_name(error).as_ptr().cast(),
    };
    // SAFETY: caller's out-pointer.
    status(unsafe { put(pStr, text) })
}

/// NVRTC asks for the driver's private export tables; refusing makes it fall back to its own
/// paths (a null table would crash it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuGetExportTable(
    _ppExportTable: *mut *const c_void,
    _pExportTableId: *const CUuuid,
) -> CUresult {
    CUresult::CUDA_ERROR_NOT_SUPPORTED
}

// ---- Driver, device, context -------------------------------------------------------------------

/// `cuInit`: nothing to initialise; always succeeds.
#[unsafe(no_mangle)]
pub extern "C" fn cuInit(_flags: c_uint) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuDriverGetVersion`: CUDA 13.0 (13000).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDriverGetVersion(version: *mut c_int) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(version, DRIVER_VERSION) })
}

/// `cuDeviceGetCount`: one device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetCount(count: *mut c_int) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(count, 1) })
}

fn check_device(dev: CUdevice) -> Result {
    if dev == 0 {
        Ok(())
    } else {
        Err(CUresult::CUDA_ERROR_INVALID_DEVICE)
    }
}

/// `cuDeviceGet`: device 0 for ordinal 0; any other ordinal is `CUDA_ERROR_INVALID_DEVICE`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> CUresult {
    // SAFETY: `device` is the caller's out-pointer (the driver API's contract);
    // `put` refuses a null one.
    status(check_device(ordinal).and_then(|()| unsafe { put(device, 0) }))
}

/// `cuDeviceGetName`: [`DEVICE_NAME`], cut to fit `len` bytes with its NUL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetName(name: *mut c_char, len: c_int, dev: CUdevice) -> CUresult {
    status(check_device(dev).and_then(|()| {
        if name.is_null() || len <= 0 {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        let bytes = DEVICE_NAME.as_bytes();
        let n = bytes.len().min(len as usize - 1);
        // SAFETY: the caller's buffer holds `len` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), name.cast(), n);
            *name.add(n) = 0;
        }
        Ok(())
    }))
}

/// `cuDeviceTotalMem_v2`: the 16 GiB the emulator lets a process allocate.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceTotalMem_v2(bytes: *mut usize, dev: CUdevice) -> CUresult {
    // SAFETY: `bytes` is the caller's out-pointer (the driver API's contract);
    // `put` refuses a null one.
    status(check_device(dev).and_then(|()| unsafe { put(bytes, TOTAL_MEMORY) }))
}

/// `cuDeviceGetUuid_v2`: a fixed UUID (the bytes of `cuda-emu-device0`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid_v2(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    let mut bytes = [0 as c_char; 16];
    for (b, s) in bytes.iter_mut().zip(b"cuda-emu-device0") {
        *b = *s as c_char;
    }
    // SAFETY: `uuid` is the caller's out-pointer (the driver API's contract);
    // `put` refuses a null one.
    status(check_device(dev).and_then(|()| unsafe { put(uuid, CUuuid { bytes }) }))
}

/// `cuDeviceGetUuid`: as [`cuDeviceGetUuid_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetUuid(uuid: *mut CUuuid, dev: CUdevice) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuDeviceGetUuid_v2(uuid, dev) }
}

fn sm_count() -> c_int {
    static COUNT: OnceLock<c_int> = OnceLock::new();
    *COUNT.get_or_init(|| {
        std::env::var("CUDA_EMU_SM_COUNT")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n| n > 0)
            .unwrap_or(132)
    })
}

fn attribute(attrib: CUdevice_attribute) -> c_int {
    use CUdevice_attribute::*;
    match attrib {
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR => 9,
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR => 0,
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT => sm_count(),
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK => crate::limits::MAX_THREADS_PER_BLOCK as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X => crate::limits::MAX_BLOCK_DIM[0] as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y => crate::limits::MAX_BLOCK_DIM[1] as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z => crate::limits::MAX_BLOCK_DIM[2] as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X => crate::limits::MAX_GRID_DIM[0] as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y => crate::limits::MAX_GRID_DIM[1] as c_int,
        CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z => crate::limits::MAX_GRID_DIM[2] as c_int,
        CU_DEVICE_ATTRIBUTE_WARP_SIZE => 32,
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK => {
            crate::limits::DEFAULT_SHARED_BYTES as c_int
        }
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN => {
            crate::limits::MAX_SHARED_BYTES_OPTIN as c_int
        }
        CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR => 228 * 1024,
        CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK => 65536,
        CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR => 65536,
        CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR => 2048,
        CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR => 32,
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE => 60 << 20,
        CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH => 6144,
        CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE => 3_201_000,
        CU_DEVICE_ATTRIBUTE_CLOCK_RATE => 1_980_000,
        CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING => 1,
        CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS => 1,
        CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY => 65536,
        CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID => 0,
        // Stream-ordered allocation works (synchronously).
        CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED => 1,
        _ => 0,
    }
}

/// `cuDeviceGetAttribute`: the H200's value of `attrib` (compute capability 9.0, the launch
/// limits of [`crate::limits`], `CUDA_EMU_SM_COUNT` SMs); 0 for an attribute not modelled.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDeviceGetAttribute(
    pi: *mut c_int,
    attrib: CUdevice_attribute,
    dev: CUdevice,
) -> CUresult {
    // SAFETY: `pi` is the caller's out-pointer (the driver API's contract);
    // `put` refuses a null one.
    status(check_device(dev).and_then(|()| unsafe { put(pi, attribute(attrib)) }))
}

/// `cuDevicePrimaryCtxRetain`: the one primary context (it is never destroyed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> CUresult {
    // SAFETY: `pctx` is the caller's out-pointer (the driver API's contract);
    // `put` refuses a null one.
    status(check_device(dev).and_then(|()| unsafe { put(pctx, primary()) }))
}

/// `cuDevicePrimaryCtxRelease_v2`: nothing to release; checks the device.
#[unsafe(no_mangle)]
pub extern "C" fn cuDevicePrimaryCtxRelease_v2(dev: CUdevice) -> CUresult {
    status(check_device(dev))
}

/// `cuCtxDestroy_v2`: the emulator has only the primary context (it has no `cuCtxCreate`), which
/// is released, never destroyed: every context is `CUDA_ERROR_INVALID_CONTEXT` here.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxDestroy_v2(_ctx: CUcontext) -> CUresult {
    CUresult::CUDA_ERROR_INVALID_CONTEXT
}

/// `cuCtxSetCurrent`: makes `ctx` the calling thread's current context.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetCurrent(ctx: CUcontext) -> CUresult {
    CURRENT.with(|c| c.set(ctx));
    CUresult::CUDA_SUCCESS
}

/// `cuCtxGetCurrent`: the calling thread's current context (null before `cuCtxSetCurrent`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetCurrent(pctx: *mut CUcontext) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(pctx, CURRENT.with(|c| c.get())) })
}

/// `cuCtxGetDevice`: device 0.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetDevice(device: *mut CUdevice) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(device, 0) })
}

/// `cuCtxSynchronize`: every call has completed when it returns, so there is nothing to wait for.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSynchronize() -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuCtxSetFlags`: accepted and ignored.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxSetFlags(_flags: c_uint) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuCtxGetFlags`: no flags (0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetFlags(flags: *mut c_uint) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(flags, 0) })
}

/// `cuCtxResetPersistingL2Cache`: no cache is modelled; always succeeds.
#[unsafe(no_mangle)]
pub extern "C" fn cuCtxResetPersistingL2Cache() -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuCtxGetStreamPriorityRange`: a GPU's range, 0 (least) to -5 (greatest); priorities have no
/// effect.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuCtxGetStreamPriorityRange(
    least: *mut c_int,
    greatest: *mut c_int,
) -> CUresult {
    // SAFETY: each pointer is null or the caller's out-pointer to a c_int (the driver API's
    // contract: either may be null); only non-null ones are written.
    unsafe {
        if !least.is_null() {
            *least = 0;
        }
        if !greatest.is_null() {
            *greatest = -5;
        }
    }
    CUresult::CUDA_SUCCESS
}

// ---- Streams and events ------------------------------------------------------------------------

/// `cuStreamCreate`: a new stream handle (streams are synchronous and carry nothing).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreate(phStream: *mut CUstream, _flags: c_uint) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe { put(phStream, leak(Stream).cast()) })
}

/// `cuStreamCreateWithPriority`: as [`cuStreamCreate`]; the priority is ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamCreateWithPriority(
    phStream: *mut CUstream,
    flags: c_uint,
    _priority: c_int,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuStreamCreate(phStream, flags) }
}

/// `cuStreamDestroy_v2`: frees a handle from [`cuStreamCreate`] (null is accepted).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamDestroy_v2(hStream: CUstream) -> CUresult {
    if !hStream.is_null() {
        // SAFETY: created by cuStreamCreate.
        drop(unsafe { Box::from_raw(hStream.cast::<Stream>()) });
    }
    CUresult::CUDA_SUCCESS
}

/// `cuStreamSynchronize`: streams are synchronous; nothing to wait for.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamSynchronize(_hStream: CUstream) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuStreamQuery`: every stream is idle (`CUDA_SUCCESS`).
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamQuery(_hStream: CUstream) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuStreamWaitEvent`: every event has completed when recorded; nothing to wait for.
#[unsafe(no_mangle)]
pub extern "C" fn cuStreamWaitEvent(
    _hStream: CUstream,
    _hEvent: CUevent,
    _flags: c_uint,
) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuStreamIsCapturing`: no stream is ever capturing (graphs are not modelled).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuStreamIsCapturing(
    _hStream: CUstream,
    captureStatus: *mut CUstreamCaptureStatus,
) -> CUresult {
    // SAFETY: caller's out-pointer.
    status(unsafe {
        put(
            captureStatus,
            CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE,
        )
    })
}

/// `cuLaunchHostFunc`: calls `func(userData)` at once, the stream having no pending work.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchHostFunc(
    _hStream: CUstream,
    func: CUhostFn,
    userData: *mut c_void,
) -> CUresult {
    match func {
        // SAFETY: the caller's callback with its own data; streams are synchronous.
        Some(f) => unsafe { f(userData) },
        None => return CUresult::CUDA_ERROR_INVALID_VALUE,
    }
    CUresult::CUDA_SUCCESS
}

/// `CU_EVENT_DISABLE_TIMING`.
const EVENT_DISABLE_TIMING: c_uint = 0x2;

/// `cuEventCreate`: a new event; `CU_EVENT_DISABLE_TIMING` makes it refuse
/// [`cuEventElapsedTime_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventCreate(phEvent: *mut CUevent, flags: c_uint) -> CUresult {
    let event = Event {
        recorded: Mutex::new(None),
        timing: flags & EVENT_DISABLE_TIMING == 0,
    };
    // SAFETY: caller's out-pointer.
    status(unsafe { put(phEvent, leak(event).cast()) })
}

/// `cuEventDestroy_v2`: frees a handle from [`cuEventCreate`] (null is accepted).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventDestroy_v2(hEvent: CUevent) -> CUresult {
    if !hEvent.is_null() {
        // SAFETY: created by cuEventCreate.
        drop(unsafe { Box::from_raw(hEvent.cast::<Event>()) });
    }
    CUresult::CUDA_SUCCESS
}

/// `cuEventRecord`: stores the host time in the event.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecord(hEvent: CUevent, _hStream: CUstream) -> CUresult {
    status((|| {
        // SAFETY: an event handle.
        let event: &Event = unsafe { handle(hEvent.cast())? };
        *event.recorded.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        Ok(())
    })())
}

/// `cuEventRecordWithFlags`: as [`cuEventRecord`]; the flags are ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventRecordWithFlags(
    hEvent: CUevent,
    hStream: CUstream,
    _flags: c_uint,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuEventRecord(hEvent, hStream) }
}

/// `cuEventSynchronize`: a recorded event has completed; nothing to wait for.
#[unsafe(no_mangle)]
pub extern "C" fn cuEventSynchronize(_hEvent: CUevent) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// `cuEventQuery`: every event has completed (`CUDA_SUCCESS`).
#[unsafe(no_mangle)]
pub extern "C" fn cuEventQuery(_hEvent: CUevent) -> CUresult {
    CUresult::CUDA_SUCCESS
}

/// Host time between two records: what the emulator took, which says nothing about a GPU.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime_v2(
    pMilliseconds: *mut f32,
    hStart: CUevent,
    hEnd: CUevent,
) -> CUresult {
    status((|| {
        // SAFETY: event handles.
        let (start, end): (&Event, &Event) =
            unsafe { (handle(hStart.cast())?, handle(hEnd.cast())?) };
        if !start.timing || !end.timing {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        }
        let read = |e: &Event| *e.recorded.lock().unwrap_or_else(|p| p.into_inner());
        let (Some(a), Some(b)) = (read(start), read(end)) else {
            return Err(CUresult::CUDA_ERROR_INVALID_HANDLE);
        };
        let ms = b.saturating_duration_since(a).as_secs_f64() * 1e3;
        // SAFETY: caller's out-pointer.
        unsafe { put(pMilliseconds, ms as f32) }
    })())
}

/// `cuEventElapsedTime`: as [`cuEventElapsedTime_v2`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuEventElapsedTime(
    pMilliseconds: *mut f32,
    hStart: CUevent,
    hEnd: CUevent,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuEventElapsedTime_v2(pMilliseconds, hStart, hEnd) }
}

// ---- Memory ------------------------------------------------------------------------------------

/// `cuMemGetInfo_v2`: the 16 GiB total, and what the process's live allocations leave of it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemGetInfo_v2(free: *mut usize, total: *mut usize) -> CUresult {
    let used = memory::allocated_bytes();
    // SAFETY: caller's out-pointers.
    status(unsafe {
        put(free, TOTAL_MEMORY.saturating_sub(used)).and_then(|()| put(total, TOTAL_MEMORY))
    })
}

/// `cuMemAlloc_v2`: a new device allocation of `bytesize` bytes (host memory, 256-byte aligned,
/// pattern-filled, between guard zones), or `CUDA_ERROR_OUT_OF_MEMORY` past 16 GiB in all.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytesize: usize) -> CUresult {
    let _device = memory::exclusive();
    if bytesize > TOTAL_MEMORY.saturating_sub(memory::allocated_bytes()) {
        return CUresult::CUDA_ERROR_OUT_OF_MEMORY;
    }
    match memory::alloc(bytesize) {
        // SAFETY: caller's out-pointer.
        Some(address) => status(unsafe { put(dptr, address) }),
        None => CUresult::CUDA_ERROR_OUT_OF_MEMORY,
    }
}

/// `cuMemAllocAsync`: as [`cuMemAlloc_v2`], at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemAllocAsync(
    dptr: *mut CUdeviceptr,
    bytesize: usize,
    _hStream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemAlloc_v2(dptr, bytesize) }
}

/// `cuMemFree_v2`: frees an allocation from [`cuMemAlloc_v2`] (0 is accepted); any other address
/// is `CUDA_ERROR_INVALID_VALUE`.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemFree_v2(dptr: CUdeviceptr) -> CUresult {
    let _device = memory::exclusive();
    if dptr == 0 || memory::free(dptr) {
        CUresult::CUDA_SUCCESS
    } else {
        CUresult::CUDA_ERROR_INVALID_VALUE
    }
}

/// `cuMemFreeAsync`: as [`cuMemFree_v2`], at once.
#[unsafe(no_mangle)]
pub extern "C" fn cuMemFreeAsync(dptr: CUdeviceptr, _hStream: CUstream) -> CUresult {
    cuMemFree_v2(dptr)
}

/// Checks a copy's device range. Callers hold [`memory::exclusive`] while they copy.
fn device_range(address: CUdeviceptr, len: usize, what: &str) -> Result {
    memory::check_range(address, len).map_err(|why| {
        eprintln!("cuda-emu: {what}: {why}");
        CUresult::CUDA_ERROR_INVALID_VALUE
    })
}

/// `cuMemcpyHtoD_v2`: copies `count` bytes from host memory into a device allocation, which
/// must hold the whole range (`CUDA_ERROR_INVALID_VALUE` otherwise).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoD_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    count: usize,
) -> CUresult {
    let _device = memory::exclusive();
    status(device_range(dst, count, "cuMemcpyHtoD").and_then(|()| {
        if count > 0 && src.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: dst is device memory of at least `count` bytes; src is the caller's.
        unsafe { std::ptr::copy(src.cast::<u8>(), dst as *mut u8, count) };
        Ok(())
    }))
}

/// `cuMemcpyHtoDAsync_v2`: as [`cuMemcpyHtoD_v2`], at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyHtoDAsync_v2(
    dst: CUdeviceptr,
    src: *const c_void,
    count: usize,
    _hStream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemcpyHtoD_v2(dst, src, count) }
}

/// `cuMemcpyDtoH_v2`: copies `count` bytes from a device allocation, which must hold the whole
/// range (`CUDA_ERROR_INVALID_VALUE` otherwise), into host memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoH_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    count: usize,
) -> CUresult {
    let _device = memory::exclusive();
    status(device_range(src, count, "cuMemcpyDtoH").and_then(|()| {
        if count > 0 && dst.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: src is device memory of at least `count` bytes; dst is the caller's.
        unsafe { std::ptr::copy(src as *const u8, dst.cast::<u8>(), count) };
        Ok(())
    }))
}

/// `cuMemcpyDtoHAsync_v2`: as [`cuMemcpyDtoH_v2`], at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoHAsync_v2(
    dst: *mut c_void,
    src: CUdeviceptr,
    count: usize,
    _hStream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemcpyDtoH_v2(dst, src, count) }
}

/// `cuMemcpyDtoD_v2`: copies `count` bytes between device allocations (both ranges checked;
/// overlap allowed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoD_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    count: usize,
) -> CUresult {
    let _device = memory::exclusive();
    status(
        device_range(src, count, "cuMemcpyDtoD source")
            .and_then(|()| device_range(dst, count, "cuMemcpyDtoD destination"))
            .map(|()| {
                // SAFETY: both ranges are device memory of `count` bytes.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, count) }
            }),
    )
}

/// `cuMemcpyDtoDAsync_v2`: as [`cuMemcpyDtoD_v2`], at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyDtoDAsync_v2(
    dst: CUdeviceptr,
    src: CUdeviceptr,
    count: usize,
    _hStream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemcpyDtoD_v2(dst, src, count) }
}

/// `cuMemcpyPeerAsync`: a copy between two contexts' memory. The emulated device is one, its
/// memory one address space, so it is [`cuMemcpyDtoD_v2`] (range checked), at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemcpyPeerAsync(
    dst: CUdeviceptr,
    _dstContext: CUcontext,
    src: CUdeviceptr,
    _srcContext: CUcontext,
    count: usize,
    _hStream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemcpyDtoD_v2(dst, src, count) }
}

/// `cuMemsetD8_v2`: sets `count` bytes of a device allocation to `value` (range checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8_v2(dst: CUdeviceptr, value: u8, count: usize) -> CUresult {
    let _device = memory::exclusive();
    status(device_range(dst, count, "cuMemsetD8").map(|()| {
        // SAFETY: device memory of `count` bytes.
        unsafe { std::ptr::write_bytes(dst as *mut u8, value, count) }
    }))
}

/// `cuMemsetD8Async`: as [`cuMemsetD8_v2`], at once.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuMemsetD8Async(
    dst: CUdeviceptr,
    value: u8,
    count: usize,
    _hStream: CUstream,
) -> CUresult {
    // SAFETY: same contract.
    unsafe { cuMemsetD8_v2(dst, value, count) }
}

/// `cuPointerGetAttribute`: for an address inside a device allocation, its context, memory type
/// (device), device pointer (itself) or ordinal (0); other attributes are
/// `CUDA_ERROR_NOT_SUPPORTED`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuPointerGetAttribute(
    data: *mut c_void,
    attribute: CUpointer_attribute,
    ptr: CUdeviceptr,
) -> CUresult {
    use CUpointer_attribute::*;
    if memory::check_range(ptr, 0).is_err() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller's buffer fits the attribute's type.
    unsafe {
        status(match attribute {
            CU_POINTER_ATTRIBUTE_CONTEXT => put(data.cast::<CUcontext>(), primary()),
            // CU_MEMORYTYPE_DEVICE
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE => put(data.cast::<c_uint>(), 2),
            CU_POINTER_ATTRIBUTE_DEVICE_POINTER => put(data.cast::<CUdeviceptr>(), ptr),
            CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL => put(data.cast::<c_int>(), 0),
            _ => Err(CUresult::CUDA_ERROR_NOT_SUPPORTED),
        })
    }
}

// ---- Modules and functions ---------------------------------------------------------------------

/// Each entry's static shared memory and registers, read from a CUBIN (an ELF image): the
/// `.nv.shared.<entry>` sections' sizes, and the `EIATTR_REGCOUNT` records of the `.nv.info`
/// section. A PTX image (text) yields none.
fn entry_resources(image: &[u8]) -> HashMap<String, EntryResources> {
    use object::{Object, ObjectSection, ObjectSymbol, SymbolIndex};
    let mut resources: HashMap<String, EntryResources> = HashMap::new();
    let Ok(file) = object::File::parse(image) else {
        return resources;
    };
    for section in file.sections() {
        let Ok(name) = section.name() else { continue };
        if let Some(entry) = name.strip_prefix(".nv.shared.") {
            resources.entry(entry.to_owned()).or_default().static_shared = section.size() as usize;
        } else if name == ".nv.info" {
            let Ok(data) = section.data() else { continue };
            for (symbol, registers) in register_counts(data) {
                let named = file
                    .symbol_by_index(SymbolIndex(symbol as usize))
                    .ok()
                    .and_then(|s| s.name().ok().map(str::to_owned));
                if let Some(entry) = named {
                    resources.entry(entry).or_default().registers = registers;
                }
            }
        }
    }
    resources
}

/// The `(symbol index, registers)` pairs of the `EIATTR_REGCOUNT` records in a CUBIN's
/// `.nv.info` section: a sequence of `[format, attribute, payload]` records whose payload is
/// none (format 1), one byte (2), a 16-bit value (3), or a 16-bit size and that many bytes (4);
/// `EIATTR_REGCOUNT` (0x2f) is of format 4 with two 32-bit words. A truncated record ends the
/// walk.
fn register_counts(info: &[u8]) -> Vec<(u32, u32)> {
    const EIFMT_NVAL: u8 = 1;
    const EIFMT_BVAL: u8 = 2;
    const EIFMT_HVAL: u8 = 3;
    const EIFMT_SVAL: u8 = 4;
    const EIATTR_REGCOUNT: u8 = 0x2f;
    let word = |b: &[u8], at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
    };
    let mut counts = Vec::new();
    let mut at = 0;
    while let (Some(&format), Some(&attribute)) = (info.get(at), info.get(at + 1)) {
        at += 2;
        match format {
            EIFMT_NVAL => {}
            EIFMT_BVAL => at += 1,
            EIFMT_HVAL => at += 2,
            EIFMT_SVAL => {
                let Some(size) = info.get(at..at + 2) else {
                    break;
                };
                let size = u16::from_le_bytes([size[0], size[1]]) as usize;
                at += 2;
                let Some(payload) = info.get(at..at + size) else {
                    break;
                };
                if attribute == EIATTR_REGCOUNT
                    && size == 8
                    && let (Some(symbol), Some(registers)) = (word(payload, 0), word(payload, 4))
                {
                    counts.push((symbol, registers));
                }
                at += size;
            }
            _ => break,
        }
    }
    counts
}

/// Little-endian fields of an ELF64 header or section header.
fn le_u16(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(at..at + 2)
        .map_or(0, |b| u16::from_le_bytes([b[0], b[1]]) as usize)
}

fn le_u64(bytes: &[u8], at: usize) -> usize {
    bytes
        .get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, |b| u64::from_le_bytes(b) as usize)
}

/// Where an ELF64 image's header tables end: the section headers (`e_shoff` at 0x28,
/// `e_shentsize` and `e_shnum` at 0x3A and 0x3C) and the program headers (`e_phoff` at 0x20,
/// `e_phentsize` and `e_phnum` at 0x36 and 0x38), which NVIDIA's CUBINs put after the section
/// headers: an image cut at the section headers' end does not parse, and its entries' registers
/// and shared memory would read as none.
fn elf_headers_end(header: &[u8]) -> usize {
    let sections = le_u64(header, 0x28) + le_u16(header, 0x3A) * le_u16(header, 0x3C);
    let programs = le_u64(header, 0x20) + le_u16(header, 0x36) * le_u16(header, 0x38);
    sections.max(programs).max(64)
}

/// Where an ELF64 image ends: its header tables, or the furthest section data (`sh_offset` at
/// 0x18 and `sh_size` at 0x20 of each section header; `SHT_NOBITS` sections have none), given
/// the bytes up to the header tables' end.
fn elf_sections_end(header: &[u8], headers: &[u8]) -> usize {
    const SHT_NOBITS: usize = 8;
    let (shoff, shentsize) = (le_u64(header, 0x28), le_u16(header, 0x3A));
    (0..le_u16(header, 0x3C))
        .filter_map(|i| headers.get(shoff + i * shentsize..shoff + (i + 1) * shentsize))
        .filter(|section| le_u64(section, 0x04) & 0xffff_ffff != SHT_NOBITS)
        .map(|section| le_u64(section, 0x18) + le_u64(section, 0x20))
        .fold(headers.len(), usize::max)
}

/// The length of a module image: an ELF's from its headers, else a NUL-terminated PTX text's.
///
/// # Safety
/// `image` must point at a complete CUBIN or a NUL-terminated PTX text.
unsafe fn image_bytes<'a>(image: *const c_void) -> &'a [u8] {
    let p = image.cast::<u8>();
    // SAFETY: every image starts with at least 4 bytes (ELF magic or PTX text).
    let head = unsafe { std::slice::from_raw_parts(p, 4) };
    if head == b"\x7fELF" {
        // SAFETY: the ELF header is 64 bytes.
        let header = unsafe { std::slice::from_raw_parts(p, 64) };
        let headers_end = elf_headers_end(header);
        // SAFETY: a complete image spans its header tables.
        let headers = unsafe { std::slice::from_raw_parts(p, headers_end) };
        // SAFETY: a complete image spans every section's data.
        unsafe { std::slice::from_raw_parts(p, elf_sections_end(header, headers)) }
    } else {
        // SAFETY: PTX is NUL-terminated.
        unsafe { std::ffi::CStr::from_ptr(p.cast()) }.to_bytes()
    }
}

/// `cuModuleLoadData`: a module over a CUBIN (its entries' static shared memory is read from
/// the image) or a PTX text (none read); the code itself is never run: launches run the emulated
/// entry of the same name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoadData(module: *mut CUmodule, image: *const c_void) -> CUresult {
    if image.is_null() {
        return CUresult::CUDA_ERROR_INVALID_IMAGE;
    }
    // SAFETY: the caller passes a module image.
    let bytes = unsafe { image_bytes(image) };
    let loaded = Module {
        resources: entry_resources(bytes),
    };
    // SAFETY: caller's out-pointer.
    status(unsafe { put(module, leak(loaded).cast()) })
}

/// `cuModuleLoad`: [`cuModuleLoadData`] over the contents of the file `fname` (a CUBIN or a PTX
/// text); `CUDA_ERROR_FILE_NOT_FOUND` when it cannot be read.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleLoad(module: *mut CUmodule, fname: *const c_char) -> CUresult {
    if fname.is_null() {
        return CUresult::CUDA_ERROR_INVALID_VALUE;
    }
    // SAFETY: the caller passes a NUL-terminated path.
    let path = unsafe { std::ffi::CStr::from_ptr(fname) }.to_bytes();
    let path =
        std::path::Path::new(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(path));
    let Ok(mut bytes) = std::fs::read(path) else {
        return CUresult::CUDA_ERROR_FILE_NOT_FOUND;
    };
    // A PTX text is read up to its NUL: give it one.
    bytes.push(0);
    // SAFETY: a complete image (the whole file) or a NUL-terminated text, alive for the call:
    // the module keeps only what it read from it.
    unsafe { cuModuleLoadData(module, bytes.as_ptr().cast()) }
}

/// `cuModuleUnload`: frees a handle from [`cuModuleLoadData`] (null is accepted).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleUnload(hmod: CUmodule) -> CUresult {
    if !hmod.is_null() {
        // SAFETY: created by cuModuleLoadData.
        drop(unsafe { Box::from_raw(hmod.cast::<Module>()) });
    }
    CUresult::CUDA_SUCCESS
}

/// `cuModuleGetFunction`: the emulated entry named `name` (`CUDA_ERROR_NOT_FOUND` when the
/// emulator has none), with the module's static shared memory for it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuModuleGetFunction(
    hfunc: *mut CUfunction,
    hmod: CUmodule,
    name: *const c_char,
) -> CUresult {
    status((|| {
        // SAFETY: a module handle.
        let module: &Module = unsafe { handle(hmod.cast())? };
        if name.is_null() {
            return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
        }
        // SAFETY: a NUL-terminated entry name.
        let name = unsafe { std::ffi::CStr::from_ptr(name) }.to_string_lossy();
        let Some(entry) = crate::find(&name) else {
            eprintln!("cuda-emu: no emulated entry point named {name}");
            return Err(CUresult::CUDA_ERROR_NOT_FOUND);
        };
        let resources = module
            .resources
            .get(entry.name)
            .copied()
            .unwrap_or_default();
        let function = Function {
            entry,
            static_shared: resources.static_shared,
            registers: resources.registers,
            max_dynamic_shared: Mutex::new(crate::limits::DEFAULT_SHARED_BYTES),
        };
        // SAFETY: caller's out-pointer.
        unsafe { put(hfunc, leak(function).cast()) }
    })())
}

/// `cuFuncSetAttribute`: `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES` raises the entry's
/// dynamic shared memory limit (up to the opt-in maximum); other attributes are accepted and
/// ignored.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncSetAttribute(
    hfunc: CUfunction,
    attrib: CUfunction_attribute,
    value: c_int,
) -> CUresult {
    status((|| {
        // SAFETY: a function handle.
        let function: &Function = unsafe { handle(hfunc.cast())? };
        match attrib {
            CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => {
                let value =
                    usize::try_from(value).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
                if value + function.static_shared > crate::limits::MAX_SHARED_BYTES_OPTIN {
                    return Err(CUresult::CUDA_ERROR_INVALID_VALUE);
                }
                *function
                    .max_dynamic_shared
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()) = value;
                Ok(())
            }
            _ => Ok(()),
        }
    })())
}

/// `cuFuncGetAttribute`: the entry's `__launch_bounds__` thread limit, static and maximum
/// dynamic shared memory, registers per thread (from the CUBIN; 0 for a PTX image), PTX and
/// binary version (9.0); 0 for other attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuFuncGetAttribute(
    pi: *mut c_int,
    attrib: CUfunction_attribute,
    hfunc: CUfunction,
) -> CUresult {
    use CUfunction_attribute::*;
    status((|| {
        // SAFETY: a function handle.
        let function: &Function = unsafe { handle(hfunc.cast())? };
        let value = match attrib {
            CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK => function.entry.max_threads as c_int,
            CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES => function.static_shared as c_int,
            CU_FUNC_ATTRIBUTE_NUM_REGS => function.registers as c_int,
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES => *function
                .max_dynamic_shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                as c_int,
            CU_FUNC_ATTRIBUTE_PTX_VERSION | CU_FUNC_ATTRIBUTE_BINARY_VERSION => 90,
            _ => 0,
        };
        // SAFETY: caller's out-pointer.
        unsafe { put(pi, value) }
    })())
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessor`: as the `WithFlags` form with no flags.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessor(
    num_blocks: *mut c_int,
    func: CUfunction,
    block_size: c_int,
    dynamic_smem_size: usize,
) -> CUresult {
    // SAFETY: same contract.
    unsafe {
        cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
            num_blocks,
            func,
            block_size,
            dynamic_smem_size,
            0,
        )
    }
}

/// `cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags`: the blocks of `block_size` threads
/// and `dynamic_smem_size` bytes of dynamic shared memory that one sm_90 SM holds at once, by the
/// CUDA occupancy calculator's rules ([`crate::limits::resident_blocks`]) on the entry's
/// registers and static shared memory from its CUBIN. A block over the entry's
/// `__launch_bounds__` or the device's limits fits 0 times. The flags (caching override) change
/// nothing here: no shared memory is carved for L1.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(
    num_blocks: *mut c_int,
    func: CUfunction,
    block_size: c_int,
    dynamic_smem_size: usize,
    _flags: std::ffi::c_uint,
) -> CUresult {
    status((|| {
        // SAFETY: a function handle.
        let function: &Function = unsafe { handle(func.cast())? };
        let threads = u32::try_from(block_size).map_err(|_| CUresult::CUDA_ERROR_INVALID_VALUE)?;
        let blocks = if threads > function.entry.max_threads {
            0
        } else {
            crate::limits::resident_blocks(
                threads,
                function.registers,
                function.static_shared.saturating_add(dynamic_smem_size),
            )
        };
        // SAFETY: caller's out-pointer.
        unsafe { put(num_blocks, blocks as c_int) }
    })())
}

// ---- Launches ----------------------------------------------------------------------------------

fn schedule_from_env(var: &str) -> Option<Schedule> {
    let value = std::env::var(var).ok().filter(|v| !v.trim().is_empty())?;
    match value.parse() {
        Ok(schedule) => Some(schedule),
        Err(why) => {
            eprintln!("cuda-emu: {var}: {why}");
            std::process::exit(2);
        }
    }
}

/// The schedule of every launch and the one it is compared with (`CUDA_EMU_SCHEDULE`,
/// `CUDA_EMU_COMPARE`).
fn schedules() -> (Schedule, Option<Schedule>) {
    static SCHEDULES: OnceLock<(Schedule, Option<Schedule>)> = OnceLock::new();
    *SCHEDULES.get_or_init(|| {
        (
            schedule_from_env("CUDA_EMU_SCHEDULE").unwrap_or(Schedule::RoundRobin),
            schedule_from_env("CUDA_EMU_COMPARE"),
        )
    })
}

/// Appends the first launch of each entry in this process to the coverage file.
fn record_coverage(entry: &Entry) {
    static SEEN: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let Some(dir) = std::env::var_os("CUDA_EMU_COVERAGE_DIR") else {
        return;
    };
    let mut seen = SEEN.lock().unwrap_or_else(|p| p.into_inner());
    if !seen.get_or_insert_with(HashSet::new).insert(entry.name) {
        return;
    }
    let path = std::path::Path::new(&dir).join(format!("launched-{}.txt", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| writeln!(f, "{}", entry.name));
    if let Err(e) = written {
        eprintln!("cuda-emu: writing coverage to {}: {e}", path.display());
    }
}

/// Runs one launch under the configured schedule(s) and checks the guard zones.
///
/// # Safety
/// cuLaunchKernel's contract for `params`.
unsafe fn run(
    entry: &'static Entry,
    config: &LaunchConfig,
    params: *mut *mut c_void,
) -> std::result::Result<(), Fault> {
    let (schedule, compare) = schedules();
    let guards = |result: std::result::Result<(), Fault>| {
        result?;
        memory::check_guards(None)
            .map_err(|why| Fault::new(FaultKind::OutOfBounds, format!("{}: {why}", entry.name)))
    };
    // SAFETY (all three launches): `params` is cuLaunchKernel's `kernelParams`, which the caller
    // vouches for (this function's contract); the snapshot's restore rewrites the contents of the
    // allocations, never frees or moves them, so the pointer arguments stay valid for the second
    // run; `crate::launch` serialises the launches themselves.
    match compare {
        // SAFETY: see above.
        None => guards(unsafe { crate::launch(entry, config, params, schedule) }),
        Some(other) => {
            // Kept from launch to launch (their buffers: see Snapshot::retake); the caller holds
            // the device exclusively, so no other launch uses them meanwhile.
            static SNAPSHOTS: Mutex<(memory::Snapshot, memory::Snapshot)> =
                Mutex::new((memory::Snapshot::EMPTY, memory::Snapshot::EMPTY));
            let mut snapshots = SNAPSHOTS.lock().unwrap_or_else(|p| p.into_inner());
            let (before, first) = &mut *snapshots;
            before.retake();
            // SAFETY: see above.
            guards(unsafe { crate::launch(entry, config, params, schedule) })?;
            first.retake();
            before.restore();
            // SAFETY: see above.
            guards(unsafe { crate::launch(entry, config, params, other) })?;
            match first.first_difference_from_live() {
                None => Ok(()),
                Some((allocation, offset, a, b)) => Err(Fault::new(
                    FaultKind::Race,
                    format!(
                        "{} (grid {}, block {}): a race: schedules {schedule} and {other} leave \
                         different memory (allocation {allocation:#x}, byte {offset}: {a:#04x} vs \
                         {b:#04x})",
                        entry.name, config.grid, config.block
                    ),
                )),
            }
        }
    }
}

/// `cuLaunchKernel`: runs the entry on the CPU under `CUDA_EMU_SCHEDULE` (and again under
/// `CUDA_EMU_COMPARE`, failing on any difference), checks its limits and guard zones, and
/// returns the GPU's error for a fault, the emulator's message kept for [`cuGetErrorString`].
/// Only the `kernelParams` form is modelled, not `extra`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuLaunchKernel(
    f: CUfunction,
    gridDimX: c_uint,
    gridDimY: c_uint,
    gridDimZ: c_uint,
    blockDimX: c_uint,
    blockDimY: c_uint,
    blockDimZ: c_uint,
    sharedMemBytes: c_uint,
    _hStream: CUstream,
    kernelParams: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    // SAFETY: a function handle.
    let function: &Function = match unsafe { handle(f.cast()) } {
        Ok(function) => function,
        Err(code) => return code,
    };
    if kernelParams.is_null() && function.entry.params > 0 {
        // The `extra` packed-buffer form is not modelled (cudarc passes kernelParams).
        return if extra.is_null() {
            CUresult::CUDA_ERROR_INVALID_VALUE
        } else {
            CUresult::CUDA_ERROR_NOT_SUPPORTED
        };
    }
    let config = LaunchConfig {
        grid: crate::Dim3::new(gridDimX, gridDimY, gridDimZ),
        block: crate::Dim3::new(blockDimX, blockDimY, blockDimZ),
        dynamic_shared_bytes: sharedMemBytes as usize,
        static_shared_bytes: function.static_shared,
        max_dynamic_shared_bytes: *function
            .max_dynamic_shared
            .lock()
            .unwrap_or_else(|p| p.into_inner()),
    };
    record_coverage(function.entry);
    if dry_run() {
        // Checked as a real launch is, logged, not run.
        if let Err(fault) = config.check(function.entry) {
            return record_fault(&fault);
        }
        log_launch(function.entry, &config, false, None);
        return CUresult::CUDA_SUCCESS;
    }
    let _device = memory::exclusive();
    // SAFETY: the caller's kernel arguments.
    let result = unsafe { run(function.entry, &config, kernelParams) };
    let traffic = crate::traffic::take_last().filter(|_| result.is_ok());
    log_launch(function.entry, &config, true, traffic.as_ref());
    match result {
        Ok(()) => CUresult::CUDA_SUCCESS,
        Err(fault) => record_fault(&fault),
    }
}

/// Whether launches are dry runs: `CUDA_EMU_DRY_RUN=1` at load, then [`cuda_emu_set_dry_run`].
static DRY_RUN: AtomicBool = AtomicBool::new(false);

fn dry_run_from_env() {
    static READ: Once = Once::new();
    READ.call_once(|| {
        if std::env::var("CUDA_EMU_DRY_RUN").is_ok_and(|v| v.trim() == "1") {
            DRY_RUN.store(true, Ordering::SeqCst);
        }
    });
}

pub(crate) fn dry_run() -> bool {
    dry_run_from_env();
    DRY_RUN.load(Ordering::SeqCst)
}

/// Turns dry runs on (`on != 0`) or off and returns the previous setting (1 or 0). In a dry run
/// `cuLaunchKernel` checks the launch against its limits as usual and logs it (`"ran":false`)
/// but does not run it, so a caller can collect the launches of a workload in no time.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_emu_set_dry_run(on: c_int) -> c_int {
    dry_run_from_env();
    c_int::from(DRY_RUN.swap(on != 0, Ordering::SeqCst))
}

/// The launch log a program set with [`cuda_emu_set_launch_log`]; it takes the place of
/// `CUDA_EMU_LEDGER` while set.
static LAUNCH_LOG: Mutex<Option<std::path::PathBuf>> = Mutex::new(None);

/// Sends the launch log to `path` (a NUL-terminated file name, copied), or, with a null `path`,
/// back to `CUDA_EMU_LEDGER` (none when unset). Returns 0, or 1 for a path that is not UTF-8. A
/// program in the same process (tileops's bench, which finds this with `dlsym`) collects the
/// launches of one call this way without setting an environment variable under running threads.
///
/// # Safety
/// `path` is null or a NUL-terminated string valid for the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_set_launch_log(path: *const c_char) -> c_int {
    let new = if path.is_null() {
        None
    } else {
        // SAFETY: the caller's NUL-terminated string (the function's contract).
        match unsafe { std::ffi::CStr::from_ptr(path) }.to_str() {
            Ok(p) => Some(std::path::PathBuf::from(p)),
            Err(_) => return 1,
        }
    };
    // A log wants the traffic figures (in the instrumented build); back on the environment's
    // log, count as it says.
    crate::traffic::set_counting(
        new.is_some() || std::env::var_os("CUDA_EMU_LEDGER").is_some_and(|p| !p.is_empty()),
    );
    *LAUNCH_LOG.lock().unwrap_or_else(|p| p.into_inner()) = new;
    0
}

/// Appends the launch's line to `CUDA_EMU_LEDGER`, when set, in one write (lines of concurrent
/// processes do not interleave). A write error is printed, not returned: the log never fails a
/// launch.
fn log_launch(
    entry: &Entry,
    config: &LaunchConfig,
    ran: bool,
    traffic: Option<&crate::gate::TrafficRecord>,
) {
    let set = LAUNCH_LOG.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let Some(path) = set
        .map(std::ffi::OsString::from)
        .or_else(|| std::env::var_os("CUDA_EMU_LEDGER").filter(|p| !p.is_empty()))
    else {
        return;
    };
    let (g, b) = (config.grid, config.block);
    let line = format!(
        "{{\"entry\":{},\"grid\":[{},{},{}],\"block\":[{},{},{}],\"dynamic_smem\":{},\"ran\":{ran},\"tid\":{},\"traffic\":{}}}\n",
        crate::gate::json_string(entry.name),
        g.x,
        g.y,
        g.z,
        b.x,
        b.y,
        b.z,
        config.dynamic_shared_bytes,
        // SAFETY: gettid has no preconditions.
        unsafe { libc::gettid() },
        traffic.map_or_else(|| "null".to_owned(), crate::gate::TrafficRecord::to_json),
    );
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()).and_then(|()| f.flush()));
    if let Err(e) = written {
        eprintln!(
            "cuda-emu: writing the launch log {}: {e}",
            std::path::Path::new(&path).display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_calls_candle_links_answer_as_the_driver_does() {
        // cuModuleLoad: a missing file, then a PTX text from a file.
        let mut module: CUmodule = std::ptr::null_mut();
        let missing = CString::new("/nonexistent/cuda-emu/module.ptx").unwrap();
        // SAFETY: valid out-pointer and NUL-terminated path.
        let status = unsafe { cuModuleLoad(&mut module, missing.as_ptr()) };
        assert_eq!(status, CUresult::CUDA_ERROR_FILE_NOT_FOUND);
        let path = std::env::temp_dir().join(format!("cuda-emu-{}.ptx", std::process::id()));
        std::fs::write(&path, ".version 9.0\n.target sm_90\n").unwrap();
        let name = CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: as above.
        let status = unsafe { cuModuleLoad(&mut module, name.as_ptr()) };
        std::fs::remove_file(&path).unwrap();
        assert_eq!(status, CUresult::CUDA_SUCCESS);
        // SAFETY: a handle of cuModuleLoad.
        assert_eq!(unsafe { cuModuleUnload(module) }, CUresult::CUDA_SUCCESS);

        // cuMemcpyPeerAsync: one device, one address space: a range-checked copy.
        let (mut src, mut dst) = (0, 0);
        // SAFETY: valid out-pointers; the copies stay within the 16-byte allocations.
        unsafe {
            assert_eq!(cuMemAlloc_v2(&mut src, 16), CUresult::CUDA_SUCCESS);
            assert_eq!(cuMemAlloc_v2(&mut dst, 16), CUresult::CUDA_SUCCESS);
            let bytes: Vec<u8> = (0..16).collect();
            assert_eq!(
                cuMemcpyHtoD_v2(src, bytes.as_ptr().cast(), 16),
                CUresult::CUDA_SUCCESS
            );
            let null = std::ptr::null_mut();
            let status = cuMemcpyPeerAsync(dst, null, src, null, 16, std::ptr::null_mut());
            assert_eq!(status, CUresult::CUDA_SUCCESS);
            let mut back = vec![0u8; 16];
            assert_eq!(
                cuMemcpyDtoH_v2(back.as_mut_ptr().cast(), dst, 16),
                CUresult::CUDA_SUCCESS
            );
            assert_eq!(back, bytes);
            let status = cuMemcpyPeerAsync(dst, null, src, null, 17, std::ptr::null_mut());
            assert_eq!(status, CUresult::CUDA_ERROR_INVALID_VALUE);
        }

        // The primary context is released, never destroyed.
        assert_eq!(
            cuCtxDestroy_v2(primary()),
            CUresult::CUDA_ERROR_INVALID_CONTEXT
        );
    }

    #[test]
    fn register_counts_are_read_from_the_info_records() {
        // The `.nv.info` section of an NVRTC 13.0 sm_90 CUBIN of two kernels: `small` (symbol
        // 10, 8 registers) and `big` (symbol 9, 128 registers), with the other records
        // (EIATTR_MAX_STACK_SIZE 0x11, EIATTR_MIN_STACK_SIZE 0x12) around them.
        let info: Vec<u8> = [
            "042f08000a00000008000000",
            "041108000a00000000000000",
            "042f08000900000080000000",
            "041108000900000000000000",
        ]
        .concat()
        .as_bytes()
        .chunks(2)
        .filter(|pair| pair.len() == 2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).unwrap(), 16).unwrap())
        .collect();
        assert_eq!(register_counts(&info), vec![(10, 8), (9, 128)]);
        // Other formats are stepped over; a truncated record ends the walk.
        assert_eq!(
            register_counts(&[0x01, 0x05, 0x03, 0x1b, 0xff, 0x00]),
            vec![]
        );
        assert_eq!(register_counts(&[0x04, 0x2f, 0x08, 0x00, 0x0a]), vec![]);
    }

    #[test]
    fn an_elf_image_spans_its_program_headers_and_section_data() {
        // A 64-byte header naming 2 section headers of 64 bytes at 1000 and 3 program headers of
        // 56 bytes at 1128 (after the sections, as in NVIDIA's CUBINs).
        let mut header = vec![0u8; 64];
        header[0x20..0x28].copy_from_slice(&1128u64.to_le_bytes());
        header[0x28..0x30].copy_from_slice(&1000u64.to_le_bytes());
        header[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        header[0x38..0x3A].copy_from_slice(&3u16.to_le_bytes());
        header[0x3A..0x3C].copy_from_slice(&64u16.to_le_bytes());
        header[0x3C..0x3E].copy_from_slice(&2u16.to_le_bytes());
        assert_eq!(elf_headers_end(&header), 1128 + 3 * 56);
        // Section 0 holds bytes 200..1200 (past the headers); section 1 is NOBITS and huge.
        let mut image = vec![0u8; 1296];
        image[..64].copy_from_slice(&header);
        let section = |at: usize, kind: u32, offset: u64, size: u64, image: &mut Vec<u8>| {
            image[at + 4..at + 8].copy_from_slice(&kind.to_le_bytes());
            image[at + 0x18..at + 0x20].copy_from_slice(&offset.to_le_bytes());
            image[at + 0x20..at + 0x28].copy_from_slice(&size.to_le_bytes());
        };
        section(1000, 1, 200, 1400, &mut image);
        section(1064, 8, 0, 1 << 40, &mut image);
        assert_eq!(elf_sections_end(&header, &image), 1600);
    }

    #[test]
    fn resident_blocks_follow_the_occupancy_rules() {
        use crate::limits::resident_blocks;
        // 1024 threads at 48 registers: 42 warps' worth of registers, 1 block.
        assert_eq!(resident_blocks(1024, 48, 0), 1);
        // 64 threads at 16 registers: the 32-block limit.
        assert_eq!(resident_blocks(64, 16, 0), 32);
        // 100 KB of shared memory (+1 KB reserved): 2 fit in 228 KB.
        assert_eq!(resident_blocks(128, 32, 100 * 1024), 2);
        // Unknown registers limit nothing: the warps do.
        assert_eq!(resident_blocks(512, 0, 0), 4);
        // What cannot be resident at all.
        assert_eq!(resident_blocks(0, 32, 0), 0);
        assert_eq!(resident_blocks(2048, 32, 0), 0);
        assert_eq!(resident_blocks(1024, 255, 0), 0);
        assert_eq!(resident_blocks(128, 32, 228 * 1024), 0);
    }
}
