//! Errors located in a manifest file, rendered the way rustc renders its own.
//!
//! Every problem the macro finds becomes a [`Diagnostic`]; an [`Errors`] accumulator collects all of
//! them so that one compilation reports every mistake of an entry at once, and turns them into
//! `compile_error!` invocations at the attribute.

use crate::yaml::{Node, Origin, SyntaxError};
use std::ops::Range;
use std::rc::Rc;

/// A manifest file as the macro read it: the path to show and the text.
#[derive(Debug)]
pub struct SourceFile {
    /// Path shown in messages: relative to the invoking crate (`manifest/reduction.yaml`).
    pub display_path: String,
    /// The file's contents.
    pub text: String,
}

impl SourceFile {
    /// 1-based line and column (in characters) of a byte offset.
    ///
    /// Lines end at `\n`, `\r\n` or a lone `\r`, as in YAML. An offset inside a character counts
    /// as that character; one past the end is the end of the text.
    ///
    /// ```
    /// use tileops_manifest::diagnostic::SourceFile;
    ///
    /// let file = SourceFile { display_path: "m.yaml".into(), text: "a: 1\rb: é2\r\n".into() };
    /// assert_eq!(file.line_col(file.text.find('2').unwrap()), (2, 5));
    /// ```
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset);
        let (line, start) = line_start(&self.text, offset);
        (line, self.text[start..offset].chars().count() + 1)
    }

    /// The text of the line holding `offset`, without its line break.
    fn line_text(&self, offset: usize) -> &str {
        let offset = floor_char_boundary(&self.text, offset);
        let (_, start) = line_start(&self.text, offset);
        let end = self.text[start..]
            .find(['\n', '\r'])
            .map_or(self.text.len(), |i| start + i);
        &self.text[start..end]
    }

    /// `path:line:col` of a byte offset.
    pub fn position(&self, offset: usize) -> String {
        let (line, col) = self.line_col(offset);
        format!("{}:{line}:{col}", self.display_path)
    }
}

/// 1-based line number of `offset` and the byte offset where that line starts. A `\r` directly
/// followed by `\n` is half of one break, so an offset between them is still on the line.
fn line_start(text: &str, offset: usize) -> (usize, usize) {
    let bytes = &text.as_bytes()[..offset];
    let mut line = 1;
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let ends_line = match b {
            b'\n' => true,
            b'\r' => text.as_bytes().get(i + 1) != Some(&b'\n'),
            _ => false,
        };
        if ends_line {
            line += 1;
            start = i + 1;
        }
    }
    (line, start)
}

/// The largest char boundary at or below `offset` (clamped to the text): offsets from outside
/// the renderer are never trusted to be boundaries.
///
/// The `\n` of a `\r\n` counts as its `\r`: both halves are the one end of the line.
fn floor_char_boundary(text: &str, offset: usize) -> usize {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    if offset > 0 && text.as_bytes()[offset - 1..].starts_with(b"\r\n") {
        offset -= 1;
    }
    offset
}

/// Where in a manifest file a problem is: a byte range.
#[derive(Debug, Clone)]
pub struct Location {
    /// The file.
    pub file: Rc<SourceFile>,
    /// Byte offset of the fault.
    pub offset: usize,
    /// Byte length of the fault (0 shows one caret).
    pub len: usize,
}

/// One compile error.
#[derive(Debug, Clone)]
pub struct Diagnostic {
    /// Where in the YAML, when the problem has a place there.
    pub location: Option<Location>,
    /// What is wrong, and what to do.
    pub message: String,
    /// Context shown after the snippet, in order (`= note: …`): for example the alias through
    /// which the faulty text is used.
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// An error at a place in a manifest file.
    pub fn at(
        file: &Rc<SourceFile>,
        offset: usize,
        len: usize,
        message: impl Into<String>,
    ) -> Self {
        Diagnostic {
            location: Some(Location {
                file: Rc::clone(file),
                offset,
                len,
            }),
            message: message.into(),
            notes: Vec::new(),
        }
    }

