//! The helper functions a formula may call: Python's builtins plus `math.prod` (as `product`),
//! `math.log2`, `math.ceil` and `math.floor`.
//!
//! Each takes its positional arguments as a slice and checks their number as Python does.
//!
//! ```
//! use tileops::roofline::{Value, helpers};
//! let shape = Value::from_shape(&[2, 3, 4]);
//! assert_eq!(helpers::product(&[shape.clone()]), Ok(Value::Int(24)));
//! assert_eq!(helpers::len(&[shape]), Ok(Value::Int(3)));
//! assert_eq!(helpers::log2(&[Value::Int(1024)]), Ok(Value::Float(10.0)));
//! let err = helpers::len(&[]).unwrap_err();
//! assert_eq!(err.to_string(), "TypeError: len() takes exactly one argument (0 given)");
//! ```

use super::error::{EvalError, EvalResult};
use super::ops::{CmpOp, add, compare, iterate, make_set, mul, neg};
use super::stream::charge;
use super::value::{Num, Value, int_from_usize, range_len};

/// The signature every helper has.
pub type Helper = fn(&[Value]) -> EvalResult;

/// Every helper, by the name a formula calls it with.
pub const ALL: [(&str, Helper); 17] = [
    ("product", product),
    ("isinstance", isinstance),
    ("len", len),
    ("set", set),
    ("tuple", tuple),
    ("list", list),
    ("range", range),
    ("int", int),
    ("float", float),
    ("bool", bool),
    ("min", min),
    ("max", max),
    ("sum", sum),
    ("abs", abs),
    ("log2", log2),
    ("ceil", ceil),
    ("floor", floor),
];

fn exactly_one<'a>(name: &str, args: &'a [Value]) -> EvalResult<&'a Value> {
    match args {
        [arg] => Ok(arg),
        _ => Err(EvalError::type_error(format!(
            "{name}() takes exactly one argument ({} given)",
            args.len()
        ))),
    }
}

fn at_most_one<'a>(name: &str, args: &'a [Value]) -> EvalResult<Option<&'a Value>> {
    match args {
        [] => Ok(None),
        [arg] => Ok(Some(arg)),
        _ => Err(EvalError::type_error(format!(
            "{name} expected at most 1 argument, got {}",
            args.len()
        ))),
    }
}

fn real_number(value: &Value) -> EvalResult<Num> {
    value.as_num().ok_or_else(|| {
        EvalError::type_error(format!("must be real number, not {}", value.type_name()))
    })
}

fn index_arg(value: &Value) -> EvalResult<i128> {
    value.as_index().ok_or_else(|| {
        EvalError::type_error(format!(
            "'{}' object cannot be interpreted as an integer",
            value.type_name()
        ))
    })
}

/// Python's `int(float)`: truncation toward zero; infinities and NaN are errors.
fn float_to_int(x: f64) -> EvalResult {
    if x.is_nan() {
        return Err(EvalError::value_error(
            "cannot convert float NaN to integer",
        ));
    }
    if x.is_infinite() {
        return Err(EvalError::overflow_error(
            "cannot convert float infinity to integer",
        ));
    }
    let t = x.trunc();
    // -2^127 is a double; every double below 2^127 and at least -2^127 fits.
    let limit = 2f64.powi(127);
    if t >= limit || t < -limit {
        return Err(EvalError::int_overflow());
    }
    Ok(Value::Int(t as i128))
}

/// `product(iterable)` (`math.prod`): the product of the items, starting from the int 1, so an
/// empty iterable gives 1 and ints stay exact.
pub fn product(args: &[Value]) -> EvalResult {
    let [iterable] = args else {
        return Err(EvalError::type_error(format!(
            "product() takes exactly 1 positional argument ({} given)",
            args.len()
        )));
    };
    match iterable {
        // The items as `iterate` would give them (and charge them), without copying them.
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => {
            charge(items.len())?;
            items
                .iter()
                .try_fold(Value::Int(1), |acc, item| mul(&acc, item))
        }
        _ => iterate(iterable)?
            .iter()
            .try_fold(Value::Int(1), |acc, item| mul(&acc, item)),
    }
}

