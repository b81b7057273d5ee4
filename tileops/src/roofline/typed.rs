//! Machine-typed counterparts of the runtime's operators, for the parts of a formula whose types
//! the macro knows at compile time.
//!
//! A shape dim, `elem_bytes`, `x.ndim` and an integer param are Python ints; `x.shape` is a tuple
//! of them. Where a formula computes only with such values, the generated code works on `i128`s
//! and on [`Dims`] (a borrowed view of a shape) instead of [`Value`]s: no enum dispatch, no heap
//! allocation. Each function here gives exactly the result or the error its [`Value`] counterpart
//! gives for the same ints (the runtime's own functions share its code), so which path a formula
//! takes is invisible except in its speed.
//!
//! ```
//! use tileops::roofline::__rt;
//! use tileops::{DType, TensorSpec};
//!
//! let x = TensorSpec::new([32, 32, 4096], DType::BFloat16);
//! let shape = __rt::input(&x).dims("x")?;
//! // product(x.shape[:dim % x.ndim]) with dim = -1
//! let axis = __rt::int_mod(-1, shape.len())?;
//! assert_eq!(shape.slice(None, Some(axis), None)?.product()?, 1024);
//! assert_eq!(__rt::int_floordiv(-7, 2)?, -4);
//! assert_eq!(
//!     __rt::int_mul(i128::MAX, 2).unwrap_err().to_string(),
//!     "OverflowError: integer overflow (tileops integers are 128-bit)"
//! );
//! # Ok::<(), tileops::roofline::EvalError>(())
//! ```

use std::any::Any;
use std::borrow::Cow;

use super::error::{EvalError, EvalResult};
use super::ops::MAX_ITEMS;
use super::ops::{
    check_len, floordiv_int, mod_int, normalize_index, slice_bound, slice_indices, ssize_index,
};
use super::stream::{charge, too_many};
use super::value::{PyType, Value, int_from_usize, range_item, range_len};

/// `a + b` on ints.
#[inline]
pub fn int_add(a: i128, b: i128) -> EvalResult<i128> {
    a.checked_add(b).ok_or_else(EvalError::int_overflow)
}

/// `a - b` on ints.
#[inline]
pub fn int_sub(a: i128, b: i128) -> EvalResult<i128> {
    a.checked_sub(b).ok_or_else(EvalError::int_overflow)
}

/// `a * b` on ints.
#[inline]
pub fn int_mul(a: i128, b: i128) -> EvalResult<i128> {
    // Two 64-bit operands cannot overflow 128 bits: one hardware multiply instead of the
    // overflow-checked 128-bit library call.
    if let (Ok(x), Ok(y)) = (i64::try_from(a), i64::try_from(b)) {
        return Ok(i128::from(x) * i128::from(y));
    }
    a.checked_mul(b).ok_or_else(EvalError::int_overflow)
}

/// `a // b` on ints (flooring).
#[inline]
pub fn int_floordiv(a: i128, b: i128) -> EvalResult<i128> {
    floordiv_int(a, b)
}

/// `a % b` on ints (the sign of the divisor).
#[inline]
pub fn int_mod(a: i128, b: i128) -> EvalResult<i128> {
    mod_int(a, b)
}

/// `-a` on an int.
#[inline]
pub fn int_neg(a: i128) -> EvalResult<i128> {
    a.checked_neg().ok_or_else(EvalError::int_overflow)
}

/// `abs(a)` on an int.
#[inline]
pub fn int_abs(a: i128) -> EvalResult<i128> {
    if a < 0 { int_neg(a) } else { Ok(a) }
}

/// `min(a, b, ...)` of two or more ints (the caller passes at least one).
#[inline]
pub fn int_min(items: &[i128]) -> i128 {
    items.iter().copied().reduce(i128::min).unwrap_or_default()
}

/// `max(a, b, ...)` of two or more ints (the caller passes at least one).
#[inline]
pub fn int_max(items: &[i128]) -> i128 {
    items.iter().copied().reduce(i128::max).unwrap_or_default()
}

/// `len(value)` as an int, for a value of a type the macro does not know.
#[inline]
pub fn len_int(value: &Value) -> EvalResult<i128> {
    super::helpers::len_int(value)
}

/// `isinstance(value, types)` where the types are builtin names written in the formula
/// (`isinstance(dim, (list, tuple))`): checked in order, as CPython does.
#[inline]
pub fn is_instance(value: &Value, types: &[PyType]) -> bool {
    types.iter().any(|t| t.is_instance(value))
}

/// `value is None`.
#[inline]
pub fn is_none(value: &Value) -> bool {
    matches!(value, Value::None)
}

/// The int of a `range`'s item (a comprehension variable over a range of ints).
#[inline]
pub fn int_item(item: &Value) -> EvalResult<i128> {
    match *item {
        Value::Int(i) => Ok(i),
        // A range's items are always ints; anything else is a caller's mistake, reported rather
        // than guessed at.
        _ => Err(EvalError::type_error(format!(
            "expected an int item, got {}",
            item.type_name()
        ))),
    }
}

/// `min()`'s (`max()`'s) error for a generator with no item, as `Collect::min` words it.
#[cold]
pub fn empty_fold(helper: &str) -> EvalError {
    EvalError::value_error(format!("{helper}() iterable argument is empty"))
}

