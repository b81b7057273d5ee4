//! One block of CUDA threads on one OS thread: a fiber per CUDA thread, switched only where a GPU
//! thread could observe another (barriers, warp collectives, and read-only loads under the random
//! schedule), with the checks a GPU would only show as a hang or as garbage.
//!
//! The kernel's C++ calls back into [`crate::shim`] at each such point; the shim suspends the
//! running fiber with a [`Suspend`] and this scheduler decides who runs next and what each
//! collective returns.

use std::cell::Cell;
use std::ffi::{CStr, c_char};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};

use crate::entries::Entry;
use crate::schedule::{Picker, ReadyLanes, Schedule};
use crate::{Dim3, Fault, LaunchConfig};

/// A fiber's stack: 256 KiB with a guard page was enough for every tileops kernel, with room for
/// AddressSanitizer's redzones.
const STACK_BYTES: usize = 256 * 1024;

/// A source position passed by the shim (`__FILE__`, `__LINE__`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Site {
    file: *const c_char,
    line: i32,
}

impl Site {
    pub(crate) fn new(file: *const c_char, line: i32) -> Site {
        Site { file, line }
    }
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.file.is_null() {
            return write!(f, "?:{}", self.line);
        }
        // SAFETY: the shim passes __FILE__, a string literal of the kernel's object.
        let path = unsafe { CStr::from_ptr(self.file) }.to_string_lossy();
        let name = path.rsplit('/').next().unwrap_or(&path);
        write!(f, "{name}:{}", self.line)
    }
}

/// The warp-level operations that make lanes wait for each other.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum CollectiveKind {
    /// `shfl.sync` in mode idx / up / down / bfly (the shim's numbering).
    Shuffle(i32),
    Syncwarp,
    Ballot,
    /// A warp exchange for the tensor-core instructions of `tileops_mma.cuh` (the op id names
    /// which): every lane of the warp deposits the same number of 32-bit words and receives
    /// all 32 lanes' words.
    Exchange(i32),
}

impl CollectiveKind {
    fn name(self) -> &'static str {
        match self {
            CollectiveKind::Shuffle(0) => "__shfl_sync",
            CollectiveKind::Shuffle(1) => "__shfl_up_sync",
            CollectiveKind::Shuffle(2) => "__shfl_down_sync",
            CollectiveKind::Shuffle(_) => "__shfl_xor_sync",
            CollectiveKind::Syncwarp => "__syncwarp",
            CollectiveKind::Ballot => "__ballot_sync",
            CollectiveKind::Exchange(op) => exchange_name(op),
        }
    }
}

/// The name of an exchange op (`tileops_mma.cuh`'s `ExchangeOp`: 1 and 2 the two mma, 8 + the
/// matrix count (+ 8 for .trans) the ldmatrix forms).
fn exchange_name(op: i32) -> &'static str {
    match op {
        1 => "mma.sync.m16n8k16 (bf16)",
        2 => "mma.sync.m16n8k16 (f16)",
        9 => "ldmatrix.x1",
        10 => "ldmatrix.x2",
        12 => "ldmatrix.x4",
        17 => "ldmatrix.x1.trans",
        18 => "ldmatrix.x2.trans",
        20 => "ldmatrix.x4.trans",
        _ => "a warp exchange",
    }
}

/// The most 32-bit words one lane deposits in an exchange (mma's A and B registers: 6).
pub(crate) const MAX_EXCHANGE_WORDS: usize = 8;

/// One lane's arrival at a warp collective.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Collective {
    pub(crate) kind: CollectiveKind,
    pub(crate) mask: u32,
    /// The lane's operand: the shuffled value, or the ballot predicate.
    pub(crate) value: u32,
    /// shfl.sync's b (lane, delta or lane mask) and c (segment mask and clamp); an exchange's
    /// word count in b.
    pub(crate) b: i32,
    pub(crate) c: i32,
    pub(crate) site: Site,
    /// An exchange's words (on the lane's stack, alive while it waits), and where the scheduler
    /// stores the address of the warp's gathered words for it; null otherwise.
    pub(crate) words: *const u32,
    pub(crate) out: *mut *const u32,
}

/// Why a fiber handed control back to the scheduler.
pub(crate) enum Suspend {
    Barrier(Site),
    Collective(Collective),
    /// A preemption point (a load): the fiber can go on at once.
    Preempt,
    /// The kernel broke a rule; the launch fails with this message.
    Fail(String),
}

