//! The common path through one function: the walk that the ledger counts.
//!
//! From the entry block, the walk follows one successor at each conditional branch and stops at
//! `EXIT`. Every instruction of a block it passes is counted once, predicated or not (a
//! predicated-off instruction still issues). At a fork it prefers, in this order:
//! 1. in a function with 16-byte global accesses, the side without narrower global accesses
//!    when the other side has only those (full vectors and aligned rows assumed: the scalar
//!    tail after a vector loop and the scalar peel before it are not run);
//! 2. the side with more 16-byte global accesses (aligned rows, full vectors);
//! 3. the side that is not a slow path: one where every way through passes a `CALL` (IEEE
//!    division and square root, 64-bit division call their slow paths; a side where a way
//!    avoids the call, such as a 32-bit fast path beside the 64-bit call, is not);
//! 4. the fall-through (ptxas lays the likely side out first; a guard such as `@P0 EXIT` or
//!    `@P0 BRA skip` is assumed not taken).
//!
//! A side is the blocks reachable from it (back edges not followed) that are not reachable
//! from the other side: what happens only if that side is taken. Loops run one iteration: a
//! back edge is never followed; a conditional latch falls through to the loop's exit, and an
//! unconditional one resumes at the first exit edge of the loop that the walk passed.

use super::cfg::{Cfg, Next};
use super::sass::{Function, Instruction};

/// Instructions counted on part of the path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    /// SASS instructions.
    pub instructions: u32,
    /// MUFU (SFU) instructions.
    pub mufu: u32,
    /// Tensor-core instructions (`HMMA`: one `mma.sync`, a warp's m16n8k16 on sm_80 and sm_90).
    #[serde(default)]
    pub tensor: u32,
    /// Shared-memory fragment loads (`LDSM`, `ldmatrix`).
    #[serde(default)]
    pub ldsm: u32,
    /// Asynchronous global → shared copies (`LDGSTS`, `cp.async`), also counted in the loads.
    #[serde(default)]
    pub async_copies: u32,
    /// 16-byte global loads (`LDG.E.128`, and `LDGSTS.E.BYPASS.128`: `cp.async` of 16 bytes).
    pub wide_loads: u32,
    /// 16-byte global stores (`STG.E.128`).
    pub wide_stores: u32,
    /// Bytes one thread loads from global memory (all widths, predicated accesses included).
    pub load_bytes: u32,
    /// Bytes one thread stores to global memory (all widths, predicated accesses included).
    pub store_bytes: u32,
    /// Bytes one thread moves through shared memory: `LDS`/`STS`/`ATOMS` of their width,
    /// `LDSM` (16 bytes a thread for `.4`), and the shared-memory writes of `LDGSTS`.
    #[serde(default)]
    pub shared_bytes: u32,
    /// Block-wide barriers (`BAR.SYNC`): a CTA whose warps wait for each other.
    #[serde(default)]
    pub barriers: u32,
    /// Dependent rounds of global loads: a round is the loads issued before any of their
    /// results is used (a wait on HBM's latency), opened by its first load. Computed from the
    /// registers the path's instructions read and write (`count_load_rounds`).
    #[serde(default)]
    pub load_rounds: u32,
    /// Of `instructions`, those in a region the walk entered by a branch whose predicate also
    /// guards global loads (a vector slot a thread runs only when its data exists: `@P2 LDG`,
    /// then `@!P2 BRA` over the slot's work). A launch whose threads load less than the walk
    /// does runs a share of them ([`super::Ledger::launch_cost`]).
    #[serde(default)]
    pub guarded_instructions: u32,
    /// Of `mufu`, those in such regions.
    #[serde(default)]
    pub guarded_mufu: u32,
    /// Of `load_bytes`, those of loads predicated on such a guard.
    #[serde(default)]
    pub guarded_load_bytes: u32,
}

impl Tally {
    /// Adds `other`'s counts to these.
    pub fn accumulate(&mut self, other: &Tally) {
        self.instructions += other.instructions;
        self.mufu += other.mufu;
        self.tensor += other.tensor;
        self.ldsm += other.ldsm;
        self.async_copies += other.async_copies;
        self.wide_loads += other.wide_loads;
        self.wide_stores += other.wide_stores;
        self.load_bytes += other.load_bytes;
        self.store_bytes += other.store_bytes;
        self.shared_bytes += other.shared_bytes;
        self.barriers += other.barriers;
        self.load_rounds += other.load_rounds;
        self.guarded_instructions += other.guarded_instructions;
        self.guarded_mufu += other.guarded_mufu;
        self.guarded_load_bytes += other.guarded_load_bytes;
    }

