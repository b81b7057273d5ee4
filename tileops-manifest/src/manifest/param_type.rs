//! A param's `type:`, checked against the type grammar TileOPs's validator parses.
//!
//! TileOPs reads `type` as a Python type expression (`ast.parse(..., mode="eval")`): names, dotted
//! names whose qualifier it drops (`torch.dtype` is `dtype`), unions with `|`, subscripts
//! (`list[int]`, `tuple[int, ...]`, `Optional[X]`, `Union[X, Y]`) and `None`. Every type its
//! manifests use is one of [`KNOWN_TYPES`]; a name outside that table is almost always a typo
//! (`flaot`), so it is an error with a suggestion.

use std::ops::Range;

/// The type names a param `type:` may use (after its module qualifier, if any, is dropped).
pub const KNOWN_TYPES: &[&str] = &[
    "int", "float", "bool", "str", "complex", "None", "list", "tuple", "dict", "set", "Sequence",
    "Optional", "Union", "Literal", "Any", "Number", "dtype", "Tensor", "tensor",
];

/// One problem in a type expression: the byte range in the expression, and the message.
pub type TypeError = (Range<usize>, String);

/// Every problem of the type expression `text` (empty when it is a valid, known type).
///
/// ```
/// use tileops_manifest::manifest::param_type::check;
/// assert!(check("int | list[int] | tuple[int, ...] | None").is_empty());
/// assert!(check("torch.dtype").is_empty());
/// let errors = check("flaot | None");
/// assert_eq!(errors[0].0, 0..5);
/// assert!(errors[0].1.contains("did you mean `float`?"), "{}", errors[0].1);
/// assert!(!check("int |").is_empty());
/// ```
pub fn check(text: &str) -> Vec<TypeError> {
    let tokens = match lex(text) {
        Ok(tokens) => tokens,
        Err(e) => return vec![e],
    };
    let mut parser = Parser {
        tokens,
        at: 0,
        end: text.len(),
        errors: Vec::new(),
    };
    if parser.union(0).is_ok()
        && let Some(tok) = parser.tokens.get(parser.at)
    {
        let span = tok.span.clone();
        parser.errors.push((
            span.clone(),
            format!("unexpected `{}` after a complete type", &text[span]),
        ));
    }
    parser.errors
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Str,
    Punct(&'static str),
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    span: Range<usize>,
}

fn lex(text: &str) -> Result<Vec<Token>, TypeError> {
    let mut tokens = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some(&(start, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c.is_ascii_alphabetic() || c == '_' {
            let mut end = start;
            while let Some(&(i, c)) = chars.peek() {
                if !(c.is_ascii_alphanumeric() || c == '_') {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            tokens.push(Token {
                tok: Tok::Name(text[start..end].to_owned()),
                span: start..end,
            });
        } else if c == '\'' || c == '"' {
            // A string literal, as in `Literal['mean', 'sum']`.
            chars.next();
            let mut end = None;
            for (i, d) in chars.by_ref() {
                if d == c {
                    end = Some(i + 1);
                    break;
                }
            }
            let Some(end) = end else {
                return Err((start..text.len(), "unterminated string".to_owned()));
            };
            tokens.push(Token {
                tok: Tok::Str,
                span: start..end,
            });
        } else if text[start..].starts_with("...") {
            for _ in 0..3 {
                chars.next();
            }
            tokens.push(Token {
                tok: Tok::Punct("..."),
                span: start..start + 3,
            });
        } else {
            let punct = match c {
                '|' => "|",
                '[' => "[",
                ']' => "]",
                ',' => ",",
                '.' => ".",
                _ => {
                    return Err((
                        start..start + c.len_utf8(),
                        format!("`{c}` has no place in a type expression"),
                    ));
                }
            };
            chars.next();
            tokens.push(Token {
                tok: Tok::Punct(punct),
                span: start..start + 1,
            });
        }
    }
    Ok(tokens)
}

/// Subscripts nest at most this deep: real types nest two or three levels, and the bound keeps the
/// recursive parser's stack small on any input.
const MAX_NESTING: usize = 16;

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    end: usize,
    errors: Vec<TypeError>,
}

/// The parse stopped at an error (already recorded).
struct Stop;

impl Parser {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at).map(|t| &t.tok)
    }

    fn here(&self) -> Range<usize> {
        self.tokens
            .get(self.at)
            .map_or(self.end..self.end, |t| t.span.clone())
    }

    fn fail(&mut self, message: String) -> Stop {
        let span = self.here();
        self.errors.push((span, message));
        Stop
    }

    fn eat(&mut self, punct: &str) -> bool {
        let matches = matches!(self.peek(), Some(Tok::Punct(p)) if *p == punct);
        if matches {
            self.at += 1;
        }
        matches
    }

    /// `term ('|' term)*`
    fn union(&mut self, depth: usize) -> Result<(), Stop> {
        self.term(depth)?;
        while self.eat("|") {
            self.term(depth)?;
        }
        Ok(())
    }

    /// A (dotted) name with an optional subscript, or a string literal.
    fn term(&mut self, depth: usize) -> Result<(), Stop> {
        match self.peek().cloned() {
            Some(Tok::Str) => {
                self.at += 1;
                Ok(())
            }
            Some(Tok::Name(first)) => {
                let mut span = self.here();
                let mut last = first;
                self.at += 1;
                while self.eat(".") {
                    match self.peek().cloned() {
                        Some(Tok::Name(next)) => {
                            span = self.here();
                            last = next;
                            self.at += 1;
                        }
                        _ => return Err(self.fail("expected a name after `.`".to_owned())),
                    }
                }
                self.known(&last, span);
                if self.eat("[") {
                    if depth >= MAX_NESTING {
                        return Err(self.fail(format!(
                            "the type nests more than {MAX_NESTING} subscripts deep"
                        )));
                    }
                    self.arguments(depth + 1)?;
                }
                Ok(())
            }
            Some(_) => {
                let span = self.here();
                Err(self.fail(format!(
                    "expected a type name, found `{}`",
                    self.token_text(span)
                )))
            }
            None => Err(self.fail("expected a type name at the end".to_owned())),
        }
    }

    fn token_text(&self, span: Range<usize>) -> String {
        // Only punctuation reaches here, whose text is its name.
        match self.tokens.iter().find(|t| t.span == span).map(|t| &t.tok) {
            Some(Tok::Punct(p)) => (*p).to_owned(),
            _ => "?".to_owned(),
        }
    }

    /// The inside of `X[...]`: types, `...`, separated by commas, then `]`.
    fn arguments(&mut self, depth: usize) -> Result<(), Stop> {
        loop {
            if self.eat("...") {
            } else {
                self.union(depth)?;
            }
            if self.eat("]") {
                return Ok(());
            }
            if !self.eat(",") {
                return Err(self.fail("expected `,` or `]` in a subscript".to_owned()));
            }
            if self.eat("]") {
                return Ok(());
            }
        }
    }

    fn known(&mut self, name: &str, span: Range<usize>) {
        if KNOWN_TYPES.contains(&name) {
            return;
        }
        // One edit or transposition away (`itn`, `flaot`), or close by Jaro-Winkler (`boool`).
        let lower = name.to_lowercase();
        let best = KNOWN_TYPES
            .iter()
            .map(|k| {
                let k_lower = k.to_lowercase();
                let edits = strsim::damerau_levenshtein(&lower, &k_lower);
                (edits, -strsim::jaro_winkler(&lower, &k_lower), *k)
            })
            .filter(|(edits, jw, _)| *edits <= 1 || -*jw >= 0.85)
            .min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let hint = match best {
            Some((_, _, k)) => format!("did you mean `{k}`?"),
            None => format!("known types: {}", KNOWN_TYPES.join(", ")),
        };
        self.errors
            .push((span, format!("unknown type `{name}`; {hint}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_type_tileops_manifests_use_is_accepted() {
        for t in [
            "int",
            "float",
            "bool",
            "str",
            "int | None",
            "float | None",
            "int | float",
            "Number | None",
            "dtype | None",
            "torch.dtype",
            "torch.Tensor | None",
            "tensor | None",
            "dict | None",
            "str | None",
            "int | tuple[int]",
            "int | tuple[int, int, int] | str",
            "int | list[int] | tuple[int, ...] | None",
            "list[int] | tuple[int, ...]",
            "int | None | tuple[int | None, int | None] | list[int | None]",
            "Optional[int]",
            "Union[int, float]",
            "Literal['mean', 'sum']",
        ] {
            assert_eq!(check(t), Vec::new(), "{t}");
        }
    }

    #[test]
    fn unknown_names_are_located_with_a_suggestion() {
        let errors = check("int | list[itn]");
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].0, 11..14);
        assert!(errors[0].1.contains("did you mean `int`?"), "{errors:?}");
        let errors = check("flaot | boool");
        assert_eq!(errors.len(), 2, "both names are reported: {errors:?}");
        let errors = check("zzzzqq");
        assert!(errors[0].1.contains("known types: int"), "{errors:?}");
        let errors = check("mod.flaot");
        assert_eq!(
            errors[0].0,
            4..9,
            "the name after the qualifier: {errors:?}"
        );
    }

    #[test]
    fn malformed_types_are_errors() {
        for bad in [
            "",
            "int |",
            "| int",
            "list[int",
            "list[]",
            "int int",
            "int[",
            "a.",
            "int + 1",
            "'x",
            "tuple[int,, int]",
        ] {
            assert!(!check(bad).is_empty(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn deep_nesting_is_bounded_not_a_stack_overflow() {
        let deep = "list[".repeat(100_000) + &"]".repeat(100_000);
        let errors = check(&deep);
        assert!(errors[0].1.contains("nests more than"), "{errors:?}");
    }
}
