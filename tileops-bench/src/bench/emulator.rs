//! The bench's line to the emulated device (cuda-emu): its launch log and its dry-run switch, and
//! the kernel ledger of one call built from them.
//!
//! cuda-emu is the process's `libcuda.so.1`. Besides the driver API it exports two controls,
//! found here with `dlopen(RTLD_NOLOAD)` on the library already loaded, never loading anything:
//! `cuda_emu_set_launch_log(path)` (each launch appends one JSON line to `path`: entry, grid,
//! block, dynamic shared memory, whether it ran, and the traffic it counted when built with the
//! traffic instrumentation) and `cuda_emu_set_dry_run(on)` (launches are checked and logged, not
//! run: the launch shapes of a row too large to emulate). The launch shapes and the SASS ledger
//! ([`crate::ledger`]) make the row's [`Ledger`].

use std::ffi::{CStr, CString, c_char, c_int};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::ledger::{LaunchShape, Ledger as SassLedger};
use crate::records::{LaunchLedger, Ledger, MAX_LEDGER_LAUNCHES, Traffic};

/// The names the stand-in driver is loaded under (cudarc opens one of them).
const DRIVER_NAMES: [&CStr; 2] = [c"libcuda.so.1", c"libcuda.so"];

/// The most bytes of launch log one call may leave (a log line is ~200 B; traffic sites add
/// ~150 B each): a bound on what the bench reads back.
const MAX_LOG_BYTES: u64 = 64 << 20;

/// The emulator's controls, found in the loaded stand-in driver.
pub(crate) struct Emulator {
    set_launch_log: unsafe extern "C" fn(*const c_char) -> c_int,
    set_dry_run: unsafe extern "C" fn(c_int) -> c_int,
    log: PathBuf,
}

impl Emulator {
    /// Finds the controls in the stand-in driver this process loaded; `Err` says why not (an
    /// emulator too old to have them, or no emulator at all). The launch log goes to a file of
    /// this process in the temporary directory.
    pub(crate) fn attach() -> Result<Emulator, String> {
        for name in DRIVER_NAMES {
            // SAFETY: RTLD_NOLOAD never loads a library (so runs no initialiser); it returns a
            // handle to one already loaded under that name, or null.
            let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
            if handle.is_null() {
                continue;
            }
            // SAFETY: looking a symbol up in a loaded library; null when absent.
            let (log, dry) = unsafe {
                (
                    libc::dlsym(handle, c"cuda_emu_set_launch_log".as_ptr()),
                    libc::dlsym(handle, c"cuda_emu_set_dry_run".as_ptr()),
                )
            };
            if log.is_null() || dry.is_null() {
                return Err(format!(
                    "the loaded {} exports no cuda_emu_set_launch_log/cuda_emu_set_dry_run: not a \
                     cuda-emu with a launch log (rebuild it)",
                    name.to_string_lossy()
                ));
            }
            let log_path = std::env::temp_dir().join(format!(
                "tileops-bench-launches-{}.jsonl",
                std::process::id()
            ));
            // SAFETY: both symbols are cuda-emu's exported controls, of exactly these C
            // signatures (cuda-emu/src/driver.rs).
            return Ok(unsafe {
                Emulator {
                    set_launch_log: std::mem::transmute::<
                        *mut libc::c_void,
                        unsafe extern "C" fn(*const c_char) -> c_int,
                    >(log),
                    set_dry_run: std::mem::transmute::<
                        *mut libc::c_void,
                        unsafe extern "C" fn(c_int) -> c_int,
                    >(dry),
                    log: log_path,
                }
            });
        }
        Err("no stand-in driver (libcuda.so.1 of cuda-emu) is loaded in this process".into())
    }

