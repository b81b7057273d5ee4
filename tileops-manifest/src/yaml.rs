//! A YAML document as a tree of nodes that remember where they are in the file.
//!
//! serde-saphyr does the YAML parsing; wrapping every node in `Spanned` keeps each node's byte offset,
//! which is what lets every later error point into the manifest.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;
use std::ops::Range;

/// A YAML node and its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub kind: Kind,
    /// Byte offset of the node's own text in the file (of the opening quote, for a quoted
    /// scalar). A node reached through an alias (`*x`) or a merge key (`<<: *x`) has the offset
    /// of the anchored text it was copied from, so that errors point at what is wrong.
    pub offset: usize,
    /// Byte length of the node's text, when serde-saphyr knows it (0 or 1 for collections).
    pub len: usize,
    /// Byte offset of the alias token (`*x`) through which the node was reached, if it was: errors
    /// inside the node note it, since the text they point at is used elsewhere.
    pub alias: Option<usize>,
}

/// The value of a YAML node.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    /// `null`, `~`, or an empty value (`a:` with nothing after it).
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer scalar (`4`, `0x10`, `0o17`); one too large for `i128` reads as a float.
    Int(i128),
    /// A float scalar (`1.0e-6`, `.inf`, `.nan`).
    Float(f64),
    /// A string scalar, plain or quoted, with escapes and folding resolved.
    Str(String),
    /// A sequence (`[a, b]` or a block of `- ` items), items in order.
    Seq(Vec<Node>),
    /// A mapping's key/value pairs in document order; keys are unique (a duplicate is a parse
    /// error) and merge keys (`<<: *x`) are already expanded.
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The YAML type's name, for messages ("a string", "a mapping").
    pub fn type_name(&self) -> &'static str {
        match self.kind {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) => "an integer",
            Kind::Float(_) => "a float",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a sequence",
            Kind::Map(_) => "a mapping",
        }
    }

    /// The string, when the node is one.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The entries, when the node is a mapping.
    pub fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.kind {
            Kind::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The items, when the node is a sequence.
    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.kind {
            Kind::Seq(s) => Some(s),
            _ => None,
        }
    }

    /// The value under a string key, when the node is a mapping that has it.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map(|(_, v)| v)
    }

    /// Byte offset where a string scalar's content starts in `text`: one past an opening quote.
    ///
    /// Adding a byte offset into the value to it is right only while the value has no escapes,
    /// `''`, line folding or block indentation; [`Node::origin`] and [`Origin::locate`] are right
    /// for every scalar.
    pub fn content_offset(&self, text: &str) -> usize {
        match text.as_bytes().get(self.offset) {
            Some(b'"' | b'\'') => self.offset + 1,
            _ => self.offset,
        }
    }

    /// Where the node is: what [`Origin::locate`] needs to map offsets in its value to the file.
    pub fn origin(&self) -> Origin {
        Origin {
            offset: self.offset,
            len: self.len,
            alias: self.alias,
        }
    }
}

/// Why a document could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The text is not YAML.
    Syntax,
    /// The document is valid YAML so far but exceeds one of the reader's size limits (nodes,
    /// events, aliases, scalar bytes, alias expansion).
    TooLarge,
    /// The document nests mappings and sequences deeper than the reader's limit.
    TooDeep,
}

/// A document that could not be read: where, why, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// Why.
    pub kind: ErrorKind,
    /// 1-based line, or 0 when unknown.
    pub line: usize,
    /// 1-based column, or 0 when unknown.
    pub column: usize,
    /// Byte offset of the problem in the text (the end of the text when unknown).
    pub offset: usize,
    /// What, first line only: the parser's message for a syntax error, or the limit that was
    /// exceeded, named.
    pub message: String,
}

impl fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ErrorKind::Syntax => write!(f, "YAML syntax error: {}", self.message),
            ErrorKind::TooLarge | ErrorKind::TooDeep => f.write_str(&self.message),
        }
    }
}

/// How deeply a manifest may nest mappings and sequences (flow `[`/`{` or block). TileOPs's files
/// nest 6 deep; serde-saphyr's own default, 64, lets its recursive deserialiser overflow a 2 MiB
/// thread stack in a debug build (rustc runs proc macros on its own thread; tests use 2 MiB).
pub const MAX_DEPTH: usize = 32;

/// The YAML reader's resource budget: serde-saphyr's defaults, with [`MAX_DEPTH`].
fn budget() -> serde_saphyr::Budget {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget
}

/// The YAML reader's options: YAML 1.2 booleans, `.inf` floats, and [`budget`] (which
/// [`limit_message`] names when a document exceeds it).
fn options() -> serde_saphyr::Options {
    serde_saphyr::options! {
        budget: Some(budget()),
        strict_booleans: true,
        // `default: .inf` is a float param default in TileOPs files.
        non_finite_float_policy: serde_saphyr::NonFiniteFloatPolicy::PassThrough,
    }
}

