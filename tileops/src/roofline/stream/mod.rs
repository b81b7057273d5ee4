//! What keeps a formula's comprehensions bounded in memory and time: streaming iteration,
//! collectors whose results respect [`MAX_ITEMS`], and the work budget of one evaluation.
//!
//! Generated code for `[f(i) for i in range(n) if g(i)]` (and for a generator streamed into a
//! helper, `product(x.shape[i] for i in s)`) amounts to:
//!
//! ```
//! use tileops::roofline::{EvalError, Value, __rt, helpers};
//!
//! fn squares(n: i64) -> Result<Value, EvalError> {
//!     let _budget = __rt::Budget::enter();
//!     let mut acc = __rt::Collect::list();
//!     for i in __rt::iter(&helpers::range(&[Value::from(n)])?)? {
//!         __rt::step()?;
//!         acc.push(__rt::mul(&i, &i)?)?;
//!     }
//!     acc.finish()
//! }
//!
//! assert_eq!(squares(4)?.to_string(), "[0, 1, 4, 9]");
//! // 9,000,000 items would exceed the length limit: an error, not 9,000,000 allocations.
//! let big = || -> Result<Value, EvalError> {
//!     let _budget = __rt::Budget::enter();
//!     let mut acc = __rt::Collect::list();
//!     for _i in __rt::iter(&helpers::range(&[Value::Int(3000)])?)? {
//!         for _j in __rt::iter(&helpers::range(&[Value::Int(3000)])?)? {
//!             __rt::step()?;
//!             acc.push(Value::Int(0))?;
//!         }
//!     }
//!     acc.finish()
//! };
//! assert_eq!(
//!     big().unwrap_err().to_string(),
//!     "MemoryError: a comprehension of more than 4194304 items exceeds the tileops formula \
//!      limit of 4194304"
//! );
//! # Ok::<(), EvalError>(())
//! ```

use std::cell::Cell;
use std::marker::PhantomData;

use super::error::{EvalError, EvalResult};
use super::helpers::SumAcc;
use super::ops::{CmpOp, MAX_ITEMS, check_hashable, compare, make_set, mul};
use super::value::{Value, range_item, range_len};

/// The work one formula evaluation with a comprehension may do (33,554,432 units): each loop
/// step is a unit, each item built or copied is one (nested items and long strings included),
/// and so is each item a linear scan (`x in some_list`) visits. Real formulas use a few hundred;
/// this allows a `set(range(4194304))` a few times over and stays well under a second.
pub const MAX_WORK: usize = 1 << 25;

thread_local! {
    /// The work left to the evaluation running on this thread; `usize::MAX` when none runs
    /// under a [`Budget`], and then nothing is counted.
    static WORK_LEFT: Cell<usize> = const { Cell::new(usize::MAX) };
}

/// The work left to the running evaluation (`usize::MAX` outside a [`Budget`]): what tests of
/// the typed code compare with the value runtime's charges.
#[cfg(test)]
pub(crate) fn work_left() -> usize {
    WORK_LEFT.with(Cell::get)
}

/// Charges `units` of work to the running evaluation's budget; an error once it is spent.
/// Outside a [`Budget`] (a direct call of a runtime function) nothing is counted.
#[inline]
pub(crate) fn charge(units: usize) -> EvalResult<()> {
    // The common path is a read and maybe a write of the counter, small enough to inline where
    // generated code charges each loop step; running out is the cold path.
    let now = WORK_LEFT.with(Cell::get);
    if now == usize::MAX {
        return Ok(());
    }
    match now.checked_sub(units) {
        Some(rest) => {
            // `with` and a one-line closure inline; `LocalKey::set` is a call.
            WORK_LEFT.with(|left| left.set(rest));
            Ok(())
        }
        None => Err(out_of_work()),
    }
}

/// Spends what is left of the budget and words the error.
#[cold]
#[inline(never)]
fn out_of_work() -> EvalError {
    WORK_LEFT.with(|left| left.set(0));
    EvalError::memory_error(format!(
        "the formula does more than {MAX_WORK} units of work (items iterated, built or \
         scanned), the tileops formula limit"
    ))
}

