//! Tokens of a formula, as Python's tokenizer would cut them.
//!
//! The lexer never fails as a whole: it stops at the first bad character and ends the token list
//! with a [`Tok::Error`], so the parser reports whichever problem comes first in the formula —
//! a syntax error before the bad character wins over the lexical one.
//!
//! Newlines are plain whitespace (a formula is one expression, whatever YAML folding did to it),
//! `#` starts a comment to the end of the line, and `\` + newline continues a line.

use super::ast::Span;

/// One token and its byte span.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    pub tok: Tok,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// An identifier that is not a keyword.
    Name(String),
    Kw(Kw),
    Int(i128),
    Float(f64),
    /// A string literal's value (escapes resolved).
    Str(String),
    /// An operator or delimiter, spelled as in Python (`"**"`, `"("`, `":="`, …).
    Op(&'static str),
    /// The end of the formula; always the last token unless an error came first.
    Eof,
    /// A lexical error; always the last token. The message names the problem.
    Error(String),
}

/// Python's keywords (soft keywords such as `match` are plain names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kw {
    False,
    None,
    True,
    And,
    As,
    Assert,
    Async,
    Await,
    Break,
    Class,
    Continue,
    Def,
    Del,
    Elif,
    Else,
    Except,
    Finally,
    For,
    From,
    Global,
    If,
    Import,
    In,
    Is,
    Lambda,
    Nonlocal,
    Not,
    Or,
    Pass,
    Raise,
    Return,
    Try,
    While,
    With,
    Yield,
}

const KEYWORDS: &[(&str, Kw)] = &[
    ("False", Kw::False),
    ("None", Kw::None),
    ("True", Kw::True),
    ("and", Kw::And),
    ("as", Kw::As),
    ("assert", Kw::Assert),
    ("async", Kw::Async),
    ("await", Kw::Await),
    ("break", Kw::Break),
    ("class", Kw::Class),
    ("continue", Kw::Continue),
    ("def", Kw::Def),
    ("del", Kw::Del),
    ("elif", Kw::Elif),
    ("else", Kw::Else),
    ("except", Kw::Except),
    ("finally", Kw::Finally),
    ("for", Kw::For),
    ("from", Kw::From),
    ("global", Kw::Global),
    ("if", Kw::If),
    ("import", Kw::Import),
    ("in", Kw::In),
    ("is", Kw::Is),
    ("lambda", Kw::Lambda),
    ("nonlocal", Kw::Nonlocal),
    ("not", Kw::Not),
    ("or", Kw::Or),
    ("pass", Kw::Pass),
    ("raise", Kw::Raise),
    ("return", Kw::Return),
    ("try", Kw::Try),
    ("while", Kw::While),
    ("with", Kw::With),
    ("yield", Kw::Yield),
];

impl Kw {
    pub fn as_str(self) -> &'static str {
        KEYWORDS
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(s, _)| s)
    }
}

/// Operators and delimiters, longest first so that the first match is the longest one.
const OPS: &[&str] = &[
    "**=", "//=", ">>=", "<<=", "...", "->", ":=", "**", "//", "<<", ">>", "<=", ">=", "==", "!=",
    "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "@=", "+", "-", "*", "/", "%", "@", "<", ">",
    "=", "&", "|", "^", "~", "(", ")", "[", "]", "{", "}", ",", ":", ".", ";",
];

impl Tok {
    /// How an error message names this token ("`)`", "name `x`", "end of formula").
    pub fn describe(&self) -> String {
        match self {
            Tok::Name(n) => format!("name `{n}`"),
            Tok::Kw(k) => format!("keyword `{}`", k.as_str()),
            Tok::Int(_) | Tok::Float(_) => "a number".to_string(),
            Tok::Str(_) => "a string".to_string(),
            Tok::Op(o) => format!("`{o}`"),
            Tok::Eof => "the end of the formula".to_string(),
            Tok::Error(m) => m.clone(),
        }
    }
}

/// Cuts `src` into tokens. The result ends with [`Tok::Eof`] or, at the first lexical error,
/// with one [`Tok::Error`].
pub fn lex(src: &str) -> Vec<Token> {
    let mut lexer = Lexer {
        src,
        bytes: src.as_bytes(),
        pos: 0,
        out: Vec::new(),
    };
    lexer.run();
    lexer.out
}

struct Lexer<'a> {
    src: &'a str,
    bytes: &'a [u8],
    pos: usize,
    out: Vec<Token>,
}

