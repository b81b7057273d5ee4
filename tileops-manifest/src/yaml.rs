//! A YAML document as a tree of nodes that remember where they are in the file.
//!
//! serde-saphyr does the YAML parsing; wrapping every node in `Spanned` keeps each node's byte offset,
//! which is what lets every later error point into the manifest.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

/// A YAML node and its position.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// The value.
    pub kind: Kind,
    /// Byte offset of the node in the file (of the opening quote, for a quoted scalar).
    pub offset: usize,
    /// Byte length of the node's text, when serde-saphyr knows it (0 for collections).
    pub len: usize,
}

/// The value of a YAML node.
#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
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
    pub fn content_offset(&self, text: &str) -> usize {
        match text.as_bytes().get(self.offset) {
            Some(b'"' | b'\'') => self.offset + 1,
            _ => self.offset,
        }
    }
}

/// A YAML syntax error: where, and what.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// 1-based line, or 0 when unknown.
    pub line: usize,
    /// 1-based column, or 0 when unknown.
    pub column: usize,
    /// The parser's message, first line only.
    pub message: String,
}

/// Parse a whole YAML document.
///
/// Booleans follow YAML 1.2's core schema (`true`/`false` only): a dim named `N` or a tensor named
/// `y` stays a string, as in TileOPs's files, rather than YAML 1.1's "no" and "yes".
pub fn parse(text: &str) -> Result<Node, SyntaxError> {
    let options = serde_saphyr::options! {
        strict_booleans: true,
        // `default: .inf` is a float param default in TileOPs files.
        non_finite_float_policy: serde_saphyr::NonFiniteFloatPolicy::PassThrough,
    };
    match serde_saphyr::from_str_with_options::<Spanned<Raw>>(text, options) {
        Ok(root) => Ok(root.into_node()),
        Err(err) => {
            let (line, column) = err
                .location()
                .map_or((0, 0), |l| (l.line() as usize, l.column() as usize));
            // serde-saphyr appends a rendered snippet; the macro renders its own.
            let full = err.to_string();
            let first = full.lines().next().unwrap_or_default();
            let message = first
                .strip_prefix("error: ")
                .unwrap_or(first)
                .split_once(": ")
                .filter(|(head, _)| head.starts_with("line "))
                .map_or(first, |(_, tail)| tail)
                .to_owned();
            Err(SyntaxError {
                line,
                column,
                message,
            })
        }
    }
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
        let span = self.referenced.span();
        let offset = span.byte_offset().unwrap_or(0) as usize;
        let len = span.byte_len().unwrap_or(0) as usize;
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
        Node { kind, offset, len }
    }
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
}