/// Parse a whole YAML document.
///
/// Booleans follow YAML 1.2's core schema (`true`/`false` only): a dim named `N` or a tensor named
/// `y` stays a string, as in TileOPs's files, rather than YAML 1.1's "no" and "yes".
///
/// ```
/// use tileops_manifest::yaml::{self, ErrorKind};
///
/// let root = yaml::parse("op: {flops: \"2 * N\"}\n").unwrap();
/// assert_eq!(root.get("op").and_then(|op| op.get("flops")).and_then(|f| f.as_str()), Some("2 * N"));
///
/// let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
/// assert_eq!(yaml::parse(&deep).unwrap_err().kind, ErrorKind::TooDeep);
/// ```
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    match serde_saphyr::from_str_with_options::<Spanned<Raw>>(text, options()) {
        Ok(root) => Ok(root.into_node()),
        Err(err) => Err(syntax_error(text, &err)),
    }
}

fn syntax_error(text: &str, err: &serde_saphyr::Error) -> SyntaxError {
    let location = err.location();
    let (line, column) = location.map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
    let offset = location
        .and_then(|l| l.span().byte_offset())
        .map(|o| usize::try_from(o).unwrap_or(usize::MAX))
        .filter(|&o| o <= text.len())
        .unwrap_or_else(|| offset_of_line_col(text, line, column));
    if let Some((kind, message)) = limit_message(err) {
        return SyntaxError {
            kind,
            line,
            column,
            offset,
            message,
        };
    }
    // serde-saphyr appends a rendered snippet; the diagnostic renders its own.
    let full = err.to_string();
    let first = full.lines().next().unwrap_or_default();
    let message = first
        .strip_prefix("error: ")
        .unwrap_or(first)
        .split_once(": ")
        .filter(|(head, _)| head.starts_with("line "))
        .map_or(first, |(_, tail)| tail)
        .to_owned();
    SyntaxError {
        kind: ErrorKind::Syntax,
        line,
        column,
        offset,
        message,
    }
}

/// The message for an error that is a resource limit rather than a syntax error: which limit,
/// and its value, so that a user with a legitimately large file knows what they hit.
fn limit_message(err: &serde_saphyr::Error) -> Option<(ErrorKind, String)> {
    use serde_saphyr::Error as E;
    use serde_saphyr::budget::BudgetBreach as B;
    let budget = budget();
    let too_large = |what: String| {
        Some((
            ErrorKind::TooLarge,
            format!("the manifest is too large for the YAML reader: {what}"),
        ))
    };
    let too_deep = || {
        Some((
            ErrorKind::TooDeep,
            format!(
                "the manifest is nested too deeply for the YAML reader: at most {} levels of mappings and sequences (`max_depth`), {} of them `[`/`{{` flow collections (`flow_nesting_limit`)",
                budget.max_depth, budget.flow_nesting_limit
            ),
        ))
    };
    let mut err = err;
    loop {
        match err {
            E::WithSnippet { error, .. } | E::AliasError { error, .. } => err = error,
            E::Budget { breach, .. } => {
                return match breach {
                    B::Depth { .. } => too_deep(),
                    B::Events { .. } => too_large(format!(
                        "more than {} parser events (`max_events`)",
                        budget.max_events
                    )),
                    B::Nodes { .. } => too_large(format!(
                        "more than {} nodes (`max_nodes`)",
                        budget.max_nodes
                    )),
                    B::Aliases { .. } => too_large(format!(
                        "more than {} aliases (`max_aliases`)",
                        budget.max_aliases
                    )),
                    B::Anchors { .. } => too_large(format!(
                        "more than {} anchors (`max_anchors`)",
                        budget.max_anchors
                    )),
                    B::ScalarBytes { .. } => too_large(format!(
                        "more than {} bytes of scalar text (`max_total_scalar_bytes`)",
                        budget.max_total_scalar_bytes
                    )),
                    B::Documents { .. } => too_large(format!(
                        "more than {} documents (`max_documents`)",
                        budget.max_documents
                    )),
                    B::MergeKeys { .. } => too_large(format!(
                        "more than {} merge keys (`max_merge_keys`)",
                        budget.max_merge_keys
                    )),
                    B::AliasAnchorRatio { aliases, anchors } => too_large(format!(
                        "{aliases} aliases of {anchors} anchors, more than {} per anchor (`alias_anchor_ratio_multiplier`)",
                        budget.alias_anchor_ratio_multiplier
                    )),
                    B::RecordedAnchorEvents { .. } | B::RecordedAnchorBytes { .. } => {
                        too_large(format!(
                            "anchors retain more than {} events or {} bytes (`max_recorded_anchor_events`, `max_recorded_anchor_bytes`)",
                            budget.max_recorded_anchor_events, budget.max_recorded_anchor_bytes
                        ))
                    }
                    // An unbalanced stream is malformed input, not a size problem.
                    B::SequenceUnbalanced => None,
                    other => too_large(format!("{other:?}")),
                };
            }
            E::AliasReplayLimitExceeded {
                max_total_replayed_events,
                ..
            } => {
                return too_large(format!(
                    "aliases expand to more than {max_total_replayed_events} events"
                ));
            }
            E::AliasExpansionLimitExceeded {
                max_expansions_per_anchor,
                ..
            } => {
                return too_large(format!(
                    "an anchor is expanded more than {max_expansions_per_anchor} times"
                ));
            }
            E::AliasReplayStackDepthExceeded { max_depth, .. } => {
                return too_large(format!("aliases nest more than {max_depth} deep"));
            }
            E::ExternalMessage { source, .. } => {
                // The scanner's own nesting guard fires before the budget's depth check for
                // flow collections (`[[[[…`) and very deep block collections.
                let deep = matches!(
                    &**source,
                    serde_saphyr::localizer::ExternalMessageSource::Parser(scan)
                        if matches!(scan.kind(), serde_saphyr::granit_parser::ErrorKind::RecursionLimitExceeded)
                );
                return if deep { too_deep() } else { None };
            }
            _ => return None,
        }
    }
}

