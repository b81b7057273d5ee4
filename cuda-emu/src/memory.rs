//! Device memory: host memory, 256-byte aligned like a GPU allocation, filled with a pattern at
//! allocation so that output a kernel never wrote shows, and (in the normal build) fenced by guard
//! zones whose bytes must survive every launch, so a write outside the allocation fails the
//! launch. The AddressSanitizer build allocates the exact size instead: its redzones catch reads
//! as well as writes, at the faulting line.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;

/// Every byte of a new allocation: a finite value in f32, f16 and bf16 (-2.9e-16, -0.022), so an
/// unwritten output element fails a comparison instead of hiding as zero.
pub const FILL_BYTE: u8 = 0xA5;
/// Every guard byte: NaN in every float type, so a read past the end shows too.
pub const GUARD_BYTE: u8 = 0xFF;
/// CUDA's allocation alignment.
pub const ALIGN: usize = 256;
/// Guard bytes on each side in the normal build.
const GUARD: usize = if cfg!(feature = "asan") { 0 } else { 256 };

struct Allocation {
    /// The host block: guard, body, guard.
    base: *mut u8,
    layout: Layout,
    size: usize,
}

// SAFETY: the allocation is plain memory owned by the table; access goes through the mutex or
// through kernels the driver serialises.
unsafe impl Send for Allocation {}

impl Allocation {
    fn body(&self) -> usize {
        self.base as usize + GUARD
    }

    /// The first guard byte that changed, as an offset from the body (negative: before it).
    fn damaged_guard(&self) -> Option<isize> {
        if GUARD == 0 {
            return None;
        }
        // SAFETY: both guards lie inside the host block.
        let (front, back) = unsafe {
            (
                std::slice::from_raw_parts(self.base, GUARD),
                std::slice::from_raw_parts(self.base.add(GUARD + self.size), self.back_guard()),
            )
        };
        if let Some(i) = front.iter().position(|&b| b != GUARD_BYTE) {
            return Some(i as isize - GUARD as isize);
        }
        back.iter()
            .position(|&b| b != GUARD_BYTE)
            .map(|i| (self.size + i) as isize)
    }

    fn back_guard(&self) -> usize {
        self.layout.size() - GUARD - self.size
    }
}

/// Held by every operation that changes device memory (copies, sets, launches, cuBLAS calls,
/// allocation): a launch compared under two schedules snapshots all memory, runs, restores and
/// runs again, and another thread's copy in between would look like a race.
static DEVICE: Mutex<()> = Mutex::new(());

/// Exclusive use of device memory until the guard drops.
pub fn exclusive() -> std::sync::MutexGuard<'static, ()> {
    DEVICE.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The live allocations, by body address.
static ALLOCATIONS: Mutex<BTreeMap<usize, Allocation>> = Mutex::new(BTreeMap::new());

fn table() -> std::sync::MutexGuard<'static, BTreeMap<usize, Allocation>> {
    ALLOCATIONS
        .lock()
        .unwrap_or_else(|poison| poison.into_inner())
}

/// Allocates `size` bytes of device memory; `None` when the host has no memory for it.
pub fn alloc(size: usize) -> Option<u64> {
    // A zero-byte request still gets a distinct address, as cuMemAlloc's does. The normal build
    // rounds up to the alignment (the rest is guard); the ASan build allocates the exact size,
    // so its redzone starts at the first byte past it.
    let body = if GUARD == 0 {
        size.max(1)
    } else {
        size.max(1).checked_next_multiple_of(ALIGN)?
    };
    let total = body.checked_add(2 * GUARD)?;
    let layout = Layout::from_size_align(total, ALIGN).ok()?;
    // SAFETY: the layout has a non-zero size.
    let base = unsafe { std::alloc::alloc(layout) };
    if base.is_null() {
        return None;
    }
    // SAFETY: the block is `total` bytes.
    unsafe {
        std::ptr::write_bytes(base, GUARD_BYTE, GUARD);
        std::ptr::write_bytes(base.add(GUARD), FILL_BYTE, size);
        std::ptr::write_bytes(base.add(GUARD + size), GUARD_BYTE, total - GUARD - size);
    }
    let allocation = Allocation { base, layout, size };
    let address = allocation.body();
    table().insert(address, allocation);
    Some(address as u64)
}

/// Frees the allocation at `address`; false when there is none.
pub fn free(address: u64) -> bool {
    match table().remove(&(address as usize)) {
        Some(allocation) => {
            // SAFETY: allocated by `alloc` with this layout.
            unsafe { std::alloc::dealloc(allocation.base, allocation.layout) };
            true
        }
        None => false,
    }
}

