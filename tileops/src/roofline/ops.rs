//! Python's operators on formula values: arithmetic, comparison, subscription, slicing, iteration.
//!
//! Every function here follows CPython 3.12 for results and, as far as is practical, for the
//! wording of its errors. Ints are `i128`; an operation whose exact result does not fit is an
//! `OverflowError`, never a wrap.

use std::cmp::Ordering;

use super::error::{EvalError, EvalResult};
use super::stream::charge;
use super::value::{Num, Value, int_from_usize, range_item, range_len};

/// The most items one sequence may have (4,194,304). Python would try and run out of memory; a
/// formula that builds millions of items is a mistake, and we say so instead of aborting the
/// process.
pub const MAX_ITEMS: usize = 1 << 22;

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `in`
    In,
    /// `not in`
    NotIn,
    /// `is`
    Is,
    /// `is not`
    IsNot,
}

impl CmpOp {
    /// The operator as written in Python (`"not in"`).
    pub const fn symbol(self) -> &'static str {
        match self {
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::Eq => "==",
            CmpOp::Ne => "!=",
            CmpOp::In => "in",
            CmpOp::NotIn => "not in",
            CmpOp::Is => "is",
            CmpOp::IsNot => "is not",
        }
    }

    /// Whether an ordering satisfies this operator (membership and identity never do).
    fn holds(self, ordering: Ordering) -> bool {
        match self {
            CmpOp::Lt => ordering == Ordering::Less,
            CmpOp::Le => ordering != Ordering::Greater,
            CmpOp::Gt => ordering == Ordering::Greater,
            CmpOp::Ge => ordering != Ordering::Less,
            CmpOp::Eq => ordering == Ordering::Equal,
            CmpOp::Ne => ordering != Ordering::Equal,
            CmpOp::In | CmpOp::NotIn | CmpOp::Is | CmpOp::IsNot => false,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic
// ---------------------------------------------------------------------------------------------

fn unsupported(op: &str, a: &Value, b: &Value) -> EvalError {
    EvalError::type_error(format!(
        "unsupported operand type(s) for {op}: '{}' and '{}'",
        a.type_name(),
        b.type_name()
    ))
}

/// Dispatches a binary operator on two numbers: ints stay ints, anything with a float is float.
fn numeric(
    a: &Value,
    b: &Value,
    int_op: impl FnOnce(i128, i128) -> EvalResult,
    float_op: impl FnOnce(f64, f64) -> EvalResult,
) -> Option<EvalResult> {
    match (a.as_num()?, b.as_num()?) {
        (Num::Int(x), Num::Int(y)) => Some(int_op(x, y)),
        (x, y) => Some(float_op(x.to_f64(), y.to_f64())),
    }
}

fn checked(result: Option<i128>) -> EvalResult {
    result.map(Value::Int).ok_or_else(EvalError::int_overflow)
}

/// Refuses a result longer than [`MAX_ITEMS`], and charges building it to the work budget.
fn check_len(len: usize) -> EvalResult<()> {
    if len > MAX_ITEMS {
        return Err(EvalError::memory_error(format!(
            "a sequence of {len} items exceeds the tileops formula limit of {MAX_ITEMS}"
        )));
    }
    charge(len)
}

fn concat(x: &[Value], y: &[Value]) -> EvalResult<Vec<Value>> {
    check_len(x.len().saturating_add(y.len()))?;
    Ok(x.iter().chain(y).cloned().collect())
}

/// `a + b`.
pub fn add(a: &Value, b: &Value) -> EvalResult {
    if let Some(result) = numeric(
        a,
        b,
        |x, y| checked(x.checked_add(y)),
        |x, y| Ok(Value::Float(x + y)),
    ) {
        return result;
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => {
            check_len(x.len().saturating_add(y.len()))?;
            Ok(Value::Str(format!("{x}{y}")))
        }
        (Value::Tuple(x), Value::Tuple(y)) => Ok(Value::Tuple(concat(x, y)?)),
        (Value::List(x), Value::List(y)) => Ok(Value::List(concat(x, y)?)),
        (Value::Str(_) | Value::Tuple(_) | Value::List(_), _) => {
            let name = a.type_name();
            Err(EvalError::type_error(format!(
                "can only concatenate {name} (not \"{}\") to {name}",
                b.type_name()
            )))
        }
        _ => Err(unsupported("+", a, b)),
    }
}

/// `a - b` (for sets, the difference).
pub fn sub(a: &Value, b: &Value) -> EvalResult {
    if let Some(result) = numeric(
        a,
        b,
        |x, y| checked(x.checked_sub(y)),
        |x, y| Ok(Value::Float(x - y)),
    ) {
        return result;
    }
    match (a, b) {
        // What is left of a set in set order is still in set order.
        (Value::Set(x), Value::Set(y)) => {
            charge(x.len())?;
            Ok(Value::Set(
                x.iter()
                    .filter(|item| !set_contains(y, item))
                    .cloned()
                    .collect(),
            ))
        }
        _ => Err(unsupported("-", a, b)),
    }
}

fn repeat(seq: &Value, count: &Value) -> Option<EvalResult> {
    let count = count.as_index()?;
    let times = usize::try_from(count.max(0)).unwrap_or(usize::MAX);
    let result = match seq {
        Value::Str(s) => {
            let total = s.len().saturating_mul(times);
            check_len(total).map(|()| Value::Str(s.repeat(if total == 0 { 0 } else { times })))
        }
        Value::Tuple(items) | Value::List(items) => {
            let total = items.len().saturating_mul(times);
            check_len(total).map(|()| {
                let mut out = Vec::with_capacity(total);
                if total > 0 {
                    for _ in 0..times {
                        out.extend(items.iter().cloned());
                    }
                }
                if matches!(seq, Value::Tuple(_)) {
                    Value::Tuple(out)
                } else {
                    Value::List(out)
                }
            })
        }
        _ => return None,
    };
    Some(result)
}

/// `a * b` (for a sequence and an int, repetition).
pub fn mul(a: &Value, b: &Value) -> EvalResult {
    if let Some(result) = numeric(
        a,
        b,
        |x, y| checked(x.checked_mul(y)),
        |x, y| Ok(Value::Float(x * y)),
    ) {
        return result;
    }
    if let Some(result) = repeat(a, b).or_else(|| repeat(b, a)) {
        return result;
    }
    let is_seq = |v: &Value| matches!(v, Value::Str(_) | Value::Tuple(_) | Value::List(_));
    if is_seq(a) || is_seq(b) {
        let other = if is_seq(a) { b } else { a };
        return Err(EvalError::type_error(format!(
            "can't multiply sequence by non-int of type '{}'",
            other.type_name()
        )));
    }
    Err(unsupported("*", a, b))
}

/// `a / b`: true division, always a float.
pub fn truediv(a: &Value, b: &Value) -> EvalResult {
    numeric(a, b, int_truediv, |x, y| {
        if y == 0.0 {
            return Err(EvalError::zero_division("float division by zero"));
        }
        Ok(Value::Float(x / y))
    })
    .unwrap_or_else(|| Err(unsupported("/", a, b)))
}

/// `int / int`, correctly rounded like CPython's `long_true_divide` (a naive `a as f64 / b as f64`
/// rounds twice once an operand exceeds 2^53).
fn int_truediv(a: i128, b: i128) -> EvalResult {
    if b == 0 {
        return Err(EvalError::zero_division("division by zero"));
    }
    const EXACT: u128 = 1 << 53;
    let (n, d) = (a.unsigned_abs(), b.unsigned_abs());
    if n <= EXACT && d <= EXACT {
        return Ok(Value::Float(a as f64 / b as f64));
    }
    let magnitude = ratio_to_f64(n, d);
    Ok(Value::Float(if (a < 0) != (b < 0) {
        -magnitude
    } else {
        magnitude
    }))
}

/// `n / d` rounded to nearest, ties to even, for `d > 0`.
fn ratio_to_f64(n: u128, d: u128) -> f64 {
    if n == 0 || d == 0 {
        return 0.0;
    }
    let mut q = n / d;
    let mut r = n % d;
    let mut exp: i32 = 0;
    // Long division, one bit at a time, until the quotient has at least 55 significant bits:
    // 53 for the mantissa, one to round on, one spare; the remainder is the sticky bit.
    while q < (1 << 54) {
        // r < d <= 2^127, so 2r fits.
        let r2 = r << 1;
        let bit = r2 >= d;
        q = (q << 1) | u128::from(bit);
        r = if bit { r2 - d } else { r2 };
        exp -= 1;
    }
    let bits = 128 - q.leading_zeros();
    let shift = bits - 53;
    let mut mantissa = q >> shift;
    let rest = q & ((1u128 << shift) - 1);
    let half = 1u128 << (shift - 1);
    if rest > half || (rest == half && (r != 0 || mantissa & 1 == 1)) {
        mantissa += 1;
    }
    // |n/d| lies within 2^±128, so the exponent is far from subnormal or overflow territory.
    let scale = exp + shift as i32;
    (mantissa as f64) * f64::from_bits(((scale + 1023) as u64) << 52)
}

fn int_floordiv(x: i128, y: i128) -> EvalResult {
    if y == 0 {
        return Err(EvalError::zero_division(
            "integer division or modulo by zero",
        ));
    }
    let q = x.checked_div(y).ok_or_else(EvalError::int_overflow)?;
    let r = x.checked_rem(y).unwrap_or(0);
    if r != 0 && ((r < 0) != (y < 0)) {
        checked(q.checked_sub(1))
    } else {
        Ok(Value::Int(q))
    }
}

fn int_mod(x: i128, y: i128) -> EvalResult {
    if y == 0 {
        return Err(EvalError::zero_division("integer modulo by zero"));
    }
    // `i128::MIN % -1` overflows in Rust; mathematically it is 0.
    let r = x.checked_rem(y).unwrap_or(0);
    if r != 0 && ((r < 0) != (y < 0)) {
        checked(r.checked_add(y))
    } else {
        Ok(Value::Int(r))
    }
}

/// CPython's `_float_div_mod` (Objects/floatobject.c), returning `(floordiv, mod)`.
fn float_divmod(vx: f64, wx: f64) -> (f64, f64) {
    let mut modulo = vx % wx;
    let mut div = (vx - modulo) / wx;
    if modulo != 0.0 {
        if (wx < 0.0) != (modulo < 0.0) {
            modulo += wx;
            div -= 1.0;
        }
    } else {
        modulo = 0f64.copysign(wx);
    }
    let floordiv = if div != 0.0 {
        let mut floordiv = div.floor();
        if div - floordiv > 0.5 {
            floordiv += 1.0;
        }
        floordiv
    } else {
        0f64.copysign(vx / wx)
    };
    (floordiv, modulo)
}

/// `a // b`: floor division (ints stay ints).
pub fn floordiv(a: &Value, b: &Value) -> EvalResult {
    numeric(a, b, int_floordiv, |x, y| {
        if y == 0.0 {
            return Err(EvalError::zero_division("float floor division by zero"));
        }
        Ok(Value::Float(float_divmod(x, y).0))
    })
    .unwrap_or_else(|| Err(unsupported("//", a, b)))
}

/// `a % b`: the result takes the sign of the divisor (`-1 % 3 == 2`).
pub fn modulo(a: &Value, b: &Value) -> EvalResult {
    if let Some(result) = numeric(a, b, int_mod, |x, y| {
        if y == 0.0 {
            return Err(EvalError::zero_division("float modulo by zero"));
        }
        // CPython's float_rem; equal to float_divmod's second half.
        let mut m = x % y;
        if m != 0.0 {
            if (y < 0.0) != (m < 0.0) {
                m += y;
            }
        } else {
            m = 0f64.copysign(y);
        }
        Ok(Value::Float(m))
    }) {
        return result;
    }
    if let Value::Str(_) = a {
        return Err(EvalError::type_error(
            "printf-style string formatting (`str % args`) is not supported in tileops formulas",
        ));
    }
    Err(unsupported("%", a, b))
}

fn int_pow(x: i128, y: i128) -> EvalResult {
    if y < 0 {
        // CPython hands negative exponents to float pow.
        return float_pow(x as f64, y as f64);
    }
    match x {
        0 => Ok(Value::Int(i128::from(y == 0))),
        1 => Ok(Value::Int(1)),
        -1 => Ok(Value::Int(if y % 2 == 0 { 1 } else { -1 })),
        _ => checked(u32::try_from(y).ok().and_then(|e| x.checked_pow(e))),
    }
}

fn is_odd_integer(x: f64) -> bool {
    x.abs() % 2.0 == 1.0
}

/// CPython's `float_pow`, special cases included.
fn float_pow(iv: f64, iw: f64) -> EvalResult {
    let float = |x: f64| Ok(Value::Float(x));
    if iw == 0.0 {
        return float(1.0);
    }
    if iv.is_nan() {
        return float(iv);
    }
    if iw.is_nan() {
        return float(if iv == 1.0 { 1.0 } else { iw });
    }
    if iw.is_infinite() {
        let av = iv.abs();
        return float(if av == 1.0 {
            1.0
        } else if (iw > 0.0) == (av > 1.0) {
            f64::INFINITY
        } else {
            0.0
        });
    }
    if iv.is_infinite() {
        let odd = is_odd_integer(iw);
        return float(if iw > 0.0 {
            if odd { iv } else { iv.abs() }
        } else if odd {
            0f64.copysign(iv)
        } else {
            0.0
        });
    }
    if iv == 0.0 {
        if iw < 0.0 {
            return Err(EvalError::zero_division(
                "0.0 cannot be raised to a negative power",
            ));
        }
        return float(if is_odd_integer(iw) { iv } else { 0.0 });
    }
    let mut base = iv;
    let mut negate = false;
    if iv < 0.0 {
        if iw != iw.floor() {
            return Err(EvalError::value_error(
                "a negative number raised to a fractional power is complex, \
                 and tileops formulas have no complex numbers",
            ));
        }
        base = -iv;
        negate = is_odd_integer(iw);
    }
    if base == 1.0 {
        return float(if negate { -1.0 } else { 1.0 });
    }
    let result = base.powf(iw);
    if result.is_infinite() {
        return Err(EvalError::overflow_error(
            "(34, 'Numerical result out of range')",
        ));
    }
    float(if negate { -result } else { result })
}

/// `a ** b`: an int to a non-negative int stays an int; anything else is a float.
pub fn pow(a: &Value, b: &Value) -> EvalResult {
    numeric(a, b, int_pow, float_pow).unwrap_or_else(|| {
        Err(EvalError::type_error(format!(
            "unsupported operand type(s) for ** or pow(): '{}' and '{}'",
            a.type_name(),
            b.type_name()
        )))
    })
}

/// `-a`.
pub fn neg(a: &Value) -> EvalResult {
    match a.as_num() {
        Some(Num::Int(x)) => checked(x.checked_neg()),
        Some(Num::Float(x)) => Ok(Value::Float(-x)),
        None => Err(EvalError::type_error(format!(
            "bad operand type for unary -: '{}'",
            a.type_name()
        ))),
    }
}

/// `+a` (a bool becomes an int).
pub fn pos(a: &Value) -> EvalResult {
    match a.as_num() {
        Some(Num::Int(x)) => Ok(Value::Int(x)),
        Some(Num::Float(x)) => Ok(Value::Float(x)),
        None => Err(EvalError::type_error(format!(
            "bad operand type for unary +: '{}'",
            a.type_name()
        ))),
    }
}

/// `not a`, a bool.
pub fn not(a: &Value) -> EvalResult {
    Ok(Value::Bool(!truthy(a)?))
}

/// `bool(a)`: false for `None`, `False`, zero, and empty containers; true otherwise.
pub fn truthy(a: &Value) -> EvalResult<bool> {
    Ok(match a {
        Value::None => false,
        Value::Bool(b) => *b,
        Value::Int(i) => *i != 0,
        // NaN is truthy in Python.
        Value::Float(f) => *f != 0.0,
        Value::Str(s) => !s.is_empty(),
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => !items.is_empty(),
        Value::Range { start, stop, step } => range_len(*start, *stop, *step)? != 0,
        Value::Type(_) => true,
    })
}

// ---------------------------------------------------------------------------------------------
// Comparison
// ---------------------------------------------------------------------------------------------

/// `int` vs `float`, exactly (CPython compares the mathematical values, never `int as f64`).
fn cmp_int_float(i: i128, f: f64) -> Option<Ordering> {
    if f.is_nan() {
        return None;
    }
    let rounded = i as f64;
    // Rounding is monotonic and `f` is representable, so a strict difference after rounding
    // is a strict difference before it.
    if rounded != f {
        return rounded.partial_cmp(&f);
    }
    // `f` is an integer of magnitude at most 2^127.
    if f >= 2f64.powi(127) {
        return Some(Ordering::Less);
    }
    Some(i.cmp(&(f as i128)))
}

fn num_cmp(a: Num, b: Num) -> Option<Ordering> {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).map(Ordering::reverse),
        (Num::Float(x), Num::Float(y)) => x.partial_cmp(&y),
    }
}

