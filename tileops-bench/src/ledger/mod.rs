//! The instruction ledger: what every kernel entry point costs in SASS instructions, SFU
//! (MUFU) operations, registers and occupancy on sm_90, counted from the CUBINs NVRTC builds,
//! with no GPU.
//!
//! The figures are generated ([`generate`]) from the disassembly (`nvdisasm`) of each entry's
//! sm_90 CUBIN and committed as `tileops-bench/ledger/sass_sm90.json`, which this crate embeds:
//! [`Ledger::builtin`] works on any machine. Per entry the ledger holds the common path's
//! instructions outside loops (fixed per-thread work) and one iteration of each loop with the
//! elements it handles; [`Ledger::launch_cost`] turns them into the cost of one launch.
//! `tileops-bench/ledger/METHOD.md` states the counting method and its expected error.
//!
//! ```
//! use tileops_bench::ledger::{LaunchShape, Ledger};
//!
//! let ledger = Ledger::builtin()?;
//! // relu over 2048×4096 bf16 elements, 8 CTAs of 256 threads per SM on 132 SMs.
//! let launch = LaunchShape { grid: [8 * 132, 1, 1], block: [256, 1, 1], dynamic_smem: 0 };
//! let cost = ledger.launch_cost("relu_bf16", &launch, 2048 * 4096)?;
//! assert!(cost.instr_per_elem > 4.0 && cost.instr_per_elem < 10.0);
//! assert_eq!(cost.mufu_per_elem, 0.0);
//! # Ok::<(), tileops_bench::ledger::LedgerError>(())
//! ```
//!
//! Regenerate the JSON after changing a kernel (needs the pinned wheels, NVRTC and nvdisasm):
//! `TILEOPS_LEDGER_UPDATE=1 cargo test -p tileops-bench --test it ledger`.

pub mod backtest;
pub mod cfg;
pub mod generate;
pub mod occupancy;
pub mod sass;
pub mod walk;

use std::fmt;
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

pub use occupancy::{SM90, SmLimits};
pub use walk::Tally;

/// The committed ledger, embedded.
const BUILTIN: &str = include_str!("../../ledger/sass_sm90.json");

/// What went wrong reading, generating or using the ledger.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LedgerError {
    /// No entry point of that name is in the ledger.
    #[error("`{entry}` is not in the SASS ledger{hint}")]
    UnknownEntry {
        /// The name asked for.
        entry: String,
        /// ` (did you mean `x`?)`, or empty.
        hint: String,
    },
    /// The launch cannot run on sm_90 as given.
    #[error(
        "{entry}: launch grid {grid:?} block {block:?} dynamic smem {dynamic_smem} B: {reason}"
    )]
    BadLaunch {
        /// The entry point.
        entry: String,
        /// The grid asked for.
        grid: [u32; 3],
        /// The block asked for.
        block: [u32; 3],
        /// The dynamic shared memory asked for.
        dynamic_smem: u32,
        /// Why it cannot run.
        reason: String,
    },
    /// A call over no elements has no cost per element.
    #[error(
        "{entry}: a launch over 0 elements has no cost per element; pass the elements the call streams"
    )]
    NoElements {
        /// The entry point.
        entry: String,
    },
    /// The disassembly could not be read.
    #[error("nvdisasm output line {line}: {message}")]
    Sass {
        /// 1-based line.
        line: usize,
        /// What is wrong there.
        message: String,
    },
    /// The ledger JSON could not be read.
    #[error("the SASS ledger JSON: {0}")]
    Json(String),
    /// Generating the ledger failed (NVRTC, nvdisasm, a missing entry).
    #[error("generating the SASS ledger: {0}")]
    Generate(String),
}

/// Which tools built the ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toolchain {
    /// The architecture the CUBINs were built for (`sm_90`).
    pub arch: String,
    /// NVRTC's version (`13.0`).
    pub nvrtc: String,
    /// nvdisasm's version line (`Cuda compilation tools, release 13.2, V13.2.86`).
    pub nvdisasm: String,
}

/// How a loop's iterations are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopRole {
    /// It streams elements: `elements / elements_per_iteration` iterations in all.
    Stream,
    /// One iteration per thread: a loop that touches no global memory of the stream (a
    /// reduction tree, a staging loop), or one around a streaming loop (per row, per output).
    Fixed,
    /// The narrower copy of the streaming loop just before it (the one-vector remainder of a
    /// four-vector loop): not counted, as rows are assumed whole multiples of the wide loop.
    Remainder,
}