/// `to_count` of an int: a count in range is returned at once; any other gives `to_count`'s
/// error for the same int.
#[inline]
pub fn to_count_int(i: i128) -> EvalResult<u64> {
    match u64::try_from(i) {
        Ok(n) => Ok(n),
        Err(_) => super::ops::to_count(&Value::Int(i)),
    }
}

/// A shape extent (a `usize`) as a formula int.
#[inline]
pub fn extent(n: usize) -> i128 {
    int_from_usize(n)
}

/// A param field as a formula value, lent when it already is one: a field of type [`Value`]
/// with no set in it (what [`param`](super::ops::param) would give unchanged) is borrowed, not
/// cloned, so a list param costs no allocation per call; any other field is converted as
/// `param` converts it.
#[inline]
pub fn param_value<T: Clone + Into<Value> + 'static>(field: &T) -> Cow<'_, Value> {
    match (field as &dyn Any).downcast_ref::<Value>() {
        Some(value) if !holds_a_set(value) => Cow::Borrowed(value),
        _ => Cow::Owned(super::ops::param(field)),
    }
}

/// Whether a set is in `value` (a set is put in set order when it becomes a param).
fn holds_a_set(value: &Value) -> bool {
    match value {
        Value::Set(_) => true,
        Value::Tuple(items) | Value::List(items) => items.iter().any(holds_a_set),
        _ => false,
    }
}

/// A struct field of a primitive integer type, read as a formula int (the value
/// [`param`](super::ops::param) would give as a `Value::Int`).
pub trait IntParam {
    /// The field's value as an `i128`.
    fn to_int(&self) -> i128;
}

macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl IntParam for $t {
            #[inline]
            fn to_int(&self) -> i128 {
                i128::from(*self)
            }
        }
    )*};
}

int_param!(i8, i16, i32, i64, i128, u8, u16, u32, u64);

impl IntParam for usize {
    #[inline]
    fn to_int(&self) -> i128 {
        int_from_usize(*self)
    }
}

impl IntParam for isize {
    #[inline]
    fn to_int(&self) -> i128 {
        // isize is at most 64 bits on every target Rust supports.
        i128::try_from(*self).unwrap_or_default()
    }
}

/// An integer param field as a formula int.
#[inline]
pub fn int_param<T: IntParam + ?Sized>(field: &T) -> i128 {
    field.to_int()
}

/// What a param field of type [`Value`] holds, for the typed versions of a formula: generated
/// code matches on it once per call and runs the version compiled for that kind (an int param
/// computes on an `i128`, a `None` one folds its `is None` tests away), or the general one.
///
/// ```
/// use tileops::roofline::{Value, __rt};
/// assert!(matches!(__rt::param_kind(&Value::Int(-1)), __rt::ParamKind::Int(-1)));
/// assert!(matches!(__rt::param_kind(&Value::None), __rt::ParamKind::None));
/// // `True` is an int in Python, but not the int version's: it takes the general one.
/// assert!(matches!(__rt::param_kind(&Value::Bool(true)), __rt::ParamKind::Bool(true)));
/// assert!(matches!(__rt::param_kind(&Value::Float(1.0)), __rt::ParamKind::Other));
/// let dims = Value::List(vec![Value::Int(0), Value::Int(-1)]);
/// let __rt::ParamKind::IntList(ints) = __rt::param_kind(&dims) else { panic!() };
/// assert_eq!((ints.len(), ints.product()?), (2, 0));
/// // A list with anything but ints in it is the general version's.
/// let mixed = Value::List(vec![Value::Int(0), Value::Bool(true)]);
/// assert!(matches!(__rt::param_kind(&mixed), __rt::ParamKind::Other));
/// // A field of another type than `Value` is always the general version's.
/// assert!(matches!(__rt::param_kind(&3i64), __rt::ParamKind::Other));
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ParamKind<'a> {
    /// A `Value::Int`.
    Int(i128),
    /// A `Value::Bool`.
    Bool(bool),
    /// `Value::None`.
    None,
    /// A `Value::List` of ints only.
    IntList(Ints<'a>),
    /// A `Value::Tuple` of ints only.
    IntTuple(Ints<'a>),
    /// Anything else, or a field that is not a `Value`.
    Other,
}

/// The [`ParamKind`] of a param field.
#[inline]
pub fn param_kind<T: 'static>(field: &T) -> ParamKind<'_> {
    let all_ints = |items: &[Value]| items.iter().all(|v| matches!(v, Value::Int(_)));
    match (field as &dyn Any).downcast_ref::<Value>() {
        Some(Value::Int(i)) => ParamKind::Int(*i),
        Some(Value::Bool(b)) => ParamKind::Bool(*b),
        Some(Value::None) => ParamKind::None,
        Some(Value::List(items)) if all_ints(items) => ParamKind::IntList(Ints { items }),
        Some(Value::Tuple(items)) if all_ints(items) => ParamKind::IntTuple(Ints { items }),
        _ => ParamKind::Other,
    }
}

/// A list or tuple param of ints, borrowed ([`param_kind`] made it, so every item is a
/// `Value::Int`): `len`, `product` and iteration without a `Value` in between.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ints<'a> {
    items: &'a [Value],
}

