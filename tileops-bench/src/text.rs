//! Text from a file, made safe for the place it is shown in.
//!
//! Records files and profiles are shared (CI artifacts, colleagues' runs): every string in them
//! (op, workload, family, dtype, impl, device, skip and partial reasons, params) can hold anything.
//! Nothing of it may reach a terminal, a spreadsheet or a renderer as code. Each output has its
//! function here, and every one starts with the same step, [`visible`]:
//!
//! - **Hidden characters are shown escaped**, as `\u{1b}` (Rust's own spelling, the one the
//!   manifest's diagnostics use): the C0 and C1 control characters and DEL (a terminal runs ESC,
//!   CSI and OSC sequences: a screen clear, an OSC 8 link, an OSC 52 clipboard write), the bidi
//!   controls (U+061C, U+200E, U+200F, U+202A–U+202E, U+2066–U+2069: they reorder the text around
//!   them and can disguise an op name), the line and paragraph separators U+2028 and U+2029, and
//!   U+FFFE and U+FFFF (which XML forbids). See [`is_hidden`].
//! - **A terminal** ([`for_terminal`], [`for_terminal_text`]) gets nothing else changed.
//! - **A CSV cell** ([`for_csv_cell`]) that is text and begins with `=`, `+`, `-`, `@` or a tab
//!   gets a `'` in front (a carriage return, OWASP's last one, is already escaped), as OWASP recommends against formula injection: a
//!   spreadsheet shows the text instead of evaluating it. The CSV writer then quotes the cell as
//!   RFC 4180 requires. Numbers are not text: a negative number stays a number.
//! - **A markdown table cell** ([`for_markdown_cell`]) has `<`, `>`, `&` and the backtick written as
//!   HTML entities (so raw HTML never reaches a renderer, and no code span opens), `|`, `\`, `[`
//!   and `]` escaped with a backslash (no cell split, no link), and every line break (LF, CR,
//!   CRLF) made a space, so that a row stays one line.
//! - **XML and HTML** ([`crate::svg::escape_xml`]) escape the markup characters after [`visible`].
//!
//! A backslash in the text itself is left as it is (outside markdown): the escapes make hidden
//! characters visible, they do not promise that every string reads back. JSON output is data, not
//! display: its values stay exact (a JSON escape such as `\u202e` changes no value).
//!
//! ```
//! use tileops_bench::text::{for_csv_cell, for_markdown_cell, for_terminal};
//!
//! assert_eq!(for_terminal("relu\u{1b}[2J\u{202e}"), "relu\\u{1b}[2J\\u{202e}");
//! assert_eq!(for_csv_cell("=HYPERLINK(\"http://x\")"), "'=HYPERLINK(\"http://x\")");
//! assert_eq!(for_markdown_cell("<img src=x>|a"), "&lt;img src=x&gt;\\|a");
//! ```

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` is shown escaped in every output meant for people: a control character (C0, DEL,
/// C1), a bidi control, U+2028 or U+2029, or U+FFFE or U+FFFF.
///
/// Tab, line feed and carriage return are control characters too: each output says which of them
/// it keeps.
pub fn is_hidden(c: char) -> bool {
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

/// Writes `c` as `\u{hex}`, lower case without padding (`\u{1b}`, `\u{202e}`): how Rust's `{:?}`
/// writes a control character.
fn push_escaped(out: &mut String, c: char) {
    let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
}

/// `text` with every [`is_hidden`] character not in `keep` escaped; borrowed when there is none.
fn escape_hidden<'a>(text: &'a str, keep: &[char]) -> Cow<'a, str> {
    let escapes = |c: char| is_hidden(c) && !keep.contains(&c);
    if !text.chars().any(escapes) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if escapes(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The step every output shares: [`is_hidden`] characters escaped, except tab and line feed,
/// which XML, HTML, CSV and a chart's text carry as white space or a line break. A carriage
/// return is escaped: on a terminal that shows the file it would return over the line.
///
/// ```
/// use tileops_bench::text::visible;
/// assert_eq!(visible("a\u{1b}]8;;http://x\u{7}b\u{fffe}\n"), "a\\u{1b}]8;;http://x\\u{7}b\\u{fffe}\n");
/// assert_eq!(visible("a\r\n"), "a\\u{d}\n");
/// assert_eq!(visible("plain"), "plain");
/// ```
pub fn visible(text: &str) -> Cow<'_, str> {
    escape_hidden(text, &['\t', '\n'])
}

