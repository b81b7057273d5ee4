//! Reading `nvdisasm -c` output: one [`Function`] per `.text.<entry>` section, each a list of
//! [`Instruction`]s with the labels that name their offsets.

use std::collections::HashMap;

use super::LedgerError;

/// One SASS instruction as `nvdisasm` prints it: `/*0120*/ @!P0 BRA `(.L_x_1) ;`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Byte offset in the function (the `/*0120*/` comment).
    pub offset: u32,
    /// The guard predicate (`@!P0`), if any; `@PT` is kept as written.
    pub predicate: Option<String>,
    /// The opcode with its modifiers (`LDG.E.128.CONSTANT`).
    pub opcode: String,
    /// The branch target label of `BRA`/`BSSY`/`CALL` (`.L_x_1`), if any.
    pub target: Option<String>,
    /// The operands as written (`R4, desc[UR4][R2.64+0x10]`), for the register data flow of
    /// [`Instruction::registers_read`] and [`Instruction::registers_written`].
    pub operands: String,
}

/// Opcodes whose first operand is read, not written: stores, reductions into memory, control.
const FIRST_OPERAND_READ: [&str; 18] = [
    "STG", "STS", "STL", "ST", "RED", "REDUX", "BAR", "BRA", "BRX", "CALL", "RET", "EXIT", "BSSY",
    "BSYNC", "WARPSYNC", "DEPBAR", "MEMBAR", "JMP",
];

impl Instruction {
    /// The opcode without modifiers (`LDG`).
    pub fn base(&self) -> &str {
        self.opcode.split('.').next().unwrap_or_default()
    }

    /// Whether it is guarded by a predicate that may be false (`@PT` is always true).
    pub fn is_conditional(&self) -> bool {
        self.predicate.as_deref().is_some_and(|p| p != "@PT")
    }

    /// Whether it is an SFU (multi-function unit) instruction: `MUFU.EX2`, `MUFU.RCP`, ...
    pub fn is_mufu(&self) -> bool {
        self.base() == "MUFU"
    }

    /// Whether it runs on the tensor cores: `HMMA` (`mma.sync` on 16-bit inputs, sm_80 and sm_90's
    /// `HMMA.16816.F32.BF16`), `IMMA`, `DMMA`, and sm_90a's warpgroup `HGMMA`.
    pub fn is_tensor(&self) -> bool {
        matches!(self.base(), "HMMA" | "IMMA" | "DMMA" | "HGMMA")
    }

    /// Whether it is a shared-memory matrix fragment load (`LDSM`, PTX `ldmatrix`).
    pub fn is_ldsm(&self) -> bool {
        self.base() == "LDSM"
    }

    /// Whether it is an asynchronous global → shared copy (`LDGSTS`, PTX `cp.async`).
    pub fn is_async_copy(&self) -> bool {
        self.base() == "LDGSTS"
    }

    /// Bytes one thread moves through shared memory if this accesses it: `LDS`/`STS` and the
    /// shared atomics of their width, `LDSM` (`ldmatrix`: 4 bytes a matrix per thread, `.4` reads
    /// four), and `LDGSTS` (`cp.async` writes what it reads).
    pub fn shared_bytes(&self) -> u32 {
        match self.base() {
            "LDS" | "STS" | "ATOMS" | "LDGSTS" => self.global_width(),
            "LDSM" => match self.opcode.rsplit('.').next() {
                Some("4") => 16,
                Some("2") => 8,
                _ => 4,
            },
            _ => 0,
        }
    }

    /// Registers this instruction reads: every `R<n>` of its operands but the destination (a
    /// 64-bit operand `R2.64` is `R2` and `R3`); `RZ` is not a register.
    pub fn registers_read(&self) -> Vec<u16> {
        let operands = split_operands(&self.operands);
        let skip = usize::from(self.writes_first_operand(&operands));
        let mut out = Vec::new();
        for operand in operands.iter().skip(skip) {
            registers_in(operand, &mut out);
        }
        out
    }

    /// Registers this instruction writes: its first operand's, over the width of a load
    /// (`LDG.E.128 R4` writes R4–R7; `LDSM.16.M88.4` four; `.64` two). Empty for stores and
    /// control.
    pub fn registers_written(&self) -> Vec<u16> {
        let operands = split_operands(&self.operands);
        if !self.writes_first_operand(&operands) {
            return Vec::new();
        }
        let Some(first) = register_number(operands[0]) else {
            return Vec::new();
        };
        let count: u16 = match self.base() {
            "LDG" | "LDS" | "LD" | "LDL" | "LDC" => match self.global_width() {
                16 => 4,
                8 => 2,
                _ => 1,
            },
            "LDSM" => match self.opcode.rsplit('.').next() {
                Some("4") => 4,
                Some("2") => 2,
                _ => 1,
            },
            _ if operands[0].ends_with(".64") => 2,
            _ => 1,
        };
        (first..first.saturating_add(count)).collect()
    }