    /// Runs `call` with the launch log on (and, when `dry`, launches not run), and returns the
    /// launches it made, in order. The log is off again and its file gone when this returns.
    pub(crate) fn capture<T>(
        &self,
        dry: bool,
        call: impl FnOnce() -> T,
    ) -> Result<(T, Vec<LaunchLine>), String> {
        let _ = std::fs::remove_file(&self.log);
        let path = CString::new(self.log.as_os_str().as_encoded_bytes())
            .map_err(|_| format!("{}: a temporary path with a NUL byte", self.log.display()))?;
        // SAFETY: the controls take a NUL-terminated path (copied) or null, and an int.
        unsafe {
            (self.set_launch_log)(path.as_ptr());
            (self.set_dry_run)(c_int::from(dry));
        }
        let value = call();
        // SAFETY: as above; null turns the log off.
        unsafe {
            (self.set_dry_run)(0);
            (self.set_launch_log)(std::ptr::null());
        }
        let launches = read_log(&self.log);
        let _ = std::fs::remove_file(&self.log);
        Ok((value, launches?))
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.log);
    }
}

/// One line of the launch log, as cuda-emu writes it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub(crate) struct LaunchLine {
    pub(crate) entry: String,
    pub(crate) grid: [u32; 3],
    pub(crate) block: [u32; 3],
    pub(crate) dynamic_smem: u32,
    pub(crate) ran: bool,
    #[serde(default)]
    pub(crate) traffic: Option<TrafficLine>,
}

/// The traffic of a launch line (its per-site list is for the gates, not the records).
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub(crate) struct TrafficLine {
    pub(crate) read_bytes: u64,
    pub(crate) write_bytes: u64,
    pub(crate) global_requests: u64,
    pub(crate) global_sectors: u64,
    pub(crate) global_ideal_sectors: u64,
    pub(crate) shared_requests: u64,
    pub(crate) shared_wavefronts: u64,
    pub(crate) shared_ideal_wavefronts: u64,
}

/// Reads a launch log: one JSON object per line. A call without a launch (an op that only
/// copies) leaves no file.
fn read_log(path: &Path) -> Result<Vec<LaunchLine>, String> {
    let bytes = match crate::files::read_regular(path, MAX_LOG_BYTES) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading the emulator's launch log: {e}")),
    };
    let text = String::from_utf8(bytes).map_err(|_| "the launch log is not UTF-8".to_owned())?;
    parse_log(&text)
}

/// Parses launch-log text (at most [`MAX_LEDGER_LAUNCHES`] lines: one call's).
pub(crate) fn parse_log(text: &str) -> Result<Vec<LaunchLine>, String> {
    parse_lines(text, MAX_LEDGER_LAUNCHES)
}

/// Parses launch-log text of at most `max` launches.
pub(crate) fn parse_lines(text: &str, max: usize) -> Result<Vec<LaunchLine>, String> {
    let mut launches = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        if launches.len() == max {
            return Err(format!(
                "the log holds more than {max} launches, the most this reader takes"
            ));
        }
        launches.push(
            serde_json::from_str(line).map_err(|e| format!("launch log line {}: {e}", n + 1))?,
        );
    }
    Ok(launches)
}

/// The method of the ledger of a call that launched no tileops kernel (a GEMM runs cuBLASLt's
/// kernels, NVIDIA's, which the SASS ledger does not hold): no launches, priced as a library
/// call at the calibrated roofs ([`crate::report::predict::predict_library_call`]).
pub const LIBRARY_CALL: &str = "no tileops kernel: a library call (cuBLASLt's kernels, not in \
     the SASS ledger), priced at the calibrated roofs";