/// One field (an op, a device, a reason) for a line on a terminal: every [`is_hidden`] character
/// escaped but the tab, line breaks included, so that the field can neither drive the terminal
/// nor start a line of its own.
pub fn for_terminal(text: &str) -> Cow<'_, str> {
    escape_hidden(text, &['\t'])
}

/// A whole message for a terminal (an error that may quote a file, a listing): as
/// [`for_terminal`], but its line feeds kept as line breaks.
pub fn for_terminal_text(text: &str) -> Cow<'_, str> {
    escape_hidden(text, &['\t', '\n'])
}

/// A text cell of a CSV table, before the CSV writer quotes it: [`visible`], then a `'` in front
/// when it begins with `=`, `+`, `-`, `@`, a tab or a carriage return (OWASP's list of what a
/// spreadsheet may take for a formula; [`visible`] has made a carriage return `\u{d}` already).
/// Tabs and line feeds inside are kept: CSV quoting carries them. Only for text: a number must not
/// go through it (`-0.5` would become text).
///
/// ```
/// use tileops_bench::text::for_csv_cell;
/// assert_eq!(for_csv_cell("-cmd"), "'-cmd");
/// assert_eq!(for_csv_cell("a-b"), "a-b");
/// ```
pub fn for_csv_cell(text: &str) -> Cow<'_, str> {
    let shown = visible(text);
    match shown.chars().next() {
        Some('=' | '+' | '-' | '@' | '\t' | '\r') => Cow::Owned(format!("'{shown}")),
        _ => shown,
    }
}

/// A cell (or header) of a GFM markdown table: [`visible`]; `<`, `>`, `&` and `` ` `` as the
/// entities `&lt;`, `&gt;`, `&amp;` and `&#96;`; `|`, `\`, `[` and `]` escaped with a backslash;
/// each line break (LF, CR or CRLF) a space.
///
/// Entities, not backslashes, for the markup: GFM renders them inside a table cell, and a
/// renderer that passes raw HTML through (Python-Markdown does) then gets text, not a tag. A
/// line break becomes a space rather than `<br>`: the report is read on a terminal as much as
/// rendered, and a row must stay one line in both.
///
/// ```
/// use tileops_bench::text::for_markdown_cell;
/// assert_eq!(for_markdown_cell("a\r\nb`c`"), "a b&#96;c&#96;");
/// ```
pub fn for_markdown_cell(text: &str) -> Cow<'_, str> {
    let markup = |c: char| {
        matches!(
            c,
            '<' | '>' | '&' | '`' | '|' | '\\' | '[' | ']' | '\n' | '\r'
        )
    };
    if !text.chars().any(|c| markup(c) || is_hidden(c) && c != '\t') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '`' => out.push_str("&#96;"),
            '|' | '\\' | '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '\r' | '\n' => {
                // A CRLF is one line break.
                if c == '\r' && chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(' ');
            }
            '\t' => out.push(c),
            c if is_hidden(c) => push_escaped(&mut out, c),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A skip reason's first clause (what happened; the rest says what to do about it) and its group
/// key: the clause with each number written `N`, so that `9000 B per call` and `12000 B per call`
/// are one reason.
pub(crate) fn reason_clause(reason: &str) -> (&str, String) {
    let clause = reason.split("; ").next().unwrap_or(reason);
    let key = clause
        .split(' ')
        .map(numbers_as_n)
        .collect::<Vec<_>>()
        .join(" ");
    (clause, key)
}