    /// Counts instructions `start..end`; `guarded`: they sit in a data-guarded region.
    /// `data_guards`: the function's [`data_guards`].
    fn add(
        &mut self,
        function: &Function,
        start: usize,
        end: usize,
        guarded: bool,
        data_guards: &[&str],
    ) {
        for instruction in &function.instructions[start..end] {
            self.instructions += 1;
            self.guarded_instructions += u32::from(guarded);
            self.guarded_mufu += u32::from(guarded && instruction.is_mufu());
            self.shared_bytes += instruction.shared_bytes();
            self.barriers += u32::from(instruction.opcode.starts_with("BAR.SYNC"));
            self.mufu += u32::from(instruction.is_mufu());
            self.tensor += u32::from(instruction.is_tensor());
            self.ldsm += u32::from(instruction.is_ldsm());
            self.async_copies += u32::from(instruction.is_async_copy());
            if let Some((store, bytes)) = instruction.global_access() {
                if store {
                    self.store_bytes += bytes;
                    self.wide_stores += u32::from(bytes == 16);
                } else {
                    self.load_bytes += bytes;
                    self.wide_loads += u32::from(bytes == 16);
                    if instruction
                        .predicate
                        .as_deref()
                        .is_some_and(|p| data_guards.contains(&p))
                    {
                        self.guarded_load_bytes += bytes;
                    }
                }
            }
        }
    }
}

/// The guards of global loads in `function` (`@P2`, `@!P3`): predicates that say whether a
/// thread's data exists.
fn data_guards(function: &Function) -> Vec<&str> {
    let mut out: Vec<&str> = function
        .instructions
        .iter()
        .filter(|i| matches!(i.global_access(), Some((false, _))))
        .filter_map(|i| i.predicate.as_deref())
        .filter(|p| *p != "@PT")
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The guard under which the side the walk took runs: the taken branch's own predicate, or
/// its negation for the fall-through (`@!P2 BRA skip` falls through when `P2`).
fn side_guard(branch: &Instruction, took_branch: bool) -> Option<String> {
    let p = branch.predicate.as_deref()?;
    if p == "@PT" {
        return None;
    }
    Some(if took_branch {
        p.to_owned()
    } else if let Some(positive) = p.strip_prefix("@!") {
        format!("@{positive}")
    } else {
        format!("@!{}", &p[1..])
    })
}

/// The common path's counts: outside loops, and per loop (one iteration, nested loops' own
/// instructions counted in their own tally), loops in the order the walk entered them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Path {
    /// Instructions outside every loop.
    pub fixed: Tally,
    /// The loops the walk entered, in order.
    pub loops: Vec<WalkedLoop>,
    /// The blocks walked, in order (indices into [`Cfg::blocks`]).
    pub blocks: Vec<usize>,
    /// For each walked block, the loop it counts in (an index into `loops`), or `None` for
    /// the fixed part.
    pub parts: Vec<Option<usize>>,
}

impl Path {
    /// Everything walked, the fixed part and one iteration of each loop: what a subroutine call
    /// costs where it is made.
    pub fn total(&self) -> Tally {
        let mut t = self.fixed;
        for l in &self.loops {
            t.accumulate(&l.body);
        }
        t
    }
}

/// One loop on the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkedLoop {
    /// Offset of the loop header's first instruction.
    pub header: u32,
    /// The header offset of the innermost loop that encloses this one, if any.
    pub parent: Option<u32>,
    /// One iteration, nested loops' own instructions excluded.
    pub body: Tally,
}

/// What one side of a fork holds.
#[derive(Debug, Default)]
struct Side {
    calls: u32,
    wide: u32,
    narrow: u32,
}

fn side(function: &Function, cfg: &Cfg, members: &[bool]) -> Side {
    let mut s = Side::default();
    for (b, _) in members.iter().enumerate().filter(|(_, m)| **m) {
        let block = &cfg.blocks[b];
        for instruction in &function.instructions[block.start..block.end] {
            s.calls += u32::from(instruction.base() == "CALL");
            match instruction.global_access() {
                Some((_, 16)) => s.wide += 1,
                Some(_) => s.narrow += 1,
                None => {}
            }
        }
    }
    s
}

