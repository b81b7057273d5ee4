//! The traffic ledger: what one launch moves through global and shared memory, counted from every
//! access the kernel makes, without changing the kernel sources.
//!
//! In the AddressSanitizer build (`--features asan`) build.rs compiles the kernels with
//! `--param asan-instrumentation-with-call-threshold=0`, so GCC calls `__asan_{load,store}{1,2,4,
//! 8,16,N}(addr)` before every load and store. cpp/runtime.cpp defines those callbacks inside the
//! emulator: each forwards to libasan's own check (so nothing of ASan's checking is lost) and then
//! reports the access here ([`cuda_emu_access`]). Other builds compile no callback, and a launch's
//! traffic is `None`.
//!
//! Per launch:
//! - **unique sectors**: a bitmap of 32-byte sectors per device allocation, one for reads, one
//!   for writes; their counts x 32 are the DRAM bytes with an ideal L2 (every sector fetched once,
//!   written back once, never evicted). Blocks run one after another, so this is exact for what
//!   the source addresses and independent of the schedule.
//! - **requests**: accesses are grouped as a GPU issues them, by (warp = linear thread index / 32,
//!   site = the call's return address, the thread's n-th execution of that site), never by time,
//!   so the counts do not depend on the schedule. Exact for warp-uniform control flow.
//! - **global sectors per request**: the distinct 32-byte sectors a request's lanes touch; its
//!   ideal is the sectors its distinct bytes would fill if they were contiguous from the lowest
//!   address's offset in its sector: `ceil((lowest % 32 + distinct bytes) / 32)` (a warp of 16-byte
//!   loads over 512 contiguous bytes: 16).
//! - **shared wavefronts per request**: bank = (4-byte word offset from the start of its shared
//!   segment) % 32; accesses of at most 4 bytes are one phase of 32 lanes, 8-byte accesses two
//!   phases of 16 lanes, 16-byte accesses four phases of 8 lanes (lanes in order); a phase takes as
//!   many wavefronts as the most distinct words any one bank holds, so a broadcast is free. The
//!   ideal is one wavefront per phase with an active lane. Hopper's exact rules are not public.
//!
//! GCC splits a vector or struct access into scalar accesses (a `float4` copy becomes four 4-byte
//! loads at four sites). So that requests keep the width the GPU issues, each thread's accesses
//! are merged first: an access that continues an open run of the same thread, space and direction,
//! inside the same 16-byte-aligned chunk, from a site the run does not hold yet, joins it (four
//! open runs per thread, so interleaved vectors merge too), and the run counts as one access of
//! its merged width at its first site. A loop of scalar loads never merges (one site), so a
//! genuinely scalar pattern keeps its width.
//!
//! Sites are named `file:line` post hoc, once per return address, by `addr2line` on the emulator's
//! debug info: the innermost inlined frame in a `.cu` file (the kernel's line, not a shared
//! helper's), else the innermost outside the shim header.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::c_void;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicPtr, Ordering};

use crate::fiber::ThreadBuiltins;
use crate::gate::{SiteRecord, TrafficRecord};

/// Bytes in a sector: the unit of DRAM and L2 traffic.
pub const SECTOR: usize = 32;

/// Whether this build counts traffic (the AddressSanitizer build does).
pub const ENABLED: bool = cfg!(feature = "asan");

/// Where an access went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    /// A device allocation.
    Global,
    /// Static or dynamic shared memory.
    Shared,
}

impl Space {
    /// The name the launch log uses.
    pub fn name(self) -> &'static str {
        match self {
            Space::Global => "global",
            Space::Shared => "shared",
        }
    }
}

/// Load or store.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// A read.
    Load,
    /// A write.
    Store,
}

impl Kind {
    /// The name the launch log uses.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Load => "load",
            Kind::Store => "store",
        }
    }
}

// ---- Recording (one launch at a time, on the launching OS thread) ------------------------------