    /// An error about a whole YAML node; a node reached through an alias notes the alias.
    pub fn at_node(file: &Rc<SourceFile>, node: &Node, message: impl Into<String>) -> Self {
        Diagnostic::at(file, node.offset, node.len, message).with_alias(file, node.alias)
    }

    /// An error at the bytes `range` of a string scalar's decoded `value`, located in the file
    /// through its [`Origin`] (escapes, `''`, folding and block indentation undone; an alias
    /// noted).
    ///
    /// ```
    /// use std::rc::Rc;
    /// use tileops_manifest::{diagnostic::{Diagnostic, SourceFile}, yaml};
    ///
    /// let text = "x: &f \"\\tN + Q\"\nflops: *f\n";
    /// let file = Rc::new(SourceFile { display_path: "m.yaml".into(), text: text.into() });
    /// let flops = yaml::parse(text).unwrap().get("flops").unwrap().clone();
    /// let value = flops.as_str().unwrap();
    /// let at = value.find('Q').unwrap();
    /// let d = Diagnostic::in_scalar(&file, flops.origin(), value, at..at + 1, "unknown name `Q`");
    /// assert_eq!(
    ///     d.render(),
    ///     "m.yaml:1:14: unknown name `Q`\n  |\n1 | x: &f \"\\tN + Q\"\n  |              ^\n  |\n  = note: used through the alias `*f` at m.yaml:2:8"
    /// );
    /// ```
    pub fn in_scalar(
        file: &Rc<SourceFile>,
        origin: Origin,
        value: &str,
        range: Range<usize>,
        message: impl Into<String>,
    ) -> Self {
        let at = origin.locate(&file.text, value, range);
        Diagnostic::at(file, at.start, at.len(), message).with_alias(file, origin.alias)
    }

    /// The error for a document that could not be read: a syntax error, or a YAML size or depth
    /// limit (named as such, not as a syntax error).
    pub fn yaml(file: &Rc<SourceFile>, err: &SyntaxError) -> Self {
        Diagnostic::at(file, err.offset, 1, err.to_string())
    }

    /// An error with no place in the YAML (a missing file, a bad attribute).
    pub fn unlocated(message: impl Into<String>) -> Self {
        Diagnostic {
            location: None,
            message: message.into(),
            notes: Vec::new(),
        }
    }

    /// The same diagnostic with one more note.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    fn with_alias(self, file: &SourceFile, alias: Option<usize>) -> Self {
        match alias {
            Some(at) => {
                let name = alias_name(&file.text, at);
                let note = format!("used through the alias `{name}` at {}", file.position(at));
                self.with_note(note)
            }
            None => self,
        }
    }

    /// `path:line:col: message`, then the YAML line with carets under the fault, then the notes.
    ///
    /// Deterministic: the same diagnostic renders to the same text. Offsets that are not on a
    /// character boundary, or past the end, are rounded down to one that is. A manifest may come
    /// from anyone: control characters (ESC above all), bidi controls, U+2028, U+2029, U+FFFE and
    /// U+FFFF in the quoted line, the message or a note are shown escaped (`\u{1b}`), never raw,
    /// and the carets stay under the escaped text.
    pub fn render(&self) -> String {
        let mut out = match &self.location {
            None => visible(&self.message),
            Some(loc) => snippet(loc, &self.message),
        };
        let gutter = self.location.as_ref().map_or(0, |loc| {
            let (line, _) = loc.file.line_col(loc.offset);
            line.to_string().len()
        });
        let pad = " ".repeat(gutter);
        let pad = if self.location.is_some() {
            pad
        } else {
            " ".to_owned()
        };
        for (i, note) in self.notes.iter().enumerate() {
            if i == 0 && self.location.is_some() {
                out.push_str(&format!("\n{pad} |"));
            }
            out.push_str(&format!("\n{pad} = note: {}", visible(note)));
        }
        out
    }
}