/// Byte offset of a 1-based line and column (in characters), counting `\n`, `\r\n` and a lone `\r`
/// as line breaks, as YAML does. Past the end, the end of the text.
fn offset_of_line_col(text: &str, line: usize, column: usize) -> usize {
    let mut current = 1;
    let mut start = 0;
    let bytes = text.as_bytes();
    let mut i = 0;
    while current < line {
        match bytes.get(i) {
            None => return text.len(),
            Some(b'\n') => {
                current += 1;
                start = i + 1;
            }
            Some(b'\r') if bytes.get(i + 1) != Some(&b'\n') => {
                current += 1;
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    let rest = &text[start..];
    let line_end = rest.find(['\n', '\r']).unwrap_or(rest.len());
    start
        + rest[..line_end]
            .char_indices()
            .nth(column.saturating_sub(1))
            .map_or(line_end, |(i, _)| i)
}

/// The deserialised tree before positions are flattened into [`Node`].
enum Raw {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Spanned<Raw>>),
    Map(Vec<(Spanned<Raw>, Spanned<Raw>)>),
}

trait IntoNode {
    fn into_node(self) -> Node;
}

impl IntoNode for Spanned<Raw> {
    fn into_node(self) -> Node {
        // `defined` is the node's own text; `referenced` differs from it only for a node reached
        // through an alias or a merge key, where it is the `*x` token (children of an aliased
        // collection all share it).
        let defined = self.defined.span();
        let referenced = self.referenced.span().byte_offset();
        let offset = to_usize(defined.byte_offset());
        let len = to_usize(defined.byte_len());
        let alias = referenced
            .filter(|&r| Some(r) != defined.byte_offset())
            .map(|r| to_usize(Some(r)));
        let kind = match self.value {
            Raw::Null => Kind::Null,
            Raw::Bool(b) => Kind::Bool(b),
            Raw::Int(i) => Kind::Int(i),
            Raw::Float(f) => Kind::Float(f),
            Raw::Str(s) => Kind::Str(s),
            Raw::Seq(items) => Kind::Seq(items.into_iter().map(IntoNode::into_node).collect()),
            Raw::Map(entries) => Kind::Map(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.into_node(), v.into_node()))
                    .collect(),
            ),
        };
        Node {
            kind,
            offset,
            len,
            alias,
        }
    }
}

fn to_usize(n: Option<u64>) -> usize {
    n.map_or(0, |n| usize::try_from(n).unwrap_or(usize::MAX))
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(RawVisitor)
    }
}

struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_none<E>(self) -> Result<Raw, E> {
        Ok(Raw::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Raw, D::Error> {
        Raw::deserialize(d)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Raw, E> {
        Ok(Raw::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v.into()))
    }
    fn visit_i128<E>(self, v: i128) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(v.into()))
    }
    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Raw, E> {
        i128::try_from(v)
            .map(Raw::Int)
            .map_err(|_| E::custom("integer too large"))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Raw, E> {
        Ok(Raw::Float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Raw::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Raw::Map(entries))
    }
}

/// Where a string scalar is in the file, for mapping byte offsets in its value back to the text.
///
/// A scalar's value is not a slice of the file: escapes (`"\t"`, `"\u00e9"`), `''` in single
/// quotes, line folding and block indentation all make value offsets and file offsets differ.
/// [`Origin::locate`] re-reads the scalar's text and undoes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Origin {
    /// Byte offset of the scalar's text (its opening quote, when quoted).
    pub offset: usize,
    /// Byte length of the scalar's text, when known.
    pub len: usize,
    /// Byte offset of the alias (`*x`) the scalar was reached through, if any.
    pub alias: Option<usize>,
}