type Fiber = Coroutine<u32, Suspend, (), DefaultStack>;

thread_local! {
    /// The running fiber's yielder, for the shim's callbacks.
    static YIELDER: Cell<*const Yielder<u32, Suspend>> = const { Cell::new(std::ptr::null()) };
    /// The random schedule's load-preemption generator state (xorshift64; 0 = no preemption at
    /// loads), seeded per block so a run is reproducible.
    static LOAD_PREEMPTION: Cell<u64> = const { Cell::new(0) };
}

/// Suspends the running fiber; returns the value the scheduler resumes it with.
///
/// # Safety
/// Must be called on a fiber started by [`run_block`] (the shim's callbacks are).
pub(crate) unsafe fn suspend(why: Suspend) -> u32 {
    let yielder = YIELDER.with(Cell::get);
    if yielder.is_null() {
        // A kernel function called outside a launch: there is nobody to switch to.
        eprintln!("cuda-emu: a device function synchronised outside a kernel launch");
        std::process::abort();
    }
    // SAFETY: the pointer is the running fiber's own yielder, alive while the fiber is.
    let value = unsafe { (*yielder).suspend(why) };
    // Other fibers ran meanwhile and set their own yielder.
    YIELDER.with(|y| y.set(yielder));
    value
}

/// Whether the running schedule switches fibers at this load: one load in four, at random.
pub(crate) fn preempt_at_load() -> bool {
    LOAD_PREEMPTION.with(|state| {
        let mut x = state.get();
        if x == 0 {
            return false;
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        state.set(x);
        x % 4 == 0
    })
}

/// The fibers' stacks, reused from block to block and launch to launch.
#[derive(Default)]
pub(crate) struct StackPool {
    free: Vec<DefaultStack>,
}

impl StackPool {
    fn take(&mut self) -> Result<DefaultStack, Fault> {
        match self.free.pop() {
            Some(stack) => Ok(stack),
            None => DefaultStack::new(STACK_BYTES)
                .map_err(|e| Fault::resources(format!("allocating a fiber stack: {e}"))),
        }
    }
}

/// The per-thread built-ins the shim reads through `cuda_emu_current` (layout of the shim's
/// `CudaEmuThread`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreadBuiltins {
    pub(crate) thread_idx: Dim3,
    pub(crate) block_idx: Dim3,
    pub(crate) block_dim: Dim3,
    pub(crate) grid_dim: Dim3,
}

#[derive(Clone, Copy, Debug)]
enum LaneState {
    Ready,
    Barrier(Site),
    Collective(Collective),
    Done,
}

struct Lane {
    state: LaneState,
    fiber: Option<Fiber>,
    resume_with: u32,
}

/// Where a block's failure happened, for the launch error.
pub(crate) struct BlockFault {
    /// The linear thread index inside the block (None: the block as a whole).
    pub(crate) thread: Option<usize>,
    pub(crate) message: String,
}