impl<'a> Ints<'a> {
    /// `len(items)`.
    #[allow(clippy::len_without_is_empty)] // `is_empty` below is the list's truthiness
    #[inline]
    pub fn len(&self) -> i128 {
        int_from_usize(self.items.len())
    }

    /// `not items`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The items, in order.
    #[inline]
    pub fn ints(self) -> impl Iterator<Item = i128> + 'a {
        self.items.iter().map(|v| match v {
            Value::Int(i) => *i,
            // `param_kind` let only ints in.
            _ => 0,
        })
    }

    /// `product(items)`: charged as the helper charges a list, each step a checked multiply.
    #[inline]
    pub fn product(&self) -> EvalResult<i128> {
        charge(self.items.len())?;
        self.ints().try_fold(1, int_mul)
    }

    /// The list (`tuple: false`) or tuple itself, for the parts of a formula that need a
    /// [`Value`].
    pub fn to_value(&self, tuple: bool) -> Value {
        let items = self.items.to_vec();
        if tuple {
            Value::Tuple(items)
        } else {
            Value::List(items)
        }
    }
}

/// The `(start, stop, step)` of `range(*args)` for one to three int args.
#[inline]
fn range_parts(args: &[i128]) -> EvalResult<(i128, i128, i128)> {
    let (start, stop, step) = match *args {
        [stop] => (0, stop, 1),
        [start, stop] => (start, stop, 1),
        [start, stop, step] => (start, stop, step),
        // The types pass types one to three args only.
        _ => return Err(EvalError::type_error("range expected 1 to 3 arguments")),
    };
    if step == 0 {
        return Err(EvalError::value_error("range() arg 3 must not be zero"));
    }
    Ok((start, stop, step))
}

/// The items of `range(*args)` as ints, in order, one at a time (a range past any length
/// limit can be iterated a step at a time, as on the runtime).
///
/// ```
/// use tileops::roofline::__rt;
/// assert_eq!(__rt::range_ints(&[10, 0, -4])?.collect::<Vec<_>>(), [10, 6, 2]);
/// assert_eq!(__rt::range_ints(&[1 << 100])?.nth(3), Some(3));
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[inline]
pub fn range_ints(args: &[i128]) -> EvalResult<impl Iterator<Item = i128> + use<>> {
    let (start, stop, step) = range_parts(args)?;
    let len = range_len(start, stop, step)?;
    Ok((0..len).map(move |k| range_item(start, step, k)))
}

/// Charges `units` of work to the running evaluation's budget: what the value runtime charges
/// for a step the typed code takes without it (a scan of a display's `n` items, a set display
/// of `n` items built).
#[inline]
pub fn work(units: usize) -> EvalResult<()> {
    charge(units)
}

/// `set(range(...))` of ints, never built: its items ascending, as the set orders them.
///
/// Making one refuses and charges exactly what building the set does (`MAX_ITEMS`, one unit an
/// item), so a loop over it, or a test of membership in it, costs the same budget and fails the
/// same way as on the value runtime.
///
/// ```
/// use tileops::roofline::__rt;
/// let s = __rt::range_set(&[10, 0, -4])?;
/// assert_eq!(s.ints().collect::<Vec<_>>(), [2, 6, 10]);
/// assert!(s.contains(6) && !s.contains(4));
/// assert_eq!(
///     __rt::range_set(&[0, 5, 0]).unwrap_err().to_string(),
///     "ValueError: range() arg 3 must not be zero"
/// );
/// assert!(__rt::range_set(&[1 << 40]).unwrap_err().to_string().starts_with("MemoryError"));
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeSet {
    start: i128,
    stop: i128,
    step: i128,
    len: usize,
}

/// `set(range(*args))`, for one to three int args (as `range` takes them).
#[inline]
pub fn range_set(args: &[i128]) -> EvalResult<RangeSet> {
    let (start, stop, step) = range_parts(args)?;
    // What `set(range)` does: `iterate` the range (its length refused past MAX_ITEMS, each
    // item charged), and keep the items ascending.
    let len = usize::try_from(range_len(start, stop, step)?).unwrap_or(usize::MAX);
    check_len(len)?;
    Ok(RangeSet {
        start,
        stop,
        step,
        len,
    })
}

impl RangeSet {
    /// The items, ascending (a negative step's range backwards).
    #[inline]
    pub fn ints(self) -> impl Iterator<Item = i128> {
        (0..self.len).map(move |k| self.item(k))
    }

    /// Item `k` (`< len`) in ascending order.
    #[inline]
    fn item(&self, k: usize) -> i128 {
        let index = if self.step > 0 { k } else { self.len - 1 - k };
        range_item(self.start, self.step, index as u128)
    }

    /// `i in set(range(...))`.
    #[inline]
    pub fn contains(&self, i: i128) -> bool {
        // `range_contains` for an int item, without a `Value`; the step is never 0 here.
        let inside = if self.step > 0 {
            self.start <= i && i < self.stop
        } else {
            self.stop < i && i <= self.start
        };
        let size = self.step.unsigned_abs();
        inside && (size == 1 || i.abs_diff(self.start).is_multiple_of(size))
    }
}

