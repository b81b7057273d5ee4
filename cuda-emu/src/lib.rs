//! cuda-emu runs tileops's CUDA kernels on the CPU, so that every kernel is tested on machines
//! without a GPU.
//!
//! The kernel sources in `tileops/kernels/`, unchanged, are compiled by build.rs as host C++
//! against a shim header (`include/cuda_emu.h`) and run here: blocks one after another, every
//! CUDA thread of a block a fiber of its own, switched at barriers, warp collectives and (under
//! the random schedule) loads. A launch fails, naming the kernel, block, thread and source line,
//! on a divergent `__syncthreads`, a deadlock, a shuffle mask that does not match the lanes
//! executing it (or an `mma`/`ldmatrix` of `tileops_mma.cuh` that not every lane of the warp
//! executes), a misaligned access (an `ldmatrix` row or a `cp.async` operand included, which must
//! also be in shared memory), a launch outside its limits, or a write outside a device
//! allocation (see [`driver`]; an AddressSanitizer build catches reads too).
//!
//! The crate is also a stand-in CUDA driver: built as a cdylib and installed as `libcuda.so.1`
//! (plus `libcublas.so.13` and `libcublasLt.so.13`), it serves cudarc's and NVRTC's driver calls,
//! so tileops's own code paths run unchanged. It also defines what a program linked against
//! candle-core's CUDA backend needs to start (cuRAND's host API, the strided-batched GEMMs,
//! `cuModuleLoad`, `cuMemcpyPeerAsync`, `cuCtxDestroy_v2`), so that such a program can link
//! against it and run tileops's kernels beside candle. See the crate README for what it models and what
//! it does not.
//!
//! ```
//! use cuda_emu::{Dim3, LaunchConfig, Schedule};
//!
//! // A kernel of the emulator's self-test file: out[i] = in[i] * 2 over a grid-stride loop.
//! let entry = cuda_emu::find("planted_scale2").unwrap();
//! let input: Vec<f32> = (0..100).map(|i| i as f32).collect();
//! let mut output = vec![0f32; 100];
//! let (mut x, mut y, mut n) = (input.as_ptr(), output.as_mut_ptr(), 100i32);
//! let mut params = [
//!     &mut x as *mut _ as *mut std::ffi::c_void,
//!     &mut y as *mut _ as *mut std::ffi::c_void,
//!     &mut n as *mut _ as *mut std::ffi::c_void,
//! ];
//! let config = LaunchConfig::new(Dim3::x(2), Dim3::x(32));
//! unsafe { cuda_emu::launch(entry, &config, params.as_mut_ptr(), Schedule::RoundRobin) }.unwrap();
//! assert_eq!(output[99], 198.0);
//! ```

mod async_copy;
mod blas;
pub mod check;
pub mod driver;
mod entries;
mod fiber;
pub mod gate;
mod memory;
mod rand;
pub mod schedule;
mod shared_section;
mod shim;
pub mod traffic;

use std::ffi::c_void;
use std::fmt;
use std::sync::Mutex;

pub use entries::{Entry, entries, find, stand_ins};
pub use schedule::Schedule;

use fiber::StackPool;

/// A grid or block extent, or a thread or block index (CUDA's `dim3`/`uint3`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// The fastest-varying axis (`threadIdx.x`, `blockIdx.x`, `blockDim.x`, `gridDim.x`).
    pub x: u32,
    /// The middle axis.
    pub y: u32,
    /// The slowest-varying axis.
    pub z: u32,
}

impl Dim3 {
    /// `(x, 1, 1)`.
    pub fn x(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }

