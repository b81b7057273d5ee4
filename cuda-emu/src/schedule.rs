//! The orders in which the emulator runs blocks and the threads inside a block.
//!
//! A race-free kernel gives bit-identical output under every schedule; a kernel that relies on an
//! order a GPU does not promise gives different output under two of them (the driver can run
//! every launch under two schedules and compare, see [`crate::driver`]). Round robin and random
//! keep warps in near lock-step; warp-greedy lets one warp run as far ahead as the barriers allow,
//! which is what exposes a missing barrier before shared-memory reuse.

use std::fmt;
use std::str::FromStr;

/// A thread and block order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// Threads in increasing order, each until it blocks; blocks in increasing order.
    RoundRobin,
    /// Threads and blocks in decreasing order.
    Reverse,
    /// A seeded random thread at every switch, with preemption at read-only loads too, and the
    /// blocks shuffled.
    Random(u64),
    /// The lowest-numbered warp with a runnable thread runs until all its threads block, so warp
    /// 0 runs far ahead of the others after every barrier.
    WarpGreedy,
}

impl Schedule {
    /// Every schedule, with the given seed for the random one.
    pub fn all(seed: u64) -> [Schedule; 4] {
        [
            Schedule::RoundRobin,
            Schedule::Reverse,
            Schedule::Random(seed),
            Schedule::WarpGreedy,
        ]
    }

    /// Whether loads are preemption points.
    pub fn preempts_at_loads(self) -> bool {
        matches!(self, Schedule::Random(_))
    }

    /// The order in which the `count` blocks of a grid run.
    pub fn block_order(self, count: u64) -> Vec<u64> {
        let mut order: Vec<u64> = (0..count).collect();
        match self {
            Schedule::RoundRobin | Schedule::WarpGreedy => {}
            Schedule::Reverse => order.reverse(),
            Schedule::Random(seed) => {
                fastrand::Rng::with_seed(seed ^ 0xb10c_0bde).shuffle(&mut order)
            }
        }
        order
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Schedule::RoundRobin => f.write_str("round-robin"),
            Schedule::Reverse => f.write_str("reverse"),
            Schedule::Random(seed) => write!(f, "random:{seed}"),
            Schedule::WarpGreedy => f.write_str("warp-greedy"),
        }
    }
}

impl FromStr for Schedule {
    type Err = String;

    /// `round-robin`, `reverse`, `random` (seed 1), `random:SEED` or `warp-greedy`.
    fn from_str(s: &str) -> Result<Schedule, String> {
        match s.trim() {
            "round-robin" | "forward" => Ok(Schedule::RoundRobin),
            "reverse" => Ok(Schedule::Reverse),
            "warp-greedy" => Ok(Schedule::WarpGreedy),
            "random" => Ok(Schedule::Random(1)),
            other => match other.strip_prefix("random:") {
                Some(seed) => seed
                    .parse()
                    .map(Schedule::Random)
                    .map_err(|_| format!("bad seed in schedule {other:?}")),
                None => Err(format!(
                    "unknown schedule {other:?}: expected round-robin, reverse, random[:SEED] or \
                     warp-greedy"
                )),
            },
        }
    }
}

/// Picks the next thread to run inside a block.
pub(crate) struct Picker {
    schedule: Schedule,
    cursor: usize,
    rng: fastrand::Rng,
}

impl Picker {
    pub(crate) fn new(schedule: Schedule, block_seed: u64) -> Picker {
        let seed = match schedule {
            Schedule::Random(seed) => seed,
            _ => 0,
        };
        Picker {
            schedule,
            cursor: 0,
            rng: fastrand::Rng::with_seed(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ block_seed),
        }
    }