/// Runs every thread of one block to completion (or to the first fault).
///
/// # Safety
/// `params` must point at the kernel's arguments (cuLaunchKernel's `kernelParams`), valid for the
/// whole call, and `builtins_slot` must be the shim's `cuda_emu_current` pointer.
pub(crate) unsafe fn run_block(
    entry: &Entry,
    params: *mut *mut std::ffi::c_void,
    config: &LaunchConfig,
    block_idx: Dim3,
    schedule: Schedule,
    picker: &mut Picker,
    stacks: &mut StackPool,
) -> Result<(), BlockFault> {
    let (block_dim, grid_dim) = (config.block, config.grid);
    let threads = block_dim.count() as usize;
    let builtins: Vec<ThreadBuiltins> = (0..threads)
        .map(|t| ThreadBuiltins {
            thread_idx: block_dim.unlinear(t as u64),
            block_idx,
            block_dim,
            grid_dim,
        })
        .collect();
    let mut lanes = Vec::with_capacity(threads);
    for _ in 0..threads {
        let stack = stacks.take().map_err(|e| BlockFault {
            thread: None,
            message: e.message,
        })?;
        let invoke = entry.invoke;
        let params_addr = params as usize;
        let fiber = Fiber::with_stack(stack, move |yielder, _first| {
            YIELDER.with(|y| y.set(yielder as *const _));
            // SAFETY: the caller keeps the arguments alive for the whole block.
            unsafe { invoke(params_addr as *mut *mut std::ffi::c_void) };
        });
        lanes.push(Lane {
            state: LaneState::Ready,
            fiber: Some(fiber),
            resume_with: 0,
        });
    }
    let seed = match schedule {
        Schedule::Random(seed) => (seed ^ block_idx.linear_seed()) | 1,
        _ => 0,
    };
    LOAD_PREEMPTION.with(|state| state.set(seed));
    crate::async_copy::begin_block(lanes.len());
    let mut block = Block {
        ready: ReadyLanes::all(lanes.len()),
        lanes,
        builtins,
        picker,
        exchange: Vec::new(),
        landing: seed.rotate_left(17) | 1,
        random: seed != 0,
    };
    let outcome = block.run();
    crate::async_copy::end_block();
    // Fibers left suspended by a fault: reset without unwinding (their frames are C++ and the
    // shim's extern "C" callbacks, which must not unwind), then reuse the stacks.
    for lane in &mut block.lanes {
        if let Some(mut fiber) = lane.fiber.take() {
            if !fiber.done() {
                // SAFETY: nothing on a kernel fiber's stack needs dropping: the kernel is C++
                // with trivially destructible locals, the shim's frames hold plain values.
                unsafe { fiber.force_reset() };
            }
            stacks.free.push(fiber.into_stack());
        }
    }
    YIELDER.with(|y| y.set(std::ptr::null()));
    // SAFETY: the builtins are gone with the block; nobody reads the pointer between launches.
    unsafe { crate::shim::set_current(std::ptr::null()) };
    outcome
}

struct Block<'p> {
    lanes: Vec<Lane>,
    /// Which lanes are [`LaneState::Ready`], kept with every change of state ([`Block::set_state`]).
    ready: ReadyLanes,
    builtins: Vec<ThreadBuiltins>,
    picker: &'p mut Picker,
    /// Each warp's gathered exchange words (32 lanes x [`MAX_EXCHANGE_WORDS`]). A warp's lanes
    /// read them after the exchange completes and before they suspend again, and the warp's next
    /// exchange completes only when all of them have suspended again: one buffer per warp serves.
    /// Allocated at the block's first exchange: most kernels have none, and clearing 1 KiB per
    /// warp for every block of a large grid was wasted work.
    exchange: Vec<u32>,
    /// The random schedule's generator for early `cp.async` landings (xorshift64).
    landing: u64,
    random: bool,
}