/// `isinstance(value, type_or_tuple_of_types)`; a `bool` is an instance of `int`.
pub fn isinstance(args: &[Value]) -> EvalResult {
    let [value, class] = args else {
        return Err(EvalError::type_error(format!(
            "isinstance expected 2 arguments, got {}",
            args.len()
        )));
    };
    is_instance(value, class).map(Value::Bool)
}

fn is_instance(value: &Value, class: &Value) -> EvalResult<bool> {
    match class {
        Value::Type(ty) => Ok(ty.is_instance(value)),
        // Checked in order, stopping at the first match, as CPython does.
        Value::Tuple(classes) => {
            for class in classes {
                if is_instance(value, class)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        _ => Err(EvalError::type_error(
            "isinstance() arg 2 must be a type, a tuple of types, or a union",
        )),
    }
}

/// `len(sized)`: the number of items of a tuple, list, set, range or str (code points).
pub fn len(args: &[Value]) -> EvalResult {
    len_int(exactly_one("len", args)?).map(Value::Int)
}

/// `len(value)` as an int.
pub(crate) fn len_int(value: &Value) -> EvalResult<i128> {
    let n = match value {
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => items.len(),
        Value::Str(s) => s.chars().count(),
        Value::Range { start, stop, step } => {
            let n = range_len(*start, *stop, *step)?;
            // CPython's len() returns a C ssize_t.
            return match i64::try_from(n) {
                Ok(n) => Ok(i128::from(n)),
                Err(_) => Err(EvalError::overflow_error(
                    "Python int too large to convert to C ssize_t",
                )),
            };
        }
        other => {
            return Err(EvalError::type_error(format!(
                "object of type '{}' has no len()",
                other.type_name()
            )));
        }
    };
    Ok(int_from_usize(n))
}

/// `set()` / `set(iterable)`.
pub fn set(args: &[Value]) -> EvalResult {
    match at_most_one("set", args)? {
        None => Ok(Value::Set(Vec::new())),
        // A range's items are distinct ints: in set order once ascending, with nothing to sort.
        Some(Value::Range { start, stop, step }) => {
            let mut items = iterate(&Value::Range {
                start: *start,
                stop: *stop,
                step: *step,
            })?;
            if *step < 0 {
                items.reverse();
            }
            Ok(Value::Set(items))
        }
        Some(iterable) => make_set(iterate(iterable)?),
    }
}

/// `tuple()` / `tuple(iterable)`.
pub fn tuple(args: &[Value]) -> EvalResult {
    let items = at_most_one("tuple", args)?.map(iterate).transpose()?;
    Ok(Value::Tuple(items.unwrap_or_default()))
}

/// `list()` / `list(iterable)`.
pub fn list(args: &[Value]) -> EvalResult {
    let items = at_most_one("list", args)?.map(iterate).transpose()?;
    Ok(Value::List(items.unwrap_or_default()))
}

/// `range(stop)`, `range(start, stop)`, `range(start, stop, step)`.
pub fn range(args: &[Value]) -> EvalResult {
    let (start, stop, step) = match args {
        [] => {
            return Err(EvalError::type_error(
                "range expected at least 1 argument, got 0",
            ));
        }
        [stop] => (0, index_arg(stop)?, 1),
        [start, stop] => (index_arg(start)?, index_arg(stop)?, 1),
        [start, stop, step] => (index_arg(start)?, index_arg(stop)?, index_arg(step)?),
        _ => {
            return Err(EvalError::type_error(format!(
                "range expected at most 3 arguments, got {}",
                args.len()
            )));
        }
    };
    if step == 0 {
        return Err(EvalError::value_error("range() arg 3 must not be zero"));
    }
    Ok(Value::Range { start, stop, step })
}

/// Python's `int(str, base)`: surrounding whitespace, a sign, a `0x`/`0o`/`0b` prefix (required
/// for base 0, optional for its own base), and single underscores between digits.
fn parse_int(text: &str, base: u32) -> EvalResult {
    let invalid = || {
        EvalError::value_error(format!(
            "invalid literal for int() with base {base}: {}",
            Value::Str(text.to_owned())
        ))
    };
    let trimmed = text.trim();
    let (negative, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (true, &trimmed[1..]),
        Some(b'+') => (false, &trimmed[1..]),
        _ => (false, trimmed),
    };
    let prefix_base = |s: &str| match s.get(..2).map(str::to_ascii_lowercase).as_deref() {
        Some("0x") => Some(16),
        Some("0o") => Some(8),
        Some("0b") => Some(2),
        _ => None,
    };
    let (base, mut digits, had_prefix) = match (base, prefix_base(unsigned)) {
        (0, Some(b)) => (b, &unsigned[2..], true),
        (0, None) => {
            // Base 0 reads a Python literal: no leading zeros on a non-zero decimal.
            let rest = unsigned.trim_start_matches(['0', '_']);
            if unsigned.starts_with('0') && !rest.is_empty() {
                return Err(invalid());
            }
            (10, unsigned, false)
        }
        (b, Some(p)) if b == p => (b, &unsigned[2..], true),
        (b, _) => (b, unsigned, false),
    };
    if had_prefix && let Some(rest) = digits.strip_prefix('_') {
        digits = rest;
    }
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
    {
        return Err(invalid());
    }
    let mut value: i128 = 0;
    for c in digits.chars().filter(|&c| c != '_') {
        let digit = c.to_digit(base).ok_or_else(invalid)?;
        value = value
            .checked_mul(i128::from(base))
            .and_then(|v| {
                if negative {
                    v.checked_sub(i128::from(digit))
                } else {
                    v.checked_add(i128::from(digit))
                }
            })
            .ok_or_else(EvalError::int_overflow)?;
    }
    Ok(Value::Int(value))
}

/// `int()`, `int(x)` (a float truncates toward zero; a str parses), `int(str, base)`.
pub fn int(args: &[Value]) -> EvalResult {
    match args {
        [] => Ok(Value::Int(0)),
        [value] => match value {
            Value::Bool(b) => Ok(Value::Int(i128::from(*b))),
            Value::Int(i) => Ok(Value::Int(*i)),
            Value::Float(x) => float_to_int(*x),
            Value::Str(s) => parse_int(s, 10),
            other => Err(EvalError::type_error(format!(
                "int() argument must be a string, a bytes-like object or a real number, not '{}'",
                other.type_name()
            ))),
        },
        [value, base] => {
            let base = index_arg(base)?;
            let base = match u32::try_from(base) {
                Ok(b) if b == 0 || (2..=36).contains(&b) => b,
                _ => {
                    return Err(EvalError::value_error(
                        "int() base must be >= 2 and <= 36, or 0",
                    ));
                }
            };
            match value {
                Value::Str(s) => parse_int(s, base),
                _ => Err(EvalError::type_error(
                    "int() can't convert non-string with explicit base",
                )),
            }
        }
        _ => Err(EvalError::type_error(format!(
            "int() takes at most 2 arguments ({} given)",
            args.len()
        ))),
    }
}

/// Python's `float(str)`: whitespace, a sign, `inf`/`infinity`/`nan` in any case, decimal and
/// exponent forms, single underscores between digits.
fn parse_float(text: &str) -> EvalResult {
    let invalid = || {
        EvalError::value_error(format!(
            "could not convert string to float: {}",
            Value::Str(text.to_owned())
        ))
    };
    let trimmed = text.trim();
    let (sign, unsigned) = match trimmed.as_bytes().first() {
        Some(b'-') => (-1.0, &trimmed[1..]),
        Some(b'+') => (1.0, &trimmed[1..]),
        _ => (1.0, trimmed),
    };
    let lower = unsigned.to_ascii_lowercase();
    if lower == "inf" || lower == "infinity" {
        return Ok(Value::Float(sign * f64::INFINITY));
    }
    if lower == "nan" {
        return Ok(Value::Float(f64::NAN.copysign(sign)));
    }
    let chars: Vec<char> = unsigned.chars().collect();
    let digits_only = chars
        .iter()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-' | '_'));
    // An underscore must sit between two digits.
    let underscores_ok = chars.iter().enumerate().all(|(k, &c)| {
        c != '_'
            || (k > 0
                && chars.get(k - 1).is_some_and(char::is_ascii_digit)
                && chars.get(k + 1).is_some_and(char::is_ascii_digit))
    });
    if !digits_only || !underscores_ok || unsigned.starts_with(['+', '-']) {
        return Err(invalid());
    }
    let cleaned: String = chars.iter().filter(|&&c| c != '_').collect();
    cleaned
        .parse::<f64>()
        .map(|x| Value::Float(sign * x))
        .map_err(|_| invalid())
}

/// `float()`, `float(number)`, `float(str)` (`'inf'`, `'-inf'`, `'nan'` included).
pub fn float(args: &[Value]) -> EvalResult {
    let Some(value) = at_most_one("float", args)? else {
        return Ok(Value::Float(0.0));
    };
    match value {
        Value::Str(s) => parse_float(s),
        other => match other.as_num() {
            Some(n) => Ok(Value::Float(n.to_f64())),
            None => Err(EvalError::type_error(format!(
                "float() argument must be a string or a real number, not '{}'",
                other.type_name()
            ))),
        },
    }
}

/// `bool()` / `bool(x)`: Python truthiness.
pub fn bool(args: &[Value]) -> EvalResult {
    match at_most_one("bool", args)? {
        None => Ok(Value::Bool(false)),
        Some(value) => super::ops::truthy(value).map(Value::Bool),
    }
}

/// `min(iterable)` or `min(a, b, ...)`: the first smallest item.
pub fn min(args: &[Value]) -> EvalResult {
    min_max("min", CmpOp::Lt, args)
}

/// `max(iterable)` or `max(a, b, ...)`: the first largest item.
pub fn max(args: &[Value]) -> EvalResult {
    min_max("max", CmpOp::Gt, args)
}

fn min_max(name: &str, op: CmpOp, args: &[Value]) -> EvalResult {
    let items = match args {
        [] => {
            return Err(EvalError::type_error(format!(
                "{name} expected at least 1 argument, got 0"
            )));
        }
        [iterable] => iterate(iterable)?,
        many => many.to_vec(),
    };
    let mut items = items.into_iter();
    let Some(mut best) = items.next() else {
        return Err(EvalError::value_error(format!(
            "{name}() iterable argument is empty"
        )));
    };
    for item in items {
        // CPython asks `item < best` (or `>`): ties keep the first item.
        if compare(op, &item, &best)? {
            best = item;
        }
    }
    Ok(best)
}

/// `sum(iterable)` / `sum(iterable, start)`, including CPython 3.12's compensated float
/// summation (`sum([0.1] * 10) == 1.0`).
pub fn sum(args: &[Value]) -> EvalResult {
    let (iterable, start) = match args {
        [iterable] => (iterable, Value::Int(0)),
        [iterable, start] => (iterable, start.clone()),
        [] => {
            return Err(EvalError::type_error(
                "sum() takes at least 1 positional argument (0 given)",
            ));
        }
        _ => {
            return Err(EvalError::type_error(format!(
                "sum() takes at most 2 arguments ({} given)",
                args.len()
            )));
        }
    };
    // CPython takes the iterator before it looks at `start`.
    let items = iterate(iterable)?;
    if let Value::Str(_) = start {
        return Err(EvalError::type_error(
            "sum() can't sum strings [use ''.join(seq) instead]",
        ));
    }
    let mut acc = SumAcc::new(start);
    for item in items {
        acc.push(item)?;
    }
    Ok(acc.finish())
}

/// CPython's `sum()` one item at a time, so that a generator can stream into it.
///
/// The states are the fast paths of CPython's `builtin_sum_impl`, kept because they decide float
/// rounding: an exact int start accumulates in a C long; then a float result is summed with
/// Neumaier's compensation; anything else falls back to plain `+`. A path once left is never
/// re-entered, as in CPython.
#[derive(Debug, Clone)]
pub(crate) struct SumAcc {
    state: SumState,
}

#[derive(Debug, Clone)]
enum SumState {
    /// The int fast path: the exact sum so far, as a C long.
    Int(i64),
    /// The float fast path: the running sum and its compensation.
    Float { hi: f64, lo: f64 },
    /// Plain `+`.
    Any(Value),
}

impl SumAcc {
    pub(crate) fn new(start: Value) -> SumAcc {
        let state = match start {
            Value::Int(i) => match i64::try_from(i) {
                Ok(small) => SumState::Int(small),
                Err(_) => SumState::Any(Value::Int(i)),
            },
            Value::Float(hi) => SumState::Float { hi, lo: 0.0 },
            other => SumState::Any(other),
        };
        SumAcc { state }
    }

    /// The state after leaving the int path with `result`: the float path if it is a float.
    fn after_int(result: Value) -> SumState {
        match result {
            Value::Float(hi) => SumState::Float { hi, lo: 0.0 },
            other => SumState::Any(other),
        }
    }

    pub(crate) fn push(&mut self, item: Value) -> EvalResult<()> {
        let small = |item: &Value| match *item {
            Value::Int(i) => i64::try_from(i).ok(),
            Value::Bool(b) => Some(i64::from(b)),
            _ => None,
        };
        self.state = match std::mem::replace(&mut self.state, SumState::Int(0)) {
            SumState::Int(acc) => match small(&item).and_then(|b| acc.checked_add(b)) {
                Some(next) => SumState::Int(next),
                None => Self::after_int(add(&Value::Int(i128::from(acc)), &item)?),
            },
            SumState::Float { mut hi, mut lo } => {
                if let Value::Float(x) = item {
                    let t = hi + x;
                    if hi.abs() >= x.abs() {
                        lo += (hi - t) + x;
                    } else {
                        lo += (x - t) + hi;
                    }
                    hi = t;
                    SumState::Float { hi, lo }
                } else if let Some(i) = small(&item) {
                    hi += i as f64;
                    SumState::Float { hi, lo }
                } else {
                    if lo != 0.0 && lo.is_finite() {
                        hi += lo;
                    }
                    SumState::Any(add(&Value::Float(hi), &item)?)
                }
            }
            SumState::Any(result) => SumState::Any(add(&result, &item)?),
        };
        Ok(())
    }

    pub(crate) fn finish(self) -> Value {
        match self.state {
            SumState::Int(acc) => Value::Int(i128::from(acc)),
            SumState::Float { mut hi, lo } => {
                if lo != 0.0 && lo.is_finite() {
                    hi += lo;
                }
                Value::Float(hi)
            }
            SumState::Any(result) => result,
        }
    }
}

/// `abs(x)` (a bool becomes an int).
pub fn abs(args: &[Value]) -> EvalResult {
    let value = exactly_one("abs", args)?;
    match value.as_num() {
        Some(Num::Int(i)) if i < 0 => neg(&Value::Int(i)),
        Some(Num::Int(i)) => Ok(Value::Int(i)),
        Some(Num::Float(x)) => Ok(Value::Float(x.abs())),
        None => Err(EvalError::type_error(format!(
            "bad operand type for abs(): '{}'",
            value.type_name()
        ))),
    }
}

/// `math.log2(x)`, a float; exact for powers of two (`log2(2**100) == 100.0`). `x <= 0` is a
/// domain error.
pub fn log2(args: &[Value]) -> EvalResult {
    let value = exactly_one("math.log2", args)?;
    let domain = || EvalError::value_error("math domain error");
    match real_number(value)? {
        // CPython converts the int to a double (exactly rounded), then takes log2.
        Num::Int(i) if i <= 0 => Err(domain()),
        Num::Int(i) => Ok(Value::Float((i as f64).log2())),
        Num::Float(x) if x.is_nan() => Ok(Value::Float(x)),
        Num::Float(x) if x <= 0.0 => Err(domain()),
        Num::Float(x) => Ok(Value::Float(x.log2())),
    }
}

/// `math.ceil(x)`, an int.
pub fn ceil(args: &[Value]) -> EvalResult {
    match real_number(exactly_one("math.ceil", args)?)? {
        Num::Int(i) => Ok(Value::Int(i)),
        Num::Float(x) => float_to_int(x.ceil()),
    }
}

/// `math.floor(x)`, an int.
pub fn floor(args: &[Value]) -> EvalResult {
    match real_number(exactly_one("math.floor", args)?)? {
        Num::Int(i) => Ok(Value::Int(i)),
        Num::Float(x) => float_to_int(x.floor()),
    }
}

#[cfg(test)]
mod tests;