/// One loop of an entry's common path, one iteration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoopLedger {
    /// Byte offset of the loop header in the entry's SASS, as nvdisasm prints it (`"0x0130"`
    /// in the JSON: `/*0130*/` in the disassembly).
    #[serde(with = "hex_offset")]
    pub header: u32,
    /// How its iterations are counted.
    pub role: LoopRole,
    /// Elements one iteration's global accesses cover: the larger of the bytes it loads and
    /// stores (only 16-byte accesses in a kernel that has them), over the element size.
    pub elements_per_iteration: f64,
    /// One iteration's instructions (nested loops' own instructions not included).
    pub body: Tally,
}

/// One entry point's static figures on sm_90.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EntryLedger {
    /// The entry point (`relu_bf16`).
    pub entry: String,
    /// Its kernel file (`activation.cu`).
    pub file: String,
    /// Bytes of its element type, from the dtype part of its name (`_f32` 4, `_f16`/`_bf16` 2,
    /// as the suffix or before a shape suffix such as `_d128`; else 4).
    pub element_bytes: u32,
    /// Registers per thread (ptxas).
    pub registers: u32,
    /// Stack frame bytes per thread (ptxas).
    pub stack_bytes: u32,
    /// Spill bytes stored + loaded per thread (ptxas).
    pub spill_bytes: u32,
    /// Static shared memory per CTA, bytes (ptxas).
    pub static_smem: u32,
    /// The common path outside loops: once per thread.
    pub fixed: Tally,
    /// The loops on the common path, in the order it enters them.
    pub loops: Vec<LoopLedger>,
}

impl EntryLedger {
    /// Instructions per thread that do not scale with the elements: the path outside loops
    /// and the [`LoopRole::Fixed`] loops (one iteration each).
    pub fn fixed_per_thread(&self) -> Tally {
        let mut tally = self.fixed;
        for l in self.loops.iter().filter(|l| l.role == LoopRole::Fixed) {
            tally.accumulate(&l.body);
        }
        tally
    }

    /// `(instructions, MUFU)` per element in the loops that stream elements, fixed work left
    /// out: the cost once a thread handles many elements.
    pub fn loop_per_element(&self) -> (f64, f64) {
        self.loops
            .iter()
            .filter(|l| l.role == LoopRole::Stream)
            .fold((0.0, 0.0), |(i, m), l| {
                (
                    i + f64::from(l.body.instructions) / l.elements_per_iteration,
                    m + f64::from(l.body.mufu) / l.elements_per_iteration,
                )
            })
    }
}

/// A kernel launch: the configuration `cuLaunchKernel` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchShape {
    /// CTAs per grid dimension.
    pub grid: [u32; 3],
    /// Threads per CTA dimension.
    pub block: [u32; 3],
    /// Dynamic shared memory per CTA, bytes.
    pub dynamic_smem: u32,
}

/// What one launch costs, from the ledger.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LaunchCost {
    /// SASS instructions issued, summed over threads (thread-instructions; ÷ 32 for warp
    /// instructions).
    pub thread_instructions: f64,
    /// MUFU operations, summed over threads.
    pub mufu_ops: f64,
    /// Tensor-core warp instructions (`HMMA`: one `mma.sync` each), summed over warps.
    pub tensor_ops: f64,
    /// `thread_instructions / elements`.
    pub instr_per_elem: f64,
    /// `mufu_ops / elements`.
    pub mufu_per_elem: f64,
    /// Registers per thread.
    pub registers: u32,
    /// Resident CTAs per SM.
    pub ctas_per_sm: u32,
    /// Resident warps per SM (`ctas_per_sm` × warps per CTA).
    pub warps_per_sm: u32,
    /// CTAs of the grid ÷ (resident CTAs per SM × 132 SMs).
    pub waves: f64,
    /// Bytes moved through shared memory, summed over threads (`LDS`/`STS`, `LDSM`, `LDGSTS`'s
    /// writes), before bank conflicts.
    #[serde(default)]
    pub shared_bytes: f64,
    /// Dependent rounds of global loads one thread waits for: the fixed part's, plus each
    /// streaming loop's per iteration times the iterations a thread runs.
    #[serde(default)]
    pub rounds: f64,
    /// Whether its warps meet at block-wide barriers (a CTA then waits as one).
    #[serde(default)]
    pub barriers: bool,
    /// The share of the fixed part's data-guarded slots this launch's threads run (1 unless
    /// they load less than the walk does: [`Ledger::launch_cost_with`]).
    #[serde(default = "one")]
    pub slot_activity: f64,
}