    /// `(x, y, z)`.
    pub fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }

    /// `x * y * z`.
    pub fn count(self) -> u64 {
        u64::from(self.x) * u64::from(self.y) * u64::from(self.z)
    }

    /// The index whose linear position (x fastest) is `i`.
    pub(crate) fn unlinear(self, i: u64) -> Dim3 {
        let (x, y) = (u64::from(self.x.max(1)), u64::from(self.y.max(1)));
        Dim3 {
            x: (i % x) as u32,
            y: (i / x % y) as u32,
            z: (i / x / y) as u32,
        }
    }

    pub(crate) fn linear_seed(self) -> u64 {
        (u64::from(self.x) << 40) ^ (u64::from(self.y) << 20) ^ u64::from(self.z)
    }
}

impl fmt::Display for Dim3 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({},{},{})", self.x, self.y, self.z)
    }
}

/// How a kernel is launched.
#[derive(Clone, Copy, Debug)]
pub struct LaunchConfig {
    /// Blocks in the grid (`gridDim`).
    pub grid: Dim3,
    /// Threads in each block (`blockDim`).
    pub block: Dim3,
    /// Dynamic shared memory of each block.
    pub dynamic_shared_bytes: usize,
    /// The entry's static shared memory (from its CUBIN, when the driver has it).
    pub static_shared_bytes: usize,
    /// The dynamic shared memory the entry may use: 48 KiB unless raised with
    /// `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub max_dynamic_shared_bytes: usize,
}

// sm_90's occupancy rule, the kernel ledger's (standard library only, so included as a module
// rather than a dependency on the bench crate).
#[path = "../../tileops-bench/src/ledger/occupancy.rs"]
#[allow(dead_code)]
mod occupancy;

/// The limits of the modelled GPU (an H200, compute capability 9.0).
pub mod limits {
    /// Threads in one block, all axes together.
    pub const MAX_THREADS_PER_BLOCK: u32 = 1024;
    /// The largest `blockDim` on each axis (x, y, z).
    pub const MAX_BLOCK_DIM: [u32; 3] = [1024, 1024, 64];
    /// The largest `gridDim` on each axis (x, y, z).
    pub const MAX_GRID_DIM: [u32; 3] = [i32::MAX as u32, 65535, 65535];
    /// Shared memory a block gets without opting in.
    pub const DEFAULT_SHARED_BYTES: usize = 48 * 1024;
    /// The opt-in maximum per block on sm_90.
    pub const MAX_SHARED_BYTES_OPTIN: usize = 227 * 1024;

    /// Blocks of `threads` threads using `registers` registers per thread and `shared_bytes` of
    /// shared memory (static + dynamic) that one sm_90 SM holds at once, by the CUDA occupancy
    /// calculator's rules: registers are allocated per thread in multiples of 8 and per warp in
    /// granules of 256, and the block count is the least of what the registers, the warps, the
    /// shared memory (with 1 KB reserved per block) and the 32-block limit allow. 0 when one
    /// block does not fit. `registers` 0 (not known, as for a PTX image) limits nothing.
    ///
    /// The rule is the kernel ledger's own (`tileops-bench/src/ledger/occupancy.rs`, included
    /// here as a module: standard library only), so the grids the emulator's occupancy answers
    /// size and the ledger's resident CTAs cannot disagree.
    ///
    /// ```
    /// use cuda_emu::limits::resident_blocks;
    /// // 256 threads at 38 registers: 40 per thread, 1280 per warp, 51 warps: 6 blocks.
    /// assert_eq!(resident_blocks(256, 38, 0), 6);
    /// // At 32 registers the 64-warp limit binds: 8 blocks.
    /// assert_eq!(resident_blocks(256, 32, 0), 8);
    /// ```
    pub fn resident_blocks(threads: u32, registers: u32, shared_bytes: usize) -> u32 {
        let shared = u32::try_from(shared_bytes).unwrap_or(u32::MAX);
        // 0 registers: the fewest the rule allocates (8 per thread), which never binds.
        crate::occupancy::ctas_per_sm(&crate::occupancy::SM90, threads, registers, shared)
            .unwrap_or(0)
    }
}

