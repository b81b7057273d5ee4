//! Property tests: errors inside YAML scalars are located at the right character, and rendering
//! never panics, whatever the escapes, quotes, line folding, line endings and multibyte text
//! around the fault.
//!
//! Each generated document records where every character of the scalar's value is spelled in
//! the file; the tests compare [`Origin::locate`] and the rendered caret with that record.

use proptest::prelude::*;
use std::ops::Range;
use std::rc::Rc;
use tileops_manifest::diagnostic::{Diagnostic, SourceFile};
use tileops_manifest::manifest::{check_entry, parse_family_file};
use tileops_manifest::validate;
use tileops_manifest::yaml::{self, Kind};

const CASES: u32 = 1000;

/// Characters a value may hold: ASCII, CJK, emoji, a combining mark, quotes, backslash, tab.
const POOL: &[char] = &[
    'a', 'N', 'x', '1', '+', '*', ' ', ' ', '漢', '字', '😀', 'é', '\u{301}', '"', '\'', '\\',
    '\t', '/', '#', ':',
];

/// How a character is written inside a double-quoted scalar.
fn double_spellings(c: char) -> Vec<String> {
    let mut out = vec![format!("\\U{:08X}", c as u32)];
    if (c as u32) < 0x1_0000 {
        out.push(format!("\\u{:04x}", c as u32));
    } else {
        // A UTF-16 surrogate pair.
        let v = c as u32 - 0x1_0000;
        out.push(format!(
            "\\u{:04X}\\u{:04x}",
            0xD800 + (v >> 10),
            0xDC00 + (v & 0x3FF)
        ));
    }
    if (c as u32) < 0x100 {
        out.push(format!("\\x{:02x}", c as u32));
    }
    match c {
        '"' => out.push("\\\"".into()),
        '\\' => out.push("\\\\".into()),
        '\t' => out.push("\\t".into()),
        '/' => out.push("\\/".into()),
        ' ' => out.push("\\ ".into()),
        _ => {}
    }
    // Written as itself, except the two characters double quotes must escape.
    if !matches!(c, '"' | '\\') {
        out.push(c.to_string());
    }
    out
}

/// A document under construction, with the file range of each value character.
struct Doc {
    text: String,
    spans: Vec<Range<usize>>,
}

impl Doc {
    fn push(&mut self, s: &str) -> Range<usize> {
        let start = self.text.len();
        self.text.push_str(s);
        start..self.text.len()
    }
}

#[derive(Debug, Clone)]
struct Scalar {
    value: Vec<char>,
    /// Per character: which spelling (index, wrapped), and whether a space is folded to a break.
    choices: Vec<(usize, bool)>,
    single: bool,
}

fn scalar() -> impl Strategy<Value = Scalar> {
    (
        prop::collection::vec(
            (prop::sample::select(POOL), 0usize..8, any::<bool>()),
            1..24,
        ),
        any::<bool>(),
    )
        .prop_map(|(items, single)| Scalar {
            value: items.iter().map(|(c, _, _)| *c).collect(),
            choices: items.iter().map(|(_, s, f)| (*s, *f)).collect(),
            single,
        })
}

fn is_blank(c: Option<&char>) -> bool {
    matches!(c, None | Some(' ' | '\t'))
}

/// Writes the scalar, quoted, recording each character's spelling. `eol` gives the line break
/// to use for the n-th break.
fn write_scalar(doc: &mut Doc, s: &Scalar, eol: &mut impl FnMut() -> &'static str) {
    doc.push(if s.single { "'" } else { "\"" });
    for (i, (&c, &(pick, fold))) in s.value.iter().zip(&s.choices).enumerate() {
        // A space between two non-blank characters may be written as a line break and the
        // next line's indentation: folding turns it back into one space.
        if c == ' '
            && fold
            && !is_blank(s.value.get(i.wrapping_sub(1)))
            && i > 0
            && !is_blank(s.value.get(i + 1))
        {
            let brk = eol();
            let span = doc.push(brk);
            doc.push("    ");
            doc.spans.push(span);
            continue;
        }
        let spelling = if s.single {
            if c == '\'' {
                "''".to_owned()
            } else {
                c.to_string()
            }
        } else {
            let all = double_spellings(c);
            all[pick % all.len()].clone()
        };
        let span = doc.push(&spelling);
        doc.spans.push(span);
    }
    doc.push(if s.single { "'" } else { "\"" });
}