/// One device allocation's sector bitmaps.
struct Region {
    start: usize,
    end: usize,
    read: Vec<u64>,
    written: Vec<u64>,
}

impl Region {
    fn mark(&mut self, addr: usize, size: usize, write: bool) {
        if self.read.is_empty() {
            // Allocated at the first access: most live allocations are not touched by a launch.
            let words = (self.end - self.start).div_ceil(SECTOR).div_ceil(64);
            self.read = vec![0; words];
            self.written = vec![0; words];
        }
        let first = (addr - self.start) / SECTOR;
        let last = (addr + size.max(1) - 1).min(self.end - 1);
        let last = (last - self.start) / SECTOR;
        let bits = if write {
            &mut self.written
        } else {
            &mut self.read
        };
        for s in first..=last {
            bits[s / 64] |= 1 << (s % 64);
        }
    }
}

/// One access as the kernel made it.
#[derive(Clone, Copy)]
struct Access {
    thread: u32,
    pc: usize,
    addr: usize,
    size: u32,
    kind: Kind,
    space: Space,
    /// The start of its shared segment (bank numbering), 0 for global.
    base: usize,
}

#[derive(Clone, Copy, Default)]
struct Sums {
    requests: u64,
    sectors: u64,
    ideal_sectors: u64,
    wavefronts: u64,
    ideal_wavefronts: u64,
}

struct Recorder {
    regions: Vec<Region>,
    /// The regions of the last two hits (a kernel alternates between its tensors).
    last_region: usize,
    other_region: usize,
    shared: [(usize, usize); 2],
    block: Vec<Access>,
    sites: FxMap<(usize, Space, Kind, u32), Sums>,
    /// Scratch of the per-request figures, kept: allocations are slow under ASan.
    spans: Vec<(usize, usize)>,
    words: Vec<usize>,
}

/// A warp-level request: (site, space, direction, warp, the lanes' n-th execution of the site).
type RequestKey = (usize, Space, Kind, u32, u32);

/// A multiply-rotate hasher (FxHash's): the recorder's maps are keyed by addresses and small
/// integers, hashed once per access, where SipHash would dominate the cost.
#[derive(Default, Clone, Copy)]
struct Fx(u64);