/// A set display of `N` ints (`{dim % n}`), never on the heap: its distinct items ascending, as
/// the set orders them. Making one charges the `N` items as `make_set` does.
///
/// ```
/// use tileops::roofline::__rt;
/// let s = __rt::int_set([3, -1, 3])?;
/// assert_eq!(s.ints().collect::<Vec<_>>(), [-1, 3]);
/// assert!(s.contains(3) && !s.contains(0));
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct IntSet<const N: usize> {
    items: [i128; N],
    len: usize,
}

/// The set of the display's items, in the order Python evaluated them.
#[inline]
pub fn int_set<const N: usize>(mut items: [i128; N]) -> EvalResult<IntSet<N>> {
    charge(N)?;
    items.sort_unstable();
    let mut len = 0;
    for k in 0..N {
        if len == 0 || items[len - 1] != items[k] {
            items[len] = items[k];
            len += 1;
        }
    }
    Ok(IntSet { items, len })
}

impl<const N: usize> IntSet<N> {
    /// The distinct items, ascending.
    #[inline]
    pub fn ints(self) -> impl Iterator<Item = i128> {
        let len = self.len;
        self.items.into_iter().take(len)
    }

    /// `i in {...}`.
    #[inline]
    pub fn contains(&self, i: i128) -> bool {
        self.items[..self.len].contains(&i)
    }
}

/// A set of ints the typed code built or will iterate: `set(range(...))`, or the items of a
/// set display or a set comprehension of ints ([`IntCollect`]). Branches of a conditional that
/// give sets of different makings meet in this type.
///
/// ```
/// use tileops::roofline::__rt;
/// let mut acc = __rt::IntCollect::new();
/// for d in [2, -1, 2] {
///     acc.push(d)?;
/// }
/// let set: __rt::IntSetOf = acc.finish()?;
/// assert_eq!(set.ints().collect::<Vec<_>>(), [-1, 2]);
/// let all: __rt::IntSetOf = __rt::range_set(&[3])?.into();
/// assert!(all.contains(2) && !all.contains(3));
/// # Ok::<(), tileops::roofline::EvalError>(())
/// ```
#[derive(Debug, Clone)]
pub enum IntSetOf {
    /// `set(range(...))`, never built.
    Range(RangeSet),
    /// Distinct items, ascending.
    Items(IntItems),
}

impl From<RangeSet> for IntSetOf {
    #[inline]
    fn from(set: RangeSet) -> Self {
        IntSetOf::Range(set)
    }
}

impl<const N: usize> From<IntSet<N>> for IntSetOf {
    #[inline]
    fn from(set: IntSet<N>) -> Self {
        let mut items = IntItems::default();
        for i in set.ints() {
            items.push(i);
        }
        IntSetOf::Items(items)
    }
}

impl IntSetOf {
    /// The items, ascending (the set's order).
    #[inline]
    pub fn ints(self) -> impl Iterator<Item = i128> {
        let mut k = 0usize;
        std::iter::from_fn(move || {
            let item = match &self {
                IntSetOf::Range(r) => (k < r.len).then(|| r.item(k)),
                IntSetOf::Items(items) => items.as_slice().get(k).copied(),
            };
            k += 1;
            item
        })
    }

    /// `i in set`.
    #[inline]
    pub fn contains(&self, i: i128) -> bool {
        match self {
            IntSetOf::Range(r) => r.contains(i),
            IntSetOf::Items(items) => items.as_slice().binary_search(&i).is_ok(),
        }
    }
}

/// Ints kept inline while they are few (sets of axes: a handful), on the heap past that.
#[derive(Debug, Clone)]
pub enum IntItems {
    /// At most [`INLINE_INTS`] items.
    Inline([i128; INLINE_INTS], usize),
    /// More.
    Heap(Vec<i128>),
}

/// How many ints [`IntItems`] keeps without allocating.
pub const INLINE_INTS: usize = 4;

impl Default for IntItems {
    fn default() -> Self {
        IntItems::Inline([0; INLINE_INTS], 0)
    }
}