fn one() -> f64 {
    1.0
}

/// The instruction ledger of every entry point.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Ledger {
    /// What built it.
    pub toolchain: Toolchain,
    /// One per entry point, in the order of `tileops::kernels::SOURCES` and their entries.
    pub entries: Vec<EntryLedger>,
}

impl Ledger {
    /// The ledger committed with this crate (`tileops-bench/ledger/sass_sm90.json`).
    pub fn builtin() -> Result<&'static Ledger, LedgerError> {
        static PARSED: OnceLock<Result<Ledger, LedgerError>> = OnceLock::new();
        PARSED
            .get_or_init(|| Ledger::from_json(BUILTIN))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Reads a ledger from its JSON.
    pub fn from_json(text: &str) -> Result<Ledger, LedgerError> {
        serde_json::from_str(text).map_err(|e| LedgerError::Json(e.to_string()))
    }

    /// The JSON committed as `sass_sm90.json`: pretty, one field a line, a final newline.
    pub fn to_json(&self) -> String {
        let mut text = serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            // Plain structs of numbers and strings always serialise; keep the message if not.
            format!("{{\"error\": {:?}}}", e.to_string())
        });
        text.push('\n');
        text
    }

    /// One entry point's figures.
    pub fn entry(&self, entry: &str) -> Result<&EntryLedger, LedgerError> {
        self.entries
            .iter()
            .find(|e| e.entry == entry)
            .ok_or_else(|| {
                let best = self
                    .entries
                    .iter()
                    .map(|e| (strsim::jaro_winkler(&e.entry, entry), &e.entry))
                    .filter(|(score, _)| *score > 0.8)
                    .max_by(|a, b| a.0.total_cmp(&b.0));
                LedgerError::UnknownEntry {
                    entry: entry.to_owned(),
                    hint: best.map_or_else(String::new, |(_, name)| {
                        format!(" (did you mean `{name}`?)")
                    }),
                }
            })
    }

    /// The cost of launching `entry` with `launch` over `elements`: what the call streams, in
    /// the entry's elements (the larger of the bytes it reads and the bytes it writes, over the
    /// entry's element size: the basis of a loop's elements per iteration).
    ///
    /// Each thread of the grid runs the fixed work once
    /// ([`EntryLedger::fixed_per_thread`]); each streaming loop runs
    /// `elements / elements_per_iteration` iterations in all, spread over the threads.
    /// Occupancy is sm_90's ([`SM90`]) with the entry's registers and static shared memory
    /// plus `dynamic_smem`; waves are over 132 SMs.
    pub fn launch_cost(
        &self,
        entry: &str,
        launch: &LaunchShape,
        elements: u64,
    ) -> Result<LaunchCost, LedgerError> {
        self.launch_cost_with(entry, launch, elements, 0)
    }

    /// [`Ledger::launch_cost`] for a launch whose threads also reload `reloaded_bytes` beyond
    /// the call's elements (a norm's weight, loaded once per row: the bytes of the rows they
    /// serve). The fixed part's data-guarded slots (vector slots a thread runs only when its
    /// data exists) are priced at the share the threads run: when the walk loads more bytes
    /// per thread than the launch's threads load (`elements × element size + reloaded_bytes`
    /// over the threads), the guarded loads fill only what is left, and the guarded
    /// instructions run in that proportion (`slot_activity`).
    ///
    /// ```
    /// use tileops_bench::ledger::{LaunchShape, Ledger};
    ///
    /// let ledger = Ledger::builtin()?;
    /// // rms_norm over 2048 rows of 4096 bf16, one block of 256 threads a row; every row
    /// // reloads the 8 KiB weight.
    /// let launch = LaunchShape { grid: [2048, 1, 1], block: [256, 1, 1], dynamic_smem: 0 };
    /// let cost = ledger.launch_cost_with("rms_norm_rows_v4_bf16", &launch, 2048 * 4096, 2048 * 4096 * 2)?;
    /// assert!(cost.rounds >= 1.0);
    /// assert!(cost.slot_activity > 0.0 && cost.slot_activity <= 1.0);
    /// # Ok::<(), tileops_bench::ledger::LedgerError>(())
    /// ```
    pub fn launch_cost_with(
        &self,
        entry: &str,
        launch: &LaunchShape,
        elements: u64,
        reloaded_bytes: u64,
    ) -> Result<LaunchCost, LedgerError> {
        let e = self.entry(entry)?;
        let bad = |reason: String| LedgerError::BadLaunch {
            entry: entry.to_owned(),
            grid: launch.grid,
            block: launch.block,
            dynamic_smem: launch.dynamic_smem,
            reason,
        };
        if launch.grid.contains(&0) || launch.block.contains(&0) {
            return Err(bad("a grid or block dimension of 0".into()));
        }
        if elements == 0 {
            return Err(LedgerError::NoElements {
                entry: entry.to_owned(),
            });
        }
        let block_threads = launch
            .block
            .iter()
            .try_fold(1u32, |acc, d| acc.checked_mul(*d))
            .ok_or_else(|| bad("more threads per CTA than u32 holds".into()))?;
        let shared = e
            .static_smem
            .checked_add(launch.dynamic_smem)
            .ok_or_else(|| bad("shared memory overflows u32".into()))?;
        let ctas_per_sm =
            occupancy::ctas_per_sm(&SM90, block_threads, e.registers, shared).map_err(bad)?;
        let ctas: f64 = launch.grid.iter().map(|d| f64::from(*d)).product();
        let threads = ctas * f64::from(block_threads);
        let fixed = e.fixed_per_thread();
        // What one thread loads: its share of the elements and of the reloaded bytes.
        let loaded =
            (elements as f64 * f64::from(e.element_bytes) + reloaded_bytes as f64) / threads;
        let walked = f64::from(fixed.load_bytes);
        let guarded = f64::from(fixed.guarded_load_bytes);
        let slot_activity = if walked > loaded && guarded > 0.0 {
            ((loaded - (walked - guarded)) / guarded).clamp(0.0, 1.0)
        } else {
            1.0
        };
        let idle = 1.0 - slot_activity;
        let fixed_instructions =
            f64::from(fixed.instructions) - idle * f64::from(fixed.guarded_instructions);
        let fixed_mufu = f64::from(fixed.mufu) - idle * f64::from(fixed.guarded_mufu);
        let elements = elements as f64;
        let mut instructions = threads * fixed_instructions;
        let mut mufu = threads * fixed_mufu;
        let mut tensor = threads * f64::from(fixed.tensor);
        let mut shared_bytes = threads * f64::from(fixed.shared_bytes);
        let mut rounds = f64::from(fixed.load_rounds);
        let mut barriers = fixed.barriers > 0;
        for l in e.loops.iter().filter(|l| l.role == LoopRole::Stream) {
            let iterations = elements / l.elements_per_iteration;
            instructions += iterations * f64::from(l.body.instructions);
            mufu += iterations * f64::from(l.body.mufu);
            tensor += iterations * f64::from(l.body.tensor);
            shared_bytes += iterations * f64::from(l.body.shared_bytes);
            rounds += iterations / threads * f64::from(l.body.load_rounds);
            barriers |= l.body.barriers > 0;
        }
        let warps_per_cta = block_threads.div_ceil(32);
        Ok(LaunchCost {
            thread_instructions: instructions,
            mufu_ops: mufu,
            // The walk counts a thread's instructions; an mma is one per warp.
            tensor_ops: tensor / 32.0,
            instr_per_elem: instructions / elements,
            mufu_per_elem: mufu / elements,
            registers: e.registers,
            ctas_per_sm,
            warps_per_sm: ctas_per_sm * warps_per_cta,
            waves: ctas / f64::from(ctas_per_sm * SM90.sm_count),
            shared_bytes,
            rounds,
            barriers,
            slot_activity,
        })
    }
}