impl Fx {
    fn add(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fx {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.add(u64::from(b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn write_isize(&mut self, n: isize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<Fx>>;

/// The recorder of the launch being counted (null when none). Not a thread-local: the callbacks
/// run for every access, and a thread-local in this shared object costs a `__tls_get_addr`
/// (intercepted by libasan) each time. Launches are serialised (`crate::launch` holds its lock
/// from [`begin_launch`] to [`end_launch`]) and every fiber of a launch runs on the launching
/// thread, so only that thread dereferences it, one access at a time.
static ACTIVE: AtomicPtr<Recorder> = AtomicPtr::new(std::ptr::null_mut());

/// The block log of the last launch, emptied, for the next.
static SPARE: Mutex<Vec<Access>> = Mutex::new(Vec::new());

/// The active recorder, taken out (null left behind).
fn take_active() -> Option<Box<Recorder>> {
    let p = ACTIVE.swap(std::ptr::null_mut(), Ordering::Acquire);
    // SAFETY: a non-null pointer came from Box::into_raw in `begin_launch`, and the swap gave
    // this caller sole ownership.
    (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
}

thread_local! {
    /// The traffic of the last launch counted on this OS thread (launches run on the thread that
    /// makes them, so concurrent callers each see their own).
    static LAST: RefCell<Option<TrafficRecord>> = const { RefCell::new(None) };
}

unsafe extern "C" {
    /// The bounds of the static shared section, (0, 0) when there is none (cpp/runtime.cpp).
    pub(crate) fn cuda_emu_shared_bounds(start: *mut usize, stop: *mut usize);
}

/// Whether launches are counted: in the instrumented build, when `CUDA_EMU_LEDGER` is set (the
/// launch log wants the figures) or after [`set_counting`]. Not counting, the callbacks still run
/// (libasan's checks) but record nothing.
static COUNTING: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(UNREAD);
const UNREAD: u8 = 2;

fn counting() -> bool {
    use std::sync::atomic::Ordering;
    let state = COUNTING.load(Ordering::Relaxed);
    if state != UNREAD {
        return state == 1;
    }
    let on = std::env::var_os("CUDA_EMU_LEDGER").is_some_and(|p| !p.is_empty());
    let _ = COUNTING.compare_exchange(UNREAD, u8::from(on), Ordering::Relaxed, Ordering::Relaxed);
    COUNTING.load(Ordering::Relaxed) == 1
}

/// Counts every later launch's traffic (`true`) or none (`false`), whatever `CUDA_EMU_LEDGER`
/// says; a no-op in a build without the instrumentation.
///
/// ```
/// cuda_emu::traffic::set_counting(true);
/// ```
pub fn set_counting(on: bool) {
    COUNTING.store(u8::from(on), std::sync::atomic::Ordering::Relaxed);
}

/// Starts counting a launch: the live allocations and the shared segments are fixed for its
/// duration. A no-op in a build without the instrumentation.
pub(crate) fn begin_launch(dynamic: (usize, usize)) {
    if !ENABLED || !counting() {
        return;
    }
    let (mut start, mut stop) = (0usize, 0usize);
    // SAFETY: two valid out-pointers.
    unsafe { cuda_emu_shared_bounds(&mut start, &mut stop) };
    let regions = crate::memory::live_ranges()
        .into_iter()
        .map(|(start, size)| Region {
            start,
            end: start + size.max(1),
            read: Vec::new(),
            written: Vec::new(),
        })
        .collect();
    let recorder = Box::new(Recorder {
        regions,
        last_region: 0,
        other_region: 0,
        shared: [(start, stop), (dynamic.0, dynamic.0 + dynamic.1)],
        block: std::mem::take(&mut *SPARE.lock().unwrap_or_else(|p| p.into_inner())),
        sites: FxMap::default(),
        spans: Vec::with_capacity(64),
        words: Vec::with_capacity(256),
    });
    drop(take_active());
    ACTIVE.store(Box::into_raw(recorder), Ordering::Release);
}

/// Ends counting: the launch's traffic (also kept for [`last`]), `None` when this build does not
/// count or no launch was being counted.
pub(crate) fn end_launch() -> Option<TrafficRecord> {
    // (kept for `last`; the driver takes it with `take_last`)
    let recorder = take_active()?;
    let traffic = recorder.finish();
    LAST.with(|last| *last.borrow_mut() = Some(traffic.clone()));
    Some(traffic)
}

/// Forgets a launch being counted (a failed launch).
pub(crate) fn abandon_launch() {
    drop(take_active());
}

/// Groups the finished block's accesses into requests.
pub(crate) fn end_block() {
    let p = ACTIVE.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: see ACTIVE; no kernel code runs between blocks.
        unsafe { &mut *p }.end_block();
    }
}

/// The traffic of the last launch counted on this thread (`None` in a build that does not
/// count, or while counting is off: see [`set_counting`]).
pub fn last() -> Option<TrafficRecord> {
    LAST.with(|last| last.borrow().clone())
}

/// [`last`], cleared, so that a later launch that counts nothing cannot be given it.
pub(crate) fn take_last() -> Option<TrafficRecord> {
    LAST.with(|last| last.borrow_mut().take())
}

/// One kernel access, from the instrumentation callbacks of cpp/runtime.cpp: `write` is 0 for a
/// load, `pc` the return address inside the kernel. Accesses outside device memory and shared
/// memory (the thread's stack, the emulator's built-ins) are not traffic and are dropped.
#[unsafe(no_mangle)]
pub extern "C" fn cuda_emu_access(addr: usize, size: usize, write: i32, pc: *const c_void) {
    let recorder = ACTIVE.load(Ordering::Relaxed);
    let current = crate::shim::cuda_emu_current.load(Ordering::Relaxed);
    if recorder.is_null() || current.is_null() || size == 0 {
        return;
    }
    // SAFETY: set by the scheduler to the running thread's built-ins for the whole block.
    let builtins: &ThreadBuiltins = unsafe { &*current };
    let (t, b) = (builtins.thread_idx, builtins.block_dim);
    let thread = t.x + b.x * (t.y + b.y * t.z);
    let kind = if write != 0 { Kind::Store } else { Kind::Load };
    // SAFETY: see ACTIVE: only the launching thread's fibers call this, one at a time.
    unsafe { &mut *recorder }.record(thread, pc as usize, addr, size, kind);
}

impl Recorder {
    fn region_of(&mut self, addr: usize) -> Option<usize> {
        let hit = |r: &Region| addr >= r.start && addr < r.end;
        if self.regions.get(self.last_region).is_some_and(hit) {
            return Some(self.last_region);
        }
        if self.regions.get(self.other_region).is_some_and(hit) {
            std::mem::swap(&mut self.last_region, &mut self.other_region);
            return Some(self.last_region);
        }
        let i = self.regions.partition_point(|r| r.start <= addr);
        let i = i.checked_sub(1)?;
        if hit(&self.regions[i]) {
            self.other_region = self.last_region;
            self.last_region = i;
            Some(i)
        } else {
            None
        }
    }

    fn record(&mut self, thread: u32, pc: usize, addr: usize, size: usize, kind: Kind) {
        let (space, base) = if let Some(&(start, _)) = self
            .shared
            .iter()
            .find(|&&(start, end)| addr >= start && addr < end)
        {
            (Space::Shared, start)
        } else if let Some(i) = self.region_of(addr) {
            self.regions[i].mark(addr, size, kind == Kind::Store);
            (Space::Global, 0)
        } else {
            return;
        };
        self.block.push(Access {
            thread,
            pc,
            addr,
            size: size.min(u32::MAX as usize) as u32,
            kind,
            space,
            base,
        });
    }

    fn end_block(&mut self) {
        let mut accesses = std::mem::take(&mut self.block);
        if accesses.is_empty() {
            self.block = accesses;
            return;
        }
        // Stable: each thread's accesses stay in program order.
        accesses.sort_by_key(|a| a.thread);
        let merged = merge_split_accesses(&accesses);
        accesses.clear();
        self.block = accesses;
        // (site, space, kind, warp, occurrence) -> lanes' accesses.
        let mut occurrence: FxMap<(u32, usize, Space, Kind), u32> = FxMap::default();
        let mut keyed: Vec<(RequestKey, Access)> = merged
            .into_iter()
            .map(|a| {
                let n = occurrence
                    .entry((a.thread, a.pc, a.space, a.kind))
                    .or_insert(0);
                *n += 1;
                ((a.pc, a.space, a.kind, a.thread / 32, *n), a)
            })
            .collect();
        keyed.sort_unstable_by_key(|(k, a)| (*k, a.thread));
        let mut lanes: Vec<Access> = Vec::with_capacity(32);
        for group in keyed.chunk_by(|a, b| a.0 == b.0) {
            let ((pc, space, kind, _, _), _) = group[0];
            lanes.clear();
            lanes.extend(group.iter().map(|(_, a)| *a));
            let width = lanes.iter().map(|a| a.size).max().unwrap_or(0);
            let sums = self.sites.entry((pc, space, kind, width)).or_default();
            sums.requests += 1;
            match space {
                Space::Global => {
                    let (sectors, ideal) = global_sectors(&lanes, &mut self.spans);
                    sums.sectors += sectors;
                    sums.ideal_sectors += ideal;
                }
                Space::Shared => {
                    let (wavefronts, ideal) = shared_wavefronts(&lanes, width, &mut self.words);
                    sums.wavefronts += wavefronts;
                    sums.ideal_wavefronts += ideal;
                }
            }
        }
    }

    fn finish(mut self) -> TrafficRecord {
        self.end_block();
        // Keep the block log's capacity for the next launch (growing it again costs a copy per
        // doubling, slow under ASan).
        *SPARE.lock().unwrap_or_else(|p| p.into_inner()) = std::mem::take(&mut self.block);
        let count = |bits: &[u64]| bits.iter().map(|w| u64::from(w.count_ones())).sum::<u64>();
        let mut traffic = TrafficRecord::default();
        for region in &self.regions {
            let (r, w) = (count(&region.read), count(&region.written));
            traffic.read_bytes += r * SECTOR as u64;
            traffic.write_bytes += w * SECTOR as u64;
            traffic.allocations += u64::from(r + w > 0);
        }
        let names = symbolise(self.sites.keys().map(|k| k.0));
        let mut by_site: HashMap<(String, Space, Kind, u32), Sums> = HashMap::new();
        for ((pc, space, kind, width), s) in self.sites {
            let name = names
                .get(&pc)
                .cloned()
                .unwrap_or_else(|| format!("{pc:#x}"));
            let sum = by_site.entry((name, space, kind, width)).or_default();
            sum.requests += s.requests;
            sum.sectors += s.sectors;
            sum.ideal_sectors += s.ideal_sectors;
            sum.wavefronts += s.wavefronts;
            sum.ideal_wavefronts += s.ideal_wavefronts;
        }
        for ((site, space, kind, width), s) in by_site {
            match space {
                Space::Global => {
                    traffic.global_requests += s.requests;
                    traffic.global_sectors += s.sectors;
                    traffic.global_ideal_sectors += s.ideal_sectors;
                }
                Space::Shared => {
                    traffic.shared_requests += s.requests;
                    traffic.shared_wavefronts += s.wavefronts;
                    traffic.shared_ideal_wavefronts += s.ideal_wavefronts;
                }
            }
            traffic.sites.push(SiteRecord {
                site,
                space: space.name().to_owned(),
                kind: kind.name().to_owned(),
                width: u64::from(width),
                requests: s.requests,
                sectors: s.sectors,
                ideal_sectors: s.ideal_sectors,
                wavefronts: s.wavefronts,
                ideal_wavefronts: s.ideal_wavefronts,
            });
        }
        // The names sort as the enums do (global < shared, load < store).
        traffic.sites.sort_by(|a, b| {
            (b.requests, &a.site, &a.space, &a.kind, a.width)
                .cmp(&(a.requests, &b.site, &b.space, &b.kind, b.width))
        });
        traffic
    }
}

/// Each thread's accesses (sorted by thread, in program order) with GCC's split vector accesses
/// merged back (see the module docs).
fn merge_split_accesses(accesses: &[Access]) -> Vec<Access> {
    /// A run being merged: the access so far and the sites it holds (at most 16: one per byte of
    /// a 16-byte chunk; fixed, as this runs for every access).
    struct Run {
        access: Access,
        pcs: [usize; CHUNK],
        parts: usize,
    }
    const OPEN: usize = 4;
    const CHUNK: usize = 16;
    let mut out = Vec::with_capacity(accesses.len());
    let mut open: Vec<Run> = Vec::with_capacity(OPEN);
    for thread in accesses.chunk_by(|a, b| a.thread == b.thread) {
        for a in thread {
            let joins = |run: &Run| {
                let r = &run.access;
                let end = r.addr + r.size as usize;
                r.kind == a.kind
                    && r.space == a.space
                    && a.addr == end
                    && r.addr / CHUNK == (a.addr + a.size as usize - 1) / CHUNK
                    && run.parts < CHUNK
                    && !run.pcs[..run.parts].contains(&a.pc)
            };
            if let Some(run) = open.iter_mut().find(|run| joins(run)) {
                run.access.size += a.size;
                run.pcs[run.parts] = a.pc;
                run.parts += 1;
                continue;
            }
            if open.len() == OPEN {
                out.push(open.remove(0).access);
            }
            let mut pcs = [0; CHUNK];
            pcs[0] = a.pc;
            open.push(Run {
                access: *a,
                pcs,
                parts: 1,
            });
        }
        out.extend(open.drain(..).map(|run| run.access));
    }
    out
}

/// A global request's (sectors, ideal sectors).
fn global_sectors(lanes: &[Access], spans: &mut Vec<(usize, usize)>) -> (u64, u64) {
    spans.clear();
    spans.extend(lanes.iter().map(|a| (a.addr, a.addr + a.size as usize)));
    spans.sort_unstable();
    let (mut sectors, mut bytes) = (0u64, 0u64);
    let mut last_sector: Option<usize> = None;
    let mut covered_to = 0usize;
    for &(start, end) in spans.iter() {
        let from = start.max(covered_to);
        if end > from {
            bytes += (end - from) as u64;
            covered_to = end;
        }
        let first = start / SECTOR;
        let last = (end - 1) / SECTOR;
        let first = match last_sector {
            Some(s) if s >= first => s + 1,
            _ => first,
        };
        if last >= first {
            sectors += (last - first + 1) as u64;
        }
        last_sector = Some(last_sector.map_or(last, |s| s.max(last)));
    }
    let offset = spans.first().map_or(0, |s| s.0 % SECTOR) as u64;
    (sectors, (offset + bytes).div_ceil(SECTOR as u64))
}

/// A shared request's (wavefronts, ideal wavefronts).
fn shared_wavefronts(lanes: &[Access], width: u32, words: &mut Vec<usize>) -> (u64, u64) {
    let phases: u32 = match width {
        0..=4 => 1,
        5..=8 => 2,
        _ => 4,
    };
    let lanes_per_phase = 32 / phases;
    let (mut wavefronts, mut ideal) = (0u64, 0u64);
    for phase in 0..phases {
        // Distinct words per bank in this phase.
        words.clear();
        for a in lanes
            .iter()
            .filter(|a| (a.thread % 32) / lanes_per_phase == phase)
        {
            let first = (a.addr - a.base) / 4;
            let last = (a.addr - a.base + a.size as usize - 1) / 4;
            words.extend(first..=last);
        }
        if words.is_empty() {
            continue;
        }
        words.sort_unstable();
        words.dedup();
        let mut per_bank = [0u64; 32];
        for &w in words.iter() {
            per_bank[w % 32] += 1;
        }
        wavefronts += per_bank.iter().copied().max().unwrap_or(1);
        ideal += 1;
    }
    (wavefronts, ideal)
}

// ---- Site names -------------------------------------------------------------------------------

/// `file:line` of return addresses, by `addr2line` on the object that holds them; cached for the
/// process. Addresses it cannot name are left out (the caller prints them in hex).
fn symbolise(pcs: impl Iterator<Item = usize>) -> HashMap<usize, String> {
    static NAMES: Mutex<Option<HashMap<usize, String>>> = Mutex::new(None);
    let mut cache = NAMES.lock().unwrap_or_else(|p| p.into_inner());
    let cache = cache.get_or_insert_with(HashMap::new);
    let mut wanted: HashMap<String, Vec<(usize, usize)>> = HashMap::new();
    let mut out = HashMap::new();
    for pc in pcs {
        if let Some(name) = cache.get(&pc) {
            out.insert(pc, name.clone());
            continue;
        }
        let Some((file, base)) = object_of(pc) else {
            continue;
        };
        // The call instruction, not the one after it.
        wanted.entry(file).or_default().push((pc, pc - base - 1));
    }
    for (file, pcs) in wanted {
        // `-a` prints each address before its inline chain (innermost frame first), which splits
        // the chains.
        let output = std::process::Command::new("addr2line")
            .args(["-a", "-i", "-e", &file])
            .args(pcs.iter().map(|(_, offset)| format!("{offset:#x}")))
            .output();
        let Ok(output) = output else {
            continue;
        };
        let names = name_chains(&String::from_utf8_lossy(&output.stdout));
        for ((pc, _), name) in pcs.iter().zip(names) {
            if let Some(name) = name {
                cache.insert(*pc, name.clone());
                out.insert(*pc, name);
            }
        }
    }
    out
}

/// The shared object holding `pc`, and its load base.
pub(crate) fn object_of(pc: usize) -> Option<(String, usize)> {
    // SAFETY: Dl_info is plain pointers and integers, for which all-zero is a valid value.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads the address and fills `info`.
    if unsafe { libc::dladdr(pc as *const c_void, &mut info) } == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a NUL-terminated string owned by the loader.
    let file = unsafe { std::ffi::CStr::from_ptr(info.dli_fname) }
        .to_string_lossy()
        .into_owned();
    let file = if file.is_empty() {
        std::env::current_exe().ok()?.to_string_lossy().into_owned()
    } else {
        file
    };
    // A position-independent executable or shared object: offsets from its base.
    Some((file, info.dli_fbase as usize))
}

/// `addr2line -a -i` output: per address, the innermost frame of its inline chain that lies in a
/// `.cu` file (the kernel's own line rather than a shared helper's), else the innermost outside
/// the shim header (`cuda_emu.h`, whose `__ldg` wraps every read-only load), as `file:line`.
fn name_chains(text: &str) -> Vec<Option<String>> {
    let mut names: Vec<Option<String>> = Vec::new();
    // The chain being read: (its best name so far, whether that is a `.cu` frame).
    let mut best: Option<(String, bool)> = None;
    let mut started = false;
    for line in text.lines() {
        if line.starts_with("0x") {
            if started {
                names.push(best.take().map(|(name, _)| name));
            }
            started = true;
            continue;
        }
        // `path:line` or `path:line (discriminator N)`.
        let frame = line.split(" (").next().unwrap_or(line).trim();
        let Some((path, number)) = frame.rsplit_once(':') else {
            continue;
        };
        let file = path.rsplit('/').next().unwrap_or(path);
        if file == "??" || file == "cuda_emu.h" || number == "?" || number == "0" {
            continue;
        }
        let is_cu = file.ends_with(".cu");
        if best.as_ref().is_none_or(|(_, best_cu)| is_cu && !best_cu) {
            best = Some((format!("{file}:{number}"), is_cu));
        }
    }
    if started {
        names.push(best.map(|(name, _)| name));
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(thread: u32, pc: usize, addr: usize, size: u32) -> Access {
        Access {
            thread,
            pc,
            addr,
            size,
            kind: Kind::Load,
            space: Space::Global,
            base: 0,
        }
    }

    #[test]
    fn split_vector_accesses_merge_and_scalar_loops_do_not() {
        // A float4 read as four 4-byte loads at four sites: one 16-byte access.
        let split: Vec<Access> = (0..4)
            .map(|i| access(0, 100 + i, 4096 + 4 * i, 4))
            .collect();
        let merged = merge_split_accesses(&split);
        assert_eq!(merged.len(), 1);
        assert_eq!(
            (merged[0].addr, merged[0].size, merged[0].pc),
            (4096, 16, 100)
        );
        // A loop of one scalar load site over contiguous addresses stays four accesses.
        let looped: Vec<Access> = (0..4).map(|i| access(0, 100, 4096 + 4 * i, 4)).collect();
        assert_eq!(merge_split_accesses(&looped).len(), 4);
        // Never across a 16-byte chunk.
        let across: Vec<Access> = (0..2)
            .map(|i| access(0, 100 + i, 4104 + 8 * i, 8))
            .collect();
        assert_eq!(merge_split_accesses(&across).len(), 2);
    }

    #[test]
    fn sectors_per_request_against_the_ideal() {
        // 32 lanes x 16 contiguous bytes: 16 sectors, ideal 16.
        let coalesced: Vec<Access> = (0..32)
            .map(|l| access(l, 1, 4096 + 16 * l as usize, 16))
            .collect();
        assert_eq!(global_sectors(&coalesced, &mut Vec::new()), (16, 16));
        // 32 lanes x 16 bytes at a 32-byte lane stride: 32 sectors, ideal 16.
        let strided: Vec<Access> = (0..32)
            .map(|l| access(l, 1, 4096 + 32 * l as usize, 16))
            .collect();
        assert_eq!(global_sectors(&strided, &mut Vec::new()), (32, 16));
        // A broadcast: one sector.
        let broadcast: Vec<Access> = (0..32).map(|l| access(l, 1, 4096, 4)).collect();
        assert_eq!(global_sectors(&broadcast, &mut Vec::new()), (1, 1));
        // 128 contiguous bytes from offset 16 of a sector: 5 sectors, and 5 is the ideal.
        let offset: Vec<Access> = (0..32)
            .map(|l| access(l, 1, 4112 + 4 * l as usize, 4))
            .collect();
        assert_eq!(global_sectors(&offset, &mut Vec::new()), (5, 5));
    }

    #[test]
    fn shared_wavefronts_per_phase() {
        let shared = |thread: u32, addr: usize, size: u32| Access {
            space: Space::Shared,
            ..access(thread, 1, addr, size)
        };
        // 4-byte words, lane i at word i: one wavefront.
        let linear: Vec<Access> = (0..32).map(|l| shared(l, 4 * l as usize, 4)).collect();
        assert_eq!(shared_wavefronts(&linear, 4, &mut Vec::new()), (1, 1));
        // Lane stride of two words: 2-way conflict.
        let two_way: Vec<Access> = (0..32).map(|l| shared(l, 8 * l as usize, 4)).collect();
        assert_eq!(shared_wavefronts(&two_way, 4, &mut Vec::new()), (2, 1));
        // One word for all: a broadcast.
        let broadcast: Vec<Access> = (0..32).map(|l| shared(l, 0, 4)).collect();
        assert_eq!(shared_wavefronts(&broadcast, 4, &mut Vec::new()), (1, 1));
        // 16-byte accesses, contiguous: four phases of 8 lanes, conflict-free.
        let vec4: Vec<Access> = (0..32).map(|l| shared(l, 16 * l as usize, 16)).collect();
        assert_eq!(shared_wavefronts(&vec4, 16, &mut Vec::new()), (4, 4));
        // 16-byte accesses at a 32-byte lane stride: two wavefronts per phase.
        let strided: Vec<Access> = (0..32).map(|l| shared(l, 32 * l as usize, 16)).collect();
        assert_eq!(shared_wavefronts(&strided, 16, &mut Vec::new()), (8, 4));
    }

    #[test]
    fn addr2line_chains_name_the_innermost_kernel_frame() {
        let text = "0x0000000000001234\n/x/include/cuda_emu.h:111\n/x/kernels/rope.cu:88 (discriminator 2)\n\
                    0x0000000000001240\n??:0\n0x0000000000001250\n/x/kernels/common.cuh:7\n/x/kernels/rope.cu:90\n\
                    0x0000000000001260\n/x/include/cuda_emu.h:111\n/x/kernels/common.cuh:9\n";
        assert_eq!(
            name_chains(text),
            vec![
                Some("rope.cu:88".into()),
                None,
                Some("rope.cu:90".into()),
                Some("common.cuh:9".into())
            ]
        );
    }
}
