//! `cp.async` as the PTX ISA defines it: a copy per thread that lands at some time between its
//! issue and the `cp.async.wait_group` that covers it.
//!
//! The shim (`tileops_mma.cuh`'s emulated path) checks the operands, reads the 16 source bytes (or
//! zeros for a zero-filling copy), writes the poison (0xFF bytes) to the destination and hands the
//! bytes here. Each thread keeps its copies in its open group until `commit_group` closes it;
//! `wait_group N` lands every committed group but the newest `N`. Under the random schedule the
//! scheduler also lands a thread's oldest committed group at random switches of that thread
//! ([`land_oldest`]), so a kernel whose result depends on when a copy lands differs between
//! schedules. A barrier lands nothing, as on a GPU (`bar.sync` does not wait for `cp.async`):
//! a missing wait shows. A thread that exits with copies in flight has them landed at its exit,
//! which the PTX ISA allows (the copies complete; only their visibility is unordered).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

/// One copy in flight: its destination in shared memory and the 16 bytes it will write.
struct Pending {
    dst: *mut u8,
    data: [u8; 16],
}

/// One thread's copies in flight.
#[derive(Default)]
struct ThreadCopies {
    /// Issued since the last `commit_group`.
    open: Vec<Pending>,
    /// Committed groups, oldest first.
    committed: VecDeque<Vec<Pending>>,
}

thread_local! {
    /// The running block's threads' copies, by linear thread index.
    static COPIES: RefCell<Vec<ThreadCopies>> = const { RefCell::new(Vec::new()) };
    /// The linear index of the thread whose fiber runs (set by the scheduler at every switch).
    static CURRENT: Cell<usize> = const { Cell::new(0) };
}

/// A new block of `threads` threads: no copy in flight.
pub(crate) fn begin_block(threads: usize) {
    COPIES.with(|copies| {
        let mut copies = copies.borrow_mut();
        copies.clear();
        copies.resize_with(threads, ThreadCopies::default);
    });
}

/// The block is over (or failed): whatever is still in flight is dropped. A completed block has
/// none, its threads' exits landed them.
pub(crate) fn end_block() {
    COPIES.with(|copies| copies.borrow_mut().clear());
}

/// Thread `t`'s fiber runs next.
pub(crate) fn set_current(t: usize) {
    CURRENT.with(|c| c.set(t));
}

fn land(group: Vec<Pending>) {
    for copy in group {
        // SAFETY: the shim checked at issue that the 16 destination bytes lie in the block's
        // shared memory, which outlives the block's copies (they are landed or dropped at its
        // end); nothing else runs while the scheduler or the issuing thread lands them.
        unsafe { std::ptr::copy_nonoverlapping(copy.data.as_ptr(), copy.dst, 16) };
    }
}

/// `cp.async` by the running thread: `data` lands at `dst` later.
pub(crate) fn issue(dst: *mut u8, data: [u8; 16]) {
    let t = CURRENT.with(Cell::get);
    COPIES.with(|copies| {
        if let Some(thread) = copies.borrow_mut().get_mut(t) {
            thread.open.push(Pending { dst, data });
        }
    });
}

/// `cp.async.commit_group` by the running thread (an empty group when nothing was issued, as in
/// PTX: it still counts for `wait_group`).
pub(crate) fn commit() {
    let t = CURRENT.with(Cell::get);
    COPIES.with(|copies| {
        if let Some(thread) = copies.borrow_mut().get_mut(t) {
            let group = std::mem::take(&mut thread.open);
            thread.committed.push_back(group);
        }
    });
}

/// `cp.async.wait_group newest`: lands the running thread's committed groups but the newest
/// `newest` (copies not yet committed are not waited for).
pub(crate) fn wait(newest: usize) {
    let t = CURRENT.with(Cell::get);
    let mut landed = Vec::new();
    COPIES.with(|copies| {
        if let Some(thread) = copies.borrow_mut().get_mut(t) {
            while thread.committed.len() > newest {
                landed.extend(thread.committed.pop_front());
            }
        }
    });
    landed.into_iter().for_each(land);
}

/// Lands thread `t`'s oldest committed group, if it has one (the random schedule's early landing).
pub(crate) fn land_oldest(t: usize) {
    let group = COPIES.with(|copies| {
        copies
            .borrow_mut()
            .get_mut(t)
            .and_then(|thread| thread.committed.pop_front())
    });
    if let Some(group) = group {
        land(group);
    }
}

/// Whether thread `t` has a committed group in flight.
pub(crate) fn has_committed(t: usize) -> bool {
    COPIES.with(|copies| {
        copies
            .borrow()
            .get(t)
            .is_some_and(|thread| !thread.committed.is_empty())
    })
}

/// Thread `t` exited: every copy it issued lands, committed or not, oldest first.
pub(crate) fn land_all(t: usize) {
    let (committed, open) = COPIES.with(|copies| {
        copies
            .borrow_mut()
            .get_mut(t)
            .map(|thread| {
                (
                    std::mem::take(&mut thread.committed),
                    std::mem::take(&mut thread.open),
                )
            })
            .unwrap_or_default()
    });
    committed.into_iter().for_each(land);
    land(open);
}