/// `items` (a reason each) grouped by [`reason_clause`]'s key, in order of first appearance: each
/// group's clause keeps every word its items share and shows `N` where their numbers differ.
pub(crate) fn group_by_reason<'a, T>(
    items: impl IntoIterator<Item = (&'a str, T)>,
) -> Vec<(String, Vec<T>)> {
    // Per group: its key, each member's words, the members.
    type Group<'w, T> = (String, Vec<Vec<&'w str>>, Vec<T>);
    let mut groups: Vec<Group<'_, T>> = Vec::new();
    for (reason, item) in items {
        let (clause, key) = reason_clause(reason);
        let words: Vec<&str> = clause.split(' ').collect();
        match groups.iter_mut().find(|(k, _, _)| *k == key) {
            Some((_, all_words, members)) => {
                all_words.push(words);
                members.push(item);
            }
            None => groups.push((key, vec![words], vec![item])),
        }
    }
    groups
        .into_iter()
        .map(|(_, all_words, members)| {
            let first = &all_words[0];
            let merged: Vec<String> = (0..first.len())
                .map(|i| {
                    if all_words.iter().all(|w| w[i] == first[i]) {
                        first[i].to_owned()
                    } else {
                        numbers_as_n(first[i])
                    }
                })
                .collect();
            (merged.join(" "), members)
        })
        .collect()
}