impl Block<'_> {
    fn set_state(&mut self, t: usize, state: LaneState) {
        self.ready.set(t, matches!(state, LaneState::Ready));
        self.lanes[t].state = state;
    }

    fn run(&mut self) -> Result<(), BlockFault> {
        loop {
            if let Some(t) = self.picker.pick(&self.ready) {
                self.step(t)?;
                continue;
            }
            if self
                .lanes
                .iter()
                .all(|l| matches!(l.state, LaneState::Done))
            {
                return Ok(());
            }
            self.release_barrier()?;
        }
    }

    /// Resumes lane `t` until it suspends or returns.
    fn step(&mut self, t: usize) -> Result<(), BlockFault> {
        // SAFETY: the builtins outlive the block run.
        unsafe { crate::shim::set_current(&self.builtins[t]) };
        crate::async_copy::set_current(t);
        if self.random && crate::async_copy::has_committed(t) {
            // One switch in four of a thread with committed copies lands its oldest group early:
            // a correct kernel cannot tell when its copies land before its wait.
            let mut x = self.landing;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.landing = x;
            if x.is_multiple_of(4) {
                crate::async_copy::land_oldest(t);
            }
        }
        let value = self.lanes[t].resume_with;
        let fiber = self.lanes[t]
            .fiber
            .as_mut()
            .expect("a ready lane has a fiber");
        match fiber.resume(value) {
            CoroutineResult::Return(()) => {
                self.set_state(t, LaneState::Done);
                crate::async_copy::land_all(t);
                self.check_waiters_of(t, || "has exited".to_owned())
            }
            CoroutineResult::Yield(Suspend::Preempt) => Ok(()),
            CoroutineResult::Yield(Suspend::Fail(message)) => Err(BlockFault {
                thread: Some(t),
                message,
            }),
            CoroutineResult::Yield(Suspend::Barrier(site)) => {
                self.set_state(t, LaneState::Barrier(site));
                self.check_waiters_of(t, || format!("waits at __syncthreads ({site})"))
            }
            CoroutineResult::Yield(Suspend::Collective(op)) => {
                self.set_state(t, LaneState::Collective(op));
                self.try_complete(t, op)
            }
        }
    }

    /// Lane `t` left the warp's collectives (it exited or reached a barrier): a warp-mate waiting
    /// for it at a collective would wait forever. `doing` says what lane `t` did, made only for
    /// the error.
    fn check_waiters_of(&self, t: usize, doing: impl Fn() -> String) -> Result<(), BlockFault> {
        let lane_bit = 1u32 << (t % 32);
        let warp = t / 32;
        for mate in warp * 32..((warp + 1) * 32).min(self.lanes.len()) {
            if let LaneState::Collective(op) = self.lanes[mate].state
                && op.mask & lane_bit != 0
            {
                return Err(BlockFault {
                    thread: Some(mate),
                    message: format!(
                        "{} mask {:#010x} at {} names lane {}, which {}: the mask does \
                             not match the lanes executing it",
                        op.kind.name(),
                        op.mask,
                        op.site,
                        t % 32,
                        doing()
                    ),
                });
            }
        }
        Ok(())
    }

    /// Lane `t` arrived at `op`: completes it when every lane of its mask has arrived.
    fn try_complete(&mut self, t: usize, op: Collective) -> Result<(), BlockFault> {
        let lane = (t % 32) as u32;
        let warp_base = t - lane as usize;
        let fail = |message: String| BlockFault {
            thread: Some(t),
            message,
        };
        if op.mask & (1 << lane) == 0 {
            return Err(fail(format!(
                "{} at {} with mask {:#010x}, which excludes the calling lane {lane}",
                op.kind.name(),
                op.site,
                op.mask
            )));
        }
        if let CollectiveKind::Shuffle(mode) = op.kind {
            check_shuffle_operands(mode, op).map_err(fail)?;
        }
        for l in 0..32usize {
            if op.mask & (1 << l) == 0 {
                continue;
            }
            let mate = warp_base + l;
            let Some(mate_lane) = self.lanes.get(mate) else {
                return Err(fail(format!(
                    "{} mask {:#010x} at {} names lane {l}, which does not exist (the block \
                     has {} threads)",
                    op.kind.name(),
                    op.mask,
                    op.site,
                    self.lanes.len()
                )));
            };
            match mate_lane.state {
                LaneState::Ready => return Ok(()),
                LaneState::Done => {
                    return Err(fail(format!(
                        "{} mask {:#010x} at {} names lane {l}, which has exited: the mask does \
                         not match the lanes executing it",
                        op.kind.name(),
                        op.mask,
                        op.site
                    )));
                }
                LaneState::Barrier(site) => {
                    return Err(fail(format!(
                        "{} mask {:#010x} at {} names lane {l}, which waits at __syncthreads \
                         ({site}): the mask does not match the lanes executing it",
                        op.kind.name(),
                        op.mask,
                        op.site
                    )));
                }
                LaneState::Collective(other) => {
                    if other.kind != op.kind
                        || other.site != op.site
                        || other.mask != op.mask
                        || other.b != op.b && matches!(op.kind, CollectiveKind::Exchange(_))
                    {
                        return Err(fail(format!(
                            "{} mask {:#010x} at {} and lane {l}'s {} mask {:#010x} at {}: the \
                             lanes of one mask must execute the same collective",
                            op.kind.name(),
                            op.mask,
                            op.site,
                            other.kind.name(),
                            other.mask,
                            other.site
                        )));
                    }
                }
            }
        }
        // Everyone arrived: compute every lane's result, then release them.
        // On the stack: a warp's collective completes at every shuffle of a reduction.
        let mut arrived = [(0u32, op); 32];
        let mut count = 0;
        for l in (0..32u32).filter(|l| op.mask & (1 << l) != 0) {
            let LaneState::Collective(c) = self.lanes[warp_base + l as usize].state else {
                unreachable!("checked above")
            };
            arrived[count] = (l, c);
            count += 1;
        }
        let ops = &arrived[..count];
        if let CollectiveKind::Exchange(_) = op.kind {
            return self.complete_exchange(warp_base, ops);
        }
        let mut values = [0u32; 32];
        for &(l, c) in ops {
            values[l as usize] = c.value;
        }
        for &(l, c) in ops {
            let result = match c.kind {
                CollectiveKind::Shuffle(mode) => {
                    let src = shuffle_source(mode, l, c.b, c.c);
                    if op.mask & (1 << src) == 0 {
                        return Err(BlockFault {
                            thread: Some(warp_base + l as usize),
                            message: format!(
                                "{} at {}: lane {l} reads lane {src}, which is not in the mask \
                                 {:#010x} (its value is undefined)",
                                c.kind.name(),
                                c.site,
                                op.mask
                            ),
                        });
                    }
                    values[src as usize]
                }
                CollectiveKind::Syncwarp => 0,
                CollectiveKind::Ballot => ops
                    .iter()
                    .filter(|(_, o)| o.value != 0)
                    .fold(0u32, |acc, (ol, _)| acc | (1 << ol)),
                CollectiveKind::Exchange(_) => unreachable!("completed above"),
            };
            self.set_state(warp_base + l as usize, LaneState::Ready);
            self.lanes[warp_base + l as usize].resume_with = result;
        }
        Ok(())
    }

    /// Every lane of a warp arrived at one exchange: gathers their words, lane-major, into the
    /// warp's buffer and hands each lane its address.
    fn complete_exchange(
        &mut self,
        warp_base: usize,
        ops: &[(u32, Collective)],
    ) -> Result<(), BlockFault> {
        let Some(&(_, first)) = ops.first() else {
            return Ok(());
        };
        let count = first.b as usize;
        if ops.len() != 32 || count > MAX_EXCHANGE_WORDS {
            return Err(BlockFault {
                thread: Some(warp_base),
                message: format!(
                    "{} at {}: {} lanes with {count} words each (an exchange takes the full warp                      and at most {MAX_EXCHANGE_WORDS} words)",
                    first.kind.name(),
                    first.site,
                    ops.len()
                ),
            });
        }
        let stride = 32 * MAX_EXCHANGE_WORDS;
        if self.exchange.is_empty() {
            self.exchange = vec![0; self.lanes.len().div_ceil(32) * stride];
        }
        let start = warp_base / 32 * stride;
        let buffer = &mut self.exchange[start..start + stride];
        for &(l, c) in ops {
            // SAFETY: the lane passed `count` words on its own stack, which stays alive while it
            // waits at the exchange.
            let words = unsafe { std::slice::from_raw_parts(c.words, count) };
            buffer[l as usize * count..(l as usize + 1) * count].copy_from_slice(words);
        }
        let gathered = buffer.as_ptr();
        for &(l, c) in ops {
            // SAFETY: `out` points at the waiting lane's result slot, on its stack.
            unsafe { *c.out = gathered };
            self.set_state(warp_base + l as usize, LaneState::Ready);
            self.lanes[warp_base + l as usize].resume_with = 0;
        }
        Ok(())
    }

    /// Nobody can run: every live thread must wait at the same barrier, which then opens.
    fn release_barrier(&mut self) -> Result<(), BlockFault> {
        let mut barrier: Option<(usize, Site)> = None;
        let mut exited = Vec::new();
        for (t, lane) in self.lanes.iter().enumerate() {
            match lane.state {
                LaneState::Done => exited.push(t),
                LaneState::Barrier(site) => match barrier {
                    None => barrier = Some((t, site)),
                    Some((first, first_site)) if first_site != site => {
                        return Err(BlockFault {
                            thread: Some(t),
                            message: format!(
                                "divergent __syncthreads: thread {t} waits at {site} while \
                                 thread {first} waits at {first_site}"
                            ),
                        });
                    }
                    Some(_) => {}
                },
                LaneState::Collective(op) => {
                    return Err(BlockFault {
                        thread: Some(t),
                        message: format!(
                            "deadlock: {} mask {:#010x} at {} waits for lanes that never arrive",
                            op.kind.name(),
                            op.mask,
                            op.site
                        ),
                    });
                }
                LaneState::Ready => unreachable!("nobody is ready"),
            }
        }
        let Some((first, site)) = barrier else {
            return Err(BlockFault {
                thread: None,
                message: "deadlock: no thread can run".to_owned(),
            });
        };
        if let Some(&gone) = exited.first() {
            return Err(BlockFault {
                thread: Some(first),
                message: format!(
                    "divergent __syncthreads: thread {first} waits at {site} while thread {gone} \
                     (and {} more) exited",
                    exited.len() - 1
                ),
            });
        }
        for lane in &mut self.lanes {
            lane.state = LaneState::Ready;
            lane.resume_with = 0;
        }
        self.ready = ReadyLanes::all(self.lanes.len());
        Ok(())
    }
}