fn eols(picks: Vec<u8>) -> impl FnMut() -> &'static str {
    let mut i = 0;
    move || {
        let p = picks.get(i % picks.len().max(1)).copied().unwrap_or(0);
        i += 1;
        ["\n", "\r\n", "\r"][usize::from(p % 3)]
    }
}

/// The lines of a text, split at `\n`, `\r\n` and a lone `\r`.
fn lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find(['\r', '\n']) {
        out.push(&rest[..i]);
        let n = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
        rest = &rest[i + n..];
    }
    out.push(rest);
    out
}

/// Checks a rendered diagnostic against the file: the header's `line:col` names the character
/// at `offset`, the snippet shows that line, and the first caret is under that character.
fn check_render(file: &SourceFile, offset: usize, rendered: &str) -> Result<(), TestCaseError> {
    let header = rendered.lines().next().unwrap_or_default();
    let rest = header
        .strip_prefix(&format!("{}:", file.display_path))
        .ok_or_else(|| TestCaseError::fail(format!("bad header {header:?}")))?;
    let mut parts = rest.splitn(3, ':');
    let line: usize = parts
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|_| TestCaseError::fail(header.to_owned()))?;
    let col: usize = parts
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|_| TestCaseError::fail(header.to_owned()))?;
    let source_lines = lines(&file.text);
    let source_line = source_lines[line - 1];
    let expected_char = file.text[offset..].chars().next();
    let at_col = source_line.chars().nth(col - 1);
    match expected_char {
        Some('\r' | '\n') | None => prop_assert_eq!(at_col, None, "{}", rendered),
        c => prop_assert_eq!(at_col, c, "{}", rendered),
    }
    // The snippet is the source line, and the caret line has `col - 1` characters of padding.
    let snippet: Vec<&str> = rendered.split('\n').collect();
    let gutter = line.to_string().len();
    prop_assert_eq!(snippet[2], format!("{line} | {source_line}"));
    let caret_line = &snippet[3][gutter + 3..];
    let padding = caret_line.chars().take_while(|&c| c != '^').count();
    prop_assert_eq!(padding, col - 1, "{}", rendered);
    Ok(())
}

