//! The roofline of one op call, and the small Python-semantics runtime its formulas run on.
//!
//! `#[roofline_op]` turns each manifest formula into plain Rust that calls this module: values
//! are [`Value`]s (Python's int, float, bool, None, str, tuple, list, set, range), operators are
//! the functions of `__rt`, and builtins are the [`helpers`]. Every step returns
//! `Result<_, `[`EvalError`]`>`, so a formula that Python would reject (a division by zero, an
//! index out of range) becomes an error value, never a panic. The generated `eval_roofline`
//! wraps such an error with [`RooflineError::evaluation`], naming the op, the field and the
//! formula.
//!
//! What generated code for `flops: "2 * M * N // 3"` with `vars: {M: "x.shape[0]"}` amounts to:
//!
//! ```
//! use tileops::roofline::{Roofline, RooflineError, Value, __rt};
//! use tileops::{DType, TensorSpec};
//!
//! fn eval(x: &TensorSpec, n: usize) -> Result<Roofline, RooflineError> {
//!     let wrap = |field, formula| move |err| RooflineError::evaluation("my_op", field, formula, err);
//!     let m = __rt::subscript(&__rt::input(x).shape("x").map_err(wrap("vars.M", "x.shape[0]"))?, &Value::Int(0))
//!         .map_err(wrap("vars.M", "x.shape[0]"))?;
//!     let n = __rt::param(&n);
//!     let flops = (|| {
//!         let v = __rt::mul(&__rt::mul(&Value::Int(2), &m)?, &n)?;
//!         __rt::to_count(&__rt::floordiv(&v, &Value::Int(3))?)
//!     })()
//!     .map_err(wrap("flops", "2 * M * N // 3"))?;
//!     Ok(Roofline { flops, bytes: 0 })
//! }
//!
//! let x = TensorSpec::new([30, 4], DType::Float32);
//! assert_eq!(eval(&x, 5)?, Roofline { flops: 100, bytes: 0 });
//!
//! let empty = TensorSpec::new([], DType::Float32);
//! let err = eval(&empty, 5).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "my_op: evaluating `vars.M` = `x.shape[0]` failed: IndexError: tuple index out of range"
//! );
//! # Ok::<(), RooflineError>(())
//! ```

mod error;
pub mod helpers;
mod input;
mod ops;
mod stream;
mod typed;
mod value;

pub use error::{EvalError, EvalResult};
pub use input::{InputRef, RooflineInput};
pub use ops::{CmpOp, MAX_ITEMS};
pub use stream::MAX_WORK;
pub use value::{PyType, Value};

/// The functions generated `eval_roofline` bodies call; see `CONTRACT.md`. Not a stable API.
#[doc(hidden)]
pub mod __rt {
    pub use super::error::{EvalError, EvalResult};
    pub use super::input::{InputRef, RooflineInput, input};
    pub use super::ops::{
        CmpOp, add, compare, floordiv, iterate, make_set, modulo, mul, neg, not, param, pos, pow,
        slice, sub, subscript, to_count, truediv, truthy, unpack,
    };
    pub use super::stream::{Budget, Collect, Invariant, Iter, iter, step};
    pub use super::typed::{
        Dims, INLINE_INTS, IntCollect, IntItems, IntParam, IntSet, IntSetOf, Ints, ParamKind,
        RangeSet, empty_fold, extent, int_abs, int_add, int_floordiv, int_item, int_max, int_min,
        int_mod, int_mul, int_neg, int_param, int_set, int_sub, is_instance, is_none, len_int,
        param_kind, param_value, range_ints, range_set, to_count_int, work,
    };
    pub use super::value::{PyType, Value};
}

/// The FLOPs and bytes of one call of an op.
///
/// ```
/// use tileops::Roofline;
/// let r = Roofline { flops: 4096, bytes: 1024 };
/// assert_eq!(r.arithmetic_intensity(), 4.0);
/// assert_eq!(Roofline::new(0, 0).arithmetic_intensity(), 0.0);
/// assert_eq!(Roofline::new(1, 0).arithmetic_intensity(), f64::INFINITY);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Roofline {
    /// Floating-point operations of one call (the counting conventions of tileops/docs/formula-language.md).
    pub flops: u64,
    /// Minimum bytes moved by one call: each input read once, each output written once.
    pub bytes: u64,
}

impl Roofline {
    /// A roofline of `flops` FLOPs and `bytes` bytes.
    pub const fn new(flops: u64, bytes: u64) -> Self {
        Roofline { flops, bytes }
    }

    /// FLOPs per byte. A call that moves no bytes has infinite intensity, or 0 if it also does
    /// no work (so an empty call sorts with the memory-bound ops rather than producing NaN).
    pub fn arithmetic_intensity(&self) -> f64 {
        if self.bytes == 0 {
            return if self.flops == 0 { 0.0 } else { f64::INFINITY };
        }
        self.flops as f64 / self.bytes as f64
    }
}

impl std::fmt::Display for Roofline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} FLOPs, {} bytes", self.flops, self.bytes)
    }
}