/// Offsets in the JSON as nvdisasm's `/*0130*/` spells them: `"0x0130"`.
mod hex_offset {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(offset: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{offset:#06x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let text = String::deserialize(d)?;
        text.strip_prefix("0x")
            .and_then(|hex| u32::from_str_radix(hex, 16).ok())
            .ok_or_else(|| D::Error::custom(format!("`{text}` is not an offset like \"0x0130\"")))
    }
}

impl fmt::Display for LaunchShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [gx, gy, gz] = self.grid;
        let [bx, by, bz] = self.block;
        write!(f, "grid {gx}×{gy}×{gz}, block {bx}×{by}×{bz}")?;
        if self.dynamic_smem > 0 {
            write!(f, ", {} B dynamic smem", self.dynamic_smem)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(instructions: u32, mufu: u32) -> Tally {
        Tally {
            instructions,
            mufu,
            ..Tally::default()
        }
    }

    /// A relu-like entry: 20 fixed instructions, a loop of 176 for 32 elements, a
    /// 10-instruction reduction-tree loop that touches no global memory, and a remainder loop
    /// that is not counted.
    fn ledger() -> Ledger {
        Ledger {
            toolchain: Toolchain {
                arch: "sm_90".into(),
                nvrtc: "13.0".into(),
                nvdisasm: "test".into(),
            },
            entries: vec![EntryLedger {
                entry: "k_bf16".into(),
                file: "k.cu".into(),
                element_bytes: 2,
                registers: 38,
                stack_bytes: 0,
                spill_bytes: 0,
                static_smem: 0,
                fixed: tally(20, 1),
                loops: vec![
                    LoopLedger {
                        header: 0x130,
                        role: LoopRole::Stream,
                        elements_per_iteration: 32.0,
                        body: tally(176, 2),
                    },
                    LoopLedger {
                        header: 0x400,
                        role: LoopRole::Fixed,
                        elements_per_iteration: 0.0,
                        body: tally(10, 0),
                    },
                    LoopLedger {
                        header: 0x600,
                        role: LoopRole::Remainder,
                        elements_per_iteration: 8.0,
                        body: tally(50, 1),
                    },
                ],
            }],
        }
    }

    #[test]
    fn fixed_work_per_thread_and_loops_per_element() {
        let launch = LaunchShape {
            grid: [1056, 1, 1],
            block: [256, 1, 1],
            dynamic_smem: 0,
        };
        let elements = 2048 * 4096;
        let cost = ledger().launch_cost("k_bf16", &launch, elements).unwrap();
        let threads = 1056.0 * 256.0;
        let want = threads * 30.0 + elements as f64 / 32.0 * 176.0;
        assert!((cost.thread_instructions - want).abs() < 1e-6);
        assert!((cost.instr_per_elem - want / elements as f64).abs() < 1e-12);
        let want_mufu = threads + elements as f64 / 32.0 * 2.0;
        assert!((cost.mufu_ops - want_mufu).abs() < 1e-6);
        assert_eq!(cost.tensor_ops, 0.0);
        // With 4 HMMAs an iteration (one mma each per warp, counted on a thread's path) the
        // launch issues a warp's share of them.
        let mut mma = ledger();
        mma.entries[0].loops[0].body.tensor = 4;
        let cost = mma.launch_cost("k_bf16", &launch, elements).unwrap();
        assert!((cost.tensor_ops - elements as f64 / 32.0 * 4.0 / 32.0).abs() < 1e-6);
        // 38 registers → 40 → 1280 per warp → 51 warps → 6 CTAs of 8 warps.
        assert_eq!((cost.ctas_per_sm, cost.warps_per_sm), (6, 48));
        assert!((cost.waves - 1056.0 / (6.0 * 132.0)).abs() < 1e-12);
        let per = ledger().entries[0].loop_per_element();
        assert!((per.0 - 5.5).abs() < 1e-12 && (per.1 - 0.0625).abs() < 1e-12);
    }

    #[test]
    fn errors_are_values() {
        let l = ledger();
        let ok = LaunchShape {
            grid: [1, 1, 1],
            block: [128, 1, 1],
            dynamic_smem: 0,
        };
        let err = l.launch_cost("k_b16", &ok, 1).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`k_b16` is not in the SASS ledger (did you mean `k_bf16`?)"
        );
        let zero = LaunchShape {
            grid: [0, 1, 1],
            ..ok
        };
        assert!(matches!(
            l.launch_cost("k_bf16", &zero, 1),
            Err(LedgerError::BadLaunch { .. })
        ));
        let huge = LaunchShape {
            block: [2048, 1, 1],
            ..ok
        };
        let err = l.launch_cost("k_bf16", &huge, 1).unwrap_err();
        assert!(err.to_string().contains("2048 threads per CTA"), "{err}");
        let smem = LaunchShape {
            dynamic_smem: 300_000,
            ..ok
        };
        assert!(l.launch_cost("k_bf16", &smem, 1).is_err());
        assert_eq!(
            l.launch_cost("k_bf16", &ok, 0),
            Err(LedgerError::NoElements {
                entry: "k_bf16".into()
            })
        );
    }

    #[test]
    fn json_round_trips() {
        let l = ledger();
        let json = l.to_json();
        assert!(json.contains("\"header\": \"0x0130\""), "{json}");
        assert_eq!(Ledger::from_json(&json).unwrap(), l);
        let bad = json.replace("\"0x0130\"", "\"0130\"");
        let err = Ledger::from_json(&bad).unwrap_err();
        assert!(err.to_string().contains("`0130` is not an offset"), "{err}");
        assert!(matches!(Ledger::from_json("{"), Err(LedgerError::Json(_))));
    }
}
