//! Which manifest names may become Rust code.
//!
//! Input, param, dim and `vars` names become Rust identifiers in the generated `eval_roofline`
//! (`py_<name>` locals, and struct fields for inputs and params), so a name that is not one would
//! reach `quote`'s identifier constructor and panic the macro. The rule is checked here, before
//! any code is generated, and every name that breaks it is a located error.

/// Python's hard keywords: valid as YAML keys, never as names a formula can read.
pub const PYTHON_KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

/// Rust keywords that are not allowed even as raw identifiers (`r#self` is not a thing), plus `_`:
/// no struct can have a field of these names.
const NOT_A_RUST_FIELD: &[&str] = &["self", "Self", "super", "crate", "_"];

/// The rule a name breaks, worded to follow "`NAME` ", or `None` when the name is fine.
///
/// `field` is true for names that also become a struct field (inputs and params).
///
/// ```
/// use tileops_manifest::manifest::names::name_problem;
/// assert_eq!(name_problem("x_1", true), None);
/// assert_eq!(name_problem("type", true), None); // bound to the raw field `r#type`
/// assert!(name_problem("x-y", true).unwrap().contains("not an identifier"));
/// assert!(name_problem("1x", false).is_some());
/// assert!(name_problem("", false).is_some());
/// assert!(name_problem("lambda", false).unwrap().contains("Python keyword"));
/// assert!(name_problem("self", true).unwrap().contains("Rust field"));
/// assert_eq!(name_problem("self", false), None);
/// ```
pub fn name_problem(name: &str, field: bool) -> Option<&'static str> {
    if !is_identifier(name) {
        return Some(
            "is not an identifier: names are ASCII, a letter or `_` first, then letters, digits or `_`",
        );
    }
    if PYTHON_KEYWORDS.contains(&name) {
        return Some("is a Python keyword, which no formula can name");
    }
    if field && NOT_A_RUST_FIELD.contains(&name) {
        return Some("cannot be a Rust field name, so no op struct could carry it");
    }
    None
}

/// An ASCII identifier: a letter or `_`, then letters, digits or `_` (Python's rule, restricted to
/// ASCII so that every such name is also a Rust identifier after a `py_` prefix).
pub fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_are_ascii_python_identifiers() {
        for good in ["a", "_", "_x", "M", "seq_len", "x1", "type", "match"] {
            assert!(is_identifier(good), "{good}");
        }
        for bad in ["", "1x", "x-y", "N M", "N-1", "é", "x.y", " x", "x "] {
            assert!(!is_identifier(bad), "{bad:?}");
        }
    }

    #[test]
    fn keywords_and_impossible_fields_are_named() {
        assert!(name_problem("None", false).is_some());
        assert!(name_problem("Self", true).is_some());
        assert!(name_problem("_", true).is_some());
        assert_eq!(name_problem("_", false), None);
        assert_eq!(
            name_problem("fn", true),
            None,
            "a raw identifier `r#fn` can carry it"
        );
    }
}