/// The kernel ledger of one call from its launches, each priced by the SASS ledger at its launch
/// shape. `call` says what the call moves: the bytes it streams (the larger of the bytes it
/// reads, as its manifest counts them, and the bytes it writes), the bytes its threads reload (a
/// broadcast weight once per row: [`SassLedger::launch_cost_with`]) and the bytes it writes. A
/// launch's elements, which the SASS ledger amortises per-thread work over, are the streamed
/// bytes over its entry's element size, the same basis as a streaming loop's elements per
/// iteration (the larger of the bytes one iteration loads and stores, over the element size),
/// so a loop that streams two tensors (K and V) is counted once per pair of elements. A
/// second-stage launch ([`crate::report::pipes::is_second_stage`]) is priced over its own
/// threads. A call without launches (a library's GEMM) gets a ledger without launches
/// ([`LIBRARY_CALL`]). `Err` names the launch the SASS ledger cannot price.
pub(crate) fn ledger_of_launches(
    launches: &[LaunchLine],
    call: &CallBytes,
    sass: &SassLedger,
) -> Result<Ledger, String> {
    let streamed_bytes = call.streamed;
    if launches.is_empty() {
        return Ok(Ledger {
            method: LIBRARY_CALL.to_owned(),
            launches: Vec::new(),
            written_bytes: Some(call.written),
        });
    }
    let mut out = Vec::with_capacity(launches.len());
    for line in launches {
        let shape = LaunchShape {
            grid: line.grid,
            block: line.block,
            dynamic_smem: line.dynamic_smem,
        };
        let threads = line
            .grid
            .iter()
            .chain(&line.block)
            .map(|&d| u64::from(d))
            .product();
        // A second stage's loops run over the first stage's partials, not over the call's
        // elements: it is priced over as many elements as it has threads (about one pass of its
        // loop per thread). Every other launch streams the call's tensors.
        let launch_elements = if crate::report::pipes::is_second_stage(&line.entry) {
            threads
        } else {
            let element_bytes = sass
                .entry(&line.entry)
                .map_err(|e| format!("the SASS ledger cannot price `{}`: {e}", line.entry))?
                .element_bytes;
            streamed_bytes / u64::from(element_bytes.max(1))
        };
        // A second stage reads the first stage's partials, not the call's tensors.
        let reloaded = if launch_elements == threads {
            0
        } else {
            call.reloaded
        };
        let cost = sass
            .launch_cost_with(&line.entry, &shape, launch_elements, reloaded)
            .map_err(|e| format!("the SASS ledger cannot price `{}`: {e}", line.entry))?;
        out.push(LaunchLedger {
            entry: line.entry.clone(),
            grid: line.grid,
            block: line.block,
            dynamic_smem: line.dynamic_smem,
            ran: line.ran,
            thread_instructions: cost.thread_instructions,
            mufu_ops: cost.mufu_ops,
            tensor_ops: cost.tensor_ops,
            instr_per_elem: cost.instr_per_elem,
            mufu_per_elem: cost.mufu_per_elem,
            registers: cost.registers,
            ctas_per_sm: cost.ctas_per_sm.max(1),
            traffic: line.traffic.map(|t| Traffic {
                read_bytes: t.read_bytes,
                write_bytes: t.write_bytes,
                global_requests: t.global_requests,
                global_sectors: t.global_sectors,
                global_ideal_sectors: t.global_ideal_sectors,
                shared_requests: t.shared_requests,
                shared_wavefronts: t.shared_wavefronts,
                shared_ideal_wavefronts: t.shared_ideal_wavefronts,
            }),
            shared_bytes: cost.shared_bytes,
            rounds: cost.rounds,
            barriers: cost.barriers,
        });
    }
    Ok(Ledger {
        method: format!(
            "instructions from the {} SASS (NVRTC {}, nvdisasm {}); launch shapes{} from cuda-emu",
            sass.toolchain.arch,
            sass.toolchain.nvrtc,
            sass.toolchain.nvdisasm,
            if launches.iter().any(|l| l.traffic.is_some()) {
                " and traffic"
            } else {
                ""
            }
        ),
        launches: out,
        written_bytes: Some(call.written),
    })
}

/// What one call moves, for its launches' ledger.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallBytes {
    /// What it streams: the larger of what it reads (its manifest's bytes beyond its outputs)
    /// and what it writes, unless the op says otherwise.
    pub(crate) streamed: u64,
    /// What its threads load again beyond that: each input that broadcasts over the largest
    /// one's trailing dims (a norm's weight), once per row of it ([`reloaded_bytes`]).
    pub(crate) reloaded: u64,
    /// What it writes: its outputs.
    pub(crate) written: u64,
}