type LexResult<T> = Result<T, (String, Span)>;

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_continue(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.bytes.get(self.pos + ahead).copied()
    }

    /// The (possibly multi-byte) character at byte `at`, which is always a char boundary.
    fn char_at(&self, at: usize) -> Option<char> {
        self.src.get(at..).and_then(|s| s.chars().next())
    }

    fn push(&mut self, tok: Tok, start: usize) {
        self.out.push(Token {
            tok,
            span: start..self.pos,
        });
    }

    fn run(&mut self) {
        loop {
            match self.next_token() {
                Ok(true) => {}
                Ok(false) => {
                    let end = self.src.len();
                    self.out.push(Token {
                        tok: Tok::Eof,
                        span: end..end,
                    });
                    return;
                }
                Err((message, span)) => {
                    self.out.push(Token {
                        tok: Tok::Error(message),
                        span,
                    });
                    return;
                }
            }
        }
    }

    fn skip_trivia(&mut self) {
        while let Some(b) = self.peek(0) {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | b'\x0c' => self.pos += 1,
                b'#' => {
                    while let Some(b) = self.peek(0) {
                        if b == b'\n' {
                            break;
                        }
                        // Comments may hold any text: step over whole characters.
                        self.pos += self.char_at(self.pos).map_or(1, char::len_utf8);
                    }
                }
                b'\\' if matches!(self.peek(1), Some(b'\n')) => self.pos += 2,
                b'\\' if self.peek(1) == Some(b'\r') && self.peek(2) == Some(b'\n') => {
                    self.pos += 3
                }
                _ => return,
            }
        }
    }

    /// Lexes one token; `Ok(false)` at the end of the input.
    fn next_token(&mut self) -> LexResult<bool> {
        self.skip_trivia();
        let start = self.pos;
        let Some(b) = self.peek(0) else {
            return Ok(false);
        };
        if is_ident_start(b) {
            while self.peek(0).is_some_and(is_ident_continue) {
                self.pos += 1;
            }
            let word = &self.src[start..self.pos];
            if matches!(self.peek(0), Some(b'\'' | b'"')) && is_string_prefix(word) {
                return self.string(start, word).map(|()| true);
            }
            if let Some(c) = self.char_at(self.pos)
                && !c.is_ascii()
                && c.is_alphanumeric()
            {
                let end = self.pos + c.len_utf8();
                return Err((
                    format!("non-ASCII identifiers are not supported (found `{c}` in a name)"),
                    start..end,
                ));
            }
            let tok = match KEYWORDS.iter().find(|(s, _)| *s == word) {
                Some((_, kw)) => Tok::Kw(*kw),
                None => Tok::Name(word.to_string()),
            };
            self.push(tok, start);
            return Ok(true);
        }
        if b.is_ascii_digit() || (b == b'.' && self.peek(1).is_some_and(|d| d.is_ascii_digit())) {
            let tok = self.number(start)?;
            self.push(tok, start);
            return Ok(true);
        }
        if b == b'\'' || b == b'"' {
            return self.string(start, "").map(|()| true);
        }
        let rest = &self.src[start..];
        if let Some(op) = OPS.iter().find(|op| rest.starts_with(**op)) {
            self.pos += op.len();
            self.push(Tok::Op(op), start);
            return Ok(true);
        }
        let c = self.char_at(start).unwrap_or('\u{fffd}');
        let span = start..start + c.len_utf8();
        let message = match c {
            '!' => "unexpected character `!`: Python has no `!` operator; use `not` to negate \
                    or `!=` to compare"
                .to_string(),
            '\\' => "unexpected character `\\` outside a string".to_string(),
            c if c.is_ascii_graphic() => format!("unexpected character `{c}`"),
            c if c.is_alphanumeric() => {
                format!("non-ASCII identifiers are not supported (found `{c}`)")
            }
            c => format!("unexpected character {:?} (U+{:04X})", c, c as u32),
        };
        Err((message, span))
    }

    /// Consumes `digit (['_'] digit)*` for the given radix; false if no digit was there.
    fn digits(&mut self, radix: u32) -> bool {
        let is_digit = |b: u8| (b as char).is_digit(radix);
        if !self.peek(0).is_some_and(is_digit) {
            return false;
        }
        self.pos += 1;
        loop {
            match self.peek(0) {
                Some(b) if is_digit(b) => self.pos += 1,
                Some(b'_') if self.peek(1).is_some_and(is_digit) => self.pos += 2,
                _ => return true,
            }
        }
    }

    fn number(&mut self, start: usize) -> LexResult<Tok> {
        let radix = match (self.peek(0), self.peek(1)) {
            (Some(b'0'), Some(b'x' | b'X')) => Some((16, "hexadecimal")),
            (Some(b'0'), Some(b'o' | b'O')) => Some((8, "octal")),
            (Some(b'0'), Some(b'b' | b'B')) => Some((2, "binary")),
            _ => None,
        };
        if let Some((radix, what)) = radix {
            self.pos += 2;
            // Python allows one `_` right after the prefix: `0x_ff`.
            if self.peek(0) == Some(b'_') {
                self.pos += 1;
            }
            let ok = self.digits(radix);
            let digits: String = self.src[start + 2..self.pos]
                .chars()
                .filter(|c| *c != '_')
                .collect();
            if !ok
                || self
                    .peek(0)
                    .is_some_and(|b| is_ident_continue(b) || b == b'.')
            {
                return Err(self.bad_literal(start, &format!("invalid {what} literal")));
            }
            return i128::from_str_radix(&digits, radix)
                .map(Tok::Int)
                .map_err(|_| too_large(start..self.pos));
        }

        let mut is_float = false;
        if self.peek(0) != Some(b'.') {
            self.digits(10);
        }
        let int_end = self.pos;
        if self.peek(0) == Some(b'.') {
            is_float = true;
            self.pos += 1;
            self.digits(10);
        }
        if matches!(self.peek(0), Some(b'e' | b'E')) {
            let sign = usize::from(matches!(self.peek(1), Some(b'+' | b'-')));
            if self.peek(1 + sign).is_some_and(|b| b.is_ascii_digit()) {
                is_float = true;
                self.pos += 1 + sign;
                self.digits(10);
            }
        }
        if let Some(b) = self.peek(0) {
            if b == b'j' || b == b'J' {
                self.pos += 1;
                return Err((
                    "imaginary (complex) literals are not supported".to_string(),
                    start..self.pos,
                ));
            }
            if is_ident_continue(b) {
                return Err(self.bad_literal(start, "invalid decimal literal"));
            }
        }
        let text: String = self.src[start..self.pos]
            .chars()
            .filter(|c| *c != '_')
            .collect();
        if is_float {
            return text
                .parse::<f64>()
                .map(Tok::Float)
                .map_err(|_| ("invalid float literal".to_string(), start..self.pos));
        }
        let int_text = &self.src[start..int_end];
        if int_text.len() > 1
            && int_text.starts_with('0')
            && int_text.bytes().any(|b| b != b'0' && b != b'_')
        {
            return Err((
                "leading zeros in decimal integer literals are not permitted; use an 0o prefix \
                 for octal integers"
                    .to_string(),
                start..self.pos,
            ));
        }
        text.parse::<i128>()
            .map(Tok::Int)
            .map_err(|_| too_large(start..self.pos))
    }

    /// An error for a malformed number, spanning it and any identifier characters glued to it.
    fn bad_literal(&mut self, start: usize, message: &str) -> (String, Span) {
        while self.peek(0).is_some_and(is_ident_continue) {
            self.pos += 1;
        }
        (message.to_string(), start..self.pos)
    }

    /// Lexes a string literal whose prefix (possibly empty) started at `start`; `self.pos` is on
    /// the opening quote.
    fn string(&mut self, start: usize, prefix: &str) -> LexResult<()> {
        let prefix = prefix.to_ascii_lowercase();
        let raw = prefix.contains('r');
        let quote = self.bytes[self.pos];
        let triple = self.peek(1) == Some(quote) && self.peek(2) == Some(quote);
        self.pos += if triple { 3 } else { 1 };
        let mut value = String::new();
        loop {
            let Some(c) = self.char_at(self.pos) else {
                let what = if triple {
                    "unterminated triple-quoted string literal"
                } else {
                    "unterminated string literal"
                };
                return Err((what.to_string(), start..self.pos));
            };
            if c as u32 == u32::from(quote) {
                if !triple {
                    self.pos += 1;
                    break;
                }
                if self.peek(1) == Some(quote) && self.peek(2) == Some(quote) {
                    self.pos += 3;
                    break;
                }
            }
            if c == '\n' && !triple {
                return Err(("unterminated string literal".to_string(), start..self.pos));
            }
            if c == '\\' {
                let esc_start = self.pos;
                self.pos += 1;
                let Some(next) = self.char_at(self.pos) else {
                    continue;
                };
                if raw {
                    value.push('\\');
                    value.push(next);
                    self.pos += next.len_utf8();
                } else {
                    self.escape(esc_start, &mut value)?;
                }
                continue;
            }
            value.push(c);
            self.pos += c.len_utf8();
        }
        let span = start..self.pos;
        if prefix.contains('f') {
            return Err(("f-strings are not supported in formulas".to_string(), span));
        }
        if prefix.contains('t') {
            return Err(("t-strings are not supported in formulas".to_string(), span));
        }
        if prefix.contains('b') {
            return Err((
                "bytes literals are not supported in formulas".to_string(),
                span,
            ));
        }
        self.out.push(Token {
            tok: Tok::Str(value),
            span,
        });
        Ok(())
    }

    /// Resolves the escape whose backslash is at `esc_start`; `self.pos` is just after it.
    fn escape(&mut self, esc_start: usize, value: &mut String) -> LexResult<()> {
        let Some(c) = self.char_at(self.pos) else {
            return Ok(());
        };
        self.pos += c.len_utf8();
        let simple = match c {
            '\n' => Some(None),
            '\\' => Some(Some('\\')),
            '\'' => Some(Some('\'')),
            '"' => Some(Some('"')),
            'a' => Some(Some('\x07')),
            'b' => Some(Some('\x08')),
            'f' => Some(Some('\x0c')),
            'n' => Some(Some('\n')),
            'r' => Some(Some('\r')),
            't' => Some(Some('\t')),
            'v' => Some(Some('\x0b')),
            _ => None,
        };
        if let Some(ch) = simple {
            value.extend(ch);
            return Ok(());
        }
        let hex = |lexer: &mut Self, n: usize, what: &str| -> LexResult<u32> {
            let digits = lexer
                .src
                .get(lexer.pos..lexer.pos + n)
                .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()));
            match digits.and_then(|d| u32::from_str_radix(d, 16).ok()) {
                Some(v) => {
                    lexer.pos += n;
                    Ok(v)
                }
                None => Err((
                    format!("truncated `{what}` escape in a string literal"),
                    esc_start..lexer.pos,
                )),
            }
        };
        let code = match c {
            '0'..='7' => {
                let mut v = c as u32 - '0' as u32;
                for _ in 0..2 {
                    match self.peek(0) {
                        Some(d @ b'0'..=b'7') => {
                            v = v * 8 + u32::from(d - b'0');
                            self.pos += 1;
                        }
                        _ => break,
                    }
                }
                v
            }
            'x' => hex(self, 2, "\\xXX")?,
            'u' => hex(self, 4, "\\uXXXX")?,
            'U' => hex(self, 8, "\\UXXXXXXXX")?,
            'N' => {
                return Err((
                    "`\\N{...}` escapes are not supported in formulas".to_string(),
                    esc_start..self.pos,
                ));
            }
            other => {
                // Python keeps an unknown escape as written (with a warning).
                value.push('\\');
                value.push(other);
                return Ok(());
            }
        };
        match char::from_u32(code) {
            Some(ch) => {
                value.push(ch);
                Ok(())
            }
            None => Err((
                format!("escape `\\{c}` gives U+{code:04X}, which is not a valid character"),
                esc_start..self.pos,
            )),
        }
    }
}