/// Picks the fall-through (`false`) or the branch side (`true`) at a fork.
fn choose(function: &Function, cfg: &Cfg, fall: Next, taken: Next, vector: bool) -> bool {
    let reach = |n: Next| match n {
        Next::Block(b) => cfg.forward_reach(b),
        Next::Exit => vec![false; cfg.blocks.len()],
    };
    let (rf, rt) = (reach(fall), reach(taken));
    let only =
        |a: &[bool], b: &[bool]| -> Vec<bool> { a.iter().zip(b).map(|(x, y)| *x && !*y).collect() };
    let f = side(function, cfg, &only(&rf, &rt));
    let t = side(function, cfg, &only(&rt, &rf));
    if vector {
        let tail = |s: &Side| s.narrow > 0 && s.wide == 0;
        if tail(&f) && t.narrow == 0 {
            return true;
        }
        if tail(&t) && f.narrow == 0 {
            return false;
        }
    }
    if f.wide != t.wide {
        return t.wide > f.wide;
    }
    // A slow path: every way through the side passes a call. A side with a call on one of its
    // ways only (a 32-bit fast path beside a 64-bit division call; a loop of divisions) is not.
    let slow_f = f.calls > 0 && call_unavoidable(function, cfg, fall, &rt);
    let slow_t = t.calls > 0 && call_unavoidable(function, cfg, taken, &rf);
    if slow_f != slow_t {
        return slow_f;
    }
    false
}

/// Whether every way from `start` to the continuation (a block in `join`, or the exit) passes
/// a block holding a `CALL`.
fn call_unavoidable(function: &Function, cfg: &Cfg, start: Next, join: &[bool]) -> bool {
    let Next::Block(start) = start else {
        return false;
    };
    let has_call = |b: usize| {
        let block = &cfg.blocks[b];
        function.instructions[block.start..block.end]
            .iter()
            .any(|i| i.base() == "CALL")
    };
    let mut seen = vec![false; cfg.blocks.len()];
    let mut stack = vec![start];
    while let Some(b) = stack.pop() {
        if std::mem::replace(&mut seen[b], true) || has_call(b) {
            continue;
        }
        if join[b] {
            return false;
        }
        for next in &cfg.blocks[b].next {
            match *next {
                Next::Exit => return false,
                Next::Block(n) if !cfg.is_back(b, n) => stack.push(n),
                Next::Block(_) => {}
            }
        }
    }
    true
}

/// Walks `function`'s common path.
pub fn common_path(function: &Function, cfg: &Cfg) -> Path {
    let mut path = walk_from(function, cfg, 0, 0);
    count_load_rounds(function, cfg, &mut path);
    path
}

/// How deep the walk follows `CALL`s into subroutines (ptxas's helpers call no further).
const MAX_CALL_DEPTH: u32 = 4;

