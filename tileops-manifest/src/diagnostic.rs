//! Errors located in a manifest file, rendered the way rustc renders its own.
//!
//! Every problem the macro finds becomes a [`Diagnostic`]; an [`Errors`] accumulator collects all of
//! them so that one compilation reports every mistake of an entry at once, and turns them into
//! `compile_error!` invocations at the attribute.

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
    pub fn line_col(&self, offset: usize) -> (usize, usize) {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let before = &self.text[..offset];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let col = self.text[line_start..offset].chars().count() + 1;
        (line, col)
    }

    /// The text of the line holding `offset`, without its newline.
    fn line_text(&self, offset: usize) -> &str {
        let offset = floor_char_boundary(&self.text, offset.min(self.text.len()));
        let start = self.text[..offset].rfind('\n').map_or(0, |i| i + 1);
        let end = self.text[offset..]
            .find('\n')
            .map_or(self.text.len(), |i| offset + i);
        self.text[start..end].trim_end_matches('\r')
    }
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while offset > 0 && !text.is_char_boundary(offset) {
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
        }
    }

    /// An error with no place in the YAML (a missing file, a bad attribute).
    pub fn unlocated(message: impl Into<String>) -> Self {
        Diagnostic {
            location: None,
            message: message.into(),
        }
    }

    /// `path:line:col: message`, then the YAML line with carets under the fault.
    pub fn render(&self) -> String {
        let Some(loc) = &self.location else {
            return self.message.clone();
        };
        let (line, col) = loc.file.line_col(loc.offset);
        let text = loc.file.line_text(loc.offset);
        let gutter = line.to_string().len();
        let pad = " ".repeat(gutter);
        // Carets stay on the fault's own line even when the fault spans lines.
        let line_chars = text.chars().count();
        let fault_chars = loc.file.text[loc.offset.min(loc.file.text.len())..]
            .chars()
            .take_while(|c| *c != '\n')
            .scan(0usize, |bytes, c| {
                *bytes += c.len_utf8();
                Some(*bytes)
            })
            .take_while(|bytes| *bytes <= loc.len)
            .count();
        let width = fault_chars
            .max(1)
            .min(line_chars.saturating_sub(col - 1).max(1));
        format!(
            "{path}:{line}:{col}: {message}\n{pad} |\n{line} | {text}\n{pad} | {space}{carets}",
            path = loc.file.display_path,
            message = self.message,
            space = " ".repeat(col - 1),
            carets = "^".repeat(width),
        )
    }
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
}