/// Bytes a row-wise kernel reloads: every input whose shape is the trailing dims of the largest
/// input's (a weight `[H]` beside `x` `[N, H]`) is read by each of the largest input's rows,
/// `N` times in all. Inputs `(shape, element bytes)`.
///
pub(crate) fn reloaded_bytes(inputs: &[(Vec<usize>, usize)]) -> u64 {
    let numel = |shape: &[usize]| shape.iter().map(|&d| d as u64).product::<u64>();
    let Some((largest, _)) = inputs.iter().max_by_key(|(shape, _)| numel(shape)) else {
        return 0;
    };
    inputs
        .iter()
        .filter(|(shape, _)| {
            shape.len() < largest.len() && largest.ends_with(shape) && !shape.is_empty()
        })
        .map(|(_, bytes)| numel(largest).saturating_mul(*bytes as u64))
        .fold(0u64, u64::saturating_add)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launch_log_lines_parse_with_and_without_traffic() {
        let text = r#"{"entry":"relu_bf16","grid":[4,1,1],"block":[256,1,1],"dynamic_smem":0,"ran":true,"traffic":null}

{"entry":"softmax_rows_v4_f32","grid":[2,1,1],"block":[128,1,1],"dynamic_smem":64,"ran":false,"traffic":{"read_bytes":64,"write_bytes":32,"global_requests":2,"global_sectors":3,"global_ideal_sectors":3,"shared_requests":1,"shared_wavefronts":2,"shared_ideal_wavefronts":1,"sites":[]}}
"#;
        let launches = parse_log(text).unwrap();
        assert_eq!(launches.len(), 2);
        assert_eq!(launches[0].traffic, None);
        assert!(!launches[1].ran);
        assert_eq!(launches[1].traffic.unwrap().shared_wavefronts, 2);
        let err = parse_log("{\"entry\":1}").unwrap_err();
        assert!(err.starts_with("launch log line 1:"), "{err}");
    }

    #[test]
    fn launches_are_priced_over_the_streamed_bytes_in_their_own_elements() {
        let sass = SassLedger::builtin().unwrap();
        let text = r#"{"entry":"gqa_decode_g4_d128_bf16","grid":[64,8,1],"block":[128,1,1],"dynamic_smem":0,"ran":false,"traffic":null}
{"entry":"gqa_decode_merge_bf16","grid":[32,1,1],"block":[128,1,1],"dynamic_smem":0,"ran":false,"traffic":null}
"#;
        let launches = parse_log(text).unwrap();
        // K and V of 2^20 bf16 elements each: 4 MiB streamed, 2^21 elements of 2 bytes.
        let call = CallBytes {
            streamed: 4 << 20,
            reloaded: 0,
            written: 4096,
        };
        let ledger = ledger_of_launches(&launches, &call, sass).unwrap();
        assert_eq!(ledger.written_bytes, Some(4096));
        let shape = |l: &LaunchLine| LaunchShape {
            grid: l.grid,
            block: l.block,
            dynamic_smem: l.dynamic_smem,
        };
        let first = sass
            .launch_cost("gqa_decode_g4_d128_bf16", &shape(&launches[0]), 2 << 20)
            .unwrap();
        assert_eq!(
            ledger.launches[0].thread_instructions,
            first.thread_instructions
        );
        // The merge streams the partials: priced over its own 4096 threads.
        let merge = sass
            .launch_cost("gqa_decode_merge_bf16", &shape(&launches[1]), 4096)
            .unwrap();
        assert_eq!(
            ledger.launches[1].thread_instructions,
            merge.thread_instructions
        );
        // No launch: a library call, a ledger without launches.
        let library = ledger_of_launches(&[], &call, sass).unwrap();
        assert!(library.launches.is_empty() && library.method == LIBRARY_CALL);
        assert_eq!(library.written_bytes, Some(4096));
    }

    #[test]
    fn broadcast_inputs_are_reloaded_once_per_row() {
        // rms_norm: x [2048, 4096] bf16 and its weight [4096]: the weight once per row.
        let norm = [(vec![2048, 4096], 2), (vec![4096], 2)];
        assert_eq!(reloaded_bytes(&norm), 2048 * 4096 * 2);
        // rope: q [4096, 32, 128], positions [4096] (not a trailing broadcast), a table larger
        // than none of them broadcasting: nothing reloaded.
        let rope = [
            (vec![4096, 32, 128], 2),
            (vec![4096], 8),
            (vec![131072, 128], 4),
        ];
        assert_eq!(reloaded_bytes(&rope), 0);
        // Equal shapes (fused_add_rms_norm's x and residual) are not broadcasts.
        assert_eq!(reloaded_bytes(&[(vec![8, 4], 2), (vec![8, 4], 2)]), 0);
        assert_eq!(reloaded_bytes(&[]), 0);
    }
}