/// The walk from block `start` (the entry, or a subroutine's first block for a `CALL`).
fn walk_from(function: &Function, cfg: &Cfg, start: usize, depth: u32) -> Path {
    let mut path = Path::default();
    let mut visited = vec![false; cfg.blocks.len()];
    let mut guard: Vec<Option<String>> = vec![None; cfg.blocks.len()];
    let data = data_guards(function);
    let vector = function
        .instructions
        .iter()
        .any(|i| matches!(i.global_access(), Some((_, 16))));
    let mut b = start;
    loop {
        if std::mem::replace(&mut visited[b], true) {
            break;
        }
        path.blocks.push(b);
        let block = &cfg.blocks[b];
        let part = match cfg.innermost(b) {
            None => None,
            Some(l) => {
                let header_of =
                    |l: usize| function.instructions[cfg.blocks[cfg.loops[l].header].start].offset;
                let offset = header_of(l);
                Some(match path.loops.iter().position(|w| w.header == offset) {
                    Some(i) => i,
                    None => {
                        let parent = cfg.enclosing(l).map(header_of);
                        path.loops.push(WalkedLoop {
                            header: offset,
                            parent,
                            body: Tally::default(),
                        });
                        path.loops.len() - 1
                    }
                })
            }
        };
        path.parts.push(part);
        let guarded = guard[b].as_deref().is_some_and(|g| data.contains(&g));
        let mut called = Tally::default();
        if depth < MAX_CALL_DEPTH {
            for instruction in &function.instructions[block.start..block.end] {
                // A subroutine on the path (a 64-bit division's helper that every way passes):
                // its own common path, loops once, counted where it is called.
                if instruction.base() == "CALL"
                    && let Some(&at) = instruction
                        .target
                        .as_ref()
                        .and_then(|t| function.labels.get(t))
                    && let Some(callee) = cfg.blocks.iter().position(|k| k.start == at)
                {
                    called.accumulate(&walk_from(function, cfg, callee, depth + 1).total());
                }
            }
        }
        let tally = match part {
            None => &mut path.fixed,
            Some(i) => &mut path.loops[i].body,
        };
        tally.add(function, block.start, block.end, guarded, &data);
        tally.accumulate(&called);
        let forward: Vec<Next> = block
            .next
            .iter()
            .copied()
            .filter(|n| !matches!(n, Next::Block(t) if cfg.is_back(b, *t) || visited[*t]))
            .collect();
        let next = match forward.as_slice() {
            [] => match cfg.back[b].first() {
                // An unconditional latch: leave through the exit the walk came by.
                Some(&header) => loop_exit(cfg, header, &visited),
                None => Next::Exit,
            },
            [only] => *only,
            [fall, taken, ..] => {
                let took_branch = choose(function, cfg, *fall, *taken, vector);
                let (chosen, other) = if took_branch {
                    (*taken, *fall)
                } else {
                    (*fall, *taken)
                };
                // What runs only on the chosen side runs under the branch's guard.
                if let (Next::Block(c), Some(g)) = (
                    chosen,
                    side_guard(&function.instructions[block.end - 1], took_branch),
                ) {
                    let other_reach = match other {
                        Next::Block(o) => cfg.forward_reach(o),
                        Next::Exit => vec![false; cfg.blocks.len()],
                    };
                    for (k, reach) in cfg.forward_reach(c).into_iter().enumerate() {
                        if reach && !other_reach[k] && guard[k].is_none() {
                            guard[k] = Some(g.clone());
                        }
                    }
                }
                chosen
            }
        };
        match next {
            Next::Block(n) => b = n,
            Next::Exit => break,
        }
    }
    path
}

/// Counts the dependent rounds of global loads along the path into each part's tally: a
/// round opens with a load issued when no earlier load is outstanding, and closes when an
/// instruction reads a register one of its loads writes (or, for `cp.async`, at a
/// `DEPBAR.LE SB0, 0x0` that waits for every copy). Loads issued while a round is open join
/// it: they are in flight together.
fn count_load_rounds(function: &Function, cfg: &Cfg, path: &mut Path) {
    let mut pending: Vec<u16> = Vec::new();
    let mut pending_async = false;
    for (&b, &part) in path.blocks.iter().zip(&path.parts) {
        let block = &cfg.blocks[b];
        for instruction in &function.instructions[block.start..block.end] {
            if !pending.is_empty()
                && instruction
                    .registers_read()
                    .iter()
                    .any(|r| pending.contains(r))
            {
                pending.clear();
            }
            if instruction.base() == "DEPBAR" && instruction.operands.ends_with("0x0") {
                pending_async = false;
            }
            let load = matches!(instruction.global_access(), Some((false, _)));
            if !load {
                continue;
            }
            if pending.is_empty() && !pending_async {
                match part {
                    None => path.fixed.load_rounds += 1,
                    Some(i) => path.loops[i].body.load_rounds += 1,
                }
            }
            if instruction.is_async_copy() {
                pending_async = true;
            } else {
                pending.extend(instruction.registers_written());
            }
        }
    }
}

/// The first edge, in address order, from a visited block of the loop headed by `header` to a
/// block outside it.
fn loop_exit(cfg: &Cfg, header: usize, visited: &[bool]) -> Next {
    let Some(l) = cfg.loops.iter().find(|l| l.header == header) else {
        return Next::Exit;
    };
    for &b in &l.blocks {
        if !visited[b] {
            continue;
        }
        for next in &cfg.blocks[b].next {
            match *next {
                Next::Block(n) if l.blocks.binary_search(&n).is_err() && !visited[n] => {
                    return *next;
                }
                Next::Exit => return Next::Exit,
                _ => {}
            }
        }
    }
    Next::Exit
}