fn ranges_equal(a: (i128, i128, i128), b: (i128, i128, i128)) -> bool {
    let (Ok(len_a), Ok(len_b)) = (range_len(a.0, a.1, a.2), range_len(b.0, b.1, b.2)) else {
        return false;
    };
    len_a == len_b && (len_a == 0 || (a.0 == b.0 && (len_a == 1 || a.2 == b.2)))
}

/// Python's `a == b`.
pub(crate) fn py_eq(a: &Value, b: &Value) -> bool {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        return num_cmp(x, y) == Some(Ordering::Equal);
    }
    match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Tuple(x), Value::Tuple(y)) | (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q))
        }
        (Value::Set(x), Value::Set(y)) => x.len() == y.len() && is_subset(x, y),
        (
            Value::Range {
                start: s1,
                stop: e1,
                step: t1,
            },
            Value::Range {
                start: s2,
                stop: e2,
                step: t2,
            },
        ) => ranges_equal((*s1, *e1, *t1), (*s2, *e2, *t2)),
        (Value::Type(x), Value::Type(y)) => x == y,
        _ => false,
    }
}

/// `x <= y` for two sets: each lookup is a binary search, so this is `O(|x| log |y|)`.
fn is_subset(x: &[Value], y: &[Value]) -> bool {
    x.len() <= y.len() && x.iter().all(|item| set_contains(y, item))
}

// ---------------------------------------------------------------------------------------------
// Set order
//
// A set's items are kept in one canonical order, which makes building a set `O(n log n)` and a
// lookup `O(log n)` (Python hashes; this runtime sorts, which is just as exact and needs no hash
// consistent with `1 == 1.0 == True`): first every item that can equal something, sorted by
// [`set_cmp`] — numbers ascending, then `None`, strs, tuples, ranges and types — then the items
// equal to nothing (a NaN, or a tuple holding one), in insertion order. Python leaves set order
// to its hashes, so any fixed order is as Python-compatible as another; this one keeps small int
// sets ascending, as CPython iterates them.
// ---------------------------------------------------------------------------------------------

/// A value that is `==` to nothing, itself included: a NaN, or a tuple holding one. A set keeps
/// every one of them and never finds one.
fn equals_nothing(v: &Value) -> bool {
    match v {
        Value::Float(f) => f.is_nan(),
        Value::Tuple(items) => items.iter().any(equals_nothing),
        Value::Range { start, stop, step } => range_len(*start, *stop, *step).is_err(),
        _ => false,
    }
}

fn set_rank(v: &Value) -> u8 {
    match v {
        Value::Bool(_) | Value::Int(_) | Value::Float(_) => 0,
        Value::None => 1,
        Value::Str(_) => 2,
        Value::Tuple(_) => 3,
        Value::Range { .. } => 4,
        Value::Type(_) => 5,
        // Unhashable: never in a set.
        Value::List(_) | Value::Set(_) => 6,
    }
}