impl LaunchConfig {
    /// `grid` blocks of `block` threads, no dynamic shared memory.
    pub fn new(grid: Dim3, block: Dim3) -> LaunchConfig {
        LaunchConfig {
            grid,
            block,
            dynamic_shared_bytes: 0,
            static_shared_bytes: 0,
            max_dynamic_shared_bytes: limits::DEFAULT_SHARED_BYTES,
        }
    }

    /// Checks the launch against the GPU's limits and the entry's `__launch_bounds__`.
    pub fn check(&self, entry: &Entry) -> Result<(), Fault> {
        let bad = |why: String| {
            Err(Fault::new(
                FaultKind::InvalidLaunch,
                format!("launch of {} outside its limits: {why}", entry.name),
            ))
        };
        let block = [self.block.x, self.block.y, self.block.z];
        let grid = [self.grid.x, self.grid.y, self.grid.z];
        if block.contains(&0) || grid.contains(&0) {
            return bad(format!("empty grid {} or block {}", self.grid, self.block));
        }
        for (axis, (&b, &max)) in block.iter().zip(&limits::MAX_BLOCK_DIM).enumerate() {
            if b > max {
                return bad(format!("blockDim.{} = {b} > {max}", ["x", "y", "z"][axis]));
            }
        }
        for (axis, (&g, &max)) in grid.iter().zip(&limits::MAX_GRID_DIM).enumerate() {
            if g > max {
                return bad(format!("gridDim.{} = {g} > {max}", ["x", "y", "z"][axis]));
            }
        }
        let threads = self.block.count();
        if threads > u64::from(limits::MAX_THREADS_PER_BLOCK) {
            return bad(format!("{threads} threads per block > 1024"));
        }
        if threads > u64::from(entry.max_threads) {
            return bad(format!(
                "{threads} threads per block > its __launch_bounds__({})",
                entry.max_threads
            ));
        }
        let dynamic_max = self
            .max_dynamic_shared_bytes
            .min(limits::MAX_SHARED_BYTES_OPTIN);
        if self.dynamic_shared_bytes > dynamic_max {
            return bad(format!(
                "{} bytes of dynamic shared memory > the {dynamic_max} allowed (raise \
                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                self.dynamic_shared_bytes
            ));
        }
        let total = self.static_shared_bytes + self.dynamic_shared_bytes;
        let total_max = limits::DEFAULT_SHARED_BYTES.max(dynamic_max);
        if total > total_max {
            return bad(format!(
                "{} static + {} dynamic bytes of shared memory > {total_max}",
                self.static_shared_bytes, self.dynamic_shared_bytes
            ));
        }
        Ok(())
    }
}

/// What went wrong in a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// The configuration breaks a limit (CUDA_ERROR_INVALID_VALUE on a GPU).
    InvalidLaunch,
    /// The kernel broke a rule while running: divergence, deadlock, a bad shuffle, a
    /// misaligned access (CUDA_ERROR_LAUNCH_FAILED and friends on a GPU).
    Kernel,
    /// An access outside a device allocation (CUDA_ERROR_ILLEGAL_ADDRESS).
    OutOfBounds,
    /// Two schedules gave different results: a race.
    Race,
    /// The emulator itself ran out of something (fiber stacks).
    Resources,
}

/// A failed launch: what and where, in one message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What went wrong, which decides the CUDA error the stand-in driver returns.
    pub kind: FaultKind,
    /// The whole message: the kernel, and where it is known the block, thread and source line.
    pub message: String,
}

impl Fault {
    /// A fault of `kind` with `message` as its whole text.
    pub fn new(kind: FaultKind, message: impl Into<String>) -> Fault {
        Fault {
            kind,
            message: message.into(),
        }
    }