#[cfg(test)]
mod tests {
    use super::super::sass;
    use super::*;

    fn walk(text: &str) -> Path {
        let f = &sass::parse(text).unwrap()[0];
        common_path(f, &Cfg::build(f).unwrap())
    }

    /// `relu_bf16`'s shape: a vector grid-stride loop whose store is guarded, then a scalar
    /// tail behind `@P0 EXIT`. One iteration of the loop (guarded store included), the tail
    /// skipped because a 16-byte access was walked and the tail has only a 2-byte one.
    #[test]
    fn vector_loop_once_and_the_scalar_tail_skipped() {
        let path = walk(
            r#"
	.section	.text.k,"ax",@progbits
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/               @P0 BRA `(.L_x_1) ;
.L_x_2:
        /*0020*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0030*/               @P3 BRA `(.L_x_3) ;
        /*0040*/                   STG.E.128 desc[UR4][R28.64], R20 ;
.L_x_3:
        /*0050*/                   BSYNC B1 ;
        /*0060*/              @!P0 BRA `(.L_x_2) ;
.L_x_1:
        /*0070*/               @P0 EXIT ;
        /*0080*/                   LDG.E.U16.CONSTANT R2, desc[UR4][R2.64] ;
        /*0090*/                   EXIT ;
"#,
        );
        assert_eq!(path.fixed.instructions, 3, "S2R, BRA, @P0 EXIT");
        assert_eq!(path.loops.len(), 1);
        let WalkedLoop {
            header,
            parent,
            body,
        } = path.loops[0];
        assert_eq!((header, parent), (0x20, None));
        assert_eq!(body.instructions, 5);
        assert_eq!((body.wide_loads, body.wide_stores), (1, 1));
        assert_eq!((body.load_bytes, body.store_bytes), (16, 16));
    }

    /// `silu`'s IEEE division: MUFU.RCP and FFMAs, then `@!P3 BRA` over a block that calls the
    /// slow path. The call is skipped even though it is the fall-through.
    #[test]
    fn the_division_slow_path_is_skipped() {
        let path = walk(
            r#"
	.section	.text.k,"ax",@progbits
        /*0000*/                   BSSY B4, `(.L_x_143) ;
        /*0010*/                   MUFU.RCP R0, R32 ;
        /*0020*/                   FCHK P3, R35, R32 ;
        /*0030*/              @!P3 BRA `(.L_x_144) ;
        /*0040*/                   MOV R0, R35 ;
        /*0050*/                   CALL.REL.NOINC `($slowpath) ;
.L_x_144:
        /*0060*/                   BSYNC B4 ;
.L_x_143:
        /*0070*/                   EXIT ;
$slowpath:
        /*0080*/                   FFMA R0, R1, R2, R3 ;
        /*0090*/                   RET.REL.NODEC R2 `(k) ;
"#,
        );
        assert_eq!(path.fixed.instructions, 6);
        assert_eq!(path.fixed.mufu, 1);
        assert!(path.loops.is_empty());
    }

    /// A loop whose test is at the top (`@P BRA exit`) and whose latch is unconditional: the
    /// walk runs the body once and leaves by the test's exit edge.
    #[test]
    fn top_tested_loop_with_an_unconditional_latch() {
        let path = walk(
            r#"
	.section	.text.k,"ax",@progbits
        /*0000*/                   MOV R0, RZ ;
.L_x_1:
        /*0010*/                   ISETP.GE.AND P0, PT, R0, R5, PT ;
        /*0020*/               @P0 BRA `(.L_x_2) ;
        /*0030*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0040*/                   IADD3 R0, R0, 0x1, RZ ;
        /*0050*/                   BRA `(.L_x_1) ;
.L_x_2:
        /*0060*/                   STG.E desc[UR4][R6.64], R4 ;
        /*0070*/                   EXIT ;
"#,
        );
        assert_eq!(path.fixed.instructions, 3, "MOV, STG, EXIT");
        assert_eq!(path.loops[0].body.instructions, 5);
        assert_eq!(path.loops[0].body.load_bytes, 4);
    }
}
