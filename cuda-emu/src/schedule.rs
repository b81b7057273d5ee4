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

    /// The next thread of `n` to run, or `None` when none is ready.
    pub(crate) fn pick(&mut self, n: usize, ready: impl Fn(usize) -> bool) -> Option<usize> {
        if n == 0 {
            return None;
        }
        let found = match self.schedule {
            Schedule::RoundRobin => (0..n).map(|k| (self.cursor + k) % n).find(|&t| ready(t)),
            Schedule::Reverse => (0..n)
                .map(|k| (self.cursor + n - k % n) % n)
                .find(|&t| ready(t)),
            Schedule::Random(_) => {
                let start = self.rng.usize(0..n);
                (0..n).map(|k| (start + k) % n).find(|&t| ready(t))
            }
            Schedule::WarpGreedy => {
                // Stay in the current warp while it can run, else the lowest warp that can.
                let warp = self.cursor / 32;
                let in_warp = warp * 32..((warp + 1) * 32).min(n);
                let width = in_warp.len();
                (0..width)
                    .map(|k| in_warp.start + (self.cursor - in_warp.start + k) % width)
                    .find(|&t| ready(t))
                    .or_else(|| (0..n).find(|&t| ready(t)))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn order(schedule: Schedule, n: usize, steps: usize) -> Vec<usize> {
        let mut picker = Picker::new(schedule, 0);
        (0..steps)
            .filter_map(|_| picker.pick(n, |_| true))
            .collect()
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
        assert_eq!(picker.pick(64, |t| t >= 32), Some(32));
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
            assert_eq!(picker.pick(16, |t| t == 5), Some(5));
        }
        assert_eq!(picker.pick(16, |_| false), None);
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