/// Checks that `[address, address + len)` lies inside one allocation.
pub fn check_range(address: u64, len: usize) -> Result<(), String> {
    let table = table();
    let address = address as usize;
    let Some((&body, allocation)) = table.range(..=address).next_back() else {
        return Err(format!("{address:#x} is not device memory"));
    };
    let end = address.checked_add(len).ok_or("the range overflows")?;
    if end > body + allocation.size {
        return Err(format!(
            "[{address:#x}, +{len}) runs past the allocation at {body:#x} of {} bytes",
            allocation.size
        ));
    }
    Ok(())
}

/// The live allocations as (address, size), by address: what a launch's traffic is counted
/// against.
pub(crate) fn live_ranges() -> Vec<(usize, usize)> {
    table().iter().map(|(&body, a)| (body, a.size)).collect()
}

/// Bytes allocated and not freed.
pub fn allocated_bytes() -> usize {
    table().values().map(|a| a.size).sum()
}

/// The first allocation (of `only`, or of all when `None`) whose guard zone a kernel overwrote:
/// a message naming it.
pub fn check_guards(only: Option<&[u64]>) -> Result<(), String> {
    for (&body, allocation) in table().iter() {
        if only.is_some_and(|set| !set.contains(&(body as u64))) {
            continue;
        }
        if let Some(offset) = allocation.damaged_guard() {
            return Err(format!(
                "a write outside a device allocation: byte {offset:+} of the allocation at \
                 {body:#x} ({} bytes) was overwritten",
                allocation.size
            ));
        }
    }
    Ok(())
}

/// A copy of every allocation's contents, to run a launch twice from the same state.
pub struct Snapshot {
    contents: Vec<(usize, Vec<u8>)>,
}

impl Snapshot {
    /// A snapshot of nothing, filled by [`Snapshot::retake`].
    pub const EMPTY: Snapshot = Snapshot {
        contents: Vec::new(),
    };

    /// Copies every live allocation into this snapshot, in address order, reusing the buffer each
    /// allocation had in it before: a compared launch copies all device memory twice, and fresh
    /// buffers every time had the kernel zero and fault in their pages, most of a compared
    /// launch's cost.
    pub fn retake(&mut self) {
        let mut previous = std::mem::take(&mut self.contents).into_iter().peekable();
        for (&body, a) in table().iter() {
            // Both lists are in address order: skip the allocations freed since, then take this
            // one's buffer if it had one.
            while previous.next_if(|(b, _)| *b < body).is_some() {}
            let mut buffer = previous
                .next_if(|(b, _)| *b == body)
                .map(|(_, buffer)| buffer)
                .unwrap_or_default();
            // SAFETY: the body is `size` bytes inside the block.
            let bytes = unsafe { std::slice::from_raw_parts(body as *const u8, a.size) };
            buffer.clear();
            buffer.extend_from_slice(bytes);
            self.contents.push((body, buffer));
        }
    }

    /// Writes the copy back.
    pub fn restore(&self) {
        let table = table();
        for (body, bytes) in &self.contents {
            if table.contains_key(body) {
                // SAFETY: the allocation is still live and `bytes.len()` long.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), *body as *mut u8, bytes.len())
                };
            }
        }
    }

    /// The first byte where live memory differs from this copy: (allocation, offset, the copy's,
    /// memory's). Allocations freed since are skipped.
    pub fn first_difference_from_live(&self) -> Option<(usize, usize, u8, u8)> {
        let table = table();
        for (body, saved) in &self.contents {
            let Some(a) = table.get(body).filter(|a| a.size == saved.len()) else {
                continue;
            };
            // SAFETY: the body is `size` bytes inside the block.
            let live = unsafe { std::slice::from_raw_parts(*body as *const u8, a.size) };
            // A whole-slice comparison (memcmp) first; the byte is looked for only on a difference.
            if live != saved.as_slice() {
                let i = live
                    .iter()
                    .zip(saved)
                    .position(|(x, y)| x != y)
                    .expect("unequal slices of one length differ somewhere");
                return Some((*body, i, saved[i], live[i]));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_filled_and_bounded() {
        let a = alloc(10).unwrap();
        assert_eq!(a % ALIGN as u64, 0);
        // SAFETY: 10 bytes were allocated.
        let body = unsafe { std::slice::from_raw_parts(a as *const u8, 10) };
        assert!(body.iter().all(|&b| b == FILL_BYTE));
        assert!(check_range(a, 10).is_ok());
        assert!(check_range(a + 4, 6).is_ok());
        assert!(check_range(a + 4, 7).is_err());
        assert!(free(a));
        assert!(!free(a));
    }

    #[cfg(not(feature = "asan"))]
    #[test]
    fn a_write_past_the_end_is_found() {
        let a = alloc(8).unwrap();
        assert!(check_guards(Some(&[a])).is_ok());
        // SAFETY: the guard zone is part of the host block.
        unsafe { *((a + 8) as *mut u8) = 0 };
        let err = check_guards(Some(&[a])).unwrap_err();
        assert!(err.contains("byte +8"), "{err}");
        // SAFETY: as above.
        unsafe { *((a + 8) as *mut u8) = GUARD_BYTE };
        free(a);
    }
}