    fn writes_first_operand(&self, operands: &[&str]) -> bool {
        !FIRST_OPERAND_READ.contains(&self.base())
            && operands
                .first()
                .is_some_and(|o| register_number(o).is_some())
    }

    /// The width of a memory access from its modifiers: `.128` 16, `.64` 8, `.U16`/`.S16` 2,
    /// `.U8`/`.S8` 1, otherwise 4.
    fn global_width(&self) -> u32 {
        let mut bytes = 4;
        for modifier in self.opcode.split('.').skip(1) {
            bytes = match modifier {
                "128" => 16,
                "64" => 8,
                "U16" | "S16" => 2,
                "U8" | "S8" => 1,
                _ => continue,
            };
        }
        bytes
    }

    /// Bytes one thread moves if this is a global load (`LDG`, or `LDGSTS`: `cp.async` reads
    /// global memory into shared memory, so for the ledger it is a global load of its width) or
    /// store (`STG`, `RED`, `ATOMG`): `(is_store, bytes)`. The width comes from the modifiers:
    /// `.128` 16, `.64` 8, `.U16`/`.S16` 2, `.U8`/`.S8` 1, otherwise 4.
    pub fn global_access(&self) -> Option<(bool, u32)> {
        let store = match self.base() {
            "LDG" | "LDGSTS" => false,
            "STG" | "RED" | "ATOMG" => true,
            _ => return None,
        };
        let bytes = self.global_width();
        Some((store, bytes))
    }
}

/// One entry point's code.
#[derive(Debug, Clone, Default)]
pub struct Function {
    /// The symbol (`relu_bf16`).
    pub name: String,
    /// Its instructions in address order.
    pub instructions: Vec<Instruction>,
    /// Label → index of the instruction it names.
    pub labels: HashMap<String, usize>,
}

/// Splits `nvdisasm -c` text into its functions (sections `.text.<name>`).
///
/// Lines that are neither instructions, labels nor section headers (directives, comments,
/// blank lines) are skipped; an instruction before any section, or a label that names no
/// instruction and is not at the end of its function, is an error.
pub fn parse(text: &str) -> Result<Vec<Function>, LedgerError> {
    let mut functions: Vec<Function> = Vec::new();
    let mut pending: Vec<String> = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if let Some(rest) = trimmed.strip_prefix(".section") {
            let section = rest.trim().split(',').next().unwrap_or_default();
            if let Some(name) = section.strip_prefix(".text.") {
                pending.clear();
                functions.push(Function {
                    name: name.to_owned(),
                    ..Function::default()
                });
            }
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("/*") {
            let Some((offset, instruction)) = rest.split_once("*/") else {
                continue;
            };
            let Ok(offset) = u32::from_str_radix(offset.trim(), 16) else {
                // A comment, not an address.
                continue;
            };
            let Some(function) = functions.last_mut() else {
                return Err(LedgerError::Sass {
                    line: number + 1,
                    message: "an instruction before any `.text.` section".into(),
                });
            };
            let instruction =
                parse_instruction(offset, instruction).ok_or_else(|| LedgerError::Sass {
                    line: number + 1,
                    message: format!("not an instruction: `{trimmed}`"),
                })?;
            let index = function.instructions.len();
            for label in pending.drain(..) {
                function.labels.insert(label, index);
            }
            function.instructions.push(instruction);
            continue;
        }
        if let Some(label) = trimmed.strip_suffix(':')
            && !label.is_empty()
            && !label.contains(char::is_whitespace)
            && !functions.is_empty()
        {
            pending.push(label.to_owned());
        }
    }
    Ok(functions)
}

/// `@!P0 BRA `(.L_x_1) ;` → predicate, opcode, target. `None` when there is no opcode.
fn parse_instruction(offset: u32, text: &str) -> Option<Instruction> {
    let text = text.trim().trim_end_matches(';').trim();
    let mut tokens = text.split_whitespace();
    let mut first = tokens.next()?;
    let mut predicate = None;
    if first.starts_with('@') {
        predicate = Some(first.to_owned());
        first = tokens.next()?;
    }
    if !first.starts_with(|c: char| c.is_ascii_uppercase()) {
        return None;
    }
    let target = text.find("`(").and_then(|start| {
        let rest = &text[start + 2..];
        rest.find(')').map(|end| rest[..end].to_owned())
    });
    let operands = tokens.collect::<Vec<_>>().join(" ");
    Some(Instruction {
        offset,
        predicate,
        opcode: first.to_owned(),
        target,
        operands,
    })
}

