//! The control-flow graph of one function: basic blocks, successors, back edges (loops) and
//! the natural loop of each back edge.

use super::sass::Function;

/// Where control goes after a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Another block, by index.
    Block(usize),
    /// The thread leaves the function (`EXIT`, `RET`, an indirect jump).
    Exit,
}

/// A basic block: instructions `start..end` of the function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// First instruction (index).
    pub start: usize,
    /// One past the last instruction.
    pub end: usize,
    /// Successors: the fall-through first, then the branch target (or [`Next::Exit`]).
    pub next: Vec<Next>,
}

/// A natural loop: the header and every block that reaches a back edge to it without passing
/// through it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    /// The header block.
    pub header: usize,
    /// Its blocks (sorted), the header included.
    pub blocks: Vec<usize>,
}

/// A function's control-flow graph.
#[derive(Debug, Clone)]
pub struct Cfg {
    /// The blocks in address order; block 0 is the entry.
    pub blocks: Vec<Block>,
    /// `back[b]`: the successors of `b` that are back edges (a depth-first search from the
    /// entry meets them while they are still on its stack).
    pub back: Vec<Vec<usize>>,
    /// The loops, outermost first where nested.
    pub loops: Vec<Loop>,
}

/// Opcodes that end a block.
fn ends_block(base: &str) -> bool {
    matches!(base, "BRA" | "BRX" | "JMP" | "JMX" | "EXIT" | "RET" | "BPT")
}

impl Cfg {
    /// Builds the graph of `function`. Branch targets that name no instruction are an error
    /// of the disassembly's reading.
    pub fn build(function: &Function) -> Result<Cfg, String> {
        let ins = &function.instructions;
        if ins.is_empty() {
            return Err(format!("{}: no instructions", function.name));
        }
        let target_of = |i: usize| -> Result<Option<usize>, String> {
            match &ins[i].target {
                None => Ok(None),
                Some(label) => function
                    .labels
                    .get(label)
                    .copied()
                    .map(Some)
                    .ok_or_else(|| {
                        format!(
                            "{}: /*{:04x}*/ branches to `{label}`, which names no instruction",
                            function.name, ins[i].offset
                        )
                    }),
            }
        };
        let mut leader = vec![false; ins.len() + 1];
        leader[0] = true;
        for &index in function.labels.values() {
            leader[index] = true;
        }
        for (i, instruction) in ins.iter().enumerate() {
            if ends_block(instruction.base()) {
                leader[i + 1] = true;
                if instruction.base() == "BRA"
                    && let Some(t) = target_of(i)?
                {
                    leader[t] = true;
                }
            }
        }
        let starts: Vec<usize> = (0..ins.len()).filter(|&i| leader[i]).collect();
        let mut block_of = vec![0; ins.len()];
        let mut blocks = Vec::with_capacity(starts.len());
        for (b, &start) in starts.iter().enumerate() {
            let end = starts.get(b + 1).copied().unwrap_or(ins.len());
            block_of[start..end].fill(b);
            blocks.push(Block {
                start,
                end,
                next: Vec::new(),
            });
        }
        let count = blocks.len();
        let mut nexts = Vec::with_capacity(count);
        for (b, block) in blocks.iter().enumerate() {
            let last = block.end - 1;
            let fall = if b + 1 < count {
                Next::Block(b + 1)
            } else {
                Next::Exit
            };
            let instruction = &ins[last];
            let conditional = instruction.is_conditional();
            nexts.push(match instruction.base() {
                "BRA" => {
                    let to = match target_of(last)? {
                        Some(t) => Next::Block(block_of[t]),
                        None => Next::Exit,
                    };
                    if conditional {
                        vec![fall, to]
                    } else {
                        vec![to]
                    }
                }
                "EXIT" | "RET" | "BRX" | "JMP" | "JMX" | "BPT" => {
                    if conditional {
                        vec![fall, Next::Exit]
                    } else {
                        vec![Next::Exit]
                    }
                }
                _ => vec![fall],
            });
        }
        for (block, next) in blocks.iter_mut().zip(nexts) {
            block.next = next;
        }
        let back = back_edges(&blocks);
        let loops = natural_loops(&blocks, &back);
        Ok(Cfg {
            blocks,
            back,
            loops,
        })
    }

    /// Whether `from → to` is a back edge.
    pub fn is_back(&self, from: usize, to: usize) -> bool {
        self.back[from].contains(&to)
    }

    /// The innermost loop that holds `block` (an index into [`Cfg::loops`]).
    pub fn innermost(&self, block: usize) -> Option<usize> {
        self.loops
            .iter()
            .enumerate()
            .filter(|(_, l)| l.blocks.binary_search(&block).is_ok())
            .min_by_key(|(_, l)| l.blocks.len())
            .map(|(i, _)| i)
    }

    /// The innermost loop that strictly encloses loop `l`.
    pub fn enclosing(&self, l: usize) -> Option<usize> {
        let inner = &self.loops[l];
        self.loops
            .iter()
            .enumerate()
            .filter(|(i, o)| {
                *i != l
                    && o.blocks.len() > inner.blocks.len()
                    && o.blocks.binary_search(&inner.header).is_ok()
            })
            .min_by_key(|(_, o)| o.blocks.len())
            .map(|(i, _)| i)
    }

