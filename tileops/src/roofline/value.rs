//! The formula value: Python's int, float, bool, None, str, tuple, list, set, range and type.

use std::fmt::{self, Write as _};

use super::error::{EvalError, EvalResult};

/// A builtin type name usable as a value, as in `isinstance(d, (int, float))`.
///
/// ```
/// use tileops::roofline::{PyType, Value};
/// assert!(PyType::Int.is_instance(&Value::Bool(true))); // bool is an int
/// assert!(!PyType::Bool.is_instance(&Value::Int(1)));
/// assert_eq!(PyType::NoneType.to_string(), "<class 'NoneType'>");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PyType {
    /// `int` (which `bool` values are instances of too).
    Int,
    /// `float`.
    Float,
    /// `bool`.
    Bool,
    /// `str`.
    Str,
    /// `tuple`.
    Tuple,
    /// `list`.
    List,
    /// `set`.
    Set,
    /// `type(None)`.
    NoneType,
    /// `range`.
    Range,
}

impl PyType {
    /// Python's name of the type (`"int"`, `"NoneType"`).
    pub const fn name(self) -> &'static str {
        match self {
            PyType::Int => "int",
            PyType::Float => "float",
            PyType::Bool => "bool",
            PyType::Str => "str",
            PyType::Tuple => "tuple",
            PyType::List => "list",
            PyType::Set => "set",
            PyType::NoneType => "NoneType",
            PyType::Range => "range",
        }
    }

    /// `isinstance(value, self)`: `bool` is a subclass of `int`, nothing else is a subclass.
    pub fn is_instance(self, value: &Value) -> bool {
        matches!(
            (self, value),
            (PyType::Int, Value::Int(_) | Value::Bool(_))
                | (PyType::Float, Value::Float(_))
                | (PyType::Bool, Value::Bool(_))
                | (PyType::Str, Value::Str(_))
                | (PyType::Tuple, Value::Tuple(_))
                | (PyType::List, Value::List(_))
                | (PyType::Set, Value::Set(_))
                | (PyType::NoneType, Value::None)
                | (PyType::Range, Value::Range { .. })
        )
    }
}

impl fmt::Display for PyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<class '{}'>", self.name())
    }
}

/// A value of the formula language, with Python's semantics.
///
/// Display prints Python's `repr`: `(2048, 4096)`, `[1, 2]`, `{0, 2}`, `None`, `True`, `1.0`,
/// `'tanh'`. The derived `PartialEq` is structural (`Int(1) != Float(1.0)`, `NaN != NaN`); Python's
/// `==` is [`__rt::compare`](crate::roofline::__rt::compare) with `CmpOp::Eq`.
///
/// ```
/// use tileops::roofline::Value;
/// assert_eq!(Value::from(vec![2048_usize, 4096]).to_string(), "[2048, 4096]");
/// assert_eq!(Value::from_shape(&[2048, 4096]).to_string(), "(2048, 4096)");
/// assert_eq!(Value::from(Some("tanh")).to_string(), "'tanh'");
/// assert_eq!(Value::from(None::<i64>).to_string(), "None");
/// assert_eq!(Value::from(1.0).to_string(), "1.0");
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Value {
    /// `None`.
    #[default]
    None,
    /// `True` / `False`; an int in arithmetic.
    Bool(bool),
    /// An int; every operation on it is overflow-checked.
    Int(i128),
    /// A float (IEEE double, like Python's).
    Float(f64),
    /// A str.
    Str(String),
    /// A tuple; shapes are tuples of ints.
    Tuple(Vec<Value>),
    /// A list.
    List(Vec<Value>),
    /// A set: deduplicated by Python equality, in set order (numbers ascending, then `None`,
    /// strs, tuples, ranges and types, each sorted, then NaN-like items as inserted), which makes
    /// `in` a binary search. Build one with [`__rt::make_set`](crate::roofline::__rt::make_set);
    /// a struct field converted by `__rt::param` is put in set order.
    Set(Vec<Value>),
    /// `range(start, stop, step)`; `step` is never 0 in values the runtime builds.
    Range {
        /// First value.
        start: i128,
        /// Bound, excluded.
        stop: i128,
        /// Increment, non-zero.
        step: i128,
    },
    /// A builtin type, as the second argument of `isinstance`.
    Type(PyType),
}