/// Why an op's roofline could not be computed.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
pub enum RooflineError {
    /// A manifest formula failed, as Python would fail on it.
    #[error("{op}: evaluating `{field}` = `{formula}` failed: {message}")]
    Evaluation {
        /// The op's manifest name (`softmax`).
        op: &'static str,
        /// The formula's place: `vars.M`, `flops` or `bytes`.
        field: &'static str,
        /// The formula text as written in the manifest.
        formula: &'static str,
        /// The Python-style error (`ZeroDivisionError: division by zero`).
        message: String,
    },
    /// A fixed-rank dim that two places of the signature give different extents: two inputs
    /// (`a: [M, K]` and `b: [K, N]` with different K), or one shape naming it twice (`[N, N]`).
    #[error(
        "{op}: dim `{dim}` is {first_extent} in `{first}.shape[{first_axis}]` but {second_extent} in `{second}.shape[{second_axis}]`"
    )]
    DimMismatch {
        /// The op's manifest name.
        op: &'static str,
        /// The dim, as the manifest names it.
        dim: &'static str,
        /// The input whose extent was taken first (the first that declares the dim).
        first: &'static str,
        /// The dim's axis in `first`'s shape.
        first_axis: usize,
        /// Its extent there.
        first_extent: u64,
        /// The input that disagrees.
        second: &'static str,
        /// The dim's axis in `second`'s shape.
        second_axis: usize,
        /// Its extent there.
        second_extent: u64,
    },
    /// A fixed-rank dim named like a param (TileOPs's `a: [numel, k]` beside a param `k`): the
    /// formulas read the param, and an input's extent for the dim differs from it.
    #[error(
        "{op}: dim `{dim}` is {extent} in `{input}.shape[{axis}]` but the param `{dim}` is {param}; the formulas read `{dim}` as the param, so the shape must agree with it"
    )]
    DimParamMismatch {
        /// The op's manifest name.
        op: &'static str,
        /// The dim, and the param of the same name.
        dim: &'static str,
        /// The input whose shape disagrees.
        input: &'static str,
        /// The dim's axis in `input`'s shape.
        axis: usize,
        /// Its extent there.
        extent: u64,
        /// The param's value.
        param: i128,
    },
    /// A hand-written roofline function (`func:` in the manifest) refused its input.
    #[error("{op}: {message}")]
    Func {
        /// The op's manifest name.
        op: &'static str,
        /// What went wrong and what to do about it.
        message: String,
    },
}

impl RooflineError {
    /// Wraps a formula's evaluation error with the op, the field and the formula text.
    ///
    /// ```
    /// use tileops::roofline::{EvalError, RooflineError};
    /// let err = RooflineError::evaluation(
    ///     "softmax",
    ///     "flops",
    ///     "5 * M * N",
    ///     EvalError::new("ZeroDivisionError: division by zero"),
    /// );
    /// assert_eq!(
    ///     err.to_string(),
    ///     "softmax: evaluating `flops` = `5 * M * N` failed: ZeroDivisionError: division by zero"
    /// );
    /// ```
    pub fn evaluation(
        op: &'static str,
        field: &'static str,
        formula: &'static str,
        err: EvalError,
    ) -> Self {
        RooflineError::Evaluation {
            op,
            field,
            formula,
            message: err.message,
        }
    }

    /// An error from a hand-written roofline function.
    ///
    /// ```
    /// use tileops::RooflineError;
    /// let err = RooflineError::func("attention", "window larger than the sequence");
    /// assert_eq!(err.to_string(), "attention: window larger than the sequence");
    /// ```
    pub fn func(op: &'static str, message: impl Into<String>) -> Self {
        RooflineError::Func {
            op,
            message: message.into(),
        }
    }

    /// The op the error is about.
    pub fn op(&self) -> &'static str {
        match self {
            RooflineError::Evaluation { op, .. }
            | RooflineError::DimMismatch { op, .. }
            | RooflineError::DimParamMismatch { op, .. }
            | RooflineError::Func { op, .. } => op,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_intensity_is_flops_per_byte() {
        let cases = [
            (Roofline::new(10, 4), 2.5),
            (Roofline::new(0, 4), 0.0),
            (Roofline::new(0, 0), 0.0),
            (Roofline::new(3, 0), f64::INFINITY),
            (Roofline::new(u64::MAX, u64::MAX), 1.0),
        ];
        for (roofline, expected) in cases {
            assert_eq!(roofline.arithmetic_intensity(), expected, "{roofline}");
        }
        assert_eq!(Roofline::default(), Roofline::new(0, 0));
        assert_eq!(Roofline::new(1, 2).to_string(), "1 FLOPs, 2 bytes");
    }

    #[test]
    fn errors_name_the_op_field_and_formula() {
        let err = RooflineError::evaluation(
            "softmax",
            "vars.M",
            "x.shape[0]",
            EvalError::new("IndexError: tuple index out of range"),
        );
        assert_eq!(
            err.to_string(),
            "softmax: evaluating `vars.M` = `x.shape[0]` failed: IndexError: tuple index out of range"
        );
        assert_eq!(err.op(), "softmax");
        let RooflineError::Evaluation { field, formula, .. } = &err else {
            panic!("not an evaluation error: {err:?}");
        };
        assert_eq!((*field, *formula), ("vars.M", "x.shape[0]"));

        let err = RooflineError::func("attention", String::from("bad window"));
        assert_eq!(err.to_string(), "attention: bad window");
        assert_eq!(err.op(), "attention");
    }

    #[test]
    fn roofline_is_a_plain_value() {
        use std::collections::HashSet;
        let a = Roofline::new(1, 2);
        let b = a;
        assert_eq!(a, b);
        let set: HashSet<Roofline> = [a, b].into_iter().collect();
        assert_eq!(set.len(), 1);
    }
}
