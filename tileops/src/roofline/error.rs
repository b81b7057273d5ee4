//! The error of one formula step, worded like the Python exception it stands for.

use std::fmt::Display;

use super::value::Value;

/// The result of evaluating one formula step.
pub type EvalResult<T = Value> = Result<T, EvalError>;

/// A formula evaluation error, worded like the Python exception the same expression would raise.
///
/// The message starts with the Python exception name, so a formula that fails here reads as it
/// would fail in the Python TileOPs project.
///
/// ```
/// use tileops::roofline::{EvalError, Value, __rt};
/// let err = __rt::floordiv(&Value::Int(1), &Value::Int(0)).unwrap_err();
/// assert_eq!(err.to_string(), "ZeroDivisionError: integer division or modulo by zero");
/// assert_eq!(EvalError::new("ValueError: x").message, "ValueError: x");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{message}")]
pub struct EvalError {
    /// The whole message, exception name first (`ZeroDivisionError: division by zero`).
    pub message: String,
}

impl EvalError {
    /// An error with the given message, used verbatim.
    pub fn new(message: impl Into<String>) -> Self {
        EvalError {
            message: message.into(),
        }
    }

    pub(crate) fn type_error(message: impl Display) -> Self {
        EvalError::new(format!("TypeError: {message}"))
    }

    pub(crate) fn value_error(message: impl Display) -> Self {
        EvalError::new(format!("ValueError: {message}"))
    }

    pub(crate) fn zero_division(message: impl Display) -> Self {
        EvalError::new(format!("ZeroDivisionError: {message}"))
    }

    pub(crate) fn index_error(message: impl Display) -> Self {
        EvalError::new(format!("IndexError: {message}"))
    }

    pub(crate) fn overflow_error(message: impl Display) -> Self {
        EvalError::new(format!("OverflowError: {message}"))
    }

    pub(crate) fn attribute_error(message: impl Display) -> Self {
        EvalError::new(format!("AttributeError: {message}"))
    }

    pub(crate) fn memory_error(message: impl Display) -> Self {
        EvalError::new(format!("MemoryError: {message}"))
    }

    /// Python's ints are unbounded; ours stop at 128 bits, and say so instead of wrapping.
    pub(crate) fn int_overflow() -> Self {
        EvalError::overflow_error("integer overflow (tileops integers are 128-bit)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_message() {
        let cases = [
            (EvalError::new("X: y"), "X: y"),
            (EvalError::type_error("bad"), "TypeError: bad"),
            (EvalError::value_error("bad"), "ValueError: bad"),
            (
                EvalError::zero_division("division by zero"),
                "ZeroDivisionError: division by zero",
            ),
            (
                EvalError::index_error("tuple index out of range"),
                "IndexError: tuple index out of range",
            ),
            (EvalError::attribute_error("a"), "AttributeError: a"),
            (EvalError::memory_error("m"), "MemoryError: m"),
            (
                EvalError::int_overflow(),
                "OverflowError: integer overflow (tileops integers are 128-bit)",
            ),
        ];
        for (err, expected) in cases {
            assert_eq!(err.to_string(), expected);
            assert_eq!(err.message, expected);
        }
    }
}