impl Origin {
    /// The file byte range of the bytes `range` of `value`, the scalar's decoded value.
    ///
    /// When the text at [`Origin::offset`] does not decode to `value` (a style this reader does
    /// not know), the whole scalar's text is returned: imprecise, but inside the right scalar.
    ///
    /// ```
    /// use tileops_manifest::yaml;
    ///
    /// let text = "flops: \"\\t2 * \\u00e9\"\n";
    /// let node = yaml::parse(text).unwrap().get("flops").unwrap().clone();
    /// let value = node.as_str().unwrap();
    /// assert_eq!(value, "\t2 * é");
    /// let at = value.find('é').unwrap();
    /// let range = node.origin().locate(text, value, at..at + 'é'.len_utf8());
    /// assert_eq!(&text[range], "\\u00e9");
    /// ```
    pub fn locate(&self, text: &str, value: &str, range: Range<usize>) -> Range<usize> {
        let whole = || {
            let start = self.offset.min(text.len());
            start..(start + self.len).min(text.len())
        };
        match ScalarMap::new(text, self.offset, value) {
            Some(map) => map.range(range),
            None => whole(),
        }
    }
}

/// For each character of a scalar's value, the bytes of the file it came from.
struct ScalarMap {
    /// `(offset in the value, file range)`, in value order.
    chars: Vec<(usize, Range<usize>)>,
    /// The value's length in bytes.
    total: usize,
    /// File offset just past the last character's source: where "the end of the value" is.
    end: usize,
}

impl ScalarMap {
    /// Re-read the scalar at `offset`; `None` unless the text decodes to exactly `value`.
    fn new(text: &str, offset: usize, value: &str) -> Option<ScalarMap> {
        if offset > text.len() || !text.is_char_boundary(offset) {
            return None;
        }
        let styles: &[Style] = match text.as_bytes().get(offset) {
            Some(b'"') => &[Style::Double],
            Some(b'\'') => &[Style::Single],
            // A plain scalar and a block scalar's content both start at their first character;
            // whichever reproduces the value is the one it was.
            _ => &[Style::Plain, Style::Literal, Style::Folded],
        };
        styles.iter().find_map(|&style| {
            let mut out = Decoder::new(text, value, offset);
            let ok = match style {
                Style::Double => out.quoted(offset + 1, b'"'),
                Style::Single => out.quoted(offset + 1, b'\''),
                Style::Plain => out.plain(offset),
                Style::Literal => out.block(offset, false),
                Style::Folded => out.block(offset, true),
            };
            (ok && out.complete()).then_some(ScalarMap {
                total: value.len(),
                chars: out.chars,
                end: out.end,
            })
        })
    }

    /// The file range of value bytes `range`. Offsets inside a character count as that
    /// character; offsets at or past the end of the value are the end of its text.
    fn range(&self, range: Range<usize>) -> Range<usize> {
        let source = |at: usize| {
            let i = self
                .chars
                .partition_point(|(o, _)| *o <= at)
                .checked_sub(1)?;
            Some(self.chars[i].1.clone())
        };
        let start = if range.start < self.total {
            source(range.start).map_or(self.end, |r| r.start)
        } else {
            self.end
        };
        let end = if range.end <= range.start {
            start
        } else if range.end - 1 < self.total {
            source(range.end - 1).map_or(self.end, |r| r.end)
        } else {
            self.end
        };
        start..end.max(start)
    }
}

#[derive(Clone, Copy)]
enum Style {
    Double,
    Single,
    Plain,
    Literal,
    Folded,
}

/// Decodes a scalar's text character by character, checking each against the expected value and
/// recording where it came from. Stops (successfully) once the whole value is produced, so the
/// decoder never needs to know where a plain or block scalar ends.
struct Decoder<'a> {
    text: &'a str,
    value: &'a str,
    /// How much of `value` is produced.
    done: usize,
    chars: Vec<(usize, Range<usize>)>,
    /// File offset after the last consumed source text.
    end: usize,
}

impl<'a> Decoder<'a> {
    fn new(text: &'a str, value: &'a str, start: usize) -> Self {
        Decoder {
            text,
            value,
            done: 0,
            chars: Vec::new(),
            end: start,
        }
    }

    fn complete(&self) -> bool {
        self.done == self.value.len()
    }

    /// Produce `c` from the file bytes `from`; false when the value does not continue with it.
    fn emit(&mut self, c: char, from: Range<usize>) -> bool {
        if !self.value[self.done..].starts_with(c) {
            return false;
        }
        self.end = from.end;
        self.chars.push((self.done, from));
        self.done += c.len_utf8();
        true
    }

