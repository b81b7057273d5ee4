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
#[inline]
pub(crate) fn check_len(len: usize) -> EvalResult<()> {
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
    floordiv_int(x, y).map(Value::Int)
}

/// `x // y` on ints: floors toward negative infinity, as Python does.
#[inline]
pub(crate) fn floordiv_int(x: i128, y: i128) -> EvalResult<i128> {
    if y == 0 {
        return Err(EvalError::zero_division(
            "integer division or modulo by zero",
        ));
    }
    // Operands that fit in 64 bits (all of a formula's usual ones) divide in hardware; an
    // `i128` division is a library call. Exact: `i64::MIN / -1`, the one quotient that does not
    // fit, takes the 128-bit path.
    if let (Ok(a), Ok(b)) = (i64::try_from(x), i64::try_from(y))
        && (a != i64::MIN || b != -1)
    {
        let (q, r) = (a / b, a % b);
        let q = if r != 0 && ((r < 0) != (b < 0)) {
            q - 1
        } else {
            q
        };
        return Ok(i128::from(q));
    }
    let q = x.checked_div(y).ok_or_else(EvalError::int_overflow)?;
    let r = x.checked_rem(y).unwrap_or(0);
    if r != 0 && ((r < 0) != (y < 0)) {
        q.checked_sub(1).ok_or_else(EvalError::int_overflow)
    } else {
        Ok(q)
    }
}

fn int_mod(x: i128, y: i128) -> EvalResult {
    mod_int(x, y).map(Value::Int)
}

/// `x % y` on ints: the result takes the sign of the divisor, as in Python.
#[inline]
pub(crate) fn mod_int(x: i128, y: i128) -> EvalResult<i128> {
    if y == 0 {
        return Err(EvalError::zero_division("integer modulo by zero"));
    }
    // An axis normalised by a rank (`dim % x.ndim`, `-1 % 3`): a dividend within one divisor
    // of 0 needs no division, which costs tens of cycles even in hardware.
    if y > 0 {
        if (0..y).contains(&x) {
            return Ok(x);
        }
        if x < 0 && x >= -y {
            return Ok(x + y);
        }
    }
    // As in `floordiv_int`: 64-bit operands in hardware (`i64::MIN % -1` is 0 either way, but
    // overflows in Rust).
    if let (Ok(a), Ok(b)) = (i64::try_from(x), i64::try_from(y))
        && (a != i64::MIN || b != -1)
    {
        let r = a % b;
        // `r + b` cannot overflow: `r` and `b` have opposite signs.
        let r = if r != 0 && ((r < 0) != (b < 0)) {
            r + b
        } else {
            r
        };
        return Ok(i128::from(r));
    }
    // `i128::MIN % -1` overflows in Rust; mathematically it is 0.
    let r = x.checked_rem(y).unwrap_or(0);
    if r != 0 && ((r < 0) != (y < 0)) {
        r.checked_add(y).ok_or_else(EvalError::int_overflow)
    } else {
        Ok(r)
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

#[inline]
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
    // Every int is a multiple of a step of ±1: no 128-bit division for the usual range.
    let size = step.unsigned_abs();
    Ok(inside && (size == 1 || i.abs_diff(start).is_multiple_of(size)))
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
#[inline]
pub(crate) fn ssize_index(i: i128) -> EvalResult<i128> {
    if i64::try_from(i).is_err() {
        return Err(EvalError::index_error(
            "cannot fit 'int' into an index-sized integer",
        ));
    }
    Ok(i)
}

/// A Python index (negative counts from the end) into `len` items.
#[inline]
pub(crate) fn normalize_index(i: i128, len: usize) -> Option<usize> {
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

pub(crate) fn slice_bound(bound: Option<&Value>) -> EvalResult<Option<i128>> {
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
pub(crate) struct SliceIndices {
    pub(crate) start: i128,
    pub(crate) stop: i128,
    pub(crate) step: i128,
    pub(crate) count: i128,
}

#[inline]
pub(crate) fn slice_indices(
    lower: Option<i128>,
    upper: Option<i128>,
    step: i128,
    len: i128,
) -> SliceIndices {
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
    let count = if step == 1 {
        // The usual `a[i:j]`, without a 128-bit division.
        (stop - start).max(0)
    } else if step < 0 {
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
#[inline]
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
mod tests;
