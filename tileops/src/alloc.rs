//! Fallible host allocation: every buffer whose size comes from a shape is reserved here, so a
//! shape too large for the machine is an [`Error::OutOfMemory`] instead of an abort.
//!
//! `Vec::try_reserve_exact` reports what the allocator refuses. Under Linux's default overcommit
//! heuristic (`vm.overcommit_memory = 0`) the kernel refuses a single request larger than RAM plus
//! swap, but under `overcommit_memory = 1` it grants any size lazily, and the process is then
//! killed while the buffer is filled. So requests above RAM plus swap (read once from
//! `/proc/meminfo`) are refused here first, whatever the policy. Measured on a 23.5 GiB machine
//! without swap, policy 0: 1 TiB, 64 GiB and 30 GiB refused by `try_reserve_exact` in about 40 µs,
//! 20 GiB granted. A request below the bound but above what is free at the moment can still be
//! granted and then hit the OOM killer, as in any program; tileops does not guess at free memory,
//! which changes under it.

use std::sync::OnceLock;

use crate::Error;

/// An empty vector with room for exactly `len` elements.
pub(crate) fn host_vec<T>(len: usize) -> Result<Vec<T>, Error> {
    let bytes = len.saturating_mul(std::mem::size_of::<T>());
    let oom = || Error::OutOfMemory {
        bytes,
        device: "cpu".to_owned(),
    };
    if host_limit().is_some_and(|limit| bytes > limit) {
        return Err(oom());
    }
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| oom())?;
    Ok(v)
}

/// `len` zero bytes.
pub(crate) fn host_zeros(len: usize) -> Result<Vec<u8>, Error> {
    let mut v = host_vec(len)?;
    v.resize(len, 0);
    Ok(v)
}

/// A copy of `bytes`.
pub(crate) fn host_copy(bytes: &[u8]) -> Result<Vec<u8>, Error> {
    let mut v = host_vec(bytes.len())?;
    v.extend_from_slice(bytes);
    Ok(v)
}

/// RAM plus swap in bytes, where the system says (Linux); `None` elsewhere.
fn host_limit() -> Option<usize> {
    static LIMIT: OnceLock<Option<usize>> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        meminfo_limit(&meminfo)
    })
}

/// `MemTotal + SwapTotal` of a `/proc/meminfo` text, in bytes.
fn meminfo_limit(meminfo: &str) -> Option<usize> {
    let field = |name: &str| -> Option<usize> {
        let line = meminfo.lines().find(|l| l.starts_with(name))?;
        let kib: usize = line[name.len()..]
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse()
            .ok()?;
        kib.checked_mul(1024)
    };
    field("MemTotal:")?.checked_add(field("SwapTotal:").unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_ram_plus_swap() {
        let text = "MemTotal:       24684084 kB\nMemFree: 1 kB\nSwapTotal:       1024 kB\n";
        assert_eq!(meminfo_limit(text), Some((24684084 + 1024) * 1024));
        assert_eq!(meminfo_limit("SwapTotal: 1 kB\n"), None);
    }

    #[test]
    fn small_requests_succeed_and_huge_ones_are_errors() {
        assert_eq!(host_zeros(16).unwrap(), vec![0; 16]);
        assert_eq!(host_copy(&[1, 2, 3]).unwrap(), vec![1, 2, 3]);
        let err = host_vec::<u64>(usize::MAX / 8).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err}");
        assert!(err.to_string().contains("cpu"), "{err}");
    }
}