/// A loop-invariant part of a comprehension's filter (`i not in {d % n for d in dim}` in a loop
/// over `i`), evaluated once per evaluation of the comprehension instead of once per step.
///
/// Formulas are pure: the part gives the same value, or the same error, and charges the same
/// work each time. So the first evaluation keeps the value and the work it charged, and every
/// later use charges that work again, without rebuilding the value: the budget runs out at the
/// same step, with the same error, as when the part is rebuilt each time.
///
/// ```
/// use tileops::roofline::{Value, __rt};
/// let _budget = __rt::Budget::enter();
/// let mut part = __rt::Invariant::new();
/// let mut builds = 0;
/// for _ in 0..3 {
///     let set = part.get(|| {
///         builds += 1;
///         __rt::make_set(vec![Value::Int(2), Value::Int(0)])
///     })?;
///     assert_eq!(set.to_string(), "{0, 2}");
/// }
/// assert_eq!(builds, 1);
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
///
/// Typed code keeps a set of ints (`rt::IntSetOf`) the same way: `Invariant<IntSetOf>`.
#[derive(Debug)]
pub struct Invariant<T = Value> {
    /// The value and the work its evaluation charged.
    kept: Option<(T, usize)>,
}

impl<T> Default for Invariant<T> {
    fn default() -> Self {
        Invariant { kept: None }
    }
}

impl<T> Invariant<T> {
    /// Nothing evaluated yet.
    pub fn new() -> Invariant<T> {
        Invariant::default()
    }

    /// The part's value: `eval`'s on first use, then the kept one, its work charged again.
    #[inline]
    pub fn get(&mut self, eval: impl FnOnce() -> EvalResult<T>) -> EvalResult<&T> {
        match &mut self.kept {
            Some((value, cost)) => {
                charge(*cost)?;
                Ok(value)
            }
            kept @ None => {
                let before = WORK_LEFT.with(Cell::get);
                let value = eval()?;
                let cost = before.saturating_sub(WORK_LEFT.with(Cell::get));
                Ok(&kept.insert((value, cost)).0)
            }
        }
    }
}

/// One loop step of a comprehension: one unit of work.
#[inline]
pub fn step() -> EvalResult<()> {
    charge(1)
}

/// The work budget of one formula evaluation, for as long as this guard lives (on this thread).
///
/// Generated code enters one at the start of every formula that has a comprehension. Entering
/// one inside another gives the inner one at most what the outer one has left, and charges the
/// outer one what the inner one spent.
///
/// ```
/// use tileops::roofline::{Value, __rt, helpers};
/// let _budget = __rt::Budget::enter();
/// // Each call builds 4,194,304 items, and the budget covers only a few of them.
/// let mut calls = 0;
/// let err = loop {
///     match helpers::set(&[helpers::range(&[Value::Int(1 << 22)]).unwrap()]) {
///         Ok(_) => calls += 1,
///         Err(err) => break err,
///     }
/// };
/// // At least one unit per item: at most MAX_WORK / 2^22 = 8 calls fit.
/// assert!((1..=8).contains(&calls), "{calls}");
/// assert!(err.to_string().starts_with("MemoryError: the formula does more than 33554432 units"));
/// ```
#[derive(Debug)]
#[must_use = "the budget only holds while the guard lives"]
pub struct Budget {
    /// What was left when this one was entered (`usize::MAX`: no budget).
    outer: usize,
    /// What this one started with.
    start: usize,
    /// Tied to the thread whose counter it set.
    _not_send: PhantomData<*const ()>,
}

impl Budget {
    /// Starts a budget of [`MAX_WORK`] (or what an enclosing budget has left, if less).
    #[inline]
    pub fn enter() -> Budget {
        let outer = WORK_LEFT.with(Cell::get);
        let start = outer.min(MAX_WORK);
        WORK_LEFT.with(|left| left.set(start));
        Budget {
            outer,
            start,
            _not_send: PhantomData,
        }
    }
}

impl Drop for Budget {
    #[inline]
    fn drop(&mut self) {
        let spent = self.start - WORK_LEFT.with(Cell::get).min(self.start);
        let restored = if self.outer == usize::MAX {
            usize::MAX
        } else {
            self.outer.saturating_sub(spent)
        };
        WORK_LEFT.with(|left| left.set(restored));
    }
}