fn file(text: String) -> Rc<SourceFile> {
    Rc::new(SourceFile {
        display_path: "manifest/p.yaml".into(),
        text,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// Every character of a quoted scalar, whatever its spelling, is located at its spelling,
    /// and a diagnostic there renders with the caret under it.
    #[test]
    fn every_value_character_is_located_at_its_spelling(
        s in scalar(),
        picks in prop::collection::vec(any::<u8>(), 1..8),
        through_alias in any::<bool>(),
    ) {
        let mut eol = eols(picks);
        let mut doc = Doc { text: String::new(), spans: Vec::new() };
        doc.push("# 漢字 😀 é");
        doc.push(eol());
        doc.push("k漢: \"é\" # 字");
        doc.push(eol());
        doc.push(if through_alias { "anchor: &a " } else { "f: " });
        write_scalar(&mut doc, &s, &mut eol);
        doc.push(" # 😀字");
        doc.push(eol());
        if through_alias {
            doc.push("f: *a # 漢");
            doc.push(eol());
        }
        doc.push("z: 1");
        doc.push(eol());
        let root = yaml::parse(&doc.text).map_err(|e| TestCaseError::fail(format!("{e:?}\n{:?}", doc.text)))?;
        let node = root.get("f").unwrap();
        let value: String = s.value.iter().collect();
        prop_assert_eq!(node.as_str(), Some(value.as_str()), "{:?}", doc.text);
        prop_assert_eq!(node.alias.is_some(), through_alias);
        let f = file(doc.text.clone());
        for ((at, c), span) in value.char_indices().zip(&doc.spans) {
            let found = node.origin().locate(&doc.text, &value, at..at + c.len_utf8());
            prop_assert_eq!(&found, span, "{:?} in {:?}", c, doc.text);
            let d = Diagnostic::in_scalar(&f, node.origin(), &value, at..at + c.len_utf8(), "m");
            let rendered = d.render();
            check_render(&f, span.start, &rendered)?;
            prop_assert_eq!(rendered.contains("= note: used through the alias `*a`"), through_alias);
        }
        // The end of the value is the closing quote.
        let end = node.origin().locate(&doc.text, &value, value.len()..value.len());
        prop_assert_eq!(&doc.text[end.start..end.start + 1], if s.single { "'" } else { "\"" });
    }

    /// A formula whose characters are spelled with random escapes, among multibyte text and mixed
    /// line endings, reports its unknown name `Q` exactly at `Q`'s spelling, through the
    /// manifest and validation passes.
    #[test]
    fn formula_errors_land_on_the_name_through_the_whole_pipeline(
        picks in prop::collection::vec(any::<u8>(), 1..8),
        spell in prop::collection::vec(0usize..8, 8),
        prefix in "[ 漢字😀é\u{301}a-z]{0,6}",
        through_alias in any::<bool>(),
    ) {
        let formula = "N * 2 + Q";
        let s = Scalar {
            value: formula.chars().collect(),
            choices: formula.chars().zip(spell.iter().cycle()).map(|(_, &p)| (p, true)).collect(),
            single: false,
        };
        let mut eol = eols(picks);
        let mut doc = Doc { text: String::new(), spans: Vec::new() };
        let mut line = |doc: &mut Doc, text: &str| { doc.push(text); doc.push(eol()); };
        line(&mut doc, &format!("# {prefix}"));
        if through_alias {
            doc.push("shared: &q ");
            let mut e = eols(vec![0]);
            write_scalar(&mut doc, &s, &mut e);
            line(&mut doc, "");
        }
        for text in [
            "op:",
            "  family: x",
            "  status: implemented",
            "  signature:",
            "    inputs:",
            "      x: {dtype: float16, shape: \"[N]\"}",
            "  workloads:",
            &format!("    - {{x_shape: [4], dtypes: [float16], label: \"l{prefix}\"}}"),
            "  roofline:",
        ] {
            line(&mut doc, text);
        }
        if through_alias {
            line(&mut doc, "    flops: *q # 字");
        } else {
            doc.push("    flops: ");
            let mut e = eols(vec![0]);
            write_scalar(&mut doc, &s, &mut e);
            line(&mut doc, " # 字");
        }
        line(&mut doc, "    bytes: \"N\"");
        let q = doc.spans[formula.find('Q').unwrap()].clone();
        let f = file(doc.text.clone());
        let family = parse_family_file(Rc::clone(&f));
        let mut problems: Vec<Diagnostic> = family.errors.clone();
        for (name, offset, node) in &family.entries {
            if !matches!(node.kind, Kind::Map(_)) || name != "op" {
                continue;
            }
            let (entry, errors) = check_entry(&f, name, *offset, node);
            problems.extend(errors);
            if let Some(entry) = entry {
                problems.extend(validate::check(&entry, false).err().unwrap_or_default());
            }
        }
        prop_assert_eq!(problems.len(), 1, "{:#?}\n{:?}", problems.iter().map(Diagnostic::render).collect::<Vec<_>>(), doc.text);
        let d = &problems[0];
        let loc = d.location.as_ref().unwrap();
        prop_assert_eq!(loc.offset..loc.offset + loc.len, q.clone(), "{}", d.render());
        let rendered = d.render();
        check_render(&f, q.start, &rendered)?;
        prop_assert!(rendered.contains("`Q`"), "{}", rendered);
        prop_assert_eq!(rendered.contains("= note: used through the alias `*q`"), through_alias);
    }

    /// Any offset and length into multibyte text with mixed line endings renders without
    /// panicking, with the caret under the character at the offset (rounded down to one).
    #[test]
    fn rendering_any_offset_never_panics(
        text in "([a-z 漢字😀é\u{301}\t\"'\\\\]|\r\n|\r|\n){0,80}",
        offset in 0usize..400,
        len in 0usize..40,
    ) {
        let f = file(text);
        let rendered = Diagnostic::at(&f, offset, len, "m").with_note("n").render();
        let mut at = offset.min(f.text.len());
        while !f.text.is_char_boundary(at) {
            at -= 1;
        }
        check_render(&f, at, &rendered)?;
        prop_assert!(rendered.ends_with("= note: n"));
    }

    /// Random text as a YAML document: parsing and rendering its error never panic, and a
    /// syntax error's offset is in the text.
    #[test]
    fn yaml_errors_render_for_any_text(text in "([a-z:\\[\\]{}, \"'&*!|>#\\-漢😀]|\r\n|\r|\n|  ){0,60}") {
        let f = file(text);
        if let Err(err) = yaml::parse(&f.text) {
            prop_assert!(err.offset <= f.text.len());
            let rendered = Diagnostic::yaml(&f, &err).render();
            let mut at = err.offset;
            while !f.text.is_char_boundary(at) {
                at -= 1;
            }
            check_render(&f, at, &rendered)?;
        }
    }
}