/// `(len, first, step)` with the parts that do not matter zeroed: two ranges are `==` exactly
/// when these agree (`range(0)` equals `range(5, 5)`; one-item ranges ignore the step).
fn range_key(start: i128, stop: i128, step: i128) -> (u128, i128, i128) {
    let len = range_len(start, stop, step).unwrap_or(0);
    match len {
        0 => (0, 0, 0),
        1 => (1, start, 0),
        _ => (len, start, step),
    }
}

/// The total order of set items that can equal something (see [`equals_nothing`]): `Equal`
/// exactly when Python's `==` holds.
fn set_cmp(a: &Value, b: &Value) -> Ordering {
    // The common case, first: sets of ints.
    if let (Value::Int(x), Value::Int(y)) = (a, b) {
        return x.cmp(y);
    }
    let by_rank = set_rank(a).cmp(&set_rank(b));
    if by_rank != Ordering::Equal {
        return by_rank;
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        (Value::Tuple(x), Value::Tuple(y)) => {
            for (p, q) in x.iter().zip(y) {
                let o = set_cmp(p, q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (
            Value::Range {
                start: s1,
                stop: e1,
                step: t1,
            },
            Value::Range {
                start: s2,
                stop: e2,
                step: t2,
            },
        ) => range_key(*s1, *e1, *t1).cmp(&range_key(*s2, *e2, *t2)),
        (Value::Type(x), Value::Type(y)) => x.cmp(y),
        _ => match (a.as_num(), b.as_num()) {
            (Some(x), Some(y)) => num_cmp(x, y).unwrap_or(Ordering::Equal),
            _ => Ordering::Equal,
        },
    }
}

/// `item in set`, by binary search over the sorted part of a set in set order.
fn set_contains(items: &[Value], item: &Value) -> bool {
    if equals_nothing(item) {
        return false;
    }
    // Items equal to nothing are rare, and all at the end.
    let sorted = if items.last().is_some_and(equals_nothing) {
        items.partition_point(|x| !equals_nothing(x))
    } else {
        items.len()
    };
    items[..sorted]
        .binary_search_by(|x| set_cmp(x, item))
        .is_ok()
}

fn not_orderable(op: CmpOp, a: &Value, b: &Value) -> EvalError {
    EvalError::type_error(format!(
        "'{}' not supported between instances of '{}' and '{}'",
        op.symbol(),
        a.type_name(),
        b.type_name()
    ))
}

/// `<`, `<=`, `>`, `>=`.
fn order(op: CmpOp, a: &Value, b: &Value) -> EvalResult<bool> {
    if let (Some(x), Some(y)) = (a.as_num(), b.as_num()) {
        return Ok(num_cmp(x, y).is_some_and(|o| op.holds(o)));
    }
    match (a, b) {
        // Byte order of UTF-8 is code point order, which is Python's str order.
        (Value::Str(x), Value::Str(y)) => Ok(op.holds(x.as_str().cmp(y.as_str()))),
        (Value::Tuple(x), Value::Tuple(y)) | (Value::List(x), Value::List(y)) => {
            // CPython: find the first pair that is not `==`, then compare that pair with `op`.
            match x.iter().zip(y).find(|(p, q)| !py_eq(p, q)) {
                Some((p, q)) => order(op, p, q),
                None => Ok(op.holds(x.len().cmp(&y.len()))),
            }
        }
        (Value::Set(x), Value::Set(y)) => Ok(match op {
            CmpOp::Lt => x.len() < y.len() && is_subset(x, y),
            CmpOp::Le => is_subset(x, y),
            CmpOp::Gt => y.len() < x.len() && is_subset(y, x),
            _ => is_subset(y, x),
        }),
        _ => Err(not_orderable(op, a, b)),
    }
}

/// A set or dict key must be hashable: lists and sets are not, nor tuples holding them.
pub(crate) fn check_hashable(v: &Value) -> EvalResult<()> {
    match v {
        Value::List(_) | Value::Set(_) => Err(EvalError::type_error(format!(
            "unhashable type: '{}'",
            v.type_name()
        ))),
        Value::Tuple(items) => items.iter().try_for_each(check_hashable),
        _ => Ok(()),
    }
}

fn range_contains(start: i128, stop: i128, step: i128, item: &Value) -> EvalResult<bool> {
    let i = match *item {
        Value::Bool(b) => i128::from(b),
        Value::Int(i) => i,
        // CPython falls back to iterating and comparing with `==`: only integral floats match.
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 2f64.powi(127) => {
            f as i128
        }
        _ => return Ok(false),
    };
    if step == 0 {
        return Err(EvalError::value_error("range() arg 3 must not be zero"));
    }
    let inside = if step > 0 {
        start <= i && i < stop
    } else {
        stop < i && i <= start
    };
    Ok(inside && i.abs_diff(start) % step.unsigned_abs() == 0)
}

/// `item in container`.
fn contains(container: &Value, item: &Value) -> EvalResult<bool> {
    match container {
        Value::Tuple(items) | Value::List(items) => {
            // A linear scan: charged, so a loop of them cannot run away.
            charge(items.len())?;
            Ok(items.iter().any(|x| py_eq(x, item)))
        }
        Value::Set(items) => {
            // CPython's set_contains retries an unhashable set key as a frozenset, so a set may
            // be looked up in a set (it is never found: set items are never sets here).
            match item {
                Value::Set(inner) => inner.iter().try_for_each(check_hashable)?,
                _ => check_hashable(item)?,
            }
            Ok(set_contains(items, item))
        }
        Value::Range { start, stop, step } => range_contains(*start, *stop, *step, item),
        Value::Str(s) => match item {
            Value::Str(sub) => {
                charge(s.len())?;
                Ok(s.contains(sub.as_str()))
            }
            other => Err(EvalError::type_error(format!(
                "'in <string>' requires string as left operand, not {}",
                other.type_name()
            ))),
        },
        other => Err(EvalError::type_error(format!(
            "argument of type '{}' is not iterable",
            other.type_name()
        ))),
    }
}

/// `a is b`: identity for `None`, bools and types; small-int semantics for ints (equal values of
/// the same type); false for anything else, which the runtime cannot give an identity.
fn is(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Type(x), Value::Type(y)) => x == y,
        _ => false,
    }
}

/// `a OP b` for one comparison operator (chains are split by the caller).
pub fn compare(op: CmpOp, a: &Value, b: &Value) -> EvalResult<bool> {
    match op {
        CmpOp::Eq => Ok(py_eq(a, b)),
        CmpOp::Ne => Ok(!py_eq(a, b)),
        CmpOp::In => contains(b, a),
        CmpOp::NotIn => contains(b, a).map(|found| !found),
        CmpOp::Is => Ok(is(a, b)),
        CmpOp::IsNot => Ok(!is(a, b)),
        CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => order(op, a, b),
    }
}

// ---------------------------------------------------------------------------------------------
// Subscription, slicing, iteration
// ---------------------------------------------------------------------------------------------

fn not_subscriptable(v: &Value) -> EvalError {
    match v {
        Value::Type(t) => {
            EvalError::type_error(format!("type '{}' is not subscriptable", t.name()))
        }
        _ => EvalError::type_error(format!("'{}' object is not subscriptable", v.type_name())),
    }
}

/// CPython converts a sequence index to a C `ssize_t` before looking at the length.
fn ssize_index(i: i128) -> EvalResult<i128> {
    if i64::try_from(i).is_err() {
        return Err(EvalError::index_error(
            "cannot fit 'int' into an index-sized integer",
        ));
    }
    Ok(i)
}

/// A Python index (negative counts from the end) into `len` items.
fn normalize_index(i: i128, len: usize) -> Option<usize> {
    let len = int_from_usize(len);
    let j = if i < 0 { i + len } else { i };
    if (0..len).contains(&j) {
        usize::try_from(j).ok()
    } else {
        None
    }
}

/// `v[index]`.
pub fn subscript(v: &Value, index: &Value) -> EvalResult {
    let bad_index = |what: &str| {
        EvalError::type_error(format!(
            "{what} indices must be integers or slices, not {}",
            index.type_name()
        ))
    };
    match v {
        Value::Tuple(items) | Value::List(items) => {
            let name = v.type_name();
            let i = ssize_index(index.as_index().ok_or_else(|| bad_index(name))?)?;
            normalize_index(i, items.len())
                .and_then(|k| items.get(k))
                .cloned()
                .ok_or_else(|| EvalError::index_error(format!("{name} index out of range")))
        }
        Value::Str(s) => {
            let i = ssize_index(index.as_index().ok_or_else(|| {
                EvalError::type_error(format!(
                    "string indices must be integers, not '{}'",
                    index.type_name()
                ))
            })?)?;
            normalize_index(i, s.chars().count())
                .and_then(|k| s.chars().nth(k))
                .map(|c| Value::Str(c.to_string()))
                .ok_or_else(|| EvalError::index_error("string index out of range"))
        }
        Value::Range { start, stop, step } => {
            let i = index.as_index().ok_or_else(|| bad_index("range"))?;
            let len = range_len(*start, *stop, *step)?;
            let k = if i < 0 {
                len.checked_sub(i.unsigned_abs())
            } else {
                Some(i.unsigned_abs())
            };
            match k {
                Some(k) if k < len => Ok(Value::Int(range_item(*start, *step, k))),
                _ => Err(EvalError::index_error("range object index out of range")),
            }
        }
        _ => Err(not_subscriptable(v)),
    }
}

fn slice_bound(bound: Option<&Value>) -> EvalResult<Option<i128>> {
    match bound {
        None | Some(Value::None) => Ok(None),
        Some(v) => v.as_index().map(Some).ok_or_else(|| {
            EvalError::type_error(
                "slice indices must be integers or None or have an __index__ method",
            )
        }),
    }
}

/// CPython's `PySlice_Unpack` + `PySlice_AdjustIndices` over `len` items.
struct SliceIndices {
    start: i128,
    stop: i128,
    step: i128,
    count: i128,
}

fn slice_indices(lower: Option<i128>, upper: Option<i128>, step: i128, len: i128) -> SliceIndices {
    // As CPython does, keep `-step` representable.
    let step = step.max(-i128::MAX);
    let clamp = |x: i128| {
        if x < 0 {
            let x = x + len;
            if x < 0 {
                if step < 0 { -1 } else { 0 }
            } else {
                x
            }
        } else if x >= len {
            if step < 0 { len - 1 } else { len }
        } else {
            x
        }
    };
    let start = lower.map_or(if step < 0 { len - 1 } else { 0 }, clamp);
    let stop = upper.map_or(if step < 0 { -1 } else { len }, clamp);
    let count = if step < 0 {
        if stop < start {
            (start - stop - 1) / -step + 1
        } else {
            0
        }
    } else if start < stop {
        (stop - start - 1) / step + 1
    } else {
        0
    };
    SliceIndices {
        start,
        stop,
        step,
        count,
    }
}

fn slice_items<T: Clone>(items: &[T], indices: &SliceIndices) -> Vec<T> {
    let mut out = Vec::new();
    let (mut index, step) = (indices.start, indices.step);
    for _ in 0..indices.count {
        if let Some(item) = usize::try_from(index).ok().and_then(|i| items.get(i)) {
            out.push(item.clone());
        }
        index = index.saturating_add(step);
    }
    out
}

/// `v[lower:upper:step]`; any bound may be absent (or `None`). A tuple slices to a tuple, a list
/// to a list, a str to a str and a range to a range.
pub fn slice(
    v: &Value,
    lower: Option<&Value>,
    upper: Option<&Value>,
    step: Option<&Value>,
) -> EvalResult {
    // CPython reads the step first, then the bounds.
    let step = slice_bound(step)?.unwrap_or(1);
    if step == 0 {
        return Err(EvalError::value_error("slice step cannot be zero"));
    }
    let lower = slice_bound(lower)?;
    let upper = slice_bound(upper)?;
    match v {
        Value::Tuple(items) | Value::List(items) => {
            let indices = slice_indices(lower, upper, step, int_from_usize(items.len()));
            charge(usize::try_from(indices.count).unwrap_or(usize::MAX))?;
            let out = slice_items(items, &indices);
            Ok(if matches!(v, Value::Tuple(_)) {
                Value::Tuple(out)
            } else {
                Value::List(out)
            })
        }
        Value::Str(s) => {
            charge(s.len())?;
            let chars: Vec<char> = s.chars().collect();
            let indices = slice_indices(lower, upper, step, int_from_usize(chars.len()));
            Ok(Value::Str(
                slice_items(&chars, &indices).into_iter().collect(),
            ))
        }
        Value::Range {
            start: r_start,
            stop: r_stop,
            step: r_step,
        } => {
            let len = range_len(*r_start, *r_stop, *r_step)?;
            let len = i128::try_from(len).map_err(|_| EvalError::int_overflow())?;
            let indices = slice_indices(lower, upper, step, len);
            // CPython's compute_slice: range(r[start], r[stop], r.step * step), where r[k] is
            // r.start + k * r.step even for k outside the range.
            let at = |k: i128| {
                k.checked_mul(*r_step)
                    .and_then(|x| x.checked_add(*r_start))
                    .ok_or_else(EvalError::int_overflow)
            };
            Ok(Value::Range {
                start: at(indices.start)?,
                stop: at(indices.stop)?,
                step: r_step
                    .checked_mul(indices.step)
                    .ok_or_else(EvalError::int_overflow)?,
            })
        }
        _ => Err(not_subscriptable(v)),
    }
}

/// The items of an iterable (tuple, list, set, range, str), in Python's iteration order.
///
/// This builds a `Vec`, charged to the work budget; generated comprehensions stream with
/// [`iter`](super::stream::iter) instead.
pub fn iterate(v: &Value) -> EvalResult<Vec<Value>> {
    match v {
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => {
            charge(items.len())?;
            Ok(items.clone())
        }
        Value::Str(s) => {
            charge(s.len())?;
            Ok(s.chars().map(|c| Value::Str(c.to_string())).collect())
        }
        Value::Range { start, stop, step } => {
            let len = range_len(*start, *stop, *step)?;
            let n = usize::try_from(len).unwrap_or(usize::MAX);
            check_len(n)?;
            // `n` is at most MAX_ITEMS here; a `u128` range would not size the Vec up front.
            let mut items = Vec::with_capacity(n);
            items.extend((0..n).map(|k| Value::Int(range_item(*start, *step, k as u128))));
            Ok(items)
        }
        _ => Err(EvalError::type_error(format!(
            "'{}' object is not iterable",
            v.type_name()
        ))),
    }
}

/// Unpacks an iterable into exactly `n` values, as a `for a, b in ...` target does.
pub fn unpack(v: Value, n: usize) -> EvalResult<Vec<Value>> {
    let items = match v {
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => items,
        Value::Str(_) | Value::Range { .. } => iterate(&v)?,
        other => {
            return Err(EvalError::type_error(format!(
                "cannot unpack non-iterable {} object",
                other.type_name()
            )));
        }
    };
    match items.len().cmp(&n) {
        Ordering::Equal => Ok(items),
        Ordering::Greater => Err(EvalError::value_error(format!(
            "too many values to unpack (expected {n})"
        ))),
        Ordering::Less => Err(EvalError::value_error(format!(
            "not enough values to unpack (expected {n}, got {})",
            items.len()
        ))),
    }
}

/// Builds a set: items deduplicated by Python equality (`1`, `1.0` and `True` are one item; the
/// first one seen is kept), in set order: numbers ascending, then `None`, strs, tuples, ranges
/// and types, each sorted, then the items equal to nothing (NaNs) as inserted. A list or set item
/// is a `TypeError` (unhashable). `O(n log n)`.
pub fn make_set(items: Vec<Value>) -> EvalResult {
    charge(items.len())?;
    for item in &items {
        check_hashable(item)?;
    }
    // Already in set order with no duplicates (`set(range(n))`, a set rebuilt): one pass.
    if items
        .windows(2)
        .all(|w| set_cmp(&w[0], &w[1]) == Ordering::Less)
        && !items.iter().any(equals_nothing)
    {
        return Ok(Value::Set(items));
    }
    // Only ints: equal ones are indistinguishable, so an unstable sort on the int is exact.
    if items.iter().all(|x| matches!(x, Value::Int(_))) {
        let mut ints: Vec<i128> = items
            .iter()
            .map(|x| match x {
                Value::Int(i) => *i,
                _ => 0,
            })
            .collect();
        ints.sort_unstable();
        ints.dedup();
        return Ok(Value::Set(ints.into_iter().map(Value::Int).collect()));
    }
    let (mut sorted, odd): (Vec<Value>, Vec<Value>) =
        items.into_iter().partition(|x| !equals_nothing(x));
    // Stable, so among equal items the first one seen comes first and is the one kept.
    sorted.sort_by(set_cmp);
    sorted.dedup_by(|later, earlier| set_cmp(later, earlier) == Ordering::Equal);
    sorted.extend(odd);
    Ok(Value::Set(sorted))
}

/// A value from outside (a struct field) with every set in it put in set order, which lookups
/// rely on. A set that cannot be one (an unhashable item) is left as it is.
fn canonical(v: Value) -> Value {
    match v {
        Value::Set(items) => {
            let items: Vec<Value> = items.into_iter().map(canonical).collect();
            match make_set(items.clone()) {
                Ok(set) => set,
                Err(_) => Value::Set(items),
            }
        }
        Value::Tuple(items) => Value::Tuple(items.into_iter().map(canonical).collect()),
        Value::List(items) => Value::List(items.into_iter().map(canonical).collect()),
        other => other,
    }
}

/// A struct field as a formula value.
pub fn param<T: Clone + Into<Value>>(field: &T) -> Value {
    canonical(field.clone().into())
}

/// The final value of `flops` or `bytes` as a count: an int or bool, or a finite float `>= 0`
/// below 2^64 (truncated like Python's `int()`); anything else is an error naming the value.
pub fn to_count(v: &Value) -> EvalResult<u64> {
    let bad = |why: &str| {
        EvalError::value_error(format!(
            "expected a count (an int or a finite float >= 0 that fits in u64), got {v} ({}){why}",
            v.type_name()
        ))
    };
    match *v {
        Value::Bool(b) => Ok(u64::from(b)),
        Value::Int(i) => u64::try_from(i).map_err(|_| {
            bad(if i < 0 {
                ", which is negative"
            } else {
                ", which does not fit in u64"
            })
        }),
        Value::Float(f) => {
            if !f.is_finite() {
                Err(bad(", which is not finite"))
            } else if f < 0.0 {
                Err(bad(", which is negative"))
            } else if f >= 18_446_744_073_709_551_616.0 {
                Err(bad(", which does not fit in u64"))
            } else {
                // In range and finite: `as` truncates toward zero exactly like `int()`.
                Ok(f as u64)
            }
        }
        _ => Err(bad("")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn i(x: i128) -> Value {
        Value::Int(x)
    }
    fn f(x: f64) -> Value {
        Value::Float(x)
    }
    fn b(x: bool) -> Value {
        Value::Bool(x)
    }
    fn s(x: &str) -> Value {
        Value::Str(x.to_owned())
    }
    fn tup(items: Vec<Value>) -> Value {
        Value::Tuple(items)
    }
    fn list(items: Vec<Value>) -> Value {
        Value::List(items)
    }
    fn set(items: Vec<Value>) -> Value {
        make_set(items).unwrap()
    }
    fn range(start: i128, stop: i128, step: i128) -> Value {
        Value::Range { start, stop, step }
    }
    fn ints(xs: &[i128]) -> Vec<Value> {
        xs.iter().map(|&x| Value::Int(x)).collect()
    }

    type BinOp = fn(&Value, &Value) -> EvalResult;

    /// Asserts structural equality, and for floats the exact bits (so `-0.0` and `0.0` differ).
    fn assert_value(got: &Value, expected: &Value, context: &str) {
        match (got, expected) {
            (Value::Float(x), Value::Float(y)) => {
                assert!(
                    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                    "{context}: got {x:?}, expected {y:?}"
                );
            }
            _ => assert_eq!(got, expected, "{context}"),
        }
    }

    fn check_ok(name: &str, op: BinOp, cases: &[(Value, Value, Value)]) {
        for (a, b, expected) in cases {
            let got = op(a, b).unwrap_or_else(|e| panic!("{a} {name} {b}: {e}"));
            assert_value(&got, expected, &format!("{a} {name} {b}"));
        }
    }

    fn check_err(name: &str, op: BinOp, cases: &[(Value, Value, &str)]) {
        for (a, b, expected) in cases {
            match op(a, b) {
                Ok(v) => panic!("{a} {name} {b}: expected error {expected}, got {v}"),
                Err(e) => assert_eq!(e.message, *expected, "{a} {name} {b}"),
            }
        }
    }

    const OVERFLOW: &str = "OverflowError: integer overflow (tileops integers are 128-bit)";

    #[test]
    fn add_follows_python() {
        check_ok(
            "+",
            add,
            &[
                (i(1), i(2), i(3)),
                (b(true), b(true), i(2)),
                (b(true), i(1), i(2)),
                (i(1), f(0.5), f(1.5)),
                (f(0.1), f(0.2), f(0.30000000000000004)),
                (b(true), f(0.5), f(1.5)),
                (s("ab"), s("c"), s("abc")),
                (tup(ints(&[1])), tup(ints(&[2, 3])), tup(ints(&[1, 2, 3]))),
                (list(ints(&[1])), list(vec![]), list(ints(&[1]))),
                (i(i128::MAX - 1), i(1), i(i128::MAX)),
            ],
        );
        check_err(
            "+",
            add,
            &[
                (i(i128::MAX), i(1), OVERFLOW),
                (i(i128::MIN), i(-1), OVERFLOW),
                (
                    i(1),
                    s("a"),
                    "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
                ),
                (
                    s("a"),
                    i(1),
                    "TypeError: can only concatenate str (not \"int\") to str",
                ),
                (
                    list(vec![]),
                    tup(vec![]),
                    "TypeError: can only concatenate list (not \"tuple\") to list",
                ),
                (
                    tup(vec![]),
                    list(vec![]),
                    "TypeError: can only concatenate tuple (not \"list\") to tuple",
                ),
                (
                    Value::None,
                    i(1),
                    "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'",
                ),
                (
                    set(vec![]),
                    set(vec![]),
                    "TypeError: unsupported operand type(s) for +: 'set' and 'set'",
                ),
            ],
        );
    }

    #[test]
    fn sub_follows_python() {
        check_ok(
            "-",
            sub,
            &[
                (i(1), i(3), i(-2)),
                (b(false), b(true), i(-1)),
                (f(1.5), i(1), f(0.5)),
                (set(ints(&[1, 2, 3])), set(vec![f(2.0)]), set(ints(&[1, 3]))),
            ],
        );
        check_err(
            "-",
            sub,
            &[
                (i(i128::MIN), i(1), OVERFLOW),
                (
                    s("a"),
                    s("a"),
                    "TypeError: unsupported operand type(s) for -: 'str' and 'str'",
                ),
            ],
        );
    }

    #[test]
    fn mul_follows_python() {
        check_ok(
            "*",
            mul,
            &[
                (i(6), i(7), i(42)),
                (b(true), i(5), i(5)),
                (i(2), f(0.25), f(0.5)),
                (s("ab"), i(3), s("ababab")),
                (i(2), s("x"), s("xx")),
                (s("ab"), i(-1), s("")),
                (tup(ints(&[1, 2])), i(2), tup(ints(&[1, 2, 1, 2]))),
                (list(ints(&[0])), i(3), list(ints(&[0, 0, 0]))),
                (list(ints(&[0])), b(true), list(ints(&[0]))),
                (b(false), tup(ints(&[1])), tup(vec![])),
                (i(1 << 62), i(1 << 64), i(1 << 126)),
            ],
        );
        check_err(
            "*",
            mul,
            &[
                (i(1 << 64), i(1 << 64), OVERFLOW),
                (i(i128::MIN), i(-1), OVERFLOW),
                (
                    list(vec![]),
                    f(2.0),
                    "TypeError: can't multiply sequence by non-int of type 'float'",
                ),
                (
                    f(2.0),
                    s("a"),
                    "TypeError: can't multiply sequence by non-int of type 'float'",
                ),
                (
                    s("a"),
                    s("a"),
                    "TypeError: can't multiply sequence by non-int of type 'str'",
                ),
                (
                    Value::None,
                    i(2),
                    "TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'",
                ),
            ],
        );
        assert!(
            mul(&list(ints(&[1, 2])), &i(1 << 40))
                .unwrap_err()
                .message
                .starts_with("MemoryError")
        );
        assert!(
            mul(&s("ab"), &i(i128::MAX))
                .unwrap_err()
                .message
                .starts_with("MemoryError")
        );
    }

    #[test]
    fn truediv_follows_python() {
        let big = 1i128 << 100;
        check_ok(
            "/",
            truediv,
            &[
                (i(1), i(2), f(0.5)),
                (i(6), i(3), f(2.0)),
                (i(-7), i(2), f(-3.5)),
                (b(true), b(true), f(1.0)),
                (i(1), f(4.0), f(0.25)),
                (f(1.0), i(3), f(1.0 / 3.0)),
                (i(big), i(1), f(2f64.powi(100))),
                (i(big), i(3), f(4.2255020007607644e29)),
                (i(1), i(big), f(7.888609052210118e-31)),
                // 2**53 + 1 is not a double; Python rounds the exact quotient once.
                (i((1 << 53) + 1), i(1), f(9007199254740992.0)),
                (i(i128::MAX), i(i128::MIN), f(-1.0)),
                (i(i128::MIN), i(3), f(-5.671372782015641e37)),
                (i(10i128.pow(30)), i(7), f(1.4285714285714285e29)),
                (i((1 << 54) + 3), i(2), f(9007199254740994.0)),
            ],
        );
        check_err(
            "/",
            truediv,
            &[
                (i(1), i(0), "ZeroDivisionError: division by zero"),
                (i(1), b(false), "ZeroDivisionError: division by zero"),
                (f(1.0), f(0.0), "ZeroDivisionError: float division by zero"),
                (i(1), f(-0.0), "ZeroDivisionError: float division by zero"),
                (
                    s("a"),
                    i(1),
                    "TypeError: unsupported operand type(s) for /: 'str' and 'int'",
                ),
            ],
        );
    }

    #[test]
    fn floordiv_follows_python() {
        check_ok(
            "//",
            floordiv,
            &[
                (i(7), i(2), i(3)),
                (i(-7), i(2), i(-4)),
                (i(7), i(-2), i(-4)),
                (i(-7), i(-2), i(3)),
                (i(6), i(3), i(2)),
                (i(0), i(-3), i(0)),
                (b(true), b(true), i(1)),
                (f(-7.0), i(2), f(-4.0)),
                (f(7.5), f(2.0), f(3.0)),
                (f(7.5), f(-2.0), f(-4.0)),
                (f(-0.5), f(1.0), f(-1.0)),
                (f(0.0), f(-1.0), f(-0.0)),
                (f(1.0), f(0.1), f(9.0)),
                (f(f64::INFINITY), f(1.0), f(f64::NAN)),
                (f(1.0), f(f64::INFINITY), f(0.0)),
                (f(-1.0), f(f64::INFINITY), f(-1.0)),
                (i(i128::MIN), i(1), i(i128::MIN)),
                (i(i128::MIN), i(2), i(i128::MIN / 2)),
            ],
        );
        check_err(
            "//",
            floordiv,
            &[
                (
                    i(1),
                    i(0),
                    "ZeroDivisionError: integer division or modulo by zero",
                ),
                (
                    f(1.0),
                    i(0),
                    "ZeroDivisionError: float floor division by zero",
                ),
                (i(i128::MIN), i(-1), OVERFLOW),
                (
                    s("a"),
                    i(1),
                    "TypeError: unsupported operand type(s) for //: 'str' and 'int'",
                ),
            ],
        );
    }

    #[test]
    fn modulo_follows_python() {
        check_ok(
            "%",
            modulo,
            &[
                (i(7), i(3), i(1)),
                (i(-1), i(3), i(2)),
                (i(1), i(-3), i(-2)),
                (i(-7), i(-3), i(-1)),
                (i(6), i(3), i(0)),
                (b(true), i(2), i(1)),
                (f(7.5), f(-2.0), f(-0.5)),
                (f(-7.5), f(2.0), f(0.5)),
                (f(7.5), i(2), f(1.5)),
                (f(6.0), f(-3.0), f(-0.0)),
                (f(-6.0), f(3.0), f(0.0)),
                (f(1.0), f(0.1), f(0.09999999999999995)),
                (f(-1.0), f(f64::INFINITY), f(f64::INFINITY)),
                (i(i128::MIN), i(-1), i(0)),
                (i(i128::MIN), i(i128::MAX), i(i128::MAX - 1)),
            ],
        );
        check_err(
            "%",
            modulo,
            &[
                (i(1), i(0), "ZeroDivisionError: integer modulo by zero"),
                (
                    b(true),
                    b(false),
                    "ZeroDivisionError: integer modulo by zero",
                ),
                (f(1.0), f(0.0), "ZeroDivisionError: float modulo by zero"),
                (
                    Value::None,
                    i(1),
                    "TypeError: unsupported operand type(s) for %: 'NoneType' and 'int'",
                ),
            ],
        );
        assert!(
            modulo(&s("%d"), &i(1))
                .unwrap_err()
                .message
                .starts_with("TypeError: printf-style")
        );
    }

    #[test]
    fn pow_follows_python() {
        check_ok(
            "**",
            pow,
            &[
                (i(2), i(10), i(1024)),
                (i(2), i(0), i(1)),
                (i(0), i(0), i(1)),
                (i(0), i(5), i(0)),
                (i(-1), i(1 << 100), i(1)),
                (i(-1), i((1 << 100) + 1), i(-1)),
                (i(1), i(i128::MAX), i(1)),
                (i(-3), i(3), i(-27)),
                (i(2), i(126), i(1 << 126)),
                (b(true), i(5), i(1)),
                (i(2), b(true), i(2)),
                (i(2), i(-1), f(0.5)),
                (i(-2), i(-1), f(-0.5)),
                (i(4), f(0.5), f(2.0)),
                (f(2.0), i(3), f(8.0)),
                (f(-8.0), f(3.0), f(-512.0)),
                (f(-2.0), i(2), f(4.0)),
                (f(0.0), f(0.0), f(1.0)),
                (f(f64::NAN), i(0), f(1.0)),
                (f(1.0), f(f64::NAN), f(1.0)),
                (f(f64::NAN), i(1), f(f64::NAN)),
                (f(0.5), f(f64::INFINITY), f(0.0)),
                (f(2.0), f(f64::NEG_INFINITY), f(0.0)),
                (f(-1.0), f(f64::INFINITY), f(1.0)),
                (f(f64::NEG_INFINITY), i(3), f(f64::NEG_INFINITY)),
                (f(f64::NEG_INFINITY), i(-3), f(-0.0)),
                (f(f64::INFINITY), f(0.5), f(f64::INFINITY)),
                (f(-0.0), i(3), f(-0.0)),
                (f(-0.0), f(2.0), f(0.0)),
                (f(-1.0), f(1e300), f(1.0)),
                (f(2.0), f(-2000.0), f(0.0)),
            ],
        );
        check_err(
            "**",
            pow,
            &[
                (i(2), i(127), OVERFLOW),
                (i(2), i(1 << 40), OVERFLOW),
                (
                    i(0),
                    i(-1),
                    "ZeroDivisionError: 0.0 cannot be raised to a negative power",
                ),
                (
                    f(0.0),
                    f(-0.5),
                    "ZeroDivisionError: 0.0 cannot be raised to a negative power",
                ),
                (
                    f(10.0),
                    i(400),
                    "OverflowError: (34, 'Numerical result out of range')",
                ),
                (
                    s("a"),
                    i(2),
                    "TypeError: unsupported operand type(s) for ** or pow(): 'str' and 'int'",
                ),
            ],
        );
        let err = pow(&f(-8.0), &f(1.0 / 3.0)).unwrap_err();
        assert!(
            err.message.starts_with("ValueError: a negative number"),
            "{err}"
        );
        assert!(pow(&i(-8), &f(0.5)).is_err());
    }

    #[test]
    fn unary_operators() {
        type UnOp = fn(&Value) -> EvalResult;
        let cases: &[(UnOp, Value, Value)] = &[
            (neg, i(3), i(-3)),
            (neg, b(true), i(-1)),
            (neg, f(0.0), f(-0.0)),
            (neg, i(i128::MAX), i(-i128::MAX)),
            (pos, b(true), i(1)),
            (pos, f(-1.5), f(-1.5)),
            (not, i(0), b(true)),
            (not, s("x"), b(false)),
            (not, Value::None, b(true)),
        ];
        for (op, a, expected) in cases {
            assert_value(&op(a).unwrap(), expected, &a.to_string());
        }
        assert_eq!(neg(&i(i128::MIN)).unwrap_err().message, OVERFLOW);
        assert_eq!(
            neg(&s("a")).unwrap_err().message,
            "TypeError: bad operand type for unary -: 'str'"
        );
        assert_eq!(
            pos(&Value::None).unwrap_err().message,
            "TypeError: bad operand type for unary +: 'NoneType'"
        );
    }

    #[test]
    fn truthiness() {
        let cases = [
            (Value::None, false),
            (b(false), false),
            (b(true), true),
            (i(0), false),
            (i(-1), true),
            (f(0.0), false),
            (f(-0.0), false),
            (f(f64::NAN), true),
            (s(""), false),
            (s("0"), true),
            (tup(vec![]), false),
            (tup(vec![i(0)]), true),
            (list(vec![]), false),
            (set(vec![]), false),
            (set(vec![i(0)]), true),
            (range(0, 0, 1), false),
            (range(5, 0, -1), true),
            (Value::Type(crate::roofline::PyType::Int), true),
        ];
        for (v, expected) in cases {
            assert_eq!(truthy(&v), Ok(expected), "{v}");
        }
    }

    fn cmp(op: CmpOp, a: &Value, b: &Value) -> bool {
        compare(op, a, b).unwrap_or_else(|e| panic!("{a} {} {b}: {e}", op.symbol()))
    }

    #[test]
    fn equality_follows_python() {
        let equal = [
            (i(1), f(1.0)),
            (b(true), i(1)),
            (b(true), f(1.0)),
            (b(false), f(-0.0)),
            (Value::None, Value::None),
            (s("a"), s("a")),
            (tup(ints(&[1, 2])), tup(vec![f(1.0), i(2)])),
            (list(vec![]), list(vec![])),
            (set(ints(&[1, 2])), set(ints(&[2, 1]))),
            (range(0, 0, 1), range(5, 2, 1)),
            (range(0, 3, 2), range(0, 4, 2)),
            (range(1, 2, 5), range(1, 3, 7)),
            (
                Value::Type(crate::roofline::PyType::Int),
                Value::Type(crate::roofline::PyType::Int),
            ),
            (i(1 << 60), f(2f64.powi(60))),
        ];
        for (a, b) in &equal {
            assert!(cmp(CmpOp::Eq, a, b), "{a} == {b}");
            assert!(cmp(CmpOp::Eq, b, a), "{b} == {a}");
            assert!(!cmp(CmpOp::Ne, a, b), "{a} != {b}");
        }
        let different = [
            (i(1), s("1")),
            (tup(ints(&[1])), list(ints(&[1]))),
            (f(f64::NAN), f(f64::NAN)),
            (i((1 << 53) + 1), f(2f64.powi(53))),
            (i(i128::MAX), f(2f64.powi(127))),
            (Value::None, i(0)),
            (tup(ints(&[1, 2])), tup(ints(&[1]))),
            (range(0, 3, 1), tup(ints(&[0, 1, 2]))),
            (set(ints(&[1])), list(ints(&[1]))),
            (s("a"), Value::Type(crate::roofline::PyType::Str)),
        ];
        for (a, b) in &different {
            assert!(!cmp(CmpOp::Eq, a, b), "{a} == {b}");
            assert!(cmp(CmpOp::Ne, a, b), "{a} != {b}");
        }
    }

    #[test]
    fn ordering_follows_python() {
        use CmpOp::*;
        let cases = [
            (Lt, i(1), i(2), true),
            (Lt, i(2), f(2.5), true),
            (Ge, f(2.0), i(2), true),
            (Gt, b(true), b(false), true),
            (Le, b(true), f(1.0), true),
            (Gt, i((1 << 53) + 1), f(2f64.powi(53)), true),
            (Lt, i(i128::MAX), f(2f64.powi(127)), true),
            (Gt, i(i128::MIN), f(f64::NEG_INFINITY), true),
            (Lt, i(i128::MIN), f(-(2f64.powi(127))), false),
            (Le, i(i128::MIN), f(-(2f64.powi(127))), true),
            (Lt, f(f64::NAN), i(1), false),
            (Ge, f(f64::NAN), f(f64::NAN), false),
            (Lt, s("abc"), s("abd"), true),
            (Lt, s("ab"), s("abc"), true),
            (Gt, s("b"), s("abc"), true),
            (Lt, s("Z"), s("a"), true),
            (Lt, s("é"), s("z"), false),
            (Lt, tup(ints(&[1, 2])), tup(ints(&[1, 3])), true),
            (Lt, tup(ints(&[1, 2])), tup(ints(&[1, 2, 0])), true),
            (Ge, tup(ints(&[1, 2])), tup(vec![f(1.0), i(2)]), true),
            (Gt, tup(ints(&[2])), tup(vec![i(1), s("x")]), true),
            (Le, list(vec![]), list(vec![]), true),
            (Lt, list(ints(&[3])), list(ints(&[2, 9])), false),
            (Lt, set(ints(&[1])), set(ints(&[1, 2])), true),
            (Lt, set(ints(&[1, 2])), set(ints(&[1, 2])), false),
            (Le, set(ints(&[1, 2])), set(ints(&[1, 2])), true),
            (Gt, set(ints(&[1, 2])), set(ints(&[3])), false),
            (Ge, set(ints(&[1, 2, 3])), set(ints(&[3])), true),
        ];
        for (op, a, b, expected) in cases {
            assert_eq!(cmp(op, &a, &b), expected, "{a} {} {b}", op.symbol());
        }
        let errors = [
            (
                Lt,
                i(1),
                s("a"),
                "TypeError: '<' not supported between instances of 'int' and 'str'",
            ),
            (
                Ge,
                Value::None,
                Value::None,
                "TypeError: '>=' not supported between instances of 'NoneType' and 'NoneType'",
            ),
            (
                Lt,
                list(vec![]),
                tup(vec![]),
                "TypeError: '<' not supported between instances of 'list' and 'tuple'",
            ),
            (
                Gt,
                tup(ints(&[1])),
                tup(vec![s("a")]),
                "TypeError: '>' not supported between instances of 'int' and 'str'",
            ),
            (
                Lt,
                range(0, 1, 1),
                range(0, 2, 1),
                "TypeError: '<' not supported between instances of 'range' and 'range'",
            ),
        ];
        for (op, a, b, expected) in errors {
            assert_eq!(compare(op, &a, &b).unwrap_err().message, expected);
        }
    }

    #[test]
    fn membership_follows_python() {
        use CmpOp::*;
        let cases = [
            (i(2), tup(ints(&[1, 2])), true),
            (f(2.0), list(ints(&[1, 2])), true),
            (b(true), set(ints(&[1])), true),
            (i(3), set(ints(&[1])), false),
            (tup(ints(&[1])), set(vec![tup(ints(&[1]))]), true),
            (i(4), range(0, 10, 2), true),
            (i(5), range(0, 10, 2), false),
            (i(10), range(0, 10, 2), false),
            (i(-2), range(0, 10, 2), false),
            (i(7), range(10, 0, -3), true),
            (i(10), range(10, 0, -3), true),
            (i(0), range(10, 0, -3), false),
            (f(4.0), range(0, 10, 2), true),
            (f(4.5), range(0, 10, 2), false),
            (s("4"), range(0, 10, 2), false),
            (b(true), range(0, 2, 1), true),
            (i(i128::MAX - 1), range(i128::MIN, i128::MAX, 1), true),
            (s("an"), s("tanh"), true),
            (s(""), s("x"), true),
            (s("x"), s("tanh"), false),
            (list(ints(&[1])), list(vec![list(ints(&[1]))]), true),
            (set(ints(&[1])), set(ints(&[1, 2])), false),
            (set(vec![]), set(vec![]), false),
        ];
        for (item, container, expected) in cases {
            assert_eq!(
                cmp(In, &item, &container),
                expected,
                "{item} in {container}"
            );
            assert_eq!(
                cmp(NotIn, &item, &container),
                !expected,
                "{item} not in {container}"
            );
        }
        let errors = [
            (
                i(1),
                i(2),
                "TypeError: argument of type 'int' is not iterable",
            ),
            (
                i(1),
                s("1"),
                "TypeError: 'in <string>' requires string as left operand, not int",
            ),
            (
                list(vec![]),
                set(vec![]),
                "TypeError: unhashable type: 'list'",
            ),
            (
                tup(vec![set(vec![])]),
                set(vec![]),
                "TypeError: unhashable type: 'set'",
            ),
        ];
        for (item, container, expected) in errors {
            assert_eq!(
                compare(In, &item, &container).unwrap_err().message,
                expected
            );
        }
    }

    #[test]
    fn identity_follows_python() {
        use CmpOp::*;
        let cases = [
            (Value::None, Value::None, true),
            (b(true), b(true), true),
            (b(true), i(1), false),
            (i(5), i(5), true),
            (i(5), f(5.0), false),
            (Value::None, b(false), false),
            (s("a"), s("a"), false),
            (tup(vec![]), tup(vec![]), false),
            (
                Value::Type(crate::roofline::PyType::Int),
                Value::Type(crate::roofline::PyType::Int),
                true,
            ),
        ];
        for (a, b, expected) in cases {
            assert_eq!(cmp(Is, &a, &b), expected, "{a} is {b}");
            assert_eq!(cmp(IsNot, &a, &b), !expected, "{a} is not {b}");
        }
    }

    #[test]
    fn subscript_follows_python() {
        let t = tup(ints(&[10, 20, 30]));
        let cases = [
            (t.clone(), i(0), i(10)),
            (t.clone(), i(-1), i(30)),
            (t.clone(), i(-3), i(10)),
            (t.clone(), b(true), i(20)),
            (list(ints(&[1, 2])), i(1), i(2)),
            (s("tanh"), i(-1), s("h")),
            (s("日本"), i(1), s("本")),
            (range(0, 10, 3), i(1), i(3)),
            (range(0, 10, 3), i(-1), i(9)),
            (range(10, 0, -3), i(3), i(1)),
            (range(i128::MIN, i128::MAX, 1), i(-1), i(i128::MAX - 1)),
        ];
        for (v, index, expected) in cases {
            assert_eq!(subscript(&v, &index), Ok(expected), "{v}[{index}]");
        }
        let errors = [
            (t.clone(), i(3), "IndexError: tuple index out of range"),
            (t.clone(), i(-4), "IndexError: tuple index out of range"),
            (
                t.clone(),
                i(-(1 << 63)),
                "IndexError: tuple index out of range",
            ),
            (
                t.clone(),
                i(i128::MIN),
                "IndexError: cannot fit 'int' into an index-sized integer",
            ),
            (
                s("ab"),
                i(1 << 63),
                "IndexError: cannot fit 'int' into an index-sized integer",
            ),
            (
                Value::Type(crate::roofline::PyType::Int),
                i(0),
                "TypeError: type 'int' is not subscriptable",
            ),
            (list(vec![]), i(0), "IndexError: list index out of range"),
            (s(""), i(0), "IndexError: string index out of range"),
            (
                range(0, 3, 1),
                i(3),
                "IndexError: range object index out of range",
            ),
            (
                range(0, 3, 1),
                i(-4),
                "IndexError: range object index out of range",
            ),
            (
                t.clone(),
                f(1.0),
                "TypeError: tuple indices must be integers or slices, not float",
            ),
            (
                list(vec![]),
                s("a"),
                "TypeError: list indices must be integers or slices, not str",
            ),
            (
                s("a"),
                Value::None,
                "TypeError: string indices must be integers, not 'NoneType'",
            ),
            (
                range(0, 3, 1),
                f(0.0),
                "TypeError: range indices must be integers or slices, not float",
            ),
            (
                set(ints(&[1])),
                i(0),
                "TypeError: 'set' object is not subscriptable",
            ),
            (i(5), i(0), "TypeError: 'int' object is not subscriptable"),
        ];
        for (v, index, expected) in errors {
            assert_eq!(
                subscript(&v, &index).unwrap_err().message,
                expected,
                "{v}[{index}]"
            );
        }
    }

    fn sl(
        v: &Value,
        lower: Option<Value>,
        upper: Option<Value>,
        step: Option<Value>,
    ) -> EvalResult {
        slice(v, lower.as_ref(), upper.as_ref(), step.as_ref())
    }

    #[test]
    fn slice_follows_python() {
        let t = tup(ints(&[0, 1, 2, 3, 4]));
        let l = list(ints(&[0, 1, 2, 3, 4]));
        let cases = [
            (t.clone(), None, Some(i(-1)), None, tup(ints(&[0, 1, 2, 3]))),
            (t.clone(), Some(i(1)), Some(i(3)), None, tup(ints(&[1, 2]))),
            (t.clone(), Some(i(-2)), None, None, tup(ints(&[3, 4]))),
            (t.clone(), None, None, Some(i(2)), tup(ints(&[0, 2, 4]))),
            (
                t.clone(),
                None,
                None,
                Some(i(-1)),
                tup(ints(&[4, 3, 2, 1, 0])),
            ),
            (
                t.clone(),
                Some(i(3)),
                Some(i(0)),
                Some(i(-1)),
                tup(ints(&[3, 2, 1])),
            ),
            (t.clone(), Some(i(-100)), Some(i(100)), None, t.clone()),
            (
                t.clone(),
                Some(i(100)),
                None,
                Some(i(-2)),
                tup(ints(&[4, 2, 0])),
            ),
            (t.clone(), Some(i(3)), Some(i(1)), None, tup(vec![])),
            (
                t.clone(),
                Some(Value::None),
                Some(Value::None),
                Some(Value::None),
                t.clone(),
            ),
            (
                t.clone(),
                Some(b(true)),
                None,
                None,
                tup(ints(&[1, 2, 3, 4])),
            ),
            (t.clone(), None, None, Some(i(i128::MIN)), tup(ints(&[4]))),
            (
                t.clone(),
                Some(i(i128::MIN)),
                Some(i(i128::MAX)),
                Some(i(i128::MAX)),
                tup(ints(&[0])),
            ),
            (l.clone(), Some(i(1)), None, Some(i(3)), list(ints(&[1, 4]))),
            (
                l.clone(),
                None,
                Some(i(-6)),
                Some(i(-1)),
                list(ints(&[4, 3, 2, 1, 0])),
            ),
            (s("tanh"), Some(i(1)), Some(i(-1)), None, s("an")),
            (s("tanh"), None, None, Some(i(-1)), s("hnat")),
            (
                range(0, 10, 1),
                Some(i(2)),
                Some(i(8)),
                Some(i(3)),
                range(2, 8, 3),
            ),
            (range(0, 10, 1), None, None, Some(i(-1)), range(9, -1, -1)),
            (range(0, 10, 2), Some(i(1)), None, None, range(2, 10, 2)),
            (
                range(0, 10, 2),
                Some(i(-2)),
                Some(i(-100)),
                Some(i(-2)),
                range(6, -2, -4),
            ),
            (range(5, 0, -1), Some(i(10)), None, None, range(0, 0, -1)),
            (
                range(0, 10, 1),
                Some(i(2)),
                Some(i(7)),
                Some(i(3)),
                range(2, 7, 3),
            ),
        ];
        for (v, lower, upper, step, expected) in cases {
            let context = format!("{v}[{lower:?}:{upper:?}:{step:?}]");
            let got = sl(&v, lower, upper, step).unwrap_or_else(|e| panic!("{context}: {e}"));
            // Ranges compare by their items, as Python's `==` does.
            assert_eq!(got.to_string(), expected.to_string(), "{context}");
            assert!(
                py_eq(&got, &expected),
                "{context}: got {got}, expected {expected}"
            );
            assert_eq!(
                iterate(&got).unwrap().len(),
                iterate(&expected).unwrap().len(),
                "{context}"
            );
        }
        let errors = [
            (
                t.clone(),
                None,
                None,
                Some(i(0)),
                "ValueError: slice step cannot be zero",
            ),
            (
                t.clone(),
                Some(f(1.0)),
                None,
                None,
                "TypeError: slice indices must be integers or None or have an __index__ method",
            ),
            (
                set(vec![]),
                None,
                None,
                None,
                "TypeError: 'set' object is not subscriptable",
            ),
            (
                i(1),
                None,
                None,
                None,
                "TypeError: 'int' object is not subscriptable",
            ),
        ];
        for (v, lower, upper, step, expected) in errors {
            assert_eq!(sl(&v, lower, upper, step).unwrap_err().message, expected);
        }
    }

    #[test]
    fn range_slices_iterate_like_python() {
        // list(range(3, 20, 4)[::-2]) == [19, 11, 3]
        let r = sl(&range(3, 20, 4), None, None, Some(i(-2))).unwrap();
        assert_eq!(iterate(&r).unwrap(), ints(&[19, 11, 3]));
        // list(range(10)[-3:]) == [7, 8, 9]
        let r = sl(&range(0, 10, 1), Some(i(-3)), None, None).unwrap();
        assert_eq!(iterate(&r).unwrap(), ints(&[7, 8, 9]));
        assert_eq!(r.to_string(), "range(7, 10)");
    }

    #[test]
    fn iterate_follows_python() {
        let cases = [
            (tup(ints(&[1, 2])), ints(&[1, 2])),
            (list(vec![s("a")]), vec![s("a")]),
            (set(ints(&[3, 1, 2])), ints(&[1, 2, 3])),
            (range(0, 5, 2), ints(&[0, 2, 4])),
            (range(3, 0, -1), ints(&[3, 2, 1])),
            (range(0, -3, 1), vec![]),
            (s("ab"), vec![s("a"), s("b")]),
        ];
        for (v, expected) in cases {
            assert_eq!(iterate(&v), Ok(expected), "{v}");
        }
        assert_eq!(
            iterate(&i(3)).unwrap_err().message,
            "TypeError: 'int' object is not iterable"
        );
        assert_eq!(
            iterate(&Value::None).unwrap_err().message,
            "TypeError: 'NoneType' object is not iterable"
        );
        assert!(
            iterate(&range(0, 1 << 40, 1))
                .unwrap_err()
                .message
                .starts_with("MemoryError")
        );
        assert!(
            iterate(&range(0, 1, 0))
                .unwrap_err()
                .message
                .starts_with("ValueError")
        );
    }

    #[test]
    fn unpack_follows_python() {
        assert_eq!(unpack(tup(ints(&[1, 2])), 2), Ok(ints(&[1, 2])));
        assert_eq!(unpack(s("ab"), 2), Ok(vec![s("a"), s("b")]));
        assert_eq!(unpack(range(0, 2, 1), 2), Ok(ints(&[0, 1])));
        assert_eq!(
            unpack(tup(ints(&[1, 2, 3])), 2).unwrap_err().message,
            "ValueError: too many values to unpack (expected 2)"
        );
        assert_eq!(
            unpack(list(ints(&[1])), 2).unwrap_err().message,
            "ValueError: not enough values to unpack (expected 2, got 1)"
        );
        assert_eq!(
            unpack(i(1), 2).unwrap_err().message,
            "TypeError: cannot unpack non-iterable int object"
        );
    }

    #[test]
    fn sets_dedup_by_python_equality_and_sort_numbers() {
        let cases = [
            (vec![i(1), f(1.0), b(true)], "{1}"),
            (vec![b(true), i(1)], "{True}"),
            (ints(&[3, 1, 2, 1]), "{1, 2, 3}"),
            (vec![i(2), f(0.5), b(false)], "{False, 0.5, 2}"),
            (vec![s("b"), i(1), s("a"), s("b")], "{1, 'a', 'b'}"),
            (
                vec![s("b"), Value::None, tup(vec![]), s("a")],
                "{None, 'a', 'b', ()}",
            ),
            (
                vec![f(f64::NAN), s("a"), f(f64::NAN), i(-3)],
                "{-3, 'a', nan, nan}",
            ),
            (vec![tup(ints(&[1])), tup(vec![f(1.0)])], "{(1,)}"),
            (vec![f(f64::NAN), i(1)], "{1, nan}"),
            (vec![], "set()"),
        ];
        for (items, expected) in cases {
            assert_eq!(make_set(items).unwrap().to_string(), expected);
        }
        assert_eq!(
            make_set(vec![list(vec![])]).unwrap_err().message,
            "TypeError: unhashable type: 'list'"
        );
        assert_eq!(
            make_set(vec![tup(vec![set(vec![])])]).unwrap_err().message,
            "TypeError: unhashable type: 'set'"
        );
    }

    #[test]
    fn params_convert_fields() {
        assert_eq!(param(&3_usize), i(3));
        assert_eq!(param(&Some(1.5_f64)), f(1.5));
        assert_eq!(param(&None::<bool>), Value::None);
        assert_eq!(param(&vec![1_i32, 2]), list(ints(&[1, 2])));
        assert_eq!(param(&String::from("mean")), s("mean"));
        assert_eq!(param(&i(7)), i(7));
    }

    #[test]
    fn counts_follow_the_contract() {
        let ok = [
            (i(0), 0),
            (i(42), 42),
            (i(i128::from(u64::MAX)), u64::MAX),
            (b(true), 1),
            (b(false), 0),
            (f(2.9), 2),
            (f(-0.0), 0),
            (f(1e19), 10_000_000_000_000_000_000),
            (f(18_446_744_073_709_549_568.0), 18_446_744_073_709_549_568),
        ];
        for (v, expected) in ok {
            assert_eq!(to_count(&v), Ok(expected), "{v}");
        }
        let bad = [
            (i(-3), "-3 (int), which is negative"),
            (
                i(i128::from(u64::MAX) + 1),
                "18446744073709551616 (int), which does not fit",
            ),
            (f(-0.5), "-0.5 (float), which is negative"),
            (f(f64::NAN), "nan (float), which is not finite"),
            (f(f64::INFINITY), "inf (float), which is not finite"),
            (
                f(2f64.powi(64)),
                "1.8446744073709552e+19 (float), which does not fit",
            ),
            (s("3"), "'3' (str)"),
            (Value::None, "None (NoneType)"),
            (tup(ints(&[1])), "(1,) (tuple)"),
        ];
        for (v, fragment) in bad {
            let err = to_count(&v).unwrap_err();
            assert!(
                err.message.starts_with("ValueError: expected a count"),
                "{err}"
            );
            assert!(err.message.contains(fragment), "{err} lacks {fragment}");
        }
    }

    #[test]
    fn correctly_rounded_int_division_matches_float_when_exact() {
        for (a, b) in [(1_i128, 3_i128), (-5, 7), (123_456_789, 1000), (1 << 52, 3)] {
            assert_eq!(int_truediv(a, b), Ok(f(a as f64 / b as f64)));
        }
        // Exercises the slow path against the fast one on operands that fit in 53 bits after
        // scaling by a power of two (exact scaling keeps the quotient's rounding identical).
        for (a, b) in [(1_i128, 3_i128), (-5, 7), (2, 3), (1, 10)] {
            let scaled = int_truediv(a << 70, b << 70);
            assert_eq!(scaled, Ok(f(a as f64 / b as f64)), "{a}/{b}");
        }
    }

    fn small_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::None),
            any::<bool>().prop_map(Value::Bool),
            (-5_i128..6).prop_map(Value::Int),
            prop_oneof![Just(i128::MIN), Just(i128::MAX), Just(-1_i128)].prop_map(Value::Int),
            prop_oneof![
                Just(0.0),
                Just(-0.0),
                Just(2.5),
                Just(-1.5),
                Just(f64::NAN),
                Just(f64::INFINITY),
                Just(1e308)
            ]
            .prop_map(Value::Float),
            "[a-c]{0,2}".prop_map(Value::Str),
            (-3_i128..4, -3_i128..4, -2_i128..3).prop_map(|(start, stop, step)| Value::Range {
                start,
                stop,
                step
            }),
            Just(Value::Type(crate::roofline::PyType::Int)),
        ];
        leaf.prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Tuple),
                prop::collection::vec(inner.clone(), 0..3).prop_map(Value::List),
                prop::collection::vec(inner, 0..3).prop_map(Value::Set),
            ]
        })
    }

    proptest! {
        #[test]
        fn int_floordiv_and_modulo_satisfy_the_division_identity(
            a in prop_oneof![-1000_i128..1000, any::<i64>().prop_map(i128::from)],
            d in prop_oneof![-50_i128..50, any::<i64>().prop_map(i128::from)],
        ) {
            let (q, r) = (floordiv(&i(a), &i(d)), modulo(&i(a), &i(d)));
            if d == 0 {
                prop_assert!(q.is_err() && r.is_err());
            } else {
                let (Ok(Value::Int(q)), Ok(Value::Int(r))) = (q, r) else {
                    return Err(TestCaseError::fail("non-int result"));
                };
                prop_assert_eq!(a, q * d + r);
                // The remainder takes the divisor's sign and is smaller than it.
                prop_assert!(r == 0 || (r < 0) == (d < 0));
                prop_assert!(r.abs() < d.abs());
            }
        }

        #[test]
        fn float_floordiv_and_modulo_agree_with_each_other(
            a in -1000_i32..1000, d in -50_i32..50, half in any::<bool>(),
        ) {
            prop_assume!(d != 0);
            let x = f64::from(a) + if half { 0.5 } else { 0.0 };
            let y = f64::from(d);
            let (Ok(Value::Float(q)), Ok(Value::Float(r))) = (floordiv(&f(x), &f(y)), modulo(&f(x), &f(y))) else {
                return Err(TestCaseError::fail("non-float result"));
            };
            prop_assert_eq!(x, q * y + r);
            prop_assert!(r == 0.0 || (r < 0.0) == (y < 0.0));
        }

        #[test]
        fn no_operation_panics(a in small_value(), b in small_value(), n in 0_usize..4) {
            for op in [add, sub, mul, truediv, floordiv, modulo, pow, subscript] {
                let _ = op(&a, &b);
            }
            for op in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne,
                       CmpOp::In, CmpOp::NotIn, CmpOp::Is, CmpOp::IsNot] {
                let _ = compare(op, &a, &b);
            }
            let _ = (neg(&a), pos(&a), not(&a), truthy(&a), iterate(&a), to_count(&a));
            let _ = slice(&a, Some(&b), None, Some(&b));
            let _ = slice(&a, None, Some(&b), None);
            let _ = unpack(a.clone(), n);
            let _ = make_set(vec![a.clone(), b.clone()]);
            let _ = a.to_string();
            for (_, helper) in crate::roofline::helpers::ALL {
                let _ = helper(&[]);
                let _ = helper(std::slice::from_ref(&a));
                let _ = helper(&[a.clone(), b.clone()]);
                let _ = helper(&[a.clone(), b.clone(), a.clone()]);
            }
        }
    }
}