/// Operands split at the commas outside brackets: `R4, desc[UR4][R2.64+0x10]` → two.
fn split_operands(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' | '(' | '{' => depth += 1,
            ']' | ')' | '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// The register an operand names, when it is exactly one (`R12`, `-R3`, `|R5|`, `R8.reuse`).
fn register_number(operand: &str) -> Option<u16> {
    let bare = operand.trim_start_matches(['-', '|', '~', '!']);
    let digits = bare.strip_prefix('R')?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Every register an operand mentions (`desc[UR4][R2.64+0x10]` → R2, R3), appended to `out`.
fn registers_in(operand: &str, out: &mut Vec<u16>) {
    let bytes = operand.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        // `R<digits>` not preceded by a letter (`UR4`, `SR_TID` are not registers).
        if bytes[i] == b'R' && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric()) {
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
            if end > start
                && let Ok(n) = operand[start..end].parse::<u16>()
            {
                out.push(n);
                if operand[end..].starts_with(".64") {
                    out.push(n + 1);
                }
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The head of `relu_bf16` as nvdisasm 13.2 prints it (cut short).
    const SNIPPET: &str = r#"
//--------------------- .text.relu_bf16            --------------------------
	.section	.text.relu_bf16,"ax",@progbits
	.align	128
        .global         relu_bf16
relu_bf16:
.text.relu_bf16:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0120*/               @P0 BRA `(.L_x_330) ;
.L_x_339:
        /*02a0*/              @!P1 LDG.E.128.CONSTANT R4, desc[UR4][R34.64] ;
        /*0530*/                   STG.E.128 desc[UR4][R28.64], R20 ;
        /*0d30*/                   LDG.E.U16.CONSTANT R2, desc[UR4][R2.64] ;
        /*0c10*/              @!P0 BRA `(.L_x_339) ;
.L_x_330:
        /*04b0*/                   CALL.REL.NOINC `($__internal_1_$__cuda_sm3x_div_rn_noftz_f32_slowpath) ;
        /*03f0*/                   MUFU.EX2 R27, R26 ;
        /*0dc0*/                   LDGSTS.E.BYPASS.128 [R133+0x2000], desc[UR6][R44.64], !P0 ;
        /*0dd0*/                   LDGDEPBAR ;
        /*0de0*/                   DEPBAR.LE SB0, 0x0 ;
        /*0df0*/                   LDSM.16.M88.4 R100, [R4+0x800] ;
        /*0e00*/                   LDSM.16.MT88.4 R56, [R121+UR4+0x1000] ;
        /*0e10*/                   HMMA.16816.F32.BF16 R76, R24.reuse, R100, RZ ;
        /*0db0*/                   EXIT ;
"#;

    #[test]
    fn parses_predicates_opcodes_targets_and_labels() {
        let functions = parse(SNIPPET).unwrap();
        assert_eq!(functions.len(), 1);
        let f = &functions[0];
        assert_eq!(f.name, "relu_bf16");
        assert_eq!(f.instructions.len(), 15);
        let bra = &f.instructions[1];
        assert_eq!(bra.offset, 0x120);
        assert_eq!(bra.predicate.as_deref(), Some("@P0"));
        assert_eq!(bra.base(), "BRA");
        assert_eq!(bra.target.as_deref(), Some(".L_x_330"));
        assert!(bra.is_conditional());
        assert_eq!(f.labels[".L_x_339"], 2);
        assert_eq!(f.labels[".L_x_330"], 6);
        assert_eq!(f.instructions[2].global_access(), Some((false, 16)));
        assert_eq!(f.instructions[3].global_access(), Some((true, 16)));
        assert_eq!(f.instructions[4].global_access(), Some((false, 2)));
        assert_eq!(f.instructions[0].global_access(), None);
        assert!(f.instructions[7].is_mufu());
        assert_eq!(
            f.instructions[6].target.as_deref(),
            Some("$__internal_1_$__cuda_sm3x_div_rn_noftz_f32_slowpath")
        );
    }

    /// The tensor-core kernels' instructions: `cp.async` is a 16-byte global load, its commit
    /// and wait are plain instructions, `ldmatrix` (plain and `.trans`) and `mma.sync` are told
    /// apart.
    #[test]
    fn tensor_core_instructions() {
        let functions = parse(SNIPPET).unwrap();
        let f = &functions[0];
        let [ldgsts, commit, wait, ldsm, ldsm_trans, hmma] =
            [8, 9, 10, 11, 12, 13].map(|i| &f.instructions[i]);
        assert_eq!(ldgsts.global_access(), Some((false, 16)));
        assert!(ldgsts.is_async_copy() && !ldgsts.is_ldsm() && !ldgsts.is_tensor());
        for plain in [commit, wait] {
            assert_eq!(plain.global_access(), None);
            assert!(
                !plain.is_async_copy()
                    && !plain.is_ldsm()
                    && !plain.is_tensor()
                    && !plain.is_mufu()
            );
        }
        assert!(ldsm.is_ldsm() && ldsm_trans.is_ldsm());
        assert_eq!(ldsm.global_access(), None);
        assert!(hmma.is_tensor() && !hmma.is_mufu());
        assert_eq!(hmma.base(), "HMMA");
        assert!(!f.instructions[7].is_tensor());
    }

    #[test]
    fn an_instruction_outside_a_section_is_an_error() {
        let err = parse("        /*0000*/   EXIT ;\n").unwrap_err();
        assert!(matches!(err, LedgerError::Sass { line: 1, .. }), "{err}");
    }
}