    /// Blocks reachable from `from` along forward edges (back edges not followed), `from`
    /// included, as a membership vector.
    pub fn forward_reach(&self, from: usize) -> Vec<bool> {
        let mut seen = vec![false; self.blocks.len()];
        let mut stack = vec![from];
        while let Some(b) = stack.pop() {
            if std::mem::replace(&mut seen[b], true) {
                continue;
            }
            for next in &self.blocks[b].next {
                if let Next::Block(n) = *next
                    && !self.is_back(b, n)
                    && !seen[n]
                {
                    stack.push(n);
                }
            }
        }
        seen
    }
}

/// Retreating edges of an iterative depth-first search from block 0.
fn back_edges(blocks: &[Block]) -> Vec<Vec<usize>> {
    let mut back = vec![Vec::new(); blocks.len()];
    // 0 unseen, 1 on the stack, 2 done.
    let mut state = vec![0u8; blocks.len()];
    let mut stack: Vec<(usize, usize)> = vec![(0, 0)];
    state[0] = 1;
    while let Some(&mut (b, ref mut i)) = stack.last_mut() {
        if let Some(next) = blocks[b].next.get(*i) {
            *i += 1;
            if let Next::Block(n) = *next {
                match state[n] {
                    0 => {
                        state[n] = 1;
                        stack.push((n, 0));
                    }
                    1 => back[b].push(n),
                    _ => {}
                }
            }
        } else {
            state[b] = 2;
            stack.pop();
        }
    }
    back
}

/// The natural loop of every back edge, merged per header, outermost (largest) first.
fn natural_loops(blocks: &[Block], back: &[Vec<usize>]) -> Vec<Loop> {
    let mut preds = vec![Vec::new(); blocks.len()];
    for (b, block) in blocks.iter().enumerate() {
        for next in &block.next {
            if let Next::Block(n) = *next {
                preds[n].push(b);
            }
        }
    }
    let mut loops: Vec<Loop> = Vec::new();
    for (latch, headers) in back.iter().enumerate() {
        for &header in headers {
            let mut member = vec![false; blocks.len()];
            member[header] = true;
            let mut stack = vec![latch];
            while let Some(b) = stack.pop() {
                if std::mem::replace(&mut member[b], true) {
                    continue;
                }
                stack.extend(preds[b].iter().copied().filter(|&p| !member[p]));
            }
            let body: Vec<usize> = (0..blocks.len()).filter(|&b| member[b]).collect();
            match loops.iter_mut().find(|l| l.header == header) {
                Some(existing) => {
                    let mut merged = existing.blocks.clone();
                    merged.extend(body);
                    merged.sort_unstable();
                    merged.dedup();
                    existing.blocks = merged;
                }
                None => loops.push(Loop {
                    header,
                    blocks: body,
                }),
            }
        }
    }
    loops.sort_by_key(|l| std::cmp::Reverse(l.blocks.len()));
    loops
}

#[cfg(test)]
mod tests {
    use super::super::sass;
    use super::*;

    /// A grid-stride loop (rotated: guard, body, conditional back edge) with a scalar tail,
    /// the shape of `relu_bf16`, cut to its control flow.
    const LOOP: &str = r#"
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
.L_x_4:
        /*00a0*/                   BRA `(.L_x_4);
"#;

    #[test]
    fn blocks_successors_back_edges_and_loops() {
        let f = &sass::parse(LOOP).unwrap()[0];
        let cfg = Cfg::build(f).unwrap();
        let starts: Vec<usize> = cfg.blocks.iter().map(|b| b.start).collect();
        assert_eq!(starts, [0, 2, 4, 5, 7, 8, 10]);
        assert_eq!(cfg.blocks[0].next, [Next::Block(1), Next::Block(4)]);
        assert_eq!(cfg.blocks[3].next, [Next::Block(4), Next::Block(1)]);
        assert_eq!(cfg.blocks[4].next, [Next::Block(5), Next::Exit]);
        assert_eq!(cfg.blocks[5].next, [Next::Exit]);
        // The only back edge is the loop's latch; the unreachable self-loop is not searched.
        assert!(cfg.is_back(3, 1));
        assert_eq!(cfg.back.iter().map(Vec::len).sum::<usize>(), 1);
        assert_eq!(
            cfg.loops,
            [Loop {
                header: 1,
                blocks: vec![1, 2, 3]
            }]
        );
        assert_eq!(cfg.innermost(2), Some(0));
        assert_eq!(cfg.innermost(4), None);
        let reach = cfg.forward_reach(1);
        assert_eq!(reach, [false, true, true, true, true, true, false]);
    }

    #[test]
    fn a_branch_to_a_missing_label_is_an_error() {
        let text = "\t.section\t.text.k,\"ax\"\n        /*0000*/  BRA `(.L_x_9) ;\n";
        let f = &sass::parse(text).unwrap()[0];
        assert!(Cfg::build(f).unwrap_err().contains(".L_x_9"));
    }
}