/// The alias token at `at` (`*name`), as written.
fn alias_name(text: &str, at: usize) -> &str {
    let at = floor_char_boundary(text, at);
    let rest = &text[at..];
    let end = rest
        .char_indices()
        .skip(1)
        .find(|(_, c)| c.is_whitespace() || matches!(c, ',' | '[' | ']' | '{' | '}'))
        .map_or(rest.len(), |(i, _)| i);
    &rest[..end]
}

/// Whether a diagnostic shows `c` escaped rather than raw (a terminal or rustc's output would
/// otherwise get it): a control character (C0, DEL, C1: ESC starts the sequences that clear a screen, write a link or the
/// clipboard), a bidi control (it reorders the text around it), U+2028, U+2029, U+FFFE or
/// U+FFFF. The same set as `tileops_bench::text::is_hidden`; this crate cannot depend on that one.
fn is_hidden(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{fffe}'
                | '\u{ffff}'
        )
}

/// How `c` is shown in a diagnostic: itself, or, when [`is_hidden`], `\u{1b}` (lower-case hex, as
/// the messages' `{:?}` writes a character). Tab stays a tab (the caret line repeats it), and so
/// does a line feed in a message or a note, which may span lines.
fn shown(c: char, out: &mut String) {
    if is_hidden(c) && c != '\t' && c != '\n' {
        out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
    } else {
        out.push(c);
    }
}

/// `text` as a diagnostic shows it ([`shown`]).
fn visible(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        shown(c, &mut out);
    }
    out
}

fn snippet(loc: &Location, message: &str) -> String {
    let file = &loc.file;
    let offset = floor_char_boundary(&file.text, loc.offset);
    let (line, col) = file.line_col(offset);
    let text = file.line_text(offset);
    let pad = " ".repeat(line.to_string().len());
    // Carets stay on the fault's own line even when the fault spans lines.
    let line_chars = text.chars().count();
    let fault_chars = file.text[offset..]
        .chars()
        .take_while(|c| !matches!(c, '\n' | '\r'))
        .scan(0usize, |bytes, c| {
            *bytes += c.len_utf8();
            Some(*bytes)
        })
        .take_while(|bytes| *bytes <= loc.len)
        .count();
    let width = fault_chars
        .max(1)
        .min(line_chars.saturating_sub(col - 1).max(1));
    // The line is shown with its hidden characters escaped: each takes as many columns as its
    // escape, under which the caret line puts as many spaces (or carets), so both stay aligned.
    // The caret line repeats the line's tabs, so that a terminal aligns both lines alike.
    let mut space = String::new();
    let mut carets = 0;
    let mut escaped = String::new();
    for (i, c) in text.chars().enumerate() {
        escaped.clear();
        shown(c, &mut escaped);
        if i < col - 1 {
            // A hidden character's escape has no tab: only a tab itself is repeated.
            for e in escaped.chars() {
                space.push(if e == '\t' { '\t' } else { ' ' });
            }
        } else if i < col - 1 + width {
            carets += escaped.chars().count();
        }
    }
    format!(
        "{path}:{line}:{col}: {message}\n{pad} |\n{line} | {text}\n{pad} | {space}{carets}",
        path = visible(&file.display_path),
        message = visible(message),
        text = visible(text),
        carets = "^".repeat(carets.max(1)),
    )
}

/// Collects every diagnostic of one expansion. Like serde_derive's `Ctxt`, dropping it with
/// unreported diagnostics is a bug in the macro; the unit tests catch it (the macro never panics).
#[derive(Debug, Default)]
pub struct Errors {
    list: Vec<Diagnostic>,
    #[cfg_attr(not(test), allow(dead_code))]
    checked: bool,
}

impl Errors {
    /// An empty accumulator.
    pub fn new() -> Self {
        Errors::default()
    }

    /// Record a problem.
    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.list.push(diagnostic);
    }

    /// Record every problem of another list.
    pub fn extend(&mut self, diagnostics: impl IntoIterator<Item = Diagnostic>) {
        self.list.extend(diagnostics);
    }

    /// Whether anything was recorded so far.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Hand the diagnostics over (marks the accumulator as checked).
    pub fn finish(mut self) -> Vec<Diagnostic> {
        self.checked = true;
        std::mem::take(&mut self.list)
    }
}