/// Operand checks of `shfl.sync` that catch a wrong width: the width must be a power of two up
/// to 32, and a lane offset (up/down/xor) of at least the width reaches outside every segment, so
/// each lane would just read its own value.
fn check_shuffle_operands(mode: i32, op: Collective) -> Result<(), String> {
    let segmask = ((op.c >> 8) & 0x1f) as u32;
    let width = 32 - segmask;
    let name = op.kind.name();
    if !width.is_power_of_two() || (segmask & (width.wrapping_sub(1) ^ 0x1f)) != segmask {
        return Err(format!(
            "{name} at {}: width {width} is not a power of two in 1..=32",
            op.site
        ));
    }
    if mode != 0 && (op.b < 0 || op.b as u32 >= width) {
        return Err(format!(
            "{name} at {}: lane offset {} with width {width} never leaves the lane's own \
             segment (every lane reads itself): a wrong shuffle width",
            op.site, op.b
        ));
    }
    Ok(())
}

/// The lane that lane `lane` reads in `shfl.sync` (PTX ISA semantics: `j`, or the lane itself
/// when `j` is outside the segment's clamp).
pub(crate) fn shuffle_source(mode: i32, lane: u32, b: i32, c: i32) -> u32 {
    let bval = (b as u32) & 0x1f;
    let cval = (c as u32) & 0x1f;
    let segmask = ((c as u32) >> 8) & 0x1f;
    let max_lane = (lane & segmask) | (cval & !segmask);
    let min_lane = lane & segmask;
    let (j, in_range) = match mode {
        1 => {
            let j = lane as i64 - bval as i64;
            (j, j >= max_lane as i64)
        }
        2 => {
            let j = lane as i64 + bval as i64;
            (j, j <= max_lane as i64)
        }
        3 => {
            let j = (lane ^ bval) as i64;
            (j, j <= max_lane as i64)
        }
        _ => {
            let j = (min_lane | (bval & !segmask)) as i64;
            (j, j <= max_lane as i64)
        }
    };
    if in_range { j as u32 } else { lane }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c_of(mode: i32, width: i32) -> i32 {
        ((32 - width) << 8) | if mode == 1 { 0 } else { 0x1f }
    }

    #[test]
    fn xor_shuffles_within_segments() {
        assert_eq!(shuffle_source(3, 5, 1, c_of(3, 32)), 4);
        assert_eq!(shuffle_source(3, 5, 16, c_of(3, 32)), 21);
        // Width 16: lane 5 ^ 8 = 13 stays in the first half.
        assert_eq!(shuffle_source(3, 5, 8, c_of(3, 16)), 13);
        assert_eq!(shuffle_source(3, 21, 8, c_of(3, 16)), 29);
    }

    #[test]
    fn up_and_down_clamp_at_the_segment_edge() {
        assert_eq!(shuffle_source(1, 3, 4, c_of(1, 32)), 3);
        assert_eq!(shuffle_source(1, 7, 4, c_of(1, 32)), 3);
        assert_eq!(shuffle_source(2, 30, 4, c_of(2, 32)), 30);
        assert_eq!(shuffle_source(2, 10, 4, c_of(2, 16)), 14);
        assert_eq!(shuffle_source(2, 14, 4, c_of(2, 16)), 14);
    }

    #[test]
    fn idx_reads_the_lane_of_its_segment() {
        assert_eq!(shuffle_source(0, 9, 0, c_of(0, 32)), 0);
        assert_eq!(shuffle_source(0, 20, 3, c_of(0, 16)), 19);
    }

    #[test]
    fn a_wrong_width_is_reported() {
        let op = |b, width| Collective {
            kind: CollectiveKind::Shuffle(3),
            mask: u32::MAX,
            value: 0,
            b,
            c: c_of(3, width),
            site: Site::new(std::ptr::null(), 7),
            words: std::ptr::null(),
            out: std::ptr::null_mut(),
        };
        assert!(check_shuffle_operands(3, op(8, 16)).is_ok());
        let err = check_shuffle_operands(3, op(16, 16)).unwrap_err();
        assert!(err.contains("wrong shuffle width"), "{err}");
        let err = check_shuffle_operands(3, op(1, 24)).unwrap_err();
        assert!(err.contains("not a power of two"), "{err}");
    }
}