    fn char_at(&self, i: usize) -> Option<char> {
        self.text.get(i..)?.chars().next()
    }

    /// Length of the line break at `i` (`\r\n`, `\n` or a lone `\r`), or 0.
    fn line_break(&self, i: usize) -> usize {
        match self.text.as_bytes().get(i..) {
            Some([b'\r', b'\n', ..]) => 2,
            Some([b'\n' | b'\r', ..]) => 1,
            _ => 0,
        }
    }

    fn skip_blanks(&self, mut i: usize) -> usize {
        while matches!(self.text.as_bytes().get(i), Some(b' ' | b'\t')) {
            i += 1;
        }
        i
    }

    /// Flow folding at the line break at `i` (trailing blanks already dropped): a break followed by
    /// text is one space; each empty line after it is one `\n` and the break itself disappears.
    /// `escaped` is for `\` + break in double quotes, which yields no space. Returns the offset of
    /// the next line's first non-blank character, or `None` when the value does not match.
    fn fold(&mut self, i: usize, escaped: bool) -> Option<usize> {
        let first = i..i + self.line_break(i);
        let mut at = first.end;
        let mut empty = 0;
        loop {
            let text_at = self.skip_blanks(at);
            let n = self.line_break(text_at);
            if n == 0 {
                at = text_at;
                break;
            }
            if !self.emit('\n', text_at..text_at + n) {
                return None;
            }
            empty += 1;
            at = text_at + n;
        }
        if empty == 0 && !escaped && !self.emit(' ', first) {
            return None;
        }
        Some(at)
    }

    /// A quoted scalar's content from `i` (one past the opening quote) to the closing `quote`.
    fn quoted(&mut self, mut i: usize, quote: u8) -> bool {
        while !self.complete() {
            let Some(c) = self.char_at(i) else {
                return false;
            };
            match c {
                '\'' if quote == b'\'' => {
                    if self.text.as_bytes().get(i + 1) != Some(&b'\'') || !self.emit('\'', i..i + 2)
                    {
                        return false;
                    }
                    i += 2;
                }
                '"' if quote == b'"' => return false,
                '\\' if quote == b'"' => match self.escape(i) {
                    Some(next) => i = next,
                    None => return false,
                },
                ' ' | '\t' => {
                    let after = self.skip_blanks(i);
                    if self.line_break(after) > 0 {
                        // Blanks before a line break are folded away.
                        i = after;
                    } else {
                        if !self.emit(c, i..i + 1) {
                            return false;
                        }
                        i += 1;
                    }
                }
                '\r' | '\n' => match self.fold(i, false) {
                    Some(next) => i = next,
                    None => return false,
                },
                _ => {
                    if !self.emit(c, i..i + c.len_utf8()) {
                        return false;
                    }
                    i += c.len_utf8();
                }
            }
        }
        true
    }

    /// The escape at `i` (a backslash in double quotes); returns the offset after it.
    fn escape(&mut self, i: usize) -> Option<usize> {
        let code = self.char_at(i + 1)?;
        let simple = match code {
            '0' => Some('\0'),
            'a' => Some('\u{07}'),
            'b' => Some('\u{08}'),
            't' | '\t' => Some('\t'),
            'n' => Some('\n'),
            'v' => Some('\u{0b}'),
            'f' => Some('\u{0c}'),
            'r' => Some('\r'),
            'e' => Some('\u{1b}'),
            ' ' => Some(' '),
            '"' => Some('"'),
            '/' => Some('/'),
            '\\' => Some('\\'),
            'N' => Some('\u{85}'),
            '_' => Some('\u{a0}'),
            'L' => Some('\u{2028}'),
            'P' => Some('\u{2029}'),
            _ => None,
        };
        if let Some(c) = simple {
            let end = i + 1 + code.len_utf8();
            return self.emit(c, i..end).then_some(end);
        }
        if code == '\r' || code == '\n' {
            return self.fold(i + 1, true);
        }
        let digits = match code {
            'x' => 2,
            'u' => 4,
            'U' => 8,
            _ => return None,
        };
        let hex = |at: usize| {
            let s = self.text.get(at..at + digits)?;
            u32::from_str_radix(s, 16).ok()
        };
        let first = hex(i + 2)?;
        let mut end = i + 2 + digits;
        let c = if (0xD800..0xDC00).contains(&first) && code == 'u' {
            // A UTF-16 surrogate pair spelled as two `\u` escapes is one character.
            let low = (self.text.get(end..end + 2) == Some("\\u"))
                .then(|| hex(end + 2))
                .flatten()
                .filter(|low| (0xDC00..0xE000).contains(low))?;
            end += 2 + digits;
            char::from_u32(0x10000 + ((first - 0xD800) << 10) + (low - 0xDC00))?
        } else {
            char::from_u32(first)?
        };
        self.emit(c, i..end).then_some(end)
    }