#[cfg(test)]
impl Drop for Errors {
    fn drop(&mut self) {
        // The macro itself never panics: the check exists only in the unit tests.
        assert!(
            self.checked || self.list.is_empty() || std::thread::panicking(),
            "Errors dropped with {} unreported diagnostics",
            self.list.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> Rc<SourceFile> {
        Rc::new(SourceFile {
            display_path: "manifest/x.yaml".into(),
            text: text.into(),
        })
    }

    #[test]
    fn renders_path_line_column_and_carets() {
        let f = file("softmax:\n  roofline:\n    flops: \"5 * Q * N\"\n");
        let offset = f.text.find('Q').unwrap();
        let d = Diagnostic::at(&f, offset, 1, "unknown name `Q`");
        let text = d.render();
        assert!(
            text.starts_with("manifest/x.yaml:3:17: unknown name `Q`"),
            "{text}"
        );
        let last = text.lines().last().unwrap();
        assert_eq!(last, "  |                 ^");
    }

    #[test]
    fn carets_cover_the_fault_but_stay_on_its_line() {
        let f = file("a: \"x + yy\"\nb: 1\n");
        let offset = f.text.find("yy").unwrap();
        let text = Diagnostic::at(&f, offset, 50, "m").render();
        assert!(text.ends_with("^^^"), "{text}");
    }

    #[test]
    fn line_col_counts_characters_not_bytes() {
        let f = file("é: \"ab\"\n");
        let offset = f.text.find('a').unwrap();
        assert_eq!(f.line_col(offset), (1, 5));
    }

    #[test]
    fn offsets_past_the_end_do_not_panic() {
        let f = file("a: 1");
        let d = Diagnostic::at(&f, 999, 3, "m");
        assert!(d.render().contains("manifest/x.yaml:1:5"));
    }

    #[test]
    fn unlocated_diagnostics_render_their_message() {
        let d = Diagnostic::unlocated("no manifest");
        assert_eq!(d.render(), "no manifest");
        let mut errors = Errors::new();
        errors.push(d);
        assert_eq!(errors.finish().len(), 1);
    }

    #[test]
    fn faults_inside_a_multibyte_character_do_not_panic() {
        // The renderer used to slice at the raw offset while counting the carets.
        let f = file("a: \"漢字 + Q\" # 😀é");
        for offset in 0..=f.text.len() + 2 {
            let text = Diagnostic::at(&f, offset, 3, "m").render();
            assert!(text.starts_with("manifest/x.yaml:1:"), "{text}");
        }
        let inside = f.text.find('字').unwrap() + 1;
        let text = Diagnostic::at(&f, inside, 1, "m").render();
        assert!(text.starts_with("manifest/x.yaml:1:6: m"), "{text}");
    }

    #[test]
    fn cr_only_and_crlf_lines_count_as_lines() {
        for eol in ["\r", "\r\n", "\n"] {
            let f = file(&format!("a: 1{eol}b: \"x\"{eol}c: Q{eol}"));
            let offset = f.text.find('Q').unwrap();
            let text = Diagnostic::at(&f, offset, 1, "m").render();
            assert_eq!(
                text, "manifest/x.yaml:3:4: m\n  |\n3 | c: Q\n  |    ^",
                "{eol:?}"
            );
        }
        // Between the halves of a CRLF is still the end of the line.
        let f = file("ab\r\nc");
        assert_eq!(f.line_col(3), (1, 3));
        assert_eq!(f.line_col(4), (2, 1));
    }

    #[test]
    fn the_caret_line_keeps_tabs_so_it_aligns_with_the_source() {
        let f = file("\tflops:\t\"Q\"\n");
        let offset = f.text.find('Q').unwrap();
        let text = Diagnostic::at(&f, offset, 1, "m").render();
        assert!(text.ends_with("\n  | \t      \t ^"), "{text:?}");
    }

    #[test]
    fn a_line_with_escape_sequences_is_shown_escaped_with_the_carets_under_the_fault() {
        // A screen clear before the fault, an OSC 8 link, a C1 CSI and a bidi override in it.
        let f = file("flops: \"\u{1b}[2J N + Q\u{9b}\u{202e}\" # \u{1b}]8;;http://x\u{7}\n");
        let offset = f.text.find('Q').unwrap();
        let text = Diagnostic::at(&f, offset, 'Q'.len_utf8() + 2 + 3, "unknown name `Q`")
            .with_note("see \u{1b}]52;c;eA==\u{7}")
            .render();
        assert_eq!(
            text,
            "manifest/x.yaml:1:18: unknown name `Q`\n  |\n\
             1 | flops: \"\\u{1b}[2J N + Q\\u{9b}\\u{202e}\" # \\u{1b}]8;;http://x\\u{7}\n  \
             |                       ^^^^^^^^^^^^^^^\n  |\n  = note: see \\u{1b}]52;c;eA==\\u{7}"
        );
        assert!(
            !text.contains(['\u{1b}', '\u{7}', '\u{9b}', '\u{202e}']),
            "{text:?}"
        );
        // The carets start under the `Q` of the escaped line and cover `Q\u{9b}\u{202e}`.
        let lines: Vec<&str> = text.lines().collect();
        let q = lines[2].find('Q').unwrap();
        assert_eq!(lines[3].find('^'), Some(q));
        assert_eq!(&lines[2][q..q + 15], "Q\\u{9b}\\u{202e}");
        // A message quoting the file is escaped too.
        let d = Diagnostic::unlocated("unknown op `a\u{1b}[31mb`");
        assert_eq!(d.render(), "unknown op `a\\u{1b}[31mb`");
    }

    #[test]
    fn notes_follow_the_snippet_in_order() {
        let f = file("a: 1\n");
        let d = Diagnostic::at(&f, 3, 1, "m")
            .with_note("one")
            .with_note("two");
        assert_eq!(
            d.render(),
            "manifest/x.yaml:1:4: m\n  |\n1 | a: 1\n  |    ^\n  |\n  = note: one\n  = note: two"
        );
        let d = Diagnostic::unlocated("m").with_note("one");
        assert_eq!(d.render(), "m\n  = note: one");
    }

    #[test]
    fn errors_in_an_aliased_formula_point_at_the_anchor_and_note_the_alias() {
        let f = file("x: &f \"N + 漢 + Q\"\nop:\n  flops: *f # 字\n");
        let root = crate::yaml::parse(&f.text).unwrap();
        let flops = root.get("op").unwrap().get("flops").unwrap();
        let value = flops.as_str().unwrap();
        let at = value.find('Q').unwrap();
        let d = Diagnostic::in_scalar(&f, flops.origin(), value, at..at + 1, "unknown `Q`");
        assert_eq!(
            d.render(),
            "manifest/x.yaml:1:16: unknown `Q`\n  |\n1 | x: &f \"N + 漢 + Q\"\n  |                ^\n  |\n  = note: used through the alias `*f` at manifest/x.yaml:3:10"
        );
        let d = Diagnostic::at_node(&f, flops, "whole");
        assert!(
            d.render().starts_with("manifest/x.yaml:1:7: whole"),
            "{}",
            d.render()
        );
        assert_eq!(d.notes.len(), 1);
    }

    #[test]
    fn yaml_limits_are_not_called_syntax_errors() {
        let text = format!("a: {}\n", "[".repeat(100));
        let f = file(&text);
        let err = crate::yaml::parse(&f.text).unwrap_err();
        let rendered = Diagnostic::yaml(&f, &err).render();
        assert!(
            rendered.contains(": the manifest is nested too deeply"),
            "{rendered}"
        );
        let f = file("a: [1,\rb: 2\r");
        let err = crate::yaml::parse(&f.text).unwrap_err();
        let rendered = Diagnostic::yaml(&f, &err).render();
        assert!(rendered.contains("YAML syntax error"), "{rendered}");
    }
}
