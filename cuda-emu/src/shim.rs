//! The functions the kernels' shim header (include/cuda_emu.h) calls: every one runs on a kernel
//! fiber and either suspends it ([`crate::fiber::suspend`]) or answers at once.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

use crate::fiber::{
    Collective, CollectiveKind, Site, Suspend, ThreadBuiltins, preempt_at_load, suspend,
};

/// The running CUDA thread's built-ins, read by the shim's `threadIdx` & co.
#[unsafe(no_mangle)]
pub static cuda_emu_current: AtomicPtr<ThreadBuiltins> = AtomicPtr::new(std::ptr::null_mut());

/// The launch's dynamic shared memory (null when it has none).
static DYNAMIC_SHARED: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
/// Its size in bytes.
static DYNAMIC_SHARED_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Points `cuda_emu_current` at `builtins`.
///
/// # Safety
/// `builtins` must stay valid while the fiber it describes runs.
pub(crate) unsafe fn set_current(builtins: *const ThreadBuiltins) {
    cuda_emu_current.store(builtins.cast_mut(), Ordering::Relaxed);
}

/// Sets the dynamic shared memory the next blocks see.
pub(crate) fn set_dynamic_shared(buffer: *mut u8, bytes: usize) {
    DYNAMIC_SHARED.store(buffer, Ordering::Relaxed);
    DYNAMIC_SHARED_BYTES.store(bytes, Ordering::Relaxed);
}

/// `__syncthreads()`.
///
/// # Safety
/// Called by kernel code on a fiber.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_syncthreads(file: *const c_char, line: c_int) {
    // SAFETY: kernel code runs on a fiber.
    unsafe { suspend(Suspend::Barrier(Site::new(file, line))) };
}

/// `__syncwarp(mask)`.
///
/// # Safety
/// Called by kernel code on a fiber.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_syncwarp(mask: u32, file: *const c_char, line: c_int) {
    let op = Collective {
        kind: CollectiveKind::Syncwarp,
        mask,
        value: 0,
        b: 0,
        c: 0,
        site: Site::new(file, line),
        words: std::ptr::null(),
        out: std::ptr::null_mut(),
    };
    // SAFETY: kernel code runs on a fiber.
    unsafe { suspend(Suspend::Collective(op)) };
}

/// `shfl.sync` in `mode` (0 idx, 1 up, 2 down, 3 bfly) with operands `b` and `c`.
///
/// # Safety
/// Called by kernel code on a fiber.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_shfl(
    mode: c_int,
    mask: u32,
    value: u32,
    b: c_int,
    c: c_int,
    _width: c_int,
    file: *const c_char,
    line: c_int,
) -> u32 {
    let op = Collective {
        kind: CollectiveKind::Shuffle(mode),
        mask,
        value,
        b,
        c,
        site: Site::new(file, line),
        words: std::ptr::null(),
        out: std::ptr::null_mut(),
    };
    // SAFETY: kernel code runs on a fiber.
    unsafe { suspend(Suspend::Collective(op)) }
}

/// `__ballot_sync(mask, predicate)`.
///
/// # Safety
/// Called by kernel code on a fiber.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_ballot(
    mask: u32,
    predicate: c_int,
    file: *const c_char,
    line: c_int,
) -> u32 {
    let op = Collective {
        kind: CollectiveKind::Ballot,
        mask,
        value: u32::from(predicate != 0),
        b: 0,
        c: 0,
        site: Site::new(file, line),
        words: std::ptr::null(),
        out: std::ptr::null_mut(),
    };
    // SAFETY: kernel code runs on a fiber.
    unsafe { suspend(Suspend::Collective(op)) }
}

/// A read-only load (`__ldg`): a preemption point under the random schedule, taken one time in
/// four so that fibers interleave between loads without switching at every one.
///
/// # Safety
/// Called by kernel code on a fiber.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_load_point(_file: *const c_char, _line: c_int) {
    if preempt_at_load() {
        // SAFETY: kernel code runs on a fiber.
        unsafe { suspend(Suspend::Preempt) };
    }
}