impl Value {
    /// A shape: a tuple of ints.
    pub fn from_shape(dims: &[usize]) -> Value {
        Value::Tuple(dims.iter().map(|&d| Value::from(d)).collect())
    }

    /// Python's name of the value's type (`"int"`, `"NoneType"`, `"type"`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "NoneType",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::Tuple(_) => "tuple",
            Value::List(_) => "list",
            Value::Set(_) => "set",
            Value::Range { .. } => "range",
            Value::Type(_) => "type",
        }
    }

    /// The value as a number, if it is one (a bool is the int 0 or 1).
    pub(crate) fn as_num(&self) -> Option<Num> {
        match *self {
            Value::Bool(b) => Some(Num::Int(i128::from(b))),
            Value::Int(i) => Some(Num::Int(i)),
            Value::Float(f) => Some(Num::Float(f)),
            _ => None,
        }
    }

    /// The value as an index (`__index__`): an int or a bool.
    pub(crate) fn as_index(&self) -> Option<i128> {
        match *self {
            Value::Bool(b) => Some(i128::from(b)),
            Value::Int(i) => Some(i),
            _ => None,
        }
    }
}

/// A number after bool promotion; arithmetic dispatches on it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    /// Python's `float(int)`: correctly rounded (Rust's `as` rounds to nearest, ties to even).
    pub(crate) fn to_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
}

/// `usize` into a formula int; lossless on every platform with at most 64-bit pointers.
#[inline]
pub(crate) fn int_from_usize(n: usize) -> i128 {
    i128::try_from(n).unwrap_or(i128::MAX)
}

/// Number of items of `range(start, stop, step)`, exact even where it exceeds `i128::MAX`.
#[inline]
pub(crate) fn range_len(start: i128, stop: i128, step: i128) -> EvalResult<u128> {
    if step == 0 {
        return Err(EvalError::value_error("range() arg 3 must not be zero"));
    }
    let ascending = step > 0 && start < stop;
    let descending = step < 0 && start > stop;
    if !(ascending || descending) {
        return Ok(0);
    }
    let span = stop.abs_diff(start);
    // A step of ±1 (`range(n)`, nearly every range) without a 128-bit division.
    match step.unsigned_abs() {
        1 => Ok(span),
        size => Ok((span - 1) / size + 1),
    }
}

/// Item `index` (already known to be `< len`) of a range. The true item lies between `start` and
/// `stop`, so it fits in `i128`, and modular arithmetic computes it exactly.
#[inline]
pub(crate) fn range_item(start: i128, step: i128, index: u128) -> i128 {
    start.wrapping_add((index as i128).wrapping_mul(step))
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::None => f.write_str("None"),
            Value::Bool(true) => f.write_str("True"),
            Value::Bool(false) => f.write_str("False"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Float(x) => f.write_str(&float_repr(*x)),
            Value::Str(s) => f.write_str(&str_repr(s)),
            Value::Tuple(items) => {
                f.write_char('(')?;
                write_items(f, items)?;
                if items.len() == 1 {
                    f.write_char(',')?;
                }
                f.write_char(')')
            }
            Value::List(items) => {
                f.write_char('[')?;
                write_items(f, items)?;
                f.write_char(']')
            }
            Value::Set(items) if items.is_empty() => f.write_str("set()"),
            Value::Set(items) => {
                f.write_char('{')?;
                write_items(f, items)?;
                f.write_char('}')
            }
            Value::Range {
                start,
                stop,
                step: 1,
            } => write!(f, "range({start}, {stop})"),
            Value::Range { start, stop, step } => write!(f, "range({start}, {stop}, {step})"),
            Value::Type(t) => write!(f, "{t}"),
        }
    }
}