    /// The next thread to run of those `ready` holds, or `None` when none is ready.
    pub(crate) fn pick(&mut self, ready: &ReadyLanes) -> Option<usize> {
        let n = ready.len();
        if n == 0 {
            return None;
        }
        let found = match self.schedule {
            Schedule::RoundRobin => ready.next_from(self.cursor),
            Schedule::Reverse => ready.previous_from(self.cursor),
            Schedule::Random(_) => ready.next_from(self.rng.usize(0..n)),
            Schedule::WarpGreedy => {
                // Stay in the current warp while it can run, else the lowest warp that can.
                let warp_start = self.cursor / 32 * 32;
                let warp_end = (warp_start + 32).min(n);
                ready
                    .first_in(self.cursor, warp_end)
                    .or_else(|| ready.first_in(warp_start, self.cursor))
                    .or_else(|| ready.first_in(0, n))
            }
        };
        if let Some(t) = found {
            self.cursor = match self.schedule {
                Schedule::Reverse => (t + n - 1) % n,
                Schedule::WarpGreedy => {
                    let warp_end = ((t / 32 + 1) * 32).min(n);
                    if t + 1 < warp_end { t + 1 } else { t / 32 * 32 }
                }
                _ => (t + 1) % n,
            };
        }
        found
    }
}

/// The threads of a block that can run, one bit each: the picker finds the next one a word (64
/// threads) at a time, where a scan thread by thread made most of a switch's cost in blocks that
/// wait at barriers and shuffles.
#[derive(Clone, Debug)]
pub(crate) struct ReadyLanes {
    words: Vec<u64>,
    len: usize,
}

impl ReadyLanes {
    /// `len` threads, all ready.
    pub(crate) fn all(len: usize) -> ReadyLanes {
        let mut words = vec![u64::MAX; len.div_ceil(64)];
        if !len.is_multiple_of(64)
            && let Some(last) = words.last_mut()
        {
            *last = (1u64 << (len % 64)) - 1;
        }
        ReadyLanes { words, len }
    }

    /// The number of threads (ready or not).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Marks thread `t` ready or not.
    pub(crate) fn set(&mut self, t: usize, ready: bool) {
        let bit = 1u64 << (t % 64);
        if ready {
            self.words[t / 64] |= bit;
        } else {
            self.words[t / 64] &= !bit;
        }
    }

    /// The lowest ready thread in `start..end`.
    fn first_in(&self, start: usize, end: usize) -> Option<usize> {
        let end = end.min(self.len);
        let mut t = start;
        while t < end {
            let word = self.words[t / 64] >> (t % 64);
            if word != 0 {
                let found = t + word.trailing_zeros() as usize;
                return (found < end).then_some(found);
            }
            t = (t / 64 + 1) * 64;
        }
        None
    }

    /// The highest ready thread in `start..=last`.
    fn last_in(&self, start: usize, last: usize) -> Option<usize> {
        let mut t = last as isize;
        while t >= start as isize {
            let i = t as usize;
            let word = self.words[i / 64] & (u64::MAX >> (63 - i % 64));
            if word != 0 {
                let found = i / 64 * 64 + 63 - word.leading_zeros() as usize;
                return (found >= start).then_some(found);
            }
            t = (i / 64 * 64) as isize - 1;
        }
        None
    }

    /// The first ready thread at or after `from`, wrapping around to 0.
    fn next_from(&self, from: usize) -> Option<usize> {
        self.first_in(from, self.len)
            .or_else(|| self.first_in(0, from))
    }