    pub(crate) fn resources(message: impl Into<String>) -> Fault {
        Fault::new(FaultKind::Resources, message)
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Fault {}

unsafe extern "C" {
    /// Poisons `len` bytes of the static shared section from `offset` (cpp/runtime.cpp; a range
    /// outside the section is ignored).
    fn cuda_emu_poison_shared(offset: usize, len: usize);
}

/// Bytes after the dynamic shared memory that must keep their pattern.
const DYNAMIC_SHARED_CANARY: usize = 64;
const CANARY_BYTE: u8 = 0xCB;

/// State that only one launch at a time may use: the static shared memory (one copy in the
/// emulator's image) and the fiber stacks.
struct LaunchState {
    stacks: StackPool,
}

// SAFETY: the stacks are plain memory mappings, used by one launch at a time under the mutex.
unsafe impl Send for LaunchState {}

static LAUNCH: Mutex<Option<LaunchState>> = Mutex::new(None);

/// Runs `entry` on the CPU: every block, every thread, under `schedule`.
///
/// # Safety
/// `params` must point at `entry.params` pointers, each to a value of the type the kernel
/// declares for that parameter (cuLaunchKernel's `kernelParams`), and every pointer argument
/// must be valid for what the kernel does with it.
pub unsafe fn launch(
    entry: &Entry,
    config: &LaunchConfig,
    params: *mut *mut c_void,
    schedule: Schedule,
) -> Result<(), Fault> {
    config.check(entry)?;
    let mut guard = LAUNCH.lock().unwrap_or_else(|poison| poison.into_inner());
    let state = guard.get_or_insert_with(|| LaunchState {
        stacks: StackPool::default(),
    });
    let dynamic = config.dynamic_shared_bytes;
    let mut dynamic_shared = vec![0u8; dynamic + DYNAMIC_SHARED_CANARY];
    shim::set_dynamic_shared(
        if dynamic == 0 {
            std::ptr::null_mut()
        } else {
            dynamic_shared.as_mut_ptr()
        },
        dynamic,
    );
    traffic::begin_launch((
        if dynamic == 0 {
            0
        } else {
            dynamic_shared.as_ptr() as usize
        },
        dynamic,
    ));
    let poisoned = shared_section::poison_ranges(entry.name);
    let result = (|| {
        for block in schedule.block_order(config.grid.count()) {
            let block_idx = config.grid.unlinear(block);
            for range in poisoned.iter() {
                // SAFETY: no block is running; the section holds only shared arrays.
                unsafe { cuda_emu_poison_shared(range.start, range.len()) };
            }
            dynamic_shared[..dynamic].fill(0xFF);
            dynamic_shared[dynamic..].fill(CANARY_BYTE);
            let mut picker = schedule::Picker::new(schedule, block);
            // SAFETY: the caller vouches for the arguments; launches are serialised.
            unsafe {
                fiber::run_block(
                    entry,
                    params,
                    config,
                    block_idx,
                    schedule,
                    &mut picker,
                    &mut state.stacks,
                )
            }
            .inspect(|()| traffic::end_block())
            .map_err(|fault| {
                let thread = fault
                    .thread
                    .map(|t| format!(" thread {}", config.block.unlinear(t as u64)))
                    .unwrap_or_default();
                Fault::new(
                    FaultKind::Kernel,
                    format!(
                        "{} (grid {}, block {}) block {block_idx}{thread}: {} [schedule {schedule}]",
                        entry.name, config.grid, config.block, fault.message
                    ),
                )
            })?;
            if let Some(at) = dynamic_shared[dynamic..]
                .iter()
                .position(|&b| b != CANARY_BYTE)
            {
                return Err(Fault::new(
                    FaultKind::OutOfBounds,
                    format!(
                        "{} block {block_idx}: wrote past its {dynamic} bytes of dynamic shared \
                         memory (byte +{at})",
                        entry.name
                    ),
                ));
            }
        }
        Ok(())
    })();
    shim::set_dynamic_shared(std::ptr::null_mut(), 0);
    match result {
        Ok(()) => {
            traffic::end_launch();
            Ok(())
        }
        Err(fault) => {
            traffic::abandon_launch();
            Err(fault)
        }
    }
}