fn write_items(f: &mut fmt::Formatter<'_>, items: &[Value]) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation when the
/// decimal exponent is in `-5 < e < 16`, else as `1e+16` / `1.5e-05`.
pub(crate) fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    let (digits, exponent) = shortest_digits(x.abs());
    let body = if (-5 < exponent) && (exponent < 16) {
        // Position of the decimal point within `digits`.
        let point = exponent + 1;
        let n = i32::try_from(digits.len()).unwrap_or(i32::MAX);
        if point <= 0 {
            format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
        } else if point >= n {
            format!("{}{}.0", digits, "0".repeat((point - n) as usize))
        } else {
            let (int_part, frac) = digits.split_at(point as usize);
            format!("{int_part}.{frac}")
        }
    } else {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let mantissa = if rest.is_empty() {
            first.to_owned()
        } else {
            format!("{first}.{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{exp_sign}{:02}", exponent.unsigned_abs())
    };
    format!("{sign}{body}")
}

/// The shortest decimal digits that round-trip to `x` (finite, non-negative) and the decimal
/// exponent of the first one, choosing as Python does (David Gay's `dtoa` mode 0): among the
/// shortest strings, the one nearest to `x`, ties to an even last digit. Rust's `{:e}` finds the
/// shortest length but may break a tie the other way (2^53 * 0.1 is ...099.25: Python prints
/// `...099.2`, `{:e}` gives `...099.3`), so the digits are redone with exact rounding.
fn shortest_digits(x: f64) -> (String, i32) {
    let split = |sci: &str| {
        let (mantissa, exponent) = sci.split_once('e').unwrap_or((sci, "0"));
        let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
        (digits, exponent.parse::<i32>().unwrap_or(0))
    };
    let shortest = format!("{x:e}");
    let (digits, exponent) = split(&shortest);
    // `{:.N e}` rounds the exact binary value half to even; keep it only if it round-trips
    // (next to a power of two the nearest string can fall outside the narrower lower half-gap).
    let nearest = format!("{:.*e}", digits.len().saturating_sub(1), x);
    let (digits, exponent) = if nearest.parse::<f64>() == Ok(x) {
        split(&nearest)
    } else {
        (digits, exponent)
    };
    let trimmed = digits.trim_end_matches('0');
    let digits = if trimmed.is_empty() {
        "0".to_owned()
    } else {
        trimmed.to_owned()
    };
    (digits, exponent)
}

/// Python's `repr(str)`: single quotes unless the text has a `'` and no `"`; control and other
/// non-printable characters escaped.
pub(crate) fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() || (c.is_whitespace() && c != ' ') => {
                let code = u32::from(c);
                // Writing into a String cannot fail.
                let _ = if code <= 0xff {
                    write!(out, "\\x{code:02x}")
                } else if code <= 0xffff {
                    write!(out, "\\u{code:04x}")
                } else {
                    write!(out, "\\U{code:08x}")
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

macro_rules! from_lossless_int {
    ($($t:ty),*) => {$(
        impl From<$t> for Value {
            fn from(value: $t) -> Self {
                Value::Int(i128::from(value))
            }
        }
    )*};
}

from_lossless_int!(i8, i16, i32, i64, i128, u8, u16, u32, u64);

impl From<usize> for Value {
    fn from(value: usize) -> Self {
        Value::Int(int_from_usize(value))
    }
}

impl From<isize> for Value {
    fn from(value: isize) -> Self {
        // Lossless on every platform with at most 64-bit pointers.
        Value::Int(i128::try_from(value).unwrap_or(if value < 0 { i128::MIN } else { i128::MAX }))
    }
}

impl From<f64> for Value {
    fn from(value: f64) -> Self {
        Value::Float(value)
    }
}

impl From<f32> for Value {
    fn from(value: f32) -> Self {
        Value::Float(f64::from(value))
    }
}

impl From<bool> for Value {
    fn from(value: bool) -> Self {
        Value::Bool(value)
    }
}

impl From<&str> for Value {
    fn from(value: &str) -> Self {
        Value::Str(value.to_owned())
    }
}

impl From<String> for Value {
    fn from(value: String) -> Self {
        Value::Str(value)
    }
}

impl From<&String> for Value {
    fn from(value: &String) -> Self {
        Value::Str(value.clone())
    }
}

impl From<&Value> for Value {
    fn from(value: &Value) -> Self {
        value.clone()
    }
}

impl From<PyType> for Value {
    fn from(value: PyType) -> Self {
        Value::Type(value)
    }
}

impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(value: Option<T>) -> Self {
        value.map_or(Value::None, Into::into)
    }
}

impl<T: Into<Value>> From<Vec<T>> for Value {
    fn from(value: Vec<T>) -> Self {
        Value::List(value.into_iter().map(Into::into).collect())
    }
}

impl<T: Clone + Into<Value>> From<&[T]> for Value {
    fn from(value: &[T]) -> Self {
        Value::List(value.iter().cloned().map(Into::into).collect())
    }
}

impl<T: Into<Value>, const N: usize> From<[T; N]> for Value {
    fn from(value: [T; N]) -> Self {
        Value::List(value.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_python() {
        let cases: Vec<(Value, &str)> = vec![
            (Value::None, "None"),
            (Value::Bool(true), "True"),
            (Value::Bool(false), "False"),
            (Value::Int(-42), "-42"),
            (
                Value::Int(i128::MAX),
                "170141183460469231731687303715884105727",
            ),
            (Value::from_shape(&[2048, 4096]), "(2048, 4096)"),
            (Value::Tuple(vec![Value::Int(1)]), "(1,)"),
            (Value::Tuple(vec![]), "()"),
            (Value::List(vec![Value::Int(1), Value::Int(2)]), "[1, 2]"),
            (Value::List(vec![]), "[]"),
            (Value::Set(vec![Value::Int(0), Value::Int(2)]), "{0, 2}"),
            (Value::Set(vec![]), "set()"),
            (Value::Str("tanh".into()), "'tanh'"),
            (
                Value::Range {
                    start: 0,
                    stop: 3,
                    step: 1,
                },
                "range(0, 3)",
            ),
            (
                Value::Range {
                    start: 9,
                    stop: -1,
                    step: -1,
                },
                "range(9, -1, -1)",
            ),
            (Value::Type(PyType::Int), "<class 'int'>"),
            (
                Value::Tuple(vec![
                    Value::Str("a".into()),
                    Value::List(vec![Value::Float(0.5), Value::None]),
                ]),
                "('a', [0.5, None])",
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(value.to_string(), expected, "{value:?}");
        }
    }

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1.0, "1.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.5, "0.5"),
            (-2.5, "-2.5"),
            (0.1, "0.1"),
            (0.1 + 0.2, "0.30000000000000004"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (1e15, "1000000000000000.0"),
            (123456789012345.6, "123456789012345.6"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1.5e-5, "1.5e-05"),
            (1e22, "1e+22"),
            (1.2345e100, "1.2345e+100"),
            (5e-324, "5e-324"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
            (f64::NAN, "nan"),
            (100.0, "100.0"),
            (2f64.powi(100), "1.2676506002282294e+30"),
            // A tie between two shortest strings: Python takes the even digit.
            (900719925474099.0 + 0.25, "900719925474099.2"),
            (9007199254740992.0 * 0.1, "900719925474099.2"),
            (1200959900632132.0 + 0.25, "1200959900632132.2"),
            (0.3, "0.3"),
            (2.0 / 3.0, "0.6666666666666666"),
            (1e23, "1e+23"),
            (
                f64::from_bits(1e23f64.to_bits() - 1),
                "9.999999999999997e+22",
            ),
            (
                f64::from_bits(1e23f64.to_bits() + 1),
                "1.0000000000000001e+23",
            ),
        ];
        for (x, expected) in cases {
            assert_eq!(float_repr(x), expected, "{x:e}");
        }
    }

    #[test]
    fn str_repr_matches_python() {
        let cases = [
            ("tanh", "'tanh'"),
            ("", "''"),
            ("it's", "\"it's\""),
            ("say \"hi\"", "'say \"hi\"'"),
            ("both ' and \"", "'both \\' and \"'"),
            ("a\\b", "'a\\\\b'"),
            ("line\nnext\ttab\r", "'line\\nnext\\ttab\\r'"),
            ("\u{0}\u{7f}", "'\\x00\\x7f'"),
            ("\u{a0}", "'\\xa0'"),
            ("\u{2028}", "'\\u2028'"),
            ("é ü 日本", "'é ü 日本'"),
        ];
        for (s, expected) in cases {
            assert_eq!(str_repr(s), expected, "{s:?}");
        }
    }

    #[test]
    fn conversions_into_values() {
        assert_eq!(Value::from(3_i8), Value::Int(3));
        assert_eq!(Value::from(3_u64), Value::Int(3));
        assert_eq!(Value::from(u64::MAX), Value::Int(i128::from(u64::MAX)));
        assert_eq!(Value::from(i128::MIN), Value::Int(i128::MIN));
        assert_eq!(Value::from(7_usize), Value::Int(7));
        assert_eq!(Value::from(-7_isize), Value::Int(-7));
        assert_eq!(Value::from(0.5_f32), Value::Float(0.5));
        assert_eq!(Value::from(true), Value::Bool(true));
        assert_eq!(Value::from("x"), Value::Str("x".into()));
        assert_eq!(Value::from(String::from("x")), Value::Str("x".into()));
        assert_eq!(Value::from(&String::from("x")), Value::Str("x".into()));
        assert_eq!(Value::from(None::<i32>), Value::None);
        assert_eq!(Value::from(Some(2_u8)), Value::Int(2));
        assert_eq!(
            Value::from(vec![Some(1_i32), None]),
            Value::List(vec![Value::Int(1), Value::None])
        );
        let dims: &[u32] = &[4, 5];
        assert_eq!(
            Value::from(dims),
            Value::List(vec![Value::Int(4), Value::Int(5)])
        );
        assert_eq!(
            Value::from([1_i64, 2]),
            Value::List(vec![Value::Int(1), Value::Int(2)])
        );
        assert_eq!(Value::from(&Value::Int(1)), Value::Int(1));
        assert_eq!(Value::from(PyType::Str), Value::Type(PyType::Str));
        assert_eq!(Value::default(), Value::None);
    }

    #[test]
    fn type_names_and_isinstance() {
        let values = [
            (Value::None, "NoneType", PyType::NoneType),
            (Value::Bool(true), "bool", PyType::Bool),
            (Value::Int(1), "int", PyType::Int),
            (Value::Float(1.0), "float", PyType::Float),
            (Value::Str(String::new()), "str", PyType::Str),
            (Value::Tuple(vec![]), "tuple", PyType::Tuple),
            (Value::List(vec![]), "list", PyType::List),
            (Value::Set(vec![]), "set", PyType::Set),
            (
                Value::Range {
                    start: 0,
                    stop: 1,
                    step: 1,
                },
                "range",
                PyType::Range,
            ),
        ];
        for (value, name, ty) in &values {
            assert_eq!(value.type_name(), *name);
            assert_eq!(ty.name(), *name);
            assert!(ty.is_instance(value));
        }
        assert_eq!(Value::Type(PyType::Int).type_name(), "type");
        assert!(PyType::Int.is_instance(&Value::Bool(false)));
        assert!(!PyType::Bool.is_instance(&Value::Int(0)));
        assert!(!PyType::Float.is_instance(&Value::Int(0)));
        assert!(!PyType::Int.is_instance(&Value::Float(0.0)));
        assert!(!PyType::Tuple.is_instance(&Value::List(vec![])));
    }

    #[test]
    fn range_lengths() {
        let cases = [
            ((0, 3, 1), 3),
            ((0, 10, 3), 4),
            ((3, 0, 1), 0),
            ((3, 0, -1), 3),
            ((10, 0, -3), 4),
            ((0, 0, 1), 0),
            ((-5, 5, 2), 5),
            ((i128::MIN, i128::MAX, 1), u128::MAX),
            ((5, -5, -1), 10),
            ((i128::MAX, i128::MIN, -1), u128::MAX),
            ((i128::MAX, i128::MIN, i128::MIN), 2),
        ];
        for ((start, stop, step), len) in cases {
            assert_eq!(
                range_len(start, stop, step),
                Ok(len),
                "range({start}, {stop}, {step})"
            );
        }
        assert!(range_len(0, 1, 0).is_err());
        assert_eq!(range_item(i128::MIN, 1, u128::MAX - 1), i128::MAX - 1);
        assert_eq!(range_item(10, -3, 3), 1);
    }
}
