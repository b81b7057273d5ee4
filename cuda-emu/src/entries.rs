//! The kernels compiled into the emulator: one entry per `extern "C" __global__` function of
//! every kernel file, found by build.rs and registered by the generated C++ (cpp/entries.hpp).

use std::collections::HashMap;
use std::ffi::{CStr, c_char, c_void};
use std::sync::OnceLock;

/// The C++ side of one entry (layout of `CudaEmuEntry` in cpp/entries.hpp).
#[repr(C)]
struct RawEntry {
    name: *const c_char,
    file: *const c_char,
    max_threads: i32,
    params: i32,
    invoke: unsafe extern "C" fn(*mut *mut c_void),
}

unsafe extern "C" {
    fn cuda_emu_entry_table(count: *mut usize) -> *const RawEntry;
}

/// A kernel entry point the emulator can launch.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    /// The entry's name (`rms_norm_rows_v4_f32`).
    pub name: &'static str,
    /// The kernel file it comes from (`rms_norm.cu`).
    pub file: &'static str,
    /// `__launch_bounds__`' maximum threads per block (1024 when the entry declares none).
    pub max_threads: u32,
    /// How many parameters the kernel takes.
    pub params: usize,
    /// Calls the kernel with cuLaunchKernel-style arguments (pointers to each parameter).
    pub(crate) invoke: unsafe extern "C" fn(*mut *mut c_void),
}

fn table() -> &'static (Vec<Entry>, HashMap<&'static str, usize>) {
    static TABLE: OnceLock<(Vec<Entry>, HashMap<&'static str, usize>)> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut count = 0usize;
        // SAFETY: the generated table is a static array of `count` entries with static strings.
        let raw = unsafe { std::slice::from_raw_parts(cuda_emu_entry_table(&mut count), count) };
        let text = |p: *const c_char| -> &'static str {
            // SAFETY: string literals of the generated C++.
            unsafe { CStr::from_ptr(p) }.to_str().unwrap_or("?")
        };
        let entries: Vec<Entry> = raw
            .iter()
            .map(|e| Entry {
                name: text(e.name),
                file: text(e.file),
                max_threads: if e.max_threads > 0 {
                    e.max_threads as u32
                } else {
                    1024
                },
                params: e.params.max(0) as usize,
                invoke: e.invoke,
            })
            .collect();
        let by_name = entries
            .iter()
            .enumerate()
            .map(|(i, e)| (e.name, i))
            .collect();
        (entries, by_name)
    })
}

/// Every entry point compiled into the emulator.
///
/// ```
/// let entries = cuda_emu::entries();
/// assert!(entries.iter().any(|e| e.name == "rms_norm_rows_v4_f32" && e.file == "rms_norm.cu"));
/// ```
pub fn entries() -> &'static [Entry] {
    &table().0
}

/// The entry point called `name`.
pub fn find(name: &str) -> Option<&'static Entry> {
    let (entries, by_name) = table();
    by_name.get(name).map(|&i| &entries[i])
}

/// Entry points that are host stand-ins rather than the kernel source (inline PTX cannot run on
/// the CPU), with the reason: named in the coverage line.
pub fn stand_ins() -> &'static [(&'static str, &'static str)] {
    &[("bench_spin", "host stand-in: inline PTX %globaltimer")]
}