/// The items of an iterable, one at a time (nothing is copied into a list first).
///
/// ```
/// use tileops::roofline::{Value, __rt};
/// let r = Value::Range { start: 10, stop: 0, step: -4 };
/// let items: Vec<Value> = __rt::iter(&r)?.collect();
/// assert_eq!(items, [Value::Int(10), Value::Int(6), Value::Int(2)]);
/// // A range far beyond any length limit can still be iterated, a step at a time.
/// let huge = Value::Range { start: 0, stop: 1 << 100, step: 1 };
/// assert_eq!(__rt::iter(&huge)?.nth(5), Some(Value::Int(5)));
/// assert_eq!(
///     __rt::iter(&Value::Int(3)).unwrap_err().to_string(),
///     "TypeError: 'int' object is not iterable"
/// );
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
pub fn iter(v: &Value) -> EvalResult<Iter<'_>> {
    let inner = match v {
        Value::Tuple(items) | Value::List(items) | Value::Set(items) => Inner::Items(items.iter()),
        Value::Str(s) => Inner::Chars(s.chars()),
        Value::Range { start, stop, step } => Inner::Range {
            start: *start,
            step: *step,
            next: 0,
            len: range_len(*start, *stop, *step)?,
        },
        _ => {
            return Err(EvalError::type_error(format!(
                "'{}' object is not iterable",
                v.type_name()
            )));
        }
    };
    Ok(Iter { inner })
}

/// The iterator of [`iter`]: owned items, in Python's iteration order.
#[derive(Debug, Clone)]
pub struct Iter<'a> {
    inner: Inner<'a>,
}

#[derive(Debug, Clone)]
enum Inner<'a> {
    Items(std::slice::Iter<'a, Value>),
    Chars(std::str::Chars<'a>),
    Range {
        start: i128,
        step: i128,
        next: u128,
        len: u128,
    },
}

impl Iterator for Iter<'_> {
    type Item = Value;

    fn next(&mut self) -> Option<Value> {
        match &mut self.inner {
            Inner::Items(items) => items.next().cloned(),
            Inner::Chars(chars) => chars.next().map(|c| Value::Str(c.to_string())),
            Inner::Range {
                start,
                step,
                next,
                len,
            } => {
                if *next >= *len {
                    return None;
                }
                let item = range_item(*start, *step, *next);
                *next += 1;
                Some(Value::Int(item))
            }
        }
    }

    fn nth(&mut self, n: usize) -> Option<Value> {
        if let Inner::Range { next, len, .. } = &mut self.inner {
            *next = next.saturating_add(n as u128).min(*len);
            return self.next();
        }
        for _ in 0..n {
            self.next()?;
        }
        self.next()
    }
}

/// How many units an item costs to keep: itself, every item nested in it, and a long str by
/// its size in values. Stops counting at `cap` (the caller's limit is then exceeded anyway).
fn weight(v: &Value, cap: usize) -> usize {
    // Scalars, the usual element, without the walk's allocation.
    match v {
        Value::Tuple(items) | Value::List(items) | Value::Set(items) if items.is_empty() => {
            return 1;
        }
        Value::Tuple(_) | Value::List(_) | Value::Set(_) | Value::Str(_) => {}
        _ => return 1,
    }
    let mut total = 1usize;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Tuple(items) | Value::List(items) | Value::Set(items) => {
                total = total.saturating_add(items.len());
                stack.extend(items.iter());
            }
            Value::Str(s) => total = total.saturating_add(s.len() / size_of::<Value>()),
            _ => {}
        }
        if total > cap {
            return total;
        }
    }
    total
}

/// Where a comprehension's elements go: a list or set (a comprehension), or a helper that
/// consumes an iterable item by item (a generator argument: `product(x for x in s)`).
///
/// Lists and sets hold at most [`MAX_ITEMS`] items (a set counts its distinct items), and every
/// item pushed is charged to the work budget with all it holds, so that no comprehension can
/// exhaust memory.
///
/// ```
/// use tileops::roofline::{Value, __rt};
/// let mut acc = __rt::Collect::product();
/// for d in [2, 3, 4] {
///     acc.push(Value::Int(d))?;
/// }
/// assert_eq!(acc.finish()?, Value::Int(24));
/// let mut acc = __rt::Collect::set();
/// for v in [Value::Int(2), Value::Float(2.0), Value::Bool(true)] {
///     acc.push(v)?;
/// }
/// assert_eq!(acc.finish()?.to_string(), "{True, 2}");
/// assert_eq!(
///     __rt::Collect::min().finish().unwrap_err().to_string(),
///     "ValueError: min() iterable argument is empty"
/// );
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[derive(Debug)]
pub struct Collect {
    into: Sink,
}