    /// The first ready thread at or before `from`, wrapping around to the last.
    fn previous_from(&self, from: usize) -> Option<usize> {
        self.last_in(0, from)
            .or_else(|| self.last_in(from + 1, self.len - 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(schedule: Schedule, n: usize, steps: usize) -> Vec<usize> {
        let mut picker = Picker::new(schedule, 0);
        let ready = ReadyLanes::all(n);
        (0..steps).filter_map(|_| picker.pick(&ready)).collect()
    }

    fn ready_where(n: usize, mut ready: impl FnMut(usize) -> bool) -> ReadyLanes {
        let mut lanes = ReadyLanes::all(n);
        for t in 0..n {
            lanes.set(t, ready(t));
        }
        lanes
    }

    /// The picker as it was written before the bit set: one thread at a time, from the cursor.
    fn scan_pick(
        schedule: Schedule,
        cursor: usize,
        start: usize,
        ready: &ReadyLanes,
    ) -> Option<usize> {
        let n = ready.len();
        let is_ready = |t: usize| ready.words[t / 64] >> (t % 64) & 1 == 1;
        match schedule {
            Schedule::RoundRobin => (0..n).map(|k| (cursor + k) % n).find(|&t| is_ready(t)),
            Schedule::Reverse => (0..n)
                .map(|k| (cursor + n - k % n) % n)
                .find(|&t| is_ready(t)),
            Schedule::Random(_) => (0..n).map(|k| (start + k) % n).find(|&t| is_ready(t)),
            Schedule::WarpGreedy => {
                let warp = cursor / 32;
                let in_warp = warp * 32..((warp + 1) * 32).min(n);
                let width = in_warp.len();
                (0..width)
                    .map(|k| in_warp.start + (cursor - in_warp.start + k) % width)
                    .find(|&t| is_ready(t))
                    .or_else(|| (0..n).find(|&t| is_ready(t)))
            }
        }
    }

    #[test]
    fn the_bit_set_picks_what_a_scan_thread_by_thread_picks() {
        let mut rng = fastrand::Rng::with_seed(11);
        for n in [1, 5, 31, 32, 33, 63, 64, 65, 100, 128, 129, 1024] {
            for _ in 0..200 {
                let density = rng.u32(0..4);
                let ready = ready_where(n, |_| rng.u32(0..4) < density);
                let cursor = rng.usize(0..n);
                for schedule in [
                    Schedule::RoundRobin,
                    Schedule::Reverse,
                    Schedule::WarpGreedy,
                ] {
                    let mut picker = Picker::new(schedule, 0);
                    picker.cursor = cursor;
                    assert_eq!(
                        picker.pick(&ready),
                        scan_pick(schedule, cursor, 0, &ready),
                        "{schedule} n {n} cursor {cursor} ready {:x?}",
                        ready.words
                    );
                }
                let mut picker = Picker::new(Schedule::Random(5), 9);
                let start = picker.rng.clone().usize(0..n);
                assert_eq!(
                    picker.pick(&ready),
                    scan_pick(Schedule::Random(5), 0, start, &ready),
                    "random n {n} start {start}"
                );
            }
        }
    }

    #[test]
    fn round_robin_and_reverse_cycle() {
        assert_eq!(order(Schedule::RoundRobin, 3, 5), [0, 1, 2, 0, 1]);
        assert_eq!(order(Schedule::Reverse, 3, 5), [0, 2, 1, 0, 2]);
    }

    #[test]
    fn warp_greedy_stays_in_the_first_warp() {
        let picks = order(Schedule::WarpGreedy, 64, 100);
        assert!(picks.iter().all(|&t| t < 32), "{picks:?}");
        // Once warp 0 is blocked, warp 1 runs.
        let mut picker = Picker::new(Schedule::WarpGreedy, 0);
        assert_eq!(picker.pick(&ready_where(64, |t| t >= 32)), Some(32));
    }

    #[test]
    fn random_is_seeded_and_skips_blocked_threads() {
        assert_eq!(
            order(Schedule::Random(7), 16, 20),
            order(Schedule::Random(7), 16, 20)
        );
        assert_ne!(
            order(Schedule::Random(7), 16, 20),
            order(Schedule::Random(8), 16, 20)
        );
        let mut picker = Picker::new(Schedule::Random(3), 0);
        for _ in 0..50 {
            assert_eq!(picker.pick(&ready_where(16, |t| t == 5)), Some(5));
        }
        assert_eq!(picker.pick(&ready_where(16, |_| false)), None);
    }

    #[test]
    fn schedules_parse_and_print() {
        for s in Schedule::all(42) {
            assert_eq!(s.to_string().parse::<Schedule>(), Ok(s));
        }
        assert!("sideways".parse::<Schedule>().is_err());
        let shuffled = Schedule::Random(1).block_order(10);
        assert_ne!(shuffled, (0..10).collect::<Vec<_>>());
        assert_eq!(Schedule::Reverse.block_order(3), [2, 1, 0]);
    }
}