    /// A plain scalar from `i`: its characters, with multi-line text folded.
    fn plain(&mut self, mut i: usize) -> bool {
        while !self.complete() {
            let Some(c) = self.char_at(i) else {
                return false;
            };
            match c {
                ' ' | '\t' if self.line_break(self.skip_blanks(i)) > 0 => i = self.skip_blanks(i),
                '\r' | '\n' => match self.fold(i, false) {
                    Some(next) => i = next,
                    None => return false,
                },
                _ => {
                    if !self.emit(c, i..i + c.len_utf8()) {
                        return false;
                    }
                    i += c.len_utf8();
                }
            }
        }
        true
    }

    /// A block scalar (`|` literal, `>` folded) whose first content character is at `i`: its
    /// indentation is that character's column, and each following line loses that many spaces.
    fn block(&mut self, i: usize, folded: bool) -> bool {
        let line_start = self.text[..i].rfind(['\n', '\r']).map_or(0, |p| p + 1);
        let indent = i - line_start;
        if !self.text[line_start..i].bytes().all(|b| b == b' ') {
            return false;
        }
        // Empty lines before the first content line are leading `\n`s of the value; they all
        // point at the break that ends the line above the content.
        let before = line_start.saturating_sub(1)..line_start;
        while self.value[self.done..].starts_with('\n') {
            if !self.emit('\n', before.clone()) {
                return false;
            }
        }
        let mut at = i;
        let mut spaced = false;
        loop {
            // One content line from `at`.
            let line_end = at
                + self.text[at..]
                    .find(['\n', '\r'])
                    .unwrap_or(self.text.len() - at);
            for (o, c) in self.text[at..line_end].char_indices() {
                if self.complete() {
                    return true;
                }
                if !self.emit(c, at + o..at + o + c.len_utf8()) {
                    return false;
                }
            }
            if self.complete() {
                return true;
            }
            let n = self.line_break(line_end);
            if n == 0 {
                return false;
            }
            // The lines after: empty ones (only spaces up to the indentation), then content.
            let first_break = line_end..line_end + n;
            let mut next = line_end + n;
            let mut empties = Vec::new();
            let content = loop {
                let mut j = next;
                while j < next + indent && self.text.as_bytes().get(j) == Some(&b' ') {
                    j += 1;
                }
                let m = self.line_break(j);
                if m > 0 {
                    empties.push(j..j + m);
                    next = j + m;
                } else if j == next + indent {
                    break Some(j);
                } else {
                    // Less indented: the scalar ends; only its chomped breaks can follow.
                    break None;
                }
            };
            let next_spaced =
                content.is_some_and(|j| matches!(self.text.as_bytes().get(j), Some(b' ' | b'\t')));
            // Folding turns the break between two text lines into a space, or drops it when
            // empty lines follow (each is a `\n`). Breaks next to a more-indented line, and the
            // final ones, are kept, as in a literal scalar.
            let fold = folded && !spaced && !next_spaced && content.is_some();
            if !fold && !self.emit('\n', first_break.clone()) {
                return false;
            }
            if fold && empties.is_empty() && !self.emit(' ', first_break) {
                return false;
            }
            for empty in empties {
                if self.complete() {
                    return true;
                }
                if !self.emit('\n', empty) {
                    return false;
                }
            }
            let Some(j) = content else {
                return self.complete();
            };
            spaced = next_spaced;
            at = j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_know_their_byte_offsets() {
        let text = "op:\n  flops: \"5 * M\"\n  dims: [1, 2]\n";
        let root = parse(text).unwrap();
        let flops = root.get("op").unwrap().get("flops").unwrap();
        assert_eq!(flops.as_str(), Some("5 * M"));
        assert_eq!(&text[flops.content_offset(text)..][..5], "5 * M");
        let dims = root
            .get("op")
            .unwrap()
            .get("dims")
            .unwrap()
            .as_seq()
            .unwrap();
        assert_eq!(dims[1].kind, Kind::Int(2));
        assert_eq!(&text[dims[1].offset..][..1], "2");
    }

    #[test]
    fn plain_scalars_start_at_their_first_character() {
        let text = "a: 4 * M\n";
        let node = parse(text).unwrap();
        let a = node.get("a").unwrap();
        assert_eq!(&text[a.content_offset(text)..], "4 * M\n");
    }

    #[test]
    fn yaml_floats_nulls_and_bools_parse() {
        let root = parse("a: .inf\nb: null\nc: true\nd: 1.0e-6\n").unwrap();
        assert_eq!(root.get("a").unwrap().kind, Kind::Float(f64::INFINITY));
        assert_eq!(root.get("b").unwrap().kind, Kind::Null);
        assert_eq!(root.get("c").unwrap().kind, Kind::Bool(true));
        assert_eq!(root.get("d").unwrap().kind, Kind::Float(1.0e-6));
    }

    #[test]
    fn syntax_errors_carry_line_and_column() {
        let err = parse("a: [1, 2\nb: \"x\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(!err.message.is_empty());
        assert!(!err.message.contains("line 2"), "{}", err.message);
    }

    #[test]
    fn single_letter_keys_stay_strings() {
        let root = parse("y: 1\nN: \"x\"\nn: off\n").unwrap();
        assert_eq!(root.get("y").unwrap().kind, Kind::Int(1));
        assert!(root.get("N").is_some());
        assert_eq!(root.get("n").unwrap().as_str(), Some("off"));
    }

    #[test]
    fn duplicate_keys_are_syntax_errors() {
        let err = parse("a: 1\na: 2\n").unwrap_err();
        assert!(err.message.contains("duplicate"), "{}", err.message);
    }

    /// The file text that `locate` gives for the first occurrence of `needle` in the value of the
    /// top-level key `key`.
    fn located<'t>(text: &'t str, key: &str, needle: &str) -> &'t str {
        let node = parse(text).unwrap().get(key).unwrap().clone();
        let value = node.as_str().unwrap();
        let at = value.find(needle).unwrap();
        &text[node.origin().locate(text, value, at..at + needle.len())]
    }

    #[test]
    fn escapes_in_double_quotes_map_to_their_spelling() {
        let text = "f: \"\\t\\u00e9\\\\\\\"\\x41\\U0001F600\\ud83d\\ude00\\L\\/Q + 漢\"\n";
        assert_eq!(located(text, "f", "\t"), "\\t");
        assert_eq!(located(text, "f", "é"), "\\u00e9");
        assert_eq!(located(text, "f", "\\"), "\\\\");
        assert_eq!(located(text, "f", "\""), "\\\"");
        assert_eq!(located(text, "f", "A"), "\\x41");
        assert_eq!(located(text, "f", "😀"), "\\U0001F600");
        assert_eq!(located(text, "f", "😀😀"), "\\U0001F600\\ud83d\\ude00");
        assert_eq!(located(text, "f", "\u{2028}"), "\\L");
        assert_eq!(located(text, "f", "Q"), "Q");
        assert_eq!(located(text, "f", "+ 漢"), "+ 漢");
    }

    #[test]
    fn doubled_quotes_in_single_quotes_map_to_both() {
        let text = "f: 'it''s ''Q'' 漢'\n";
        assert_eq!(located(text, "f", "'"), "''");
        assert_eq!(located(text, "f", "Q"), "Q");
        assert_eq!(located(text, "f", "'Q'"), "''Q''");
        assert_eq!(located(text, "f", "漢"), "漢");
    }

    #[test]
    fn folded_lines_map_to_the_continuation_lines() {
        // A break is a space; an empty line is a `\n`; blanks around breaks disappear.
        let text = "a: \"N +   \n    Q\"\nb: 'x\n\n   Q'\nc: N *\n  Q\nd: \"x\\\n   Q\"\n";
        for key in ["a", "b", "c", "d"] {
            let node = parse(text).unwrap().get(key).unwrap().clone();
            let value = node.as_str().unwrap();
            let at = value.find('Q').unwrap();
            let range = node.origin().locate(text, value, at..at + 1);
            assert_eq!(&text[range.clone()], "Q", "{key}: {value:?}");
            assert_eq!(&text[range.start - 1..range.start], " ", "{key}");
        }
        // The folded space itself is the line break.
        assert_eq!(located(text, "a", " Q"), "\n    Q");
        assert_eq!(located(text, "b", "\n"), "\n");
    }

    #[test]
    fn block_scalars_map_past_their_indentation() {
        let text = "a: |\n  N +\n    Q\nb: >-\n\n  x\n  Q\nc: >\n  p\n\n  Q\n";
        assert_eq!(located(text, "a", "Q"), "Q");
        assert_eq!(located(text, "a", "  Q"), "  Q");
        assert_eq!(located(text, "b", "Q"), "Q");
        assert_eq!(located(text, "b", "x Q"), "x\n  Q");
        assert_eq!(located(text, "c", "Q"), "Q");
    }

    #[test]
    fn cr_and_crlf_line_breaks_fold_like_lf() {
        for eol in ["\r", "\r\n", "\n"] {
            let text = format!("a: \"N +{eol}  Q\"{eol}b: |{eol}  x{eol}  Q{eol}c: 1{eol}");
            assert_eq!(located(&text, "a", "Q"), "Q", "{eol:?}");
            assert_eq!(located(&text, "b", "Q"), "Q", "{eol:?}");
            let c = parse(&text).unwrap().get("c").unwrap().offset;
            assert_eq!(&text[c..c + 1], "1", "{eol:?}");
        }
    }

    #[test]
    fn a_value_this_reader_cannot_reproduce_falls_back_to_the_whole_scalar() {
        let text = "f: \"abc\"\n";
        let node = parse(text).unwrap().get("f").unwrap().clone();
        // Not the node's value: the map refuses it rather than guessing.
        let range = node.origin().locate(text, "xyz", 1..2);
        assert_eq!(&text[range], "\"abc\"");
    }

    #[test]
    fn aliased_nodes_have_the_anchored_offset_and_note_the_alias() {
        let text = "a: &x {b: &y \"N + Q\", d: {e: f}}\ng: *x\nh: *y\nm:\n  <<: *x\n";
        let root = parse(text).unwrap();
        let alias_g = text.find("*x").unwrap();
        let g = root.get("g").unwrap();
        assert_eq!(g.alias, Some(alias_g));
        assert_eq!(&text[g.offset..g.offset + 1], "{");
        let b = g.get("b").unwrap();
        assert_eq!(b.alias, Some(alias_g));
        assert_eq!(located(text, "h", "Q"), "Q");
        assert_eq!(text.find("Q").unwrap(), {
            let h = root.get("h").unwrap();
            let value = h.as_str().unwrap();
            h.origin().locate(text, value, 4..5).start
        });
        let e = g.get("d").unwrap().get("e").unwrap();
        assert_eq!(&text[e.offset..e.offset + 1], "f");
        // Merged keys come from the anchored mapping too, through the `*x` after `<<`.
        let merged = root.get("m").unwrap().get("b").unwrap();
        assert_eq!(merged.alias, Some(text.rfind("*x").unwrap()));
        assert_eq!(&text[merged.offset..merged.offset + 1], "\"");
        // Nodes not reached through an alias have none.
        assert_eq!(root.get("a").unwrap().get("b").unwrap().alias, None);
    }

    fn flow_nested(depth: usize) -> String {
        format!("a: {}1{}\n", "[".repeat(depth), "]".repeat(depth))
    }

    fn block_nested(depth: usize) -> String {
        (0..depth)
            .map(|i| format!("{}k{i}:\n", "  ".repeat(i)))
            .collect::<String>()
            + &"  ".repeat(depth)
            + "v: 1\n"
    }

    #[test]
    fn the_deepest_accepted_documents_parse_on_a_small_stack() {
        // Rust's default for spawned threads; the top-level mapping is one level.
        let parsed = std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(|| {
                (
                    parse(&flow_nested(MAX_DEPTH - 1)).is_ok(),
                    parse(&block_nested(MAX_DEPTH - 1)).is_ok(),
                )
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(parsed, (true, true));
    }

    #[test]
    fn nesting_beyond_the_readers_limits_is_too_deep_not_a_syntax_error() {
        for text in [
            flow_nested(MAX_DEPTH + 1),
            block_nested(MAX_DEPTH + 1),
            flow_nested(10_000),
            block_nested(2_000),
        ] {
            let err = parse(&text).unwrap_err();
            assert_eq!(err.kind, ErrorKind::TooDeep, "{err:?}");
            let shown = err.to_string();
            assert!(shown.contains("nested too deeply"), "{shown}");
            assert!(shown.contains("`max_depth`"), "{shown}");
            assert!(!shown.contains("syntax"), "{shown}");
        }
    }

    #[test]
    fn documents_beyond_the_readers_size_limits_are_too_large() {
        let budget = budget();
        let nodes = format!("a: [{}]\n", "1,".repeat(budget.max_nodes + 1));
        let aliases = format!(
            "a: &x 1\nb: [{}]\n",
            "*x,".repeat(budget.alias_anchor_min_aliases + 1)
        );
        for (text, limit) in [
            (nodes, "`max_nodes`"),
            (aliases, "`alias_anchor_ratio_multiplier`"),
        ] {
            let err = parse(&text).unwrap_err();
            assert_eq!(err.kind, ErrorKind::TooLarge, "{err:?}");
            let shown = err.to_string();
            assert!(shown.starts_with("the manifest is too large"), "{shown}");
            assert!(shown.contains(limit), "{shown}");
        }
    }

    #[test]
    fn syntax_error_offsets_count_cr_only_lines() {
        let text = "a: 1\rb: [1, 2\rc: 3\r";
        let err = parse(text).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Syntax);
        assert!(err.line >= 2, "{err:?}");
        assert_eq!(err.offset, offset_of_line_col(text, err.line, err.column));
        assert_eq!(offset_of_line_col("a\rbc\r\nd", 2, 2), 3);
        assert_eq!(offset_of_line_col("a\rbc\r\nd", 3, 1), 6);
        assert_eq!(offset_of_line_col("a", 9, 1), 1);
        assert_eq!(offset_of_line_col("é漢x", 1, 3), 5);
    }
}