/// `word` with each number in it (a digit, then digits, `.` and `_`) written `N`: `(4.2` is `(N`.
pub(crate) fn numbers_as_n(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut in_number = false;
    for c in word.chars() {
        let continues = in_number && (c.is_ascii_digit() || c == '.' || c == '_');
        if continues {
            continue;
        }
        in_number = c.is_ascii_digit();
        out.push(if in_number { 'N' } else { c });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every payload the outputs must defuse, each in the middle of a name.
    const PAYLOADS: [&str; 9] = [
        "op\u{1b}[2Jx",
        "op\u{1b}]8;;http://x\u{7}link\u{1b}]8;;\u{7}",
        "op\u{1b}]52;c;cm0gLXJmIH4=\u{7}",
        "op\u{9b}31mred",
        "op\u{202e}fdp.exe",
        "op\u{2066}\u{2069}\u{200e}\u{200f}\u{61c}",
        "op\u{fffe}\u{ffff}",
        "op\u{85}\u{7f}\u{0}",
        "op\u{2028}\u{2029}",
    ];

    fn no_hidden(text: &str, keep: &[char]) -> bool {
        text.chars().all(|c| !is_hidden(c) || keep.contains(&c))
    }

    #[test]
    fn hidden_characters_are_the_controls_bidi_separators_and_xml_nonchars() {
        for c in ['\u{0}', '\u{1b}', '\u{7f}', '\u{80}', '\u{9b}', '\u{9f}'] {
            assert!(is_hidden(c), "{c:?}");
        }
        for c in [
            '\u{61c}', '\u{200e}', '\u{202a}', '\u{202e}', '\u{2066}', '\u{2069}',
        ] {
            assert!(is_hidden(c), "{c:?}");
        }
        for c in [
            'a', ' ', 'é', '漢', '\u{a0}', '\u{200b}', '\u{2070}', '\u{fffd}', '😀',
        ] {
            assert!(!is_hidden(c), "{c:?}");
        }
    }

    #[test]
    fn the_terminal_sees_every_payload_escaped() {
        assert_eq!(for_terminal("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(
            for_terminal("\u{1b}]8;;http://x\u{7}click\u{1b}]8;;\u{7}"),
            "\\u{1b}]8;;http://x\\u{7}click\\u{1b}]8;;\\u{7}"
        );
        assert_eq!(
            for_terminal("\u{1b}]52;c;cm0gLXJm\u{7}"),
            "\\u{1b}]52;c;cm0gLXJm\\u{7}"
        );
        assert_eq!(for_terminal("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(for_terminal("relu\u{202e}uler"), "relu\\u{202e}uler");
        assert_eq!(for_terminal("a\u{fffe}"), "a\\u{fffe}");
        // A field cannot start a line of its own, nor return to overwrite one; a tab is harmless.
        assert_eq!(for_terminal("a\r\nb\tc"), "a\\u{d}\\u{a}b\tc");
        // A message keeps its lines.
        assert_eq!(for_terminal_text("a\nb\u{1b}c\r"), "a\nb\\u{1b}c\\u{d}");
        for p in PAYLOADS {
            assert!(no_hidden(&for_terminal(p), &['\t']), "{p:?}");
            assert!(no_hidden(&for_terminal_text(p), &['\t', '\n']), "{p:?}");
        }
        // Plain text is not copied.
        assert!(matches!(for_terminal("softmax/8k"), Cow::Borrowed(_)));
    }

    #[test]
    fn csv_cells_that_a_spreadsheet_would_evaluate_are_neutralised() {
        for (cell, neutral) in [
            (
                "=HYPERLINK(\"http://x\",\"y\")",
                "'=HYPERLINK(\"http://x\",\"y\")",
            ),
            ("+1", "'+1"),
            ("-cmd|' /C calc'!A0", "'-cmd|' /C calc'!A0"),
            ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
            ("\t=1", "'\t=1"),
            // A carriage return is escaped, so the cell no longer starts with one.
            ("\r=1", "\\u{d}=1"),
        ] {
            assert_eq!(for_csv_cell(cell), neutral);
        }
        // Not at the start, or a harmless start: unchanged.
        for cell in ["a=b", "x+1", "1-2", "me@host", "", "'quoted"] {
            assert_eq!(for_csv_cell(cell), cell);
        }
        // Hidden characters are escaped first, so an escaped one cannot start a formula either.
        assert_eq!(for_csv_cell("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(for_csv_cell("a\u{202e}b\u{9b}"), "a\\u{202e}b\\u{9b}");
        assert_eq!(for_csv_cell("a\u{fffe}"), "a\\u{fffe}");
        // CSV quoting carries line feeds and tabs inside a cell.
        assert_eq!(for_csv_cell("a\nb\tc\r"), "a\nb\tc\\u{d}");
        for p in PAYLOADS {
            assert!(no_hidden(&for_csv_cell(p), &['\t', '\n']), "{p:?}");
        }
    }

    #[test]
    fn markdown_cells_carry_no_markup_and_no_line_break() {
        assert_eq!(
            for_markdown_cell("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(for_markdown_cell("a & b"), "a &amp; b");
        assert_eq!(for_markdown_cell("`code`"), "&#96;code&#96;");
        assert_eq!(for_markdown_cell("a|b"), "a\\|b");
        // An escaped backslash before a bar would free the bar: the backslash is escaped too.
        assert_eq!(for_markdown_cell("a\\|b"), "a\\\\\\|b");
        assert_eq!(
            for_markdown_cell("[x](javascript:alert(1))"),
            "\\[x\\](javascript:alert(1))"
        );
        // A CR in the middle, a CRLF and a LF: one space each, never a new row.
        assert_eq!(for_markdown_cell("a\rb\r\nc\nd"), "a b c d");
        assert_eq!(
            for_markdown_cell("a\u{1b}[2J\u{202e}"),
            "a\\u{1b}\\[2J\\u{202e}"
        );
        assert_eq!(for_markdown_cell("\u{9b}\u{fffe}"), "\\u{9b}\\u{fffe}");
        for p in PAYLOADS {
            let cell = for_markdown_cell(p);
            assert!(no_hidden(&cell, &['\t']), "{p:?}");
            assert!(!cell.contains(['<', '>', '`', '\n', '\r']), "{p:?}");
        }
        assert!(matches!(for_markdown_cell("98.5%"), Cow::Borrowed(_)));
    }

    #[test]
    fn visible_keeps_white_space_and_escapes_the_rest() {
        assert_eq!(visible("a\tb\nc\rd"), "a\tb\nc\\u{d}d");
        assert_eq!(
            visible("\u{0}\u{8}\u{1f}\u{7f}"),
            "\\u{0}\\u{8}\\u{1f}\\u{7f}"
        );
        for p in PAYLOADS {
            assert!(no_hidden(&visible(p), &['\t', '\n']), "{p:?}");
        }
    }
}