#[derive(Debug)]
enum Sink {
    List(Vec<Value>),
    Tuple(Vec<Value>),
    Set(Vec<Value>),
    Product(Value),
    Sum(SumAcc),
    Min(Option<Value>),
    Max(Option<Value>),
}

impl Collect {
    /// A list comprehension, `list(x for x in s)`, or a generator used as a value (which is
    /// built as a list).
    pub fn list() -> Collect {
        Collect {
            into: Sink::List(Vec::new()),
        }
    }

    /// `tuple(x for x in s)`.
    pub fn tuple() -> Collect {
        Collect {
            into: Sink::Tuple(Vec::new()),
        }
    }

    /// A set comprehension, or `set(x for x in s)`.
    pub fn set() -> Collect {
        Collect {
            into: Sink::Set(Vec::new()),
        }
    }

    /// `product(x for x in s)`: starts from the int 1, like `math.prod`.
    pub fn product() -> Collect {
        Collect {
            into: Sink::Product(Value::Int(1)),
        }
    }

    /// `sum(x for x in s)`, with the same exact float summation as [`helpers::sum`](super::helpers::sum).
    pub fn sum() -> Collect {
        Collect {
            into: Sink::Sum(SumAcc::new(Value::Int(0))),
        }
    }

    /// `min(x for x in s)`: the first smallest item.
    pub fn min() -> Collect {
        Collect {
            into: Sink::Min(None),
        }
    }

    /// `max(x for x in s)`: the first largest item.
    pub fn max() -> Collect {
        Collect {
            into: Sink::Max(None),
        }
    }

    /// Adds one element.
    pub fn push(&mut self, item: Value) -> EvalResult<()> {
        match &mut self.into {
            Sink::List(items) | Sink::Tuple(items) => {
                if items.len() == MAX_ITEMS {
                    return Err(too_many());
                }
                charge(weight(&item, MAX_ITEMS))?;
                items.push(item);
            }
            Sink::Set(items) => {
                // Python checks hashability as each item goes in.
                check_hashable(&item)?;
                if items.len() == MAX_ITEMS {
                    // Only the distinct items count: drop the duplicates, then look again.
                    let Value::Set(distinct) = make_set(std::mem::take(items))? else {
                        return Err(too_many());
                    };
                    *items = distinct;
                    if items.len() == MAX_ITEMS {
                        return Err(too_many());
                    }
                }
                charge(weight(&item, MAX_ITEMS))?;
                items.push(item);
            }
            Sink::Product(acc) => *acc = mul(acc, &item)?,
            Sink::Sum(acc) => acc.push(item)?,
            Sink::Min(best) => keep_first(best, item, CmpOp::Lt)?,
            Sink::Max(best) => keep_first(best, item, CmpOp::Gt)?,
        }
        Ok(())
    }

    /// The result: the list, tuple or set, or the helper's value.
    pub fn finish(self) -> EvalResult {
        match self.into {
            Sink::List(items) => Ok(Value::List(items)),
            Sink::Tuple(items) => Ok(Value::Tuple(items)),
            Sink::Set(items) => make_set(items),
            Sink::Product(acc) => Ok(acc),
            Sink::Sum(acc) => Ok(acc.finish()),
            Sink::Min(best) => best.ok_or_else(|| empty("min")),
            Sink::Max(best) => best.ok_or_else(|| empty("max")),
        }
    }
}

pub(crate) fn too_many() -> EvalError {
    EvalError::memory_error(format!(
        "a comprehension of more than {MAX_ITEMS} items exceeds the tileops formula limit of \
         {MAX_ITEMS}"
    ))
}

fn empty(name: &str) -> EvalError {
    EvalError::value_error(format!("{name}() iterable argument is empty"))
}

/// CPython's `min`/`max`: replace the best item when `item OP best` (ties keep the first).
fn keep_first(best: &mut Option<Value>, item: Value, op: CmpOp) -> EvalResult<()> {
    match best {
        None => *best = Some(item),
        Some(b) => {
            if compare(op, &item, b)? {
                *b = item;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