/// A warp exchange (`tileops_mma.cuh`'s mma and ldmatrix): every lane of the warp deposits the
/// `count` words at `words`; each gets back the address of all 32 lanes' words, lane-major (lane
/// `l`'s at `l * count`), readable until its next synchronising call.
///
/// # Safety
/// Called by kernel code on a fiber; `words` points at `count` words (at most 8).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_warp_exchange(
    op: c_int,
    words: *const u32,
    count: c_int,
    file: *const c_char,
    line: c_int,
) -> *const u32 {
    let mut gathered: *const u32 = std::ptr::null();
    let op = Collective {
        kind: CollectiveKind::Exchange(op),
        mask: u32::MAX,
        value: 0,
        b: count,
        c: 0,
        site: Site::new(file, line),
        words,
        out: &mut gathered,
    };
    // SAFETY: kernel code runs on a fiber; `gathered` outlives the suspension, and the scheduler
    // writes it before resuming this fiber.
    unsafe { suspend(Suspend::Collective(op)) };
    gathered
}

/// Whether the `bytes` bytes at `p` lie in shared memory: the static `cuda_emu_shared` section
/// or the launch's dynamic shared memory.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_emu_is_shared(p: *const c_void, bytes: usize) -> c_int {
    let start = p as usize;
    let Some(end) = start.checked_add(bytes) else {
        return 0;
    };
    let (mut lo, mut hi) = (0usize, 0usize);
    // SAFETY: two valid out-pointers.
    unsafe { crate::traffic::cuda_emu_shared_bounds(&mut lo, &mut hi) };
    let dynamic = DYNAMIC_SHARED.load(Ordering::Relaxed) as usize;
    let dynamic_end = dynamic + DYNAMIC_SHARED_BYTES.load(Ordering::Relaxed);
    let inside = |lo: usize, hi: usize| lo != 0 && start >= lo && end <= hi;
    c_int::from(inside(lo, hi) || inside(dynamic, dynamic_end))
}

/// `cp.async` (16 bytes): the shim checked `dst` (16-byte aligned, in shared memory), read the
/// source (or zeros) into `data` and poisoned `dst`; `data` lands at `dst` later
/// ([`crate::async_copy`]).
///
/// # Safety
/// Called by kernel code on a fiber; `data` points at 16 readable bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_cp_async(
    dst: *mut c_void,
    data: *const c_void,
    _file: *const c_char,
    _line: c_int,
) {
    let mut bytes = [0u8; 16];
    // SAFETY: the caller passes 16 readable bytes.
    unsafe { std::ptr::copy_nonoverlapping(data.cast::<u8>(), bytes.as_mut_ptr(), 16) };
    crate::async_copy::issue(dst.cast(), bytes);
}

/// `cp.async.commit_group`.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_emu_cp_async_commit() {
    crate::async_copy::commit();
}

/// `cp.async.wait_group newest`.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_emu_cp_async_wait(newest: c_int, file: *const c_char, line: c_int) {
    if newest < 0 {
        // SAFETY: kernel code runs on a fiber.
        unsafe {
            cuda_emu_fail(
                c"cp.async.wait_group with a negative count".as_ptr(),
                file,
                line,
            )
        };
    }
    crate::async_copy::wait(newest as usize);
}

/// The launch's dynamic shared memory.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_emu_dynamic_shared() -> *mut c_void {
    DYNAMIC_SHARED.load(Ordering::Relaxed).cast()
}

/// Fails the launch: a rule the shim itself checks (a misaligned access, from the alignment
/// sanitizer's handler in cpp/runtime.cpp).
///
/// # Safety
/// Called by kernel code on a fiber; `what` is a NUL-terminated message.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cuda_emu_fail(what: *const c_char, file: *const c_char, line: c_int) -> ! {
    let what = if what.is_null() {
        "failure".into()
    } else {
        // SAFETY: the caller passes a NUL-terminated message.
        unsafe { std::ffi::CStr::from_ptr(what) }.to_string_lossy()
    };
    let message = format!("{what} at {}", Site::new(file, line));
    // SAFETY: kernel code runs on a fiber; the scheduler never resumes a failed fiber.
    unsafe { suspend(Suspend::Fail(message)) };
    eprintln!("cuda-emu: a failed fiber was resumed");
    std::process::abort();
}