impl IntItems {
    #[inline]
    fn push(&mut self, i: i128) {
        match self {
            IntItems::Inline(items, len) if *len < INLINE_INTS => {
                items[*len] = i;
                *len += 1;
            }
            IntItems::Inline(items, len) => {
                let mut heap = items[..*len].to_vec();
                heap.push(i);
                *self = IntItems::Heap(heap);
            }
            IntItems::Heap(heap) => heap.push(i),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        match self {
            IntItems::Inline(_, len) => *len,
            IntItems::Heap(heap) => heap.len(),
        }
    }

    #[inline]
    fn as_slice(&self) -> &[i128] {
        match self {
            IntItems::Inline(items, len) => &items[..*len],
            IntItems::Heap(heap) => heap,
        }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [i128] {
        match self {
            IntItems::Inline(items, len) => &mut items[..*len],
            IntItems::Heap(heap) => heap,
        }
    }

    #[inline]
    fn truncate(&mut self, n: usize) {
        match self {
            IntItems::Inline(_, len) => *len = n.min(*len),
            IntItems::Heap(heap) => heap.truncate(n),
        }
    }

    /// Sorts and drops the duplicates.
    #[inline]
    fn make_set(&mut self) {
        let items = self.as_mut_slice();
        items.sort_unstable();
        let mut len = 0;
        for k in 0..items.len() {
            if len == 0 || items[len - 1] != items[k] {
                items[len] = items[k];
                len += 1;
            }
        }
        self.truncate(len);
    }
}

/// A set comprehension of ints (`{d % n for d in dim}`) as the runtime's set collector builds
/// it, with the same length limit and the same charges (each item pushed, then the items again
/// when the set is made), without a `Value` per item or, for a few items, the heap.
#[derive(Debug, Default)]
pub struct IntCollect {
    items: IntItems,
}

impl IntCollect {
    /// An empty set.
    #[inline]
    pub fn new() -> Self {
        IntCollect::default()
    }

    /// Adds one item.
    #[inline]
    pub fn push(&mut self, i: i128) -> EvalResult<()> {
        if self.items.len() == MAX_ITEMS {
            // As `Collect::set`: only the distinct items count; dropping the duplicates is
            // `make_set`, charged as it is.
            charge(self.items.len())?;
            self.items.make_set();
            if self.items.len() == MAX_ITEMS {
                return Err(too_many());
            }
        }
        charge(1)?;
        self.items.push(i);
        Ok(())
    }

    /// The set: `make_set`'s charge, its order.
    #[inline]
    pub fn finish(mut self) -> EvalResult<IntSetOf> {
        charge(self.items.len())?;
        self.items.make_set();
        Ok(IntSetOf::Items(self.items))
    }
}

/// `x.shape`, or a slice of it, without building a tuple: the dims `base[first + k * step]` for
/// `k` in `0..count`.
///
/// Every operation behaves as the same operation on the tuple `Value::from_shape` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dims<'a> {
    base: &'a [usize],
    first: i128,
    step: i128,
    count: usize,
}

impl<'a> Dims<'a> {
    /// A whole shape.
    #[inline]
    pub fn new(shape: &'a [usize]) -> Self {
        Dims {
            base: shape,
            first: 0,
            step: 1,
            count: shape.len(),
        }
    }

    #[inline]
    fn get(&self, k: usize) -> Option<usize> {
        if self.step == 1 {
            // A whole shape or `shape[a:b]`: no 128-bit multiply.
            let at = usize::try_from(self.first).ok()?.checked_add(k)?;
            return self.base.get(at).copied();
        }
        let offset = int_from_usize(k).checked_mul(self.step)?;
        let at = usize::try_from(self.first.checked_add(offset)?).ok()?;
        self.base.get(at).copied()
    }

    /// The dims as a contiguous run of the shape, when they are one (a step of 1: a whole shape
    /// or the usual `shape[a:b]`), so folds over them are plain loops.
    #[inline]
    fn contiguous(&self) -> Option<&'a [usize]> {
        if self.step != 1 {
            return None;
        }
        let first = usize::try_from(self.first).ok()?;
        self.base.get(first..first.checked_add(self.count)?)
    }

    fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.count).filter_map(|k| self.get(k))
    }

    #[inline]
    fn try_fold(&self, init: i128, f: impl Fn(i128, i128) -> EvalResult<i128>) -> EvalResult<i128> {
        match self.contiguous() {
            Some(run) => run
                .iter()
                .try_fold(init, |acc, &d| f(acc, int_from_usize(d))),
            None => self
                .iter()
                .try_fold(init, |acc, d| f(acc, int_from_usize(d))),
        }
    }

    /// The dims as ints, in order: a comprehension over a shape iterates them in place.
    #[inline]
    pub fn ints(self) -> impl Iterator<Item = i128> + 'a {
        (0..self.count).filter_map(move |k| self.get(k).map(int_from_usize))
    }

    /// `len(dims)`.
    #[allow(clippy::len_without_is_empty)] // `is_empty` below is the tuple's truthiness
    #[inline]
    pub fn len(&self) -> i128 {
        int_from_usize(self.count)
    }

    /// `not dims`: a tuple is false when it is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// `dims[i]` for an int `i` (negative counts from the end).
    #[inline]
    pub fn index(&self, i: i128) -> EvalResult<i128> {
        let i = ssize_index(i)?;
        normalize_index(i, self.count)
            .and_then(|k| self.get(k))
            .map(int_from_usize)
            .ok_or_else(|| EvalError::index_error("tuple index out of range"))
    }

    /// `dims[index]` for an index of a type the macro does not know (a comprehension variable):
    /// an int or a bool indexes, anything else is the tuple's `TypeError`.
    #[inline]
    pub fn index_value(&self, index: &Value) -> EvalResult {
        self.index_value_int(index).map(Value::Int)
    }

    /// `dims[index]` for an index of a type the macro does not know, as an int (what
    /// [`index_value`](Self::index_value) gives on success).
    #[inline]
    pub fn index_value_int(&self, index: &Value) -> EvalResult<i128> {
        let i = index.as_index().ok_or_else(|| {
            EvalError::type_error(format!(
                "tuple indices must be integers or slices, not {}",
                index.type_name()
            ))
        })?;
        self.index(i)
    }

    /// `dims[lower:upper:step]` with bounds of types the macro does not know: each `None`,
    /// absent, an int or a bool, read (and refused) in the runtime's order, step first.
    #[inline]
    pub fn slice_values(
        &self,
        lower: Option<&Value>,
        upper: Option<&Value>,
        step: Option<&Value>,
    ) -> EvalResult<Dims<'a>> {
        let step = slice_bound(step)?.unwrap_or(1);
        if step == 0 {
            return Err(EvalError::value_error("slice step cannot be zero"));
        }
        let lower = slice_bound(lower)?;
        let upper = slice_bound(upper)?;
        self.slice(lower, upper, Some(step))
    }

    /// `dims[lower:upper:step]` with int (or absent) bounds.
    #[inline]
    pub fn slice(
        &self,
        lower: Option<i128>,
        upper: Option<i128>,
        step: Option<i128>,
    ) -> EvalResult<Dims<'a>> {
        let step = step.unwrap_or(1);
        if step == 0 {
            return Err(EvalError::value_error("slice step cannot be zero"));
        }
        let indices = slice_indices(lower, upper, step, int_from_usize(self.count));
        let count = usize::try_from(indices.count).unwrap_or(0);
        charge(count)?;
        if count == 0 {
            return Ok(Dims {
                base: self.base,
                first: 0,
                step: 1,
                count: 0,
            });
        }
        // The slice's items are items of this view, so their positions in `base` fit; only a
        // single item's step (never used) could overflow.
        let first = indices
            .start
            .checked_mul(self.step)
            .and_then(|o| o.checked_add(self.first))
            .unwrap_or(0);
        let step = if count == 1 {
            1
        } else {
            indices.step.checked_mul(self.step).unwrap_or(1)
        };
        Ok(Dims {
            base: self.base,
            first,
            step,
            count,
        })
    }

    /// `product(dims)`: iterating charges the work budget as `iterate` does.
    #[inline]
    pub fn product(&self) -> EvalResult<i128> {
        charge(self.count)?;
        self.try_fold(1, int_mul)
    }

    /// `sum(dims)`.
    #[inline]
    pub fn sum(&self) -> EvalResult<i128> {
        charge(self.count)?;
        self.try_fold(0, int_add)
    }

    /// The tuple itself, for the parts of a formula that need a [`Value`].
    pub fn to_value(&self) -> Value {
        Value::Tuple(self.iter().map(|d| Value::Int(int_from_usize(d))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::ops;
    use super::*;

    use super::super::helpers;
    use super::super::stream::{Budget, Collect, work_left};

    /// `f`'s result and the work it charged, run under a fresh budget.
    fn charged<T>(f: impl FnOnce() -> T) -> (T, usize) {
        let _budget = Budget::enter();
        let before = work_left();
        let out = f();
        (out, before - work_left())
    }

    #[test]
    fn sets_of_ints_are_the_runtime_sets_with_its_charges_and_errors() {
        let arg_lists: Vec<Vec<i128>> = vec![
            vec![0],
            vec![5],
            vec![-3],
            vec![2, 9],
            vec![9, 2],
            vec![10, 0, -4],
            vec![-1, -10, -3],
            vec![0, 7, 3],
            vec![0, 5, 0],
            vec![1 << 40],
            vec![i128::MIN, i128::MAX, i128::MAX],
            vec![0, (1 << 22) + 1],
        ];
        for args in &arg_lists {
            let values: Vec<Value> = args.iter().map(|a| Value::Int(*a)).collect();
            // `set(range(*args))` on the runtime, and iterating `range(*args)`.
            let (runtime, runtime_work) =
                charged(|| helpers::range(&values).and_then(|r| helpers::set(&[r])));
            let (typed, typed_work) = charged(|| range_set(args));
            assert_eq!(typed_work, runtime_work, "{args:?}");
            match (&typed, &runtime) {
                (Ok(t), Ok(Value::Set(items))) => {
                    let ints: Vec<Value> = t.ints().map(Value::Int).collect();
                    assert_eq!(&ints, items, "{args:?}");
                    for i in [-11, -10, -1, 0, 1, 2, 3, 4, 6, 7, 9, 10, 1 << 40] {
                        let found = ops::compare(
                            ops::CmpOp::In,
                            &Value::Int(i),
                            &Value::Set(items.clone()),
                        );
                        assert_eq!(Ok(t.contains(i)), found, "{i} in {args:?}");
                        assert_eq!(IntSetOf::from(*t).contains(i), t.contains(i));
                    }
                }
                (Err(t), Err(r)) => assert_eq!(t, r, "{args:?}"),
                _ => panic!("{args:?}: typed {typed:?}, runtime {runtime:?}"),
            }
            let range = helpers::range(&values);
            match (range_ints(args), &range) {
                (Ok(t), Ok(r)) => {
                    let runtime: Vec<Value> =
                        super::super::stream::iter(r).unwrap().take(20).collect();
                    let typed: Vec<Value> = t.take(20).map(Value::Int).collect();
                    assert_eq!(typed, runtime, "{args:?}");
                }
                (Err(t), Err(r)) => assert_eq!(&t, r, "{args:?}"),
                (t, r) => panic!("{args:?}: typed {:?}, runtime {r:?}", t.is_ok()),
            }
        }
        // A set display of ints, and a set comprehension's collector, against `make_set` and
        // `Collect::set`: the same distinct items in the same order, the same work charged.
        let lists: [&[i128]; 6] = [
            &[],
            &[3],
            &[2, -1, 2],
            &[0, 0, 0, 0],
            &[9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1],
            &[i128::MAX, i128::MIN, 0],
        ];
        for list in lists {
            let (runtime, runtime_work) = charged(|| {
                let mut acc = Collect::set();
                for i in list {
                    acc.push(Value::Int(*i)).unwrap();
                }
                acc.finish()
            });
            let (typed, typed_work) = charged(|| {
                let mut acc = IntCollect::new();
                for i in list {
                    acc.push(*i).unwrap();
                }
                acc.finish()
            });
            assert_eq!(typed_work, runtime_work, "{list:?}");
            let runtime = runtime.unwrap();
            let typed: Vec<Value> = typed.unwrap().ints().map(Value::Int).collect();
            assert_eq!(Value::Set(typed), runtime, "{list:?}");
            let (runtime, runtime_work) =
                charged(|| ops::make_set(list.iter().map(|i| Value::Int(*i)).collect()));
            if let Ok(display) = <[i128; 4]>::try_from(list) {
                let (typed, typed_work) = charged(|| int_set(display));
                assert_eq!(typed_work, runtime_work, "{list:?}");
                let typed: Vec<Value> = typed.unwrap().ints().map(Value::Int).collect();
                assert_eq!(Ok(Value::Set(typed)), runtime, "{list:?}");
            }
        }
        // A display scan: `work` charges what the runtime's scan of a tuple does.
        let tuple = Value::Tuple(vec![Value::Int(1), Value::Int(2), Value::Int(3)]);
        let (_, runtime_work) = charged(|| ops::compare(ops::CmpOp::In, &Value::Int(2), &tuple));
        let (_, typed_work) = charged(|| work(3));
        assert_eq!(typed_work, runtime_work);
    }

    #[test]
    fn param_kinds_and_counts_follow_the_values() {
        let list = Value::List(vec![Value::Int(4), Value::Int(-2)]);
        let ParamKind::IntList(ints) = param_kind(&list) else {
            panic!("a list of ints");
        };
        assert_eq!(ints.len(), 2);
        assert_eq!(
            ints.product().map(Value::Int),
            helpers::product(std::slice::from_ref(&list))
        );
        assert_eq!(ints.to_value(false), list);
        assert!(matches!(
            param_kind(&Value::Tuple(vec![Value::Int(1)])),
            ParamKind::IntTuple(_)
        ));
        let overflow = Value::Tuple(vec![Value::Int(i128::MAX), Value::Int(2)]);
        let ParamKind::IntTuple(big) = param_kind(&overflow) else {
            panic!("a tuple of ints");
        };
        assert_eq!(
            big.product().map(Value::Int),
            helpers::product(std::slice::from_ref(&overflow))
        );
        for v in [
            Value::List(vec![Value::Int(1), Value::Float(2.0)]),
            Value::Set(vec![Value::Int(1)]),
            Value::Float(1.0),
            Value::Str("int".into()),
        ] {
            assert!(matches!(param_kind(&v), ParamKind::Other), "{v}");
        }
        for i in [
            i128::MIN,
            -1,
            0,
            1,
            i128::from(u64::MAX),
            i128::from(u64::MAX) + 1,
            i128::MAX,
        ] {
            assert_eq!(to_count_int(i), ops::to_count(&Value::Int(i)), "{i}");
        }
    }

    fn shape_value(dims: &[usize]) -> Value {
        Value::from_shape(dims)
    }

    #[test]
    fn int_ops_agree_with_the_value_runtime() {
        let ints = [
            i128::MIN,
            i128::MIN + 1,
            -7,
            -3,
            -1,
            0,
            1,
            2,
            3,
            7,
            i128::MAX - 1,
            i128::MAX,
        ];
        type IntOp = fn(i128, i128) -> EvalResult<i128>;
        type ValueOp = fn(&Value, &Value) -> EvalResult;
        let pairs: [(IntOp, ValueOp); 5] = [
            (int_add, ops::add),
            (int_sub, ops::sub),
            (int_mul, ops::mul),
            (int_floordiv, ops::floordiv),
            (int_mod, ops::modulo),
        ];
        for a in ints {
            assert_eq!(int_neg(a).map(Value::Int), ops::neg(&Value::Int(a)));
            assert_eq!(
                int_abs(a).map(Value::Int),
                super::super::helpers::abs(&[Value::Int(a)])
            );
            for b in ints {
                for (typed, value) in pairs {
                    assert_eq!(
                        typed(a, b).map(Value::Int),
                        value(&Value::Int(a), &Value::Int(b)),
                        "{a} {b}"
                    );
                }
            }
        }
        let values = [
            Value::None,
            Value::Bool(true),
            Value::Int(3),
            Value::Float(1.5),
            Value::Str("ab".into()),
            Value::List(vec![Value::Int(1)]),
            Value::Tuple(vec![]),
            Value::Range {
                start: 0,
                stop: 1 << 100,
                step: 1,
            },
        ];
        let types = [PyType::Int, PyType::List, PyType::Tuple, PyType::Bool];
        for v in &values {
            assert_eq!(
                len_int(v).map(Value::Int),
                super::super::helpers::len(std::slice::from_ref(v))
            );
            assert_eq!(
                Value::Bool(is_none(v)),
                Value::Bool(ops::compare(ops::CmpOp::Is, v, &Value::None).unwrap())
            );
            let classes = Value::Tuple(types.iter().map(|t| Value::Type(*t)).collect());
            assert_eq!(
                Ok(Value::Bool(is_instance(v, &types))),
                super::super::helpers::isinstance(&[v.clone(), classes])
            );
        }
        assert_eq!(int_item(&Value::Int(-4)), Ok(-4));
        assert!(int_item(&Value::None).is_err());
        assert_eq!(int_min(&[3, -2, 5]), -2);
        assert_eq!(int_max(&[3, -2, 5]), 5);
    }

    #[test]
    fn dims_agree_with_the_tuple() {
        let shapes: [&[usize]; 4] = [&[], &[7], &[2, 3, 5, 7, 11], &[usize::MAX, usize::MAX, 4]];
        let bounds = [
            None,
            Some(i128::MIN),
            Some(-6),
            Some(-2),
            Some(-1),
            Some(0),
            Some(1),
            Some(2),
            Some(5),
            Some(i128::MAX),
        ];
        let opt = |b: Option<i128>| b.map(Value::Int);
        for shape in shapes {
            let dims = Dims::new(shape);
            let tuple = shape_value(shape);
            assert_eq!(dims.to_value(), tuple);
            for i in bounds.iter().flatten() {
                assert_eq!(
                    dims.index(*i).map(Value::Int),
                    ops::subscript(&tuple, &Value::Int(*i))
                );
            }
            assert_eq!(
                dims.index_value(&Value::Bool(true)),
                ops::subscript(&tuple, &Value::Bool(true))
            );
            assert_eq!(
                dims.index_value(&Value::Float(1.0)),
                ops::subscript(&tuple, &Value::Float(1.0))
            );
            // Bounds the runtime refuses, in its order: the step first.
            for (l, u, st) in [
                (Value::Float(1.0), Value::None, Value::Int(0)),
                (Value::Float(1.0), Value::Str("a".into()), Value::Int(1)),
                (Value::Bool(true), Value::None, Value::Bool(true)),
                (Value::None, Value::List(vec![]), Value::None),
            ] {
                assert_eq!(
                    dims.slice_values(Some(&l), Some(&u), Some(&st))
                        .map(|d| d.to_value()),
                    ops::slice(&tuple, Some(&l), Some(&u), Some(&st))
                );
            }
            for lower in bounds {
                for upper in bounds {
                    for step in [None, Some(0), Some(1), Some(2), Some(-1), Some(-3)] {
                        let typed = dims.slice(lower, upper, step);
                        assert_eq!(
                            dims.slice_values(
                                opt(lower).as_ref(),
                                opt(upper).as_ref(),
                                opt(step).as_ref()
                            ),
                            typed
                        );
                        let value = ops::slice(
                            &tuple,
                            opt(lower).as_ref(),
                            opt(upper).as_ref(),
                            opt(step).as_ref(),
                        );
                        let Ok(view) = typed else {
                            assert_eq!(typed.map(|d| d.to_value()), value);
                            continue;
                        };
                        let Ok(sliced) = value else {
                            panic!("{shape:?}[{lower:?}:{upper:?}:{step:?}]: {value:?}");
                        };
                        assert_eq!(view.to_value(), sliced);
                        assert_eq!(
                            Value::Int(view.len()),
                            super::super::helpers::len(std::slice::from_ref(&sliced)).unwrap()
                        );
                        assert_eq!(view.is_empty(), !ops::truthy(&sliced).unwrap());
                        assert_eq!(
                            view.product().map(Value::Int),
                            super::super::helpers::product(std::slice::from_ref(&sliced))
                        );
                        assert_eq!(
                            view.sum().map(Value::Int),
                            super::super::helpers::sum(std::slice::from_ref(&sliced))
                        );
                        // A slice of a slice.
                        for (l, u, s) in [(Some(1), None, None), (None, Some(-1), Some(-1))] {
                            assert_eq!(
                                view.slice(l, u, s).map(|d| d.to_value()),
                                ops::slice(
                                    &sliced,
                                    opt(l).as_ref(),
                                    opt(u).as_ref(),
                                    opt(s).as_ref()
                                )
                            );
                        }
                        assert_eq!(Value::Tuple(view.ints().map(Value::Int).collect()), sliced);
                        for i in [-2, 0, 1] {
                            assert_eq!(
                                view.index(i).map(Value::Int),
                                ops::subscript(&sliced, &Value::Int(i))
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn value_params_are_lent_unless_a_set_needs_ordering() {
        let list = Value::List(vec![Value::Int(0), Value::Int(2)]);
        assert!(matches!(param_value(&list), Cow::Borrowed(_)));
        assert_eq!(*param_value(&list), ops::param(&list));
        let set = Value::List(vec![Value::Set(vec![Value::Int(3), Value::Int(1)])]);
        assert!(matches!(param_value(&set), Cow::Owned(_)));
        assert_eq!(*param_value(&set), ops::param(&set));
        assert_eq!(*param_value(&5i64), Value::Int(5));
        assert_eq!(*param_value(&Some(1.5f64)), Value::Float(1.5));
    }

    #[test]
    fn int_params_read_as_the_value_runtime_reads_them() {
        assert_eq!(int_param(&-3i64), -3);
        assert_eq!(int_param(&u64::MAX), i128::from(u64::MAX));
        assert_eq!(int_param(&usize::MAX), extent(usize::MAX));
        assert_eq!(int_param(&-5isize), -5);
        assert_eq!(Value::Int(int_param(&7u8)), super::super::ops::param(&7u8));
    }
}