fn too_large(span: Span) -> (String, Span) {
    (
        "integer literal too large (formulas use 128-bit integers)".to_string(),
        span,
    )
}

fn is_string_prefix(word: &str) -> bool {
    matches!(
        word.to_ascii_lowercase().as_str(),
        "r" | "u" | "f" | "b" | "t" | "rb" | "br" | "fr" | "rf" | "tr" | "rt"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(src: &str) -> Vec<Tok> {
        lex(src).into_iter().map(|t| t.tok).collect()
    }

    fn error(src: &str) -> (String, Span) {
        let last = lex(src).pop().expect("lex always returns a token");
        match last.tok {
            Tok::Error(m) => (m, last.span),
            other => panic!("expected an error for {src:?}, got {other:?}"),
        }
    }

    #[test]
    fn integers() {
        assert_eq!(toks("42"), [Tok::Int(42), Tok::Eof]);
        assert_eq!(toks("1_000"), [Tok::Int(1000), Tok::Eof]);
        assert_eq!(toks("0x_ff"), [Tok::Int(255), Tok::Eof]);
        assert_eq!(
            toks("0o17 0b101 0"),
            [Tok::Int(15), Tok::Int(5), Tok::Int(0), Tok::Eof]
        );
        assert_eq!(toks("000"), [Tok::Int(0), Tok::Eof]);
        assert_eq!(
            toks("170141183460469231731687303715884105727"),
            [Tok::Int(i128::MAX), Tok::Eof]
        );
    }

    #[test]
    fn floats() {
        assert_eq!(toks("1.0e-5"), [Tok::Float(1.0e-5), Tok::Eof]);
        assert_eq!(toks(".5"), [Tok::Float(0.5), Tok::Eof]);
        assert_eq!(toks("1."), [Tok::Float(1.0), Tok::Eof]);
        assert_eq!(toks("1e3"), [Tok::Float(1000.0), Tok::Eof]);
        assert_eq!(toks("1_0.2_5E+1"), [Tok::Float(102.5), Tok::Eof]);
        assert_eq!(toks("01.5"), [Tok::Float(1.5), Tok::Eof]);
        assert_eq!(toks("1e400"), [Tok::Float(f64::INFINITY), Tok::Eof]);
    }

    #[test]
    fn bad_numbers() {
        assert_eq!(error("1__0").1, 0..4);
        assert_eq!(error("1_").0, "invalid decimal literal");
        assert_eq!(error("0x").0, "invalid hexadecimal literal");
        assert_eq!(error("0b102").0, "invalid binary literal");
        assert!(error("012").0.starts_with("leading zeros"));
        assert!(error("3j").0.starts_with("imaginary"));
        assert!(error("1e").0.starts_with("invalid decimal literal"));
        assert!(
            error("999999999999999999999999999999999999999999")
                .0
                .starts_with("integer literal too large")
        );
    }

    #[test]
    fn strings_and_escapes() {
        assert_eq!(toks("'tanh'"), [Tok::Str("tanh".into()), Tok::Eof]);
        assert_eq!(toks(r#""a\"b""#), [Tok::Str("a\"b".into()), Tok::Eof]);
        assert_eq!(
            toks(r"'\n\t\\\x41\u00e9\101\q'"),
            [Tok::Str("\n\t\\AéA\\q".into()), Tok::Eof]
        );
        assert_eq!(toks(r"r'\n'"), [Tok::Str("\\n".into()), Tok::Eof]);
        assert_eq!(toks("'''a\nb'''"), [Tok::Str("a\nb".into()), Tok::Eof]);
        assert_eq!(toks("u'é'"), [Tok::Str("é".into()), Tok::Eof]);
    }

    #[test]
    fn bad_strings() {
        assert_eq!(error("'abc"), ("unterminated string literal".into(), 0..4));
        assert_eq!(error("'a\nb'").0, "unterminated string literal");
        assert_eq!(error(r"'\x4'").1, 1..3);
        assert_eq!(
            error(r"'\ud800'").0,
            "escape `\\u` gives U+D800, which is not a valid character"
        );
        assert_eq!(
            error("f'{x}'"),
            ("f-strings are not supported in formulas".into(), 0..6)
        );
        assert_eq!(
            error("Rb'x'").0,
            "bytes literals are not supported in formulas"
        );
        assert!(error(r"'\N{DASH}'").0.contains("\\N{...}"));
    }

    #[test]
    fn operators_longest_match() {
        assert_eq!(
            toks("a**-b//c<=d!=e:=f"),
            [
                Tok::Name("a".into()),
                Tok::Op("**"),
                Tok::Op("-"),
                Tok::Name("b".into()),
                Tok::Op("//"),
                Tok::Name("c".into()),
                Tok::Op("<="),
                Tok::Name("d".into()),
                Tok::Op("!="),
                Tok::Name("e".into()),
                Tok::Op(":="),
                Tok::Name("f".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn keywords_and_trivia() {
        assert_eq!(
            toks("x is not None # comment ü\n and \\\n y"),
            [
                Tok::Name("x".into()),
                Tok::Kw(Kw::Is),
                Tok::Kw(Kw::Not),
                Tok::Kw(Kw::None),
                Tok::Kw(Kw::And),
                Tok::Name("y".into()),
                Tok::Eof
            ]
        );
    }

    #[test]
    fn bad_characters_are_utf8_safe() {
        assert_eq!(error("a $ b"), ("unexpected character `$`".into(), 2..3));
        assert_eq!(error("a ! b").1, 2..3);
        assert_eq!(error("x + é").1, 4..6);
        assert_eq!(error("naïve").1, 0..4);
        assert_eq!(error("1 + \u{200b}").1, 4..7);
    }

    #[test]
    fn spans() {
        let spans: Vec<Span> = lex(" ab  + 'c' ").into_iter().map(|t| t.span).collect();
        assert_eq!(spans, [1..3, 5..6, 7..10, 11..11]);
    }
}
